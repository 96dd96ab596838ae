/*
 * Fork and the library's own threads: the gate a background worker passes
 * through around the work that takes pool, class, handle or page locks, and
 * the order of the layers' pthread_atfork handlers.
 *
 * Why: fork() copies only the calling thread.  A lock a worker (the deferred
 * free worker, the zswap shrink worker) held at that moment stays held in
 * the child for ever, and the child's next call on that pool spun on it.
 * So each layer's prepare handler closes its gate: it takes the gate's
 * mutex, marks the gate closing and waits until no worker is inside; a
 * worker finds the mark between two small steps (a batch of frees, one LRU
 * step), leaves, and blocks on the mutex until the fork is over.  The
 * worker's fast path is one atomic add and one load per step, never a lock;
 * zs_malloc and zs_free never touch a gate.
 *
 * The gate's mutex also guards the layer's list of workers, which the child
 * handler walks to mark each one as gone (the child starts its own lazily).
 *
 * Order.  A worker inside a gate may wait for locks of the layers below it
 * (the zswap worker frees into a pool, maybe through the deferred queue; the
 * deferred worker gives pages to the page provider, whose purge registry the
 * provider's prepare handler takes), never above.  So prepare handlers must
 * run top layer first: zswap, deferred, then the page provider.  Prepare
 * handlers run in the reverse order of registration, and a layer that
 * registered its own at first use could land anywhere; constructors would
 * fix the order but run library code at load, which libzs.so promises not
 * to do (tests/package/exports.sh).  So the layers hand their handlers to one
 * table here at first use (fork_handlers, before any worker of theirs
 * starts), and one pthread_atfork registration, made with the first, calls
 * them in the table's order: prepare top layer first, parent and child the
 * other way round.  A layer that registers while another thread forks is
 * left out of that fork's parent and child calls if its prepare did not run.
 */
#ifndef ZS_COMMON_FORK_H
#define ZS_COMMON_FORK_H

#include <pthread.h>
#include <stdatomic.h>

/* The layers with fork handlers, in the order their prepare handlers run. */
enum zs_fork_layer {
	ZS_FORK_ZSWAP,    /* src/zswap/writeback.c: prepared first */
	ZS_FORK_DEFERRED, /* src/zsmalloc/deferred.c */
	ZS_FORK_PAGES,    /* src/pages/purge.c */
	ZS_FORK_HANDLES,  /* src/zsmalloc/handle.c's generation records: innermost, prepared last */
	ZS_FORK_LAYERS
};

/* A layer's handlers, at its first use and before any worker of its starts (idempotent). */
void fork_handlers(enum zs_fork_layer layer, void (*prepare)(void), void (*parent)(void),
		      void (*child)(void));

struct zs_fork_gate {
	pthread_mutex_t lock;  /* held from prepare to the parent/child handler; guards the list */
	atomic_uint active;    /* workers inside */
	atomic_int closing;    /* a fork is waiting for the workers to leave */
	int rank;              /* the lock's rank (common/debug.h) */
};

#define ZS_FORK_GATE_INIT(r) { .lock = PTHREAD_MUTEX_INITIALIZER, .rank = (r) }

/* Worker, holding no lock: enter (waits while a fork is in progress). */
void fork_gate_enter(struct zs_fork_gate *g);

/* Worker: leave, holding none of the locks the gate covers. */
static inline void fork_gate_leave(struct zs_fork_gate *g)
{
	atomic_fetch_sub_explicit(&g->active, 1, memory_order_release);
}

/* Worker, between steps: does a fork wait for it to leave? */
static inline int fork_gate_closing(struct zs_fork_gate *g)
{
	return atomic_load_explicit(&g->closing, memory_order_relaxed);
}

/* Worker, between steps, holding none of the locks the gate covers: let a waiting fork go first. */
void fork_gate_yield(struct zs_fork_gate *g);

/* The list's lock, for adding and removing workers (not from a worker inside the gate). */
void fork_gate_lock(struct zs_fork_gate *g);
void fork_gate_unlock(struct zs_fork_gate *g);

/* Prepare handler: take the lock and wait until no worker is inside. */
void fork_gate_close(struct zs_fork_gate *g);
/* Parent handler: open again. */
void fork_gate_open_parent(struct zs_fork_gate *g);
/* Child handler, after the caller fixed up its list: no worker came along. */
void fork_gate_open_child(struct zs_fork_gate *g);

#endif
