/*
 * Private to src/pages: the provider's struct, its constants and the small
 * inline helpers that pages.c (create/destroy, chunk mapping, pfn lookup,
 * stats), cache.c (per-CPU caches, shared hot cache, decay and run
 * allocation; release.c, runs.c and trim.c are split from it, cache.h)
 * and purge.c (the process-wide cache budget and the purge
 * thread) need.  Kept out of include/ so the layout stays internal.
 */
#ifndef ZS_PAGES_INTERNAL_H
#define ZS_PAGES_INTERNAL_H

#include "pages/pages.h"
#include "pages/lookup.h"
#include "common/debug.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Per-page states; FREE must be 0 so DONTNEED'd meta reads as free. */
enum { PG_FREE = 0, PG_IN_USE = 1, PG_CACHED = 2, PG_RELEASING = 3, PG_PCP = 4 };

/*
 * Per-CPU cache geometry: up to PCP_MAX pages each, moved PCP_BATCH at a
 * time (the kernel's pcp "high" and "batch").  The caches are only used
 * when the bound leaves at least twice their total for the shared cache.
 */
#define PCP_MAX 64u
#define PCP_BATCH 32u
/*
 * Parked chains (cache.c, "Parked chains"): a bulk free of up to
 * PARK_MAX_LEN pages is kept whole in the CPU's cache, for the next bulk
 * allocation of as many pages; a cache's parked pages are counted in the
 * process-wide budget to within PARK_SYNC pages.
 */
#define PARK_MAX_LEN 16u
#define PARK_SYNC 64u
#define PCP_MAX_CACHES 256u
/* A per-CPU cache looks at the clock for the decay every this many operations. */
#define DECAY_CHECK_OPS 64u
/* Pages returned to the OS per lock round (bounded stack buffers). */
#define RELEASE_MAX 64u
#define NO_TIME UINT64_MAX

#define ZS_MAX_RUN 64u
/* decay_ns of a provider that never decays by time (ZS_PAGES_DECAY_NEVER). */
#define DECAY_NEVER_NS UINT64_MAX
/* ZS_PAGES_DECAY_MS=0 (purge.c): keep no cache, return every freed page at once. */
#define DECAY_IMMEDIATE 0u
/*
 * The purge thread starts once this much is cached (the budget's total, or
 * one provider outside it): a thread for a few hundred KiB costs more than
 * the memory, and a pool that moves single pages between two CPUs' caches
 * (one thread allocates, another frees) keeps about a drain batch in the
 * shared cache.  Below it, cached pages wait for the next call's decay.
 */
#define PURGE_START_BYTES ((size_t)2 << 20)

/* The slot table describes ZS_PAGES_MAX_SPAN bytes; only touched entries cost RSS. */
#define ZS_MIN_SLOTS 64u
#define ZS_MAX_SLOTS (1u << 20)

/* Bookkeeping, only touched under the lock. */
struct zs_chunk {
	unsigned ninuse;   /* bits set in the bitmap (in use or being released) */
	unsigned ncached;  /* free pages of this chunk sitting in the hot cache */
};

struct zs_pcp {
	atomic_int lock;
	unsigned count;             /* pages in pfn[], under lock */
	unsigned ops;               /* operations since the last decay check, under lock */
	_Atomic unsigned nheld;     /* count + nparked, for stats readers without the lock */
	_Atomic long in_use;        /* allocations minus frees through this cache */
	_Atomic uint64_t allocs, frees;
	pfn_t pfn[PCP_MAX];      /* a stack: the top is the hottest page */
	/* Parked chains, under lock: [n] heads a LIFO of chains of n pages (first pfns). */
	pfn_t park[PARK_MAX_LEN + 1];
	unsigned nparked;           /* pages in them (in nheld too) */
	unsigned park_synced;       /* of those, the pages counted in the process budget */
	/* The owner's parked pages (pages_park_note) not yet in the process budget:
	 * an atomic, as the owner counts under its own locks, not this cache's. */
	_Atomic long owner_unsynced;
	/* The purge thread's view (registry lock only): allocs + frees when it last
	 * changed, and when that was seen; a cache unchanged for decay_ms is idle. */
	uint64_t seen_ops, seen_ns;
} __attribute__((aligned(64)));

