/*
 * The three lock kinds zsmalloc's design depends on, as small user-space
 * analogs of the kernel primitives (the lock hierarchy is pool rwlock ->
 * class spinlock -> zspage lock, see zsmalloc.c):
 *
 *  - zs_spinlock: the class lock.  Test-and-test-and-set; after a short spin
 *    it yields, because user-space threads can be preempted while holding it.
 *  - zs_rwlock: the pool lock.  Readers are a counter on one shared word, so
 *    its cost under many concurrent readers is the cache-line bouncing the
 *    seed-000 patch removes from zs_free; that cost is what we want to measure,
 *    so the pool-lock free mode keeps it.  In the class-index modes the pool
 *    lock only pins objects for reads/writes against compaction, and one
 *    shared word there was one cache-line bounce per object access between
 *    all threads (bench_threads); those pools init the lock "sharded":
 *    readers count on a per-thread shard and only look at the shared word,
 *    the writer sets its bit and waits for every shard to drain (a
 *    big-reader lock, like the kernel's percpu_rw_semaphore).
 *  - zspage_lock: readers may hold it across the caller's work; the only
 *    writer (compaction) uses trylock, so a reader never waits for long.
 *  - write pins (zs_wpin): zs_malloc_write's hold on a new object's zspage
 *    while it copies the contents in, a slot per thread that compaction
 *    reads, so the fast path pays two plain stores, not two atomic
 *    read-modify-writes on the zspage (see "Write pins" below).
 *
 * All are C11 atomics with acquire/release ordering, which ThreadSanitizer
 * understands.
 *
 * In a ZS_DEBUG build (common/debug.h) the class lock and the pool lock's
 * writer record their owner, so code that relies on holding one can say so
 * (spin_held, rw_write_held) and a release by a thread that does not
 * hold the lock stops the program.  Readers are not tracked (a count has no
 * owner): rw_read_held only tells that somebody holds the lock.
 *
 * Lock order (ZS_DEBUG, common/debug.h): a spinlock initialised with a rank
 * (spin_init_rank) and the pool lock (rank ZS_LOCK_ZS_POOL, read or
 * write) check the rank against every lock the thread holds before they
 * wait, and the per-thread list of held locks does know this thread's
 * readers; the lock and unlock calls are macros so a violation names the
 * caller's line.  spin_init leaves a lock unchecked.  zspage locks are
 * never ranked: see "Lock order" in zsmalloc.c for why.
 */
#ifndef ZS_SRC_ZSMALLOC_LOCK_H
#define ZS_SRC_ZSMALLOC_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/debug.h"
#include "common/hints.h"

/* ---- class lock ---- */

typedef struct {
	atomic_int v;
#if ZS_DEBUG_ON
	atomic_uintptr_t owner; /* debug_self() of the holder, 0 when free */
	int rank;               /* enum zs_lock_rank; 0: not checked */
#endif
} spinlock_t;

static inline void spin_init_rank(spinlock_t *l, int rank)
{
	atomic_init(&l->v, 0);
#if ZS_DEBUG_ON
	atomic_init(&l->owner, 0);
	l->rank = rank;
#else
	(void)rank;
#endif
}

static inline void spin_init(spinlock_t *l)
{
	spin_init_rank(l, ZS_LOCK_UNTRACKED);
}

#if ZS_DEBUG_ON
#define spin_rank(l) ((l)->rank)
#else
#define spin_rank(l) 0
#endif

#define spin_lock(l) spin_lock_at((l), __FILE__, __LINE__)
static inline void spin_lock_at(spinlock_t *l, const char *file, int line)
{
	unsigned spins = 0;
	lock_take_at(l, spin_rank(l), file, line);
	while (unlikely(atomic_exchange_explicit(&l->v, 1, memory_order_acquire))) {
		while (atomic_load_explicit(&l->v, memory_order_relaxed))
			spin_wait(&spins);
	}
#if ZS_DEBUG_ON
	assert_internal(atomic_load_explicit(&l->owner, memory_order_relaxed) == 0);
	atomic_store_explicit(&l->owner, debug_self(), memory_order_relaxed);
#endif
}

