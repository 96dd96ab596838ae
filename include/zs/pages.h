/*
 * libzs page provider: the only layer that talks to the OS for pool memory.
 *
 * It hands out "pool pages" of a configurable size (4 KiB .. 64 KiB, a power
 * of two; larger than the OS page they are runs of contiguous OS pages, which
 * is how 16K/64K-page kernels are simulated on a 4K host).  Pages are carved
 * from mmap'd chunks and named by a page number (pfn) that is dense and small,
 * so allocators can pack it into an encoded object location the way the
 * kernel packs a PFN.  Every page has a 64-byte descriptor (the analog of the
 * kernel's struct page / zpdesc) that the owning allocator may use freely.
 *
 * Freed pages are cached, still mapped, for reuse: first in small per-CPU
 * caches (the kernel's per-CPU page lists: single-page allocations and frees
 * take no shared lock; a cache is refilled from and drained to the shared
 * cache a batch at a time), then in one shared cache of hot pages.  A busy
 * pool recycles its pages hot, without a page fault or a system call.
 *
 * Returning memory (the decay).  What goes back: cached pages, never a page
 * in use.  A cached page is returned with MADV_DONTNEED, and a chunk with
 * no page in use is unmapped, so the process's RSS drops.  When:
 *   - decay_ms after it was last used, whether or not the program makes
 *     any further call.  A page in the shared cache goes decay_ms after it
 *     was freed; a per-CPU cache that saw no allocation or free for decay_ms
 *     is emptied whole (its pages go 1 to 1.5 decays after its last use).
 *     Calls do this on the way (a provider's lock round, or every 64
 *     operations of a per-CPU cache); when no call comes, a background
 *     thread does it (below).  With the default 500 ms, a pool, a zram
 *     store or a region whose data was all freed is back within a few MiB
 *     of its live data about 0.5-1 s later.
 *   - at once, past a bound: cache_pages for the provider, and one budget
 *     for the whole process (ZS_PAGES_DEFAULT_CACHE_BYTES, 128 MiB) shared
 *     by every provider created with cache_pages 0, so eight pools do not
 *     keep eight caches.  A provider over the process budget returns its
 *     own coldest cached pages.  Per-CPU caches are outside both counts
 *     (at most 64 pages per CPU and provider).
 *   - at once on zs_pages_trim() (zs_pool_trim, zs_compact).
 * The background thread ("zs-purge", one per process, not per pool) exists
 * only while pages are cached: none at create, started once the shared
 * caches hold 2 MiB, ended by itself once nothing is cached anywhere, per-CPU
 * caches included.  A program that caches less than that (a pool that
 * allocates and frees a few pages, kept in its per-CPU caches) starts none:
 * those pages go with its next call's decay, when a thread started for more
 * sees them idle, or at a trim.  The thread runs with every signal blocked
 * and is detached (it never keeps a process from exiting; a destructor stops
 * it at exit or unload); a forked child starts its own when it next caches
 * pages.
 * Turning it off or tuning it, per provider: decay_ms (below; the pools'
 * page_cache_decay_ms), ZS_PAGES_DECAY_NEVER to keep cached pages until a
 * trim or the bound (no thread for that provider), cache_pages =
 * ZS_PAGES_NO_CACHE to return every freed page at once (the kernel's
 * behaviour: no cache, no thread).  For the whole process, read once at
 * the first provider's creation, for the fields left 0:
 *   ZS_PAGES_DECAY_MS=N   the default decay, 1..3600000 ms; 0: no cache,
 *                         every freed page goes back at once; -1: never by
 *                         time (no thread; only trim and the bounds).
 *   ZS_PAGES_CACHE_MB=N   the process-wide budget (and each provider's
 *                         default bound), 0: no cache.
 * Tests can inject allocation failures.
 *
 * Thread safety: all functions are safe to call concurrently.  Address and
 * descriptor lookups (zs_pages_addr, zs_pages_desc) take no lock.
 */
