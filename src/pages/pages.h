/*
 * The page provider's interface to the layers above it (zsmalloc, zblock)
 * and to the tests: internal to libzs since 3.0.0 (no program outside the
 * library used it), so none of it is ZS_API.  The public part -- page sizes,
 * the cache bounds and the decay, documented in include/zs/pages.h -- is
 * what pool configs refer to.
 *
 * It hands out "pool pages" of a configurable size (4 KiB .. 64 KiB, a power
 * of two; larger than the OS page they are runs of contiguous OS pages, which
 * is how 16K/64K-page kernels are simulated on a 4K host).  Pages are carved
 * from mmap'd chunks and named by a page number (pfn) that is dense and small,
 * so allocators can pack it into an encoded object location the way the
 * kernel packs a PFN.  Every page has a 64-byte descriptor (the analog of the
 * kernel's struct page / zpdesc) that the owning allocator may use freely.
 * Freed pages are cached, per CPU and shared, and returned as
 * include/zs/pages.h describes ("Returning memory").
 *
 * Thread safety: all functions are safe to call concurrently.  Address and
 * descriptor lookups (pages_addr, pages_desc) take no lock.
 */
#ifndef ZS_SRC_PAGES_PAGES_H
#define ZS_SRC_PAGES_PAGES_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "zs/pages.h"

/* Page number; ZS_PFN_NONE is never a valid page. */
typedef uint64_t pfn_t;
#define ZS_PFN_NONE ((pfn_t)-1)

/*
 * Per-page descriptor, 64 bytes.  Zeroed when the page is handed out; its
 * contents are the owner's business (zsmalloc keeps its zspage header in the
 * first page's descriptor, as the kernel keeps it beside struct page).
 * Which object a page belongs to is not in it: that is the page's owner word
 * (pages/lookup.h, pages_set_owner), in an array of its own.
 */
struct zs_page_desc {
	uintptr_t head;     /* owner-defined */
	pfn_t next;      /* owner-defined, e.g. next page of a chain */
	uintptr_t word[6];  /* owner-defined */
};

struct zs_pages_config {
	size_t page_size;    /* bytes; 0 -> 4096.  Power of two, 4096..65536 (and >= the OS page). */
	size_t chunk_bytes;  /* mmap granule; 0 -> max(2 MiB, 16 pages).
	                        Power of two, page_size..ZS_PAGES_MAX_CHUNK (1 GiB). */
	size_t max_pages;    /* hard limit on pages in use (-ENOMEM past it); 0 -> none.
	                        0..ZS_PAGES_MAX_SPAN / page_size. */
	size_t cache_pages;  /* bound on freed pages kept mapped for reuse, per-CPU caches
	                        included; 0 -> the process budget's worth (zs/pages.h; or
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
	int park_chains;     /* 1: pages_free_bulk parks its pages whole for the next
	                        pages_alloc_bulk on the CPU (below); zsmalloc asks for it
	                        when its class copies are per CPU (the application profile),
	                        so a CPU's zspages are freed and allocated through its own
	                        cache.  0: every page goes back on its own, as pages_free. */
	/*
	 * The owner's parked pages (zs_pages_park_*, below): with park_chains, a
	 * hook the purge thread calls on each pass with the time and the decay;
	 * it gives back, with pages_release_bulk, what its owner parked a
	 * decay ago or more, and returns when it next has something due
	 * (UINT64_MAX: nothing parked).  It runs with the process registry lock
	 * held, so it may take its owner's locks only with a trylock (a free
	 * path holds one while it parks, and parking may start the thread), and
	 * call no zs_pages function but pages_release_bulk and
	 * pages_park_account.  Set at create; the hook stops running when
	 * pages_destroy returns.
	 */
	uint64_t (*reclaim)(void *ctx, uint64_t now_ns, uint64_t decay_ns);
	void *reclaim_ctx;
	/*
	 * The owner's idle work (zsmalloc's self-compaction, src/zsmalloc/autocompact.c),
	 * on the purge thread rather than a thread of the owner's.  idle_due runs on
	 * each pass under the same rules as reclaim (registry lock held: trylocks
	 * only, no zs_pages call); it returns when it next wants a look (UINT64_MAX:
	 * never until pages_idle_kick) and sets *run to have idle_work run in this
	 * pass.  idle_work runs on the purge thread with no lock of this layer held,
	 * so it may take its owner's locks and call any zs_pages function; the
	 * thread serves other providers only after it returns, so it must bound
	 * its own cost.  Only a provider the purge thread watches (a cache and a
	 * decay) runs them.  pages_idle_stop turns them off and waits out a
	 * running idle_work: call it before tearing down what they use.
	 */
	uint64_t (*idle_due)(void *ctx, uint64_t now_ns, bool *run);
	void (*idle_work)(void *ctx);
	void *idle_ctx;
};
struct zs_pages_stats {
	size_t page_size;
	size_t pages_in_use;    /* handed out and not yet freed */
	size_t pages_peak;      /* high-water mark of pages_in_use; with per-CPU caches
	                           sampled when the shared lock is taken and on this call */
	size_t pages_cached;    /* freed but still mapped (bounded by cache_pages) */
	size_t pages_cpu_cached;/* of which in per-CPU caches (parked chains included) */
	uint64_t pages_decayed; /* returned to the OS by the decay, in calls or by the purge
	                           thread (not by trim or a bound) */
	size_t chunks_mapped;   /* chunks currently mmap'd */
	size_t bytes_mapped;    /* chunk bytes currently mmap'd (virtual) */
	uint64_t allocs, frees, failed_allocs;  /* calls; a bulk free counts each page */
};

