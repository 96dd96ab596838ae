/*
 * An LD_PRELOAD probe that says which shared object asks glibc malloc for
 * memory in a program it cannot rebuild (db_bench with the RocksDB plugin):
 * malloc, calloc, realloc, aligned allocations and C++ operator new are
 * counted by the return address of their caller, and at exit the counts and
 * bytes are summed per object (libzs.so, libzs_rocksdb.so, librocksdb,
 * libstdc++...), the plugin's and libzs's call sites are listed by symbol,
 * and glibc's malloc_stats() gives each arena's size.  A thread that never
 * allocates (so it takes no arena) samples RSS and mallinfo2() every 100 ms
 * and keeps the sample at peak RSS: how much of the peak is glibc's heap,
 * how much of that heap is in use, and how much is free but held.  It
 * answers whether the secondary cache's own heap use can explain a
 * process's growth.
 * Build: cc -O2 -shared -fPIC -o malloc_callers.so bench/probes/malloc_callers.c  -ldl -lpthread
 * Use:   LD_PRELOAD="plugin.so:./malloc_callers.so" db_bench ...   (report on stderr)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* glibc's own entry points: calling them needs no dlsym, which itself allocates. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define SLOTS (1u << 16)
static _Atomic(uintptr_t) site[SLOTS];
static _Atomic(uint64_t) calls[SLOTS], bytes[SLOTS];
static _Atomic(uint64_t) lost; /* calls whose site did not fit in the table */

static void count(void *ra, size_t n)
{
	uintptr_t a = (uintptr_t)ra;
	uint32_t h = (uint32_t)((a * 0x9E3779B97F4A7C15ull) >> 48) & (SLOTS - 1);

	for (unsigned i = 0; i < 64; i++, h = (h + 1) & (SLOTS - 1)) {
		uintptr_t cur = atomic_load_explicit(&site[h], memory_order_relaxed);

		if (cur == 0) {
			uintptr_t zero = 0;

			if (!atomic_compare_exchange_strong(&site[h], &zero, a) && zero != a)
				continue;
			cur = a;
		}
		if (cur == a) {
			atomic_fetch_add_explicit(&calls[h], 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&bytes[h], n, memory_order_relaxed);
			return;
		}
	}
	atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
}

#define RA __builtin_extract_return_addr(__builtin_return_address(0))

void *malloc(size_t n)
{
	count(RA, n);
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	count(RA, k * n);
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	count(RA, n);
	return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	count(RA, n);
	p = __libc_memalign(align, n);
	if (!p)
		return 12; /* ENOMEM */
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	count(RA, n);
	return __libc_memalign(align, n);
}

/* operator new(size_t), new[](size_t), and their align_val_t forms: the caller of new is the site. */
void *_Znwm(size_t n)
{
	count(RA, n);
	return __libc_malloc(n ? n : 1);
}

void *_Znam(size_t n)
{
	count(RA, n);
	return __libc_malloc(n ? n : 1);
}

void *_ZnwmSt11align_val_t(size_t n, size_t align)
{
	count(RA, n);
	return __libc_memalign(align, n ? n : 1);
}

struct sample {
	size_t rss, heap, mmapped, in_use, free_held;
	double t;
};
static struct sample peak, last;
static size_t heap_max;
static struct timespec t0;

static size_t rss_now(void)
{
	char buf[96];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	unsigned long size = 0, res = 0;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	sscanf(buf, "%lu %lu", &size, &res);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void *sampler(void *arg)
{
	(void)arg;
	for (;;) {
		struct mallinfo2 mi = mallinfo2();
		struct timespec now;
		struct sample s;

		clock_gettime(CLOCK_MONOTONIC, &now);
		s.rss = rss_now();
		s.heap = mi.arena;
		s.mmapped = mi.hblkhd;
		s.in_use = mi.uordblks;
		s.free_held = mi.fordblks;
		s.t = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		if (s.rss > peak.rss)
			peak = s;
		if (s.heap > heap_max)
			heap_max = s.heap;
		last = s;
		usleep(100000);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&t, NULL, sampler, NULL);
	pthread_detach(t);
}

struct per_obj {
	const char *name;
	uint64_t calls, bytes;
};

static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path ? path : "?";
}

__attribute__((destructor)) static void report(void)
{
	static struct per_obj objs[64];
	unsigned nobj = 0;
	uint64_t total = 0;

	for (unsigned h = 0; h < SLOTS; h++) {
		uintptr_t a = atomic_load(&site[h]);
		Dl_info di;
		const char *name;
		unsigned j;

		if (!a)
			continue;
		name = dladdr((void *)a, &di) ? base(di.dli_fname) : "?";
		total += calls[h];
		if (strstr(name, "libzs"))
			fprintf(stderr, "malloc_callers: site %s %s+%#lx: %llu calls, %llu bytes\n", name,
				di.dli_sname ? di.dli_sname : "?",
				(unsigned long)(a - (uintptr_t)(di.dli_saddr ? di.dli_saddr : di.dli_fbase)),
				(unsigned long long)calls[h], (unsigned long long)bytes[h]);
		for (j = 0; j < nobj && strcmp(objs[j].name, name); j++)
			;
		if (j == nobj && nobj < 64)
			objs[nobj++].name = name;
		if (j < 64) {
			objs[j].calls += calls[h];
			objs[j].bytes += bytes[h];
		}
	}
	for (unsigned j = 0; j < nobj; j++)
		fprintf(stderr, "malloc_callers: object %s: %llu calls (%.2f%%), %llu bytes\n", objs[j].name,
			(unsigned long long)objs[j].calls, total ? 100.0 * objs[j].calls / total : 0.0,
			(unsigned long long)objs[j].bytes);
	fprintf(stderr, "malloc_callers: total %llu calls, %llu not placed\n", (unsigned long long)total,
		(unsigned long long)atomic_load(&lost));
	fprintf(stderr, "malloc_callers: at peak RSS %.1f MiB (t=%.1f s): heap (all arenas) %.1f MiB, "
		"in use %.1f MiB, free but held %.1f MiB, mmapped chunks %.1f MiB; largest heap seen %.1f MiB; "
		"last sample (t=%.1f s): RSS %.1f, heap %.1f, in use %.1f MiB\n", peak.rss / 1048576.0, peak.t,
		peak.heap / 1048576.0, peak.in_use / 1048576.0, peak.free_held / 1048576.0,
		peak.mmapped / 1048576.0, heap_max / 1048576.0, last.t, last.rss / 1048576.0,
		last.heap / 1048576.0, last.in_use / 1048576.0);
	malloc_stats();
}
