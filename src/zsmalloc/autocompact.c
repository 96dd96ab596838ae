/*
 * Self-compaction (zs_pool_config.autocompact_ms, "Self-compaction" in
 * zs/zsmalloc.h): the one home of the policy that compacts a pool nobody
 * calls.  The blob store's idle compaction is this (src/blob/blob.c maps
 * its knobs here).
 *
 * Why on the page provider's purge thread: that thread already wakes for
 * idle pools to give their cached pages back, so a pool left with holes
 * after frees costs no thread of its own (a thread per pool multiplies by
 * the pools, as the blob store's did).  The provider calls autocompact_due
 * on each pass with its registry lock held (so it reads atomics only) and,
 * when a look is due, autocompact_work after dropping that lock: the work
 * takes class locks and compacts as any caller of zs_compact_step.
 *
 * Why counts and not a note on every free: zs_free and zs_malloc stay as
 * they are (no counter on their fast paths).  A look sums the class
 * copies' slot counts; while they move, the pool is busy.  The price is
 * that a program alternating exactly as many allocations as frees of one
 * class between two looks reads as idle: compaction then runs while it
 * calls, which costs time, not correctness (calls wait at most one class
 * copy's step).  The threads' heaps (owned.c) are counted only once the
 * class counts stood still for a look: counting stops each heap, and an
 * owner stopped while it frees sends its frees onto its own remote stack
 * (signature(), below).  That count also collects the frees other threads
 * left on an idle owner's remote stack, so nothing needs revoking between
 * passes.
 *
 * Why a floor: after a pass the holes left (a partly used zspage per class
 * copy) may still pass the percentage on a small pool; the next pass waits
 * for autocompact_min_bytes more holes than the last one left.
 */
#include <stdlib.h>

#include "zsmalloc/internal.h"

#define AC_MAX_PERIOD_NS 1000000000ull /* a quiet pool is looked at once a second at most */
#define AC_DEFAULT_MIN_BYTES ((size_t)256 << 10)
#define AC_STEP_CLASSES 4u

struct ac_sample {
	unsigned long long used_objs, slots, pages;
	unsigned long long class_used; /* used_objs with owned zspages counted full */
	unsigned long long used_bytes, hole_bytes;
};

void autocompact_init(struct zs_pool *pool)
{
	const struct zs_pool_config *c = &pool->cfg;
	pool->ac_idle_ns = (uint64_t)(c->autocompact_ms > 0 ? c->autocompact_ms : 0) * 1000000u;
	pool->ac_period_ns = pool->ac_idle_ns / 2 ? pool->ac_idle_ns / 2 : 1;
	pool->ac_pct = c->autocompact_pct;
	pool->ac_min_bytes = c->autocompact_min_bytes ? c->autocompact_min_bytes : AC_DEFAULT_MIN_BYTES;
	pool->ac_floor = 0;
	atomic_init(&pool->ac_next, UINT64_MAX);
	atomic_init(&pool->ac_passes, 0);
	atomic_init(&pool->ac_looks, 0);
}

void autocompact_started(struct zs_pool *pool)
{
	pool->ac_on = pool->cfg.autocompact_ms > 0 && pages_idle_on(pool->pages);
}

void autocompact_stop(struct zs_pool *pool)
{
	if (pool->ac_on)
		pages_idle_stop(pool->pages);
}

uint64_t autocompact_due(void *ctx, uint64_t now, bool *run)
{
	struct zs_pool *pool = ctx;
	uint64_t half = pool->ac_idle_ns / 2 ? pool->ac_idle_ns / 2 : 1;
	uint64_t next = atomic_load_explicit(&pool->ac_next, memory_order_relaxed);
	if (next == UINT64_MAX) {
		/* Not looked at since it held no page: again once it has some.  (Not
		 * pool->pages: the thread may get here before zs_pool_create stores it.) */
		if (!zs_get_total_pages(pool))
			return UINT64_MAX;
		next = now + half;
		atomic_store_explicit(&pool->ac_next, next, memory_order_relaxed);
		return next;
	}
	if (now < next)
		return next;
	*run = true;
	return now + half;
}

/* Process-wide, for the harness (zs_autocompact_counts): what the looks and passes cost. */
static _Atomic uint64_t ac_revocations, ac_heap_stops;

