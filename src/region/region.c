/*
 * zs_region: anonymous memory whose cold pages live compressed in a libzs
 * zram store, paged back in on touch through userfaultfd.  This layer owns
 * the per-page state machine, the fault handlers, pageout/release, the
 * automatic reclaim and what happens when the application itself changes
 * the range (madvise, munmap, mremap); the store (src/zram) is used only
 * through its public API, so any backend and compressor work.  This file
 * holds create/destroy, config, stats and the range API (release, advise);
 * events.c how owned pages are finished, the library's own zaps and the
 * application's events; fault.c the handler threads and fault-around,
 * reclaim.c pageout and the CLOCK reclaimer, internal.h the shared region
 * struct and page-state helpers.
 *
 * Per-page state (one atomic byte per page, internal.h) says what the page
 * table holds, because only this layer and the events it is told about
 * change either:
 *
 *   NONE   no page mapped, nothing stored (never written, released, dropped)
 *   RES    a page is mapped (installed by a fault, or the zero page); the
 *          application may have zapped it since (MADV_DONTNEED): a missing
 *          fault on a RES page is answered with zeros
 *   STORED no page mapped; contents in store slot <page index>
 *   BAD    the slot could not be read back: the page is poisoned (SIGBUS)
 *   GONE   unmapped by the application: no longer the region's
 *   MOVED  moved away by mremap while stored: the slot serves faults at the
 *          new address, nothing else (fault.c)
 *   OUT, OUTF, OUTZ  pageout owns it (reclaim.c, "pageout protocol")
 *   IN     a fault handler owns it: being decompressed and installed
 *   REL    release (or an event being applied) owns it
 *
 * Transitions claim a page with a compare-and-swap out of a stable state
 * (NONE/RES/STORED/BAD) into an owned one; GONE and MOVED are never claimed
 * by the range API.  A fault on an owned page is queued and retried, never
 * waited for (fault.c); pageout and release wait (yielding) for pages a
 * handler owns.
 *
 * The application's events.  The region asks for the remove (MADV_DONTNEED,
 * MADV_REMOVE, MADV_FREE), unmap (munmap, mremap shrink, MAP_FIXED over it)
 * and remap (mremap move) events.  The kernel queues each one and makes the
 * calling thread wait until a handler has read it; a handler applies what it
 * read before any fault read after it is answered (ulock, below):
 *   remove  RES -> NONE, STORED -> slot freed -> NONE, BAD -> NONE: the pages
 *           read zeros, as anonymous memory does.  The kernel zaps after the
 *           event is read, so a fault may still find the old page mapped for
 *           a moment; that is the application's own race.
 *   unmap   the pages become GONE: slots freed, later range calls on them
 *           fail with -EFAULT, zs_region_destroy never unmaps them.
 *   remap   the moved pages become GONE (MOVED while their slot is kept):
 *           resident pages moved with the kernel's page tables; stored ones
 *           are served from their slot when first touched at the new
 *           address.  The moved range is the application's, not the
 *           region's: range calls there get -EINVAL, destroy leaves it.
 * An event that finds a page owned sets a flag on it (F_DROP, F_GONE,
 * F_MOVED) and the owner applies it when it finishes (region_final): what
 * the application asked for wins over the library's own work, except that a
 * page already compressed when its remove arrives simply has its slot freed.
 * The library's own MADV_DONTNEED (release, and pageout where it cannot move
 * pages out: reclaim.c) raises the same remove event; region_self_zap
 * records the range first, remove events over it are
 * only counted per page while it is in flight, and when it completes a page
 * counted twice was dropped by the application as well (region_self_zap;
 * pageout zaps one page a call so that a munmap splitting the mapping
 * meanwhile cannot make the kernel repeat our own event).
 *
 * Lock order and why the fault path cannot deadlock.  Locks, outermost
 * first:
 *   0. hlock, the CLOCK hand: one reclaim pass at a time, held across it
 *   1. page ownership (OUT/OUTF/OUTZ/IN/REL claims)
 *   2. ulock (region: uffd read + event apply, installs)
 *   3. the store: slot lock bit, then the pool/class locks inside zsmalloc
 * and leaves that are held over no other lock: block (staging buffers),
 * rlock (the reclaimer's kick and sleep), the live-region list.  A
 * -DZS_DEBUG=ON build checks the locks among these (ZS_LOCK_REGION_* in
 * common/debug.h, ranked below the zram store's); the ownership claims are
 * per-page states, not tracked there.
 * No thread waits for a page owner while holding ulock or a store lock, and
 * every application thread that takes ulock (range checks, stats, the
 * library's own zaps) does so with signals blocked.
 * Handlers never wait for page owners at all: a fault on an owned page is
 * queued and retried, while the handler keeps reading messages - so the
 * events an owner's madvise or write-protect ioctl waits on (the kernel
 * fails installs with EAGAIN while an event is unread) are always read.
 * Owners (pageout, release) run on library calls that block every
 * blockable signal for their duration, and library threads (handlers, the
 * reclaimer) are created with every signal blocked: a signal handler that
 * touches region memory never runs on a thread that owns pages or holds a
 * store lock taken by a region call, so the handler's waits (slot lock,
 * pool read lock, class lock in zs_zram_read/discard) are on threads that
 * keep running.  Calls made directly on zs_region_store() are covered the
 * same way: the region turns on zs_zram_block_signals for its store, so
 * every store call that takes allocator locks blocks signals, and the
 * pool's compaction and the deferred-free worker do too
 * (src/common/sigblock.h).  A waiting compactor never starves a fault's
 * read lock: its writer backs off (src/zsmalloc/lock.h).
 */
