/*
 * Allocation side of the page provider: the per-CPU caches, the shared hot
 * cache with its decay, the run allocation and the (bulk) free paths.
 * Split from pages.c (which keeps the pool's layout, chunk mapping and
 * lookups, and their design note) because this is the part that changes
 * with caching policy; in turn split from it, along the calls (cache.h):
 * release.c (pages back to the OS) and runs.c (the search for free runs)
 * below it, trim.c (trims, the owner's parked pages) above it.  What runs
 * on every allocation and free stays in this one file, so the compiler
 * still inlines it as it did (the instruction counts of docs/benchmarks.md
 * section 3 did not move).
 *
 * Freeing.  A freed page goes to a LIFO cache of hot pages, threaded
 * through the free pages' own descriptors (so taking one out of the middle,
 * which a run allocation may need, is O(1)) and stamped with the time it
 * was freed; the list's tail is its oldest page.  A freed page that does not
 * fit under the bound goes back at once; cached pages leave from the tail
 * when the tail is older than the decay (or on a trim): they are
 * MADV_DONTNEED'd (outside the lock: the syscall and its TLB shootdown are
 * the slow part; neighbouring pages share one call) and a chunk left
 * with no page in use and none cached is unmapped, so RSS really drops.  Giving pages back at once on every free made each allocate/free
 * cycle pay a fault, a zeroed page and an madvise whose TLB flush reaches
 * every CPU running the process (as bench_threads measured); the decay keeps
 * that cost off a busy pool and still returns what an idle one stops using.
 * Calls run the decay on the way; when none come, purge.c's thread runs it
 * (pages_idle_pass, at the end of this file), and the shared caches of the
 * default-sized providers count in one process-wide budget (purge_locked).
 *
 * Per-CPU caches.  Single-page allocations and frees go through a small
 * stack of pages per CPU (current_cpu; its own lock, so a thread that
 * migrates is still correct), refilled from and drained to the shared cache
 * PCP_BATCH pages per lock round: the shared mutex is taken once per batch
 * instead of once per page, the model being the kernel's per-CPU page lists.
 * A page in a per-CPU cache keeps its bitmap bit and counts in its chunk's
 * ninuse (the chunk stays mapped) but its state says PCP, so
 * pages_valid() is false for it.  Pages-in-use is a counter per cache
 * plus one for the shared path, summed on read.
 *
 * Parked chains.  A bulk free (a zspage's pages, from zsmalloc) of up to
 * PARK_MAX_LEN pages is kept whole in this CPU's cache, on a LIFO of chains
 * of its length, linked through the pages' own descriptors, and the next
 * bulk allocation of as many pages on this CPU takes it back whole: one lock
 * round and a state change per page, where a page through the per-CPU stack
 * and the shared cache costs two moves between them with the list, bitmap
 * and chunk bookkeeping of each (a workload that frees and refills more
 * than PCP_MAX pages at a time pays those on nearly every page:
 * bench_threads' churn, docs/benchmarks.md "Parked chains").  Parked pages
 * are per-CPU pages in every other way (state PCP, bitmap bit and ninuse
 * kept), count in the cache's nheld (so the purge thread's idle pass gives
 * them back with the rest of an idle cache, those parked a decay ago or
 * more even from a busy one, and a trim all at once) and in the
 * process-wide budget (to within PARK_SYNC pages a cache): a free that
 * would take the budget past its bound is not parked.  Only providers in
 * the budget park, only those created with park_chains (zsmalloc's pools
 * with per-CPU class copies: their zspages mostly empty and refill on one
 * CPU; with one copy of each class, two threads' zspages empty on either
 * CPU and would pile up parked on one while the other allocates anew), and
 * none while allocations take the slow path (slow_only: a page limit or
 * injected failures).
 */
#include "pages/internal.h"
#include "pages/cache.h"
#include "common/hints.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


/* ---- hot cache (lock held) -------------------------------------------- */

static void cache_unlink(struct zs_pages *p, pfn_t pfn)
{
	struct zs_page_desc *d = zs_page_desc(p, pfn);
	pfn_t prev = (pfn_t)d->word[0], next = d->next;

	assert_internal(get_state(p, pfn) == PG_CACHED && p->ncached > 0 &&
			   p->chunks[pfn_slot(p, pfn)].ncached > 0);
	if (prev != ZS_PFN_NONE)
		zs_page_desc(p, prev)->next = next;
	else
		p->cache_head = next;
	if (next != ZS_PFN_NONE)
		zs_page_desc(p, next)->word[0] = (uintptr_t)prev;
	else
		p->cache_tail = prev;
	p->ncached--;
	p->chunks[pfn_slot(p, pfn)].ncached--;
}

