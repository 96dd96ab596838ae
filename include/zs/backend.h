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
 *
 * Callers never ask which allocator is underneath: what differs between
 * kinds is stated by capability flags (zs_backend_caps) and optional ops
 * (total pages, class count, huge class size), so the zram store, the zs
 * tool and the benchmarks treat every kind alike.  `kind` is for display.
 *
 * Page size is a knob of the outermost config only.  A backend's is
 * zs_backend_config.page_size; the embedded zs_pool_config's page_size,
 * max_pages and checked are not read (the backend's three fields are the
 * ones every kind uses).  A zram store's is zs_zram_config.page_size and
 * it sets its backend's (and the pool's) to it, so inside a store the
 * backend's page_size field is not read either.
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
/* Fill with zs_backend_config_init, then change fields: the one way to make one. */
struct zs_backend_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	const char *kind;           /* "zsmalloc", "zblock", "malloc", "jemalloc", "mimalloc";
	                               NULL -> "zsmalloc" */
	size_t page_size;           /* 0 -> 4096 (4096..65536, power of two); for the malloc
	                               kinds the largest object */
	size_t max_pages;           /* 0 -> no limit (zsmalloc/zblock; ignored by the malloc
	                               kinds); 0..ZS_PAGES_MAX_SPAN / page_size (zs/pages.h) */
	int checked;                /* 0 or 1: validate handles where the backend can */
	struct zs_pool_config zs;   /* zsmalloc's policies (zblock reads page_cache_pages),
	                               ranges as in zsmalloc.h, refused with EINVAL for every
	                               kind, those that do not read it included; its
	                               page_size, max_pages and checked are not read: the
	                               three fields above are */
	uint64_t reserved[4];        /* must be 0: later fields are carved out of it, zero
	                               meaning today's behaviour (docs/abi.md) */
};

/*
 * Defaults: kind "zsmalloc", page_size 4096, no page limit, unchecked, and
 * zs filled by zs_pool_config_init.  Never fails; cfg must not be NULL.
 */
ZS_API void zs_backend_config_init(struct zs_backend_config *cfg);

/* Capability flags (zs_backend_ops.caps, read with zs_backend_caps). */
#define ZS_BACKEND_CAP_PAGES           (1u << 0) /* memory is whole pool pages: stats.pages
                                                    counts them, mem_bytes = pages x
                                                    page_size, total_pages is a cheap read */
#define ZS_BACKEND_CAP_FREES_ON_DESTROY (1u << 1) /* destroy releases every live object
                                                    itself (no per-object free needed) */
#define ZS_BACKEND_CAP_COMPACT         (1u << 2) /* compact moves objects and gives pages back */
#define ZS_BACKEND_CAP_CLASSES         (1u << 3) /* size classes: lookup_class, class_count
                                                    and huge_class_size describe them */

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
	unsigned long (*total_pages)(struct zs_backend *b);                  /* NULL: 0 */
	int (*class_count)(struct zs_backend *b);                            /* NULL: 0 */
	unsigned caps;                                                       /* ZS_BACKEND_CAP_* */
};

struct zs_backend {
	const struct zs_backend_ops *ops;
	void *impl;
	size_t page_size;
	char kind[16];
};

/*
 * Create a backend by kind; NULL with errno (EINVAL unknown kind, ENOTSUP a
 * known kind not available in this process).  libzs itself holds zsmalloc
 * and zblock; the malloc baselines ("malloc", "jemalloc", "mimalloc") are
 * the measurement harness's, present only in the zs tool, the benchmarks
 * and the tests (ENOTSUP elsewhere, e.g. through libzs.so).
 */
ZS_API struct zs_backend *zs_backend_create(const struct zs_backend_config *cfg);
ZS_API void zs_backend_destroy(struct zs_backend *b);
/* NULL-terminated list of the kinds this process can create (see zs_backend_create). */
ZS_API const char *const *zs_backend_kinds(void);
/*
 * For kind "zsmalloc": the underlying pool (NULL otherwise).  For tests and
 * tools that exercise zsmalloc itself; code that only stores objects uses
 * the backend calls and capabilities below instead.
 */
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
/*
 * A new object holding src's len bytes: for kind zsmalloc one call,
 * zs_malloc_write (no pin of a handle nobody else holds yet); for the other
 * kinds, and any checked backend, malloc then write.  Returns the handle, or
 * malloc's error, or -EIO when the backend refused to write into the handle
 * it had just given (nothing stays allocated on an error).
 */
ZS_API unsigned long zs_backend_malloc_write(struct zs_backend *b, const void *src, size_t len);
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
/* ZS_BACKEND_CAP_* of this backend. */
static inline unsigned zs_backend_caps(const struct zs_backend *b)
{
	return b->ops->caps;
}
/* Pool pages in use, cheaply (ZS_BACKEND_CAP_PAGES); 0 for kinds without pages. */
static inline unsigned long zs_backend_total_pages(struct zs_backend *b)
{
	return b->ops->total_pages ? b->ops->total_pages(b) : 0;
}
/* Number of size classes (ZS_BACKEND_CAP_CLASSES); 0 for kinds without classes. */
static inline int zs_backend_class_count(struct zs_backend *b)
{
	return b->ops->class_count ? b->ops->class_count(b) : 0;
}
/*
 * Memory the backend holds for objects, in bytes: pages x page_size for
 * ZS_BACKEND_CAP_PAGES kinds, else the allocator's own count (st->mem_bytes),
 * else the live objects' bytes (checked backends).  The zram store's
 * mem_used_total is this.  st: the backend's stats.
 */
static inline size_t zs_backend_mem_bytes(const struct zs_backend *b,
					  const struct zs_backend_stats *st)
{
	if (zs_backend_caps(b) & ZS_BACKEND_CAP_PAGES)
		return st->pages * b->page_size;
	return st->mem_bytes ? st->mem_bytes : st->object_bytes;
}

#ifdef __cplusplus
}
#endif
#endif
