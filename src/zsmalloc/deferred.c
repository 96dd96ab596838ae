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
 *
 * Two free modes reuse the worker (zs/zsmalloc.h, ZS_FREE_MODES), so that
 * deferring can be taken apart: which part of the saving is deferring the
 * page release, and which is deferring (and batching) the object frees.
 *   page-deferred: zs_free does the object work itself; an emptied zspage
 *     is pushed on a lock-free stack (linked through its lprev, free once
 *     it is off its class's lists) and the worker gives the pages back.
 *   percpu-deferred: the later RFC design.  zs_free appends the handle to
 *     its CPU's buffer (one page of handles; the buffers are carved from one
 *     allocation made with the queue, so a free never allocates); a full
 *     buffer goes on the full list and the worker frees it grouped by class.
 *     The per-CPU lock stands in for the kernel's disabled preemption: user
 *     space cannot stay on a CPU, so a thread that moved shares a buffer.
 * Both count their work in q->extra, which pending() adds to the handle
 * queue's, so the worker's sleep and wake-up, flush, destroy and
 * deferred_pending see it as queued frees.  A buffer adds 1 when its
 * first handle arrives (the wake-up, as the handle queue's first enqueue)
 * and the rest of its handles when it is handed over full; every addition
 * is made before the work can be found, and taken off only after it is done,
 * so the count never goes below the work still to do.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zsmalloc/internal.h"
#include "zs/harness.h"
#include "common/fork.h"
#include "common/sigblock.h"

#define DRAIN_BATCH 256
/* A percpu-deferred buffer: one page of handles (its link and count included). */
#define BUF_BYTES 4096
#define BUF_HANDLES ((BUF_BYTES - 2 * sizeof(void *)) / sizeof(unsigned long))
/* The most handles free_batch sorts at once: a whole buffer. */
#define BATCH_MAX BUF_HANDLES
/* The worker's gather window after a wake-up, and the queue length that ends it early. */
#define GATHER_NS 1000000L
#define GATHER_MAX DRAIN_BATCH

/* q->sleeping: the worker is awake (draining or about to look at the queue)... */
#define W_AWAKE 0
/* ...waits with no timeout on an empty queue (an enqueue must wake it)... */
#define W_IDLE 1
/* ...or gathers until GATHER_NS passed or GATHER_MAX are queued. */
#define W_GATHER 2

/* q->thread: no worker by design (deferred_worker -1), so frees are drained by flush... */
#define T_NONE 0
/* ...a worker runs... */
#define T_RUNNING 1
/*
 * ...or one is wanted and none runs: it ran in the parent of this forked
 * child, or pthread_create failed (EAGAIN under a thread limit).  The next
 * zs_free_deferred starts one (a failed start is retried once a
 * RETRY_NS at most), and while none runs it drains the queue itself, so a
 * freed object never waits for a thread that may never come.
 */
#define T_WANTED 2
#define RETRY_NS 1000000000ull

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

struct dbuf {
	struct dbuf *next; /* on the free or full list */
	size_t n;
	unsigned long h[BUF_HANDLES];
};
_Static_assert(sizeof(struct dbuf) == BUF_BYTES, "a buffer is one page");

struct cpu_slot {
	/*
	 * Held only to append or to take the buffer; only pcpu's lock nests
	 * inside, and a drainer takes it under consume_lock, never with a class
	 * lock held (buffers are freed after it drops).
	 */
	_Alignas(64) pthread_mutex_t lock;
	struct dbuf *cur;                  /* NULL: the next free takes one */
};

/* percpu-deferred's buffers: slots, and the page pool they take buffers from. */
struct pcpu {
	pthread_mutex_t lock; /* free and full lists, carving; taken inside a slot's lock, nothing inside */
	struct dbuf *free, *full;
	struct dbuf *mem;     /* nbuf buffers, carved in order (each faulted in at its first use) */
	size_t nbuf, carved;
	unsigned nslots;
	struct cpu_slot *slot;
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
	atomic_int thread;    /* T_NONE, T_RUNNING or T_WANTED; changed under deferred_init_lock */
	uint64_t retry_ns;    /* T_WANTED: no start before this (deferred_init_lock) */
	atomic_bool entered;  /* the worker reached worker() (atfork_prepare waits for it) */
	pthread_t tid;
	struct zs_pool *pool; /* the worker's */
	struct deferred_queue *fork_prev, *fork_next; /* on the fork gate's list */
	/* Work other than the handle queue's (see the top): zspages to release, buffered handles. */
	_Alignas(64) atomic_size_t extra;
	_Atomic(struct zspage *) release_head; /* page-deferred: a stack linked through lprev */
	struct pcpu *pcpu;                     /* percpu-deferred only */
	_Atomic(struct zs_deferred_hooks *) hooks; /* set once (zs_set_deferred_hooks) */
	atomic_ulong fallbacks; /* frees done at once because the queue or every buffer was full */
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
	struct keyed k[BATCH_MAX];
	struct zspage *empty[BATCH_MAX];
	unsigned long tails[BATCH_MAX];
	size_t nempty = 0, ntails = 0;
	for (size_t i = 0; i < n; i++) {
		/* The class never changes while the object lives, so no lock is needed to read it. */
		k[i].cls = obj_to_class_idx(handle_to_obj(handles[i]));
		k[i].handle = handles[i];
	}
	qsort(k, n, sizeof(k[0]), by_class);
	for (size_t i = 0; i < n;) {
		struct size_class *class = &pool->classes[k[i].cls];
		spin_lock(&class->lock);
		for (; i < n && &pool->classes[k[i].cls] == class; i++) {
			/* Queued: live, or pending where checked mode marked it so. */
			assert_internal(!handle_is_free(k[i].handle) &&
					   (pool->cfg.checked || handle_is_live(k[i].handle)));
			struct zspage *z = free_locked_any(pool, class, handle_to_obj(k[i].handle));
			if (z) {
				/* A multi-page object's tail goes after, under its own class lock. */
				unsigned long tail = zspage_take_tail(z);
				if (unlikely(tail))
					tails[ntails++] = tail;
				empty[nempty++] = z;
			}
		}
		spin_unlock(&class->lock);
	}
	for (size_t i = 0; i < nempty; i++)
		free_zspage_pages(pool, empty[i]);
	for (size_t i = 0; i < n; i++)
		cache_free_handle(pool, k[i].handle);
	for (size_t i = 0; i < ntails; i++)
		free_tail(pool, tails[i]);
}

/* Free a batch of queued handles, then tell the hooks (no lock held). */
static void free_reported(struct zs_pool *pool, struct deferred_queue *q, unsigned long *h,
			  size_t n)
{
	assert_internal(n <= BATCH_MAX);
	free_batch(pool, h, n);
	struct zs_deferred_hooks *hk = atomic_load_explicit(&q->hooks, memory_order_acquire);
	if (hk && hk->drain)
		hk->drain(hk->ctx, h, n);
}

/* Give back every zspage page-deferred queued so far (consume_lock held). */
static void release_zspages(struct zs_pool *pool, struct deferred_queue *q)
{
	struct zspage *z = atomic_exchange_explicit(&q->release_head, NULL, memory_order_acquire);
	size_t n = 0;
	while (z) {
		struct zspage *next = z->lprev;
		z->lprev = NULL;
		free_zspage_pages(pool, z);
		z = next;
		n++;
	}
	if (n)
		atomic_fetch_sub_explicit(&q->extra, n, memory_order_release);
}

static void buf_put(struct pcpu *pc, struct dbuf *b)
{
	pthread_mutex_lock(&pc->lock);
	b->next = pc->free;
	pc->free = b;
	pthread_mutex_unlock(&pc->lock);
}

/* Free what a detached buffer holds and return it to the pool; done is what it counts in extra. */
static void drain_buf(struct zs_pool *pool, struct deferred_queue *q, struct dbuf *b, size_t done)
{
	free_reported(pool, q, b->h, b->n);
	b->n = 0;
	buf_put(q->pcpu, b);
	atomic_fetch_sub_explicit(&q->extra, done, memory_order_release);
}

/*
 * Free the full buffers, then take the part-filled ones, each under its
 * slot's lock for a moment, and free those too (consume_lock held): every
 * handle appended before the call is freed when it returns.
 */
static void drain_pcpu(struct zs_pool *pool, struct deferred_queue *q)
{
	struct pcpu *pc = q->pcpu;
	pthread_mutex_lock(&pc->lock);
	struct dbuf *full = pc->full;
	pc->full = NULL;
	pthread_mutex_unlock(&pc->lock);
	while (full) {
		struct dbuf *next = full->next;
		drain_buf(pool, q, full, BUF_HANDLES);
		full = next;
	}
	for (unsigned i = 0; i < pc->nslots; i++) {
		struct cpu_slot *s = &pc->slot[i];
		pthread_mutex_lock(&s->lock);
		struct dbuf *b = s->cur;
		if (b && b->n)
			s->cur = NULL;
		else
			b = NULL;
		pthread_mutex_unlock(&s->lock);
		if (b)
			drain_buf(pool, q, b, 1); /* a part-filled buffer counts 1 (the top) */
	}
}

/* The work outside the handle queue (consume_lock held). */
static void drain_extra(struct zs_pool *pool, struct deferred_queue *q)
{
	if (atomic_load_explicit(&q->release_head, memory_order_relaxed))
		release_zspages(pool, q);
	if (q->pcpu)
		drain_pcpu(pool, q);
}

/*
 * Drain until deq reaches target (or the queue is momentarily empty when
 * target is 0).  gated: the worker, inside the fork gate, which it leaves
 * between batches while a fork waits (holding no lock, consume_lock included).
 */
static void drain(struct zs_pool *pool, struct deferred_queue *q, size_t target, int gated)
{
	unsigned long batch[DRAIN_BATCH];
	mutex_lock_ranked(&q->consume_lock, ZS_LOCK_ZS_DEFERRED_CONSUME);
	for (;;) {
		size_t n = dequeue_batch(q, batch, DRAIN_BATCH);
		if (n) {
			free_reported(pool, q, batch, n);
			atomic_fetch_add_explicit(&q->deq, n, memory_order_release);
			if (gated && unlikely(fork_gate_closing(&fork_gate))) {
				mutex_unlock_ranked(&q->consume_lock);
				fork_gate_yield(&fork_gate);
				mutex_lock_ranked(&q->consume_lock,
						     ZS_LOCK_ZS_DEFERRED_CONSUME);
			}
			continue;
		}
		if (atomic_load_explicit(&q->deq, memory_order_relaxed) >= target)
			break;
		/* A producer reserved a cell before target but has not published it yet. */
		sched_yield();
	}
	drain_extra(pool, q);
	mutex_unlock_ranked(&q->consume_lock);
}

/* Handles enqueued (or reserved) and not yet drained, and the other modes' work (the top). */
static size_t pending(struct deferred_queue *q)
{
	return atomic_load_explicit(&q->enq, memory_order_relaxed) -
	       atomic_load_explicit(&q->deq, memory_order_relaxed) +
	       atomic_load_explicit(&q->extra, memory_order_relaxed);
}

static void *worker(void *arg)
{
	struct deferred_queue *q = arg;
	struct zs_pool *pool = q->pool;
	atomic_store_explicit(&q->entered, true, memory_order_release);
	signals_blocked_thread();
	while (!atomic_load_explicit(&q->stop, memory_order_acquire)) {
		fork_gate_enter(&fork_gate);
		drain(pool, q, 0, 1);
		fork_gate_leave(&fork_gate);
		mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
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
		mutex_unlock_ranked(&q->wake_lock);
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
	mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
	pthread_cond_signal(&q->wake);
	mutex_unlock_ranked(&q->wake_lock);
}

/*
 * Start q's worker (deferred_init_lock held, or q not yet published).  It
 * frees under the class locks: it starts with every signal blocked, so no
 * application handler ever runs on it (common/sigblock.h).
 */
static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void start_worker(struct zs_pool *pool, struct deferred_queue *q)
{
	struct zs_sigguard sigs;
	int t = T_NONE;
	if (pool->cfg.deferred_worker >= 0) {
		atomic_store_explicit(&q->entered, false, memory_order_relaxed);
		signals_block(&sigs);
		t = pthread_create(&q->tid, NULL, worker, q) == 0 ? T_RUNNING : T_WANTED;
		signals_restore(&sigs);
		if (t == T_WANTED)
			q->retry_ns = mono_ns() + RETRY_NS;
	}
	atomic_store_explicit(&q->thread, t, memory_order_relaxed);
}

/*
 * T_WANTED: start the worker (a forked child's first call, or a retry after
 * a failed start); the state after.
 */
__attribute__((noinline, cold)) static int restart_worker(struct zs_pool *pool, struct deferred_queue *q)
{
	mutex_lock_ranked(&pool->deferred_init_lock, ZS_LOCK_ZS_DEFERRED_INIT);
	if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_WANTED &&
	    (!q->retry_ns || mono_ns() >= q->retry_ns))
		start_worker(pool, q);
	int t = atomic_load_explicit(&q->thread, memory_order_relaxed);
	mutex_unlock_ranked(&pool->deferred_init_lock);
	return t;
}

/*
 * percpu-deferred's slots and buffers: a slot per configured CPU, and
 * enough buffers for the queue's capacity in full buffers plus two per
 * slot (the one it fills and one on its way to the worker).
 */
static struct pcpu *pcpu_create(size_t cap)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	unsigned nslots = ncpu < 1 ? 1 : ncpu > 1024 ? 1024 : (unsigned)ncpu;
	struct pcpu *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return NULL;
	pc->nslots = nslots;
	pc->nbuf = cap / BUF_HANDLES + 2 * (size_t)nslots;
	pc->slot = aligned_alloc(64, nslots * sizeof(*pc->slot));
	pc->mem = aligned_alloc(BUF_BYTES, pc->nbuf * BUF_BYTES);
	if (!pc->slot || !pc->mem) {
		free(pc->slot);
		free(pc->mem);
		free(pc);
		return NULL;
	}
	pthread_mutex_init(&pc->lock, NULL);
	for (unsigned i = 0; i < nslots; i++) {
		pthread_mutex_init(&pc->slot[i].lock, NULL);
		pc->slot[i].cur = NULL;
	}
	return pc;
}