/* Take l only if it is free (no wait, so no lock-order check): 1 when taken. */
static inline int spin_trylock(spinlock_t *l)
{
	if (atomic_load_explicit(&l->v, memory_order_relaxed) ||
	    atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
		return 0;
	if (spin_rank(l))
		lock_took_try(l, spin_rank(l));
#if ZS_DEBUG_ON
	atomic_store_explicit(&l->owner, debug_self(), memory_order_relaxed);
#endif
	return 1;
}

/* Does the calling thread hold l?  Always 1 outside ZS_DEBUG (only asserts ask). */
static inline int spin_held(spinlock_t *l)
{
#if ZS_DEBUG_ON
	return atomic_load_explicit(&l->owner, memory_order_relaxed) == debug_self();
#else
	(void)l;
	return 1;
#endif
}

#define spin_unlock(l) spin_unlock_at((l), __FILE__, __LINE__)
static inline void spin_unlock_at(spinlock_t *l, const char *file, int line)
{
#if ZS_DEBUG_ON
	assert_internal(spin_held(l));
	atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
	if (l->rank)
		lock_drop_at(l, file, line);
#else
	(void)file;
	(void)line;
#endif
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* ---- pool lock ---- */

#define ZS_RW_SHARDS 16

/*
 * Small per-thread index, handed out round robin, for sharded counters and
 * the sharded pool lock: the library-wide thread number (common/hints.h), as
 * a reader may raise its shard in one file and drop it in another, so every
 * file must agree on the thread's shard.
 */
static inline unsigned thread_shard(void)
{
	return thread_index();
}

/* Bit 0: writer holds or wants the lock; unsharded readers count in units of 2. */
typedef struct {
	atomic_uint v;
	atomic_uint waiters; /* readers spinning behind a writer: rwlock_is_contended() */
	int sharded;
#if ZS_DEBUG_ON
	atomic_uintptr_t writer; /* debug_self() of the write holder, 0 when none */
#endif
	struct {
		atomic_uint readers;
	} __attribute__((aligned(64))) shard[ZS_RW_SHARDS];
} rwlock_t;

static inline void rw_init(rwlock_t *l, int sharded)
{
	atomic_init(&l->v, 0);
	atomic_init(&l->waiters, 0);
#if ZS_DEBUG_ON
	atomic_init(&l->writer, 0);
#endif
	l->sharded = sharded;
	for (int i = 0; i < ZS_RW_SHARDS; i++)
		atomic_init(&l->shard[i].readers, 0);
}

/*
 * A reader that finds the writer's bit stays counted in `waiters` until it
 * holds the lock: the writer backs off while readers wait behind it and the
 * holders do not drain (write_lock), and it must not take the bit back
 * before those readers are in, or they would wait again.
 */
static inline void read_wait(rwlock_t *l)
{
	unsigned spins = 0;
	while (atomic_load_explicit(&l->v, memory_order_relaxed) & 1)
		spin_wait(&spins);
}

/*
 * Sharded readers: the shard increment and the writer's bit are a Dekker
 * pair, so both sides use seq_cst (a reader that misses the bit is seen by
 * the writer's scan of the shards, and the other way round).
 */
static inline void read_lock_sharded(rwlock_t *l)
{
	atomic_uint *r = &l->shard[thread_shard() % ZS_RW_SHARDS].readers;
	int waited = 0;
	for (;;) {
		atomic_fetch_add_explicit(r, 1, memory_order_seq_cst);
		if (likely(!(atomic_load_explicit(&l->v, memory_order_seq_cst) & 1)))
			break;
		atomic_fetch_sub_explicit(r, 1, memory_order_release);
		if (!waited++)
			atomic_fetch_add_explicit(&l->waiters, 1, memory_order_relaxed);
		read_wait(l);
	}
	if (unlikely(waited))
		atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
}

#define read_lock(l) read_lock_at((l), __FILE__, __LINE__)
static inline void read_lock_at(rwlock_t *l, const char *file, int line)
{
	lock_take_at(l, ZS_LOCK_ZS_POOL, file, line);
	if (l->sharded) {
		read_lock_sharded(l);
		return;
	}
	int waited = 0;
	for (;;) {
		unsigned v = atomic_fetch_add_explicit(&l->v, 2, memory_order_acquire);
		if (likely(!(v & 1)))
			break;
		atomic_fetch_sub_explicit(&l->v, 2, memory_order_relaxed);
		if (!waited++)
			atomic_fetch_add_explicit(&l->waiters, 1, memory_order_relaxed);
		read_wait(l);
	}
	if (unlikely(waited))
		atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
}

#define read_unlock(l) read_unlock_at((l), __FILE__, __LINE__)
static inline void read_unlock_at(rwlock_t *l, const char *file, int line)
{
	lock_drop_at(l, file, line);
	if (l->sharded)
		atomic_fetch_sub_explicit(&l->shard[thread_shard() % ZS_RW_SHARDS].readers, 1,
					  memory_order_release);
	else
		atomic_fetch_sub_explicit(&l->v, 2, memory_order_release);
}

/* Are readers still in (the unsharded count, or any shard)? */
static inline int rw_readers_in(rwlock_t *l)
{
	if (atomic_load_explicit(&l->v, memory_order_acquire) != 1)
		return 1;
	for (int i = 0; l->sharded && i < ZS_RW_SHARDS; i++)
		if (atomic_load_explicit(&l->shard[i].readers, memory_order_seq_cst))
			return 1;
	return 0;
}

/* Relax steps a writer waits for the holders to drain before it lets waiting readers in. */
#define ZS_RW_WRITER_PATIENCE 4096

/*
 * The writer takes bit 0 (new readers wait), then waits for the readers in
 * to leave.  If they do not leave while other readers wait behind the bit,
 * it gives the bit back until those readers are in, and starts over.  Why:
 * a reader may hold the lock while it waits for something that needs a
 * read lock of its own - a region page fault whose handler decompresses from
 * this pool (src/region/region.c, "Lock order") - and a writer that kept
 * its bit would block that read lock forever.  The only writer is
 * compaction, which can always wait.
 */
#define write_lock(l) write_lock_at((l), __FILE__, __LINE__)
static inline void write_lock_at(rwlock_t *l, const char *file, int line)
{
	unsigned spins;
	lock_take_at(l, ZS_LOCK_ZS_POOL, file, line);
	for (;;) {
		spins = 0;
		for (;;) {
			unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
			if (!(v & 1) && atomic_compare_exchange_weak_explicit(&l->v, &v, v | 1,
									      memory_order_seq_cst,
									      memory_order_relaxed))
				break;
			spin_wait(&spins);
		}
		unsigned waited = 0;
		spins = 0;
		while (rw_readers_in(l)) {
			if (++waited > ZS_RW_WRITER_PATIENCE &&
			    atomic_load_explicit(&l->waiters, memory_order_relaxed))
				break;
			spin_wait(&spins);
		}
		if (!rw_readers_in(l))
			break;
		/* Back off: let the waiting readers in, then try again. */
		atomic_fetch_sub_explicit(&l->v, 1, memory_order_release);
		spins = 0;
		while (atomic_load_explicit(&l->waiters, memory_order_relaxed))
			spin_wait(&spins);
	}
#if ZS_DEBUG_ON
	atomic_store_explicit(&l->writer, debug_self(), memory_order_relaxed);
#endif
}

/* Does the calling thread hold l for writing?  Always 1 outside ZS_DEBUG. */
static inline int rw_write_held(rwlock_t *l)
{
#if ZS_DEBUG_ON
	return atomic_load_explicit(&l->writer, memory_order_relaxed) == debug_self();
#else
	(void)l;
	return 1;
#endif
}

/*
 * Does the calling thread hold l, reading or writing?  Exact in a ZS_DEBUG
 * build (the thread's list of held locks, common/debug.c); always 1
 * otherwise (only asserts ask).
 */
static inline int rw_held_by_me(rwlock_t *l)
{
#if ZS_DEBUG_ON
	return lockdep_holds(l);
#else
	(void)l;
	return 1;
#endif
}

/*
 * Is l held at all (a reader or a writer)?  Readers have no owner, so this
 * is the most a read-side check can ask, so every shard is looked at.
 */
static inline int rw_held(rwlock_t *l)
{
	if (atomic_load_explicit(&l->v, memory_order_relaxed))
		return 1;
	for (int i = 0; l->sharded && i < ZS_RW_SHARDS; i++)
		if (atomic_load_explicit(&l->shard[i].readers, memory_order_relaxed))
			return 1;
	return 0;
}

#define write_unlock(l) write_unlock_at((l), __FILE__, __LINE__)
static inline void write_unlock_at(rwlock_t *l, const char *file, int line)
{
#if ZS_DEBUG_ON
	assert_internal(rw_write_held(l));
	atomic_store_explicit(&l->writer, 0, memory_order_relaxed);
#endif
	lock_drop_at(l, file, line);
	atomic_fetch_sub_explicit(&l->v, 1, memory_order_release);
}

static inline int rw_is_contended(rwlock_t *l)
{
	return atomic_load_explicit(&l->waiters, memory_order_relaxed) != 0;
}

/* ---- zspage lock: 0 free, -1 write-locked, >0 readers ---- */

static inline void zspage_read_lock(atomic_int *cnt)
{
	unsigned spins = 0;
	for (;;) {
		int c = atomic_load_explicit(cnt, memory_order_relaxed);
		if (c >= 0 && atomic_compare_exchange_weak_explicit(cnt, &c, c + 1,
								    memory_order_acquire,
								    memory_order_relaxed))
			return;
		spin_wait(&spins);
	}
}

static inline void zspage_read_unlock(atomic_int *cnt)
{
	int was = atomic_fetch_sub_explicit(cnt, 1, memory_order_release);
	assert_internal(was > 0); /* an unlock without a reader would read as write-locked */
	(void)was;
}

static inline int zspage_write_trylock(atomic_int *cnt)
{
	int c = 0;
	return atomic_compare_exchange_strong_explicit(cnt, &c, -1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void zspage_write_unlock(atomic_int *cnt)
{
	assert_internal(atomic_load_explicit(cnt, memory_order_relaxed) == -1);
	atomic_store_explicit(cnt, 0, memory_order_release);
}

/*
 * ---- write pins ----
 *
 * zs_malloc_write copies a new object's contents with no class lock held
 * (the source may fault into a region whose handler needs the class), so
 * something must keep compaction from moving the object meanwhile.  A
 * zspage read lock does it, at the price of a locked compare-exchange and
 * a locked subtract per object on a line other threads write: 4-7% of the
 * application profile's churn (bench/ab_threads.py, docs/benchmarks.md).
 * Instead each thread publishes the zspage it is writing into in a slot of
 * its own (its library thread number, common/hints.h), with plain stores:
 * set under the class lock, so the class lock's release makes it visible
 * to whoever takes that lock next, and cleared with a release store after
 * the copy.  Compaction, the only thing that moves objects, looks at the
 * slots under the same class lock (wpin_held) and leaves a pinned
 * zspage alone, as it leaves a read-locked one.  Pins for a class are only
 * set under its lock, so no new one appears while compaction holds it.
 *
 * The slots are process-wide (a zspage address names its pool), one cache
 * line each so two writers never share a line.  A thread numbered past the
 * table (more than 256 threads alive at once: numbers of exited threads are
 * reused), or a call nested in one already pinning (a signal handler), takes
 * the zspage read lock as before: wpin_take returns NULL.
 */
#define ZS_WPIN_SLOTS 256u
struct zs_wpin {
	_Atomic(const void *) z;
} __attribute__((aligned(64)));
extern struct zs_wpin wpins[ZS_WPIN_SLOTS];
/* Slots that may be in use: one past the highest thread number that pinned. */
extern atomic_uint wpins_hi;
void wpin_raise(unsigned slot);
int wpin_held(const void *z);

/* Class lock held: pin zspage z for this thread's write, or NULL (use the zspage read lock). */
static inline struct zs_wpin *wpin_take(const void *z)
{
	unsigned i = thread_index();
	if (unlikely(i >= ZS_WPIN_SLOTS))
		return NULL;
	struct zs_wpin *w = &wpins[i];
	if (unlikely(atomic_load_explicit(&w->z, memory_order_relaxed) != NULL))
		return NULL;
	if (unlikely(atomic_load_explicit(&wpins_hi, memory_order_relaxed) <= i))
		wpin_raise(i);
	atomic_store_explicit(&w->z, z, memory_order_relaxed);
	return w;
}

/* After the write: compaction may move the object from here on. */
static inline void wpin_drop(struct zs_wpin *w)
{
	atomic_store_explicit(&w->z, NULL, memory_order_release);
}

#endif
