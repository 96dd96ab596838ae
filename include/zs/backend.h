/*
 * libzs backend interface: one object-store API over every allocator, the
 * role zpool once had in the kernel.  The zram store, `zs replay --store`,
 * `zs compare` and the benchmarks run on any backend: zsmalloc, zblock, and
 * the malloc baselines (glibc, jemalloc, mimalloc) that hold each object in
 * an exact-size buffer, i.e. what an application would do today.
 *
 * Handles are opaque unsigned longs; errors follow zsmalloc.h (ZS_IS_ERR)
 * and README.md, "Errors".
 * All backends are thread safe.
 */
#ifndef ZS_BACKEND_H
#define ZS_BACKEND_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include "zs/zsmalloc.h"
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each field's range is beside it; zs_backend_create refuses anything else with EINVAL. */
struct zs_backend_config {
	const char *kind;           /* "zsmalloc", "zblock", "malloc", "jemalloc", "mimalloc";
	                               NULL -> "zsmalloc" */
	size_t page_size;           /* 0 -> 4096 (4096..65536, power of two); for the malloc
	                               kinds the largest object */
	size_t max_pages;           /* 0 -> no limit (zsmalloc/zblock; ignored by the malloc
	                               kinds); 0..ZS_PAGES_MAX_SPAN / page_size (zs/pages.h) */
	int checked;                /* 0 or 1: validate handles where the backend can */
	struct zs_pool_config zs;   /* zsmalloc only: policies, ranges as in zsmalloc.h;
	                               page_size/max_pages/checked above win */
};

struct zs_backend_stats {
	unsigned long pages;        /* pool pages in use (zsmalloc/zblock); 0 for malloc kinds */
	size_t mem_bytes;           /* memory the backend holds for objects: pages*page_size, or
	                               for malloc kinds the allocator's own count of mapped/active
	                               bytes (0 if it has none: measure RSS instead) */
	unsigned long objects;      /* live objects */
	size_t object_bytes;        /* sum of live object sizes as requested; only a checked
	                               backend records sizes, so 0 when cfg.checked is 0 */
	unsigned long pages_compacted;
};

struct zs_backend;

struct zs_backend_ops {
	const char *kind;
	int (*create)(struct zs_backend *b, const struct zs_backend_config *cfg);
	void (*destroy)(struct zs_backend *b);
	unsigned long (*malloc)(struct zs_backend *b, size_t size);
	int (*free)(struct zs_backend *b, unsigned long handle);
	int (*free_deferred)(struct zs_backend *b, unsigned long handle);  /* NULL: free */
	void (*flush)(struct zs_backend *b);                                 /* NULL: no-op */
	void *(*read_begin)(struct zs_backend *b, unsigned long h, size_t len, void *local_copy);
	void (*read_end)(struct zs_backend *b, unsigned long h, size_t len, void *mem);
	int (*write)(struct zs_backend *b, unsigned long h, const void *src, size_t len);
	unsigned long (*compact)(struct zs_backend *b);                      /* NULL: 0 */
	void (*stats)(struct zs_backend *b, struct zs_backend_stats *st);
	size_t (*huge_class_size)(struct zs_backend *b);                     /* NULL: page size */
	int (*lookup_class)(struct zs_backend *b, size_t size);              /* NULL: -EOPNOTSUPP */
};

struct zs_backend {
	const struct zs_backend_ops *ops;
	void *impl;
	size_t page_size;
	char kind[16];
};

/* Create a backend by kind; NULL with errno (EINVAL unknown kind, ENOTSUP not built in). */
ZS_API struct zs_backend *zs_backend_create(const struct zs_backend_config *cfg);
ZS_API void zs_backend_destroy(struct zs_backend *b);
/* NULL-terminated list of the kinds compiled in. */
ZS_API const char *const *zs_backend_kinds(void);
/* For kind "zsmalloc": the underlying pool (NULL otherwise). */
ZS_API struct zs_pool *zs_backend_zspool(struct zs_backend *b);

static inline unsigned long zs_backend_malloc(struct zs_backend *b, size_t size)
{
	return b->ops->malloc(b, size);
}
static inline int zs_backend_free(struct zs_backend *b, unsigned long h)
{
	return b->ops->free(b, h);
}
static inline int zs_backend_free_deferred(struct zs_backend *b, unsigned long h)
{
	return b->ops->free_deferred ? b->ops->free_deferred(b, h) : b->ops->free(b, h);
}
static inline void zs_backend_flush(struct zs_backend *b)
{
	if (b->ops->flush)
		b->ops->flush(b);
}
static inline void *zs_backend_read_begin(struct zs_backend *b, unsigned long h, size_t len,
					  void *local_copy)
{
	return b->ops->read_begin(b, h, len, local_copy);
}
static inline void zs_backend_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	b->ops->read_end(b, h, len, mem);
}
static inline int zs_backend_write(struct zs_backend *b, unsigned long h, const void *src,
				   size_t len)
{
	return b->ops->write(b, h, src, len);
}
static inline unsigned long zs_backend_compact(struct zs_backend *b)
{
	return b->ops->compact ? b->ops->compact(b) : 0;
}
static inline void zs_backend_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	b->ops->stats(b, st);
}
static inline size_t zs_backend_huge_class_size(struct zs_backend *b)
{
	return b->ops->huge_class_size ? b->ops->huge_class_size(b) : b->page_size;
}
static inline int zs_backend_lookup_class(struct zs_backend *b, size_t size)
{
	return b->ops->lookup_class ? b->ops->lookup_class(b, size) : -EOPNOTSUPP;
}

#ifdef __cplusplus
}
#endif
#endif