static void pcpu_destroy(struct pcpu *pc)
{
	if (!pc)
		return;
	for (unsigned i = 0; i < pc->nslots; i++)
		pthread_mutex_destroy(&pc->slot[i].lock);
	pthread_mutex_destroy(&pc->lock);
	free(pc->slot);
	free(pc->mem);
	free(pc);
}

/* A free buffer, or NULL when every one is full or being filled. */
static struct dbuf *buf_take(struct pcpu *pc)
{
	pthread_mutex_lock(&pc->lock);
	struct dbuf *b = pc->free;
	if (b)
		pc->free = b->next;
	else if (pc->carved < pc->nbuf)
		b = &pc->mem[pc->carved++];
	pthread_mutex_unlock(&pc->lock);
	if (b)
		b->n = 0;
	return b;
}

/*
 * Append a handle to this CPU's buffer: 0 queued, 2 queued and the worker
 * should be woken (a fresh buffer's first handle, or a buffer handed over
 * full), 1 not queued (no free buffer).  extra grows under the slot's lock,
 * before a drainer can find what it counts (the top).
 */
static int pcpu_push(struct deferred_queue *q, unsigned long handle)
{
	struct pcpu *pc = q->pcpu;
	int cpu = sched_getcpu();
	struct cpu_slot *s = &pc->slot[(unsigned)(cpu < 0 ? 0 : cpu) % pc->nslots];
	struct dbuf *full = NULL;
	int ret = 0;
	pthread_mutex_lock(&s->lock);
	struct dbuf *b = s->cur;
	if (!b) {
		b = buf_take(pc);
		if (!b) {
			pthread_mutex_unlock(&s->lock);
			return 1;
		}
		s->cur = b;
	}
	b->h[b->n++] = handle;
	if (b->n == 1) {
		atomic_fetch_add_explicit(&q->extra, 1, memory_order_relaxed);
		ret = 2;
	}
	if (b->n == BUF_HANDLES) {
		atomic_fetch_add_explicit(&q->extra, BUF_HANDLES - 1, memory_order_relaxed);
		s->cur = NULL;
		full = b;
		ret = 2;
	}
	pthread_mutex_unlock(&s->lock);
	if (full) {
		pthread_mutex_lock(&pc->lock);
		full->next = pc->full;
		pc->full = full;
		pthread_mutex_unlock(&pc->lock);
	}
	return ret;
}

