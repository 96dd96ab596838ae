/*
 * Fork-per-case harness shared by the region's reproducer and stress tests
 * (test_repro_*, test_mt_repro_*, test_mt_region_stress): the pieces each of
 * them used to carry its own copy of, kept in one place so the HANG/CRASH
 * reports and the skip rule read the same in every test.
 *
 *   fc_run()          run one case in a forked child under a watchdog: the
 *                     parent kills it after timeout_s (HANG), reports a
 *                     signal (CRASH) or a non-zero exit, and prints
 *                     "ok   NAME (S s)" or "FAIL NAME: ..."; the child arms
 *                     alarm() as a backstop should the parent die first.
 *   fc_skip_without_uffd()  exit 77 (ctest skip) with a SKIP line when
 *                     userfaultfd is not available for zs_region.
 *   fc_xorshift*()    the xorshift64 page generators (incompressible bytes:
 *                     stored huge, written back).
 *   fc_sigaction()    install a plain sa_handler with empty mask.
 *   SAN_SLOW          defined under ASan/TSan (gcc or clang), for longer
 *                     timeouts.
 *
 * Pass/fail counting and the closing "N passed, N failed" line stay with
 * testutil.h (tu_pass, tu_fail, tu_done): a case is one pass or one fail.
 */
#ifndef ZS_FORKCASE_H
#define ZS_FORKCASE_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zs/region.h"

#include "sanitizer.h"
#if TU_SANITIZED
#define SAN_SLOW 1
#endif

/* One xorshift64 step (async-signal-safe: usable in a signal handler). */
static inline uint64_t fc_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* n bytes, one per xorshift64 step from state x (the low byte of each). */
static inline void fc_xorshift_fill(unsigned char *b, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)fc_xorshift(&x);
}

/* n bytes (a multiple of 8), one whole 64-bit word per xorshift64 step. */
static inline void fc_xorshift_fill64(unsigned char *b, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i += 8) {
		fc_xorshift(&x);
		memcpy(b + i, &x, 8);
	}
}

static inline void fc_sigaction(int sig, void (*handler)(int), int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = flags;
	sigaction(sig, &sa, NULL);
}

/* zs_region needs userfaultfd: without it the test cannot run here (ctest: skipped). */
static inline void fc_skip_without_uffd(void)
{
	char err[512];
	if (!zs_region_available(err, sizeof err)) {
		printf("SKIP: %s\n", err);
		exit(77);
	}
}

/*
 * Run fn in a forked child with its stderr captured into buf (NUL-terminated,
 * at most cap - 1 bytes); returns the wait status.  alarm_s > 0 arms alarm()
 * in the child, for a check that fails by not firing.  The death tests
 * (test_debug_asserts, test_zs_lockorder, test_zram_lockorder) share it.
 */
static inline int fc_capture(void (*fn)(void), char *buf, size_t cap, unsigned alarm_s)
{
	int pfd[2], st;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	fflush(NULL);
	if (pipe(pfd) || (pid = fork()) < 0) {
		perror("fc_capture");
		exit(1);
	}
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 2);
		if (alarm_s)
			alarm(alarm_s);
		fn();
		_exit(0);
	}
	close(pfd[1]);
	while (n + 1 < cap && (r = read(pfd[0], buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(pfd[0]);
	if (waitpid(pid, &st, 0) != pid) {
		perror("fc_capture: waitpid");
		exit(1);
	}
	return st;
}

/*
 * Run fn(arg) in a forked child; its return value is the child's exit status.
 * The parent polls every 10 ms and kills the child after timeout_s (HANG);
 * the child arms alarm(alarm_s) in case the parent is gone.  where, when not
 * NULL, is memory shared with the child naming what it is doing: the HANG
 * line ends with " in: WHERE" ("?" while empty).  0: passed; 1: failed, the
 * reason printed.
 */
static inline int fc_run_ex(const char *name, int timeout_s, unsigned alarm_s, const char *where,
			    int (*fn)(void *), void *arg)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(alarm_s);
		int rc = fn(arg);
		fflush(stdout);
		_exit(rc);
	}
	if (pid < 0) {
		printf("FAIL %s: fork: %s\n", name, strerror(errno));
		return 1;
	}
	int st = 0;
	for (int ms = 0;; ms += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (ms >= timeout_s * 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			printf("FAIL %s: HANG: not finished after %d s (watchdog killed it)", name,
			       timeout_s);
			if (where)
				printf(" in: %s", where[0] ? where : "?");
			printf("\n");
			return 1;
		}
		usleep(10000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (WIFSIGNALED(st)) {
		printf("FAIL %s: CRASH: killed by signal %d (%s)\n", name, WTERMSIG(st),
		       strsignal(WTERMSIG(st)));
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("FAIL %s: exit %d (%.2f s)\n", name, WEXITSTATUS(st), s);
		return 1;
	}
	printf("ok   %s (%.2f s)\n", name, s);
	return 0;
}

/* fc_run_ex with the usual backstop: the child's alarm 5 s after the watchdog. */
static inline int fc_run(const char *name, int timeout_s, int (*fn)(void *), void *arg)
{
	return fc_run_ex(name, timeout_s, (unsigned)timeout_s + 5, NULL, fn, arg);
}

#endif
