/*
 * Blocking every blockable signal around library work that must not be
 * interrupted by an application signal handler.  Why: a region's memory is
 * served by fault handlers that read and free in the store's pool
 * (src/region/region.c, "Lock order"); a signal handler that touches region
 * memory while its thread owns region pages or holds one of the store's or
 * pool's locks would wait for a fault that waits for that very thread.
 *
 * Nesting costs nothing: a per-thread depth makes only the outermost guard
 * call pthread_sigmask (two system calls), and the library's own threads,
 * which run with every signal blocked, mark themselves so they never call it
 * (signals_blocked_thread).  Used only by calls that do far more than two
 * system calls' work, or on stores that ask for it (zs_zram_block_signals);
 * never on a plain allocation path.
 */
#ifndef ZS_COMMON_SIGBLOCK_H
#define ZS_COMMON_SIGBLOCK_H

#include <pthread.h>
#include <signal.h>

extern _Thread_local unsigned sig_depth;

struct zs_sigguard {
	sigset_t old;
	int masked; /* this guard changed the mask */
};

static inline void signals_block(struct zs_sigguard *g)
{
	g->masked = 0;
	if (sig_depth++ == 0) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &g->old);
		g->masked = 1;
	}
}

static inline void signals_restore(struct zs_sigguard *g)
{
	sig_depth--;
	if (g->masked)
		pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* A library thread started with every signal blocked: guards on it are free. */
static inline void signals_blocked_thread(void)
{
	sig_depth = 1;
}

#endif
