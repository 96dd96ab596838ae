/*
 * Internal consistency checks for every layer, the user-space counterpart of
 * the kernel's VM_BUG_ON/lockdep_assert_held and mimalloc's
 * mi_assert_internal.  The lock rules and invariants the comments state
 * (class lock held here, a zspage sits on the list its fullness names, a
 * handle is live when freed) are checked only in a build configured with
 * -DZS_DEBUG=ON, which CI uses for its ASan and TSan runs: there a broken
 * rule stops the program at the line that broke it instead of showing up
 * later as corrupt memory or a wrong count.  Otherwise the checks compile
 * to nothing: the condition sits behind a constant false, so it is never
 * evaluated, yet it is still compiled (it cannot rot) and counts as a use of
 * the variables and helpers only it names (no unused warnings, gcc or clang).
 *
 * These are for the library's own bugs.  Caller mistakes that the API
 * promises to report (checked mode's double free, a bad index) stay error
 * codes: an assert is never the answer to bad input.
 */
#ifndef ZS_SRC_COMMON_DEBUG_H
#define ZS_SRC_COMMON_DEBUG_H

#include <pthread.h>
#include <stdint.h>

#ifdef ZS_DEBUG
#define ZS_DEBUG_ON 1

/* common/debug.c: prints "file:line: func: internal check failed: cond" and aborts. */
__attribute__((noreturn, cold)) void assert_fail(const char *cond, const char *file, int line,
						     const char *func);

#define assert_internal(cond)                                                       \
	((void)(__builtin_expect(!!(cond), 1) ? 0                                      \
					      : (assert_fail(#cond, __FILE__, __LINE__, \
								__func__), 0)))
#else
#define ZS_DEBUG_ON 0
#define assert_internal(cond) ((void)(0 && (cond)))
#endif

/*
 * Lock order (ZS_DEBUG only).  Every lock the layers below zram take has a
 * rank; a thread may only block on a lock of a higher rank than every lock
 * it holds, so two threads can never wait on each other in a cycle.  The
 * ranks are the orders the files state in words: src/zsmalloc/zsmalloc.c
 * ("Lock order") for zsmalloc and the page provider, src/pages/purge.c for
 * the provider's own three, the top of src/zram/zram.c for the zram store's
 * (100-149: taken before any of zsmalloc's), src/zswap/zswap.c for zswap's
 * (150-199, zram's sibling: the two never nest), src/region/region.c for the
 * region's (below 100: it calls its zram store holding them) and
 * src/zblock/zblock.c for zblock's class lock (zsmalloc's sibling).
 *
 * lock_take(l, rank) goes just before a blocking acquire: a lock of an
 * equal or lower rank already held by this thread stops the program with
 * both locks, their ranks and the lines that took them.  Equal ranks nest
 * only where the rank says so (ZS_LOCK_ZS_HANDLE_SHARD: ascending address,
 * the order handles_trim takes all sixteen in).  lock_took_try(l,
 * rank) records a successful trylock without the check (a trylock never
 * waits, so it cannot close a cycle), lock_drop(l) goes with the
 * release.  lock_assert_none(rank) says "no lock of this rank or above
 * here": before a join of a thread that takes them, or an entry point that
 * takes the outermost of them.  Outside ZS_DEBUG all of these compile to
 * nothing; the held locks are a short per-thread stack (debug.c).
 */
