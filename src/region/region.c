/*
 * zs_region: anonymous memory whose cold pages live compressed in a libzs
 * zram store, paged back in on touch through userfaultfd.  This file owns
 * the per-page state machine, the fault handlers, pageout/release and the
 * automatic reclaim; the store (src/zram) is used only through its public
 * API, so any backend and compressor work.
 *
 * Per-page state (one atomic byte per page) is the source of truth for what
 * the kernel's page table holds, because only this file changes either:
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
 *
 * Pageout protocol (why no write is lost).  For a run of claimed RES pages:
 *   1. UFFDIO_WRITEPROTECT the run.  The ioctl returns after the TLB flush,
 *      so every store issued before it is visible to us and no store can
 *      land afterwards: a writer now takes a write-protect fault and sleeps
 *      in the kernel.  Readers are not disturbed.
 *   2. Compress the run into the store (it cannot change under us).
 *   3. MADV_DONTNEED the run: the pages are gone, RSS falls.  Anonymous
 *      zaps drop uffd-wp bits with the page, so the next access is a
 *      missing fault, which the handler answers from the store.
 *   4. Mark the pages STORED, then UFFDIO_WAKE the run: a writer that slept
 *      in step 1-3 retries, takes a missing fault and gets the page back
 *      from the store before its write lands.  The handler ignores the
 *      write-protect message of a page still OUT (the wake comes after the
 *      state change) and wakes the writer itself otherwise, so a message
 *      read late is harmless.  A writer that was between the PTE check and
 *      sleeping when step 3 ran does not sleep at all: the kernel re-checks
 *      the PTE after queueing it.
 * If the store fails (-ENOMEM), the run is un-write-protected (which wakes
 * the writers), its slots discarded and its pages go back to RES intact.
 *
 * Fault path: a handler reads the fault message, claims the page (STORED or
 * NONE -> IN), and when the fault continues a sequential stream (a small
 * table of "next expected page" per region, the kernel's swap readahead in
 * spirit) also claims up to fault_around-1 following pages.  It decompresses
 * into a buffer and installs the run with one UFFDIO_COPY, which wakes the
 * faulting thread; a read fault on never-written pages gets UFFDIO_ZEROPAGE.
 * Only then are the slots discarded (their objects freed, deferred if the
 * store says so) and the pages marked RES; discard before RES, so a pageout
 * that claims the page next cannot have its new slot contents discarded.
 *
 * UFFDIO_MOVE (kernel 6.8+) is detected and reported but not used: it moves
 * an exclusively owned anonymous page, so each move would leave a hole in
 * the staging buffer that the next decompression must fault in and zero -
 * more work than the 4 KiB copy UFFDIO_COPY does.
 *
 * Automatic reclaim: a thread keeps resident pages under the limit with a
 * CLOCK over resident pages.  The access signal is a referenced bit set when
 * a page is faulted in and by HOT hints, cleared by COLD hints and by the
 * clock hand; pages the hand finds unreferenced are paged out.  The kernel's
 * idle page tracking is not available to processes without
 * /sys/kernel/mm/page_idle (absent here) and soft-dirty needs the
 * process-wide clear_refs, so neither is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zs/region.h"

/* Older uapi headers lack the newer feature bits; the values are ABI. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1ULL << 16)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

enum { ST_NONE, ST_RES, ST_STORED, ST_OUT, ST_IN, ST_REL };

#define NSTREAMS 8
#define MAX_AROUND 256
#define OUT_CHUNK 64     /* pages write-protected and compressed per step */
#define REL_CHUNK 512

struct handler {
	struct zs_region *r;
	pthread_t tid;
	unsigned char *buf;   /* MAX_AROUND pages */
};

struct zs_region {
	unsigned char *base;
	size_t size, page, npages;
	int uffd, efd;
	int uffd_move;
	_Atomic unsigned char *state;
	_Atomic unsigned char *ref;
	struct zs_zram *store;
	unsigned fault_around;
	double spin_ns;
	size_t resident_limit;   /* pages; 0 none */

	atomic_int stop, broken;
	unsigned nhandlers;
	struct handler *h;
	unsigned char *zero;     /* MAX_AROUND zero pages */

	_Atomic uint64_t streams[NSTREAMS];    /* next page expected, ascending */
	_Atomic uint64_t rstreams[NSTREAMS];   /* next page expected, descending */
	atomic_uint stream_next;

	/* counters */
	_Atomic uint64_t resident, stored, faults, faults_zero, faults_wp, pages_in, around,
		pageouts, reclaimed, releases;
	_Atomic uint64_t hist[ZS_REGION_LAT_BUCKETS];