/*
 * Every class (its copies summed, under each copy's lock in turn), less,
 * with heaps, the free slots of zspages that threads own (owned.c counts
 * those wholly in use in their class): a free into an owned zspage is a
 * hole too.  The owned count comes first: it collects the heaps' remote
 * frees (heaps_look), which moves the class counts read after it.
 */
static void sample(struct zs_pool *pool, struct ac_sample *s, int heaps)
{
	memset(s, 0, sizeof(*s));
	/* No memory for the owned counts: their zspages count as wholly in use.  Mapped (zeros),
	 * not calloc'd: this runs on the purge thread, which takes no glibc arena (compact.c). */
	size_t owned_mapped = 0;
	unsigned long *owned_free = heaps && pool->owned
		? pages_table_map((size_t)pool->nr_classes * sizeof(*owned_free), &owned_mapped) : NULL;
	if (owned_free)
		atomic_fetch_add_explicit(&ac_heap_stops, heaps_look(pool, owned_free),
					  memory_order_relaxed);
	for (int i = 0; i < pool->nr_classes; i++) {
		if (pool->geom[i].phys != i)
			continue;
		unsigned long a = 0, u = 0;
		for (unsigned sh = 0; sh < pool->nr_shards; sh++) {
			struct size_class *c = &pool->classes[(size_t)sh * (unsigned)pool->nr_classes + i];
			if (!class_live(c))
				continue;
			spin_lock(&c->lock);
			a += c->stats[ZS_OBJS_ALLOCATED];
			u += c->stats[ZS_OBJS_INUSE];
			spin_unlock(&c->lock);
		}
		if (!a)
			continue;
		s->class_used += u;
		unsigned long of = owned_free ? owned_free[i] : 0;
		u -= of <= u ? of : u;
		unsigned size = pool->geom[i].size;
		s->used_objs += u;
		s->slots += a;
		s->used_bytes += (unsigned long long)u * size;
		s->hole_bytes += (unsigned long long)(a - u) * size;
	}
	pages_table_unmap(owned_free, owned_mapped);
	s->pages = zs_get_total_pages(pool);
}

/*
 * ac_sig is two signatures: the high half from the class counts and pages
 * alone (read without stopping any heap), the low half with the heaps' free
 * slots (0: not taken since the class counts last moved).  Why two: taking
 * the heaps' counts stops each heap, and an owner stopped while it frees
 * sends those frees through the class path onto its own remote stack; one
 * look during a free-all stranded a fifth to all of it there (the
 * pages stayed until the idle).  So the heaps are looked at only once the
 * class counts have stood still for a look; an owner's free-all empties
 * zspages, which moves them.
 */
static uint32_t sig32(unsigned long long used, const struct ac_sample *s)
{
	uint64_t h = 1469598103934665603ull;
	h = (h ^ used) * 1099511628211ull;
	h = (h ^ s->slots) * 1099511628211ull;
	h = (h ^ s->pages) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32)) | 1; /* never 0 */
}

static uint64_t signature(const struct ac_sample *s, int heaps)
{
	return (uint64_t)sig32(s->class_used, s) << 32 | (heaps ? sig32(s->used_objs, s) : 0);
}

/* One compaction pass, a few class copies a step, then the memory it freed goes back. */
static int run_pass(struct zs_pool *pool)
{
	unsigned cursor = 0, bound = (unsigned)pool->nr_classes * pool->nr_shards + 1;
	int whole = 1;
	do {
		/* A caller compacting already: do not spin on its flag; look again later. */
		if (atomic_load_explicit(&pool->compaction_in_progress, memory_order_relaxed)) {
			whole = 0;
			break;
		}
		zs_compact_step(pool, &cursor, AC_STEP_CLASSES);
	} while (cursor && --bound);
	/* What zs_pool_trim does (named here, not called: zsmalloc.c calls this file). */
	heaps_revoke_all(pool);
	atomic_fetch_add_explicit(&ac_revocations, 1, memory_order_relaxed);
	handles_trim(pool, 1);
	park_release_all(pool);
	pages_trim(pool->pages);
	atomic_fetch_add_explicit(&pool->ac_passes, 1, memory_order_relaxed);
	return whole && !cursor;
}

static void look_at(struct zs_pool *pool, uint64_t t)
{
	atomic_store_explicit(&pool->ac_next, t, memory_order_relaxed);
}

