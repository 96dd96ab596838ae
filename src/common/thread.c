/*
 * The one definition of the per-thread number (common/hints.h): in a single
 * file so that every file sees the same number for a thread (a static
 * inside the inline helper would give each file its own).
 *
 * Numbers are reused.  A thread's number goes back when the thread exits (a
 * pthread key's destructor) and the next thread to ask gets the lowest free
 * one, so the live threads hold 0..N-1 however many came and went.  Why:
 * everything keyed by the number assumes the live threads' numbers are few
 * and spread - the 256 write-pin slots (zsmalloc/lock.h: a thread numbered
 * past them takes a zspage lock on every zs_malloc_write), the 16 handle
 * shards and reader shards (taken modulo 16: two live threads 16 apart share
 * one) - and a server that starts a thread per request had used up the pin
 * slots after its 256th thread, for good.
 *
 * Two live threads never hold one number: the destructor clears the thread's
 * number before it gives it back, so a library call made later in the same
 * exit (another key's destructor) takes a fresh number, which a following
 * destructor round gives back too.  The free set is a bitmap changed with
 * atomic and/or, not a lock, so a fork from another thread cannot leave it
 * held; in the child the other threads' numbers stay taken (they never exit
 * there), as before.  Numbers from ZS_THREAD_REUSE up are never reused
 * (that many live threads at once).  The release/acquire pair on a bit is
 * the order between the exited thread's last use of whatever its number
 * keys (a counter shard written with plain stores) and the next owner's
 * first.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/hints.h"

_Thread_local unsigned thread_index_1 ZS_TLS_IE;

#define ZS_THREAD_REUSE 4096u

static atomic_uint next_number;                            /* never handed out yet */
static _Atomic uint64_t free_numbers[ZS_THREAD_REUSE / 64]; /* bit set: free again */
static pthread_key_t exit_key;
/* 0 none yet, 1 being made, 2 made, 3 none to be had.  Not pthread_once: a
 * signal handler's library call during the first assignment would wait for
 * its own thread there; here it goes on without the key. */
static atomic_int exit_key_state;

static _Atomic(void (*)(void)) give_back_hook;

void thread_on_give_back(void (*fn)(void))
{
	atomic_store_explicit(&give_back_hook, fn, memory_order_release);
}

static void number_give_back(void *v)
{
	unsigned n = (unsigned)(uintptr_t)v - 1;
	void (*fn)(void) = atomic_load_explicit(&give_back_hook, memory_order_acquire);
	if (fn)
		fn(); /* while the number is still this thread's */
	thread_index_1 = 0;
	if (n < ZS_THREAD_REUSE)
		atomic_fetch_or_explicit(&free_numbers[n / 64], (uint64_t)1 << (n % 64),
					 memory_order_release);
}

/* The key, made on the first call; 0 while another thread (or this one, interrupted) makes it. */
static int exit_key_ready(void)
{
	int st = atomic_load_explicit(&exit_key_state, memory_order_acquire);
	if (likely(st == 2))
		return 1;
	if (st != 0)
		return 0;
	if (!atomic_compare_exchange_strong_explicit(&exit_key_state, &st, 1, memory_order_acq_rel,
						     memory_order_acquire))
		return st == 2;
	st = pthread_key_create(&exit_key, number_give_back) == 0 ? 2 : 3;
	atomic_store_explicit(&exit_key_state, st, memory_order_release);
	return st == 2;
}

/* The lowest free number below ZS_THREAD_REUSE, taken; UINT32_MAX when none. */
static unsigned number_reuse(void)
{
	/* Only numbers handed out before can be free: the words that hold them. */
	unsigned hi = atomic_load_explicit(&next_number, memory_order_relaxed);
	unsigned words = hi < ZS_THREAD_REUSE ? (hi + 63) / 64 : ZS_THREAD_REUSE / 64;
	for (unsigned w = 0; w < words; w++) {
		uint64_t b = atomic_load_explicit(&free_numbers[w], memory_order_relaxed);
		while (b) {
			uint64_t bit = b & -b;
			uint64_t was = atomic_fetch_and_explicit(&free_numbers[w], ~bit,
								 memory_order_acquire);
			if (was & bit)
				return w * 64 + (unsigned)__builtin_ctzll(bit);
			b = was & ~bit;
		}
	}
	return UINT32_MAX;
}

unsigned thread_index_assign(void)
{
	unsigned n = number_reuse();
	if (n == UINT32_MAX) {
		n = atomic_fetch_add_explicit(&next_number, 1, memory_order_relaxed);
		if (unlikely(n == UINT32_MAX))   /* after 2^32 threads */
			n = 0;
	}
	unsigned v = n + 1;
	thread_index_1 = v;
	/* Without the key (none left, or being made) the number is never given back. */
	if (exit_key_ready())
		pthread_setspecific(exit_key, (void *)(uintptr_t)v);
	return v;
}
