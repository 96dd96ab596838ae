/*
 * The pool limit (the kernel's zswap_check_limits and its hysteresis), the
 * statistics (debugfs, vmstat, meminfo names), groups' settings and
 * counters, and compaction (zs_zswap_flush waits for the shrink worker, so
 * it is writeback.c's).  Its own file because these read every shard and
 * group and change no entry.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/stats_copy.h"
#include "zswap/internal.h"
#include "common/sigblock.h"

/* ---- Pool limit ---- */

uint64_t zswap_pool_pages(struct zs_zswap *z)
{
	struct zs_backend_stats st;
	uint64_t bytes;

	if (likely(z->has_pages))
		return zs_backend_total_pages(z->b);
	zs_backend_stats(z->b, &st, sizeof(st));
	bytes = zs_backend_mem_bytes(z->b, &st);
	return (bytes + z->page_size - 1) / z->page_size;
}

void zswap_set_limits(struct zs_zswap *z, unsigned max_pct, unsigned acc_pct)
{
	uint64_t max = z->total_ram_pages * max_pct / 100;

	atomic_store_explicit(&z->max_pages, max, memory_order_relaxed);
	atomic_store_explicit(&z->accept_pages, max * acc_pct / 100, memory_order_relaxed);
}

int zswap_pool_full(struct zs_zswap *z)
{
	uint64_t cur = zswap_pool_pages(z);

	/*
	 * At the limit with deferred frees queued (deferred_free): those pages
	 * are already the pool's to give back, so wait for them before counting
	 * a limit hit - invalidations just before must make room as they do
	 * with synchronous frees (the worker gathers for up to 1 ms).
	 */
	if (unlikely(z->deferred) &&
	    cur >= atomic_load_explicit(&z->max_pages, memory_order_relaxed)) {
		zs_backend_flush(z->b);
		cur = zswap_pool_pages(z);
	}
	if (cur >= atomic_load_explicit(&z->max_pages, memory_order_relaxed)) {
		ev_inc(z, EV_POOL_LIMIT_HIT);
		atomic_store_explicit(&z->reached_full, 1, memory_order_relaxed);
		return 1;
	}
	/* Full stays full until the pool is back at the accept threshold (hysteresis). */
	if (atomic_load_explicit(&z->reached_full, memory_order_relaxed) &&
	    cur <= atomic_load_explicit(&z->accept_pages, memory_order_relaxed))
		atomic_store_explicit(&z->reached_full, 0, memory_order_relaxed);
	return atomic_load_explicit(&z->reached_full, memory_order_relaxed);
}

int zs_zswap_set_pool_limit(struct zs_zswap *z, unsigned max_pool_percent,
			    unsigned accept_threshold_percent)
{
	if (!z || max_pool_percent > 100 || accept_threshold_percent > 100)
		return -EINVAL;
	zswap_set_limits(z, max_pool_percent, accept_threshold_percent);
	return 0;
}

/* ---- Statistics ---- */