#include "common/stats_copy.h"
#include "common/config.h"
#include "common/err.h"
#include "internal.h"

static void live_add(struct zs_region *r);

void zs_region_config_init(struct zs_region_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	zs_zram_config_init(&cfg->store);
	cfg->handler_threads = 1;
	cfg->fault_around = 16;
}

/* Only the store's pool profile differs from zs_region_config_init. */
void zs_region_config_init_app(struct zs_region_config *cfg)
{
	zs_region_config_init(cfg);
	zs_zram_config_init_app(&cfg->store);
}

/* ---- opening userfaultfd ---- */

static const char perm_msg[] =
	"userfaultfd not permitted: run as root (CAP_SYS_PTRACE), give this user read/write "
	"access to /dev/userfaultfd, or set sysctl vm.unprivileged_userfaultfd=1 (%s)";

static int open_uffd(char *err, size_t err_len)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int e = errno;

	if (fd >= 0)
		return fd;
	if (e == ENOSYS) {
		set_err(err, err_len, "userfaultfd: not built into this kernel (%s)", strerror(e));
		return -ENOSYS;
	}
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		e = errno;
		close(dev);
		if (fd >= 0)
			return fd;
	} else {
		e = errno;
	}
	set_err(err, err_len, perm_msg, strerror(e));
	return -EPERM;
}

/* Handshake with no features: what does the kernel offer?  (Once per fd.) */
static int uffd_features(int fd, uint64_t *have, char *err, size_t err_len)
{
	struct uffdio_api api = { .api = UFFD_API, .features = 0 };

	if (ioctl(fd, UFFDIO_API, &api)) {
		set_err(err, err_len, "UFFDIO_API failed: %s", strerror(errno));
		return -EOPNOTSUPP;
	}
	*have = api.features;
	return 0;
}

