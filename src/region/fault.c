/*
 * zs_region's fault side: the userfaultfd handler threads, sequential
 * stream detection and fault-around.  Kept apart from pageout and reclaim
 * (reclaim.c) because it is the latency-critical path; both meet only in
 * the per-page state machine described in region.c.
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
 */
#include "internal.h"

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

void *region_handler_main(void *arg)
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
