/*
 * Statistics: the pool's page counts, and per class the kernel's debugfs
 * "classes" columns (zs_class_stats) and their table (zs_print_classes).
 * Readers only: they take each class lock for a consistent snapshot of
 * that class and change nothing, so compaction (compact.c) and allocation
 * never depend on this file; it depends on them for can_compact.
 */
#include <errno.h>
#include <string.h>

#include "common/stats_copy.h"
#include "zsmalloc/internal.h"

unsigned zs_pool_class_shards(const struct zs_pool *pool)
{
	return pool->nr_shards;
}

unsigned long zs_get_total_pages(const struct zs_pool *pool)
{
	long n = 0;
	for (int i = 0; i < ZS_RW_SHARDS; i++)
		n += atomic_load_explicit(&((struct zs_pool *)pool)->pages_allocated[i].n,
					  memory_order_relaxed);
	return n > 0 ? (unsigned long)n : 0;
}

static int fill_pool_stats(void *obj, const void *arg, void *full)
{
	struct zs_pool *pool = obj;
	struct zs_pool_stats *stats = full;
	(void)arg;
	if (!pool)
		return -EINVAL;
	stats->pages_compacted = atomic_load_explicit(&pool->pages_compacted, memory_order_relaxed);
	return 0;
}

int zs_pool_stats(const struct zs_pool *pool, struct zs_pool_stats *st, size_t size)
{
	struct zs_pool_stats full;
	return stats_get(st, size, &full, sizeof(full), fill_pool_stats, (void *)pool, NULL);
}

/* arg: the class index (int). */
static int fill_class_stats(void *obj, const void *arg, void *full)
{
	struct zs_pool *pool = obj;
	int index = *(const int *)arg;
	struct zs_class_stats *st = full;
	if (!pool)
		return -EINVAL;
	if (index < 0 || index >= pool->nr_classes)
		return -EINVAL;
	if (pool->geom[index].phys != index)
		return -ENOENT; /* a logical class merged into another: its stats are the other's */
	heaps_stats_begin(pool);
	struct size_class *class = &pool->classes[index];
	/* A sharded pool reports the sum of the class's copies, as one kernel class. */
	for (unsigned s = 0; s < pool->nr_shards; s++) {
		struct size_class *c = class + (size_t)s * (unsigned)pool->nr_classes;
		if (!class_live(c))
			continue; /* never allocated from: empty */
		spin_lock(&c->lock);
		assert_internal(class_lists_sane(c));
		for (int g = 0; g < ZS_NR_FULLNESS_GROUPS; g++)
			st->fullness[g] += c->stats[g];
		st->obj_allocated += c->stats[ZS_OBJS_ALLOCATED];
		st->pages_used += class_pages_used(c);
		st->obj_used += c->stats[ZS_OBJS_INUSE];
		st->freeable += can_compact(c);
		spin_unlock(&c->lock);
	}
	/* Owned zspages count wholly in use in the class and in no fullness group (owned.c): their
	 * free slots come off, and each is counted in the group its use puts it in. */
	unsigned long owned_free = heaps_owned_free(pool, index, st->fullness);
	heaps_stats_end(pool);
	st->obj_used -= owned_free <= st->obj_used ? owned_free : st->obj_used;
	st->index = index;
	st->size = pool->geom[index].size; /* the table's: a class never allocated from is unbuilt */
	st->pages_per_zspage = pool->geom[index].pages;
	st->objs_per_zspage = pool->geom[index].objs;
	return 0;
}

int zs_class_stats(struct zs_pool *pool, int index, struct zs_class_stats *st, size_t size)
{
	struct zs_class_stats full;
	return stats_get(st, size, &full, sizeof(full), fill_class_stats, pool, &index);
}

unsigned long zs_pool_objects(struct zs_pool *pool)
{
	unsigned long n = 0;
	struct zs_class_stats st;
	for (int i = 0; i < pool->nr_classes; i++)
		if (!zs_class_stats(pool, i, &st, sizeof(st)))
			n += st.obj_used;
	/* A multi-page object with a packed tail is one object in two classes. */
	long tails = atomic_load_explicit(&pool->nr_tails, memory_order_relaxed);
	return tails > 0 && (unsigned long)tails <= n ? n - (unsigned long)tails : n;
}

void zs_print_classes(struct zs_pool *pool, FILE *out)
{
	static const char *groups[] = { "10%", "20%", "30%", "40%", "50%", "60%",
					"70%", "80%", "90%", "99%", "100%" };
	fprintf(out, " %5s %5s", "class", "size");
	for (int g = 0; g < 11; g++)
		fprintf(out, " %9s", groups[g]);
	fprintf(out, " %13s %10s %10s %16s %8s\n", "obj_allocated", "obj_used", "pages_used",
		"pages_per_zspage", "freeable");
	struct zs_class_stats st;
	unsigned long tot[11] = { 0 }, ta = 0, tu = 0, tp = 0, tf = 0;
	for (int i = 0; i < pool->nr_classes; i++) {
		if (zs_class_stats(pool, i, &st, sizeof(st)))
			continue;
		fprintf(out, " %5d %5u", st.index, st.size);
		for (int g = 0; g < 11; g++) {
			fprintf(out, " %9lu", st.fullness[g + 1]);
			tot[g] += st.fullness[g + 1];
		}
		fprintf(out, " %13lu %10lu %10lu %16u %8lu\n", st.obj_allocated, st.obj_used,
			st.pages_used, st.pages_per_zspage, st.freeable);
		ta += st.obj_allocated;
		tu += st.obj_used;
		tp += st.pages_used;
		tf += st.freeable;
	}
	fprintf(out, "\n %5s %5s", "Total", "");
	for (int g = 0; g < 11; g++)
		fprintf(out, " %9lu", tot[g]);
	fprintf(out, " %13lu %10lu %10lu %16s %8lu\n", ta, tu, tp, "", tf);
}

/*
 * What the pool holds of the process's memory, for callers that must keep to
 * a budget (the blob store): zs_get_total_pages leaves out the pages parked or
 * cached for reuse and the handle slots, which are resident all the same.
 */
/*
 * A mapped chunk keeps a descriptor (64 bytes), a state byte and a bitmap bit
 * per page resident while it is mapped (src/pages/pages.c): 1.6% of a chunk
 * of 4 KiB pages, and for a pool half emptied by frees, a chunk still holds
 * it for the pages that went back.
 */
static size_t chunk_meta_bytes(const struct zs_pages_stats *st)
{
	if (!st->chunks_mapped || !st->page_size)
		return 0;
	size_t ppc = st->bytes_mapped / st->chunks_mapped / st->page_size;
	size_t per = ppc * 64 + ppc + (ppc + 63) / 64 * 8;
	return st->chunks_mapped * ((per + 4095) & ~(size_t)4095);
}

size_t zs_pool_mem_bytes(const struct zs_pool *pool, size_t *cached)
{
	if (cached)
		*cached = 0;
	if (!pool)
		return 0;
	struct zs_pages_stats ps, hs;
	pages_get_stats(pool->pages, &ps);
	size_t b = (ps.pages_in_use + ps.pages_cached) * ps.page_size + chunk_meta_bytes(&ps);
	if (cached)
		*cached = ps.pages_cached * ps.page_size;
	if (pool->handle_pages) {
		pages_get_stats(pool->handle_pages, &hs);
		b += (hs.pages_in_use + hs.pages_cached) * hs.page_size + chunk_meta_bytes(&hs);
	}
	return b + sizeof(*pool) + pool->classes_bytes + pool->park_bytes;
}
