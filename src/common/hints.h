/*
 * The small hot-path helpers every layer shares: branch hints, the
 * spin-then-yield wait, and a per-thread number.  One home, so the layers
 * agree on them (how long a waiter spins before it gives the core to a
 * preempted holder; which shard or stream a thread starts from) and a
 * change to one is one change.  mimalloc keeps the same things in one
 * internal header (mi_likely, mi_atomic_yield, _mi_thread_id).
 */
#ifndef ZS_SRC_COMMON_HINTS_H
#define ZS_SRC_COMMON_HINTS_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#if defined(__GLIBC__) && defined(__x86_64__) && defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define ZS_HAVE_RSEQ 1
#endif
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* One spin-wait step's pause: lets the sibling hyperthread run, saves power. */
static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * Spins a waiter pauses before it yields: a holder on another core is done
 * within them; past them it is probably preempted (more threads than
 * cores), and spinning on keeps it from running.
 */
#define ZS_SPIN_PAUSES 64

/* One step of a wait loop: pause for the first ZS_SPIN_PAUSES steps, then yield. */
static inline void spin_wait(unsigned *spins)
{
	if (++*spins < ZS_SPIN_PAUSES)
		cpu_pause();
	else
		sched_yield();
}

/*
 * The CPU this thread runs on, for per-CPU tables (class copies, the page
 * provider's caches).  glibc (2.35+) registers every thread for restartable
 * sequences, and the kernel keeps the rseq area's cpu_id current, so the
 * answer is one load from thread-local memory; sched_getcpu() costs a call
 * and ~15 instructions more on every allocation and free.  Without a
 * registration (an old glibc, GLIBC_TUNABLES=glibc.pthread.rseq=0, valgrind)
 * cpu_id is negative and sched_getcpu answers.  Like sched_getcpu, the
 * answer may be stale by the time it is used: callers only pick a table
 * entry with it, which they lock.  Returns -1 when neither knows.
 */
static inline int current_cpu(void)
{
#if defined(ZS_HAVE_RSEQ)
	if (likely(__rseq_size != 0)) {
		char *tp;
		__asm__("mov %%fs:0, %0" : "=r"(tp)); /* x86-64: the thread pointer */
		int cpu = (int)((const volatile struct rseq *)(tp + __rseq_offset))->cpu_id;
		if (likely(cpu >= 0))
			return cpu;
	}
#endif
	return sched_getcpu();
}

/*
 * A small number per thread, process-wide (common/thread.c), so every file
 * and layer sees the same one: the lowest number no live thread holds, taken
 * on the thread's first ask and given back when it exits, so N live threads
 * hold 0..N-1 however many came before.  Callers reduce it modulo their
 * table (lock shards, handle shards, the first stream a thread tries):
 * threads spread round-robin, and a thread keeps its slot while it lives.
 */
/*
 * Initial-exec: read at a fixed offset from the thread pointer.  In the
 * shared library the default (general-dynamic) model makes every read a
 * call to __tls_get_addr - about 40 instructions an allocate+write+free
 * from Python, which loads libzs.so with dlopen.  A dlopen'd library's
 * initial-exec variables come out of glibc's static TLS surplus (512 bytes
 * kept for this); this one takes 4.
 */
#define ZS_TLS_IE __attribute__((tls_model("initial-exec")))
extern _Thread_local unsigned thread_index_1 ZS_TLS_IE; /* index + 1; 0: not assigned yet */
unsigned thread_index_assign(void);
/*
 * fn runs on an exiting thread just before its number is given back, so a
 * layer that caches something keyed by the number in its own per-thread
 * state (zsmalloc's write-pin slot in a thread's heaps) forgets it while no
 * other thread can hold that number yet.  One hook, set once; NULL: none.
 */
void thread_on_give_back(void (*fn)(void));
static inline unsigned thread_index(void)
{
	unsigned v = thread_index_1;
	if (unlikely(v == 0))
		v = thread_index_assign();
	return v - 1;
}

/*
 * Take one of n busy flags laid out `stride` bytes apart from `first` (a
 * table of compression streams): the first free one from this thread's
 * *hint (a per-layer thread-local, 0 until the thread first asks: its
 * thread number then), spinning over the table and yielding while all are
 * busy.  Returns its index; the hint follows a thread that had to move on,
 * so it tends to find its own again.  Release with an atomic store of 0.
 */
static inline unsigned busy_take(_Atomic int *first, size_t stride, unsigned n, unsigned *hint)
{
	if (unlikely(*hint == 0))
		*hint = thread_index() + 1;
	unsigned start = (*hint - 1) % n;
	for (;;) {
		for (unsigned i = 0; i < n; i++) {
			unsigned k = (start + i) % n;
			_Atomic int *b = (_Atomic int *)(void *)((char *)first + (size_t)k * stride);
			if (!atomic_load_explicit(b, memory_order_relaxed) &&
			    !atomic_exchange_explicit(b, 1, memory_order_acquire)) {
				if (i)
					*hint = k + 1;
				return k;
			}
		}
		sched_yield();
	}
}

/*
 * busy_take over a table whose entries are built on first use (the zram
 * store's and zswap's compression streams): `ready0` is entry 0's built
 * flag, `stride` apart like the busy flags.  An entry taken unbuilt is
 * built by its taker, build(ctx, i) returning 0 or -errno; when that fails
 * (no memory) the taker gives it back and waits for entry 0 instead, which
 * the table's owner built at creation.  So taking an entry never fails.
 */
static inline unsigned busy_take_built(_Atomic int *first, const int *ready0, size_t stride,
					  unsigned n, unsigned *hint,
					  int (*build)(void *ctx, unsigned i), void *ctx)
{
	unsigned i = busy_take(first, stride, n, hint);
	if (likely(*(const int *)(const void *)((const char *)ready0 + (size_t)i * stride)) ||
	    !build(ctx, i))
		return i;
	atomic_store_explicit((_Atomic int *)(void *)((char *)first + (size_t)i * stride), 0,
			      memory_order_release);
	unsigned only = 1; /* a hint for a table of one: entry 0 */
	return busy_take(first, stride, 1, &only);
}

#endif