int zs_region_available(char *err, size_t err_len)
{
	int fd = open_uffd(err, err_len);
	uint64_t have = 0;

	if (fd < 0)
		return 0;
	int rc = uffd_features(fd, &have, err, err_len);
	close(fd);
	if (rc)
		return 0;
	if (!(have & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
		set_err(err, err_len, "%s", "userfaultfd lacks write-protect for anonymous memory");
		return 0;
	}
	return 1;
}

/* ---- release ---- */

static int do_release(struct zs_region *r, size_t first, size_t end)
{
	unsigned char was[REL_CHUNK];

	for (size_t c = first; c < end; c += REL_CHUNK) {
		size_t n = end - c < REL_CHUNK ? end - c : REL_CHUNK;
		size_t nres = 0, nst = 0, nbad = 0;
		/* Claim every page, NONE included, so no fault installs one under us. */
		for (size_t i = 0; i < n; i++) {
			for (;;) {
				unsigned char s = st_load(r, c + i), m = s & ST_MASK;
				if (m <= ST_BAD) {
					if (st_cas(r, c + i, s, ST_REL)) {
						was[i] = m;
						break;
					}
					continue;
				}
				if (m == ST_GONE || m == ST_MOVED) {
					was[i] = m;   /* not ours any more: leave it */
					break;
				}
				sched_yield();
			}
		}
		for (size_t i = 0; i < n; i++) {
			if (was[i] == ST_STORED) {
				zs_zram_discard(r->store, c + i);
				nst++;
			}
			nres += was[i] == ST_RES;
			nbad += was[i] == ST_BAD;
		}
		atomic_fetch_sub_explicit(&r->stored, nst, memory_order_relaxed);
		atomic_fetch_sub_explicit(&r->resident, nres, memory_order_relaxed);
		/*
		 * Zap each run of claimed pages that may hold something: a page, a
		 * poison mark, or - once the application has dropped pages with
		 * MADV_FREE, which leaves them mapped until it writes them again - a
		 * NONE page.
		 */
		int none_too = atomic_load_explicit(&r->removed, memory_order_relaxed) != 0;
		for (size_t i = 0; i < n;) {
			if (was[i] != ST_RES && was[i] != ST_BAD && !(none_too && was[i] == ST_NONE)) {
				i++;
				continue;
			}
			size_t j = i;
			while (j < n && (was[j] == ST_RES || was[j] == ST_BAD || was[j] == ST_NONE ||
					 was[j] == ST_STORED))
				j++;
			region_self_zap(r, c + i, j - i, 0);
			i = j;
		}
		for (size_t i = 0; i < n; i++) {
			if (was[i] > ST_BAD)
				continue;
			atomic_store_explicit(&r->ref[c + i], 0, memory_order_relaxed);
			region_finish(r, c + i, ST_NONE, 0, 0);
		}
		atomic_fetch_add_explicit(&r->releases, nres + nst + nbad, memory_order_relaxed);
	}
	return 0;
}

int zs_region_release(struct zs_region *r, void *addr, size_t len)
{
	int rc = region_range_ok(r, addr, len);
	if (rc)
		return rc;
	struct zs_sigguard old;
	signals_block(&old);
	rc = do_release(r, pidx(r, addr), pidx(r, addr) + len / r->page);
	signals_restore(&old);
	return rc;
}

int zs_region_advise(struct zs_region *r, void *addr, size_t len, enum zs_region_advice adv)
{
	int rc = region_range_ok(r, addr, len);
	if (rc)
		return rc;
	size_t p = pidx(r, addr), n = len / r->page;
	switch (adv) {
	case ZS_REGION_COLD:
	case ZS_REGION_HOT:
		for (size_t i = 0; i < n; i++)
			atomic_store_explicit(&r->ref[p + i], adv == ZS_REGION_HOT,
					      memory_order_relaxed);
		return 0;
	case ZS_REGION_PAGEOUT: {
		long k = zs_region_pageout(r, addr, len);
		return k < 0 ? (int)k : 0;
	}
	}
	return -EINVAL;
}

/* ---- create/destroy ---- */

static void teardown(struct zs_region *r)
{
	atomic_store(&r->stop, 1);
	/* The reclaimer first: its pageout zaps need handlers to read their events. */
	if (r->have_reclaimer) {
		mutex_lock_ranked(&r->rlock, ZS_LOCK_REGION_KICK);
		r->rkick = 1;
		pthread_cond_signal(&r->rcond);
		mutex_unlock_ranked(&r->rlock);
		pthread_join(r->rtid, NULL);
	}
	atomic_store(&r->hstop, 1);
	if (r->efd >= 0) {
		uint64_t one = 1;
		if (write(r->efd, &one, sizeof(one)) < 0) {
			/* handlers also check hstop while spinning */
		}
	}
	if (r->h) {
		for (unsigned i = 0; i < r->nhandlers; i++) {
			if (r->h[i].tid)
				pthread_join(r->h[i].tid, NULL);
			if (r->h[i].buf)
				munmap(r->h[i].buf, MAX_AROUND * r->page);
			free(r->h[i].q);
		}
		free(r->h);
	}
	/*
	 * Unmap only what is still ours: pages the application unmapped or
	 * moved away may hold someone else's mapping by now.  Unregister first,
	 * so our own munmap raises no unmap event (no handler reads it now).
	 */
	if (r->base) {
		for (size_t i = 0; i < r->npages;) {
			unsigned char m = r->state ? (st_load(r, i) & ST_MASK) : ST_NONE;
			if (m == ST_GONE || m == ST_MOVED) {
				i++;
				continue;
			}
			size_t j = i + 1;
			while (j < r->npages && (!r->state || ((m = st_load(r, j) & ST_MASK) != ST_GONE &&
							       m != ST_MOVED)))
				j++;
			if (r->uffd >= 0) {
				struct uffdio_range rg = { .start = (uintptr_t)(r->base + i * r->page),
							   .len = (j - i) * r->page };
				ioctl(r->uffd, UFFDIO_UNREGISTER, &rg);
			}
			munmap(r->base + i * r->page, (j - i) * r->page);
			i = j;
		}
	}
	if (r->uffd >= 0)
		close(r->uffd);
	if (r->stage)
		munmap(r->stage, (size_t)NBUFS * OUT_CHUNK * r->page);
	if (r->mvfd >= 0)
		close(r->mvfd);
	if (r->efd >= 0)
		close(r->efd);
	if (r->store)
		zs_zram_destroy(r->store);
	if (r->zero)
		munmap(r->zero, MAX_AROUND * r->page);
	free((void *)r->state);
	free((void *)r->ref);
	free((void *)r->wseq);
	pthread_mutex_destroy(&r->rlock);
	pthread_mutex_destroy(&r->hlock);
	pthread_mutex_destroy(&r->ulock);
	free(r->moves);
	for (int i = 0; i < r->nbufs; i++)
		munmap(r->bufs[i], OUT_CHUNK * r->page);
	pthread_mutex_destroy(&r->block);
	pthread_cond_destroy(&r->rcond);
	free(r);
}

static int start_threads(struct zs_region *r);

/*
 * Pageout's staging slices for UFFDIO_MOVE (reclaim.c, "Pageout by move").
 * UFFDIO_MOVE only moves into a range registered on the uffd it is issued
 * on, so the slices get a uffd of their own, with no events (freeing a
 * slice must raise none: the remove event's round trip is what the move
 * saves) and SIGBUS on a missing page (nothing ever reads an empty slice;
 * if a bug did, it gets a signal instead of waiting forever for a handler).
 * Same protection as the range, no THP, not inherited by fork (a shared
 * page cannot be moved back).  Any failure: pageout copies and zaps, as
 * before, and cannot tell a pinned page (reclaim.c, "Pinned pages").
 * ZS_REGION_MOVE=0 in the environment makes pageout copy (the tests run
 * both); the copied pages still leave the range through the slices.
 * ZS_REGION_MOVE=zap: no slices at all, what a kernel before 6.8 does.
 */
static void stage_init(struct zs_region *r, uint64_t have)
{
	const char *e = getenv("ZS_REGION_MOVE");
	r->move_out = !(e && !strcmp(e, "0"));
	if (!(have & UFFD_FEATURE_MOVE) || !(have & UFFD_FEATURE_SIGBUS) || (e && !strcmp(e, "zap")))
		return;
	char why[8];
	int fd = open_uffd(why, sizeof(why));
	if (fd < 0)
		return;
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_MOVE | UFFD_FEATURE_SIGBUS };
	size_t len = (size_t)NBUFS * OUT_CHUNK * r->page;
	void *m = MAP_FAILED;
	if (ioctl(fd, UFFDIO_API, &api) == 0)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (m != MAP_FAILED) {
		madvise(m, len, MADV_DONTFORK);
		madvise(m, len, MADV_NOHUGEPAGE);
		struct uffdio_register reg = { .range = { .start = (uintptr_t)m, .len = len },
					       .mode = UFFDIO_REGISTER_MODE_MISSING };
		if (ioctl(fd, UFFDIO_REGISTER, &reg) == 0 && (reg.ioctls & (1ULL << _UFFDIO_MOVE))) {
			r->mvfd = fd;
			r->stage = m;
			r->stage_free = (1u << NBUFS) - 1;
			return;
		}
		munmap(m, len);
	}
	close(fd);
}

