/*
 * Deferred free (seed 001): zs_free_deferred() must be cheap enough for the
 * swap slot-free path (atomic context in the kernel, munmap/exit latency in
 * the seed), so enqueueing is O(1) into a fixed per-pool array (a bounded
 * lock-free multi-producer queue: no allocation, no lock) and the real work
 * happens in a background worker.  The worker drains in batches grouped by
 * class, so each class lock is taken once per batch instead of once per
 * handle.  A full array falls back to a synchronous zs_free.
 *
 * Capacity follows the RFC's sizing (an array for 128 MiB worth of pages),
 * so it scales with page size: 32768 handles at 4K, 8192 at 16K.
 *
 * Nothing of this exists until it is used: a pool that
 * never calls zs_free_deferred must not pay 512 KiB of queue and an idle
 * thread, so the first zs_free_deferred creates both, once, under
 * pool->deferred_init_lock (double-checked through the atomic pointer).  The
 * worker sleeps on a condition variable with no timeout while the queue is
 * empty; the producer that finds it so after an enqueue wakes it, so an idle
 * pool costs no wake-ups.
 *
 * Woken, the worker gathers before it drains: it waits up to GATHER_NS, or
 * until GATHER_MAX handles are queued, and frees them in one batch.  Draining
 * at once made a stream of single frees (a zs_region fault discards one slot
 * after each install) wake the worker once per free: a futex wake on the
 * freeing thread and a context switch that took the CPU of the thread just
 * woken (bench_region --threads --procs 2, "deferred": about one
 * pthread_cond_signal per random fault, p50 22-36 us against 10-20 us in the
 * synchronous free modes).  Gathered, a stream costs at most one producer
 * wake and one timed wake-up per GATHER_NS.  The price: a freed object's
 * memory comes back up to GATHER_NS later (zs_free_deferred_flush still
 * frees everything queued before it, at once).
 *
 * Fork (common/fork.h).  The worker frees under class, handle and page
 * locks; a fork that copied one of them held left the child spinning on it
 * at its first allocation.  So the worker drains inside the deferred fork
 * gate: the prepare handler closes it and waits, the worker leaves between
 * two batches (dropping consume_lock too) and sleeps on the gate until the
 * fork is over.  The worker's wake_lock and condition variable are outside
 * the gate (it holds the lock only to sleep), so the child handler makes
 * them anew, for every queue on the gate's list.  The child has no worker:
 * the queue is marked so, and the child's next zs_free_deferred on that
 * pool starts one, which drains what the parent had queued as well.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zsmalloc/internal.h"
#include "common/fork.h"
#include "common/sigblock.h"

#define DRAIN_BATCH 256
/* The worker's gather window after a wake-up, and the queue length that ends it early. */
#define GATHER_NS 1000000L
#define GATHER_MAX DRAIN_BATCH

/* q->sleeping: the worker is awake (draining or about to look at the queue)... */
#define W_AWAKE 0
/* ...waits with no timeout on an empty queue (an enqueue must wake it)... */
#define W_IDLE 1
/* ...or gathers until GATHER_NS passed or GATHER_MAX are queued. */
#define W_GATHER 2

/* q->thread: no worker (creation failed, or deferred_worker -1), so frees are drained by flush... */
#define T_NONE 0
/* ...a worker runs... */
#define T_RUNNING 1
/* ...or it did in the parent of this forked child: the next zs_free_deferred starts one. */
#define T_FORKED 2

/*
 * A bounded MPMC queue cell with its sequence number stored relative to the
 * cell's index (seq - index): the classic scheme starts cell i at seq i, which
 * would make the first zs_free_deferred write the whole array (up to 256 MiB)
 * before its first enqueue.  Relative, every cell starts at 0, which calloc's
 * fresh zero pages already are, so the OS maps them as the queue first uses them.
 */
struct cell {
	atomic_size_t seq; /* seq - index */
	unsigned long handle;
};

