/*
 * Statistics: the mm_stat/io_stat numbers of a core store, summed over the
 * streams' counters.  Apart from the write path so the counters' layout is
 * read in one place; over the core (calls core.c's memory accounting and
 * backing.c's bd_stat), called only by zram.c.  The text formats are with
 * the public entry points in zram.c.
 */
#include <string.h>

#include "zram/internal.h"

void zram_core_get_stats(struct zs_zram *z, struct zs_zram_stats *st)
{
	int64_t c[C_NR] = { 0 };
	struct zs_backend_stats bs;
	uint64_t used;

	for (unsigned i = 0; i < z->nstreams; i++)
		for (int k = 0; k < C_NR; k++)
			c[k] += atomic_load_explicit(&z->streams[i].cnt[k], memory_order_relaxed);
	zs_backend_stats(z->b, &bs, sizeof(bs));
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

void zram_core_reset_mem_used_max(struct zs_zram *z)
{
	struct zs_zram_stats st;

	atomic_store_explicit(&z->mem_used_max, 0, memory_order_relaxed);
	zram_core_get_stats(z, &st);  /* re-seeds the peak with current usage */
}
