/*
 * The zram store's public entry points (every zs_zram_* of zs/zram.h is
 * defined in this file and nowhere else) and the design note of the layer.
 * A handle is either a core store or a group view over one; this file is
 * the one place that tells them apart (is_view, core_of below) and adds
 * the signal guard; the files under it never ask.
 *
 * Design (read this first):
 *   - Slot table: one 16-byte entry per page, as the kernel's
 *     zram_table_entry: a handle (or the fill word of a same-filled page) and
 *     a 32-bit flags word whose low bits hold the stored size.  Bit
 *     F_SLOCK of the flags word is the slot lock; the holder rewrites the
 *     whole word and the unlock is the release store of the new value, so
 *     a slot's handle/size/flags change atomically for other threads.
 *   - Streams: a fixed pool of compression contexts, each with its output
 *     buffer and a local_copy page (the kernel's per-CPU zcomp streams).  A
 *     thread remembers the stream it last got, so uncontended it costs one
 *     atomic exchange and one release store per operation.
 *   - Counters live in the streams: whoever holds a stream updates its
 *     counters with plain (relaxed load + store) atomics, no locked RMW and
 *     no cache line shared between threads; stats sum over streams.  Every
 *     operation that changes a counter therefore holds a stream.
 *   - Write order is the kernel's: same-fill check; compress into the
 *     stream buffer; allocate; check the memory limit (after allocating, so
 *     mem_used_max sees the peak as the kernel's does); write the object;
 *     then lock the slot, free the old object and publish the new one.  A
 *     failed write never touches the slot.
 *   - Read: lock the slot, map the object (read_begin straight from the
 *     pool, local_copy only for page-spanning objects) and decompress into
 *     the caller's buffer; huge objects are copied, using the caller's buffer
 *     as the local copy so a spanning huge object costs one copy.
 *
 * Files, and who calls whom (each calls only files below it; checked with
 * `nm -u` / `nm --defined-only` on each build/CMakeFiles/zs_obj.dir/src/zram/NAME.c.o):
 *
 *   zram.c        public entry points: checks, view/core dispatch, signal guard
 *     |-> group.c       the group view (cfg.group_pages > 1) over a core store
 *     |-> stats.c       mm_stat/io_stat sums of a core store
 *     |-> writeback.c   the writeback walk
 *     |-> recompress.c  idle marking, recompression
 *     |     (all four) -> core.c
 *   core.c        the core store: slot table, write/read/free, create/destroy
 *     |-> backing.c     the backing file: blocks, F_WB read/free hooks, limit
 *   stream.c, slot.c, params.c   leaves (stream pool, slot lock slow path,
 *                                config parameters)
 *
 *   The graph as nm shows it (file -> the zram files whose symbols it uses):
 *   zram.c       -> group stats writeback recompress core backing
 *   group.c      -> core stream
 *   stats.c      -> core backing
 *   writeback.c  -> core backing stream slot
 *   recompress.c -> core stream slot
 *   core.c       -> backing stream slot params
 *   backing.c, stream.c, slot.c, params.c -> none
 *
 * Lock order: every lock the store takes, top down.  A thread takes them
 * in this order and never takes one while holding a lower one (or another
 * of the same kind); ZS_DEBUG builds check it at every acquisition
 * (ranks ZS_LOCK_ZRAM_* of the library's one lock-order check,
 * common/debug.h; zram/internal.h says how each lock is tracked):
 *   1. ZRAM_STRIPE: a group stripe mutex (group.c; a grouped store's slot
 *      calls: every core call of a read-modify-write runs under it, one
 *      stripe at a time);
 *   2. ZRAM_WB_RUN: wb->run (backing.h: one writeback walk at a time);
 *   3. ZRAM_STREAM: a stream (stream.c: a busy flag, spun/yielded for; one at
 *      a time, held across slot locks by write, read, discard, free_notify,
 *      reset, writeback and recompress; also taken under a stripe lock to
 *      count a read the group answered from its marks);
 *   4. ZRAM_SLOT: one slot lock (the F_SLOCK bit; never two at once: every
 *      walk of the table locks and unlocks slot by slot; free_notify only
 *      tries it);
 *   5. ZRAM_WB_LOCK: wb->lock (backing.h: block bitmap, hint, writeback
 *      limit), a leaf taken under a slot lock (block alloc/free, limit) or
 *      alone (the limit's get/set); nothing is taken under it.
 *   Not tracked here, taken underneath and never around a zram lock: the
 *   file I/O of a block (pread/pwrite, fallocate: under a slot lock for
 *   reads and frees, with no slot lock for phase 2 of writeback, under
 *   wb->run and the stripe lock at most), the failure-injection counter
 *   (zs_io_inject, its own lock, a leaf), and the backend's locks
 *   (zsmalloc's pool, class, zspage and handle locks, its page provider and
 *   deferred-free locks: src/zsmalloc/lock.h and zsmalloc.c's order; zblock's
 *   own), taken by zs_backend_* under a stream (malloc, write: before the
 *   slot lock) or under a slot lock (read_begin/end, free), which never call
 *   back into the store.  Above all of these: the region's locks
 *   (src/region/region.c), held around its calls into zs_zram_*.
 *
 * Why the region's fault path cannot deadlock on the store: the region's
 * handler calls zs_zram_read and zs_zram_discard, which take locks 1, 3, 4
 * and 5.  It could only wait forever if a holder of one of those were
 * itself waiting for a page fault on region memory.  The store touches no
 * memory under these locks but its own (stream and stripe buffers,
 * local_copy, pool pages, the slot table) and the caller's `page`/`buf`
 * arguments; every lock above is held only for bounded work on those.  So a
 * holder can fault only on a caller's buffer, and the region passes none
 * that can fault: its handler reads into its private buffer (malloc'd, not
 * region memory), and its reclaim writes either from a private copy or
 * straight from pages that are resident and write-protected, whose reads do
 * not fault.  Signals are the other way in: a signal handler that touches
 * region memory, run on a thread holding a store lock, would wait for the
 * handler thread that waits for that lock.  The region's calls into the
 * store block every blockable signal, and its own threads run with all
 * signals blocked (src/region/region.c, its lock-order note), so none of
 * its store calls can be interrupted that way.  What the store cannot rule
 * out is the application's: a direct call on zs_region_store() whose
 * signal handler touches a stored page, or a buffer argument that is region
 * memory of a region over the same store and not resident; block signals
 * around such calls and pass resident buffers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats_copy.h"
#include "common/config.h"
#include "zram/internal.h"
#include "common/sigblock.h"

/* ---- View or core: the one place a handle's kind is asked ---- */

