/*
 * Pool memory: the page sizes every layer accepts, and how freed pool
 * memory goes back to the OS -- what the pools' page_cache_* fields and the
 * ZS_PAGES_* environment variables tune.  The page provider behind it (the
 * only layer that talks to the OS for pool memory) is internal to libzs
 * (src/pages/pages.h); a program configures it through the pools' configs.
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
 * pool recycles its pages hot, without a page fault or a system call.  In
 * the application profile (class copies per CPU) an emptied zspage stays
 * whole in its class copy ("parked", src/zsmalloc/park.c) and is that
 * class's next zspage: no call here at all; one that would pass the budget
 * goes to its CPU's cache, its pages kept together for that CPU's next
 * zspage of as many pages (one lock round, not a trip of each page through
 * the shared cache).
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
 *     for the whole process shared by every provider created with
 *     cache_pages 0, so eight pools do not keep eight caches: the larger of
 *     ZS_PAGES_DEFAULT_CACHE_BYTES (128 MiB) and
 *     ZS_PAGES_CACHE_PER_CPU_BYTES (32 MiB) per online CPU, so 128 MiB up
 *     to 4 CPUs and 512 MiB on 16.  It grows with the CPUs because threads
 *     that free and refill at once each need their own zspages back: 16
 *     threads of bench_threads' churn under a 128 MiB budget spent most of
 *     their time returning pages and faulting them in again (2.1x one
 *     thread; 5.1x under 512 MiB, where mimalloc, keeping everything, does
 *     5.6-6.9x; docs/benchmarks.md "Sixteen cores").  A provider over the
 *     process budget returns its own coldest cached pages.  Per-CPU caches
 *     are outside both counts (at most 64 pages per CPU and provider),
 *     except parked zspages, in a class or a CPU cache: they count in the
 *     process budget (a zspage that would take it past the bound is not
 *     parked; to within 64 pages a CPU) and go back decay_ms after they
 *     were parked, even from a class or CPU that stays busy (the thread's
 *     pass, below).
 *   - at once on a trim (zs_pool_trim, zs_compact).
 * The background thread ("zs-purge", one per process, not per pool) exists
 * only while pages are cached: none at create, started once the shared
 * caches hold 2 MiB (or by the next page cached where they already do with
 * no thread: a provider that never decays keeps its cache counted), ended
 * by itself once nothing it watches is cached anywhere, per-CPU caches
 * included.  A program that caches less than that (a pool that
 * allocates and frees a few pages, kept in its per-CPU caches) starts none:
 * those pages go with its next call's decay, when a thread started for more
 * sees them idle, or at a trim.  The thread runs with every signal blocked
 * and is detached (it never keeps a process from exiting; a destructor stops
 * it at exit or unload); a fork waits for the pass in progress (a prepare
 * handler takes the lock a pass holds), so a child may use every provider
 * it inherited, and starts its own thread when it next caches pages.
 * The same thread runs the application profile's pool self-compaction
 * (zs/zsmalloc.h, "Self-compaction"): while such a pool holds pages it
 * keeps the thread looking at it (every 100 ms to 1 s by default), and
 * its compaction passes run on it.
 * Turning it off or tuning it, per provider: the pools'
 * page_cache_decay_ms, ZS_PAGES_DECAY_NEVER to keep cached pages until a
 * trim or the bound (no thread for that provider), cache_pages =
 * ZS_PAGES_NO_CACHE to return every freed page at once (the kernel's
 * behaviour: no cache, no thread).  For the whole process, read once at
 * the first provider's creation, for the fields left 0:
 *   ZS_PAGES_DECAY_MS=N   the default decay, 1..3600000 ms; 0: no cache,
 *                         every freed page goes back at once; -1: never by
 *                         time (no thread; only trim and the bounds).
 *   ZS_PAGES_CACHE_MB=N   the process-wide budget (and each provider's
 *                         default bound), 0: no cache; at most
 *                         ZS_PAGES_MAX_SPAN in MiB (1048576).
 * Any other value (out of range, or not a whole decimal number) is ignored,
 * with a line on stderr, and the built-in default stays.
 *
 * Thread safety: zs_page_size_valid is pure.
 */
#ifndef ZS_PAGES_H
#define ZS_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every count of pages in a config is bounded by the span a provider can
 * describe, ZS_PAGES_MAX_SPAN bytes (1 TiB): at most ZS_PAGES_MAX_SPAN /
 * page_size pages.  A value outside a field's range is refused with EINVAL.
 */
#define ZS_PAGES_MAX_SPAN ((size_t)1 << 40)
#define ZS_PAGES_MAX_CHUNK ((size_t)1 << 30)

#define ZS_PAGES_NO_CACHE ((size_t)-1)
/*
 * The process-wide budget of the providers created with cache_pages 0 (and
 * each one's bound): the larger of ZS_PAGES_DEFAULT_CACHE_BYTES and
 * ZS_PAGES_CACHE_PER_CPU_BYTES times the online CPUs, unless
 * ZS_PAGES_CACHE_MB sets it.
 */
#define ZS_PAGES_DEFAULT_CACHE_BYTES ((size_t)128 << 20)
#define ZS_PAGES_CACHE_PER_CPU_BYTES ((size_t)32 << 20)
#define ZS_PAGES_DEFAULT_DECAY_MS 500u
#define ZS_PAGES_MAX_DECAY_MS 3600000u
#define ZS_PAGES_DECAY_NEVER 0xffffffffu

/*
 * The pool page sizes every libzs layer accepts (pages, zsmalloc, zblock,
 * backends, zram, the zs tool, trace files, Python): a power of two in
 * ZS_PAGE_SIZE_MIN..ZS_PAGE_SIZE_MAX.  1 if `size` is one, else 0; pure,
 * thread safe.  Callers map 0 to ZS_PAGE_SIZE_DEFAULT before asking.
 * pages_create also refuses a page smaller than the OS page.
 */
/* What a config's page_size of 0 means, in every layer: the one home of "0 -> 4096". */
#define ZS_PAGE_SIZE_DEFAULT ((size_t)4096)
#define ZS_PAGE_SIZE_MIN ((size_t)4096)
#define ZS_PAGE_SIZE_MAX ((size_t)65536)
ZS_API int zs_page_size_valid(size_t size);

#ifdef __cplusplus
}
#endif
#endif