/* Build the queue (and start the worker); NULL when memory is short. */
static struct deferred_queue *queue_create(struct zs_pool *pool)
{
	/* enq/deq sit on cache lines of their own (_Alignas(64)); calloc only promises 16. */
	struct deferred_queue *q = aligned_alloc(64, sizeof(*q));
	if (!q)
		return NULL;
	memset(q, 0, sizeof(*q));
	/* zs_pool_create bounded the capacity, so neither the rounding nor the size can overflow. */
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
	if (pool->cfg.free_mode == ZS_FREE_PERCPU_DEFERRED)
		q->pcpu = pcpu_create(cap); /* NULL: its frees are synchronous */
	/* Before any worker exists: a fork must find its gate (common/fork.h). */
	fork_handlers(ZS_FORK_DEFERRED, atfork_prepare, atfork_parent, atfork_child);
	/* No thread (deferred_worker -1): drained by flush and full-queue frees; a failed start:
	 * T_WANTED. */
	start_worker(pool, q);
	/* Listed before it is published, so a fork's child handler sees every queue in use. */
	fork_gate_lock(&fork_gate);
	q->fork_next = fork_head;
	if (fork_head)
		fork_head->fork_prev = q;
	fork_head = q;
	fork_gate_unlock(&fork_gate);
	atomic_store_explicit(&pool->deferred, q, memory_order_release);
	return q;
}

