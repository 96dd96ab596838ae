/*
 * The allocator under test of the randomized allocator tests
 * (test_model_check.c and tests/fuzz/fuzz_alloc.c): zsmalloc or zblock,
 * called directly or through the backend interface, with the pool's
 * configuration axes drawn from random bits.  One home for the dispatch and
 * the drawing, so the model checker and the fuzzer exercise the same
 * allocators the same way and a new kind or axis is added once.
 * Header-only (static functions); internal test helper.
 */
#ifndef ZS_TESTS_ALLOC_UT_H
#define ZS_TESTS_ALLOC_UT_H

#include <stddef.h>
#include <stdint.h>

#include "zs/backend.h"
#include "zs/zblock.h"
#include "zs/zsmalloc.h"
#include "must.h"

enum ut_kind { UT_ZS, UT_ZBLOCK, UT_ZS_BACKEND, UT_ZBLOCK_BACKEND, UT_NKINDS };

struct ut_alloc {
	int kind;                 /* enum ut_kind */
	struct zs_pool *zp;       /* UT_ZS, and the pool under UT_ZS_BACKEND */
	struct zblock_pool *zb;   /* UT_ZBLOCK */
	struct zs_backend *be;    /* the backend kinds */
	size_t max_size;          /* the largest object it takes (0: creation failed) */
};

/*
 * zsmalloc's policy axes from random bits: bits 0-3 the chain (1..16), bit 4
 * the chain policy, bits 5-6 the free mode, bits 7.. an index into deltas[].
 */
static inline void ut_draw_zs(struct zs_pool_config *c, unsigned bits, const unsigned *deltas,
			      unsigned ndeltas)
{
	c->max_chain = 1 + (bits & 15);
	c->chain_policy = (enum zs_chain_policy)((bits >> 4) & 1);
	c->free_mode = (enum zs_free_mode)(((bits >> 5) & 3) % 3);
	c->class_delta = deltas[(bits >> 7) % ndeltas];
}

/* zs_malloc's limit: max_object_size, 0 meaning one page (include/zs/zsmalloc.h). */
static inline size_t ut_zs_max_size(const struct zs_pool_config *zc, size_t page_size)
{
	return zc->max_object_size ? zc->max_object_size : page_size;
}

/*
 * Create the allocator of `kind`: the zsmalloc kinds with *zc (its
 * page_size, checked and max_pages must already be set), zblock with
 * zb_huge.  0, or -1 with errno set (the caller reports).
 */
static inline int ut_create(struct ut_alloc *a, int kind, size_t page_size, size_t max_pages,
			    int checked, int zb_huge, const struct zs_pool_config *zc)
{
	*a = (struct ut_alloc){ .kind = kind };
	if (kind == UT_ZS) {
		a->zp = try_pool_create(zc);
		a->max_size = a->zp ? ut_zs_max_size(zc, page_size) : 0;
	} else if (kind == UT_ZS_BACKEND) {
		struct zs_backend_config bc;
		zs_backend_config_init(&bc);
		bc.page_size = page_size;
		bc.max_pages = max_pages;
		bc.checked = checked;
		bc.zs = *zc;
		a->be = try_backend_create(&bc);
		a->zp = a->be ? zs_backend_zspool(a->be) : NULL;
		a->max_size = a->be ? ut_zs_max_size(zc, page_size) : 0;
	} else if (kind == UT_ZBLOCK) {
		struct zblock_config c;
		zblock_config_init(&c);
		c.page_size = page_size;
		c.max_pages = max_pages;
		c.checked = checked;
		c.huge = zb_huge;
		a->zb = try_zblock_create(&c);
		a->max_size = a->zb ? zblock_max_size(a->zb) : 0;
	} else {
		struct zs_backend_config bc;
		zs_backend_config_init(&bc);
		bc.kind = "zblock";
		bc.page_size = page_size;
		bc.max_pages = max_pages;
		bc.checked = checked;
		a->be = try_backend_create(&bc);
		a->max_size = a->be ? page_size : 0; /* the backend turns huge on */
	}
	return a->zp || a->zb || a->be ? 0 : -1;
}

