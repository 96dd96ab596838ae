/*
 * The signal-handler deadlock reproducer as a test:
 * a signal handler that reads region memory must not deadlock the region.
 *
 *   compact  the handler runs on a thread inside zs_region_release (which
 *            holds the store pool's read lock while it frees objects) and
 *            reads a paged-out page, while another thread compacts the
 *            store: the compactor's pending write lock blocked the fault
 *            handler's read lock, and the signalled thread never left its
 *            handler (the defect: "HANG").
 *   self     no compactor; the handler reads a page of the range being
 *            released by its own thread (the thread's own claim).
 *
 * A releaser thread writes, pages out and releases pages [0, NP/2) in a
 * loop; a pager keeps [NP/2, NP) paged out; main sends the releaser SIGUSR1
 * every millisecond.  Every byte the handler reads is checked: a page of the
 * upper half must hold its fill byte, a page of the released half its fill
 * byte or zero.  The child declares a hang when the releaser makes no
 * progress for HANG_S seconds (it prints the progress counters); the parent
 * kills a child that does not finish (watchdog).  Runs ZS_SIG_SECONDS
 * (default 3) seconds per mode.  Exit 77 without userfaultfd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"
#include "zs/region.h"

#define PG 4096
#define NP 1024

#ifdef SAN_SLOW
#define HANG_S 8
#else
#define HANG_S 4
#endif

static struct zs_region *r;
static unsigned char *a;
static atomic_int stop, self_mode;
static atomic_ulong progress, sigs, sig_reads, sig_wrong, pager_rounds, compactions;
static atomic_int rel_phase;   /* what the releaser is doing: for the hang report */
static const char *phase_name[] = { "writing", "pageout", "release", "idle" };

static void on_sig(int s)
{
	(void)s;
	int e = errno;
	static _Thread_local uint64_t x = 88172645463325252ULL;
	fc_xorshift(&x);
	size_t p = (atomic_load_explicit(&self_mode, memory_order_relaxed) ? 0 : NP / 2) +
		   x % (NP / 2);
	unsigned char v = ((volatile unsigned char *)a)[p * PG + (x >> 32) % 64];
	unsigned char want = (unsigned char)(p + 1);
	atomic_fetch_add_explicit(&sigs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sig_reads, 1, memory_order_relaxed);
	if (v != want && !(p < NP / 2 && v == 0))
		atomic_fetch_add_explicit(&sig_wrong, 1, memory_order_relaxed);
	errno = e;
}

static void *releaser(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		atomic_store(&rel_phase, 0);
		for (int i = 0; i < NP / 2; i++)
			memset(a + (size_t)i * PG, i + 1, 64);   /* not same-filled */
		atomic_store(&rel_phase, 1);
		zs_region_pageout(r, a, NP / 2 * PG);
		atomic_store(&rel_phase, 2);
		zs_region_release(r, a, NP / 2 * PG);   /* frees objects: pool read lock */
		atomic_store(&rel_phase, 3);
		atomic_fetch_add(&progress, 1);
	}
	return NULL;
}

static void *pager(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		zs_region_pageout(r, a + NP / 2 * PG, NP / 2 * PG);
		atomic_fetch_add(&pager_rounds, 1);
		usleep(1000);
	}
	return NULL;
}

static void *compactor(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		zs_zram_compact(zs_region_store(r));
		atomic_fetch_add(&compactions, 1);
	}
	return NULL;
}

static void report(const char *what)
{
	printf("  %s: releaser rounds %lu (now %s), signals handled %lu, handler reads %lu, "
	       "wrong %lu, pager rounds %lu, compactions %lu\n",
	       what, atomic_load(&progress), phase_name[atomic_load(&rel_phase)],
	       atomic_load(&sigs), atomic_load(&sig_reads), atomic_load(&sig_wrong),
	       atomic_load(&pager_rounds), atomic_load(&compactions));
	fflush(stdout);
}

