/*
 * libzs zblock: Vitaly Wool's 2025 zblock allocator (never merged upstream),
 * rebuilt from the design facts in the LKML thread so that it can be measured
 * against zsmalloc on the same data.  Shaped like zsmalloc.h on purpose.
 *
 * A block is 1..8 contiguous pool pages: a header (bitmap of used slots,
 * free-slot counter, list link) followed by n equal slots.  A size class is
 * one (slots, pages) descriptor; the slot size is derived from it.  There is
 * no per-object header and no stored length: a read is a plain pointer into
 * the block, a write one memcpy.  Empty blocks go back to the page provider
 * at once; nothing is ever moved, so zblock_compact() frees nothing (see
 * docs/compare.md for how a handle-based compaction would work).
 *
 * Errors (README.md, "Errors"): int functions return 0 or -errno;
 * zblock_malloc returns a handle or an error value tested with ZS_IS_ERR()
 * from zsmalloc.h; zblock_obj_read_begin returns NULL and sets errno;
 * zblock_pool_create has the one constructor shape (README.md, "Errors").
 *
 * Thread safety: every function may be called concurrently (one lock per
 * size class; reads and writes take none).
 */
#ifndef ZS_ZBLOCK_H
#define ZS_ZBLOCK_H

#include <stddef.h>
#include <stdio.h>
#include "zs/zsmalloc.h"
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZBLOCK_MAX_PAGES_PER_BLOCK 8

/* Each field's range is beside it; zblock_pool_create refuses anything else with -EINVAL. */
struct zblock_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	size_t page_size;        /* pool page size; 0 -> 4096 (4096..65536, power of two) */
	size_t max_pages;        /* pool page limit (zblock_malloc -> -ENOMEM); 0 -> none;
	                            0..ZS_PAGES_MAX_SPAN / page_size (zs/pages.h) */
	int checked;             /* 0 or 1: bad/foreign/double-freed handles -> -EINVAL */
	int huge;                /* 0 or 1.  1: one extra class (7 slots in 8 pages) for sizes
	                            above the table's largest slot up to page_size, so zram can
	                            store incompressible pages; 0: the kernel's -ENOSPC there */
	size_t page_cache_pages; /* passed to the page provider (its cache_pages); 0 -> its
	                            default; 0..ZS_PAGES_MAX_SPAN / page_size or ZS_PAGES_NO_CACHE */
	uint64_t reserved[4];        /* must be 0: later fields are carved out of it, zero
	                               meaning today's behaviour (docs/abi.md) */
};

/* Geometry of one size class (block descriptor). */
struct zblock_class_info {
	int index;
	unsigned slot_size;        /* S = round_down((P*page_size - H) / n, 8) */
	unsigned slots_per_block;  /* n */
	unsigned pages_per_block;  /* P, 1..8 */
};

struct zblock_class_stats {
	int index;
	unsigned slot_size, slots_per_block, pages_per_block;
	unsigned long blocks;      /* blocks in use */
	unsigned long objects;     /* used slots */
	unsigned long pages;       /* blocks * P */
};

struct zblock_pool;

/* Defaults: 4K pages, no limit, unchecked, huge off (kernel behaviour). */
ZS_API void zblock_config_init(struct zblock_config *cfg);

/*
 * NULL cfg -> defaults.  0 and *out, or -EINVAL (a field out of range) or
 * -ENOMEM. On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 * (zblock_create_pool before 4.0.0.)
 */
ZS_API int zblock_pool_create(const struct zblock_config *cfg, struct zblock_pool **out, char *err,
			      size_t errlen);
/* Frees everything, live objects included. */
ZS_API void zblock_destroy_pool(struct zblock_pool *pool);

/*
 * Allocate `size` bytes.  Returns a handle, or -EINVAL (size 0), -ENOSPC
 * (size above the largest class), -ENOMEM (no memory / page limit).
 */
ZS_API unsigned long zblock_malloc(struct zblock_pool *pool, size_t size);
/*
 * Free; 0 and error values are ignored (returns 0).  Checked mode: a bad,
 * foreign or already freed handle returns -EINVAL and changes nothing.
 */
ZS_API int zblock_free(struct zblock_pool *pool, unsigned long handle);

/* A plain pointer into the block; local_copy is never used.  NULL on a bad
 * handle (checked mode) or mem_len larger than the slot. */
ZS_API void *zblock_obj_read_begin(struct zblock_pool *pool, unsigned long handle, size_t mem_len,
			    void *local_copy);
ZS_API void zblock_obj_read_end(struct zblock_pool *pool, unsigned long handle, size_t mem_len,
			 void *mem);
/* One memcpy.  -EINVAL on a bad handle (checked mode) or len larger than the slot. */
ZS_API int zblock_obj_write(struct zblock_pool *pool, unsigned long handle, const void *src, size_t len);

/* zblock moves nothing: always 0. */
ZS_API unsigned long zblock_compact(struct zblock_pool *pool);
/* Pool pages in use (sum over classes of blocks * pages per block). */
ZS_API unsigned long zblock_get_total_pages(const struct zblock_pool *pool);
/* Live objects. */
ZS_API unsigned long zblock_pool_objects(const struct zblock_pool *pool);
/* Largest size zblock_malloc accepts. */
ZS_API size_t zblock_max_size(const struct zblock_pool *pool);
/* Header bytes H at the start of every block. */
ZS_API size_t zblock_header_size(const struct zblock_pool *pool);

ZS_API int zblock_class_count(const struct zblock_pool *pool);
/* 0, or -EINVAL for an index outside 0 .. zblock_class_count - 1. */
ZS_API int zblock_class_info(const struct zblock_pool *pool, int index, struct zblock_class_info *info);
/* Class for `size`: the smallest slot >= size; -EINVAL (size 0) or -ENOSPC (above the largest). */
ZS_API int zblock_lookup_class(const struct zblock_pool *pool, size_t size);
/*
 * 0, or -EINVAL for an index outside 0 .. zblock_class_count - 1. Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 */
ZS_API int zblock_class_stats(struct zblock_pool *pool, int index, struct zblock_class_stats *st,
			      size_t size);

/*
 * The descriptor table a pool of this page size would use, without a pool:
 * fills up to `max` entries and returns the class count, or -EINVAL.  4K and
 * 16K use the final kernel tables; other sizes a derived table (zblock.c).
 */
ZS_API int zblock_geometry(size_t page_size, int huge, struct zblock_class_info *out, int max);

#ifdef __cplusplus
}
#endif

/*
 * 3.x source compatibility (off with ZS_NO_COMPAT3; libzs's own tree builds
 * with it off).  A program written for 3.x compiles unchanged against 4.x:
 * the calls below pick the 4.0.0 function by their argument count, so the
 * 4.0.0 symbols are the only ones in libzs.so and the old calls lose only
 * the reason text.  Reading struct zs_backend's fields is the one 3.x usage
 * not kept (the struct is opaque).  docs/abi.md, 4.0.0.
 */
#ifndef ZS_NO_COMPAT3
static inline struct zblock_pool *zblock_create_pool(const struct zblock_config *cfg)
{
	struct zblock_pool *p;
	return zblock_pool_create(cfg, &p, (char *)0, 0) ? (struct zblock_pool *)0 : p;
}
#define ZS_V3_zblock_class_stats_(p, i, st) zblock_class_stats(p, i, st, sizeof(*(st)))
#define zblock_class_stats(...) \
	ZS_PICK4_(__VA_ARGS__, zblock_class_stats, ZS_V3_zblock_class_stats_, ~, ~)(__VA_ARGS__)
#endif
#endif