struct deferred_queue {
	struct cell *cells;
	size_t mask;
	_Alignas(64) atomic_size_t enq;
	_Alignas(64) atomic_size_t deq; /* advanced by the consumer holding consume_lock */
	pthread_mutex_t consume_lock;
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	atomic_int sleeping; /* W_AWAKE, W_IDLE or W_GATHER: how the worker waits (or is about to) */
	atomic_int stop;
	atomic_int thread;    /* T_NONE, T_RUNNING or T_FORKED; changed under deferred_init_lock */
	pthread_t tid;
	struct zs_pool *pool; /* the worker's */
	struct deferred_queue *fork_prev, *fork_next; /* on the fork gate's list */
};

/* Every queue's worker drains inside this gate; its lock guards the list (fork_head). */
static struct zs_fork_gate fork_gate = ZS_FORK_GATE_INIT(ZS_LOCK_ZS_DEFERRED_FORK);
static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);
static struct deferred_queue *fork_head;

static int enqueue(struct deferred_queue *q, unsigned long handle)
{
	size_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
	for (;;) {
		struct cell *c = &q->cells[pos & q->mask];
		size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire) + (pos & q->mask);
		intptr_t dif = (intptr_t)seq - (intptr_t)pos;
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				c->handle = handle;
				atomic_store_explicit(&c->seq, pos + 1 - (pos & q->mask),
						      memory_order_release);
				return 0;
			}
		} else if (dif < 0) {
			return -ENOSPC;
		} else {
			pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
		}
	}
}

/* Take up to max published handles (consume_lock held). */
static size_t dequeue_batch(struct deferred_queue *q, unsigned long *out, size_t max)
{
	size_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed), n = 0;
	while (n < max) {
		struct cell *c = &q->cells[pos & q->mask];
		if (atomic_load_explicit(&c->seq, memory_order_acquire) + (pos & q->mask) != pos + 1)
			break;
		out[n++] = c->handle;
		atomic_store_explicit(&c->seq, pos + q->mask + 1 - (pos & q->mask),
				      memory_order_release);
		pos++;
	}
	return n;
}

struct keyed {
	unsigned cls;
	unsigned long handle;
};

static int by_class(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	return x->cls < y->cls ? -1 : x->cls > y->cls;
}

/* Free a batch: one class-lock hold per class present, pages freed after unlocking. */
static void free_batch(struct zs_pool *pool, unsigned long *handles, size_t n)
{
	struct keyed k[DRAIN_BATCH];
	struct zspage *empty[DRAIN_BATCH];
	unsigned long tails[DRAIN_BATCH];
	size_t nempty = 0, ntails = 0;
	for (size_t i = 0; i < n; i++) {
		/* The class never changes while the object lives, so no lock is needed to read it. */
		k[i].cls = obj_to_class_idx(handle_to_obj(handles[i]));
		k[i].handle = handles[i];
	}
	qsort(k, n, sizeof(k[0]), by_class);
	for (size_t i = 0; i < n;) {
		struct size_class *class = &pool->classes[k[i].cls];
		zs_spin_lock(&class->lock);
		for (; i < n && &pool->classes[k[i].cls] == class; i++) {
			/* Queued: live, or pending where checked mode marked it so. */
			zs_assert_internal(!handle_is_free(k[i].handle) &&
					   (pool->cfg.checked || handle_is_live(k[i].handle)));
			struct zspage *z = zs_free_locked_any(pool, class, handle_to_obj(k[i].handle));
			if (z) {
				/* A multi-page object's tail goes after, under its own class lock. */
				unsigned long tail = zspage_take_tail(z);
				if (zs_unlikely(tail))
					tails[ntails++] = tail;
				empty[nempty++] = z;
			}
		}
		zs_spin_unlock(&class->lock);
	}
	for (size_t i = 0; i < nempty; i++)
		zs_free_zspage_pages(pool, empty[i]);
	for (size_t i = 0; i < n; i++)
		zs_handle_free(pool, k[i].handle);
	for (size_t i = 0; i < ntails; i++)
		zs_free_tail(pool, tails[i]);
}

/*
 * Drain until deq reaches target (or the queue is momentarily empty when
 * target is 0).  gated: the worker, inside the fork gate, which it leaves
 * between batches while a fork waits (holding no lock, consume_lock included).
 */
