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

/* Each field's range is beside it; zs_backend_create refuses anything else with -EINVAL. */
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

/* Capability flags (read with zs_backend_caps). */
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

/*
 * Opaque: the allocator behind a backend is reached only through the calls
 * below (out of line since 4.0.0, so a new kind or a new op is not an ABI
 * change; docs/abi.md measures what the call costs).
 */
struct zs_backend;

/*
 * Create a backend by kind: 0 and *out, or a negative errno with *out NULL,
 * errno set to the positive code and err (when not NULL) a one-line reason
 * naming the field and its range.  -EINVAL: an unknown kind or a field out
 * of range; -ENOTSUP: a known kind not available in this process.  libzs
 * itself holds zsmalloc and zblock; the malloc baselines ("malloc",
 * "jemalloc", "mimalloc") are the measurement harness's, present only in the
 * zs tool, the benchmarks and the tests (ENOTSUP elsewhere, e.g. through
 * libzs.so).  cfg NULL: zs_backend_config_init's defaults.
 */
ZS_API int zs_backend_create(const struct zs_backend_config *cfg, struct zs_backend **out,
			     char *err, size_t errlen);
ZS_API void zs_backend_destroy(struct zs_backend *b);
/* NULL-terminated list of the kinds this process can create (see zs_backend_create). */
ZS_API const char *const *zs_backend_kinds(void);
/*
 * For kind "zsmalloc": the underlying pool (NULL otherwise).  For tests and
 * tools that exercise zsmalloc itself; code that only stores objects uses
 * the backend calls and capabilities below instead.
 */
ZS_API struct zs_pool *zs_backend_zspool(struct zs_backend *b);
/* The kind's name, as given to zs_backend_create ("zsmalloc", "zblock", ...). */
ZS_API const char *zs_backend_kind(const struct zs_backend *b);
/* The backend's page size: for the malloc kinds the largest object. */
ZS_API size_t zs_backend_page_size(const struct zs_backend *b);

/*
 * The object calls.  size 1..page size; a handle, or an error value
 * (ZS_IS_ERR).  free returns 0 or a negative errno (-EINVAL for a bad
 * handle on a checked backend); free_deferred may hold the free until
 * flush (kinds without deferral free at once).
 */
ZS_API unsigned long zs_backend_malloc(struct zs_backend *b, size_t size);
ZS_API int zs_backend_free(struct zs_backend *b, unsigned long h);
ZS_API int zs_backend_free_deferred(struct zs_backend *b, unsigned long h);
ZS_API void zs_backend_flush(struct zs_backend *b);
/*
 * Read len bytes of h: a pointer to them (into the pool, or local_copy,
 * which must hold len bytes), valid until read_end with the same arguments.
 */
ZS_API void *zs_backend_read_begin(struct zs_backend *b, unsigned long h, size_t len,
				   void *local_copy);
ZS_API void zs_backend_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem);
ZS_API int zs_backend_write(struct zs_backend *b, unsigned long h, const void *src, size_t len);
/*
 * A new object holding src's len bytes: for kind zsmalloc one call,
 * zs_malloc_write (no pin of a handle nobody else holds yet); for the other
 * kinds, and any checked backend, malloc then write.  Returns the handle, or
 * malloc's error, or -EIO when the backend refused to write into the handle
 * it had just given (nothing stays allocated on an error).
 */
ZS_API unsigned long zs_backend_malloc_write(struct zs_backend *b, const void *src, size_t len);
/* Pages given back by compaction (0 for kinds without ZS_BACKEND_CAP_COMPACT). */
ZS_API unsigned long zs_backend_compact(struct zs_backend *b);
/*
 * Fill the first `size` bytes of *st (pass sizeof *st): 0, or -EINVAL for a
 * NULL b or st or a size of 0.  Nothing past `size` is written, so counters
 * appended in a later MINOR leave a caller built against this header intact
 * (docs/abi.md, "Stats that grow").
 */
ZS_API int zs_backend_stats(struct zs_backend *b, struct zs_backend_stats *st, size_t size);
/* Largest object size that still shares a page with others (kinds without classes: page size). */
ZS_API size_t zs_backend_huge_class_size(struct zs_backend *b);
/* The size class index for size, or -EOPNOTSUPP for kinds without classes. */
ZS_API int zs_backend_lookup_class(struct zs_backend *b, size_t size);
/* ZS_BACKEND_CAP_* of this backend. */
ZS_API unsigned zs_backend_caps(const struct zs_backend *b);
/* Pool pages in use, cheaply (ZS_BACKEND_CAP_PAGES); 0 for kinds without pages. */
ZS_API unsigned long zs_backend_total_pages(struct zs_backend *b);
/* Number of size classes (ZS_BACKEND_CAP_CLASSES); 0 for kinds without classes. */
ZS_API int zs_backend_class_count(struct zs_backend *b);
/*
 * Memory the backend holds for objects, in bytes: pages x page_size for
 * ZS_BACKEND_CAP_PAGES kinds, else the allocator's own count (st->mem_bytes),
 * else the live objects' bytes (checked backends).  The zram store's
 * mem_used_total is this.  st: the backend's stats (a whole struct).
 */
ZS_API size_t zs_backend_mem_bytes(const struct zs_backend *b, const struct zs_backend_stats *st);

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
static inline struct zs_backend *zs_backend_create_v3_(const struct zs_backend_config *cfg)
{
	struct zs_backend *b;
	return zs_backend_create(cfg, &b, (char *)0, 0) ? (struct zs_backend *)0 : b;
}
#define zs_backend_create(...) \
	ZS_PICK4_(__VA_ARGS__, zs_backend_create, ~, ~, zs_backend_create_v3_)(__VA_ARGS__)
#define ZS_V3_zs_backend_stats_(b, st) zs_backend_stats(b, st, sizeof(*(st)))
#define zs_backend_stats(...) ZS_PICK3_(__VA_ARGS__, zs_backend_stats, ZS_V3_zs_backend_stats_, ~)(__VA_ARGS__)
#endif
#endif