static int region_create(const struct zs_region_config *cfg, struct zs_region **out, char *err,
			 size_t err_len)
{
	long sys_page = sysconf(_SC_PAGESIZE);
	struct zs_zram_config zc;
	int rc;

	if (err && err_len)
		err[0] = 0;
	if (out)
		*out = NULL; /* the int-returning constructors' rule (README, "Errors") */
	int bad;
	if (cfg && ZS_CONFIG_ABI_CHECK(cfg, &bad)) {
		config_abi_err(err, err_len, "zs_region_config", cfg->struct_size, sizeof(*cfg),
				  bad);
		return -EINVAL;
	}
	if (!cfg || !out) {
		set_err(err, err_len, "zs_region_create: %s is NULL", cfg ? "out" : "cfg");
		return -EINVAL;
	}
	if (!cfg->size) {
		set_err(err, err_len, "zs_region_config.size 0: must be 1..ZS_ZRAM_MAX_SLOTS pages");
		return -EINVAL;
	}
	if (cfg->handler_threads > 64) {
		set_err(err, err_len, "zs_region_config.handler_threads %u: must be 0..64",
			(unsigned)cfg->handler_threads);
		return -EINVAL;
	}
	if (cfg->fault_around > MAX_AROUND) {
		set_err(err, err_len, "zs_region_config.fault_around %u: must be 0..%u",
			(unsigned)cfg->fault_around, (unsigned)MAX_AROUND);
		return -EINVAL;
	}
	if (cfg->store.page_size && cfg->store.page_size != (size_t)sys_page) {
		set_err(err, err_len, "zs_region_config.store.page_size %zu: must be 0 or the "
			"system page size %ld", cfg->store.page_size, sys_page);
		return -EINVAL;
	}
	/* In pages, so that rounding SIZE_MAX up cannot wrap to an empty region. */
	uint64_t want = cfg->size / (size_t)sys_page + (cfg->size % (size_t)sys_page != 0);
	if (want > ZS_ZRAM_MAX_SLOTS) {
		set_err(err, err_len, "zs_region: size %zu is above ZS_ZRAM_MAX_SLOTS pages",
			   cfg->size);
		return -EINVAL;
	}
	struct zs_region *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->uffd = r->efd = r->mvfd = -1;
	pthread_mutex_init(&r->rlock, NULL);
	pthread_mutex_init(&r->hlock, NULL);
	pthread_mutex_init(&r->ulock, NULL);
	pthread_mutex_init(&r->block, NULL);
	pthread_cond_init(&r->rcond, NULL);
	r->page = (size_t)sys_page;
	r->size = (cfg->size + r->page - 1) / r->page * r->page;
	r->npages = r->size / r->page;
	r->fault_around = cfg->fault_around ? cfg->fault_around : 1;
	r->spin_ns = cfg->spin_us == ZS_REGION_NO_SPIN ? 0 :
		     (cfg->spin_us ? cfg->spin_us : 50) * 1000.0;
	r->resident_limit = (cfg->resident_limit + r->page - 1) / r->page;
	r->nhandlers = cfg->handler_threads ? cfg->handler_threads : 1;
	for (int i = 0; i < NSTREAMS; i++) {
		atomic_init(&r->streams[i], (uint64_t)-1);
		atomic_init(&r->rstreams[i], (uint64_t)-1);
	}

	rc = open_uffd(err, err_len);
	if (rc < 0)
		goto fail;
	r->uffd = rc;
	{
		/* UFFDIO_API works once per fd: ask on a probe fd, enable on ours. */
		uint64_t have = 0;
		int probe = open_uffd(err, err_len);
		if (probe < 0) {
			rc = probe;
			goto fail;
		}
		rc = uffd_features(probe, &have, err, err_len);
		close(probe);
		if (rc)
			goto fail;
		if (!(have & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
			set_err(err, err_len, "%s",
				"userfaultfd: kernel lacks write-protect for anonymous memory (5.7+)");
			rc = -EOPNOTSUPP;
			goto fail;
		}
		r->uffd_move = !!(have & UFFD_FEATURE_MOVE);
		uint64_t events = UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |
				  UFFD_FEATURE_EVENT_UNMAP;
		if ((have & events) != events) {
			set_err(err, err_len, "%s", "userfaultfd: kernel lacks the remove/unmap/remap "
				"events (4.11+)");
			rc = -EOPNOTSUPP;
			goto fail;
		}
		r->have_tid = !!(have & UFFD_FEATURE_THREAD_ID);
		struct uffdio_api en = { .api = UFFD_API,
					 .features = events | (have & UFFD_FEATURE_THREAD_ID) |
						     (have & UFFD_FEATURE_POISON) |
						     (have & UFFD_FEATURE_MOVE) };
		if (ioctl(r->uffd, UFFDIO_API, &en)) {
			set_err(err, err_len, "UFFDIO_API (enable): %s", strerror(errno));
			rc = -EOPNOTSUPP;
			goto fail;
		}
		stage_init(r, have);
	}
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		rc = -errno;
		goto fail;
	}

	zc = cfg->store;
	zc.page_size = r->page;
	zc.disksize = r->size;
	{
		char why[256];
		rc = zs_zram_create(&zc, &r->store, why, sizeof(why));
		if (rc) {
			r->store = NULL;
			set_err(err, err_len, "zs_region: store config rejected: %s",
				why[0] ? why : strerror(-rc));
			goto fail;
		}
	}
	/* The fault handlers read and free in this store (see "Lock order" above). */
	zs_zram_block_signals(r->store, 1);

	r->state = calloc(r->npages, 1);
	r->ref = calloc(r->npages, 1);
	r->wseq = calloc(r->npages, sizeof(*r->wseq));
	r->zero = mmap(NULL, MAX_AROUND * r->page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!r->state || !r->ref || !r->wseq || r->zero == MAP_FAILED) {
		if (r->zero == MAP_FAILED)
			r->zero = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	void *base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
			  MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		rc = -ENOMEM;
		goto fail;
	}
	r->base = base;
	/* Fork would give the child pages without a handler: refuse the range to children. */
	madvise(base, r->size, MADV_DONTFORK);
	madvise(base, r->size, MADV_NOHUGEPAGE);
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)base, .len = r->size },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	if (ioctl(r->uffd, UFFDIO_REGISTER, &reg)) {
		rc = -errno;
		set_err(err, err_len, "UFFDIO_REGISTER: %s", strerror(errno));
		goto fail;
	}
	if (!(reg.ioctls & (1ULL << _UFFDIO_COPY)) || !(reg.ioctls & (1ULL << _UFFDIO_WRITEPROTECT))) {
		set_err(err, err_len, "%s", "userfaultfd: range lacks UFFDIO_COPY/WRITEPROTECT");
		rc = -EOPNOTSUPP;
		goto fail;
	}
	r->can_poison = !!(reg.ioctls & (1ULL << _UFFDIO_POISON));

	/*
	 * Library threads start with every signal blocked (they inherit the
	 * mask): a process-directed signal must never run the application's
	 * handler on a fault handler or the reclaimer.
	 */
	struct zs_sigguard old;
	signals_block(&old);
	rc = start_threads(r);
	signals_restore(&old);
	if (rc)
		goto fail;
	live_add(r);
	*out = r;
	return 0;
