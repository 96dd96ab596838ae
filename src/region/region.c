/*
 * zs_region: anonymous memory whose cold pages live compressed in a libzs
 * zram store, paged back in on touch through userfaultfd.  This layer owns
 * the per-page state machine, the fault handlers, pageout/release and the
 * automatic reclaim; the store (src/zram) is used only through its public
 * API, so any backend and compressor work.  This file holds create/destroy,
 * config, stats and the range API (release, advise); fault.c the handler
 * threads and fault-around, reclaim.c pageout and the CLOCK reclaimer,
 * internal.h the shared region struct and page-state helpers.
 *
 * Per-page state (one atomic byte per page) is the source of truth for what
 * the kernel's page table holds, because only this layer changes either:
 *
 *   NONE   no page mapped, nothing stored (never written, or released)
 *   RES    a page is mapped (installed by a fault, or the zero page)
 *   STORED no page mapped; contents in store slot <page index>
 *   OUT    pageout owns it: write-protected, being compressed, then dropped
 *   IN     a fault handler owns it: being decompressed and installed
 *   REL    release owns it
 *
 * Transitions claim a page with a compare-and-swap out of a stable state
 * (NONE/RES/STORED) into an owned one (OUT/IN/REL); whoever finds a page
 * owned waits (handlers spin, the owner finishes in microseconds) and
 * retries.  So a fault never races a pageout or release of the same page.
 */
#include "internal.h"

static void set_err(char *err, size_t len, const char *fmt, const char *a)
{
	if (err && len)
		snprintf(err, len, fmt, a);
}