static inline void ut_destroy(struct ut_alloc *a)
{
	if (a->kind == UT_ZS)
		zs_destroy_pool(a->zp);
	else if (a->kind == UT_ZBLOCK)
		zblock_destroy_pool(a->zb);
	else
		zs_backend_destroy(a->be);
	a->zp = NULL;
	a->zb = NULL;
	a->be = NULL;
}

static inline unsigned long ut_malloc(struct ut_alloc *a, size_t n)
{
	switch (a->kind) {
	case UT_ZS: return zs_malloc(a->zp, n);
	case UT_ZBLOCK: return zblock_malloc(a->zb, n);
	default: return zs_backend_malloc(a->be, n);
	}
}

/* Allocate n bytes holding src: zs_malloc_write / zs_backend_malloc_write, zblock's two calls. */
static inline unsigned long ut_malloc_write(struct ut_alloc *a, const void *src, size_t n)
{
	switch (a->kind) {
	case UT_ZS: return zs_malloc_write(a->zp, src, n);
	case UT_ZBLOCK: {
		unsigned long h = zblock_malloc(a->zb, n);
		if (!ZS_IS_ERR(h) && zblock_obj_write(a->zb, h, src, n)) {
			zblock_free(a->zb, h);
			return (unsigned long)-EIO;
		}
		return h;
	}
	default: return zs_backend_malloc_write(a->be, src, n);
	}
}

static inline int ut_free(struct ut_alloc *a, unsigned long h, int deferred)
{
	switch (a->kind) {
	case UT_ZS: return deferred ? zs_free_deferred(a->zp, h) : zs_free(a->zp, h);
	case UT_ZBLOCK: return zblock_free(a->zb, h);
	default: return deferred ? zs_backend_free_deferred(a->be, h) : zs_backend_free(a->be, h);
	}
}

/* Drain deferred frees (zblock has none). */
static inline void ut_flush(struct ut_alloc *a)
{
	if (a->kind == UT_ZS)
		zs_free_deferred_flush(a->zp);
	else if (a->be)
		zs_backend_flush(a->be);
}

static inline void *ut_read_begin(struct ut_alloc *a, unsigned long h, size_t len, void *local)
{
	switch (a->kind) {
	case UT_ZS: return zs_obj_read_begin(a->zp, h, len, local);
	case UT_ZBLOCK: return zblock_obj_read_begin(a->zb, h, len, local);
	default: return zs_backend_read_begin(a->be, h, len, local);
	}
}

static inline void ut_read_end(struct ut_alloc *a, unsigned long h, size_t len, void *m)
{
	switch (a->kind) {
	case UT_ZS: zs_obj_read_end(a->zp, h, len, m); break;
	case UT_ZBLOCK: zblock_obj_read_end(a->zb, h, len, m); break;
	default: zs_backend_read_end(a->be, h, len, m);
	}
}

static inline int ut_write(struct ut_alloc *a, unsigned long h, const void *src, size_t len)
{
	switch (a->kind) {
	case UT_ZS: return zs_obj_write(a->zp, h, src, len);
	case UT_ZBLOCK: return zblock_obj_write(a->zb, h, src, len);
	default: return zs_backend_write(a->be, h, src, len);
	}
}

static inline unsigned long ut_pages(struct ut_alloc *a)
{
	if (a->zp)
		return zs_get_total_pages(a->zp);
	if (a->zb)
		return zblock_get_total_pages(a->zb);
	struct zs_backend_stats bs;
	zs_backend_stats(a->be, &bs, sizeof(bs));
	return bs.pages;
}

static inline unsigned long ut_objects(struct ut_alloc *a)
{
	if (a->zp)
		return zs_pool_objects(a->zp);
	if (a->zb)
		return zblock_pool_objects(a->zb);
	struct zs_backend_stats bs;
	zs_backend_stats(a->be, &bs, sizeof(bs));
	return bs.objects;
}

#endif