fail:
	teardown(r);
	return rc;
}

int zs_region_create(const struct zs_region_config *cfg, struct zs_region **out, char *err,
		     size_t err_len)
{
	int rc = region_create(cfg, out, err, err_len);
	if (rc && out)
		*out = NULL;
	return create_finish("zs_region_create", rc, err, err_len);
}

/*
 * Spinning handlers, one per CPU the process may use (round robin), when
 * there are several: left to the scheduler, two spinning handlers could share
 * one CPU while the faulting threads ran on the other, so that every fault
 * was read on one CPU and its thread woken on another - a cross-CPU wake of a
 * thread whose CPU is busy.  bench_region --threads --procs 2 (2 vCPUs), a
 * timestamp per step: such runs had p50 30-40 us against 10-20 us where
 * each fault was read on its thread's CPU (the thread blocks, its CPU's
 * handler reads at once, the install wakes it there).  One handler, or
 * handlers that sleep in poll() (ZS_REGION_NO_SPIN), are left to the
 * scheduler, whose wake-up placement then does this; so are fewer handlers
 * than the CPUs the process may use: bound to some of them, they would be
 * beside only the threads that happen to run there and would still compete
 * for those CPUs with the rest of the program (a 16-CPU machine with two
 * handlers), which the scheduler weighs and a fixed binding cannot.
 * ZS_REGION_SPREAD=0 turns it off.  0 with *one set to handler i's CPU, or
 * -1: not bound.
 * fault.c (region_handler_main) keeps a handler with no faulting thread
 * beside it from reading the faults of the others' CPUs, and one back beside
 * its thread from reading theirs with its own.  (Taken out once, 0a4106d,
 * for a TSan hang that was pageout by move never waking a writer, 0a5c470;
 * test_mt_repro_region_madvise dontneed_limits and dontneed_wpfill pass 30
 * of 30 TSan runs each with it.)
 */