	/* reclaim */
	pthread_t rtid;
	int have_reclaimer;
	pthread_mutex_t rlock;   /* kick + condvar only; never held across a pageout */
	pthread_cond_t rcond;
	pthread_mutex_t hlock;   /* the CLOCK hand: one reclaim pass at a time */
	int rkick;
	size_t hand;             /* CLOCK hand, under rlock */
};

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

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

/* ---- helpers ---- */

static inline size_t pidx(const struct zs_region *r, const void *p)
{
	return (size_t)((const unsigned char *)p - r->base) / r->page;
}

static inline unsigned char st_load(struct zs_region *r, size_t i)
{
	return atomic_load_explicit(&r->state[i], memory_order_acquire);
}

static inline int st_cas(struct zs_region *r, size_t i, unsigned char from, unsigned char to)
{
	unsigned char f = from;
	return atomic_compare_exchange_strong_explicit(&r->state[i], &f, to, memory_order_acq_rel,
						       memory_order_acquire);
}

static inline void st_set(struct zs_region *r, size_t i, unsigned char v)
{
	atomic_store_explicit(&r->state[i], v, memory_order_release);
}

static void uffd_wake(struct zs_region *r, size_t first, size_t n)
{
	struct uffdio_range rg = { .start = (uintptr_t)(r->base + first * r->page),
				   .len = n * r->page };
	ioctl(r->uffd, UFFDIO_WAKE, &rg);
}

static int uffd_wp(struct zs_region *r, size_t first, size_t n, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)(r->base + first * r->page), .len = n * r->page },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};
	while (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp)) {
		if (errno != EAGAIN)
			return -errno;
	}
	return 0;
}

static void kick_reclaim(struct zs_region *r)
{
	if (!r->have_reclaimer)
		return;
	pthread_mutex_lock(&r->rlock);
	if (!r->rkick) {
		r->rkick = 1;
		pthread_cond_signal(&r->rcond);
	}
	pthread_mutex_unlock(&r->rlock);
}

/* ---- fault handling ---- */

/*
 * Fault-around window for a fault at p: > 0 ascending, < 0 descending (the
 * faulting page included), 1 when the fault continues no stream.  Streams are
 * a few "next page expected" slots updated racily (relaxed): a lost update
 * only costs one window.  Descending streams matter: glibc's memcpy of
 * page-aligned buffers copies backwards.
 */
static int stream_window(struct zs_region *r, size_t p)
{
	int k = (int)r->fault_around;

	if (k <= 1)
		return 1;
	for (int i = 0; i < NSTREAMS; i++) {
		if (atomic_load_explicit(&r->streams[i], memory_order_relaxed) == p) {
			atomic_store_explicit(&r->streams[i], p + (uint64_t)k, memory_order_relaxed);
			return k;
		}
		if (atomic_load_explicit(&r->rstreams[i], memory_order_relaxed) == p) {
			atomic_store_explicit(&r->rstreams[i], p - (uint64_t)k, memory_order_relaxed);
			return -k;
		}
	}
	unsigned s = atomic_fetch_add_explicit(&r->stream_next, 1, memory_order_relaxed) % NSTREAMS;
	atomic_store_explicit(&r->streams[s], p + 1, memory_order_relaxed);
	atomic_store_explicit(&r->rstreams[s], p - 1, memory_order_relaxed);
	return 1;
}

static void lat_record(struct zs_region *r, double ns)
{
	uint64_t q = (uint64_t)(ns / 128.0);
	int b = 0;
	while (q > 1 && b < ZS_REGION_LAT_BUCKETS - 1) {
		q >>= 1;
		b++;
	}
	atomic_fetch_add_explicit(&r->hist[b], 1, memory_order_relaxed);
}

