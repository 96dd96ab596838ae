/*
 * Process-wide side of the page provider (owns the purge thread): the one
 * cache budget that every provider with the default cache size shares, the
 * defaults read from the environment, and the thread that gives idle cached
 * pages back to the OS when no call comes.
 *
 * Why a thread: the decay in cache.c runs inside calls, so a program that
 * filled pools, freed everything and went idle kept the whole bound resident
 * for ever, and so did one that kept calling, because the per-CPU caches
 * served those calls and never looked at the shared cache's age (measured:
 * 132 MiB above the start for one pool, 643 MiB for eight).  jemalloc's
 * background threads and mimalloc's purge do this job there; the kernel's
 * zsmalloc frees a zspage's pages at once.
 *
 * Why one budget: a bound per provider multiplies by the number of pools.
 * Providers created with cache_pages 0 count their shared cache in one
 * process-wide total; past the budget a provider releases its own coldest
 * cached pages (cache.c, purge_locked) rather than caching more.  A provider
 * given an explicit cache_pages asked for that bound and keeps it, outside
 * the total (benchmarks that keep every page).
 *
 * Life of the thread.  None at start and none while nothing is cached:
 * the provider whose lock round takes the shared caches to PURGE_START_BYTES
 * (2 MiB; the budget's total, or its own cache outside the budget) kicks it
 * (cache.c, after its locks are dropped), which starts it (every signal
 * blocked, named "zs-purge") or, when it sleeps past the new pages'
 * due time, wakes it.  Each pass looks at every registered provider
 * (cache.c's idle pass, which the kick hands over: this file names none of
 * cache.c's code, as cache.c calls this one) and sleeps until the earliest
 * due time; a pass that finds nothing cached anywhere ends the thread.  So a program that caches
 * less than 2 MiB (a pool that allocates and frees a few pages, which stay
 * in a per-CPU cache or move between two CPUs' caches) never starts it
 * (tests/internal/test_zs_lazy_deferred.c counts threads); its pages go with its next
 * call's decay or a trim.  A kick is never
 * lost while the thread decides to end: the kicker lowers `want` (an RMW)
 * then reads `state`; the thread stores `state` then takes `want`; all
 * seq_cst, so one of them sees the other (the store-buffer litmus).
 *
 * Owners' idle work.  A provider's owner may give it hooks (pages.h,
 * idle_due and idle_work: zsmalloc's self-compaction) so that the same
 * thread serves it instead of a thread of the owner's: idle_due runs in the
 * pass, and idle_work after the registry lock is dropped (it takes the
 * owner's locks, which come before this one), with the provider marked busy
 * so that unregister (destroy) and pages_idle_stop wait for it to return.
 *
 * Lock order: registry lock, then a per-CPU cache lock, then a provider's
 * mutex; kicks are made with no provider lock held.  A pass holds the
 * registry lock throughout, so destroy (unregister) waits for a pass over
 * its provider, and fork (the atfork prepare handler takes the lock) never
 * copies a provider lock the thread holds.  Nor a lock of the thread's
 * runtime: the thread comes and goes, and its start (before purge_main) and
 * its exit (after the last unlock) run the C library's and a sanitizer's
 * own thread setup and teardown, which allocate; a fork in their middle
 * left a child whose next new thread waited for ever on the sanitizer's
 * allocator (test_mt_fork_threads under ASan, a child's deferred worker).
 * So the prepare handler waits for a started thread to reach purge_main
 * (it sets entered before it takes any lock).  An ending thread's teardown,
 * after its last unlock, is not waited for: the thread is detached, since a
 * joinable one that ended and was never joined (the last one, at exit) is a
 * leak to TSan, and a detached one cannot be joined.  The child has no thread: state
 * says so, and every provider is marked to kick at its next cached page,
 * whatever the totals it inherited say.  At exit or dlclose a destructor stops the
 * thread (and no new one starts), so it never runs unloaded code.
 */
#include "pages/internal.h"
#include "common/fork.h"
#include "common/sigblock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { STOPPED = 0, RUNNING = 1 };