static void drain(struct zs_pool *pool, struct deferred_queue *q, size_t target, int gated)
{
	unsigned long batch[DRAIN_BATCH];
	zs_mutex_lock_ranked(&q->consume_lock, ZS_LOCK_ZS_DEFERRED_CONSUME);
	for (;;) {
		size_t n = dequeue_batch(q, batch, DRAIN_BATCH);
		if (n) {
			free_batch(pool, batch, n);
			atomic_fetch_add_explicit(&q->deq, n, memory_order_release);
			if (gated && zs_unlikely(zs_fork_gate_closing(&fork_gate))) {
				zs_mutex_unlock_ranked(&q->consume_lock);
				zs_fork_gate_yield(&fork_gate);
				zs_mutex_lock_ranked(&q->consume_lock,
						     ZS_LOCK_ZS_DEFERRED_CONSUME);
			}
			continue;
		}
		if (atomic_load_explicit(&q->deq, memory_order_relaxed) >= target)
			break;
		/* A producer reserved a cell before target but has not published it yet. */
		sched_yield();
	}
	zs_mutex_unlock_ranked(&q->consume_lock);
}

/* Handles enqueued (or reserved) and not yet drained. */
static size_t pending(struct deferred_queue *q)
{
	return atomic_load_explicit(&q->enq, memory_order_relaxed) -
	       atomic_load_explicit(&q->deq, memory_order_relaxed);
}

static void *worker(void *arg)
{
	struct deferred_queue *q = arg;
	struct zs_pool *pool = q->pool;
	zs_signals_blocked_thread();
	while (!atomic_load_explicit(&q->stop, memory_order_acquire)) {
		zs_fork_gate_enter(&fork_gate);
		drain(pool, q, 0, 1);
		zs_fork_gate_leave(&fork_gate);
		zs_mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
		atomic_store_explicit(&q->sleeping, W_IDLE, memory_order_relaxed);
		/*
		 * Pairs with the fence in wake_worker(): either this load sees the
		 * producer's enqueue, or the producer sees W_IDLE and signals
		 * (under wake_lock, so not before the wait below has started).
		 */
		atomic_thread_fence(memory_order_seq_cst);
		if (!pending(q)) {
			while (atomic_load_explicit(&q->sleeping, memory_order_relaxed) == W_IDLE &&
			       !atomic_load_explicit(&q->stop, memory_order_relaxed))
				pthread_cond_wait(&q->wake, &q->wake_lock);
		} else {
			/* more came during the drain: gather those too (or a producer did this already) */
			int idle = W_IDLE;
			atomic_compare_exchange_strong_explicit(&q->sleeping, &idle, W_GATHER,
								memory_order_relaxed, memory_order_relaxed);
		}
		/* Woken by the first enqueue (W_GATHER), or handles are already there: gather. */
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += GATHER_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (atomic_load_explicit(&q->sleeping, memory_order_relaxed) == W_GATHER &&
		       !atomic_load_explicit(&q->stop, memory_order_relaxed) && pending(q) < GATHER_MAX)
			if (pthread_cond_timedwait(&q->wake, &q->wake_lock, &until) == ETIMEDOUT)
				break;
		atomic_store_explicit(&q->sleeping, W_AWAKE, memory_order_relaxed);
		zs_mutex_unlock_ranked(&q->wake_lock);
	}
	return NULL;
}

/*
 * After an enqueue: the one producer that finds the worker idle on an empty
 * queue wakes it to gather; the one that finds GATHER_MAX queued while it
 * gathers ends the gathering.  Every other enqueue costs a fence and a load.
 */
static void wake_worker(struct deferred_queue *q)
{
	atomic_thread_fence(memory_order_seq_cst);
	int s = atomic_load_explicit(&q->sleeping, memory_order_relaxed);
	if (s == W_AWAKE || (s == W_GATHER && pending(q) < GATHER_MAX))
		return;
	if (!atomic_compare_exchange_strong_explicit(&q->sleeping, &s,
						     s == W_IDLE ? W_GATHER : W_AWAKE,
						     memory_order_relaxed, memory_order_relaxed))
		return;   /* another producer (or the worker) moved it first */
	zs_mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
	pthread_cond_signal(&q->wake);
	zs_mutex_unlock_ranked(&q->wake_lock);
}