/* Install pages [p, p+n) claimed IN; was_stored[i] says which hold store data. */
static void install_run(struct zs_region *r, struct handler *h, size_t p, size_t n,
			const unsigned char *was_stored, int write)
{
	int any_stored = 0;
	for (size_t i = 0; i < n; i++)
		any_stored |= was_stored[i];

	unsigned long start = (uintptr_t)(r->base + p * r->page);
	if (!any_stored && !write) {
		struct uffdio_zeropage zp = { .range = { .start = start, .len = n * r->page } };
		if (ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp) && errno != EEXIST) {
			/* fall back to copying zeros */
			any_stored = 1;
		} else {
			atomic_fetch_add_explicit(&r->faults_zero, 1, memory_order_relaxed);
		}
	}
	if (any_stored || write) {
		const unsigned char *src = r->zero;
		if (any_stored) {
			for (size_t i = 0; i < n; i++) {
				unsigned char *dst = h->buf + i * r->page;
				if (!was_stored[i] ||
				    zs_zram_read(r->store, p + i, dst, r->page) != 0)
					memset(dst, 0, r->page);
			}
			src = h->buf;
		}
		size_t done = 0;
		while (done < n) {
			struct uffdio_copy cp = { .dst = start + done * r->page,
						  .src = (uintptr_t)(src + done * r->page),
						  .len = (n - done) * r->page, .mode = 0 };
			if (ioctl(r->uffd, UFFDIO_COPY, &cp) == 0) {
				done = n;
				break;
			}
			if (cp.copy > 0) {
				done += (size_t)cp.copy / r->page;
				continue;
			}
			if (errno == EAGAIN)
				continue;
			/* EEXIST: already mapped (cannot happen while we own it); skip the page. */
			if (errno == EEXIST) {
				done++;
				continue;
			}
			break;   /* ESRCH/ENOENT: the mm is going away */
		}
	}
	size_t nstored = 0;
	for (size_t i = 0; i < n; i++) {
		if (was_stored[i]) {
			zs_zram_discard(r->store, p + i);
			nstored++;
		}
		atomic_store_explicit(&r->ref[p + i], 1, memory_order_relaxed);
	}
	for (size_t i = 0; i < n; i++)
		st_set(r, p + i, ST_RES);
	atomic_fetch_add_explicit(&r->stored, -(uint64_t)nstored, memory_order_relaxed);
	uint64_t res = atomic_fetch_add_explicit(&r->resident, n, memory_order_relaxed) + n;
	atomic_fetch_add_explicit(&r->pages_in, nstored, memory_order_relaxed);
	if (n > 1)
		atomic_fetch_add_explicit(&r->around, n - 1, memory_order_relaxed);
	if (r->resident_limit && res > r->resident_limit)
		kick_reclaim(r);
}

static void handle_missing(struct zs_region *r, struct handler *h, unsigned long addr, int write)
{
	size_t p = (addr - (uintptr_t)r->base) / r->page;
	unsigned char was[MAX_AROUND];
	unsigned spins = 0;

	if (addr < (uintptr_t)r->base || p >= r->npages) {
		/*
		 * Outside the region: only after an (unsupported) mremap carried the
		 * registration along.  The region is broken already; give the
		 * thread a zero page rather than leave it asleep forever.
		 */
		struct uffdio_zeropage zp = { .range = { .start = addr, .len = r->page } };
		if (ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp)) {
			struct uffdio_range rg = { .start = addr, .len = r->page };
			ioctl(r->uffd, UFFDIO_WAKE, &rg);
		}
		return;
	}
	for (;;) {
		unsigned char s = st_load(r, p);
		if (s == ST_NONE || s == ST_STORED) {
			if (st_cas(r, p, s, ST_IN)) {
				was[0] = s == ST_STORED;
				break;
			}
			continue;
		}
		if (s == ST_RES) {
			/* Installed meanwhile (another fault on the same page): let the thread retry. */
			uffd_wake(r, p, 1);
			return;
		}
		/* OUT/IN/REL: the owner finishes shortly. */
		if (++spins > 64)
			sched_yield();
		else
			cpu_relax();
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return;
	}
	atomic_fetch_add_explicit(&r->faults, 1, memory_order_relaxed);
	size_t n = 1;
	int win = stream_window(r, p);
	if (win > 0) {
		while (n < (size_t)win && p + n < r->npages) {
			unsigned char s = st_load(r, p + n);
			if ((s != ST_STORED && s != ST_NONE) || !st_cas(r, p + n, s, ST_IN))
				break;
			was[n++] = s == ST_STORED;
		}
	} else {
		/* claim downwards, then shift so was[] starts at the lowest page */
		unsigned char down[MAX_AROUND];
		while (n < (size_t)-win && n <= p) {
			unsigned char s = st_load(r, p - n);
			if ((s != ST_STORED && s != ST_NONE) || !st_cas(r, p - n, s, ST_IN))
				break;
			down[n++] = s == ST_STORED;
		}
		unsigned char top = was[0];
		for (size_t i = 1; i < n; i++)
			was[n - 1 - i] = down[i];
		was[n - 1] = top;
		p -= n - 1;
	}
	install_run(r, h, p, n, was, write);
}