/* word[0]: previous (hotter) page, next: the colder one, word[1]: when it was freed. */
static void cache_push(struct zs_pages *p, pfn_t pfn, uint64_t now)
{
	struct zs_page_desc *d = zs_page_desc(p, pfn);

	d->word[0] = (uintptr_t)ZS_PFN_NONE;
	d->word[1] = (uintptr_t)now;
	d->next = p->cache_head;
	if (p->cache_head != ZS_PFN_NONE)
		zs_page_desc(p, p->cache_head)->word[0] = (uintptr_t)pfn;
	else
		p->cache_tail = pfn;
	p->cache_head = pfn;
	p->ncached++;
	p->chunks[pfn_slot(p, pfn)].ncached++;
}

/* ---- time, counters, decay (lock held unless said) -------------------- */

static inline bool expired(const struct zs_pages *p, uint64_t stamp, uint64_t now)
{
	return stamp != NO_TIME && now > stamp && now - stamp >= p->decay_ns;
}

static void note_oldest(struct zs_pages *p)
{
	uint64_t t = p->cache_tail == ZS_PFN_NONE ? NO_TIME
						   : (uint64_t)zs_page_desc(p, p->cache_tail)->word[1];
	atomic_store_explicit(&p->oldest_ns, t, memory_order_relaxed);
}


/*
 * Bring the process-wide budget (purge.c) up to date with this shared
 * cache; returns the bytes all budgeted caches are over it, and sets
 * *started when this took their total to PURGE_START_BYTES.  Once per lock
 * round, not per page: the total is one cache line every pool writes.
 */
static size_t budget_sync(struct zs_pages *p, bool *started)
{
	if (!p->budget)
		return 0;
	long d = (long)p->ncached - (long)p->budget_pages;
	p->budget_pages = p->ncached;
	return purge_budget_add(d * (long)p->page_size, started);
}

/*
 * Lock held: should the purge thread hear of this round?  When the cached
 * pages reached PURGE_START_BYTES: the budget's total (started), or this
 * cache alone when it is outside the budget; and at the first cached page
 * after a fork (rekick).
 */
static void note_kick(struct zs_pages *p, bool started)
{
	if (!p->registered)
		return;
	bool above = p->budget ? started : (size_t)p->ncached * p->page_size >= PURGE_START_BYTES;
	if ((above && !p->above) || (p->rekick && p->ncached)) {
		p->kick = true;
		p->rekick = false;
	}
	if (!p->budget)
		p->above = above;
}

/* Lock held: did this round ask for the purge thread?  The caller kicks after unlock. */
static bool take_kick(struct zs_pages *p)
{
	bool k = p->kick;
	p->kick = false;
	return k;
}

void pages_kick(struct zs_pages *p)
{
	purge_kick(now_ns() + p->decay_ns, pages_idle_pass);
}

/*
 * Take pages off the cache's cold end for release: all of them (force), or
 * while the cache is over its bound or the process-wide budget, or its tail
 * has outlived the decay.  Over the budget a provider gives up its own
 * coldest pages: a pool that frees keeps the pages it just freed hot.  They
 * become RELEASING with their bitmap bit set, so their chunk can be neither
 * reused nor unmapped until pages_release() is done.  At most max pages.
 * Every lock round that changes the shared cache ends here, so this is
 * also where the budget is settled and the cache reaching the purge
 * thread's start is noted (note_kick, take_kick).
 */