/*
 * Start q's worker (deferred_init_lock held, or q not yet published).  It
 * frees under the class locks: it starts with every signal blocked, so no
 * application handler ever runs on it (common/sigblock.h).
 */
static void start_worker(struct zs_pool *pool, struct deferred_queue *q)
{
	struct zs_sigguard sigs;
	int t = T_NONE;
	zs_signals_block(&sigs);
	if (pool->cfg.deferred_worker >= 0 && pthread_create(&q->tid, NULL, worker, q) == 0)
		t = T_RUNNING;
	zs_signals_restore(&sigs);
	atomic_store_explicit(&q->thread, t, memory_order_relaxed);
}

/* A forked child's first zs_free_deferred on a queue whose worker stayed in the parent. */
__attribute__((noinline, cold)) static void restart_worker(struct zs_pool *pool, struct deferred_queue *q)
{
	zs_mutex_lock_ranked(&pool->deferred_init_lock, ZS_LOCK_ZS_DEFERRED_INIT);
	if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_FORKED)
		start_worker(pool, q);
	zs_mutex_unlock_ranked(&pool->deferred_init_lock);
}

/* Build the queue (and start the worker); NULL when memory is short. */
static struct deferred_queue *queue_create(struct zs_pool *pool)
{
	/* enq/deq sit on cache lines of their own (_Alignas(64)); calloc only promises 16. */
	struct deferred_queue *q = aligned_alloc(64, sizeof(*q));
	if (!q)
		return NULL;
	memset(q, 0, sizeof(*q));
	/* zs_create_pool bounded the capacity, so neither the rounding nor the size can overflow. */
	size_t cap = pool->cfg.deferred_capacity;
	if (!cap)
		cap = (128UL << 20) / pool->page_size;
	size_t p2 = 16;
	while (p2 < cap)
		p2 <<= 1;
	q->cells = calloc(p2, sizeof(*q->cells));
	if (!q->cells) {
		free(q);
		return NULL;
	}
	/* Every cell's relative seq is 0 (see struct cell): calloc's zeros, no pass over them. */
	q->mask = p2 - 1;
	pthread_mutex_init(&q->consume_lock, NULL);
	pthread_mutex_init(&q->wake_lock, NULL);
	/* The gather window is timed on the monotonic clock: a wall clock step must not stretch it. */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->wake, &ca);
	pthread_condattr_destroy(&ca);
	q->pool = pool;
	/* Before any worker exists: a fork must find its gate (common/fork.h). */
	zs_fork_handlers(ZS_FORK_DEFERRED, atfork_prepare, atfork_parent, atfork_child);
	/* No thread (creation failed or deferred_worker -1): drained by flush and full-queue frees. */
	start_worker(pool, q);
	/* Listed before it is published, so a fork's child handler sees every queue in use. */
	zs_fork_gate_lock(&fork_gate);
	q->fork_next = fork_head;
	if (fork_head)
		fork_head->fork_prev = q;
	fork_head = q;
	zs_fork_gate_unlock(&fork_gate);
	atomic_store_explicit(&pool->deferred, q, memory_order_release);
	return q;
}

/* The pool's queue, created by the first caller; NULL only when memory is short. */
static struct deferred_queue *queue_get(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	if (zs_likely(q))
		return q;
	zs_mutex_lock_ranked(&pool->deferred_init_lock, ZS_LOCK_ZS_DEFERRED_INIT);
	q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	if (!q)
		q = queue_create(pool);
	zs_mutex_unlock_ranked(&pool->deferred_init_lock);
	return q;
}

void zs_deferred_init(struct zs_pool *pool)
{
	atomic_init(&pool->deferred, NULL);
	pthread_mutex_init(&pool->deferred_init_lock, NULL);
}