#ifndef ZS_PAGES_H
#define ZS_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Page number; ZS_PFN_NONE is never a valid page. */
typedef uint64_t zs_pfn_t;
#define ZS_PFN_NONE ((zs_pfn_t)-1)

/*
 * Per-page descriptor, 64 bytes.  Zeroed when the page is handed out; its
 * contents are the owner's business (zsmalloc keeps its zspage header in the
 * first page's descriptor, as the kernel keeps it beside struct page).
 */
struct zs_page_desc {
	void *owner;        /* owner-defined, e.g. the zspage this page belongs to */
	zs_pfn_t next;      /* owner-defined, e.g. next page of a chain */
	uintptr_t word[6];  /* owner-defined */
};

/*
 * Every count of pages in a config is bounded by the span a provider can
 * describe, ZS_PAGES_MAX_SPAN bytes (1 TiB): at most ZS_PAGES_MAX_SPAN /
 * page_size pages.  A value outside a field's range is refused with EINVAL.
 */
#define ZS_PAGES_MAX_SPAN ((size_t)1 << 40)
#define ZS_PAGES_MAX_CHUNK ((size_t)1 << 30)

struct zs_pages_config {
	size_t page_size;    /* bytes; 0 -> 4096.  Power of two, 4096..65536 (and >= the OS page). */
	size_t chunk_bytes;  /* mmap granule; 0 -> max(2 MiB, 16 pages).
	                        Power of two, page_size..ZS_PAGES_MAX_CHUNK (1 GiB). */
	size_t max_pages;    /* hard limit on pages in use (-ENOMEM past it); 0 -> none.
	                        0..ZS_PAGES_MAX_SPAN / page_size. */
	size_t cache_pages;  /* bound on freed pages kept mapped for reuse, per-CPU caches
	                        included; 0 -> ZS_PAGES_DEFAULT_CACHE_BYTES worth (or
	                        ZS_PAGES_CACHE_MB), and the shared cache counts in the
	                        process-wide budget of the same size.  Non-zero: this
	                        provider's own bound, outside the budget.
	                        0..ZS_PAGES_MAX_SPAN / page_size, else EINVAL.  ZS_PAGES_NO_CACHE
	                        returns every page at once.  Per-CPU caches are used only when the
	                        bound is at least 128 pages per possible CPU (they then
	                        hold at most 64 pages each, half the bound at most). */
	unsigned decay_ms;   /* cached pages unused this long go back to the OS, even in a
	                        program that makes no further call (see the top of this file);
	                        0 -> the process default (ZS_PAGES_DEFAULT_DECAY_MS, or
	                        ZS_PAGES_DECAY_MS from the environment).  1..3600000, or
	                        ZS_PAGES_DECAY_NEVER (only trim and the bounds return them),
	                        else EINVAL. */
};
#define ZS_PAGES_NO_CACHE ((size_t)-1)
/* The process-wide budget of the providers created with cache_pages 0, and each one's bound. */
#define ZS_PAGES_DEFAULT_CACHE_BYTES ((size_t)128 << 20)
#define ZS_PAGES_DEFAULT_DECAY_MS 500u
#define ZS_PAGES_MAX_DECAY_MS 3600000u
#define ZS_PAGES_DECAY_NEVER 0xffffffffu

struct zs_pages_stats {
	size_t page_size;
	size_t pages_in_use;    /* handed out and not yet freed */
	size_t pages_peak;      /* high-water mark of pages_in_use; with per-CPU caches
	                           sampled when the shared lock is taken and on this call */
	size_t pages_cached;    /* freed but still mapped (bounded by cache_pages) */
	size_t pages_cpu_cached;/* of which in per-CPU caches */
	uint64_t pages_decayed; /* returned to the OS by the decay, in calls or by the purge
	                           thread (not by trim or a bound) */
	size_t chunks_mapped;   /* chunks currently mmap'd */
	size_t bytes_mapped;    /* chunk bytes currently mmap'd (virtual) */
	uint64_t allocs, frees, failed_allocs;  /* calls; a bulk free counts each page */
};

