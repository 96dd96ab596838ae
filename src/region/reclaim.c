/*
 * zs_region's pageout side: write-protected pageout into the store and
 * the automatic CLOCK reclaimer that drives it.  Kept apart from the fault
 * handlers (fault.c) because it runs off the fault path, on the caller's
 * or the reclaim thread; both meet only in the per-page state machine
 * described in region.c.
 *
 * Pageout moves a run out of the range with UFFDIO_MOVE where the kernel can
 * ("pageout by move", pageout_move); what it cannot move is copied:
 *
 * Copy protocol (why no write is lost).  For a run of claimed (OUT) pages:
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
 * Pinned pages.  Direct I/O (O_DIRECT, io_uring fixed buffers, vmsplice,
 * RDMA) pins its buffer's pages and the device reads or writes the frames;
 * write protection does not stop a DMA, and a zapped or moved-away page's
 * frame lives on until the pin is dropped, so the device's bytes landed in
 * a page pageout had thrown away (an O_DIRECT pread returned its full count
 * and the page kept its old bytes).  The kernel's reclaim leaves a pinned
 * page mapped and tries it later; so does pageout.  Nothing in pagemap or
 * PAGEMAP_SCAN reports a pin; UFFDIO_MOVE refuses one with EBUSY, checking
 * again after it cleared the entry (a pin racing the move is seen).  The
 * move path gives such a page back resident and moves the rest; the copy
 * path takes its run out by a move too where it can (copy_drop).  Without
 * UFFDIO_MOVE a pin cannot be seen (region.h says so).
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
#include "zs/harness.h"   /* zs_region_move_inject */

/* ---- pageout ---- */