static struct {
	pthread_mutex_t lock;       /* the registry lock */
	pthread_cond_t wake;        /* the thread's sleep (CLOCK_MONOTONIC) */
	pthread_cond_t done;        /* the destructor waits on it for the thread to end */
	pthread_condattr_t cattr;
	struct zs_pages *head;      /* providers that cache and decay */
	/* the pass over one provider: cache.c's, handed over by the kick that starts the thread */
	uint64_t (*pass)(struct zs_pages *p, uint64_t now);
	_Atomic int state;          /* written under the lock */
	_Atomic uint64_t wake_at;   /* coarse-clock time the sleeping thread wakes; lock to write */
	_Atomic uint64_t want;      /* earliest due time kicked since the thread last looked */
	_Atomic size_t cached;      /* bytes of shared cache that count in the budget */
	size_t budget;              /* bytes; read-only after init */
	unsigned decay_ms;          /* default decay: ms, ZS_PAGES_DECAY_NEVER or DECAY_IMMEDIATE */
	uint64_t slack_ns;          /* the coarse clock's lag behind CLOCK_MONOTONIC */
	bool shutdown;              /* destructor ran: no thread any more */
	bool forking;               /* a fork's prepare waits: no owner's idle work starts */
	bool thread_alive;          /* between pthread_create and the thread's last unlock */
	_Atomic bool entered;       /* the thread reached purge_main (its runtime's start is done) */
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake_at = NO_TIME,
	.want = NO_TIME,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* ---- defaults from the environment ------------------------------------ */

static bool env_long(const char *name, long lo, long hi, long *out)
{
	const char *e = getenv(name);
	if (!e || !*e)
		return false;
	char *end;
	errno = 0;
	long v = strtol(e, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "libzs: %s=%s ignored (want %ld..%ld)\n", name, e, lo, hi);
		return false;
	}
	*out = v;
	return true;
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

static _Atomic unsigned fork_gen;

unsigned purge_fork_gen(void)
{
	return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

static void init_once(void)
{
	long v;

	g.decay_ms = ZS_PAGES_DEFAULT_DECAY_MS;
	if (env_long("ZS_PAGES_DECAY_MS", -1, ZS_PAGES_MAX_DECAY_MS, &v))
		g.decay_ms = v < 0 ? ZS_PAGES_DECAY_NEVER : v == 0 ? DECAY_IMMEDIATE : (unsigned)v;
	g.budget = purge_budget_for(sysconf(_SC_NPROCESSORS_ONLN));
	if (env_long("ZS_PAGES_CACHE_MB", 0, (long)(ZS_PAGES_MAX_SPAN >> 20), &v))
		g.budget = (size_t)v << 20;

	struct timespec res;
	g.slack_ns = 4000000;
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
		g.slack_ns = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec + 1000000;
	pthread_condattr_init(&g.cattr);
	pthread_condattr_setclock(&g.cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&g.wake, &g.cattr);
	pthread_cond_init(&g.done, &g.cattr);
	/* Prepared after the deferred and zswap workers, which may kick the thread (common/fork.h). */
	fork_handlers(ZS_FORK_PAGES, atfork_prepare, atfork_parent, atfork_child);
}


void purge_defaults(unsigned *decay_ms, size_t *budget_bytes)
{
	pthread_once(&g_once, init_once);
	*decay_ms = g.decay_ms;
	*budget_bytes = g.budget;
}

/* ---- budget ------------------------------------------------------------ */

size_t purge_budget_for(long cpus)
{
	size_t b = ZS_PAGES_DEFAULT_CACHE_BYTES;
	if (cpus > 0 && (size_t)cpus * ZS_PAGES_CACHE_PER_CPU_BYTES > b)
		b = (size_t)cpus * ZS_PAGES_CACHE_PER_CPU_BYTES;
	return b;
}

size_t purge_budget_add(long delta_bytes, bool *started)
{
	/* Unsigned wrap-around adds a negative delta. */
	size_t old = atomic_fetch_add_explicit(&g.cached, (size_t)delta_bytes, memory_order_relaxed);
	size_t t = old + (size_t)delta_bytes;
	/*
	 * Pages added with the total at the start or past it and no thread
	 * running start one too: a provider the thread never looks at
	 * (ZS_PAGES_DECAY_NEVER) keeps its cache counted, so beside it the
	 * total can stay past the start with nothing crossing it again.
	 */
	if (started)
		*started = t >= PURGE_START_BYTES &&
			   (old < PURGE_START_BYTES || (delta_bytes > 0 && atomic_load(&g.state) != RUNNING));
	return t > g.budget ? t - g.budget : 0;
}

bool purge_budget_room(size_t bytes)
{
	return atomic_load_explicit(&g.cached, memory_order_relaxed) + bytes <= g.budget;
}

/* ---- the thread -------------------------------------------------------- */

static void sleep_until(uint64_t due)
{
	uint64_t t = due + g.slack_ns;
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u),
			       .tv_nsec = (long)(t % 1000000000u) };
	pthread_cond_timedwait(&g.wake, &g.lock, &ts);
}