static int spread_cpu(struct zs_region *r, unsigned i, cpu_set_t *one)
{
	const char *e = getenv("ZS_REGION_SPREAD");
	cpu_set_t allowed;

	if (r->nhandlers < 2 || r->spin_ns <= 0 || (e && !strcmp(e, "0")) ||
	    sched_getaffinity(0, sizeof(allowed), &allowed) || CPU_COUNT(&allowed) < 2 ||
	    r->nhandlers < (unsigned)CPU_COUNT(&allowed))
		return -1;
	unsigned k = i % (unsigned)CPU_COUNT(&allowed);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &allowed))
			continue;
		if (k-- == 0) {
			CPU_ZERO(one);
			CPU_SET(c, one);
			return 0;
		}
	}
	return -1;
}

static int start_threads(struct zs_region *r)
{
	/* The reclaimer first: handlers read have_reclaimer. */
	if (r->resident_limit) {
		if (pthread_create(&r->rtid, NULL, region_reclaim_main, r))
			return -EAGAIN;
		r->have_reclaimer = 1;
	}
	r->h = calloc(r->nhandlers, sizeof(*r->h));
	if (!r->h)
		return -ENOMEM;
	for (unsigned i = 0; i < r->nhandlers; i++) {
		r->h[i].r = r;
		void *b = mmap(NULL, MAX_AROUND * r->page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b == MAP_FAILED)
			return -ENOMEM;
		r->h[i].buf = b;
		/* room for the first faults, so answering them needs no malloc (below) */
		r->h[i].q = calloc(64, sizeof(*r->h[i].q));
		if (!r->h[i].q)
			return -ENOMEM;
		r->h[i].qcap = 64;
		pthread_attr_t attr;
		cpu_set_t one;
		int made = 0;
		if (spread_cpu(r, i, &one) == 0 && pthread_attr_init(&attr) == 0) {
			/* a CPU the cpuset takes away meanwhile: started unbound below */
			made = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) == 0 &&
			       pthread_create(&r->h[i].tid, &attr, region_handler_main, &r->h[i]) == 0;
			pthread_attr_destroy(&attr);
		}
		if (!made && pthread_create(&r->h[i].tid, NULL, region_handler_main, &r->h[i])) {
			r->h[i].tid = 0;
			return -EAGAIN;
		}
	}
	/*
	 * Return only once every handler runs its loop.  A signal handler that
	 * reads region memory may interrupt a thread inside malloc; a handler
	 * still starting up (under ASan its start allocates) would then wait for
	 * that malloc lock while the interrupted thread waits for it to answer
	 * the fault (test_mt_region_sig_store hung so in a CI run).  Running
	 * handlers answer faults without allocating, as long as their queues
	 * have room.  The reclaimer too is waited for, until it has entered its
	 * function: a fork made right after create would otherwise copy, held,
	 * a lock its runtime's thread start holds (a sanitizer's allocator),
	 * and the child's first allocation would wait for ever
	 * (test_mt_fork_threads' region case under ASan: the child of the
	 * first fork hung).
	 */
	while (atomic_load_explicit(&r->hready, memory_order_acquire) < r->nhandlers ||
	       (r->have_reclaimer && !atomic_load_explicit(&r->rready, memory_order_acquire)))
		sched_yield();
	return 0;
}

