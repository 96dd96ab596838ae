/*
 * A measurement probe, not part of any build: force-included into every
 * source file (-include bench/probes/noatomic.h), it turns each C11 atomic
 * read-modify-write and fence into a plain load and store, and every
 * atomic store into a relaxed one, so the library runs with no locked
 * instruction at all.  Correct for one thread only; it exists to answer one
 * question: how much of the single-thread gap to mimalloc do the atomics
 * cost (docs/benchmarks.md section 5, "Where the T=1 gap
 * is").  Build: cmake -B build-noatomic -DCMAKE_BUILD_TYPE=Release
 * -DCMAKE_C_FLAGS="-include $PWD/bench/probes/noatomic.h -Wno-error".
 */
#include <stdatomic.h>

#undef atomic_exchange_explicit
#undef atomic_exchange
#undef atomic_fetch_add_explicit
#undef atomic_fetch_sub_explicit
#undef atomic_fetch_or_explicit
#undef atomic_fetch_and_explicit
#undef atomic_fetch_add
#undef atomic_fetch_sub
#undef atomic_compare_exchange_weak_explicit
#undef atomic_compare_exchange_strong_explicit
#undef atomic_compare_exchange_weak
#undef atomic_compare_exchange_strong
#undef atomic_thread_fence
#undef atomic_store_explicit
#undef atomic_store

#define atomic_store_explicit(p, v, o) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define atomic_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
/* old value out, expr (which may name the old value __o) in */
#define PROBE_RMW(p, expr)                                               \
	__extension__({                                                  \
		__auto_type __p = (p);                                   \
		__auto_type __o = __atomic_load_n(__p, __ATOMIC_RELAXED); \
		__atomic_store_n(__p, (expr), __ATOMIC_RELAXED);          \
		__o;                                                     \
	})
#define atomic_exchange_explicit(p, v, o) PROBE_RMW(p, (v))
#define atomic_exchange(p, v) PROBE_RMW(p, (v))
#define atomic_fetch_add_explicit(p, v, o) PROBE_RMW(p, __o + (v))
#define atomic_fetch_sub_explicit(p, v, o) PROBE_RMW(p, __o - (v))
#define atomic_fetch_or_explicit(p, v, o) PROBE_RMW(p, __o | (v))
#define atomic_fetch_and_explicit(p, v, o) PROBE_RMW(p, __o & (v))
#define atomic_fetch_add(p, v) PROBE_RMW(p, __o + (v))
#define atomic_fetch_sub(p, v) PROBE_RMW(p, __o - (v))
#define PROBE_CAS(p, e, d)                                                 \
	__extension__({                                                    \
		__auto_type __p = (p);                                     \
		__auto_type __e = (e);                                     \
		__auto_type __c = __atomic_load_n(__p, __ATOMIC_RELAXED);   \
		int __r = (__c == *__e);                                   \
		if (__r)                                                   \
			__atomic_store_n(__p, (d), __ATOMIC_RELAXED);       \
		else                                                       \
			*__e = __c;                                        \
		__r;                                                       \
	})
#define atomic_compare_exchange_weak_explicit(p, e, d, s, f) PROBE_CAS(p, e, d)
#define atomic_compare_exchange_strong_explicit(p, e, d, s, f) PROBE_CAS(p, e, d)
#define atomic_compare_exchange_weak(p, e, d) PROBE_CAS(p, e, d)
#define atomic_compare_exchange_strong(p, e, d) PROBE_CAS(p, e, d)
#define atomic_thread_fence(o) __atomic_signal_fence(__ATOMIC_SEQ_CST)