/* A group view (group.c) rather than a core store? */
static inline int is_view(const struct zs_zram *z)
{
	return z->grp != NULL;
}

/* The core store that holds z's data: maintenance, statistics and counters go there. */
static inline struct zs_zram *core_of(struct zs_zram *z)
{
	return z->inner ? z->inner : z;
}

/* ---- Signal-safe stores ---- */

/*
 * A store whose pages back a region (src/region) is read and freed by the
 * region's fault handlers; an application signal handler that touches
 * region memory while its thread is inside one of these calls (holding a
 * slot, class or handle lock) would wait for itself.  Such a store blocks
 * signals around every call that takes the allocator's locks
 * (common/sigblock.h); nested and library-thread calls cost nothing more.
 */
int zs_zram_block_signals(struct zs_zram *z, int on)
{
	if (!z || (on != 0 && on != 1))
		return -EINVAL;
	z->block_signals = on;
	core_of(z)->block_signals = on;
	if (on)
		zram_streams_build_all(core_of(z));
	return 0;
}

#define GUARDED(z, expr)                                        \
	do {                                                    \
		if (likely(!(z)->block_signals))                \
			return expr;                            \
		struct zs_sigguard g_;                          \
		signals_block(&g_);                          \
		__typeof__(expr) rc_ = expr;                    \
		signals_restore(&g_);                        \
		return rc_;                                     \
	} while (0)

/* ---- Create / destroy ---- */

void zs_zram_config_init(struct zs_zram_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->page_size = ZS_PAGE_SIZE_DEFAULT;
	cfg->disksize = 1ull << 30;
	cfg->comp = "lz4";
	zs_backend_config_init(&cfg->backend);
}

/* The kernel defaults with only the pool profile swapped, so the two store
 * profiles differ exactly as the two pool profiles do. */
void zs_zram_config_init_app(struct zs_zram_config *cfg)
{
	zs_zram_config_init(cfg);
	zs_pool_config_init_app(&cfg->backend.zs);
}

/* The checks that hold for a view and a core alike, then one or the other. */
static int create(const struct zs_zram_config *cfg, struct zs_zram **out, char *err,
		  size_t err_len)
{
	struct zs_zram_config def;
	size_t ps;
	int bad;

	*out = NULL;
	if (!cfg) {
		zs_zram_config_init(&def);
		cfg = &def;
	}
	if (ZS_CONFIG_ABI_CHECK(cfg, &bad)) {
		config_abi_err(err, err_len, "zs_zram_config", cfg->struct_size, sizeof(*cfg),
				  bad);
		return -EINVAL;
	}
	ps = cfg->page_size ? cfg->page_size : ZS_PAGE_SIZE_DEFAULT;
	if (!zs_page_size_valid(ps)) {
		set_err(err, err_len, "page_size %zu is not a power of two in 4096..65536", ps);
		return -EINVAL;
	}
	if (cfg->disksize / ps == 0 || cfg->disksize / ps > ZS_ZRAM_MAX_SLOTS) {
		set_err(err, err_len, "disksize %llu gives no slot or more than "
			     "ZS_ZRAM_MAX_SLOTS", (unsigned long long)cfg->disksize);
		return -EINVAL;
	}
	if (zs_filter_check(cfg->filter)) {
		set_err(err, err_len, "filter \"%s\" is not none, shuffle:N, delta:N or "
			     "delta+shuffle:N with N 2, 4 or 8", cfg->filter);
		return -EINVAL;
	}
	if (cfg->group_pages > 1)
		return zram_group_create(cfg, ps, out, err, err_len);
	return zram_core_create(cfg, ps, ps, out, err, err_len);
}