static void *purge_main(void *arg)
{
	(void)arg;
	/* Before the lock, which a fork's prepare handler may hold while it waits for this. */
	atomic_store(&g.entered, true);
	signals_blocked_thread();
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	for (;;) {
		uint64_t now = now_ns(), next = NO_TIME;
		for (struct zs_pages *p = g.head; p && !g.shutdown; p = p->reg_next) {
			uint64_t due = g.pass(p, now);
			if (due < next)
				next = due;
			if (p->idle_run && p->idle_due && !g.forking) {
				/* The owner's idle work takes the owner's locks, which come before this
				 * one: run it unlocked; p stays registered (unregister waits on busy). */
				p->idle_run = false;
				p->idle_busy = true;
				mutex_unlock_ranked(&g.lock);
				p->idle_work(p->idle_ctx);
				mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
				p->idle_busy = false;
				pthread_cond_broadcast(&g.done);
			}
		}
		if (g.shutdown)
			break;
		atomic_store(&g.wake_at, next);
		if (next == NO_TIME)
			atomic_store(&g.state, STOPPED);
		uint64_t w = atomic_exchange(&g.want, NO_TIME);
		if (w < next) {
			/* Kicked during the pass: a provider it already passed has pages now. */
			next = w;
			atomic_store(&g.wake_at, next);
			atomic_store(&g.state, RUNNING);
		}
		if (next == NO_TIME)
			break;
		sleep_until(next);
	}
	atomic_store(&g.state, STOPPED);
	g.thread_alive = false;
	pthread_cond_broadcast(&g.done);
	mutex_unlock_ranked(&g.lock);
	return NULL;
}

/* Registry lock held. */
static void start_thread(void)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;

	if (pthread_attr_init(&a))
		return;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	atomic_store(&g.entered, false);
	/* Blocked before it exists, so no signal ever lands on it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, &a, purge_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc)
		return; /* EAGAIN: the decay inside calls still runs; the next kick retries */
	pthread_setname_np(t, "zs-purge");
	g.thread_alive = true;
	atomic_store(&g.state, RUNNING);
}

void purge_kick(uint64_t due, uint64_t (*pass)(struct zs_pages *p, uint64_t now))
{
	/* Always an RMW, even when want is already lower: the handshake above needs one. */
	uint64_t w = atomic_load(&g.want);
	while (!atomic_compare_exchange_weak(&g.want, &w, due < w ? due : w))
		;
	if (atomic_load(&g.state) == RUNNING && due >= atomic_load(&g.wake_at))
		return;
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	if (g.shutdown) {
		/* After the destructor nothing runs; leave the kick for nobody. */
	} else if (atomic_load(&g.state) != RUNNING) {
		g.pass = pass;
		start_thread();
	} else if (due < atomic_load(&g.wake_at)) {
		pthread_cond_signal(&g.wake);
	}
	mutex_unlock_ranked(&g.lock);
}

/* ---- registry ---------------------------------------------------------- */