struct zs_pages;

/* Returns NULL with errno = EINVAL (bad config) or ENOMEM (README.md, "Errors"). */
ZS_API struct zs_pages *zs_pages_create(const struct zs_pages_config *cfg);
/* Unmaps everything, including pages still in use. */
ZS_API void zs_pages_destroy(struct zs_pages *p);

ZS_API size_t zs_pages_page_size(const struct zs_pages *p);

/*
 * The pool page sizes every libzs layer accepts (pages, zsmalloc, zblock,
 * backends, zram, the zs tool, trace files, Python): a power of two in
 * ZS_PAGE_SIZE_MIN..ZS_PAGE_SIZE_MAX.  1 if `size` is one, else 0; pure,
 * thread safe.  Callers map 0 to their default (4096) before asking.
 * zs_pages_create also refuses a page smaller than the OS page.
 */
#define ZS_PAGE_SIZE_MIN ((size_t)4096)
#define ZS_PAGE_SIZE_MAX ((size_t)65536)
ZS_API int zs_page_size_valid(size_t size);

/*
 * Allocate one page; its contents are unspecified (not necessarily zero, as
 * with the kernel's alloc_page without __GFP_ZERO).  Returns 0 and sets *pfn,
 * or -ENOMEM (limit reached, mmap failed, or injected failure).
 */
ZS_API int zs_pages_alloc(struct zs_pages *p, zs_pfn_t *pfn);
/*
 * Allocate n (1..64) pages that are contiguous in the address space and have
 * consecutive page numbers (for zblock's multi-page blocks).  Same returns.
 */
ZS_API int zs_pages_alloc_run(struct zs_pages *p, unsigned n, zs_pfn_t *first);
/* Free one page / a run from zs_pages_alloc_run.  The pages' memory is gone. */
ZS_API void zs_pages_free(struct zs_pages *p, zs_pfn_t pfn);
ZS_API void zs_pages_free_run(struct zs_pages *p, zs_pfn_t first, unsigned n);
/*
 * Free n pages from zs_pages_alloc/_run, in any order: the same as n calls of
 * zs_pages_free (invalid or repeated pfns are ignored), but the bookkeeping
 * takes the lock twice in all and neighbouring pages that go back to the OS
 * share one madvise.  zsmalloc frees a zspage's chain with it.
 */
#define ZS_FREE_BULK_MAX 64u
ZS_API void zs_pages_free_bulk(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n);

/* Address of a page in use (lock-free).  Behaviour is undefined for pages not in use. */
ZS_API void *zs_pages_addr(const struct zs_pages *p, zs_pfn_t pfn);
/* Descriptor of a page in use (lock-free). */
ZS_API struct zs_page_desc *zs_pages_desc(const struct zs_pages *p, zs_pfn_t pfn);
/* Page number of an address inside a page in use, or ZS_PFN_NONE. */
ZS_API zs_pfn_t zs_pages_pfn_of(const struct zs_pages *p, const void *addr);
/* 1 if pfn names a page currently handed out (for checked modes), else 0. */
ZS_API int zs_pages_valid(const struct zs_pages *p, zs_pfn_t pfn);

/* Return every cached page, per-CPU caches included, to the OS (and unmap chunks left empty). */
ZS_API void zs_pages_trim(struct zs_pages *p);
/* Return the shared cache's pages older than decay_ms now (what any call does on the way). */
ZS_API void zs_pages_decay(struct zs_pages *p);
ZS_API void zs_pages_get_stats(const struct zs_pages *p, struct zs_pages_stats *st);
ZS_API size_t zs_pages_in_use(const struct zs_pages *p);
/* Change the limit at run time (0 = none; above ZS_PAGES_MAX_SPAN / page_size means none
 * too); pages already in use are kept. */
ZS_API void zs_pages_set_limit(struct zs_pages *p, size_t max_pages);

#ifdef __cplusplus
}
#endif
#endif
