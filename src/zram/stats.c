/*
 * Statistics: per-slot info, the mm_stat/io_stat numbers summed over the
 * streams' counters, and their kernel text formats.  Apart from the write
 * path so the counters' layout is read in one place.
 */
#include <stdio.h>
#include <string.h>

#include "zram/internal.h"

int zs_zram_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
		      unsigned *prio)
{
	struct slot *sl;
	uint32_t f;

	if (z->grp)
		return zram_group_slot_info(z, index, size, flags, prio);
	if (index >= z->nslots)
		return -EINVAL;
	sl = &z->slots[index];
	f = slot_lock(sl);
	slot_unlock(sl, f);
	if (size)
		*size = (f & F_SAME) ? 0 : (f & F_SIZE_MASK);
	if (flags)
		*flags = f & (F_SAME | F_HUGE | F_IDLE | F_INCOMPRESSIBLE | F_WB);
	if (prio)
		*prio = (f & F_PRIO_MASK) >> F_PRIO_SHIFT;
	return 0;
}

void zs_zram_get_stats(struct zs_zram *zv, struct zs_zram_stats *st)
{
	struct zs_zram *z = zram_inner(zv);
	int64_t c[C_NR] = { 0 };
	struct zs_backend_stats bs;
	uint64_t used;

	for (unsigned i = 0; i < z->nstreams; i++)
		for (int k = 0; k < C_NR; k++)
			c[k] += atomic_load_explicit(&z->streams[i].cnt[k], memory_order_relaxed);
	zs_backend_stats(z->b, &bs);
	used = zram_used_bytes(z, &bs);
	zram_update_used_max(z, used);

	memset(st, 0, sizeof(*st));
	st->pages_stored = (uint64_t)c[C_PAGES_STORED];
	st->orig_data_size = st->pages_stored * z->page_size;
	st->compr_data_size = (uint64_t)c[C_COMPR_SIZE];
	st->mem_used_total = used;
	st->mem_limit = z->limit_bytes;
	st->mem_used_max = atomic_load_explicit(&z->mem_used_max, memory_order_relaxed);
	st->same_pages = (uint64_t)c[C_SAME];
	st->pages_compacted = bs.pages_compacted;
	st->huge_pages = (uint64_t)c[C_HUGE];
	st->huge_pages_since = (uint64_t)c[C_HUGE_SINCE];
	st->failed_reads = (uint64_t)c[C_FAILED_READS];
	st->failed_writes = (uint64_t)c[C_FAILED_WRITES];
	st->invalid_io = atomic_load_explicit(&z->invalid_io, memory_order_relaxed);
	st->notify_free = (uint64_t)c[C_NOTIFY_FREE];
	st->miss_free = (uint64_t)c[C_MISS_FREE];
	st->num_reads = (uint64_t)c[C_READS];
	st->num_writes = (uint64_t)c[C_WRITES];
	st->incompressible_pages = (uint64_t)c[C_INCOMPRESSIBLE];
	zram_wb_stats(z, st);
}

void zs_zram_reset_mem_used_max(struct zs_zram *zv)
{
	struct zs_zram *z = zram_inner(zv);
	struct zs_zram_stats st;

	atomic_store_explicit(&z->mem_used_max, 0, memory_order_relaxed);
	zs_zram_get_stats(z, &st);  /* re-seeds the peak with current usage */
}

int zs_zram_format_mm_stat(const struct zs_zram_stats *st, char *buf, size_t len)
{
	return snprintf(buf, len, "%8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu\n",
			(unsigned long long)st->orig_data_size,
			(unsigned long long)st->compr_data_size,
			(unsigned long long)st->mem_used_total, (unsigned long long)st->mem_limit,
			(unsigned long long)st->mem_used_max, (unsigned long long)st->same_pages,
			(unsigned long long)st->pages_compacted, (unsigned long long)st->huge_pages,
			(unsigned long long)st->huge_pages_since);
}

int zs_zram_format_io_stat(const struct zs_zram_stats *st, char *buf, size_t len)
{
	return snprintf(buf, len, "%8llu %8llu %8llu %8llu\n",
			(unsigned long long)st->failed_reads, (unsigned long long)st->failed_writes,
			(unsigned long long)st->invalid_io, (unsigned long long)st->notify_free);
}

int zs_zram_format_bd_stat(const struct zs_zram_stats *st, char *buf, size_t len)
{
	return snprintf(buf, len, "%8llu %8llu %8llu\n", (unsigned long long)st->bd_count,
			(unsigned long long)st->bd_reads, (unsigned long long)st->bd_writes);
}
