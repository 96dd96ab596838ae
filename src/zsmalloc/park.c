/*
 * Parked zspages (application profile): a zspage emptied by zs_free stays
 * whole in its class copy, on a LIFO stack, and the class's next new zspage
 * is that one.  Owns the stack, its budget accounting and its return to the
 * OS (the purge thread's hook, trims).
 *
 * Why: bench_threads' churn empties and refills ~2,400 zspages a round.  Each
 * cycle through the page provider - even its parked chains (cache.c) - cost
 * a chain walk, two provider calls with their per-CPU lock, a state change
 * per page and every page descriptor written again: 68 of the 893
 * instructions an object cost there (docs/benchmarks.md "Parked zspages").
 * Parked here the zspage keeps its pages, its chain and each page's owner:
 * taking it back is a pop and a few fields, under the class lock the
 * allocation already holds.
 *
 * Memory still goes back.  Parked pages count in the process-wide cache
 * budget like the provider's (a zspage that would take it past the bound is
 * freed as before; counted per CPU, PARK_SYNC pages at a time, so the total
 * a park reads is a line written once per 64 pages a CPU), and leave:
 *   - a decay after they were parked, by the purge thread's pass
 *     (park_reclaim, the provider's reclaim hook), even while the class
 *     stays busy; the pass holds the process registry lock, which a free
 *     path can ask for while holding a class lock (parking may start the
 *     thread), so the pass takes class locks only with a trylock and looks
 *     again soon at a class it could not take;
 *   - at once on zs_pool_trim and zs_compact (park_release_all), and when
 *     an allocation finds no pages: zs_malloc gives them all back and tries
 *     once more, as it does after flushing deferred frees.
 * They are not in the pool's page count (zs_get_total_pages), as the
 * provider's cached pages are not: the pool holds no object in them.
 *
 * Only pools whose provider parks (park_chains: per-CPU class copies, the
 * application profile; the kernel profile frees every emptied zspage, as the
 * kernel does, and its counts stay page-exact) and only zspages of the
 * class's own shape (not huge, not one-object, not fitted by compaction).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "zsmalloc/internal.h"

/* The zspage whose lnext field `link` is. */
static struct zspage *lnext_owner(struct zspage **link)
{
	return (struct zspage *)(void *)((char *)link - offsetof(struct zspage, lnext));
}

/*
 * nr is stored with release under the class lock and read with acquire by
 * the purge pass, which then touches the class (its lock, its zspages): a
 * class copy is built by whichever thread first allocates from it, so the
 * pass needs an order after that build (plain movs on x86; TSan saw it).
 */
static unsigned park_nr(const struct zs_park *pk)
{
	return atomic_load_explicit(&pk->nr, memory_order_acquire);
}

static void park_nr_set(struct zs_park *pk, unsigned nr)
{
	atomic_store_explicit(&pk->nr, nr, memory_order_release);
}

/*
 * One entry per class copy, in a mapping of its own faulted in as written,
 * like the class table (class.c): an empty pool touches none of it (an empty
 * pool holds under 32 KiB, zs/zsmalloc.h; 16 bytes a copy of a class, about
 * 60 KiB for 16 copies at 4 KiB pages).
 */
int park_init(struct zs_pool *pool)
{
	pool->park = NULL;
	pool->park_bytes = 0;
	if (pool->nr_shards == 1)
		return 0;
	pool->park = pages_table_map(sizeof(struct zs_park) * (size_t)pool->nr_classes * pool->nr_shards,
				  &pool->park_bytes);
	return pool->park ? 0 : -ENOMEM;
}

void park_destroy(struct zs_pool *pool)
{
	if (pool->park)
		pages_table_unmap(pool->park, pool->park_bytes);
	pool->park = NULL;
}

int park_zspage(struct zs_pool *pool, struct size_class *class, struct zspage *zspage)
{
	if (zspage->huge || class_single(class) || zspage->objs != class->objs_per_zspage)
		return 0;
	if (!pages_park_room(pool->pages, class->pages_per_zspage))
		return 0;
	struct zs_park *pk = &pool->park[class->enc];
	zspage->lnext = pk->top;
	zspage->huge_handle = (unsigned long)pages_now_ns(); /* when; the slot count restarts at reuse */
	pk->top = zspage;
	park_nr_set(pk, park_nr(pk) + 1);
	pages_park_note(pool->pages, (long)class->pages_per_zspage);
	return 1;
}

struct zspage *unpark_zspage(struct zs_pool *pool, struct size_class *class)
{
	struct zs_park *pk = &pool->park[class->enc];
	struct zspage *zspage = pk->top;
	if (!zspage)
		return NULL;
	pk->top = zspage->lnext;
	park_nr_set(pk, park_nr(pk) - 1);
	pages_park_note(pool->pages, -(long)class->pages_per_zspage);
	zspage_reset(zspage, 0); /* as alloc_zspage leaves a new one */
	return zspage;
}

int park_zspages(struct zs_pool *pool, struct size_class *class, struct zspage *list, unsigned n)
{
	if (!pages_park_room(pool->pages, n * class->pages_per_zspage))
		return 0;
	struct zs_park *pk = &pool->park[class->enc];
	unsigned long now = (unsigned long)pages_now_ns();
	struct zspage *z = list, *last = NULL;
	for (unsigned k = 0; k < n; k++, last = z, z = z->lnext) {
		assert_internal(z && !z->huge && z->objs == class->objs_per_zspage);
		z->huge_handle = now;
	}
	last->lnext = pk->top;
	pk->top = list;
	park_nr_set(pk, park_nr(pk) + n);
	pages_park_note(pool->pages, (long)(n * class->pages_per_zspage));
	return 1;
}