static int child(int self, int secs)
{
	struct zs_region_config c;
	char err[512];
	atomic_store(&self_mode, self);
	zs_region_config_init(&c);
	c.size = NP * PG;
	if (zs_region_create(&c, &r, err, sizeof err)) {
		printf("  FAIL create: %s\n", err);
		return 1;
	}
	a = zs_region_addr(r);
	for (int i = 0; i < NP; i++)
		memset(a + (size_t)i * PG, i + 1, 64);
	fc_sigaction(SIGUSR1, on_sig, SA_RESTART);
	pthread_t t1, t2, t3;
	pthread_create(&t1, NULL, releaser, NULL);
	pthread_create(&t2, NULL, pager, NULL);
	if (!self)
		pthread_create(&t3, NULL, compactor, NULL);
	unsigned long last = 0, sent = 0;
	struct timespec t0, now, lastp;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	lastp = t0;
	for (;;) {
		pthread_kill(t1, SIGUSR1);
		sent++;
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		unsigned long p = atomic_load(&progress);
		if (p != last) {
			last = p;
			lastp = now;
		} else if (now.tv_sec - lastp.tv_sec >= HANG_S) {
			report("HANG");
			printf("  FAIL HANG: the releaser made no progress for %d s (%lu signals sent)\n",
			       HANG_S, sent);
			fflush(stdout);
			_exit(1);
		}
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >=
		    secs * 1000L)
			break;
	}
	atomic_store(&stop, 1);
	/* joins with a deadline: a thread stuck in the region is a hang, reported as such */
	pthread_t *ts[3] = { &t1, &t2, self ? NULL : &t3 };
	const char *tn[3] = { "releaser", "pager", "compactor" };
	for (int i = 0; i < 3; i++) {
		if (!ts[i])
			continue;
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += HANG_S;
		if (pthread_timedjoin_np(*ts[i], NULL, &dl)) {
			report("HANG");
			printf("  FAIL HANG: the %s thread did not finish within %d s of the stop\n",
			       tn[i], HANG_S);
			fflush(stdout);
			_exit(1);
		}
	}
	printf("  %lu signals sent\n", sent);
	report("no hang");
	int fail = 0;
	if (atomic_load(&sig_wrong)) {
		printf("  FAIL the handler read %lu wrong bytes\n", atomic_load(&sig_wrong));
		fail = 1;
	}
	if (atomic_load(&progress) == 0 || atomic_load(&sigs) == 0) {
		printf("  FAIL nothing ran (rounds %lu, signals %lu)\n", atomic_load(&progress),
		       atomic_load(&sigs));
		fail = 1;
	}
	/* still consistent: every page of the upper half holds its bytes */
	int bad = 0;
	for (int i = NP / 2; i < NP; i++)
		bad += a[(size_t)i * PG] != (unsigned char)(i + 1);
	if (bad) {
		printf("  FAIL %d pages of the paged-out half lost their bytes\n", bad);
		fail = 1;
	}
	zs_region_destroy(r);
	return fail;
}

struct mode {
	int self, secs;
};

static int in_child(void *p)
{
	const struct mode *m = p;
	return child(m->self, m->secs);
}

static int run_mode(int self, int secs)
{
	const char *name = self ? "self" : "compact";
	int limit = secs + 2 * HANG_S + 10;
	struct mode m = { self, secs };
	printf("mode %s (%d s):\n", name, secs);
	return fc_run(name, limit, in_child, &m);
}

int main(int argc, char **argv)
{
	fc_skip_without_uffd();
	const char *e = getenv("ZS_SIG_SECONDS");
	int secs = e ? atoi(e) : 3;
	if (secs < 1)
		secs = 1;
	for (int self = 0; self <= 1; self++) {
		if (argc > 1 && strcmp(argv[1], self ? "self" : "compact"))
			continue;
		run_mode(self, secs) ? tu_fail++ : tu_pass++;
	}
	return tu_done();
}