struct zs_pages;

/* Returns NULL with errno = EINVAL (bad config) or ENOMEM (README.md, "Errors"). */
struct zs_pages *pages_create(const struct zs_pages_config *cfg);
/* Unmaps everything, including pages still in use. */
void pages_destroy(struct zs_pages *p);

size_t pages_page_size(const struct zs_pages *p);

/*
 * Allocate one page; its contents are unspecified (not necessarily zero, as
 * with the kernel's alloc_page without __GFP_ZERO).  Returns 0 and sets *pfn,
 * or -ENOMEM (limit reached, mmap failed, or injected failure).
 */
int pages_alloc(struct zs_pages *p, pfn_t *pfn);
/*
 * Allocate n (1..64) pages that are contiguous in the address space and have
 * consecutive page numbers (for zblock's multi-page blocks).  Same returns.
 */
int pages_alloc_run(struct zs_pages *p, unsigned n, pfn_t *first);
/*
 * Allocate n (1..ZS_FREE_BULK_MAX) single pages, not necessarily
 * neighbours, into pfns[]: all of them (0) or none (-ENOMEM).  With per-CPU
 * caches, the last n-page chain a pages_free_bulk parked on this CPU
 * when there is one (below); else the same pages, in the same order, as n
 * calls of pages_alloc on this CPU, but one per-CPU cache lock round for
 * them all: zsmalloc takes a zspage's chain with it.
 */
int pages_alloc_bulk(struct zs_pages *p, unsigned n, pfn_t *pfns);
/* Free one page / a run from pages_alloc_run.  The pages' memory is gone. */
void pages_free(struct zs_pages *p, pfn_t pfn);
void pages_free_run(struct zs_pages *p, pfn_t first, unsigned n);
/*
 * Free n pages from pages_alloc/_run, in any order: the same as n calls of
 * pages_free (invalid or repeated pfns are ignored), but the bookkeeping
 * takes the lock twice in all and neighbouring pages that go back to the OS
 * share one madvise.  zsmalloc frees a zspage's chain with it.  With
 * park_chains and per-CPU caches, in a provider whose cache counts in the
 * process-wide budget (cache_pages 0), up to 16 pages of one call are parked whole on
 * this CPU instead, for its next pages_alloc_bulk of as many (no per-page
 * moves to and from the shared cache); parked pages count as per-CPU cached
 * pages (pages_cpu_cached), in the budget, and go back to the OS with an
 * idle cache's pages, or once parked for a decay (the purge thread), or on
 * a trim (cache.c, "Parked chains").
 */
#define ZS_FREE_BULK_MAX 64u
/*
 * Around every release of pages (pages_free, _run, _bulk): the settable
 * per-page cost and the release clock (release_cost.c, zs/harness.h).
 * begin returns 0 when neither is on, and end then does nothing.
 */