static unsigned purge_locked(struct zs_pages *p, uint64_t now, bool force, pfn_t *rel,
			     unsigned max)
{
	unsigned n = 0;
	bool started = false;
	size_t gover = budget_sync(p, &started);

	while (n < max && p->cache_tail != ZS_PFN_NONE) {
		pfn_t pfn = p->cache_tail;
		bool over = p->ncached > p->cache_cap || gover > 0;
		bool old = expired(p, (uint64_t)zs_page_desc(p, pfn)->word[1], now);
		if (!force && !over && !old)
			break;
		size_t slot = pfn_slot(p, pfn);
		cache_unlink(p, pfn);
		bm_set(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		p->chunks[slot].ninuse++;
		set_state(p, pfn, PG_RELEASING);
		releasing_take(p);
		if (!force && !over)
			p->decayed++;
		gover = gover > p->page_size ? gover - p->page_size : 0;
		rel[n++] = pfn;
	}
	budget_sync(p, NULL);
	note_kick(p, started);
	note_oldest(p);
	return n;
}

/* Lock NOT held: release what the bound and the decay (or force: everything) say must go. */
void pages_purge(struct zs_pages *p, bool force)
{
	pfn_t rel[RELEASE_MAX];
	unsigned n;

	do {
		mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
		n = purge_locked(p, now_ns(), force, rel, RELEASE_MAX);
		mutex_unlock_ranked(&p->lock);
		pages_release(p, rel, n);
	} while (n == RELEASE_MAX);
}

/* ---- allocation ------------------------------------------------------- */

/* Lock held. Decides limit / injected failure for an allocation of n pages. */
static bool alloc_allowed(struct zs_pages *p, unsigned n)
{
	if (p->max_pages && total_in_use(p) + n > p->max_pages)
		return false;
	if (p->fi_on && p->fi_after == 0) {
		if (!p->fi_forever && --p->fi_count == 0) {
			p->fi_on = false;
			set_slow_only(p);
		}
		return false;
	}
	return true;
}

/* Lock held: mark [first, first+n) of one chunk in use. */
static void take_pages(struct zs_pages *p, pfn_t first, unsigned n)
{
	size_t slot = pfn_slot(p, first);
	struct zs_page_desc *m = meta_desc(p, slot);
	uint64_t *bits = meta_bits(p, m);

	for (unsigned i = 0; i < n; i++) {
		pfn_t pfn = first + i;
		/* Only a free page is handed out: never one in use, in a per-CPU cache or leaving. */
		assert_internal((get_state(p, pfn) == PG_FREE || get_state(p, pfn) == PG_CACHED) &&
				   !(bits[pfn_idx(p, pfn) >> 6] & (1ull << (pfn_idx(p, pfn) & 63))));
		if (get_state(p, pfn) == PG_CACHED)
			cache_unlink(p, pfn);
		bm_set(bits, pfn_idx(p, pfn));
		set_state(p, pfn, PG_IN_USE);
	}
	p->chunks[slot].ninuse += n;
	if (p->chunks[slot].ninuse == p->ppc)
		bm_clr(p->partial_bm, slot);

	atomic_store_explicit(&p->in_use,
			      atomic_load_explicit(&p->in_use, memory_order_relaxed) + (long)n,
			      memory_order_relaxed);
	if (!p->npcp)
		note_peak(p);
	p->allocs++;
	if (p->fi_on)
		p->fi_after--;
}

/* Lock held: the hottest cached page, else a never-used or released one, else a new chunk. */
static bool pick_pages(struct zs_pages *p, unsigned n, pfn_t *out)
{
	if (n == 1 && p->cache_head != ZS_PFN_NONE) {
		*out = p->cache_head;
		return true;
	}
	if (pages_find_run(p, n, out))
		return true;
	long slot = pages_chunk_map(p);
	if (slot < 0)
		return false;
	*out = (pfn_t)slot << p->lk.ppc_shift;
	return true;
}

static int alloc_locked(struct zs_pages *p, unsigned n, pfn_t *out)
{
	pfn_t pfn;

	if (!alloc_allowed(p, n))
		return -ENOMEM;
	if (!pick_pages(p, n, &pfn))
		return -ENOMEM;
	take_pages(p, pfn, n);
	*out = pfn;
	return 0;
}

/* ---- per-CPU caches --------------------------------------------------- */

/* Macros so a lock-order report (ZS_DEBUG) names the caller's line. */
#define pcp_lock(c) pcp_lock_at((c), __FILE__, __LINE__)
#define pcp_unlock(c) pcp_unlock_at((c), __FILE__, __LINE__)

static inline void pcp_lock_at(struct zs_pcp *c, const char *file, int line)
{
	unsigned spins = 0;
	lock_take_at(c, ZS_LOCK_PAGES_PCP, file, line);
	while (unlikely(atomic_exchange_explicit(&c->lock, 1, memory_order_acquire))) {
		/* past the spins: another thread on this CPU slot was preempted holding it */
		while (atomic_load_explicit(&c->lock, memory_order_relaxed))
			spin_wait(&spins);
	}
}

static inline void pcp_unlock_at(struct zs_pcp *c, const char *file, int line)
{
	lock_drop_at(c, file, line);
	atomic_store_explicit(&c->nheld, c->count + c->nparked, memory_order_relaxed);
	atomic_store_explicit(&c->lock, 0, memory_order_release);
}

static inline void add_relaxed_u64(_Atomic uint64_t *v, uint64_t d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/*
 * Both locks held: move up to PCP_BATCH pages from the shared side into an
 * empty per-CPU cache, hottest on top; collect what the decay says to
 * release into rel.  Returns the pages moved.
 */
static unsigned pcp_refill_locked(struct zs_pages *p, struct zs_pcp *c, pfn_t *rel,
				  unsigned *nrel)
{
	pfn_t got[PCP_BATCH];
	unsigned n = 0;

	while (n < PCP_BATCH) {
		pfn_t pfn;
		if (!pick_pages(p, 1, &pfn))
			break;
		size_t slot = pfn_slot(p, pfn);
		assert_internal(get_state(p, pfn) == PG_FREE || get_state(p, pfn) == PG_CACHED);
		if (get_state(p, pfn) == PG_CACHED)
			cache_unlink(p, pfn);
		bm_set(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_PCP);
		if (++p->chunks[slot].ninuse == p->ppc)
			bm_clr(p->partial_bm, slot);
		got[n++] = pfn;
	}
	for (unsigned i = n; i-- > 0;)
		c->pfn[c->count++] = got[i];
	note_peak(p);
	*nrel = purge_locked(p, now_ns(), false, rel, RELEASE_MAX);
	return n;
}

/*
 * Both locks held: move the k coldest pages of a per-CPU cache to the shared
 * cache.  What does not fit under the bound is released straight away (it
 * keeps its bitmap bit and ninuse, as RELEASING pages must), rather than
 * pushed and pushed out again; so is everything when `release` (the purge
 * thread emptying an idle cache).  Returns the pages to release, in rel
 * (k <= RELEASE_MAX).
 */
static unsigned pcp_drain_locked(struct zs_pages *p, struct zs_pcp *c, unsigned k, pfn_t *rel,
				 bool release)
{
	uint64_t now = now_ns();
	size_t room = p->cache_cap > p->ncached ? p->cache_cap - p->ncached : 0;
	unsigned nrel = 0, ndirect = release ? k : k > room ? (unsigned)(k - room) : 0;

	assert_internal(k <= c->count && c->count <= PCP_MAX);
	for (unsigned i = 0; i < k; i++) {
		pfn_t pfn = c->pfn[i];
		size_t slot = pfn_slot(p, pfn);
		assert_internal(get_state(p, pfn) == PG_PCP && p->chunks[slot].ninuse > 0);
		if (i < ndirect) {
			set_state(p, pfn, PG_RELEASING);
			releasing_take(p);
			rel[nrel++] = pfn;
			continue;
		}
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_CACHED);
		cache_push(p, pfn, now);
		p->chunks[slot].ninuse--;
		pages_partial_set(p, slot);
	}
	memmove(c->pfn, c->pfn + k, (c->count - k) * sizeof(c->pfn[0]));
	c->count -= k;
	note_peak(p);
	return nrel + purge_locked(p, now, false, rel + nrel, RELEASE_MAX - nrel);
}

/*
 * A page freed into a per-CPU cache: in use -> PCP, or false for a pfn out
 * of range, in no chunk, or not in use.  The state is the owner's proof: a
 * double or foreign free (a repeated pfn in one call too) fails here.
 */
static inline bool pcp_claim(struct zs_pages *p, pfn_t pfn)
{
	if (pfn >= p->pfn_limit)
		return false;
	struct zs_page_desc *m = meta_desc(p, pfn_slot(p, pfn));
	uint8_t st = PG_IN_USE;
	return m && atomic_compare_exchange_strong_explicit(meta_state(p, m) + pfn_idx(p, pfn), &st,
							    PG_PCP, memory_order_relaxed,
							    memory_order_relaxed);
}

/* ---- parked chains (the cache's lock held) ------------------------------- */

/*
 * The process budget to within PARK_SYNC pages of this cache's parked pages
 * (exact: to the page); true when that took the budget's total to the purge
 * thread's start (the caller kicks after its locks are dropped).
 */
static bool park_sync(struct zs_pages *p, struct zs_pcp *c, bool exact)
{
	long d = (long)c->nparked - (long)c->park_synced;
	bool started = false;
	if (d == 0 || (!exact && d < (long)PARK_SYNC && d > -(long)PARK_SYNC))
		return false;
	purge_budget_add(d * (long)p->page_size, &started);
	c->park_synced = c->nparked;
	return started;
}

/*
 * Park a bulk free's n pages as one chain; false, with nothing changed, when
 * it is not to be parked or a page is not in use (the per-page path then
 * frees what it can and skips the rest, as for any bulk free).
 */
/* Parking n more pages keeps within the budget (to within a sync), and none is slow-path only. */
bool pages_park_fits(struct zs_pages *p, unsigned n)
{
	return !atomic_load_explicit(&p->slow_only, memory_order_relaxed) &&
	       purge_budget_room((size_t)(n + PARK_SYNC) * p->page_size);
}

/* A forked child has no thread yet, whatever the inherited total says: the first park asks. */
bool pages_take_park_rekick(struct zs_pages *p)
{
	return unlikely(atomic_load_explicit(&p->park_rekick, memory_order_relaxed)) &&
	       atomic_exchange_explicit(&p->park_rekick, false, memory_order_relaxed);
}

static bool park_chain(struct zs_pages *p, struct zs_pcp *c, const pfn_t *pfns, unsigned n)
{
	if (n == 0 || n > PARK_MAX_LEN || !p->park || !pages_park_fits(p, n))
		return false;
	unsigned i = 0;
	while (i < n && pcp_claim(p, pfns[i]))
		i++;
	if (i < n) {
		while (i--)
			set_state(p, pfns[i], PG_IN_USE);
		return false;
	}
	for (i = 0; i < n; i++)
		zs_page_desc(p, pfns[i])->next = i + 1 < n ? pfns[i + 1] : ZS_PFN_NONE;
	struct zs_page_desc *d = zs_page_desc(p, pfns[0]);
	d->word[0] = (uintptr_t)c->park[n];
	d->word[1] = (uintptr_t)now_ns(); /* the idle pass gives back what waits past the decay */
	c->park[n] = pfns[0];
	c->nparked += n;
	return true;
}

/* A parked chain of n pages into out, in use again; false when there is none. */
static inline bool park_pop(struct zs_pages *p, struct zs_pcp *c, unsigned n, pfn_t *out)
{
	if (n == 0 || n > PARK_MAX_LEN || c->park[n] == ZS_PFN_NONE)
		return false;
	pfn_t pfn = c->park[n];
	c->park[n] = (pfn_t)zs_page_desc(p, pfn)->word[0];
	for (unsigned i = 0; i < n; i++) {
		assert_internal(pfn != ZS_PFN_NONE && get_state(p, pfn) == PG_PCP);
		out[i] = pfn;
		pfn_t next = zs_page_desc(p, pfn)->next;
		set_state(p, pfn, PG_IN_USE);
		pfn = next;
	}
	c->nparked -= n;
	return true;
}

/*
 * Lock NOT held: cache c's parked chains parked at or before `cutoff`
 * (UINT64_MAX: all of them) go to the OS, whole chains, RELEASE_MAX pages a
 * lock round (state RELEASING, bitmap bit and ninuse kept, as
 * pcp_drain_locked releases).  With `ops` not UINT64_MAX, only while the
 * cache is unused since its operation count was `ops` (the idle pass).
 * Each list is a stack, so whatever lies below a chain parked before the
 * cut-off is older still: the walk stops at the first one.  `decay`: they
 * count as the decay's (the purge thread), not a trim's.  Returns the pages
 * released.
 */
static uint64_t pcp_ops(struct zs_pcp *c);
static unsigned park_release(struct zs_pages *p, struct zs_pcp *c, uint64_t cutoff, uint64_t ops,
			     bool decay)
{
	pfn_t rel[RELEASE_MAX];
	unsigned total = 0;
	for (unsigned n = 1; n <= PARK_MAX_LEN; n++) {
		for (;;) {
			pcp_lock(c);
			if (ops != UINT64_MAX && pcp_ops(c) != ops) {
				pcp_unlock(c);
				return total;
			}
			/* The first chain parked by the cut-off, and the chain above it (or none). */
			pfn_t above = ZS_PFN_NONE, cur = c->park[n];
			while (cur != ZS_PFN_NONE && (uint64_t)zs_page_desc(p, cur)->word[1] > cutoff) {
				above = cur;
				cur = (pfn_t)zs_page_desc(p, cur)->word[0];
			}
			if (cur == ZS_PFN_NONE) {
				pcp_unlock(c);
				break;
			}
			unsigned nrel = 0;
			mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
			while (cur != ZS_PFN_NONE && nrel + n <= RELEASE_MAX) {
				pfn_t pfn = cur;
				cur = (pfn_t)zs_page_desc(p, cur)->word[0];
				for (unsigned i = 0; i < n; i++) {
					pfn_t next = zs_page_desc(p, pfn)->next;
					assert_internal(get_state(p, pfn) == PG_PCP);
					set_state(p, pfn, PG_RELEASING);
					releasing_take(p);
					rel[nrel++] = pfn;
					pfn = next;
				}
				c->nparked -= n;
			}
			if (above == ZS_PFN_NONE)
				c->park[n] = cur;
			else
				zs_page_desc(p, above)->word[0] = (uintptr_t)cur;
			if (decay)
				p->decayed += nrel;
			mutex_unlock_ranked(&p->lock);
			(void)park_sync(p, c, c->nparked == 0); /* the budget goes down: no start */
			pcp_unlock(c);
			pages_release(p, rel, nrel);
			total += nrel;
		}
	}
	return total;
}

/* Every DECAY_CHECK_OPS operations of a per-CPU cache: is the shared cache's tail stale? */
static void maybe_decay(struct zs_pages *p)
{
	if (expired(p, atomic_load_explicit(&p->oldest_ns, memory_order_relaxed), now_ns()))
		pages_purge(p, false);
}

/*
 * Up to n pages from this CPU's cache in one lock round, refilling it at
 * most once (so one rel array holds what the refill's decay releases);
 * returns how many, popped from the cache's hot end one after another, or
 * (park: a bulk allocation) a chain of n pages parked by a bulk free here.
 * Always inlined: each caller's n is a constant or its own loop bound, so
 * the single-page path (pcp_alloc) costs no more than a copy written for it.
 */
static inline __attribute__((always_inline)) unsigned pcp_alloc_bulk(struct zs_pages *p,
									unsigned n, pfn_t *out,
									bool park)
{
	struct zs_pcp *c = this_pcp(p);
	pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0, got = 0;
	bool check, started = false, refilled = false;

	pcp_lock(c);
	if (park && park_pop(p, c, n, out)) {
		got = n;
		started = park_sync(p, c, false);
	}
	while (got < n) {
		if (unlikely(c->count == 0)) {
			if (refilled)
				break;
			refilled = true;
			mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
			unsigned r = pcp_refill_locked(p, c, rel, &nrel);
			if (!r)
				p->failed++;
			/* Only after a fork can taking pages ask for the thread (rekick). */
			started |= take_kick(p);
			mutex_unlock_ranked(&p->lock);
			if (!r)
				break;
		}
		pfn_t pfn = c->pfn[--c->count];
		assert_internal(get_state(p, pfn) == PG_PCP);
		set_state(p, pfn, PG_IN_USE);
		out[got++] = pfn;
	}
	add_relaxed(&c->in_use, (long)got);
	add_relaxed_u64(&c->allocs, got);
	c->ops += got;
	check = c->ops >= DECAY_CHECK_OPS;
	if (check)
		c->ops = 0;
	pcp_unlock(c);
	pages_release(p, rel, nrel);
	/* Kicks take the registry lock, which comes before a per-CPU cache's. */
	if (started)
		pages_kick(p);
	if (check && !nrel)
		maybe_decay(p);
	return got;
}

/* One page from this CPU's cache (the bulk path with n = 1, which the compiler folds). */
static int pcp_alloc(struct zs_pages *p, pfn_t *out)
{
	return pcp_alloc_bulk(p, 1, out, false) ? 0 : -ENOMEM;
}

/* Free n single pages into this CPU's cache, or (park: a bulk free) park them as one
 * chain; invalid or repeated pfns are skipped. */
static void pcp_free(struct zs_pages *p, const pfn_t *pfns, unsigned n, bool park)
{
	struct zs_pcp *c = this_pcp(p);
	pfn_t rel[2 * RELEASE_MAX];
	unsigned nrel = 0, nfreed = 0;
	bool check, started = false;

	pcp_lock(c);
	unsigned each = n; /* pages for the per-page path */
	if (park && park_chain(p, c, pfns, n)) {
		nfreed = n;
		started = park_sync(p, c, false);
		if (pages_take_park_rekick(p))
			started = true;
		each = 0;
	}
	for (unsigned i = 0; i < each; i++) {
		pfn_t pfn = pfns[i];
		if (!pcp_claim(p, pfn))
			continue;
		if (c->count == PCP_MAX) {
			/* At most two drains per call (n <= 64): rel has room for both. */
			mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
			nrel += pcp_drain_locked(p, c, PCP_BATCH, rel + nrel, false);
			started |= take_kick(p);
			mutex_unlock_ranked(&p->lock);
		}
		c->pfn[c->count++] = pfn;
		nfreed++;
	}
	add_relaxed(&c->in_use, -(long)nfreed);
	add_relaxed_u64(&c->frees, nfreed);
	c->ops += n;
	check = c->ops >= DECAY_CHECK_OPS;
	if (check)
		c->ops = 0;
	pcp_unlock(c);
	pages_release(p, rel, nrel < RELEASE_MAX ? nrel : RELEASE_MAX);
	if (nrel > RELEASE_MAX)
		pages_release(p, rel + RELEASE_MAX, nrel - RELEASE_MAX);
	if (started)
		pages_kick(p);
	if (check && !nrel)
		maybe_decay(p);
}

/* Lock NOT held: every per-CPU cache's pages back to the shared cache. */
void pages_pcp_drain_all(struct zs_pages *p)
{
	pfn_t rel[RELEASE_MAX];

	for (unsigned i = 0; i < p->npcp; i++) {
		struct zs_pcp *c = &p->pcp[i];
		unsigned nrel = 0;
		pcp_lock(c);
		if (c->count) {
			mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
			nrel = pcp_drain_locked(p, c, c->count, rel, false);
			/* Only a trim drains all, and it empties the shared cache next. */
			(void)take_kick(p);
			mutex_unlock_ranked(&p->lock);
		}
		pcp_unlock(c);
		pages_release(p, rel, nrel);
		park_release(p, c, UINT64_MAX, UINT64_MAX, false);
	}
}

int pages_alloc_run(struct zs_pages *p, unsigned n, pfn_t *first)
{
	pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0;

	if (!p || !first || n == 0 || n > ZS_MAX_RUN)
		return -EINVAL;
	if (n == 1 && p->npcp && !atomic_load_explicit(&p->slow_only, memory_order_relaxed)) {
		int rc = pcp_alloc(p, first);
		if (rc)
			return rc;
		memset(zs_page_desc(p, *first), 0, sizeof(struct zs_page_desc));
		return 0;
	}
	if (n > p->ppc) {
		mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
		p->failed++;
		mutex_unlock_ranked(&p->lock);
		return -ENOMEM;
	}
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	int rc = alloc_locked(p, n, first);
	if (rc)
		p->failed++;
	nrel = purge_locked(p, now_ns(), false, rel, RELEASE_MAX);
	bool started = take_kick(p);
	mutex_unlock_ranked(&p->lock);
	pages_release(p, rel, nrel);
	if (started)
		pages_kick(p);
	if (rc)
		return rc;
	/* The pages are ours now: nobody else writes these descriptors. */
	memset(zs_page_desc(p, *first), 0, n * sizeof(struct zs_page_desc));
	return 0;
}

int pages_alloc(struct zs_pages *p, pfn_t *pfn)
{
	return pages_alloc_run(p, 1, pfn);
}

int pages_alloc_bulk(struct zs_pages *p, unsigned n, pfn_t *pfns)
{
	unsigned got = 0;

	if (!p || !pfns || n == 0 || n > ZS_FREE_BULK_MAX)
		return -EINVAL;
	/* The per-CPU path, as pages_alloc_run takes it for one page; the rest one by one. */
	if (p->npcp && !atomic_load_explicit(&p->slow_only, memory_order_relaxed)) {
		got = pcp_alloc_bulk(p, n, pfns, true);
		for (unsigned i = 0; i < got; i++)
			memset(zs_page_desc(p, pfns[i]), 0, sizeof(struct zs_page_desc));
	}
	for (; got < n; got++) {
		if (pages_alloc_run(p, 1, &pfns[got])) {
			pages_free_bulk(p, pfns, got);
			return -ENOMEM;
		}
	}
	return 0;
}

/* ---- freeing ---------------------------------------------------------- */

_Static_assert(ZS_MAX_RUN <= ZS_FREE_BULK_MAX, "a run must fit one free_pages call");
_Static_assert(ZS_FREE_BULK_MAX <= RELEASE_MAX, "a free's pages must fit one release");
_Static_assert(ZS_FREE_BULK_MAX <= 2 * PCP_BATCH, "pcp_free drains at most twice");

/*
 * The shared free path, for runs, and for single and bulk frees when there
 * are no per-CPU caches: the pages go to the hot cache, stamped now, while
 * it has room under the bound; the rest, and what the decay pushes out of
 * the cache's cold end, is released.
 *
 * whole: the pfns are one run, freed all or not at all (any invalid page
 * and the run is ignored) and counted as one free.  Otherwise each double,
 * foreign or repeated pfn is skipped and every page freed counts.
 */
static void free_pages(struct zs_pages *p, const pfn_t *pfns, unsigned n, bool whole)
{
	pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0, nfreed = 0;

	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	for (unsigned i = 0; whole && i < n; i++) {
		if (!pages_valid(p, pfns[i])) {
			mutex_unlock_ranked(&p->lock);
			return;
		}
	}
	uint64_t now = now_ns();
	for (unsigned i = 0; i < n; i++) {
		pfn_t pfn = pfns[i];
		if (!pages_valid(p, pfn))
			continue;
		nfreed++;
		if (p->ncached >= p->cache_cap) {
			/* Bit and ninuse stay: the chunk can be neither reused nor unmapped meanwhile. */
			set_state(p, pfn, PG_RELEASING);
			releasing_take(p);
			rel[nrel++] = pfn;
			continue;
		}
		size_t slot = pfn_slot(p, pfn);
		assert_internal(p->chunks[slot].ninuse > 0);
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_CACHED);
		cache_push(p, pfn, now);
		p->chunks[slot].ninuse--;
		pages_partial_set(p, slot);
	}
	add_relaxed(&p->in_use, -(long)nfreed);
	p->frees += whole ? 1 : nfreed;
	nrel += purge_locked(p, now, false, rel + nrel, RELEASE_MAX - nrel);
	bool started = take_kick(p);
	mutex_unlock_ranked(&p->lock);
	pages_release(p, rel, nrel);
	if (nrel == RELEASE_MAX)
		pages_purge(p, false);
	if (started)
		pages_kick(p);
}

