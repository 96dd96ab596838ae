/*
 * The core store: the slot table and the write/read/free paths of
 * drivers/block/zram over a libzs backend.  It knows nothing of groups,
 * views or signal guards (zram.c, the public entry points, adds those), and
 * calls only down: backing.c for written-back slots, stream.c, slot.c,
 * params.c and the backend.  The design note and the lock order are at the
 * top of zram.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"
#include "backend/backend_internal.h"   /* backend_create_for_store */

/* ---- Slot free, memory accounting ---- */

/*
 * The kernel's slot_free, slot locked: drop whatever the slot holds and
 * return the cleared flags (idle, incompressible, priority all reset).
 */
uint32_t zram_slot_free_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f)
{
	assert_internal(slot_is_locked(sl) && !(f & F_SLOCK));
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
			return (uint64_t)zs_backend_total_pages(z->b) * z->b->page_size;
		zs_backend_stats(z->b, &st, sizeof(st));
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

/* Past the limit: with deferred frees, ask again once those queued are done. */
static int can_store_after_flush(struct zs_zram *z)
{
	if (!z->deferred)
		return 0;
	zram_core_flush(z);
	return can_store(z);
}

/* ---- Create / destroy ---- */

/*
 * A core store of page size ps (checked by the caller, zram.c or group.c,
 * with the config's struct_size, disksize and filter): the unit a slot
 * holds and compresses.  Its objects live in a pool of pool_page pages:
 * ps itself, or, for a group store, the slots' own page size, with
 * objects of up to ps bytes spanning several pool pages (zsmalloc's
 * max_object_size, set here).
 */
int zram_core_create(const struct zs_zram_config *cfg, size_t ps, size_t pool_page,
		     struct zs_zram **out, char *err, size_t err_len)
{
	struct zs_zram *z;
	int rc;

	*out = NULL;
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

	struct zs_backend_config bc = cfg->backend;
	if (pool_page < ps && (!bc.zs.max_object_size || bc.zs.max_object_size < ps))
		bc.zs.max_object_size = ps;
	z->b = backend_create_for_store(&bc, pool_page, &rc, err, err_len);
	if (!z->b)
		goto fail;
	z->huge_size = zs_backend_huge_class_size(z->b);
	if (!z->huge_size || z->huge_size > ps)
		z->huge_size = ps;
	/* Objects over a pool page: store the raw unit once its object would
	 * take as many pool pages (a read then needs no decompression): its
	 * last partial page no longer packs into a small class, so it costs a
	 * page, like the raw unit's last. */
	if (pool_page < ps)
		z->huge_size += ps - pool_page; /* the backend's, a page's, is under ps */

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

void zram_core_destroy(struct zs_zram *z)
{
	zram_core_reset(z);
	zram_wb_destroy(z);
	zram_streams_free(z);
	zs_backend_destroy(z->b);
	free(z->slots);
	free(z);
}

/* ---- Write ---- */

/* Every machine word equal to the first: word i == word i+1 for all i. */
int zram_page_same_filled(const void *page, size_t ps, unsigned long *fill)
{
	const unsigned char *p = page;

	if (memcmp(p, p + sizeof(unsigned long), ps - sizeof(unsigned long)))
		return 0;
	if (fill)
		memcpy(fill, p, sizeof(*fill));
	return 1;
}

enum zs_zram_store_kind zram_store_kind(long comp_len, size_t huge_size)
{
	return comp_len <= 0 || (size_t)comp_len >= huge_size ? ZS_ZRAM_STORE_RAW
							       : ZS_ZRAM_STORE_COMPRESSED;
}

int zram_store_decide(struct zs_comp *comp, const void *page, size_t ps, size_t huge_size,
		      void *buf, size_t buf_cap, struct zs_zram_store_decision *d)
{
	int n;

	memset(d, 0, sizeof(*d));
	if (unlikely(zram_page_same_filled(page, ps, &d->fill))) {
		d->kind = ZS_ZRAM_STORE_SAME;
		return 0;
	}
	n = zs_compress(comp, page, ps, buf, buf_cap);
	if (unlikely(n < 0))
		return n;
	d->comp_len = (size_t)n;
	d->kind = zram_store_kind(n, huge_size);
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

int zram_core_write(struct zs_zram *z, uint64_t index, const void *page)
{
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

	n = zram_store_decide(s->comp, page, z->page_size, z->huge_size, s->buf, s->buf_cap, &d);
	if (unlikely(n < 0))
		goto fail;
	if (unlikely(d.kind == ZS_ZRAM_STORE_SAME)) {
		write_same(z, s, sl, d.fill);
		stream_put(s);
		return 0;
	}
	n = (int)d.len;
	nf = (uint32_t)n | (d.kind == ZS_ZRAM_STORE_RAW ? F_HUGE : 0);

	/*
	 * Allocated and written in one call (zs_backend_malloc_write: no pin of a
	 * handle nobody else has); a failed write (-EIO: the allocator refused
	 * a handle it had just given) leaves nothing allocated.
	 */
	h = zs_backend_malloc_write(z->b, d.data, (size_t)n);
	if (unlikely(ZS_IS_ERR(h))) {
		n = (int)ZS_ERR(h); /* the allocator's own code, as the kernel's zram passes it on */
		goto fail;
	}
	/*
	 * Past the limit with frees still queued (deferred_free): those objects
	 * are the store's to give back, so wait for them and ask again before
	 * failing the write - a discard followed at once by a write must not
	 * fail for memory that is already free (the worker gathers up to 1 ms).
	 */
	if (unlikely(!can_store(z)) && !can_store_after_flush(z)) {
		zs_backend_free(z->b, h);
		n = -ENOMEM;
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

	assert_internal(slot_is_locked(sl));
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

int zram_core_read(struct zs_zram *z, uint64_t index, void *buf)
{
	struct stream *s;
	struct slot *sl;
	uint32_t f;
	int rc;

	if (unlikely(index >= z->nslots || !buf)) {
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

int zram_core_discard(struct zs_zram *z, uint64_t index)
{
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

int zram_core_free_notify(struct zs_zram *z, uint64_t index)
{
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
	/* A trylock: the kernel's free notification never waits for a slot. */
	lock_take(sl, ZS_LOCK_ZRAM_SLOT);
	f = atomic_fetch_or_explicit(&sl->flags, F_SLOCK, memory_order_acquire);
	if (f & F_SLOCK) {
		lock_drop(sl);
		cnt_add(s, C_MISS_FREE, 1);
		rc = -EBUSY;
	} else {
		f = zram_slot_free_locked(z, s, sl, f);
		slot_unlock(sl, f);
	}
	stream_put(s);
	return rc;
}

/* ---- Slot info, reset, maintenance of the backend ---- */

int zram_core_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
			unsigned *prio)
{
	struct slot *sl;
	uint32_t f;

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

void zram_core_reset(struct zs_zram *z)
{
	struct stream *s = zram_stream_get(z);

	for (uint64_t i = 0; i < z->nslots; i++) {
		struct slot *sl = &z->slots[i];
		uint32_t f = slot_lock(sl);

		slot_unlock(sl, zram_slot_free_locked(z, s, sl, f));
	}
	stream_put(s);
	zram_core_flush(z);
}

void zram_core_flush(struct zs_zram *z)
{
	if (z->deferred)
		zs_backend_flush(z->b);
}

unsigned long zram_core_compact(struct zs_zram *z)
{
	return zs_backend_compact(z->b);
}
