/*
 * zs_region's pageout side: write-protected pageout into the store and
 * the automatic CLOCK reclaimer that drives it.  Kept apart from the fault
 * handlers (fault.c) because it runs off the fault path, on the caller's
 * or the reclaim thread; both meet only in the per-page state machine
 * described in region.c.
 *
 * Pageout protocol (why no write is lost).  For a run of claimed (OUT) pages:
 *   1. UFFDIO_WRITEPROTECT the run.  The ioctl returns after the TLB flush,
 *      so every store issued before it is visible to us and no store can
 *      land afterwards: a writer now takes a write-protect fault and sleeps
 *      in the kernel.  Readers are not disturbed.
 *   2. Copy the run out with process_vm_readv and compress the copy into
 *      the store (the pages cannot change under us).  The copy, not a plain
 *      read, because the application may unmap or move the range meanwhile:
 *      the copy then fails (the run goes back, step 5) where a read would
 *      crash the library.  A page the application zapped (MADV_DONTNEED)
 *      faults; the handler answers an OUT page with a write-protected zero
 *      page (OUTF) instead of waiting for us.
 *   3. Mark the run OUTZ and MADV_DONTNEED it (region_self_zap, which makes
 *      sure a handler has applied that remove event as ours): the pages
 *      are gone, RSS falls.  Anonymous zaps drop uffd-wp bits with the
 *      page, so the next access is a missing fault, which the handler
 *      answers from the store once the page is STORED.
 *   4. Finish each page STORED (or as the events that hit it meanwhile say:
 *      dropped -> NONE, unmapped -> GONE, moved -> MOVED), then UFFDIO_WAKE
 *      the run: a writer that slept in step 1-3 retries, takes a missing
 *      fault and gets the page back from the store before its write lands.
 *      The handler ignores the write-protect message of a page still
 *      OUT/OUTF/OUTZ (the wake comes after the state change) and wakes the
 *      writer itself otherwise, so a message read late is harmless.
 *   5. If the store or the copy fails, its slots are discarded, the run is
 *      settled as in step 3 (OUTZ, after any zero fill in flight), then
 *      un-write-protected (which wakes the writers) and its pages go back
 *      to RES intact, or as the events that hit them say.  Every end of
 *      pageout's ownership goes through out_settle and region_finish.
 * Pageout runs with every blockable signal blocked (region.c, "Lock order").
 *
 * Automatic reclaim: a thread keeps resident pages under the limit with a
 * CLOCK over resident pages.  The access signal is a referenced bit set when
 * a page is faulted in and by HOT hints, cleared by COLD hints and by the
 * clock hand; pages the hand finds unreferenced are paged out.  The kernel's
 * idle page tracking is not available to processes without
 * /sys/kernel/mm/page_idle (absent here) and soft-dirty needs the
 * process-wide clear_refs, so neither is used.
 */
#include "internal.h"

/* ---- pageout ---- */

/* Staging buffers of OUT_CHUNK pages, reused: most pageouts are one run after another. */
static unsigned char *buf_get(struct zs_region *r)
{
	unsigned char *b = NULL;
	pthread_mutex_lock(&r->block);
	if (r->nbufs)
		b = r->bufs[--r->nbufs];
	pthread_mutex_unlock(&r->block);
	if (!b) {
		b = mmap(NULL, OUT_CHUNK * r->page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b == MAP_FAILED)
			b = NULL;
	}
	return b;
}

static void buf_put(struct zs_region *r, unsigned char *b)
{
	pthread_mutex_lock(&r->block);
	if (r->nbufs < NBUFS) {
		r->bufs[r->nbufs++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&r->block);
	if (b)
		munmap(b, OUT_CHUNK * r->page);
}

/* Copy pages [p, p+n) out of the range; -EFAULT when part of it is no longer mapped. */
static int copy_out(struct zs_region *r, size_t p, size_t n, unsigned char *buf)
{
	struct iovec to = { .iov_base = buf, .iov_len = n * r->page };
	struct iovec from = { .iov_base = r->base + p * r->page, .iov_len = n * r->page };
	ssize_t got = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
	return got == (ssize_t)(n * r->page) ? 0 : got < 0 ? -errno : -EFAULT;
}

/* Did the application unmap or move any page of [p, p+n) (state or pending flag)? */
static int run_lost(struct zs_region *r, size_t p, size_t n)
{
	for (size_t i = p; i < p + n; i++) {
		unsigned char s = st_load(r, i), m = s & ST_MASK;
		if (m == ST_GONE || m == ST_MOVED || (s & (F_GONE | F_MOVED)))
			return 1;
	}
	return 0;
}

/*
 * Take pages [p, p+n) of a run from OUT/OUTF to OUTZ, keeping the event
 * flags.  OUTF means a handler is installing a zero page and will put the
 * page back to OUT itself (fault.c, handle_missing): while a page is OUTF
 * its state is the handler's to change, so every path that ends pageout's
 * ownership (stored, or given back on an error) comes through here before
 * region_finish.  Finishing an OUTF page directly let the handler stamp OUT
 * on the finished page afterwards: owned by nobody, release waited on it
 * forever.  OUTZ also stops new zero fills (a missing fault on it is queued
 * until the page is finished).
 */
static void out_settle(struct zs_region *r, size_t p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (;;) {
			unsigned char s = st_load(r, p + i);
			if ((s & ST_MASK) == ST_OUTF) {
				sched_yield();   /* a handler is filling it; it does not wait for us */
				continue;
			}
			if (st_cas(r, p + i, s, (unsigned char)((s & ~ST_MASK) | ST_OUTZ)))
				break;
		}
	}
}