void zs_region_config_init(struct zs_region_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	zs_zram_config_init(&cfg->store);
	cfg->handler_threads = 1;
	cfg->fault_around = 16;
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

int region_range_ok(struct zs_region *r, const void *addr, size_t len)
{
	const unsigned char *a = addr;
	if (atomic_load(&r->broken))
		return -EFAULT;
	if (a < r->base || len > r->size || (size_t)(a - r->base) > r->size - len)
		return -EINVAL;
	if (((uintptr_t)a | len) & (r->page - 1))
		return -EINVAL;
	return 0;
}

/* ---- release ---- */

int zs_region_release(struct zs_region *r, void *addr, size_t len)
{
	int rc = region_range_ok(r, addr, len);
	if (rc)
		return rc;
	size_t first = pidx(r, addr), end = first + len / r->page;
	unsigned char was[REL_CHUNK];

	for (size_t c = first; c < end; c += REL_CHUNK) {
		size_t n = end - c < REL_CHUNK ? end - c : REL_CHUNK;
		size_t nres = 0, nst = 0;
		/* Claim every page, NONE included, so no fault installs one under us. */
		for (size_t i = 0; i < n; i++) {
			for (;;) {
				unsigned char s = st_load(r, c + i);
				if (s <= ST_STORED) {
					if (st_cas(r, c + i, s, ST_REL)) {
						was[i] = s;
						break;
					}
					continue;
				}
				sched_yield();
			}
		}
		for (size_t i = 0; i < n;) {
			if (was[i] != ST_STORED) {
				nres += was[i] == ST_RES;
				i++;
				continue;
			}
			size_t j = i;
			while (j < n && was[j] == ST_STORED)
				j++;
			zs_zram_discard_range(r->store, c + i, j - i);
			nst += j - i;
			i = j;
		}
		if (nres)
			madvise(r->base + c * r->page, n * r->page, MADV_DONTNEED);
		for (size_t i = 0; i < n; i++) {
			atomic_store_explicit(&r->ref[c + i], 0, memory_order_relaxed);
			st_set(r, c + i, ST_NONE);
		}
		atomic_fetch_add_explicit(&r->resident, -(uint64_t)nres, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->stored, -(uint64_t)nst, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->releases, nres + nst, memory_order_relaxed);
	}
	return 0;
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
	if (r->efd >= 0) {
		uint64_t one = 1;
		if (write(r->efd, &one, sizeof(one)) < 0) {
			/* handlers also check stop while spinning */
		}
	}
	if (r->h) {
		for (unsigned i = 0; i < r->nhandlers; i++) {
			if (r->h[i].tid)
				pthread_join(r->h[i].tid, NULL);
			if (r->h[i].buf)
				munmap(r->h[i].buf, MAX_AROUND * r->page);
		}
		free(r->h);
	}
	if (r->have_reclaimer) {
		pthread_mutex_lock(&r->rlock);
		r->rkick = 1;
		pthread_cond_signal(&r->rcond);
		pthread_mutex_unlock(&r->rlock);
		pthread_join(r->rtid, NULL);
	}
	/*
	 * After an mremap (broken) the range may hold someone else's mapping
	 * now: leave it alone rather than unmap foreign memory.
	 */
	if (r->base && !atomic_load(&r->broken)) {
		if (r->uffd >= 0) {
			struct uffdio_range rg = { .start = (uintptr_t)r->base, .len = r->size };
			ioctl(r->uffd, UFFDIO_UNREGISTER, &rg);
		}
		munmap(r->base, r->size);
	}
	if (r->uffd >= 0)
		close(r->uffd);
	if (r->efd >= 0)
		close(r->efd);
	if (r->store)
		zs_zram_destroy(r->store);
	if (r->zero)
		munmap(r->zero, MAX_AROUND * r->page);
	free((void *)r->state);
	free((void *)r->ref);
	pthread_mutex_destroy(&r->rlock);
	pthread_mutex_destroy(&r->hlock);
	pthread_cond_destroy(&r->rcond);
	free(r);
}

int zs_region_create(const struct zs_region_config *cfg, struct zs_region **out, char *err,
		     size_t err_len)
{
	long sys_page = sysconf(_SC_PAGESIZE);
	struct zs_zram_config zc;
	int rc;

	if (err && err_len)
		err[0] = 0;
	if (out)
		*out = NULL; /* the int-returning constructors' rule (README, "Errors") */
	if (!cfg || !out || !cfg->size || cfg->handler_threads > 64 ||
	    cfg->fault_around > MAX_AROUND ||
	    (cfg->store.page_size && cfg->store.page_size != (size_t)sys_page)) {
		set_err(err, err_len, "%s", "zs_region: bad config (size 0, handler_threads > 64, "
				"fault_around > 256 or store page size != system page size)");
		return -EINVAL;
	}
	struct zs_region *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->uffd = r->efd = -1;
	pthread_mutex_init(&r->rlock, NULL);
	pthread_mutex_init(&r->hlock, NULL);
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
		struct uffdio_api en = { .api = UFFD_API,
					 .features = UFFD_FEATURE_EVENT_REMAP |
						     (have & UFFD_FEATURE_THREAD_ID) };
		if (ioctl(r->uffd, UFFDIO_API, &en)) {
			set_err(err, err_len, "UFFDIO_API (enable): %s", strerror(errno));
			rc = -EOPNOTSUPP;
			goto fail;
		}
	}
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		rc = -errno;
		goto fail;
	}

	zc = cfg->store;
	zc.page_size = r->page;
	zc.disksize = r->size;
	rc = zs_zram_create(&zc, &r->store);
	if (rc) {
		r->store = NULL;
		set_err(err, err_len, "zs_region: store config rejected: %s", strerror(-rc));
		goto fail;
	}

	r->state = calloc(r->npages, 1);
	r->ref = calloc(r->npages, 1);
	r->zero = mmap(NULL, MAX_AROUND * r->page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!r->state || !r->ref || r->zero == MAP_FAILED) {
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

	/* The reclaimer first: handlers read have_reclaimer. */
	if (r->resident_limit) {
		if (pthread_create(&r->rtid, NULL, region_reclaim_main, r)) {
			rc = -EAGAIN;
			goto fail;
		}
		r->have_reclaimer = 1;
	}
	r->h = calloc(r->nhandlers, sizeof(*r->h));
	if (!r->h) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < r->nhandlers; i++) {
		r->h[i].r = r;
		void *b = mmap(NULL, MAX_AROUND * r->page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b == MAP_FAILED) {
			rc = -ENOMEM;
			goto fail;
		}
		r->h[i].buf = b;
		if (pthread_create(&r->h[i].tid, NULL, region_handler_main, &r->h[i])) {
			r->h[i].tid = 0;
			rc = -EAGAIN;
			goto fail;
		}
	}
	*out = r;
	return 0;
fail:
	teardown(r);
	return rc;
}

void zs_region_destroy(struct zs_region *r)
{
	if (r)
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

int zs_region_get_stats(struct zs_region *r, struct zs_region_stats *st)
{
	memset(st, 0, sizeof(*st));
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
	zs_zram_get_stats(r->store, &st->store);
	st->uffd_move = r->uffd_move;
	st->broken = atomic_load(&r->broken);
	return 0;
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