int zs_zram_create(const struct zs_zram_config *cfg, struct zs_zram **out, char *err,
		   size_t err_len)
{
	create_begin(err, err_len);
	int rc = create(cfg, out, err, err_len);
	if (rc && out)
		*out = NULL;
	return create_finish("zs_zram_create", rc, err, err_len);
}

void zs_zram_destroy(struct zs_zram *z)
{
	struct zs_sigguard g;
	int guard;

	if (!z)
		return;
	/* Destroy frees every object first: the allocator's locks, so guarded as reset is. */
	guard = z->block_signals;
	if (guard)
		signals_block(&g);
	if (is_view(z))
		zram_group_destroy(z);
	else
		zram_core_destroy(z);
	if (guard)
		signals_restore(&g);
}

uint64_t zs_zram_slots(const struct zs_zram *z)
{
	return z->nslots;
}

size_t zs_zram_page_size(const struct zs_zram *z)
{
	return z->page_size;
}

struct zs_backend *zs_zram_backend(struct zs_zram *z)
{
	return z->b;
}

const char *zs_zram_comp_name(const struct zs_zram *z)
{
	return z->comp_name;
}

/* ---- The write decision (pure functions, also for other stores) ---- */

int zs_zram_page_same_filled(const void *page, size_t ps, unsigned long *fill)
{
	return zram_page_same_filled(page, ps, fill);
}

enum zs_zram_store_kind zs_zram_store_kind(long comp_len, size_t huge_size)
{
	return zram_store_kind(comp_len, huge_size);
}

int zs_zram_store_decide(struct zs_comp *comp, const void *page, size_t ps, size_t huge_size,
			 void *buf, size_t buf_cap, struct zs_zram_store_decision *d)
{
	return zram_store_decide(comp, page, ps, huge_size, buf, buf_cap, d);
}

/* ---- Slot calls ---- */

static int write_call(struct zs_zram *z, uint64_t index, const void *page)
{
	if (unlikely(is_view(z)))
		return zram_group_write(z, index, page);
	return zram_core_write(z, index, page);
}

int zs_zram_write(struct zs_zram *z, uint64_t index, const void *page)
{
	GUARDED(z, write_call(z, index, page));
}

int zs_zram_read(struct zs_zram *z, uint64_t index, void *buf, size_t buf_len)
{
	if (unlikely(!buf || buf_len < z->page_size)) {
		count_invalid(core_of(z));
		return -EINVAL;
	}
	if (unlikely(is_view(z)))
		return zram_group_read(z, index, buf);
	return zram_core_read(z, index, buf);
}

static int discard_call(struct zs_zram *z, uint64_t index)
{
	if (unlikely(is_view(z)))
		return zram_group_discard(z, index);
	return zram_core_discard(z, index);
}

int zs_zram_discard(struct zs_zram *z, uint64_t index)
{
	GUARDED(z, discard_call(z, index));
}

static int free_notify_call(struct zs_zram *z, uint64_t index)
{
	/* A group slot has no lock of its own to miss: a notification is a discard. */
	if (unlikely(is_view(z)))
		return zram_group_discard(z, index);
	return zram_core_free_notify(z, index);
}

int zs_zram_free_notify(struct zs_zram *z, uint64_t index)
{
	GUARDED(z, free_notify_call(z, index));
}

int zs_zram_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
		      unsigned *prio)
{
	if (is_view(z))
		return zram_group_slot_info(z, index, size, flags, prio);
	return zram_core_slot_info(z, index, size, flags, prio);
}

/* ---- Ranges ---- */

static int range_ok(struct zs_zram *z, uint64_t first, uint64_t n)
{
	if (first < z->nslots && n <= z->nslots - first)
		return 1;
	count_invalid(core_of(z));
	return 0;
}

