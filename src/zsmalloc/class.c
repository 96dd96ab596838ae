/*
 * Size-class table: the class delta policy, the chain-length policies, and
 * the kernel's top-down class merging.  This is the one place these rules
 * live; `zs classes`, `zs testmod` and the allocator all read the table built
 * here (through zs_class_info), so there is no second copy of the arithmetic.
 * Each class, and each CPU's copy of it, is built on its first allocation
 * (alloc_class), so a pool costs its table only where it is used.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zsmalloc/internal.h"

/* ---- policies ---- */

/* One chain_<fn> per registered chain policy (zs/zsmalloc.h), dispatched by
 * value through chain_fns below; declared here so one may be written anywhere
 * in this file. */
#define CHAIN_DECL(id, fn, name, help) \
	static unsigned chain_##fn(unsigned size, unsigned page_size, unsigned max_chain);
ZS_CHAIN_POLICIES(CHAIN_DECL)

/* Kernel: PAGE_SIZE >> CLASS_BITS(8), at least 16.  Seed 002 patch 1: a fixed 16 at any page size. */
static unsigned class_delta(const struct zs_pool_config *cfg, unsigned page_size)
{
	if (cfg->class_delta)
		return cfg->class_delta;
	unsigned d = page_size >> 8;
	return d < 16 ? 16 : d;
}

static int is_pow2(unsigned x)
{
	return x && !(x & (x - 1));
}

/* Kernel today: the chain length in 1..max with the least tail waste; smallest on ties. */
static unsigned chain_exhaustive(unsigned size, unsigned page_size, unsigned max_chain)
{
	unsigned best = 1, min_waste = UINT_MAX;
	if (is_pow2(size))
		return 1;
	for (unsigned i = 1; i <= max_chain; i++) {
		unsigned waste = (i * page_size) % size;
		if (waste < min_waste) {
			min_waste = waste;
			best = i;
		}
	}
	return best;
}

/*
 * Seed 002 patch 2: longer chains mean more objects spanning two pages, so
 * only lengthen the chain for a real saving: while the best waste is over 10%
 * of its zspage any improvement counts, after that only a 25% one, and stop
 * once the waste is under ~1.5% (1/64) of the zspage.
 */
static unsigned chain_heuristic(unsigned size, unsigned page_size, unsigned max_chain)
{
	long long min_waste = INT_MAX;
	unsigned best = 1;
	if (is_pow2(size))
		return 1;
	for (unsigned i = 1; i <= max_chain; i++) {
		long long waste = (long long)(i * page_size) % size;
		if (waste == 0)
			return i;
		if (min_waste * 10 > (long long)best * page_size) {
			if (waste < min_waste) {
				min_waste = waste;
				best = i;
			}
		} else if (waste * 4 < min_waste * 3) {
			min_waste = waste;
			best = i;
		}
		if (min_waste * 64 <= (long long)best * page_size)
			break;
	}
	return best;
}

#define CHAIN_FN(id, fn, name, help) [ZS_CHAIN_##id] = chain_##fn,
static unsigned (*const chain_fns[ZS_CHAIN_POLICY_COUNT])(unsigned, unsigned, unsigned) = {
	ZS_CHAIN_POLICIES(CHAIN_FN)
};

/* zs_pool_create has checked the policy is in range. */
static unsigned chain_length(const struct zs_pool_config *cfg, unsigned size, unsigned page_size)
{
	return chain_fns[cfg->chain_policy](size, page_size, cfg->max_chain);
}

/*
 * Objects larger than a page (cfg.max_object_size): one class per page count
 * k = 2..K, each a zspage of k pages holding one object with no header.
 * Why not the small classes' rules (delta steps, chains holding several
 * objects): a zspage is whole pages, so an object of k pages costs k pages
 * in any layout that keeps it alone, and the only saving a longer chain
 * offers is the tail of the last page (under a page per object, ~6% of a
 * 32 KiB object).  Chains of several such objects (2 of 1.5 pages in 3)
 * save part of that tail, but each class then keeps a partly used zspage of
 * many pages; with ~500 objects spread over a few hundred such classes that
 * costs more than every tail together (docs/policies.md has the numbers).
 * And one object per zspage never needs compaction.
 */