static void handle_wp(struct zs_region *r, unsigned long addr)
{
	size_t p = (addr - (uintptr_t)r->base) / r->page;

	atomic_fetch_add_explicit(&r->faults_wp, 1, memory_order_relaxed);
	if (addr < (uintptr_t)r->base || p >= r->npages) {
		struct uffdio_range rg = { .start = addr, .len = r->page };
		ioctl(r->uffd, UFFDIO_WAKE, &rg);
		return;
	}
	/* Still OUT: pageout wakes the writer after the page is dropped. */
	if (st_load(r, p) == ST_OUT)
		return;
	uffd_wake(r, p, 1);
}

static void *handler_main(void *arg)
{
	struct handler *h = arg;
	struct zs_region *r = h->r;
	struct uffd_msg msgs[16];
	double last = now_ns();

	while (!atomic_load_explicit(&r->stop, memory_order_acquire)) {
		ssize_t got = read(r->uffd, msgs, sizeof(msgs));
		if (got <= 0) {
			if (got < 0 && errno != EAGAIN && errno != EINTR)
				break;
			/*
			 * Spin on the non-blocking read, yielding the core each time:
			 * with more busy threads than cores (P processes, each an
			 * application thread and a handler) a pure spin keeps the
			 * faulting thread from running once woken; measured on 2 cores
			 * at P=2 the yield doubled random swap-in throughput, and
			 * costs nothing when nothing else is runnable.
			 */
			if (r->spin_ns > 0 && now_ns() - last < r->spin_ns) {
				sched_yield();
				continue;
			}
			struct pollfd pf[2] = { { .fd = r->uffd, .events = POLLIN },
						{ .fd = r->efd, .events = POLLIN } };
			poll(pf, 2, -1);
			last = now_ns();
			continue;
		}
		double t0 = now_ns();
		size_t nm = (size_t)got / sizeof(msgs[0]);
		for (size_t i = 0; i < nm; i++) {
			struct uffd_msg *m = &msgs[i];
			if (m->event == UFFD_EVENT_PAGEFAULT) {
				unsigned long a = (unsigned long)m->arg.pagefault.address &
						  ~(unsigned long)(r->page - 1);
				if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
					handle_wp(r, a);
				} else {
					handle_missing(r, h, a,
						       !!(m->arg.pagefault.flags &
							  UFFD_PAGEFAULT_FLAG_WRITE));
					double t1 = now_ns();
					lat_record(r, t1 - t0);
					t0 = t1;
				}
			} else if (m->event == UFFD_EVENT_REMAP) {
				atomic_store(&r->broken, 1);
				fprintf(stderr, "zs_region: range remapped (mremap is not supported); "
						"region marked broken\n");
			}
		}
		last = now_ns();
	}
	return NULL;
}

/* ---- pageout ---- */

static int range_ok(struct zs_region *r, const void *addr, size_t len)
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

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZS_REGION_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define ZS_REGION_TSAN 1
#endif

#ifdef ZS_REGION_TSAN
/*
 * Under ThreadSanitizer: the page is write-protected, so no store can race
 * this read, but TSan cannot see the kernel's ordering and would report the
 * application's earlier (and later) writes against the compressor's reads.
 * Read the page here, uninstrumented, and compress the copy.
 */
__attribute__((no_sanitize("thread"))) static void wp_copy(void *dst, const void *src,
							 size_t len)
{
	const volatile uint64_t *s = src;
	uint64_t *d = dst;
	for (size_t i = 0; i < len / 8; i++)
		d[i] = s[i];
}

static int store_pages(struct zs_region *r, size_t p, size_t n)
{
	unsigned char *buf = malloc(r->page);
	int rc = buf ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		wp_copy(buf, r->base + (p + i) * r->page, r->page);
		rc = zs_zram_write(r->store, p + i, buf);
	}
	free(buf);
	return rc;
}
#else
static int store_pages(struct zs_region *r, size_t p, size_t n)
{
	return zs_zram_write_range(r->store, p, n, r->base + p * r->page);
}
#endif

/* Page out claimed (OUT) pages [p, p+n).  Returns pages stored or -errno. */
static long pageout_run(struct zs_region *r, size_t p, size_t n)
{
	int rc = uffd_wp(r, p, n, 1);
	if (!rc)
		rc = store_pages(r, p, n);
	if (rc) {
		uffd_wp(r, p, n, 0);   /* wakes writers */
		zs_zram_discard_range(r->store, p, n);
		for (size_t i = 0; i < n; i++)
			st_set(r, p + i, ST_RES);
		return rc;
	}
	madvise(r->base + p * r->page, n * r->page, MADV_DONTNEED);
	for (size_t i = 0; i < n; i++)
		st_set(r, p + i, ST_STORED);
	uffd_wake(r, p, n);
	atomic_fetch_add_explicit(&r->resident, -(uint64_t)n, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->stored, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->pageouts, n, memory_order_relaxed);
	return (long)n;
}