void purge_register(struct zs_pages *p)
{
	pthread_once(&g_once, init_once);
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	p->reg_prev = NULL;
	p->reg_next = g.head;
	if (g.head)
		g.head->reg_prev = p;
	g.head = p;
	p->registered = true;
	mutex_unlock_ranked(&g.lock);
}

/* Registry lock held: until the thread's run of p's idle work is over. */
static void idle_wait(struct zs_pages *p)
{
	while (p->idle_busy)
		pthread_cond_wait(&g.done, &g.lock);
}

void purge_idle_stop(struct zs_pages *p)
{
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	p->idle_due = NULL;
	p->idle_run = false;
	idle_wait(p);
	mutex_unlock_ranked(&g.lock);
}

void purge_unregister(struct zs_pages *p)
{
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	p->idle_due = NULL;
	idle_wait(p);
	if (p->reg_prev)
		p->reg_prev->reg_next = p->reg_next;
	else
		g.head = p->reg_next;
	if (p->reg_next)
		p->reg_next->reg_prev = p->reg_prev;
	p->registered = false;
	/* The last one gone: let a sleeping thread find nothing and end now. */
	if (!g.head && atomic_load(&g.state) == RUNNING)
		pthread_cond_signal(&g.wake);
	mutex_unlock_ranked(&g.lock);
}

/* ---- fork and exit ----------------------------------------------------- */

static bool any_idle_busy(void)
{
	for (struct zs_pages *p = g.head; p; p = p->reg_next)
		if (p->idle_busy)
			return true;
	return false;
}

/*
 * An owner's idle work (a compaction) holds its pool's locks outside the
 * registry lock: a fork in its middle would leave them held in the child
 * for ever.  So the prepare handler also waits for it to end (it drops this
 * lock to do so, and takes none the forking thread holds), and no new one
 * starts until the fork is over.
 */
static void atfork_prepare(void)
{
	mutex_lock_ranked(&g.lock, ZS_LOCK_PAGES_REGISTRY);
	/* A thread just started runs its runtime's thread setup before purge_main (a sanitizer's
	 * allocates there); it takes no lock before it sets entered. */
	while (g.thread_alive && !atomic_load(&g.entered)) {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	g.forking = true;
	while (any_idle_busy())
		pthread_cond_wait(&g.done, &g.lock);
}

static void atfork_parent(void)
{
	g.forking = false;
	mutex_unlock_ranked(&g.lock);
}

static void atfork_child(void)
{
	/* Only the forking thread exists here; the purge thread did not come along. */
	atomic_fetch_add(&fork_gen, 1);
	atomic_store(&g.state, STOPPED);
	atomic_store(&g.wake_at, NO_TIME);
	atomic_store(&g.want, NO_TIME);
	g.thread_alive = false;
	g.forking = false;
	for (struct zs_pages *p = g.head; p; p = p->reg_next) {
		/* An idle work in flight ran on the thread, which the child does not have. */
		p->idle_run = p->idle_busy = false;
		p->rekick = true;
		atomic_store_explicit(&p->park_rekick, true, memory_order_relaxed);
	}
	/* It may have been waiting on these: start them afresh. */
	pthread_cond_init(&g.wake, &g.cattr);
	pthread_cond_init(&g.done, &g.cattr);
	mutex_unlock_ranked(&g.lock);
}

/*
 * At exit or when libzs.so is unloaded: stop the thread before its code can
 * go away.  Bounded (a pass is milliseconds), so exit never hangs on it.
 */
__attribute__((destructor)) static void purge_fini(void)
{
	if (pthread_mutex_lock(&g.lock))
		return;
	g.shutdown = true;
	if (g.thread_alive) {
		uint64_t t = now_ns() + 1000000000u;
		struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u),
				       .tv_nsec = (long)(t % 1000000000u) };
		pthread_cond_signal(&g.wake);
		while (g.thread_alive) {
			if (pthread_cond_timedwait(&g.done, &g.lock, &ts) == ETIMEDOUT)
				break;
		}
	}
	pthread_mutex_unlock(&g.lock);
}