static unsigned multi_page_classes(const struct zs_pool_config *cfg, unsigned page_size)
{
	size_t max = cfg->max_object_size;
	if (max <= page_size)
		return 0;
	return (unsigned)((max + page_size - 1) / page_size) - 1;
}

/* ---- table ---- */

int classes_shape(const struct zs_pool_config *cfg, unsigned P, struct zs_class_shape *s)
{
	unsigned delta = class_delta(cfg, P);
	if (delta < 8 || delta % 8 || delta > P)
		return -EINVAL;
	int small = (int)((P - ZS_MIN_ALLOC_SIZE + delta - 1) / delta) + 1;
	int n = small + (int)multi_page_classes(cfg, P);
	if (n > (int)OBJ_CLASS_MASK + 1)
		return -EINVAL;
	unsigned shards = cfg->class_shards ? cfg->class_shards : 1;
	if (shards == ZS_CLASS_SHARDS_AUTO) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned fit = (OBJ_CLASS_MASK + 1) / (unsigned)n;
		shards = cpus > 1 ? (unsigned)cpus : 1;
		if (shards > ZS_MAX_CLASS_SHARDS)
			shards = ZS_MAX_CLASS_SHARDS;
		if (shards > fit)
			shards = fit ? fit : 1;
	}
	/* obj and zspage record index + shard * n in OBJ_CLASS_BITS. */
	if ((unsigned long)n * shards > OBJ_CLASS_MASK + 1)
		return -EINVAL;
	s->delta = delta;
	s->small = small;
	s->n = n;
	s->shards = shards;
	return 0;
}

int classes_build(struct zs_pool *pool)
{
	const struct zs_pool_config *cfg = &pool->cfg;
	unsigned P = pool->page_size;
	struct zs_class_shape shape;
	int err = classes_shape(cfg, P, &shape);
	if (err)
		return err;
	unsigned delta = shape.delta, shards = shape.shards;
	int small = shape.small, n = shape.n;
	pool->delta = delta;
	pool->nr_classes = n;
	pool->nr_small = small;
	pool->nr_shards = shards;
	pool->geom = calloc(n, sizeof(*pool->geom));
	pool->size_lut = calloc(P / 8 + 3, sizeof(*pool->size_lut));
	if (!pool->geom || !pool->size_lut)
		return -ENOMEM;
	/*
	 * The table of every copy, mapped and faulted in as written: each copy
	 * of a class is built on its first allocation (alloc_class), so an
	 * empty pool touches none of it.  Allocated and filled whole, an empty
	 * pool held 64 KiB per copy (4 KiB pages: 255 classes of 256 bytes; the
	 * application profile has one copy per CPU: 2 MiB at 32 CPUs).
	 */
	pool->classes = pages_table_map(sizeof(struct size_class) * (size_t)n * shards,
				     &pool->classes_bytes);
	if (!pool->classes)
		return -ENOMEM;
	pthread_mutex_init(&pool->class_init_lock, NULL);

	int prev = -1;
	pool->huge_class_size = 0;
	for (int i = n - 1; i >= 0; i--) {
		unsigned size = ZS_MIN_ALLOC_SIZE + (unsigned)i * delta;
		unsigned pages, objs;
		if (i >= small) {
			/* Multi-page: class small - 2 + k is one object of k pages. */
			pages = (unsigned)(i - small + 2);
			size = pages * P;
			objs = 1;
		} else {
			if (size > P)
				size = P;
			pages = chain_length(cfg, size, P);
			objs = pages * P / size;
		}
		struct class_geom *g = &pool->geom[i];
		g->size = size;
		g->pages = pages;
		g->objs = objs;
		/* The first class from the top that packs objects sets the huge threshold;
		 * minus (header - 1) because zs_malloc adds the header before the lookup. */
		if (pages != 1 && objs != 1 && !pool->huge_class_size)
			pool->huge_class_size = size - (ZS_HANDLE_SIZE - 1);
		if (prev >= 0 && pool->geom[prev].pages == pages && pool->geom[prev].objs == objs) {
			g->phys = prev;
			continue;
		}
		g->phys = i; /* built on its first allocation (alloc_class) */
		prev = i;
	}
	/* No class packs objects (e.g. max_chain 1 with tiny pages): everything is "huge". */
	if (!pool->huge_class_size)
		pool->huge_class_size = P;

	/*
	 * Size -> class, in 8-byte steps: the kernel's ceil((size - 32) / delta),
	 * clamped to the page's class (size_to_class takes the sizes past a
	 * page), stored as the physical class that logical one aliases, so an
	 * allocation finds its class with one load from this table, not a
	 * second one through a table of pointers (a D1 miss an op in the churn:
	 * the copy streams ~30 lines through D1 between two uses of a class).
	 */
	for (unsigned s8 = 0; s8 <= P / 8 + 2; s8++) {
		unsigned size = s8 * 8;
		int idx = 0;
		if (size > ZS_MIN_ALLOC_SIZE)
			idx = (int)((size - ZS_MIN_ALLOC_SIZE + delta - 1) / delta);
		pool->size_lut[s8] = (uint16_t)pool->geom[idx < small ? idx : small - 1].phys;
	}
	return 0;
}