unsigned unpark_zspages(struct zs_pool *pool, struct size_class *class, struct zspage **out,
			unsigned max)
{
	struct zs_park *pk = &pool->park[class->enc];
	unsigned n = 0;
	while (n < max && pk->top) {
		struct zspage *z = pk->top;
		pk->top = z->lnext;
		zspage_reset(z, 0);
		out[n++] = z;
	}
	if (n) {
		park_nr_set(pk, park_nr(pk) - n);
		pages_park_note(pool->pages, -(long)(n * class->pages_per_zspage));
	}
	return n;
}

/*
 * Class lock held: unlink the parked zspages parked at or before `cutoff`
 * (UINT64_MAX: all) and return them as a list; *oldest gets the park time of
 * the oldest one left (UINT64_MAX: none).  The stack is newest first, so
 * everything below the first old enough one is older still.
 */
/*
 * Why: a thread takes its refills from the copy of the CPU it runs on, so one
 * that moved to another CPU left its emptied zspages parked in the old copy
 * and found the new copy's stack empty: every refill went to the page
 * provider while the old stack waited for its decay (callgrind, bench_threads'
 * churn on two CPUs, the thread moved: ~27 an op in the provider's calls).
 * The count is read without the lock, so a copy with nothing parked costs no
 * lock; the other copy's lock is taken with none held (class locks never nest).
 */
struct zspage *unpark_other_copy(struct zs_pool *pool, const struct size_class *class,
				 struct size_class **held)
{
	for (unsigned s = 0; s < pool->nr_shards; s++) {
		size_t e = (size_t)s * (unsigned)pool->nr_classes + class->index;
		struct size_class *oc = &pool->classes[e];
		/* A copy is built on its first use: before that its fields (enc too) are zero. */
		if (oc == class || !class_live(oc) || !park_nr(&pool->park[e]))
			continue;
		spin_lock(&oc->lock);
		/* A compactor revokes the heaps after it raised the flag: take nothing it must see. */
		struct zspage *z = atomic_load_explicit(&pool->compaction_in_progress, memory_order_acquire)
					   ? NULL
					   : unpark_zspage(pool, oc);
		if (z) {
			*held = oc;
			return z;
		}
		spin_unlock(&oc->lock);
		if (atomic_load_explicit(&pool->compaction_in_progress, memory_order_relaxed))
			return NULL;
	}
	return NULL;
}

static struct zspage *park_cut(struct zs_pool *pool, struct size_class *class, uint64_t cutoff,
			       bool may_kick, uint64_t *oldest)
{
	struct zs_park *pk = &pool->park[class->enc];
	struct zspage **link = &pk->top, *cut;
	while (*link && (uint64_t)(*link)->huge_handle > cutoff)
		link = &(*link)->lnext;
	cut = *link;
	*link = NULL;
	*oldest = UINT64_MAX;
	if (link != &pk->top) /* the last one kept is the oldest kept */
		*oldest = (uint64_t)lnext_owner(link)->huge_handle;
	unsigned nr = 0;
	for (struct zspage *z = cut; z; z = z->lnext)
		nr++;
	park_nr_set(pk, park_nr(pk) - nr);
	pages_park_released(pool->pages, (unsigned long)nr * class->pages_per_zspage, may_kick);
	return cut;
}

/* No lock: a cut list's pages straight back to the OS. */
static unsigned park_free_list(struct zs_pool *pool, struct zspage *z)
{
	pfn_t pfns[64];
	unsigned n = 0, pages = 0;
	while (z) {
		struct zspage *next = z->lnext;
		pfn_t pfn = z->pfn; /* the provider clears the descriptors when it hands them out */
		do {
			if (n == 64) {
				pages_release_bulk(pool->pages, pfns, n);
				n = 0;
			}
			pfns[n++] = pfn;
			pages++;
			pfn = page_desc(pool, pfn)->next;
		} while (pfn != ZS_PFN_NONE);
		z = next;
	}
	pages_release_bulk(pool->pages, pfns, n);
	return pages;
}

/*
 * Every class copy's zspages parked at or before `cutoff` (UINT64_MAX: all)
 * back to the OS; returns the pages.  With `next` (the purge thread's pass,
 * at `now` with its decay): class locks only by trylock, and *next gets when
 * to look again - the oldest zspage kept a decay on, or soon for a class
 * another thread held.
 */
static unsigned long park_release(struct zs_pool *pool, uint64_t cutoff, uint64_t now,
				  uint64_t decay_ns, uint64_t *next)
{
	unsigned long pages = 0;
	size_t n = (size_t)pool->nr_classes * pool->nr_shards;
	for (size_t e = 0; e < n; e++) {
		struct zs_park *pk = &pool->park[e];
		if (!park_nr(pk))
			continue;
		struct size_class *class = &pool->classes[e];
		uint64_t oldest;
		if (!next) {
			spin_lock(&class->lock);
		} else if (!spin_trylock(&class->lock)) {
			if (now + decay_ns / 2 < *next)
				*next = now + decay_ns / 2;
			continue;
		}
		struct zspage *cut = park_cut(pool, class, cutoff, !next, &oldest);
		spin_unlock(&class->lock);
		pages += park_free_list(pool, cut);
		if (next && oldest != UINT64_MAX && oldest + decay_ns < *next)
			*next = oldest + decay_ns;
	}
	return pages;
}

uint64_t park_reclaim(void *ctx, uint64_t now, uint64_t decay_ns)
{
	uint64_t next = UINT64_MAX;
	if (decay_ns != UINT64_MAX) /* never by time: trims only */
		park_release(ctx, now >= decay_ns ? now - decay_ns : 0, now, decay_ns, &next);
	return next;
}

unsigned long park_release_all(struct zs_pool *pool)
{
	return pool->park ? park_release(pool, UINT64_MAX, 0, 0, NULL) : 0;
}