void zs_deferred_destroy(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	pthread_mutex_destroy(&pool->deferred_init_lock);
	if (!q)
		return;
	if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_RUNNING) {
		zs_mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
		atomic_store_explicit(&q->stop, 1, memory_order_release);
		pthread_cond_signal(&q->wake);
		zs_mutex_unlock_ranked(&q->wake_lock);
		/* The worker takes the fork gate, consume, class, handle and page locks: hold none. */
		zs_lock_assert_none(ZS_LOCK_ZS_DEFERRED_FORK);
		pthread_join(q->tid, NULL);
	}
	zs_fork_gate_lock(&fork_gate);
	if (q->fork_prev)
		q->fork_prev->fork_next = q->fork_next;
	else
		fork_head = q->fork_next;
	if (q->fork_next)
		q->fork_next->fork_prev = q->fork_prev;
	zs_fork_gate_unlock(&fork_gate);
	drain(pool, q, atomic_load_explicit(&q->enq, memory_order_acquire), 0);
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->wake_lock);
	pthread_mutex_destroy(&q->consume_lock);
	free(q->cells);
	free(q);
	atomic_store_explicit(&pool->deferred, NULL, memory_order_relaxed);
}

int zs_free_deferred(struct zs_pool *pool, unsigned long handle)
{
	if (zs_unlikely(!handle || ZS_IS_ERR(handle)))
		return 0;
	struct deferred_queue *q = queue_get(pool);
	if (zs_unlikely(!q))
		return zs_free(pool, handle); /* no memory for a queue: free now */
	if (pool->cfg.checked) {
		/* Mark it queued so a second free of the same handle is caught now. */
		if (!zs_handle_in_pool(pool, handle))
			return -EINVAL;
		/* Read obj under the pool lock: compaction (pool write lock) may be moving it. */
		zs_read_lock(&pool->lock);
		unsigned long v = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
		int bad = (v & (HANDLE_FREE_BIT | HANDLE_PENDING_BIT)) ||
			  zs_validate_obj(pool, handle, v) ||
			  !atomic_compare_exchange_strong_explicit(handle_slot(handle), &v,
								   v | HANDLE_PENDING_BIT,
								   memory_order_relaxed,
								   memory_order_relaxed);
		zs_read_unlock(&pool->lock);
		if (bad)
			return -EINVAL;
	}
	if (zs_unlikely(enqueue(q, handle))) {
		/* Full: free it here, like the RFC's synchronous fallback. */
		if (pool->cfg.checked)
			atomic_fetch_and_explicit(handle_slot(handle), ~HANDLE_PENDING_BIT,
						  memory_order_relaxed);
		return zs_free(pool, handle);
	}
	/* One load either way: the fork's case costs the fast path nothing more. */
	int t = atomic_load_explicit(&q->thread, memory_order_relaxed);
	if (zs_likely(t == T_RUNNING))
		wake_worker(q);
	else if (zs_unlikely(t == T_FORKED))
		restart_worker(pool, q);
	return 0;
}

int zs_deferred_pending(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	return q && pending(q) != 0;
}

void zs_free_deferred_flush(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	if (!q)
		return; /* never used: nothing queued */
	drain(pool, q, atomic_load_explicit(&q->enq, memory_order_acquire), 0);
}

/* ---- fork (common/fork.h) ---- */

static void atfork_prepare(void)
{
	zs_fork_gate_close(&fork_gate);
}

static void atfork_parent(void)
{
	zs_fork_gate_open_parent(&fork_gate);
}

static void atfork_child(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (struct deferred_queue *q = fork_head; q; q = q->fork_next) {
		/* The worker may have held wake_lock or waited on wake when the parent forked. */
		pthread_mutex_init(&q->wake_lock, NULL);
		pthread_cond_init(&q->wake, &ca);
		atomic_store_explicit(&q->sleeping, W_AWAKE, memory_order_relaxed);
		if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_RUNNING)
			atomic_store_explicit(&q->thread, T_FORKED, memory_order_relaxed);
	}
	pthread_condattr_destroy(&ca);
	zs_fork_gate_open_child(&fork_gate);
}