uint64_t pages_release_begin(unsigned pages);
void pages_release_end(uint64_t t0, unsigned pages);
void pages_free_bulk(struct zs_pages *p, const pfn_t *pfns, unsigned n);

/*
 * Pages its owner keeps whole, still in use, for its own next use (zsmalloc's
 * emptied zspages in the application profile, src/zsmalloc/park.c): they
 * count in the process-wide budget like the provider's parked chains, and the
 * reclaim hook returns them after a decay.  pages_parks: the provider took
 * the hook (park_chains, in the budget, watched by the purge thread): its
 * owner may park.  pages_park_room: would `n` more parked pages stay
 * within the budget?  pages_park_note: the owner parked (delta > 0) or took
 * back pages; counted per CPU and added to the budget PARK_SYNC pages at a
 * time, starting the purge thread when that takes the cache past its start.
 * pages_park_released: pages given back (the hook, a trim), off the budget
 * at once, with every CPU's unsynced count (so the total is exact once all
 * went back); may_kick false from the hook (the thread is running it).  pages_release_bulk: in-use pages straight back to the
 * OS, no cache, no kick.
 */
/*
 * The clock of the decay and of the reclaim hook's now_ns: the coarse
 * monotonic clock (a vDSO read; a tick, a few ms, is plenty for a decay).
 * An owner stamps what it parks with it.
 */
static inline uint64_t pages_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
bool pages_parks(const struct zs_pages *p);
/* Does the purge thread run this provider's idle hooks (watched, and given them at create)? */
bool pages_idle_on(const struct zs_pages *p);
/* Ask the purge thread for a pass over the providers no later than `due` (pages_now_ns
 * clock), starting it if needed; no provider lock may be held. */
void pages_idle_kick(struct zs_pages *p, uint64_t due);
void pages_idle_stop(struct zs_pages *p);
bool pages_park_room(struct zs_pages *p, unsigned n);
void pages_park_note(struct zs_pages *p, long delta_pages);
void pages_park_released(struct zs_pages *p, unsigned long pages, bool may_kick);
void pages_release_bulk(struct zs_pages *p, const pfn_t *pfns, unsigned n);

/* Address of a page in use (lock-free).  Behaviour is undefined for pages not in use. */
void *pages_addr(const struct zs_pages *p, pfn_t pfn);
/* Descriptor of a page in use (lock-free). */
struct zs_page_desc *pages_desc(const struct zs_pages *p, pfn_t pfn);
/* Page number of an address inside a page in use, or ZS_PFN_NONE. */
pfn_t pages_pfn_of(const struct zs_pages *p, const void *addr);
/* 1 if pfn names a page currently handed out (for checked modes), else 0. */
int pages_valid(const struct zs_pages *p, pfn_t pfn);

/* Return every cached page, per-CPU caches included, to the OS (and unmap chunks left empty). */
void pages_trim(struct zs_pages *p);
/* Return the shared cache's pages older than decay_ms now (what any call does on the way). */
void pages_decay(struct zs_pages *p);
void pages_get_stats(const struct zs_pages *p, struct zs_pages_stats *st);
size_t pages_in_use(const struct zs_pages *p);
/* Change the limit at run time (0 = none; above ZS_PAGES_MAX_SPAN / page_size means none
 * too); pages already in use are kept. */
void pages_set_limit(struct zs_pages *p, size_t max_pages);

/*
 * Failure injection for tests: after `after` more successful allocations,
 * fail the next `count` allocations (count 0 = every one until reset).
 * pages_fail_reset() turns injection off.
 */
void pages_fail_after(struct zs_pages *p, uint64_t after, uint64_t count);
void pages_fail_reset(struct zs_pages *p);

/*
 * A zeroed table of `bytes` (rounded up to whole OS pages, the size in
 * *mapped) for a layer above, mapped so that only the pages written are
 * faulted in: per-copy tables an empty pool must not pay for (zsmalloc's
 * class table and park stacks).  NULL when bytes is 0 or the mapping fails.
 * Give it back with pages_table_unmap(t, *mapped) (NULL is a no-op).  Not
 * pool pages: neither counted nor cached by any provider.  Only this layer
 * and the region call mmap and its kin (tests/package/layering.sh), hence these.
 */
void *pages_table_map(size_t bytes, size_t *mapped);
void pages_table_unmap(void *table, size_t mapped);

#endif