struct zs_pages {
	struct zs_pages_lookup lk;  /* first: see pages/lookup.h */
	/* Read-only after create. */
	pfn_t pfn_limit;     /* nslots << ppc_shift */
	size_t state_off;       /* byte offset of the state array in a meta region */
	size_t page_size;
	size_t ppc;
	size_t nslots;
	size_t chunk_bytes;
	size_t map_bytes;       /* what we mmap per chunk (over-sized for alignment) */
	size_t bits_off;        /* byte offset of the bitmap in a meta region */
	size_t meta_bytes;
	size_t os_page;
	void *tables;           /* one mapping holding every per-slot array */
	size_t tables_bytes;

	pthread_mutex_t lock;
	struct zs_chunk *chunks;
	uint64_t *mapped_bm;    /* slot has a chunk mapped */
	uint64_t *partial_bm;   /* mapped chunk has a page not in use */
	size_t slot_words;      /* words of the two bitmaps worth scanning (high-water) */
	size_t partial_lo;      /* no partial bit below this word */

	pfn_t cache_head, cache_tail;
	size_t ncached, cache_cap;  /* the shared cache and its share of the bound */
	uint64_t decay_ns;          /* DECAY_NEVER_NS: no time decay */
	_Atomic uint64_t oldest_ns; /* free time of the cache's tail, NO_TIME if empty */
	uint64_t decayed;
	/*
	 * Pages RELEASING: taken off a cache by one lock round and given back to
	 * the OS by release_pages() after the lock is dropped.  A trim waits for
	 * 0 on `released`, so what it returns includes what another thread (the
	 * purge thread, a free's drain) had in flight: its stats are exact when
	 * it returns (test_pages failed under load without this).
	 */
	size_t releasing;
	unsigned releasing_gen;     /* purge_fork_gen() it counts for: a fork child does not
	                               have the threads that had pages in flight, so its trim
	                               must not wait for them (best effort: using a provider
	                               in a child while other threads used it is no promise) */
	unsigned trim_waiters;
	pthread_cond_t released;

	/*
	 * Process-wide purge (purge.c).  budget: the shared cache counts in the
	 * process-wide budget (cache_pages was left 0), budget_pages what it has
	 * added there so far.  above, kick and rekick (lock held): the cached
	 * pages reaching PURGE_START_BYTES (the budget's total, or this cache
	 * alone outside it) is when the purge thread must hear of it; rekick
	 * asks for a kick at the next cached page whatever the total (a forked
	 * child, which has no thread).  The registry links are the registry
	 * lock's.
	 */
	bool budget, registered, above, kick, rekick;
	bool park;              /* cfg park_chains, with per-CPU caches and in the budget */
	/* rekick for parked chains, which park under a per-CPU cache's lock only */
	_Atomic bool park_rekick;
	size_t budget_pages;
	struct zs_pages *reg_prev, *reg_next;

	/* The owner's parked pages (pages.h, zs_pages_park_*): its hook, read-only after create. */
	uint64_t (*reclaim)(void *ctx, uint64_t now_ns, uint64_t decay_ns);
	void *reclaim_ctx;
	/* The owner's parked pages in the process budget now (synced in, released out);
	 * destroy takes them out, since the owner's stacks go with the chunks. */
	_Atomic long owner_in_budget;
	/* The owner's idle hooks (pages.h); idle_due is cleared by pages_idle_stop.  The
	 * fields below it are the registry lock's: idle_run asks the thread to run
	 * idle_work after this pass, idle_busy says it runs now (outside that lock). */
	uint64_t (*idle_due)(void *ctx, uint64_t now_ns, bool *run);
	void (*idle_work)(void *ctx);
	void *idle_ctx;
	bool idle_run, idle_busy;

	/* Per-CPU caches (npcp 0: off); read-only pointers after create. */
	struct zs_pcp *pcp;
	unsigned npcp;
	_Atomic int slow_only;      /* a limit or failure injection: allocate under the mutex */

	size_t max_pages;
	_Atomic long in_use;        /* through the shared path; see total_in_use() */
	size_t peak, chunks_mapped;
	uint64_t allocs, frees, failed;

	bool fi_on, fi_forever;
	uint64_t fi_after, fi_count;

	/*
	 * Address -> chunk for pages_pfn_of: chunk bases sorted, read under
	 * a seqlock so the lookup takes no lock either.
	 */
	_Atomic unsigned seq;
	_Atomic size_t nsorted;
	_Atomic(uintptr_t) *sorted_base;
	_Atomic(uint32_t) *sorted_slot;
};

static inline unsigned ilog2(size_t v)
{
	return (unsigned)(63 - __builtin_clzll((unsigned long long)v));
}

static inline bool is_pow2(size_t v)
{
	return v && !(v & (v - 1));
}

static inline struct zs_page_desc *meta_desc(const struct zs_pages *p, size_t slot)
{
	return atomic_load_explicit(&p->lk.slots[slot].meta, memory_order_acquire);
}

