/*
 * The three lock kinds zsmalloc's design depends on, as small user-space
 * analogs of the kernel primitives (the lock hierarchy is pool rwlock ->
 * class spinlock -> zspage lock, see zsmalloc.c):
 *
 *  - zs_spinlock: the class lock.  Test-and-test-and-set; after a short spin
 *    it yields, because user-space threads can be preempted while holding it.
 *  - zs_rwlock: the pool lock.  Readers are a counter on one shared word, so
 *    its cost under many concurrent readers is the cache-line bouncing the
 *    seed-000 patch removes from zs_free; that cost is what we want to measure.
 *  - zs_zspage_lock: readers may hold it across the caller's work; the only
 *    writer (compaction) uses trylock, so a reader never waits for long.
 *
 * All are C11 atomics with acquire/release ordering, which ThreadSanitizer
 * understands.
 */
#ifndef ZS_SRC_ZSMALLOC_LOCK_H
#define ZS_SRC_ZSMALLOC_LOCK_H

#include <sched.h>
#include <stdatomic.h>

#define zs_likely(x) __builtin_expect(!!(x), 1)
#define zs_unlikely(x) __builtin_expect(!!(x), 0)

static inline void zs_cpu_relax(unsigned *spins)
{
	if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	} else {
		sched_yield();
	}
}

/* ---- class lock ---- */

typedef struct {
	atomic_int v;
} zs_spinlock_t;

static inline void zs_spin_init(zs_spinlock_t *l)
{
	atomic_init(&l->v, 0);
}

static inline void zs_spin_lock(zs_spinlock_t *l)
{
	unsigned spins = 0;
	while (zs_unlikely(atomic_exchange_explicit(&l->v, 1, memory_order_acquire))) {
		while (atomic_load_explicit(&l->v, memory_order_relaxed))
			zs_cpu_relax(&spins);
	}
}

static inline void zs_spin_unlock(zs_spinlock_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* ---- pool lock ---- */

/* Bit 0: writer holds or wants the lock; readers count in units of 2. */
typedef struct {
	atomic_uint v;
	atomic_uint waiters; /* readers spinning behind a writer: rwlock_is_contended() */
} zs_rwlock_t;

static inline void zs_rw_init(zs_rwlock_t *l)
{
	atomic_init(&l->v, 0);
	atomic_init(&l->waiters, 0);
}

static inline void zs_read_lock(zs_rwlock_t *l)
{
	for (;;) {
		unsigned v = atomic_fetch_add_explicit(&l->v, 2, memory_order_acquire);
		if (zs_likely(!(v & 1)))
			return;
		atomic_fetch_sub_explicit(&l->v, 2, memory_order_relaxed);
		atomic_fetch_add_explicit(&l->waiters, 1, memory_order_relaxed);
		unsigned spins = 0;
		while (atomic_load_explicit(&l->v, memory_order_relaxed) & 1)
			zs_cpu_relax(&spins);
		atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
	}
}

static inline void zs_read_unlock(zs_rwlock_t *l)
{
	atomic_fetch_sub_explicit(&l->v, 2, memory_order_release);
}

static inline void zs_write_lock(zs_rwlock_t *l)
{
	unsigned spins = 0;
	for (;;) {
		unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
		if (!(v & 1) && atomic_compare_exchange_weak_explicit(&l->v, &v, v | 1,
								      memory_order_acquire,
								      memory_order_relaxed))
			break;
		zs_cpu_relax(&spins);
	}
	spins = 0;
	while (atomic_load_explicit(&l->v, memory_order_acquire) != 1)
		zs_cpu_relax(&spins);
}

static inline void zs_write_unlock(zs_rwlock_t *l)
{
	atomic_fetch_sub_explicit(&l->v, 1, memory_order_release);
}

static inline int zs_rw_is_contended(zs_rwlock_t *l)
{
	return atomic_load_explicit(&l->waiters, memory_order_relaxed) != 0;
}

/* ---- zspage lock: 0 free, -1 write-locked, >0 readers ---- */

static inline void zs_zspage_read_lock(atomic_int *cnt)
{
	unsigned spins = 0;
	for (;;) {
		int c = atomic_load_explicit(cnt, memory_order_relaxed);
		if (c >= 0 && atomic_compare_exchange_weak_explicit(cnt, &c, c + 1,
								    memory_order_acquire,
								    memory_order_relaxed))
			return;
		zs_cpu_relax(&spins);
	}
}

static inline void zs_zspage_read_unlock(atomic_int *cnt)
{
	atomic_fetch_sub_explicit(cnt, 1, memory_order_release);
}

static inline int zs_zspage_write_trylock(atomic_int *cnt)
{
	int c = 0;
	return atomic_compare_exchange_strong_explicit(cnt, &c, -1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void zs_zspage_write_unlock(atomic_int *cnt)
{
	atomic_store_explicit(cnt, 0, memory_order_release);
}

#endif