/* Claim RES pages of [first, end) in runs of at most OUT_CHUNK and page them out. */
static long pageout_pages(struct zs_region *r, size_t first, size_t end, int only_cold)
{
	long total = 0;
	size_t i = first;

	while (i < end) {
		/* find the next claimable page */
		while (i < end) {
			/*
			 * IN: a handler has woken the faulting thread and is finishing
			 * (freeing the object); it becomes RES in microseconds.  Wait, so
			 * a pageout right after a touch does not miss the page - and
			 * read the referenced bit only after, as the handler sets it.
			 */
			while (st_load(r, i) == ST_IN)
				sched_yield();
			if (only_cold && atomic_load_explicit(&r->ref[i], memory_order_relaxed)) {
				i++;
				continue;
			}
			if (st_load(r, i) == ST_RES && st_cas(r, i, ST_RES, ST_OUT))
				break;
			i++;
		}
		if (i >= end)
			break;
		size_t p = i++, n = 1;
		/* state first: a handler sets the referenced bit before it publishes RES */
		while (i < end && n < OUT_CHUNK && st_load(r, i) == ST_RES &&
		       !(only_cold && atomic_load_explicit(&r->ref[i], memory_order_relaxed)) &&
		       st_cas(r, i, ST_RES, ST_OUT)) {
			i++;
			n++;
		}
		long rc = pageout_run(r, p, n);
		if (rc < 0) {
			/* pages after this run are untouched */
			return total ? total : rc;
		}
		total += rc;
	}
	return total;
}

long zs_region_pageout(struct zs_region *r, void *addr, size_t len)
{
	int rc = range_ok(r, addr, len);
	if (rc)
		return rc;
	size_t p = pidx(r, addr);
	return pageout_pages(r, p, p + len / r->page, 0);
}

/* ---- release ---- */

int zs_region_release(struct zs_region *r, void *addr, size_t len)
{
	int rc = range_ok(r, addr, len);
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

/* ---- reclaim ---- */

long zs_region_reclaim(struct zs_region *r, size_t target)
{
	size_t tgt = target / r->page;
	long total = 0;

	pthread_mutex_lock(&r->hlock);
	/* Two sweeps at most: the first clears referenced bits, the second finds them cold. */
	for (size_t scanned = 0; scanned < 2 * r->npages; ) {
		if (atomic_load_explicit(&r->resident, memory_order_relaxed) <= tgt)
			break;
		if (atomic_load(&r->broken))
			break;
		size_t p = r->hand, end = p + OUT_CHUNK > r->npages ? r->npages : p + OUT_CHUNK;
		/* Cold (unreferenced) pages go first; the survivors lose their bit. */
		long n = pageout_pages(r, p, end, 1);
		for (size_t i = p; i < end; i++)
			if (st_load(r, i) == ST_RES)
				atomic_store_explicit(&r->ref[i], 0, memory_order_relaxed);
		if (n > 0)
			total += n;
		scanned += end - p;
		r->hand = end >= r->npages ? 0 : end;
		if (n < 0)
			break;
	}
	pthread_mutex_unlock(&r->hlock);
	atomic_fetch_add_explicit(&r->reclaimed, (uint64_t)total, memory_order_relaxed);
	return total;
}

static void *reclaim_main(void *arg)
{
	struct zs_region *r = arg;

	pthread_mutex_lock(&r->rlock);
	while (!atomic_load(&r->stop)) {
		while (!r->rkick && !atomic_load(&r->stop))
			pthread_cond_wait(&r->rcond, &r->rlock);
		r->rkick = 0;
		if (atomic_load(&r->stop))
			break;
		pthread_mutex_unlock(&r->rlock);
		zs_region_reclaim(r, r->resident_limit * r->page / 8 * 7);
		pthread_mutex_lock(&r->rlock);
	}
	pthread_mutex_unlock(&r->rlock);
	return NULL;
}

int zs_region_advise(struct zs_region *r, void *addr, size_t len, enum zs_region_advice adv)
{
	int rc = range_ok(r, addr, len);
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
		if (pthread_create(&r->rtid, NULL, reclaim_main, r)) {
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
		if (pthread_create(&r->h[i].tid, NULL, handler_main, &r->h[i])) {
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