static inline _Atomic uint8_t *meta_state(const struct zs_pages *p, struct zs_page_desc *m)
{
	return (_Atomic uint8_t *)((char *)m + p->state_off);
}

static inline uint64_t *meta_bits(const struct zs_pages *p, struct zs_page_desc *m)
{
	return (uint64_t *)((char *)m + p->bits_off);
}

static inline void bm_set(uint64_t *bm, size_t i) { bm[i >> 6] |= 1ull << (i & 63); }
static inline void bm_clr(uint64_t *bm, size_t i) { bm[i >> 6] &= ~(1ull << (i & 63)); }

static inline size_t pfn_slot(const struct zs_pages *p, pfn_t pfn)
{
	return (size_t)(pfn >> p->lk.ppc_shift);
}

static inline size_t pfn_idx(const struct zs_pages *p, pfn_t pfn)
{
	return (size_t)(pfn & p->lk.ppc_mask);
}

static inline _Atomic uint8_t *pfn_state(const struct zs_pages *p, pfn_t pfn)
{
	return meta_state(p, meta_desc(p, pfn_slot(p, pfn))) + pfn_idx(p, pfn);
}

static inline void set_state(const struct zs_pages *p, pfn_t pfn, uint8_t st)
{
	atomic_store_explicit(pfn_state(p, pfn), st, memory_order_relaxed);
}

static inline uint8_t get_state(const struct zs_pages *p, pfn_t pfn)
{
	return atomic_load_explicit(pfn_state(p, pfn), memory_order_relaxed);
}

/* Pages handed out: the shared path's count plus every per-CPU cache's (no lock). */
static inline size_t total_in_use(const struct zs_pages *p)
{
	long n = atomic_load_explicit(&((struct zs_pages *)p)->in_use, memory_order_relaxed);
	for (unsigned i = 0; i < p->npcp; i++)
		n += atomic_load_explicit(&p->pcp[i].in_use, memory_order_relaxed);
	return n > 0 ? (size_t)n : 0;
}

static inline void note_peak(struct zs_pages *p)
{
	size_t used = total_in_use(p);
	if (used > p->peak)
		p->peak = used;
}

static inline void set_slow_only(struct zs_pages *p)
{
	atomic_store_explicit(&p->slow_only, p->max_pages != 0 || p->fi_on, memory_order_relaxed);
}

/* The decay's clock (pages.h, pages_now_ns). */
static inline uint64_t now_ns(void)
{
	return pages_now_ns();
}

/* Chunk bookkeeping (pages.c), called by the allocator with the lock held. */
void pages_partial_set(struct zs_pages *p, size_t slot);
long pages_chunk_map(struct zs_pages *p);
char *pages_chunk_unmap(struct zs_pages *p, size_t slot);

/*
 * Process-wide purge (purge.c).  purge_defaults: the defaults a config's 0
 * fields take (ZS_PAGES_DECAY_MS, ZS_PAGES_CACHE_MB read once).  register:
 * a provider that caches and decays joins the thread's list (create);
 * unregister takes it off, waiting out a pass over it (destroy).
 * budget_add: the shared caches' pages in the budget moved by delta bytes;
 * returns how many bytes they are now over it (0: within) and sets
 * *started when this move took the total to PURGE_START_BYTES, or added to
 * a total already there with no thread running.  kick:
 * cached pages reached that, due at `due`: start the thread or wake it
 * earlier (no provider lock held); `pass` is what the thread runs over each
 * provider, registry lock held (cache.c's idle pass: passed in, not named
 * here, so that purge.c and cache.c do not depend on each other).
 */
void purge_defaults(unsigned *decay_ms, size_t *budget_bytes);
/* The built-in budget for a machine of `cpus` online CPUs (zs/pages.h; <= 0: unknown). */
size_t purge_budget_for(long cpus);
void purge_register(struct zs_pages *p);
void purge_unregister(struct zs_pages *p);
size_t purge_budget_add(long delta_bytes, bool *started);
/* Would the budgeted caches stay within the budget with `bytes` more? (a relaxed read) */
bool purge_budget_room(size_t bytes);
void purge_kick(uint64_t due, uint64_t (*pass)(struct zs_pages *p, uint64_t now));
/* The owner's idle hooks off, after a running idle_work returns (pages_idle_stop). */
void purge_idle_stop(struct zs_pages *p);
/* Bumped in every fork child (atfork): what a thread had in flight before is not coming. */
unsigned purge_fork_gen(void);

#endif