static int write_range_call(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf)
{
	const unsigned char *p = buf;

	if (!range_ok(z, first, n))
		return -EINVAL;
	if (!buf) {
		count_invalid(core_of(z));
		return -EINVAL;
	}
	if (is_view(z))
		return zram_group_write_range(z, first, n, buf);
	for (uint64_t i = 0; i < n; i++) {
		int rc = zram_core_write(z, first + i, p + i * z->page_size);

		if (rc)
			return rc;
	}
	return 0;
}

int zs_zram_write_range(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf)
{
	GUARDED(z, write_range_call(z, first, n, buf));
}

int zs_zram_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf, size_t buf_len)
{
	unsigned char *p = buf;

	if (!range_ok(z, first, n))
		return -EINVAL;
	if (!buf || buf_len / z->page_size < n) {
		count_invalid(core_of(z));
		return -EINVAL;
	}
	if (is_view(z))
		return zram_group_read_range(z, first, n, buf);
	for (uint64_t i = 0; i < n; i++) {
		int rc = zram_core_read(z, first + i, p + i * z->page_size);

		if (rc)
			return rc;
	}
	return 0;
}

static int discard_range_call(struct zs_zram *z, uint64_t first, uint64_t n)
{
	int rc = 0;

	if (!range_ok(z, first, n))
		return -EINVAL;
	if (is_view(z))
		return zram_group_discard_range(z, first, n);
	/* Every slot is tried; a failure anywhere is the call's result, never 0. */
	for (uint64_t i = 0; i < n; i++) {
		int r = zram_core_discard(z, first + i);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

int zs_zram_discard_range(struct zs_zram *z, uint64_t first, uint64_t n)
{
	GUARDED(z, discard_range_call(z, first, n));
}

/* ---- Whole-store calls: on the core, whatever the handle ---- */

static void reset_call(struct zs_zram *z)
{
	zram_core_reset(core_of(z));
	/* After the objects: a mark cleared first would let a slot read its stale group bytes. */
	if (is_view(z))
		zram_group_reset_marks(z);
}

void zs_zram_reset(struct zs_zram *z)
{
	struct zs_sigguard g;

	if (z->block_signals)
		signals_block(&g);
	reset_call(z);
	if (z->block_signals)
		signals_restore(&g);
}

void zs_zram_flush(struct zs_zram *z)
{
	zram_core_flush(core_of(z));
}

unsigned long zs_zram_compact(struct zs_zram *z)
{
	GUARDED(z, zram_core_compact(core_of(z)));
}

/* ---- Statistics ---- */

static void fill_zram_get_stats(struct zs_zram *z, struct zs_zram_stats *st)
{
	zram_core_get_stats(core_of(z), st);
}

int zs_zram_get_stats(struct zs_zram *z, struct zs_zram_stats *st, size_t size)
{
	struct zs_zram_stats full;

	if (!st || !size)
		return -EINVAL;
	if (!z)
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	fill_zram_get_stats(z, &full);
	return stats_copy_out(st, size, &full, sizeof(full));
}

void zs_zram_reset_mem_used_max(struct zs_zram *z)
{
	zram_core_reset_mem_used_max(core_of(z));
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

/* ---- Writeback, idle, recompression ---- */

void zs_zram_wb_inject(struct zs_zram *z, int reads, uint64_t after, uint64_t count)
{
	zram_wb_inject(core_of(z), reads, after, count);
}

unsigned zs_zram_stream_inject(struct zs_zram *z, unsigned count)
{
	return zram_stream_inject(core_of(z), count);
}

int zs_zram_set_writeback_limit(struct zs_zram *z, int enable, uint64_t pages)
{
	return zram_wb_set_limit(core_of(z), enable, pages);
}

int zs_zram_get_writeback_limit(struct zs_zram *z, int *enable, uint64_t *pages)
{
	return zram_wb_get_limit(core_of(z), enable, pages);
}

/*
 * Signals are always blocked while writeback holds slot locks across file
 * I/O, and while recompression runs (src/common/sigblock.h says why).
 */
int zs_zram_writeback(struct zs_zram *z, enum zs_zram_wb_type type, unsigned long max_pages,
		      struct zs_zram_wb_result *res)
{
	struct zs_sigguard old;

	signals_block(&old);
	int rc = zram_core_writeback(core_of(z), type, max_pages, res);
	signals_restore(&old);
	return rc;
}

long zs_zram_mark_idle(struct zs_zram *z, unsigned age_seconds)
{
	return zram_core_mark_idle(core_of(z), age_seconds);
}

int zs_zram_recompress(struct zs_zram *z, enum zs_zram_recomp_type type, size_t threshold,
		       unsigned long max_pages, struct zs_zram_recomp_result *res)
{
	struct zs_sigguard old;

	signals_block(&old);
	int rc = zram_core_recompress(core_of(z), type, threshold, max_pages, res);
	signals_restore(&old);
	return rc;
}
