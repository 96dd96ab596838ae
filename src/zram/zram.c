/*
 * The zram store: drivers/block/zram's slot table and write/read/free paths
 * over a libzs backend, in user space.
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
 * Lock order (the one place it is written; a thread takes them top down and
 * never takes a higher one while holding a lower one):
 *   1. a group stripe lock (group.c; slot-view calls of a grouped store: all
 *      inner-store calls of a read-modify-write run under it);
 *   2. wb->run (writeback.c: one zs_zram_writeback at a time);
 *   3. a stream (stream.c: a busy flag, spun/yielded for; held across the
 *      slot lock by write, read, discard, reset, writeback and recompress);
 *   4. one slot lock (the F_SLOCK bit; never two at once: every walk of the
 *      table locks and unlocks slot by slot);
 *   5. leaves, taken under a slot lock and never around one: wb->lock
 *      (block bitmap, limit, injection), the file I/O of a block (pread,
 *      fallocate), and the backend's own locks (zsmalloc's pool, class and
 *      zspage locks, src/zsmalloc/lock.h), which never call back into the
 *      store.  The backend's allocation runs before the slot lock.
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
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "zram/internal.h"
#include "common/sigblock.h"

/* ---- Slot free, memory accounting ---- */

/*
 * The kernel's slot_free, slot locked: drop whatever the slot holds and
 * return the cleared flags (idle, incompressible, priority all reset).
 */
uint32_t zram_slot_free_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f)
{
	zs_assert_internal(slot_is_locked(sl) && !(f & F_SLOCK));
	if (unlikely(f & F_WB)) {
		zram_wb_free_locked(z, s, sl, f);
		sl->handle = 0;
		sl->ac_time = 0;
		return 0;
	}
	if (f & F_INCOMPRESSIBLE)
		cnt_add(s, C_INCOMPRESSIBLE, -1);
	if (f & F_HUGE)
		cnt_add(s, C_HUGE, -1);
	if (f & F_SAME) {
		cnt_add(s, C_SAME, -1);
		cnt_add(s, C_PAGES_STORED, -1);
	} else if (sl->handle) {
		if (z->deferred)
			zs_backend_free_deferred(z->b, sl->handle);
		else
			zs_backend_free(z->b, sl->handle);
		cnt_add(s, C_COMPR_SIZE, -(int64_t)(f & F_SIZE_MASK));
		cnt_add(s, C_PAGES_STORED, -1);
	}
	sl->handle = 0;
	sl->ac_time = 0;
	return 0;
}

/* ---- Memory accounting ---- */

uint64_t zram_used_bytes(struct zs_zram *z, const struct zs_backend_stats *bs)
{
	struct zs_backend_stats st;

	if (!bs) {
		if (zs_backend_caps(z->b) & ZS_BACKEND_CAP_PAGES)
			return (uint64_t)zs_backend_total_pages(z->b) * z->page_size;
		zs_backend_stats(z->b, &st);
		bs = &st;
	}
	return zs_backend_mem_bytes(z->b, bs);
}