/* The pool's queue, created by the first caller; NULL only when memory is short. */
static struct deferred_queue *queue_get(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	if (likely(q))
		return q;
	mutex_lock_ranked(&pool->deferred_init_lock, ZS_LOCK_ZS_DEFERRED_INIT);
	q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	if (!q)
		q = queue_create(pool);
	mutex_unlock_ranked(&pool->deferred_init_lock);
	return q;
}

static int deferred_push(struct zs_pool *pool, unsigned long handle);
static void deferred_release_zspage(struct zs_pool *pool, struct zspage *zspage);

void deferred_init(struct zs_pool *pool)
{
	if (pool->cfg.free_mode == ZS_FREE_PERCPU_DEFERRED)
		pool->defer_push = deferred_push;
	if (pool->cfg.free_mode == ZS_FREE_PAGE_DEFERRED)
		pool->defer_release = deferred_release_zspage;
	atomic_init(&pool->deferred, NULL);
	pthread_mutex_init(&pool->deferred_init_lock, NULL);
}

void deferred_destroy(struct zs_pool *pool)
{
	struct deferred_queue *q = atomic_load_explicit(&pool->deferred, memory_order_acquire);
	pthread_mutex_destroy(&pool->deferred_init_lock);
	if (!q)
		return;
	if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_RUNNING) {
		mutex_lock_ranked(&q->wake_lock, ZS_LOCK_ZS_DEFERRED_WAKE);
		atomic_store_explicit(&q->stop, 1, memory_order_release);
		pthread_cond_signal(&q->wake);
		mutex_unlock_ranked(&q->wake_lock);
		/* The worker takes the fork gate, consume, class, handle and page locks: hold none. */
		lock_assert_none(ZS_LOCK_ZS_DEFERRED_FORK);
		pthread_join(q->tid, NULL);
	}
	fork_gate_lock(&fork_gate);
	if (q->fork_prev)
		q->fork_prev->fork_next = q->fork_next;
	else
		fork_head = q->fork_next;
	if (q->fork_next)
		q->fork_next->fork_prev = q->fork_prev;
	fork_gate_unlock(&fork_gate);
	drain(pool, q, atomic_load_explicit(&q->enq, memory_order_acquire), 0);
	pcpu_destroy(q->pcpu);
	free(atomic_load_explicit(&q->hooks, memory_order_relaxed));
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->wake_lock);
	pthread_mutex_destroy(&q->consume_lock);
	free(q->cells);
	free(q);
	atomic_store_explicit(&pool->deferred, NULL, memory_order_relaxed);
}