/*
 * The live regions.  A region owns threads, a file descriptor and address
 * space, so a second zs_region_destroy of the same pointer (an easy slip on
 * an error path) would unmap or close whatever reused them.  Destroy looks
 * the pointer up here first and does nothing, with a line on stderr, when it
 * is not a live region; regions are few and created rarely, so a list under
 * a mutex costs nothing that matters.
 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zs_region *live_head;

static void live_add(struct zs_region *r)
{
	mutex_lock_ranked(&live_lock, ZS_LOCK_REGION_LIVE);
	r->live_next = live_head;
	live_head = r;
	mutex_unlock_ranked(&live_lock);
}

/* Unlink r; 0 when it was not a live region (never created, or destroyed already). */
static int live_remove(struct zs_region *r)
{
	int found = 0;
	mutex_lock_ranked(&live_lock, ZS_LOCK_REGION_LIVE);
	for (struct zs_region **pp = &live_head; *pp; pp = &(*pp)->live_next) {
		if (*pp == r) {
			*pp = r->live_next;
			found = 1;
			break;
		}
	}
	mutex_unlock_ranked(&live_lock);
	return found;
}

void zs_region_destroy(struct zs_region *r)
{
	if (!r)
		return;
	if (!live_remove(r)) {
		fprintf(stderr, "zs_region_destroy: %p is not a live region (destroyed twice?): "
				"ignored\n", (void *)r);
		return;
	}
	teardown(r);
}

