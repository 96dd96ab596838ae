/*
 * The fork gate (common/fork.h): what a prepare handler waits on so that no
 * library thread holds a pool, class, handle or page lock when fork() copies
 * the process.  A Dekker pair (the worker's count, the fork's mark), both
 * sides seq_cst, as in the sharded pool lock: either the worker sees the
 * mark and leaves, or the closing fork sees the worker and waits for it.
 */
#include <sched.h>
#include <time.h>

#include "common/debug.h"
#include "common/fork.h"
#include "common/hints.h"

void fork_gate_enter(struct zs_fork_gate *g)
{
	for (;;) {
		atomic_fetch_add_explicit(&g->active, 1, memory_order_seq_cst);
		if (likely(!atomic_load_explicit(&g->closing, memory_order_seq_cst)))
			return;
		atomic_fetch_sub_explicit(&g->active, 1, memory_order_release);
		/* The fork holds the lock until its parent (or child) handler: wait there, asleep. */
		fork_gate_lock(g);
		fork_gate_unlock(g);
	}
}

void fork_gate_yield(struct zs_fork_gate *g)
{
	fork_gate_leave(g);
	fork_gate_enter(g);
}

/* Ranked where the layer's locks are (zsmalloc's); zswap's are not, and neither is its gate. */
void fork_gate_lock(struct zs_fork_gate *g)
{
	if (g->rank)
		lock_take(&g->lock, g->rank);
	pthread_mutex_lock(&g->lock);
}

void fork_gate_unlock(struct zs_fork_gate *g)
{
	pthread_mutex_unlock(&g->lock);
	if (g->rank)
		lock_drop(&g->lock);
}

void fork_gate_close(struct zs_fork_gate *g)
{
	fork_gate_lock(g);
	atomic_store_explicit(&g->closing, 1, memory_order_seq_cst);
	/* A worker is at most one step (a batch of frees, one page written back) from leaving. */
	for (unsigned spins = 0; atomic_load_explicit(&g->active, memory_order_seq_cst); spins++) {
		if (spins < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
}

void fork_gate_open_parent(struct zs_fork_gate *g)
{
	atomic_store_explicit(&g->closing, 0, memory_order_release);
	fork_gate_unlock(g);
}

void fork_gate_open_child(struct zs_fork_gate *g)
{
	atomic_store_explicit(&g->active, 0, memory_order_relaxed);
	atomic_store_explicit(&g->closing, 0, memory_order_release);
	fork_gate_unlock(g);
}

/* ---- the layers' handlers, in one order ---- */

struct fork_hooks {
	void (*prepare)(void), (*parent)(void), (*child)(void);
	atomic_int set; /* 1 once the three pointers are written */
};

static struct fork_hooks hooks[ZS_FORK_LAYERS];
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
/* Which layers this thread's fork prepared (the child is a copy of the same thread). */
static __thread unsigned prepared;

static void prepare_all(void)
{
	prepared = 0;
	for (int l = 0; l < ZS_FORK_LAYERS; l++)
		if (atomic_load_explicit(&hooks[l].set, memory_order_acquire)) {
			hooks[l].prepare();
			prepared |= 1u << l;
		}
}

static void parent_all(void)
{
	for (int l = ZS_FORK_LAYERS - 1; l >= 0; l--)
		if (prepared & (1u << l))
			hooks[l].parent();
}

static void child_all(void)
{
	for (int l = ZS_FORK_LAYERS - 1; l >= 0; l--)
		if (prepared & (1u << l))
			hooks[l].child();
}

static void hooks_register(void)
{
	pthread_atfork(prepare_all, parent_all, child_all);
}

void fork_handlers(enum zs_fork_layer layer, void (*prepare)(void), void (*parent)(void),
		      void (*child)(void))
{
	pthread_once(&hooks_once, hooks_register);
	struct fork_hooks *h = &hooks[layer];
	if (atomic_load_explicit(&h->set, memory_order_acquire))
		return;
	h->prepare = prepare;
	h->parent = parent;
	h->child = child;
	atomic_store_explicit(&h->set, 1, memory_order_release);
}