enum zs_lock_rank {
	ZS_LOCK_UNTRACKED = 0,
	/* the region (src/region/region.c, "Lock order"); page ownership is a per-page
	 * state claim, not a lock, and is not tracked */
	ZS_LOCK_REGION_HAND = 20,          /* r->hlock: the CLOCK hand, held across a reclaim pass */
	ZS_LOCK_REGION_ULOCK = 50,         /* r->ulock: uffd reads, event apply, installs */
	ZS_LOCK_REGION_BUFS = 60,          /* r->block: staging buffers, a leaf */
	ZS_LOCK_REGION_KICK = 70,          /* r->rlock: the reclaimer's kick and sleep, a leaf */
	ZS_LOCK_REGION_LIVE = 80,          /* the live-region list, a leaf */
	/* the zram store (src/zram/zram.c, "Lock order") */
	ZS_LOCK_ZRAM_STRIPE = 100,         /* a group stripe mutex */
	ZS_LOCK_ZRAM_WB_RUN = 110,         /* wb->run: one writeback walk at a time */
	ZS_LOCK_ZRAM_STREAM = 120,         /* a compression stream's busy flag */
	ZS_LOCK_ZRAM_SLOT = 130,           /* a slot's lock bit */
	ZS_LOCK_ZRAM_WB_LOCK = 140,        /* wb->lock (block bitmap, limit), a leaf */
	/* zswap (src/zswap/zswap.c, "Lock order") */
	ZS_LOCK_ZSWAP_STREAM = 150,        /* a stream's busy flag: at most one per thread */
	ZS_LOCK_ZSWAP_SHARD = 160,         /* an offset-table shard mutex: one at a time */
	ZS_LOCK_ZSWAP_WORKER_START = 170,  /* z->worker_lock: starting the shrink worker */
	ZS_LOCK_ZSWAP_FORK_GATE = 175,     /* the shrink workers' fork gate and list */
	ZS_LOCK_ZSWAP_WORKER = 180,        /* a worker's mutex (queue, flush, stop), a leaf */
	/* zsmalloc (src/zsmalloc/zsmalloc.c, "Lock order") */
	ZS_LOCK_ZS_DEFERRED_INIT = 200,    /* pool->deferred_init_lock */
	ZS_LOCK_ZS_DEFERRED_WAKE = 201,    /* deferred queue's wake_lock */
	ZS_LOCK_ZS_DEFERRED_FORK = 202,    /* the deferred workers' fork gate and queue list */
	ZS_LOCK_ZS_COMPACT = 205,          /* pool->compaction_in_progress (tried, or waited for) */
	ZS_LOCK_ZS_DEFERRED_CONSUME = 210, /* deferred queue's consume_lock */
	ZS_LOCK_ZS_POOL = 220,             /* pool->lock, read or write */
	ZS_LOCK_ZS_CLASS_INIT = 225,       /* pool->class_init_lock: a class copy's first use, a leaf */
	ZS_LOCK_ZS_CLASS = 230,            /* a size class's lock, any shard: one at a time */
	ZS_LOCK_ZS_HANDLE_SHARD = 240,     /* handle shard locks: several in address order */
	ZS_LOCK_ZS_HANDLE_FREE = 241,      /* pool->handle_free_lock */
	ZS_LOCK_ZS_HANDLE_CHUNKS = 242,    /* pool->handle_chunks_lock */
	/* zblock (src/zblock/zblock.c, "Locking"): never nested with zsmalloc's */
	ZS_LOCK_ZBLOCK_CLASS = 250,        /* a zblock class lock: one at a time */
	/* page provider (src/pages/purge.c, "Lock order") */
	ZS_LOCK_PAGES_REGISTRY = 300,      /* the process-wide provider registry (purge thread) */
	ZS_LOCK_PAGES_PCP = 310,           /* a provider's per-CPU cache lock */
	ZS_LOCK_PAGES_PROVIDER = 320,      /* a provider's mutex */
};

#if ZS_DEBUG_ON
void lockdep_take(const void *lock, int rank, int trylock, const char *file, int line);
void lockdep_drop(const void *lock, const char *file, int line);
void lockdep_assert_none(int min_rank, const char *file, int line, const char *func);
int lockdep_holds(const void *lock);
/* How many tracked locks this thread holds (tests: none after a call). */
int lockdep_depth(void);
#define lock_take_at(l, rank, file, line) lockdep_take((l), (rank), 0, (file), (line))
#define lock_drop_at(l, file, line) lockdep_drop((l), (file), (line))
#define lock_took_try(l, rank) lockdep_take((l), (rank), 1, __FILE__, __LINE__)
#define lock_assert_none(rank) lockdep_assert_none((rank), __FILE__, __LINE__, __func__)
/* For a helper shared by several entry points: the report names the call the user made. */
#define lock_assert_none_in(rank, func) lockdep_assert_none((rank), __FILE__, __LINE__, (func))
#else
/* (void)sizeof: the arguments count as used, are never evaluated, and a lock's address
 * is not tested for truth (gcc's -Waddress on a global's address). */
#define lock_take_at(l, rank, file, line) ((void)sizeof(l), (void)sizeof((rank) + (line)), (void)sizeof(file))
#define lock_drop_at(l, file, line) ((void)sizeof(l), (void)sizeof(file), (void)sizeof(line))
#define lock_took_try(l, rank) ((void)sizeof(l), (void)sizeof(rank))
#define lock_assert_none(rank) ((void)(0 && (rank)))
#define lock_assert_none_in(rank, func) ((void)(0 && (rank)), (void)sizeof(func))
#define lockdep_depth() 0
#endif
#define lock_take(l, rank) lock_take_at((l), (rank), __FILE__, __LINE__)
#define lock_drop(l) lock_drop_at((l), __FILE__, __LINE__)

/* A pthread mutex with a rank: the check before it can block, the drop after the release. */
#define mutex_lock_ranked(m, rank)                  \
	do {                                           \
		lock_take((m), (rank));             \
		pthread_mutex_lock(m);                 \
	} while (0)
#define mutex_unlock_ranked(m)                      \
	do {                                           \
		pthread_mutex_unlock(m);               \
		lock_drop(m);                       \
	} while (0)

/*
 * An id for the calling thread, for lock owner fields: the address of a
 * thread-local byte is unique among live threads and costs no system call.
 * Never 0, so 0 can mean "no owner".  One variable for the whole library
 * (common/debug.c), not one per file as a static in this header would be.
 */
extern _Thread_local char debug_thread_id;
static inline uintptr_t debug_self(void)
{
	return (uintptr_t)&debug_thread_id;
}

#endif