/* Checked mode: mark the handle queued so a second free of it is caught now; -EINVAL if bad. */
static int mark_pending(struct zs_pool *pool, unsigned long handle)
{
	if (!handle_in_pool(pool, handle))
		return -EINVAL;
	/* Read obj under the pool lock: compaction (pool write lock) may be moving it. */
	read_lock(&pool->lock);
	unsigned long v = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
	int bad = (v & (HANDLE_FREE_BIT | HANDLE_PENDING_BIT)) ||
		  validate_obj(pool, handle, v) ||
		  !atomic_compare_exchange_strong_explicit(handle_slot(handle), &v,
							   v | HANDLE_PENDING_BIT,
							   memory_order_relaxed, memory_order_relaxed);
	read_unlock(&pool->lock);
	return bad ? -EINVAL : 0;
}

static void unmark_pending(unsigned long handle)
{
	atomic_fetch_and_explicit(handle_slot(handle), ~HANDLE_PENDING_BIT, memory_order_relaxed);
}

static void hook_push(struct deferred_queue *q, unsigned long handle)
{
	struct zs_deferred_hooks *hk = atomic_load_explicit(&q->hooks, memory_order_acquire);
	if (hk && hk->push)
		hk->push(hk->ctx, handle);
}

/* The worker's state, starting it first where one is wanted; T_RUNNING when it can take work. */
static int worker_state(struct zs_pool *pool, struct deferred_queue *q)
{
	int t = atomic_load_explicit(&q->thread, memory_order_relaxed);
	if (unlikely(t == T_WANTED))
		t = restart_worker(pool, q);
	return t;
}