void *zs_region_addr(const struct zs_region *r)
{
	return r->base;
}

size_t zs_region_size(const struct zs_region *r)
{
	return r->size;
}

struct zs_zram *zs_region_store(struct zs_region *r)
{
	return r->store;
}

static int fill_region_get_stats(struct zs_region *r, struct zs_region_stats *st)
{
	memset(st, 0, sizeof(*st));
	region_events_sync(r);   /* counts include the events already read */
	st->pages = r->npages;
	st->resident = atomic_load(&r->resident);
	st->stored = atomic_load(&r->stored);
	st->faults = atomic_load(&r->faults);
	st->faults_zero = atomic_load(&r->faults_zero);
	st->faults_wp = atomic_load(&r->faults_wp);
	st->pages_in = atomic_load(&r->pages_in);
	st->fault_around_pages = atomic_load(&r->around);
	st->pageouts = atomic_load(&r->pageouts);
	st->reclaimed = atomic_load(&r->reclaimed);
	st->releases = atomic_load(&r->releases);
	for (int i = 0; i < ZS_REGION_LAT_BUCKETS; i++)
		st->lat_hist[i] = atomic_load_explicit(&r->hist[i], memory_order_relaxed);
	zs_zram_get_stats(r->store, &st->store, sizeof(st->store));
	st->uffd_move = r->uffd_move;
	st->broken = atomic_load(&r->broken);
	st->removed = atomic_load(&r->removed);
	st->unmapped = atomic_load(&r->unmapped);
	st->sigbus_pages = atomic_load(&r->sigbus_pages);
	st->read_errors = atomic_load(&r->read_errors);
	return 0;
}

int zs_region_get_stats(struct zs_region *r, struct zs_region_stats *st, size_t size)
{
	struct zs_region_stats full;

	if (!st || !size)
		return -EINVAL;
	if (!r)
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	int rc = fill_region_get_stats(r, &full);
	if (rc)
		return rc;
	return stats_copy_out(st, size, &full, sizeof(full));
}

double zs_region_lat_percentile(const uint64_t *hist, double pct)
{
	uint64_t total = 0, acc = 0;
	for (int i = 0; i < ZS_REGION_LAT_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	double want = pct / 100.0 * (double)total;
	for (int i = 0; i < ZS_REGION_LAT_BUCKETS; i++) {
		acc += hist[i];
		if ((double)acc >= want)
			return 128.0 * (double)(2ULL << i);
	}
	return 128.0 * (double)(2ULL << (ZS_REGION_LAT_BUCKETS - 1));
}