void zram_update_used_max(struct zs_zram *z, uint64_t used)
{
	uint64_t cur = atomic_load_explicit(&z->mem_used_max, memory_order_relaxed);

	while (used > cur &&
	       !atomic_compare_exchange_weak_explicit(&z->mem_used_max, &cur, used,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* The kernel's zram_can_store_page: called after the allocation succeeded. */
static inline int can_store(struct zs_zram *z)
{
	uint64_t used;

	/* Backends without a cheap page count are only asked when a limit is set. */
	if (!(zs_backend_caps(z->b) & ZS_BACKEND_CAP_PAGES) && !z->limit_bytes)
		return 1;
	used = zram_used_bytes(z, NULL);
	zram_update_used_max(z, used);
	return !z->limit_bytes || used <= z->limit_bytes;
}

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

void zram_set_err(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !err_len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
}

static int create(const struct zs_zram_config *cfg, struct zs_zram **out, char *err,
		  size_t err_len)
{
	struct zs_zram_config def;
	struct zs_backend_config bc;
	struct zs_zram *z;
	size_t ps;
	int rc;

	*out = NULL;
	if (!cfg) {
		zs_zram_config_init(&def);
		cfg = &def;
	}
	int bad;
	if (ZS_CONFIG_ABI_CHECK(cfg, &bad)) {
		zs_config_abi_err(err, err_len, "zs_zram_config", cfg->struct_size, sizeof(*cfg),
				  bad);
		return -EINVAL;
	}
	ps = cfg->page_size ? cfg->page_size : ZS_PAGE_SIZE_DEFAULT;
	if (!zs_page_size_valid(ps)) {
		zram_set_err(err, err_len, "page_size %zu is not a power of two in 4096..65536", ps);
		return -EINVAL;
	}
	if (cfg->disksize / ps == 0 || cfg->disksize / ps > ZS_ZRAM_MAX_SLOTS) {
		zram_set_err(err, err_len, "disksize %llu gives no slot or more than "
			     "ZS_ZRAM_MAX_SLOTS", (unsigned long long)cfg->disksize);
		return -EINVAL;
	}
	if (zs_filter_check(cfg->filter)) {
		zram_set_err(err, err_len, "filter \"%s\" is not none, shuffle:N, delta:N or "
			     "delta+shuffle:N with N 2, 4 or 8", cfg->filter);
		return -EINVAL;
	}
	if (cfg->group_pages > 1)
		return zram_group_create(cfg, ps, out, err, err_len);
	if (cfg->mem_limit > ZS_ZRAM_MAX_MEM_LIMIT || cfg->streams > ZS_ZRAM_MAX_STREAMS)
		return -EINVAL;
	if ((cfg->deferred_free != 0 && cfg->deferred_free != 1) ||
	    (cfg->track_actime != 0 && cfg->track_actime != 1))
		return -EINVAL;
	rc = zs_comp_check(cfg->comp ? cfg->comp : "lz4");
	if (rc)
		return rc;
	if (cfg->recomp && (rc = zs_comp_check(cfg->recomp)))
		return rc;
	struct zram_params prm;
	if ((rc = zram_params_load(cfg, &prm)))
		return rc;

	z = calloc(1, sizeof(*z));
	if (!z) {
		zram_params_free(&prm);
		return -ENOMEM;
	}
	z->page_size = ps;
	z->nslots = cfg->disksize / ps;
	z->deferred = cfg->deferred_free;
	z->track_actime = cfg->track_actime;
	z->limit_bytes = (cfg->mem_limit + ps - 1) / ps * ps;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &z->t0);
	snprintf(z->recomp_name, sizeof(z->recomp_name), "%s", cfg->recomp ? cfg->recomp : "");

	rc = -ENOMEM;
	z->slots = calloc(z->nslots, sizeof(*z->slots));
	if (!z->slots)
		goto fail;

	bc = cfg->backend;
	if (!bc.kind)
		bc.kind = "zsmalloc";
	bc.page_size = ps; /* the store's page size is the one knob (zs/backend.h) */
	errno = 0;
	z->b = zs_backend_create(&bc);
	if (!z->b) {
		rc = errno ? -errno : -EINVAL;
		zram_set_err(err, err_len, "backend %s: %s", bc.kind,
			     rc == -EINVAL ? "unknown kind, or a pool option out of range "
					     "(include/zs/zsmalloc.h, backend.h)"
			     : rc == -ENOTSUP ? "not built into this library"
			     : rc == -ENOMEM ? "out of memory" : "could not be created");
		goto fail;
	}
	z->huge_size = zs_backend_huge_class_size(z->b);
	if (!z->huge_size || z->huge_size > ps)
		z->huge_size = ps;

	if ((rc = zram_streams_create(z, cfg, &prm)))
		goto fail;
	snprintf(z->comp_name, sizeof(z->comp_name), "%s", zs_comp_name(z->streams[0].comp));
	if ((rc = zram_wb_create(z, cfg, err, err_len)))
		goto fail;
	zram_params_free(&prm);
	*out = z;
	return 0;
fail:
	zram_params_free(&prm);
	zram_streams_free(z);
	if (z->b)
		zs_backend_destroy(z->b);
	free(z->slots);
	free(z);
	return rc;
}

int zs_zram_create_err(const struct zs_zram_config *cfg, struct zs_zram **out, char *err,
		       size_t err_len)
{
	int rc;

	if (err && err_len)
		err[0] = 0;
	rc = create(cfg, out, err, err_len);
	/* Every failure gets a line: the specific reason where one was written, else the code. */
	if (rc && err && err_len && !err[0])
		zram_set_err(err, err_len, "zs_zram_create: %s", strerror(-rc));
	return rc;
}

int zs_zram_create(const struct zs_zram_config *cfg, struct zs_zram **out)
{
	return create(cfg, out, NULL, 0);
}

void zs_zram_destroy(struct zs_zram *z)
{
	if (z && z->grp) {
		zram_group_destroy(z);
		return;
	}
	if (!z)
		return;
	zs_zram_reset(z);
	zram_wb_destroy(z);
	zram_streams_free(z);
	zs_backend_destroy(z->b);
	free(z->slots);
	free(z);
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

/* ---- Write ---- */

/* Every machine word equal to the first: word i == word i+1 for all i. */
int zs_zram_page_same_filled(const void *page, size_t ps, unsigned long *fill)
{
	const unsigned char *p = page;

	if (memcmp(p, p + sizeof(unsigned long), ps - sizeof(unsigned long)))
		return 0;
	if (fill)
		memcpy(fill, p, sizeof(*fill));
	return 1;
}

enum zs_zram_store_kind zs_zram_store_kind(long comp_len, size_t huge_size)
{
	return comp_len <= 0 || (size_t)comp_len >= huge_size ? ZS_ZRAM_STORE_RAW
							       : ZS_ZRAM_STORE_COMPRESSED;
}

int zs_zram_store_decide(struct zs_comp *comp, const void *page, size_t ps, size_t huge_size,
			 void *buf, size_t buf_cap, struct zs_zram_store_decision *d)
{
	int n;

	memset(d, 0, sizeof(*d));
	if (unlikely(zs_zram_page_same_filled(page, ps, &d->fill))) {
		d->kind = ZS_ZRAM_STORE_SAME;
		return 0;
	}
	n = zs_compress(comp, page, ps, buf, buf_cap);
	if (unlikely(n < 0))
		return n;
	d->comp_len = (size_t)n;
	d->kind = zs_zram_store_kind(n, huge_size);
	if (unlikely(d->kind == ZS_ZRAM_STORE_RAW)) {
		/* Not worth a compressed object: keep the raw page, one per pool page. */
		d->data = page;
		d->len = ps;
	} else {
		d->data = buf;
		d->len = (size_t)n;
	}
	return 0;
}

static void fill_page(void *buf, size_t ps, unsigned long val)
{
	unsigned long *w = buf;

	if (!val) {
		memset(buf, 0, ps);
		return;
	}
	for (size_t i = 0; i < ps / sizeof(*w); i++)
		w[i] = val;
}

static int write_same(struct zs_zram *z, struct stream *s, struct slot *sl, unsigned long val)
{
	uint32_t f = slot_lock(sl);

	f = zram_slot_free_locked(z, s, sl, f);
	sl->handle = val;
	if (z->track_actime)
		sl->ac_time = now_secs(z);
	cnt_add(s, C_SAME, 1);
	cnt_add(s, C_PAGES_STORED, 1);
	slot_unlock(sl, f | F_SAME);
	return 0;
}

static int write_call(struct zs_zram *z, uint64_t index, const void *page)
{
	if (unlikely(z->grp))
		return zram_group_write(z, index, page);
	struct zs_zram_store_decision d;
	struct stream *s;
	struct slot *sl;
	unsigned long h;
	uint32_t f, nf;
	int n;

	if (unlikely(index >= z->nslots || !page)) {
		count_invalid(z);
		return -EINVAL;
	}
	sl = &z->slots[index];
	s = zram_stream_get(z);
	cnt_add(s, C_WRITES, 1);

	n = zs_zram_store_decide(s->comp, page, z->page_size, z->huge_size, s->buf, s->buf_cap, &d);
	if (unlikely(n < 0))
		goto fail;
	if (unlikely(d.kind == ZS_ZRAM_STORE_SAME)) {
		write_same(z, s, sl, d.fill);
		stream_put(s);
		return 0;
	}
	n = (int)d.len;
	nf = (uint32_t)n | (d.kind == ZS_ZRAM_STORE_RAW ? F_HUGE : 0);

	h = zs_backend_malloc(z->b, (size_t)n);
	if (unlikely(ZS_IS_ERR(h))) {
		n = (int)ZS_ERR(h); /* the allocator's own code, as the kernel's zram passes it on */
		goto fail;
	}
	if (unlikely(!can_store(z))) {
		zs_backend_free(z->b, h);
		n = -ENOMEM;
		goto fail;
	}
	/* The allocator refused a handle it just gave out: an I/O error, not a memory shortage. */
	if (unlikely(zs_backend_write(z->b, h, d.data, (size_t)n))) {
		zs_backend_free(z->b, h);
		n = -EIO;
		goto fail;
	}

	f = slot_lock(sl);
	f = zram_slot_free_locked(z, s, sl, f);
	sl->handle = h;
	if (z->track_actime)
		sl->ac_time = now_secs(z);
	slot_unlock(sl, f | nf);

	cnt_add(s, C_PAGES_STORED, 1);
	cnt_add(s, C_COMPR_SIZE, n);
	if (nf & F_HUGE) {
		cnt_add(s, C_HUGE, 1);
		cnt_add(s, C_HUGE_SINCE, 1);
	}
	stream_put(s);
	return 0;
fail:
	cnt_add(s, C_FAILED_WRITES, 1);
	stream_put(s);
	return n;
}

/* ---- Read ---- */

/* Slot locked: read its page into buf with stream s's contexts. */
int zram_read_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f, void *buf)
{
	size_t ps = z->page_size, size = f & F_SIZE_MASK;
	unsigned long h = sl->handle;
	void *p;
	int rc = 0;

	zs_assert_internal(slot_is_locked(sl));
	if (unlikely(f & F_WB))
		return zram_wb_read_locked(z, s, sl, f, buf);
	if (f & F_SAME) {
		fill_page(buf, ps, h);
		return 0;
	}
	if (!h) {
		memset(buf, 0, ps);
		return 0;
	}
	if (f & F_HUGE) {
		p = zs_backend_read_begin(z->b, h, ps, buf);
		if (unlikely(!p))
			return -EIO;
		if (p != buf)
			memcpy(buf, p, ps);
		zs_backend_read_end(z->b, h, ps, p);
		return 0;
	}
	/*
	 * Not the scatter-gather read (zs_obj_read_sg_begin + zs_decompress_sg),
	 * by measurement (docs/zram.md, bench_sg under callgrind): lz4/lzo
	 * blocks must be contiguous, so a split object is copied either way, and
	 * zstd's streaming decoder over two pieces costs ~1100 instructions more
	 * per spanning object than copying the pieces and decoding in one shot.
	 * Decompression is >99% of a read, so the copy is not what to save.
	 */
	p = zs_backend_read_begin(z->b, h, size, s->local_copy);
	if (unlikely(!p))
		return -EIO;
	/* Priority says which algorithm wrote the object. */
	if (unlikely(zs_decompress((f & F_PRIO_MASK) ? s->recomp : s->comp, p, size, buf, ps) < 0))
		rc = -EIO;
	zs_backend_read_end(z->b, h, size, p);
	return rc;
}

int zs_zram_read(struct zs_zram *z, uint64_t index, void *buf, size_t buf_len)
{
	if (unlikely(z->grp)) {
		if (!buf || buf_len < z->page_size) {
			count_invalid(z->inner);
			return -EINVAL;
		}
		return zram_group_read(z, index, buf);
	}
	struct stream *s;
	struct slot *sl;
	uint32_t f;
	int rc;

	if (unlikely(index >= z->nslots || !buf || buf_len < z->page_size)) {
		count_invalid(z);
		return -EINVAL;
	}
	sl = &z->slots[index];
	s = zram_stream_get(z);
	cnt_add(s, C_READS, 1);
	f = slot_lock(sl);
	rc = zram_read_locked(z, s, sl, f, buf);
	/* Any access ends idleness and post-processing candidacy, as the kernel's mark_slot_accessed. */
	if (z->track_actime && sl->handle)
		sl->ac_time = now_secs(z);
	slot_unlock(sl, f & ~(F_IDLE | F_PP_SLOT));
	if (unlikely(rc))
		cnt_add(s, C_FAILED_READS, 1);
	stream_put(s);
	return rc;
}

/* ---- Discard / free ---- */

static int discard_call(struct zs_zram *z, uint64_t index)
{
	if (unlikely(z->grp))
		return zram_group_discard(z, index);
	struct stream *s;
	struct slot *sl;
	uint32_t f;

	if (index >= z->nslots) {
		count_invalid(z);
		return -EINVAL;
	}
	sl = &z->slots[index];
	s = zram_stream_get(z);
	f = slot_lock(sl);
	f = zram_slot_free_locked(z, s, sl, f);
	slot_unlock(sl, f);
	cnt_add(s, C_NOTIFY_FREE, 1);
	stream_put(s);
	return 0;
}

static int free_notify_call(struct zs_zram *z, uint64_t index)
{
	if (unlikely(z->grp))
		return zram_group_discard(z, index);
	struct stream *s;
	struct slot *sl;
	uint32_t f;
	int rc = 0;

	if (index >= z->nslots) {
		count_invalid(z);
		return -EINVAL;
	}
	sl = &z->slots[index];
	s = zram_stream_get(z);
	cnt_add(s, C_NOTIFY_FREE, 1);
	f = atomic_fetch_or_explicit(&sl->flags, F_SLOCK, memory_order_acquire);
	if (f & F_SLOCK) {
		cnt_add(s, C_MISS_FREE, 1);
		rc = -EBUSY;
	} else {
		f = zram_slot_free_locked(z, s, sl, f);
		slot_unlock(sl, f);
	}
	stream_put(s);
	return rc;
}

/* ---- Ranges ---- */

static int range_ok(struct zs_zram *z, uint64_t first, uint64_t n)
{
	if (first < z->nslots && n <= z->nslots - first)
		return 1;
	count_invalid(zram_inner(z));
	return 0;
}

static int write_range_call(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf)
{
	const unsigned char *p = buf;

	if (!range_ok(z, first, n))
		return -EINVAL;
	if (!buf) {
		count_invalid(z);
		return -EINVAL;
	}
	if (z->grp)
		return zram_group_write_range(z, first, n, buf);
	for (uint64_t i = 0; i < n; i++) {
		int rc = zs_zram_write(z, first + i, p + i * z->page_size);

		if (rc)
			return rc;
	}
	return 0;
}

int zs_zram_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf, size_t buf_len)
{
	unsigned char *p = buf;

	if (!range_ok(z, first, n))
		return -EINVAL;
	if (!buf || buf_len / z->page_size < n) {
		count_invalid(z);
		return -EINVAL;
	}
	if (z->grp)
		return zram_group_read_range(z, first, n, buf);
	for (uint64_t i = 0; i < n; i++) {
		int rc = zs_zram_read(z, first + i, p + i * z->page_size, z->page_size);

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
	if (z->grp)
		return zram_group_discard_range(z, first, n);
	/* Every slot is tried; a failure anywhere is the call's result, never 0. */
	for (uint64_t i = 0; i < n; i++) {
		int r = zs_zram_discard(z, first + i);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

static void reset_call(struct zs_zram *zv)
{
	struct zs_zram *z = zram_inner(zv);
	struct stream *s = zram_stream_get(z);

	for (uint64_t i = 0; i < z->nslots; i++) {
		struct slot *sl = &z->slots[i];
		uint32_t f = slot_lock(sl);

		slot_unlock(sl, zram_slot_free_locked(z, s, sl, f));
	}
	stream_put(s);
	/* After the objects: a mark cleared first would let a slot read its stale group bytes. */
	if (zv->grp)
		zram_group_reset_marks(zv);
	zs_zram_flush(z);
}

void zs_zram_flush(struct zs_zram *z)
{
	z = zram_inner(z);
	if (z->deferred)
		zs_backend_flush(z->b);
}

static unsigned long compact_call(struct zs_zram *z)
{
	z = zram_inner(z);
	return zs_backend_compact(z->b);
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
	zram_inner(z)->block_signals = on;
	return 0;
}

#define GUARDED(z, expr)                                        \
	do {                                                    \
		if (likely(!(z)->block_signals))                \
			return expr;                            \
		struct zs_sigguard g_;                          \
		zs_signals_block(&g_);                          \
		__typeof__(expr) rc_ = expr;                    \
		zs_signals_restore(&g_);                        \
		return rc_;                                     \
	} while (0)

int zs_zram_write(struct zs_zram *z, uint64_t index, const void *page)
{
	GUARDED(z, write_call(z, index, page));
}

int zs_zram_write_range(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf)
{
	GUARDED(z, write_range_call(z, first, n, buf));
}

int zs_zram_discard(struct zs_zram *z, uint64_t index)
{
	GUARDED(z, discard_call(z, index));
}

int zs_zram_discard_range(struct zs_zram *z, uint64_t first, uint64_t n)
{
	GUARDED(z, discard_range_call(z, first, n));
}

int zs_zram_free_notify(struct zs_zram *z, uint64_t index)
{
	GUARDED(z, free_notify_call(z, index));
}

unsigned long zs_zram_compact(struct zs_zram *z)
{
	GUARDED(z, compact_call(z));
}

void zs_zram_reset(struct zs_zram *z)
{
	struct zs_sigguard g;
	if (z->block_signals)
		zs_signals_block(&g);
	reset_call(z);
	if (z->block_signals)
		zs_signals_restore(&g);
}