int zs_free_deferred(struct zs_pool *pool, unsigned long handle)
{
	if (unlikely(!handle || ZS_IS_ERR(handle)))
		return 0;
	if (pool->cfg.free_mode == ZS_FREE_PERCPU_DEFERRED)
		return zs_free(pool, handle); /* which queues it into this CPU's buffer */
	struct deferred_queue *q = queue_get(pool);
	if (unlikely(!q))
		return zs_free(pool, handle); /* no memory for a queue: free now */
	if (pool->cfg.checked && mark_pending(pool, handle))
		return -EINVAL;
	if (unlikely(enqueue(q, handle))) {
		/* Full: free it here, like the RFC's synchronous fallback. */
		atomic_fetch_add_explicit(&q->fallbacks, 1, memory_order_relaxed);
		if (pool->cfg.checked)
			unmark_pending(handle);
		return zs_free(pool, handle);
	}
	hook_push(q, handle);
	/* One load either way: the fork's case costs the fast path nothing more. */
	int t = atomic_load_explicit(&q->thread, memory_order_relaxed);
	if (likely(t == T_RUNNING))
		wake_worker(q);
	else if (unlikely(t == T_WANTED) && restart_worker(pool, q) != T_RUNNING)
		drain(pool, q, atomic_load_explicit(&q->enq, memory_order_acquire), 0);
	return 0;
}