void pages_free(struct zs_pages *p, pfn_t pfn)
{
	if (!p)
		return;
	uint64_t t0 = pages_release_begin(1);
	if (p->npcp)
		pcp_free(p, &pfn, 1, false);
	else
		free_pages(p, &pfn, 1, true);
	pages_release_end(t0, 1);
}

void pages_free_run(struct zs_pages *p, pfn_t first, unsigned n)
{
	pfn_t run[ZS_MAX_RUN];

	/* Only what pages_alloc_run hands out: up to ZS_MAX_RUN pages of one chunk. */
	if (!p || n == 0 || n > ZS_MAX_RUN || n > p->ppc || first >= p->pfn_limit ||
	    first + n > p->pfn_limit || pfn_slot(p, first) != pfn_slot(p, first + n - 1))
		return;
	if (n == 1 && p->npcp) {
		pcp_free(p, &first, 1, false);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		run[i] = first + i;
	free_pages(p, run, n, true);
}

void pages_free_bulk(struct zs_pages *p, const pfn_t *pfns, unsigned n)
{
	if (!p || !pfns)
		return;
	uint64_t t0 = pages_release_begin(n);
	/* Bounded stack use: larger batches go in pieces. */
	for (unsigned i = 0; i < n; i += ZS_FREE_BULK_MAX) {
		unsigned k = n - i < ZS_FREE_BULK_MAX ? n - i : ZS_FREE_BULK_MAX;
		if (p->npcp)
			pcp_free(p, pfns + i, k, true);
		else
			free_pages(p, pfns + i, k, false);
	}
	pages_release_end(t0, n);
}

/* ---- maintenance ------------------------------------------------------ */

/* ---- the purge thread's pass (purge.c; registry lock held) ------------- */

static uint64_t pcp_ops(struct zs_pcp *c)
{
	return atomic_load_explicit(&c->allocs, memory_order_relaxed) +
	       atomic_load_explicit(&c->frees, memory_order_relaxed);
}

/* Give a per-CPU cache's pages to the OS, unless it was used since `ops` was read. */
static void pcp_release_idle(struct zs_pages *p, struct zs_pcp *c, uint64_t ops)
{
	pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0;

	pcp_lock(c);
	if (c->count && pcp_ops(c) == ops) {
		mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
		p->decayed += c->count;
		nrel = pcp_drain_locked(p, c, c->count, rel, true);
		mutex_unlock_ranked(&p->lock);
	}
	pcp_unlock(c);
	pages_release(p, rel, nrel);
	park_release(p, c, UINT64_MAX, ops, true);
}

/* ---- the owner's parked pages (pages.h, zs_pages_park_*) ------------------ */

/*
 * The purge thread's pass over one provider (purge.c runs it, registry lock
 * held): per-CPU caches idle for decay_ms are emptied straight to the OS,
 * shared pages older than decay_ms go too.  Returns when the provider next
 * needs a look, NO_TIME when it caches nothing.
 *
 * A per-CPU cache has no time stamps (its hot path reads no clock), so the
 * thread watches its operation count: unchanged for decay_ms, it is idle
 * and its pages go.  While it holds pages the count is sampled at least
 * every decay_ms / 2, so they go between 1 and 1.5 decays after its last
 * use.  Shared pages go by their own stamps, as in any call's decay.
 */
uint64_t pages_idle_pass(struct zs_pages *p, uint64_t now)
{
	uint64_t next = NO_TIME;

	/* The owner's parked pages first: what it gives back lands nowhere but the OS. */
	if (p->reclaim) {
		uint64_t due = p->reclaim(p->reclaim_ctx, now, p->decay_ns);
		if (due < next)
			next = due;
	}
	if (p->idle_due) {
		bool run = false;
		uint64_t due = p->idle_due(p->idle_ctx, now, &run);
		if (run)
			p->idle_run = true; /* purge.c runs idle_work once this pass drops its lock */
		if (due < next)
			next = due;
	}

	for (unsigned i = 0; i < p->npcp; i++) {
		struct zs_pcp *c = &p->pcp[i];
		uint64_t ops = pcp_ops(c);
		if (ops != c->seen_ops) {
			c->seen_ops = ops;
			c->seen_ns = now;
		}
		if (!atomic_load_explicit(&c->nheld, memory_order_relaxed))
			continue;
		/* Parked a decay ago or more: they go though the cache is busy (a CPU that frees
		 * zspages another CPU allocates again would otherwise keep them while it runs). */
		if (p->park && now >= p->decay_ns)
			park_release(p, c, now - p->decay_ns, UINT64_MAX, true);
		uint64_t due = c->seen_ns + p->decay_ns;
		if (now >= due) {
			pcp_release_idle(p, c, ops);
			if (!atomic_load_explicit(&c->nheld, memory_order_relaxed))
				continue;
			due = NO_TIME; /* used meanwhile: look again soon */
		}
		uint64_t soon = now + p->decay_ns / 2;
		if (soon < due)
			due = soon;
		if (due < next)
			next = due;
	}
	pages_purge(p, false);
	uint64_t oldest = atomic_load_explicit(&p->oldest_ns, memory_order_relaxed);
	if (oldest != NO_TIME && oldest + p->decay_ns < next)
		next = oldest + p->decay_ns;
	return next;
}