void autocompact_work(void *ctx)
{
	struct zs_pool *pool = ctx;
	struct ac_sample s;
	uint64_t now = pages_now_ns();
	uint64_t half = pool->ac_idle_ns / 2 ? pool->ac_idle_ns / 2 : 1;

	atomic_fetch_add_explicit(&pool->ac_looks, 1, memory_order_relaxed);
	sample(pool, &s, 0);
	uint64_t sig = signature(&s, 0);
	if (sig >> 32 != pool->ac_sig >> 32) {
		/* The class counts move: busy, and no heap stopped under its owner. */
		pool->ac_sig = sig;
		pool->ac_quiet_since = now;
		pool->ac_period_ns = half;
		look_at(pool, now + half);
		return;
	}
	if (pool->owned)
		sample(pool, &s, 1);
	sig = signature(&s, 1);
	if (s.hole_bytes < pool->ac_floor)
		pool->ac_floor = (size_t)s.hole_bytes; /* allocations filled holes: count from here */
	/* The first heap count since the class counts stood still starts from their quiet. */
	int moved = (uint32_t)pool->ac_sig && sig != pool->ac_sig;
	pool->ac_sig = sig;
	if (moved) {
		pool->ac_quiet_since = now;
		pool->ac_period_ns = half;
		look_at(pool, now + half);
		return;
	}
	if (now - pool->ac_quiet_since < pool->ac_idle_ns) {
		look_at(pool, pool->ac_quiet_since + pool->ac_idle_ns);
		return;
	}
	/*
	 * Steps from calls (the blob store's) since the last pass leave the pool
	 * compacted in the order of the moment, with the frees after them in
	 * holes under the trigger: one pass by address puts it in order.
	 */
	unsigned long comp = atomic_load_explicit(&pool->pages_compacted, memory_order_relaxed);
	int by_calls = comp != pool->ac_seen_compacted && s.hole_bytes;
	if (by_calls || (s.hole_bytes >= pool->ac_floor + pool->ac_min_bytes &&
			 s.hole_bytes * 100 >= (unsigned long long)pool->ac_pct * s.used_bytes)) {
		unsigned long long objs = s.used_objs;
		int whole = run_pass(pool);
		sample(pool, &s, 1);
		/* Compaction moves objects, never adds or frees one: a changed count is a
		 * caller's, whose frees may sit behind the pass: another one is due. */
		whole = whole && s.used_objs == objs;
		/* Its own moves are not a caller's activity. */
		pool->ac_sig = signature(&s, 1);
		if (whole) {
			pool->ac_floor = (size_t)s.hole_bytes;
			pool->ac_seen_compacted =
				atomic_load_explicit(&pool->pages_compacted, memory_order_relaxed);
		}
		pool->ac_quiet_since = now;
		pool->ac_period_ns = half;
		look_at(pool, pages_now_ns() + half);
		return;
	}
	if (!s.pages) {
		/*
		 * Nothing to compact.  Once no chunk is mapped either (cached and parked
		 * pages gone at their decay), no look until the pool has pages again: its
		 * next zspage maps a chunk, which asks the thread for a pass
		 * (autocompact_due).  Before that, a zspage may come back from a cache or
		 * a parked chain with no chunk mapped and no pass asked for.
		 */
		struct zs_pages_stats ps;
		pages_get_stats(pool->pages, &ps);
		if (!ps.chunks_mapped) {
			look_at(pool, UINT64_MAX);
			return;
		}
	}
	/* Quiet and nothing to do: look less often, up to once a second. */
	if (pool->ac_period_ns < AC_MAX_PERIOD_NS)
		pool->ac_period_ns *= 2;
	if (pool->ac_period_ns > AC_MAX_PERIOD_NS)
		pool->ac_period_ns = AC_MAX_PERIOD_NS > half ? AC_MAX_PERIOD_NS : half;
	look_at(pool, now + pool->ac_period_ns);
}

unsigned long zs_pool_autocompact_passes(const struct zs_pool *pool)
{
	return pool ? atomic_load_explicit(&((struct zs_pool *)pool)->ac_passes, memory_order_relaxed) : 0;
}

void zs_autocompact_counts(uint64_t *revocations, uint64_t *heap_stops)
{
	if (revocations)
		*revocations = atomic_load_explicit(&ac_revocations, memory_order_relaxed);
	if (heap_stops)
		*heap_stops = atomic_load_explicit(&ac_heap_stops, memory_order_relaxed);
}
