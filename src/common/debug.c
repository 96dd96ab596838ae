/*
 * The out-of-line half of common/debug.h: the one thread-id variable every
 * layer's lock owner fields compare against, the report an internal check
 * makes before it aborts, and (ZS_DEBUG) the per-thread list of held locks
 * that the lock-order check reads.  All internal (hidden in libzs.so).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/debug.h"

_Thread_local char debug_thread_id;

#ifdef ZS_DEBUG
void assert_fail(const char *cond, const char *file, int line, const char *func)
{
	fprintf(stderr, "libzs: %s:%d: %s: internal check failed: %s\n", file, line, func, cond);
	fflush(stderr);
	abort();
}

/* ---- lock order ---- */

/*
 * The deepest nesting in the library is handles_trim: 16 handle shard
 * locks, the shared list's, the chunk list's, and a provider's two.  A
 * thread's locks are its own business, so the list is thread-local: no
 * atomics, nothing for TSan to see, and a forked child inherits exactly the
 * locks its one thread holds.
 */
#define HELD_MAX 32

struct held {
	const void *lock;
	int rank;
	int line;
	const char *file;
};

static _Thread_local struct held held[HELD_MAX];
static _Thread_local int nheld;

static const char *rank_name(int rank)
{
	switch (rank) {
	case ZS_LOCK_REGION_HAND: return "region reclaim hand lock";
	case ZS_LOCK_REGION_ULOCK: return "region ulock";
	case ZS_LOCK_REGION_BUFS: return "region staging-buffer lock";
	case ZS_LOCK_REGION_KICK: return "region reclaimer kick lock";
	case ZS_LOCK_REGION_LIVE: return "region live-list lock";
	case ZS_LOCK_ZSWAP_STREAM: return "zswap stream";
	case ZS_LOCK_ZSWAP_SHARD: return "zswap shard lock";
	case ZS_LOCK_ZSWAP_WORKER_START: return "zswap worker start lock";
	case ZS_LOCK_ZSWAP_FORK_GATE: return "zswap fork gate";
	case ZS_LOCK_ZSWAP_WORKER: return "zswap worker mutex";
	case ZS_LOCK_ZBLOCK_CLASS: return "zblock class lock";
	case ZS_LOCK_ZRAM_STRIPE: return "zram group stripe mutex";
	case ZS_LOCK_ZRAM_WB_RUN: return "zram writeback run mutex";
	case ZS_LOCK_ZRAM_STREAM: return "zram stream";
	case ZS_LOCK_ZRAM_SLOT: return "zram slot lock";
	case ZS_LOCK_ZRAM_WB_LOCK: return "zram writeback lock";
	case ZS_LOCK_ZS_DEFERRED_INIT: return "zsmalloc deferred-init lock";
	case ZS_LOCK_ZS_DEFERRED_WAKE: return "zsmalloc deferred wake lock";
	case ZS_LOCK_ZS_DEFERRED_FORK: return "zsmalloc deferred fork gate";
	case ZS_LOCK_ZS_COMPACT: return "zsmalloc compaction flag";
	case ZS_LOCK_ZS_DEFERRED_CONSUME: return "zsmalloc deferred consume lock";
	case ZS_LOCK_ZS_POOL: return "zsmalloc pool lock";
	case ZS_LOCK_ZS_CLASS: return "zsmalloc class lock";
	case ZS_LOCK_ZS_HANDLE_SHARD: return "zsmalloc handle shard lock";
	case ZS_LOCK_ZS_HANDLE_FREE: return "zsmalloc handle free-list lock";
	case ZS_LOCK_ZS_HANDLE_CHUNKS: return "zsmalloc handle chunk-list lock";
	case ZS_LOCK_PAGES_REGISTRY: return "page provider registry lock";
	case ZS_LOCK_PAGES_PCP: return "page provider per-CPU cache lock";
	case ZS_LOCK_PAGES_PROVIDER: return "page provider mutex";
	default: return "lock";
	}
}

/* Equal ranks that may nest, and how: only in ascending address order. */
static int nests_by_address(int rank)
{
	return rank == ZS_LOCK_ZS_HANDLE_SHARD;
}

/* Where the order a rank belongs to is written down. */
static const char *order_home(int rank)
{
	if (rank < ZS_LOCK_ZRAM_STRIPE)
		return "src/region/region.c";
	if (rank < ZS_LOCK_ZSWAP_STREAM)
		return "src/zram/zram.c";
	if (rank < ZS_LOCK_ZS_DEFERRED_INIT)
		return "src/zswap/zswap.c";
	if (rank == ZS_LOCK_ZBLOCK_CLASS)
		return "src/zblock/zblock.c";
	return "src/zsmalloc/zsmalloc.c";
}

__attribute__((noreturn, cold)) static void order_fail(const char *what, const void *lock, int rank,
						       const char *file, int line,
						       const struct held *h)
{
	fprintf(stderr,
		"libzs: %s:%d: lock order violated: %s %s (rank %d, %p) while holding %s (rank %d, "
		"%p) taken at %s:%d; see \"Lock order\" in %s\n",
		file, line, what, rank_name(rank), rank, lock, rank_name(h->rank), h->rank, h->lock,
		h->file, h->line, order_home(rank));
	fflush(stderr);
	abort();
}

void lockdep_take(const void *lock, int rank, int trylock, const char *file, int line)
{
	if (rank == ZS_LOCK_UNTRACKED)
		return;
	for (int i = 0; i < nheld; i++) {
		const struct held *h = &held[i];
		if (h->lock == lock)
			order_fail("taking again", lock, rank, file, line, h);
		if (trylock)
			continue;
		if (h->rank > rank)
			order_fail("taking", lock, rank, file, line, h);
		if (h->rank == rank && !(nests_by_address(rank) && (uintptr_t)lock > (uintptr_t)h->lock))
			order_fail("taking a second", lock, rank, file, line, h);
	}
	if (nheld == HELD_MAX) {
		fprintf(stderr, "libzs: %s:%d: more than %d locks held at once\n", file, line,
			HELD_MAX);
		abort();
	}
	held[nheld++] = (struct held){ .lock = lock, .rank = rank, .line = line, .file = file };
}

void lockdep_drop(const void *lock, const char *file, int line)
{
	/* Newest first: with several of one rank held, the most recent is the likely one. */
	for (int i = nheld - 1; i >= 0; i--) {
		if (held[i].lock != lock)
			continue;
		for (int j = i; j + 1 < nheld; j++)
			held[j] = held[j + 1];
		nheld--;
		return;
	}
	fprintf(stderr, "libzs: %s:%d: lock %p released by a thread that does not hold it\n", file,
		line, lock);
	fflush(stderr);
	abort();
}

void lockdep_assert_none(int min_rank, const char *file, int line, const char *func)
{
	for (int i = 0; i < nheld; i++) {
		if (held[i].rank < min_rank)
			continue;
		fprintf(stderr,
			"libzs: %s:%d: %s: lock order violated: called holding %s (rank %d, %p) "
			"taken at %s:%d; see \"Lock order\" in %s\n",
			file, line, func, rank_name(held[i].rank), held[i].rank, held[i].lock,
			held[i].file, held[i].line, order_home(held[i].rank));
		fflush(stderr);
		abort();
	}
}

int lockdep_depth(void)
{
	return nheld;
}

int lockdep_holds(const void *lock)
{
	for (int i = 0; i < nheld; i++)
		if (held[i].lock == lock)
			return 1;
	return 0;
}
#endif