/* Staging buffers of OUT_CHUNK pages, reused: most pageouts are one run after another. */
static unsigned char *buf_get(struct zs_region *r)
{
	unsigned char *b = NULL;
	mutex_lock_ranked(&r->block, ZS_LOCK_REGION_BUFS);
	if (r->nbufs)
		b = r->bufs[--r->nbufs];
	mutex_unlock_ranked(&r->block);
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
	mutex_lock_ranked(&r->block, ZS_LOCK_REGION_BUFS);
	if (r->nbufs < NBUFS) {
		r->bufs[r->nbufs++] = b;
		b = NULL;
	}
	mutex_unlock_ranked(&r->block);
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

/* ---- pageout by move ---- */

static unsigned char *stage_get(struct zs_region *r)
{
	unsigned char *s = NULL;
	mutex_lock_ranked(&r->block, ZS_LOCK_REGION_BUFS);
	if (r->stage_free) {
		int k = __builtin_ctz(r->stage_free);
		r->stage_free &= ~(1u << k);
		s = r->stage + (size_t)k * OUT_CHUNK * r->page;
	}
	mutex_unlock_ranked(&r->block);
	return s;
}

/* Free the moved pages (no event: the slice's uffd asks for none) and the slice. */
static void stage_put(struct zs_region *r, unsigned char *s, size_t n)
{
	if (n)
		madvise(s, n * r->page, MADV_DONTNEED);
	mutex_lock_ranked(&r->block, ZS_LOCK_REGION_BUFS);
	r->stage_free |= 1u << ((size_t)(s - r->stage) / (OUT_CHUNK * r->page));
	mutex_unlock_ranked(&r->block);
}

/* Pages [p, p+n) from OUTZ back to OUT, keeping the event flags (pageout still owns them). */
static void out_unsettle(struct zs_region *r, size_t p, size_t n)
{
	for (size_t i = p; i < p + n; i++)
		for (;;) {
			unsigned char s = st_load(r, i);
			if (st_cas(r, i, s, (unsigned char)((s & ~ST_MASK) | ST_OUT)))
				break;
		}
}

/*
 * The store refused moved pages [p, p+n): put each back where it was, unless
 * an event says the application dropped, unmapped or moved it meanwhile.
 * Under ulock with the flags checked, as every install (region.c): the move
 * lands only in a range registered on the region's uffd, so it can never
 * place our page in a mapping the application put there since.  The region
 * addresses are empty: nobody installs into an OUTZ page.
 */
static void move_back(struct zs_region *r, size_t p, size_t n, unsigned char *s)
{
	size_t i = 0;
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	while (i < n) {
		if (st_load(r, p + i) & (F_DROP | F_GONE | F_MOVED)) {
			i++;
			continue;
		}
		size_t j = i + 1;
		while (j < n && !(st_load(r, p + j) & (F_DROP | F_GONE | F_MOVED)))
			j++;
		struct uffdio_move mv = { .dst = (uintptr_t)(r->base + (p + i) * r->page),
					  .src = (uintptr_t)(s + i * r->page),
					  .len = (j - i) * r->page, .mode = UFFDIO_MOVE_MODE_DONTWAKE };
		if (ioctl(r->uffd, UFFDIO_MOVE, &mv) == 0) {
			i = j;
			continue;
		}
		if (mv.move > 0) {
			i += (size_t)mv.move / r->page;
			continue;
		}
		if (errno == EAGAIN) {
			/* an event is unread: let a handler read and apply it, then look again */
			mutex_unlock_ranked(&r->ulock);
			sched_yield();
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
			continue;
		}
		/* Not expected (the range is registered, empty, the page exclusive): copy it. */
		struct uffdio_copy cp = { .dst = mv.dst, .src = mv.src, .len = r->page };
		wake_mark(r, cp.dst, r->page);
		if (ioctl(r->uffd, UFFDIO_COPY, &cp) && errno != EEXIST) {
			if (errno == EAGAIN)
				continue;
			fprintf(stderr, "zs_region: pageout could not put back page %zu (%s); it will "
					"read as zeros\n", p + i, strerror(errno));
		}
		i++;
	}
	mutex_unlock_ranked(&r->ulock);
}

/* zs_region_move_inject: move the first page only and report the whole move failed. */
static int move_lie(struct zs_region *r, struct uffdio_move *mv)
{
	unsigned left = atomic_load_explicit(&r->move_lie, memory_order_relaxed);
	while (left && !atomic_compare_exchange_weak(&r->move_lie, &left, left - 1))
		;
	if (!left)
		return 0;
	struct uffdio_move one = *mv;
	one.len = r->page;
	ioctl(r->mvfd, UFFDIO_MOVE, &one);
	mv->move = -EEXIST;
	errno = EEXIST;
	return 1;
}

void zs_region_move_inject(struct zs_region *r, unsigned count)
{
	atomic_store(&r->move_lie, count);
}

void zs_region_pageout_hook(struct zs_region *r, void (*fn)(void *arg, size_t first, size_t n),
			    void *arg)
{
	r->pageout_hook_arg = arg;
	atomic_store(&r->pageout_hook, fn);
}

/*
 * What a failed move of [p, p+n) into the empty slice s really moved; kernel
 * said k pages.  Its count is not enough: 6.18 was seen to move a page and
 * fail the call with EEXIST, nothing counted (fuzz_region, 1 input in ~400:
 * the page, with the application's last write in it, sat in the slice while
 * the copy path found the range empty, had the handler fill it with zeros,
 * and stored those; later moves into that slice failed on the page left
 * there).  The slice was empty, so its present pages are what moved: the
 * moved prefix is kept, a moved page after a gap is put back so the copy
 * path finds it in the range.  The caller frees the whole slice after.
 */
static size_t move_check(struct zs_region *r, size_t p, size_t n, unsigned char *s, size_t k)
{
	unsigned char vec[OUT_CHUNK];
	if (mincore(s, n * r->page, vec) != 0)
		return k;
	size_t m = 0;
	while (m < n && (vec[m] & 1))
		m++;
	for (size_t j = m + 1; j < n; j++)
		if (vec[j] & 1)
			move_back(r, p + j, 1, s + j * r->page);
	return m;
}

/*
 * Page out claimed (OUT) pages [p, p+n) by moving them out of the range.
 * Returns how many pages from p it handled (0: none, the caller copies), or
 * -errno from the store (those pages are back, resident, as before).
 *
 * Why: freeing the pages in place (MADV_DONTNEED) raises a remove event the
 * kernel makes us wait for until a handler has read it - two context
 * switches per pageout run, the larger part of its cost - and a copy must be
 * taken first.  UFFDIO_MOVE takes each page out of the range atomically
 * (page table entry cleared and TLB flushed under the page table lock: a
 * store before it is in the moved page, one after it faults) into a slice
 * registered on a uffd that asks for no events; the page is compressed
 * there and freed with no event.  No write protection is needed: nothing
 * can change the page once it left the range.  The pages are OUTZ before
 * the move, so a fault on a moved page is queued until the page is STORED
 * (fault.c), and is then answered from the store by its handler.  A writer
 * can still be asleep on a write-protect fault: the handler answers a missing
 * fault on an OUT page the application zapped with a write-protected zero
 * page (fault.c, fill_out) and leaves the writer's write-protect fault to
 * pageout, as in the copy protocol - so the moved pages are woken once
 * finished, as step 4 does (without it the writer slept forever:
 * test_mt_repro_region_madvise dontneed_wpfill).
 * The application's events still apply: a page it zaps before the move is
 * a hole (the move stops there with ENOENT; the rest is copied as before),
 * one it zaps, unmaps or moves after it sets the usual flag.  Only anonymous
 * private exclusive pages move: the region is MADV_DONTFORK and
 * MADV_NOHUGEPAGE; a KSM or pinned page (EBUSY), a range split by mprotect
 * (EINVAL) and the like stop the move, and the rest of the run is copied.
 */
static long pageout_move(struct zs_region *r, size_t p, size_t n, int *pinned)
{
	*pinned = 0;
	unsigned char *s = stage_get(r);
	if (!s)
		return 0;
	out_settle(r, p, n);   /* OUTZ first: a fault on a moved page must wait, not get zeros */
	/*
	 * Under ulock, after the flags: a move takes whatever is mapped at the
	 * source addresses, and the kernel does not require the source to be
	 * registered, so once the application had unmapped pages of the run and
	 * mapped its own memory there, the move took that memory's pages
	 * (test_mt_repro_region_madvise munmap_pageout).  The application's
	 * munmap returns only once a handler has read its unmap event, and
	 * handlers read under ulock: so either its flags are set here (those
	 * pages and the rest of the run are not moved) or nothing can be mapped
	 * there until the move is done.  An unread event makes the move fail
	 * with EAGAIN: let a handler read it and look at the flags again.
	 */
	struct uffdio_move mv = { .dst = (uintptr_t)s, .src = (uintptr_t)(r->base + p * r->page),
				  .mode = UFFDIO_MOVE_MODE_DONTWAKE };
	size_t k = n, ok;
	int failed, e = 0;
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	for (;;) {
		for (ok = 0; ok < n && !(st_load(r, p + ok) & (F_GONE | F_MOVED)); ok++)
			;
		mv.len = ok * r->page;
		mv.move = 0;
		if (!ok) {
			failed = 1;
			break;
		}
		if (atomic_load_explicit(&r->move_lie, memory_order_relaxed) && move_lie(r, &mv))
			failed = 1;
		else
			failed = ioctl(r->mvfd, UFFDIO_MOVE, &mv) != 0;
		e = failed ? errno : 0;
		if (!failed && ok < n) {
			failed = 1;   /* the pages after the lost one: the copy path settles them */
			mv.move = (__s64)mv.len;
		}
		if (!failed || errno != EAGAIN || mv.move > 0)
			break;
		mutex_unlock_ranked(&r->ulock);
		sched_yield();
		mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	}
	mutex_unlock_ranked(&r->ulock);
	if (failed)
		k = move_check(r, p, n, s, mv.move > 0 ? (size_t)mv.move / r->page : 0);
	if (k < n)
		out_unsettle(r, p + k, n - k);   /* the copy path takes them from OUT */
	/*
	 * EBUSY: the kernel found page p+k pinned (it checks after clearing the
	 * entry, so a pin taken at that moment is seen too) and left it mapped.
	 * It stays resident, as the kernel's reclaim leaves a pinned page: the
	 * device may still write into it ("Pinned pages", below).
	 */
	if (e == EBUSY && k < n) {
		*pinned = 1;
		pageout_abort(r, p + k, 1);
	}
	if (!k) {
		stage_put(r, s, n);
		return 0;
	}
	int rc = zs_zram_write_range(r->store, p, k, s);
	if (rc) {
		zs_zram_discard_range(r->store, p, k);
		move_back(r, p, k, s);
		stage_put(r, s, n);
		for (size_t i = 0; i < k; i++)
			region_finish(r, p + i, ST_RES, 0, 1);
		uffd_wake(r, p, k);   /* after the states: a writer on a zero fill (above) */
		/* pages after the moved ones (and the pinned one) are still claimed: give them back */
		if (k + (size_t)*pinned < n)
			pageout_abort(r, p + k + (size_t)*pinned, n - k - (size_t)*pinned);
		return rc;
	}
	stage_put(r, s, n);
	atomic_fetch_add_explicit(&r->stored, k, memory_order_relaxed);
	long stored = 0;
	for (size_t i = 0; i < k; i++)
		stored += region_finish(r, p + i, ST_STORED, 1, 1) == ST_STORED;
	uffd_wake(r, p, k);   /* after the states: a writer on a zero fill (above) */
	atomic_fetch_add_explicit(&r->pageouts, (uint64_t)stored, memory_order_relaxed);
	return (long)k;
}

enum { DROP_ZAP, DROP_MOVED, DROP_KEEP };

/*
 * Copy protocol step 3 where the region has move slices: the copied run
 * leaves the range by UFFDIO_MOVE rather than MADV_DONTNEED, because the
 * move refuses a pinned page (EBUSY) and the zap does not.  A page pinned
 * before step 1 (an O_DIRECT read, an io_uring fixed buffer: write
 * protection does not stop a device's DMA) stays resident (DROP_KEEP);
 * once a page is write-protected no new pin for writing can be taken (the
 * pin faults and waits like any writer), so the move's check is the last
 * one needed.  A pin released between the copy and the move may have had
 * the device write after the copy: the moved page is what the device left,
 * so it is compared with the copy and stored again if it differs.  Pages
 * that cannot be moved (a hole the application zapped, a range split by
 * mprotect) and runs without slices are zapped as before (DROP_ZAP).
 * out[i]: what became of page p+i.
 */
static void copy_drop(struct zs_region *r, size_t p, size_t n, const unsigned char *buf,
		      unsigned char *out)
{
	unsigned char *s = NULL;
	memset(out, DROP_ZAP, n);
	if (r->mvfd >= 0)
		while (!(s = stage_get(r)))
			sched_yield();   /* a slice is held for one run's move and store write */
	if (!s) {
		region_self_zap(r, p, n, 1);
		return;
	}
	/* under ulock, flags first: as pageout_move, never take a page the application mapped since */
	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	for (size_t i = 0; i < n;) {
		if (st_load(r, p + i) & (F_GONE | F_MOVED)) {
			i++;
			continue;
		}
		size_t j = i + 1;
		while (j < n && !(st_load(r, p + j) & (F_GONE | F_MOVED)))
			j++;
		struct uffdio_move mv = { .dst = (uintptr_t)(s + i * r->page),
					  .src = (uintptr_t)(r->base + (p + i) * r->page),
					  .len = (j - i) * r->page, .mode = UFFDIO_MOVE_MODE_DONTWAKE };
		if (ioctl(r->mvfd, UFFDIO_MOVE, &mv) == 0) {
			memset(out + i, DROP_MOVED, j - i);
			i = j;
			continue;
		}
		int e = errno;
		if (mv.move > 0) {
			size_t m = (size_t)mv.move / r->page;
			memset(out + i, DROP_MOVED, m);
			i += m;
			continue;
		}
		if (e == EAGAIN) {   /* an event is unread: a handler applies it, then look again */
			mutex_unlock_ranked(&r->ulock);
			sched_yield();
			mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
			continue;
		}
		if (e == EBUSY)
			out[i] = DROP_KEEP;
		i++;
	}
	mutex_unlock_ranked(&r->ulock);
	/* what sits in the slice is what moved, whatever the ioctl said (move_check) */
	unsigned char vec[OUT_CHUNK];
	if (mincore(s, n * r->page, vec) == 0)
		for (size_t i = 0; i < n; i++) {
			if (vec[i] & 1)
				out[i] = DROP_MOVED;
			else if (out[i] == DROP_MOVED)
				out[i] = DROP_ZAP;
		}
	for (size_t i = 0; i < n; i++) {
		unsigned char *pg = s + i * r->page;
		if (out[i] != DROP_MOVED || !memcmp(pg, buf + i * r->page, r->page))
			continue;
		if (zs_zram_write(r->store, p + i, pg) != 0) {
			move_back(r, p + i, 1, pg);   /* its newer bytes cannot be stored: keep them */
			out[i] = DROP_KEEP;
		}
	}
	for (size_t i = 0; i < n;) {
		if (out[i] != DROP_ZAP) {
			i++;
			continue;
		}
		size_t j = i + 1;
		while (j < n && out[j] == DROP_ZAP)
			j++;
		region_self_zap(r, p + i, j - i, 1);
		i = j;
	}
	stage_put(r, s, n);
}

/* Page out claimed (OUT) pages [p, p+n) by copying them.  Returns pages stored or -errno. */
static long pageout_copy(struct zs_region *r, size_t p, size_t n, unsigned char *buf)
{
	int rc = uffd_wp(r, p, n, 1);
	/*
	 * The kernel's write protect says ENOENT when no mapping is left in the
	 * range: the application unmapped the whole run, which region.h reports
	 * as -EFAULT (test_mt_region_move_race munmap).
	 */
	if (rc == -ENOENT)
		rc = -EFAULT;
	if (!rc) {
		rc = copy_out(r, p, n, buf);
		/*
		 * A page the application zapped meanwhile is faulted back in by the
		 * copy (a handler fills OUT pages with zeros, step 2); a copy that
		 * still fails while no page of the run was unmapped or moved is tried
		 * again before the run is given back.  Never without the write
		 * protection: a store after the copy would be lost.
		 */
		for (int tries = 1; rc == -EFAULT && tries < 3 && !run_lost(r, p, n); tries++)
			rc = copy_out(r, p, n, buf);
	}
	if (!rc)
		rc = zs_zram_write_range(r->store, p, n, buf);
	if (rc) {
		zs_zram_discard_range(r->store, p, n);
		pageout_abort(r, p, n);
		return rc;
	}
	atomic_fetch_add_explicit(&r->stored, n, memory_order_relaxed);
	out_settle(r, p, n);
	unsigned char out[OUT_CHUNK];
	copy_drop(r, p, n, buf, out);
	long stored = 0, kept = 0;
	for (size_t i = 0; i < n; i++) {
		if (out[i] == DROP_KEEP) {
			/* still mapped and write-protected: lift it (wakes its writers), free the slot */
			uffd_wp(r, p + i, 1, 0);
			region_finish(r, p + i, ST_RES, 1, 1);
			kept++;
			continue;
		}
		stored += region_finish(r, p + i, ST_STORED, 1, 1) == ST_STORED;
	}
	uffd_wake(r, p, n);
	atomic_fetch_add_explicit(&r->pageouts, (uint64_t)stored, memory_order_relaxed);
	return (long)n - kept;
}

/*
 * Page out claimed (OUT) pages [p, p+n): moved where the kernel can, the
 * rest copied (*buf: the copy's staging buffer, taken when first needed).
 * Returns pages stored or -errno.
 */
static long pageout_run(struct zs_region *r, size_t p, size_t n, unsigned char **buf)
{
	long moved = 0;
	while (r->mvfd >= 0 && r->move_out && n) {
		int pinned;
		long k = pageout_move(r, p, n, &pinned);
		if (k < 0)
			return moved ? moved : k;
		moved += k;
		p += (size_t)k;
		n -= (size_t)k;
		if (!pinned)
			break;
		p++;   /* given back resident: move the rest */
		n--;
	}
	if (!n)
		return moved;
	if (!*buf && !(*buf = buf_get(r))) {
		pageout_abort(r, p, n);
		return moved ? moved : -ENOMEM;
	}
	long rc = pageout_copy(r, p, n, *buf);
	return rc < 0 ? (moved ? moved : rc) : moved + rc;
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
		/* state first: a handler sets the referenced bit before it publishes RES */
		while (i < end && n < OUT_CHUNK && st_load(r, i) == ST_RES &&
		       !(only_cold && atomic_load_explicit(&r->ref[i], memory_order_relaxed)) &&
		       st_cas(r, i, ST_RES, ST_OUT)) {
			i++;
			n++;
		}
		void (*hook)(void *, size_t, size_t) = atomic_load_explicit(&r->pageout_hook,
									  memory_order_acquire);
		if (hook)
			hook(r->pageout_hook_arg, p, n);
		long rc = pageout_run(r, p, n, &buf);
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
			if (buf)
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
	signals_block(&old);
	long n = pageout_pages(r, p, p + len / r->page, 0);
	signals_restore(&old);
	return n;
}

/* ---- reclaim ---- */

long zs_region_reclaim(struct zs_region *r, size_t target)
{
	size_t tgt = target / r->page;
	long total = 0;
	struct zs_sigguard old;

	signals_block(&old);
	mutex_lock_ranked(&r->hlock, ZS_LOCK_REGION_HAND);
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
	mutex_unlock_ranked(&r->hlock);
	signals_restore(&old);
	atomic_fetch_add_explicit(&r->reclaimed, (uint64_t)total, memory_order_relaxed);
	return total;
}

void *region_reclaim_main(void *arg)
{
	struct zs_region *r = arg;

	/* Its runtime's thread start is done (start_threads waits for this). */
	atomic_store_explicit(&r->rready, 1, memory_order_release);
	signals_blocked_thread();   /* created with every signal blocked (region.c) */

	mutex_lock_ranked(&r->rlock, ZS_LOCK_REGION_KICK);
	while (!atomic_load(&r->stop)) {
		while (!r->rkick && !atomic_load(&r->stop))
			pthread_cond_wait(&r->rcond, &r->rlock);
		r->rkick = 0;
		if (atomic_load(&r->stop))
			break;
		mutex_unlock_ranked(&r->rlock);
		zs_region_reclaim(r, r->resident_limit * r->page / 8 * 7);
		mutex_lock_ranked(&r->rlock, ZS_LOCK_REGION_KICK);
	}
	mutex_unlock_ranked(&r->rlock);
	return NULL;
}
