/*
 * zs_region's pageout side: write-protected pageout into the store and
 * the automatic CLOCK reclaimer that drives it.  Kept apart from the fault
 * handlers (fault.c) because it runs off the fault path, on the caller's
 * or the reclaim thread; both meet only in the per-page state machine
 * described in region.c.
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
	int rc = region_range_ok(r, addr, len);
	if (rc)
		return rc;
	size_t p = pidx(r, addr);
	return pageout_pages(r, p, p + len / r->page, 0);
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

void *region_reclaim_main(void *arg)
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
