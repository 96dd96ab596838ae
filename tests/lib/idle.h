/*
 * Helpers shared by the idle-memory tests (test_idle_*.c,
 * test_mt_idle_*.c).  Their point is that memory goes back while a program
 * makes no call, so RSS is read straight from /proc/self/statm here, not
 * with zs_process_rss (no libzs call may run between a free-all and the
 * reading), and the page provider's purge thread is found by its name
 * ("zs-purge") in /proc/self/task, as a user would see it.
 */
#ifndef ZS_TESTS_IDLE_H
#define ZS_TESTS_IDLE_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Under TSan RSS is meaningless (shadow memory): only thread checks are made there. */
#include "sanitizer.h"
#define IDLE_TSAN TU_TSAN
#define IDLE_RSS_MEANINGFUL (!IDLE_TSAN)

#define IDLE_MIB ((size_t)1 << 20)

static inline size_t idle_rss(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return 0;
	int got = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	return got == 2 ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* MiB of b above a (negative when below). */
static inline double idle_mib(size_t b, size_t a)
{
	return ((double)b - (double)a) / (double)IDLE_MIB;
}

/* Threads of this process named `name`; -1 if /proc/self/task cannot be read. */
static inline int idle_threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* ended meanwhile */
		if (fgets(comm, sizeof comm, f)) {
			comm[strcspn(comm, "\n")] = 0;
			n += strcmp(comm, name) == 0;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

static inline int idle_purge_threads(void)
{
	return idle_threads_named("zs-purge");
}

/* The purge thread's tid, or 0. */
static inline long idle_purge_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	long tid = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && !tid) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f) && strncmp(comm, "zs-purge", 8) == 0)
			tid = strtol(e->d_name, NULL, 10);
		fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

/* Sleep ms milliseconds of wall time (a signal does not cut it short). */
static inline void idle_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Idle until RSS is at most `limit` and the purge thread has ended: at least
 * min_ms (the documented time, 1.5 s = about twice the 500 ms decay), then
 * polling every 50 ms up to max_ms.  Returns the ms idled.  A quiet machine
 * is done at min_ms; under CI's load (other tests and builds on the same
 * two CPUs) the purge thread's release of ~130 MiB can take longer, and a
 * fixed 1.5 s failed there (test_idle_pool, clang build at load 10+).
 * Nothing here calls into libzs: what returns the memory is the purge
 * thread alone.  bench_release --idle measures the time on a quiet machine.
 */
static inline unsigned idle_wait(size_t limit, unsigned min_ms, unsigned max_ms)
{
	unsigned t = min_ms;

	idle_sleep_ms(min_ms);
	while (t < max_ms && (idle_rss() > limit || idle_purge_threads() > 0)) {
		idle_sleep_ms(50);
		t += 50;
	}
	return t;
}

/*
 * A page that lz4 compresses to about half: `random` bytes of xorshift
 * noise, then a repeating word.  Different for every (seed, index).
 */
static inline void idle_fill_page(unsigned char *b, size_t n, size_t random, uint64_t x)
{
	x = x * 0x9E3779B97F4A7C15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		if (i < random) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			b[i] = (unsigned char)x;
		} else {
			b[i] = (unsigned char)(i * 7);
		}
	}
}

#endif