/*
 * Give claimed pages [p, p+n) back intact: nothing of them is stored.
 * Un-write-protect after settling, so it also lifts the protection of a zero
 * page a handler filled meanwhile (and wakes the writers).  The pending
 * event flags apply through region_finish.
 */
static void pageout_abort(struct zs_region *r, size_t p, size_t n)
{
	out_settle(r, p, n);
	uffd_wp(r, p, n, 0);
	for (size_t i = 0; i < n; i++)
		region_finish(r, p + i, ST_RES, 0, 1);
}

/* Page out claimed (OUT) pages [p, p+n).  Returns pages stored or -errno. */
static long pageout_run(struct zs_region *r, size_t p, size_t n, unsigned char *buf)
{
	int rc = uffd_wp(r, p, n, 1);
	if (!rc)
		rc = copy_out(r, p, n, buf);
	/*
	 * A page the application zapped meanwhile is faulted back in by the
	 * copy (a handler fills OUT pages with zeros, step 2); a copy that
	 * still fails while no page of the run was unmapped or moved is tried
	 * again before the run is given back.
	 */
	for (int tries = 1; rc == -EFAULT && tries < 3 && !run_lost(r, p, n); tries++)
		rc = copy_out(r, p, n, buf);
	if (!rc)
		rc = zs_zram_write_range(r->store, p, n, buf);
	if (rc) {
		zs_zram_discard_range(r->store, p, n);
		pageout_abort(r, p, n);
		return rc;
	}
	atomic_fetch_add_explicit(&r->stored, n, memory_order_relaxed);
	out_settle(r, p, n);
	region_self_zap(r, p, n);
	long stored = 0;
	for (size_t i = 0; i < n; i++)
		stored += region_finish(r, p + i, ST_STORED, 1, 1) == ST_STORED;
	uffd_wake(r, p, n);
	atomic_fetch_add_explicit(&r->pageouts, (uint64_t)stored, memory_order_relaxed);
	return (long)n;
}

/* Claim RES pages of [first, end) in runs of at most OUT_CHUNK and page them out. */
static long pageout_pages(struct zs_region *r, size_t first, size_t end, int only_cold)
{
	long total = 0;
	size_t i = first;
	unsigned char *buf = NULL;

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
		if (!buf && !(buf = buf_get(r))) {
			pageout_abort(r, p, 1);
			return total ? total : -ENOMEM;
		}
		/* state first: a handler sets the referenced bit before it publishes RES */
		while (i < end && n < OUT_CHUNK && st_load(r, i) == ST_RES &&
		       !(only_cold && atomic_load_explicit(&r->ref[i], memory_order_relaxed)) &&
		       st_cas(r, i, ST_RES, ST_OUT)) {
			i++;
			n++;
		}
		long rc = pageout_run(r, p, n, buf);
		if (rc == -EFAULT && !run_lost(r, p, n)) {
			/*
			 * The copy failed though the run is still the region's: it was
			 * given back intact (resident), so it is skipped like a page
			 * that was not resident; -EFAULT means unmapped (region.h).
			 */
			continue;
		}
		if (rc < 0) {
			/* pages after this run are untouched */
			buf_put(r, buf);
			return total ? total : rc;
		}
		total += rc;
	}
	if (buf)
		buf_put(r, buf);
	return total;
}

long zs_region_pageout(struct zs_region *r, void *addr, size_t len)
{
	int rc = region_range_ok(r, addr, len);
	if (rc)
		return rc;
	size_t p = pidx(r, addr);
	struct zs_sigguard old;
	zs_signals_block(&old);
	long n = pageout_pages(r, p, p + len / r->page, 0);
	zs_signals_restore(&old);
	return n;
}

/* ---- reclaim ---- */

long zs_region_reclaim(struct zs_region *r, size_t target)
{
	size_t tgt = target / r->page;
	long total = 0;
	struct zs_sigguard old;

	zs_signals_block(&old);
	pthread_mutex_lock(&r->hlock);
	/* Two sweeps at most: the first clears referenced bits, the second finds them cold. */
	for (size_t scanned = 0; scanned < 2 * r->npages; ) {
		if (atomic_load_explicit(&r->resident, memory_order_relaxed) <= tgt)
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
	zs_signals_restore(&old);
	atomic_fetch_add_explicit(&r->reclaimed, (uint64_t)total, memory_order_relaxed);
	return total;
}

void *region_reclaim_main(void *arg)
{
	struct zs_region *r = arg;

	zs_signals_blocked_thread();   /* created with every signal blocked (region.c) */

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