static int deferred_push(struct zs_pool *pool, unsigned long handle)
{
	struct deferred_queue *q = queue_get(pool);
	if (unlikely(!q || !q->pcpu || worker_state(pool, q) != T_RUNNING))
		return 1; /* no queue, no buffers or no worker to drain them: free now */
	if (pool->cfg.checked && mark_pending(pool, handle))
		return -EINVAL;
	int r = pcpu_push(q, handle);
	if (unlikely(r == 1)) {
		atomic_fetch_add_explicit(&q->fallbacks, 1, memory_order_relaxed);
		if (pool->cfg.checked)
			unmark_pending(handle);
		return 1;
	}
	hook_push(q, handle);
	if (r == 2)
		wake_worker(q);
	return 0;
}

static void deferred_release_zspage(struct zs_pool *pool, struct zspage *zspage)
{
	struct deferred_queue *q = queue_get(pool);
	if (unlikely(!q || worker_state(pool, q) != T_RUNNING)) {
		free_zspage_pages(pool, zspage); /* nobody would release it later: now */
		return;
	}
	/* Counted before it can be found (the top). */
	atomic_fetch_add_explicit(&q->extra, 1, memory_order_relaxed);
	struct zspage *old = atomic_load_explicit(&q->release_head, memory_order_relaxed);
	do
		zspage->lprev = old;
	while (!atomic_compare_exchange_weak_explicit(&q->release_head, &old, zspage,
						      memory_order_release, memory_order_relaxed));
	wake_worker(q);
}

int zs_set_deferred_hooks(struct zs_pool *pool, const struct zs_deferred_hooks *hooks)
{
	if (!pool || !hooks)
		return -EINVAL;
	struct deferred_queue *q = queue_get(pool);
	if (!q)
		return -ENOMEM;
	struct zs_deferred_hooks *copy = malloc(sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	*copy = *hooks;
	struct zs_deferred_hooks *none = NULL;
	if (!atomic_compare_exchange_strong_explicit(&q->hooks, &none, copy, memory_order_acq_rel,
						     memory_order_acquire)) {
		free(copy);
		return -EBUSY;
	}
	return 0;
}

uint64_t zs_pool_deferred_fallbacks(struct zs_pool *pool)
{
	struct deferred_queue *q =
		pool ? atomic_load_explicit(&pool->deferred, memory_order_acquire) : NULL;
	return q ? atomic_load_explicit(&q->fallbacks, memory_order_relaxed) : 0;
}

uint64_t zs_pool_deferred_worker_cpu_ns(struct zs_pool *pool)
{
	struct deferred_queue *q =
		pool ? atomic_load_explicit(&pool->deferred, memory_order_acquire) : NULL;
	clockid_t cid;
	struct timespec t;
	if (!q || atomic_load_explicit(&q->thread, memory_order_relaxed) != T_RUNNING ||
	    pthread_getcpuclockid(q->tid, &cid) || clock_gettime(cid, &t))
		return 0;
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int deferred_pending(struct zs_pool *pool)
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
	fork_gate_close(&fork_gate);
	/*
	 * A worker just started runs its runtime's thread setup before worker() (a sanitizer
	 * allocates there, and clang 14's does not hold its allocator across fork): wait until
	 * it is past it, so the child's allocator is not copied mid-way (src/pages/purge.c has
	 * the case).  It takes no lock before it sets entered.
	 */
	for (struct deferred_queue *q = fork_head; q; q = q->fork_next)
		while (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_RUNNING &&
		       !atomic_load_explicit(&q->entered, memory_order_acquire)) {
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
}

static void atfork_parent(void)
{
	fork_gate_open_parent(&fork_gate);
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
		if (atomic_load_explicit(&q->thread, memory_order_relaxed) == T_RUNNING) {
			atomic_store_explicit(&q->thread, T_WANTED, memory_order_relaxed);
			q->retry_ns = 0; /* start at the first call */
		}
	}
	pthread_condattr_destroy(&ca);
	fork_gate_open_child(&fork_gate);
}