static int fill_zswap_get_stats(void *obj, const void *arg, void *full)
{
	struct zs_zswap *z = obj;
	struct zs_zswap_stats *st = full;
	uint64_t c[SC_NR] = { 0 };

	(void)arg;
	if (!z)
		return 0;   /* NULL pointers change nothing (zswap.h): all zeros */
	size_t ps = z->page_size;
	for (unsigned i = 0; i < ZW_NSHARDS; i++)
		for (int k = 0; k < SC_NR; k++)
			c[k] += atomic_load_explicit(&z->shards[i].cnt[k], memory_order_relaxed);
#define EV(e) atomic_load_explicit(&z->ev[e], memory_order_relaxed)
	st->stored_pages = c[SC_STORED];
	st->stored_incompressible_pages = c[SC_INCOMP];
	st->pool_pages = zswap_pool_pages(z);
	st->pool_total_size = st->pool_pages * ps;
	st->pool_limit_hit = EV(EV_POOL_LIMIT_HIT);
	st->reject_reclaim_fail = c[SC_RECLAIM_FAIL];
	st->reject_alloc_fail = EV(EV_ALLOC_FAIL);
	st->reject_kmemcache_fail = EV(EV_KMEM_FAIL);
	st->reject_compress_fail = EV(EV_COMP_FAIL);
	st->reject_compress_poor = EV(EV_COMP_POOR);
	st->decompress_fail = c[SC_DECOMP_FAIL];
	st->written_back_pages = c[SC_WB];
	st->zswpout = c[SC_ZSWPOUT];
	st->zswpin = c[SC_ZSWPIN];
	st->zswpwb = c[SC_WB];
	st->swpout_zero = c[SC_SWPOUT_ZERO];
	st->swpin_zero = c[SC_SWPIN_ZERO];
	st->meminfo_zswap = st->pool_pages * ps;
	st->meminfo_zswapped = c[SC_STORED] * ps;
	st->max_pool_pages = atomic_load_explicit(&z->max_pages, memory_order_relaxed);
	st->accept_pool_pages = atomic_load_explicit(&z->accept_pages, memory_order_relaxed);
	st->reached_full = atomic_load_explicit(&z->reached_full, memory_order_relaxed);
	st->stored_bytes = c[SC_BYTES];
	st->zero_pages = c[SC_ZERO];
	st->disk_pages = c[SC_DISK];
	st->pswpin = c[SC_PSWPIN];
	st->shrink_worker_runs = EV(EV_WORKER_RUNS);
#undef EV
	return 0;
}

int zs_zswap_get_stats(struct zs_zswap *z, struct zs_zswap_stats *st, size_t size)
{
	struct zs_zswap_stats full;
	return stats_get(st, size, &full, sizeof(full), fill_zswap_get_stats, z, NULL);
}

/* ---- Groups ---- */

int zs_zswap_group_set(struct zs_zswap *z, unsigned group, uint64_t max_bytes, int writeback)
{
	if (!z || group >= ZS_ZSWAP_MAX_GROUPS || (writeback != 0 && writeback != 1))
		return -EINVAL;
	atomic_store_explicit(&z->groups[group].max_bytes, max_bytes, memory_order_relaxed);
	atomic_store_explicit(&z->groups[group].writeback, writeback, memory_order_relaxed);
	return 0;
}

/* arg: the group (unsigned). */
static int fill_zswap_group_stats(void *obj, const void *arg, void *full)
{
	struct zs_zswap *z = obj;
	unsigned group = *(const unsigned *)arg;
	struct zs_zswap_group_stats *st = full;
	struct zw_group *g;

	if (!z || group >= ZS_ZSWAP_MAX_GROUPS)
		return -EINVAL;
	g = &z->groups[group];
	st->zswap = atomic_load_explicit(&g->charged, memory_order_relaxed);
	st->zswapped = atomic_load_explicit(&g->pages, memory_order_relaxed) * z->page_size;
	st->zswpin = atomic_load_explicit(&g->zswpin, memory_order_relaxed);
	st->zswpout = atomic_load_explicit(&g->zswpout, memory_order_relaxed);
	st->zswpwb = atomic_load_explicit(&g->zswpwb, memory_order_relaxed);
	st->max_bytes = atomic_load_explicit(&g->max_bytes, memory_order_relaxed);
	st->writeback = atomic_load_explicit(&g->writeback, memory_order_relaxed);
	return 0;
}

int zs_zswap_group_stats(struct zs_zswap *z, unsigned group, struct zs_zswap_group_stats *st, size_t size)
{
	struct zs_zswap_group_stats full;
	return stats_get(st, size, &full, sizeof(full), fill_zswap_group_stats, z, &group);
}

/* ---- Maintenance ---- */

unsigned long zs_zswap_compact(struct zs_zswap *z)
{
	struct zs_sigguard g;
	unsigned long n;

	if (!z)
		return 0;
	signals_block(&g);
	n = zs_backend_compact(z->b);
	signals_restore(&g);
	return n;
}