void classes_free(struct zs_pool *pool)
{
	free(pool->geom);
	if (pool->classes) {
		pages_table_unmap(pool->classes, pool->classes_bytes);
		pthread_mutex_destroy(&pool->class_init_lock);
	}
	free(pool->size_lut);
}

/* ---- introspection ---- */

int zs_class_count(const struct zs_pool *pool)
{
	return pool->nr_classes;
}

static unsigned spanning_slots(const struct zs_pool *pool, unsigned size, unsigned objs)
{
	unsigned span = 0;
	for (unsigned k = 0; k < objs; k++)
		if (obj_page_offset(pool, size, k) + size > pool->page_size)
			span++;
	return span;
}

int zs_class_info(const struct zs_pool *pool, int index, struct zs_class_info *info)
{
	if (index < 0 || index >= pool->nr_classes)
		return -EINVAL;
	const struct class_geom *g = &pool->geom[index];
	const struct class_geom *p = &pool->geom[g->phys];
	info->index = index;
	info->phys_index = g->phys;
	info->size = g->size;
	info->phys_size = p->size;
	info->pages_per_zspage = p->pages;
	info->objs_per_zspage = p->objs;
	info->tail_waste = (p->pages * pool->page_size) % p->size;
	info->spanning = spanning_slots(pool, p->size, p->objs);
	info->huge = (p->pages == 1 && p->objs == 1); /* a multi-page class: pages > 1, objs 1 */
	return 0;
}

int zs_lookup_class_index(const struct zs_pool *pool, size_t size)
{
	if (size > pool->max_object_size)
		size = pool->max_object_size;
	if (size > pool->page_size)
		size += ZS_HANDLE_SIZE; /* as zs_malloc looks it up, header added */
	return size_to_class(pool, size);
}

/*
 * Build a copy of a class (its geometry from the table's, its lock, lists
 * and counts zero as mapped) on its first allocation, so a class costs
 * memory only once a thread allocates from it - on that CPU, for a copy.
 * Under class_init_lock, a leaf taken with no other lock held; the size is
 * stored last, with release (class_live).
 */
struct size_class *class_build(struct zs_pool *pool, struct size_class *copy)
{
	unsigned enc = (unsigned)(copy - pool->classes);
	unsigned i = enc % (unsigned)pool->nr_classes;
	const struct class_geom *g = &pool->geom[i];
	assert_internal(g->phys == (int)i);
	mutex_lock_ranked(&pool->class_init_lock, ZS_LOCK_ZS_CLASS_INIT);
	if (!__atomic_load_n(&copy->size, __ATOMIC_RELAXED)) {
		spin_init_rank(&copy->lock, ZS_LOCK_ZS_CLASS);
		copy->page_size = pool->page_size;
		copy->objs_per_zspage = g->objs;
		copy->pages_per_zspage = g->pages;
		copy->index = i;
		copy->enc = enc;
		copy->huge = (g->objs == 1); /* a huge or multi-page class: the handle sits in the zspage */
		__atomic_store_n(&copy->size, g->size, __ATOMIC_RELEASE);
	}
	mutex_unlock_ranked(&pool->class_init_lock);
	return copy;
}

size_t zs_huge_class_size(const struct zs_pool *pool)
{
	return pool->huge_class_size;
}
