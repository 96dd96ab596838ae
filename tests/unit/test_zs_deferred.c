/*
 * Deferred free (seed 001), single-threaded where counts are
 * exact: zs_free_deferred really defers (nothing freed until a flush when
 * there is no worker), zs_free_deferred_flush frees everything enqueued
 * (pages, object counts), the fixed-capacity queue falls back to a
 * synchronous free when full (capacity given, and the default scaled with
 * page size), compaction moves objects that are queued, the background
 * worker drains on its own, destroying a pool with pending handles drains
 * cleanly (ASan/LSan find nothing), checked mode refuses a second
 * deferred free or a zs_free of a queued handle with -EINVAL, and a stream
 * of single deferred frees wakes the worker about once a millisecond, not
 * once a free (its context switches, from /proc/self/task), and a pool at
 * max_pages with its frees queued still allocates (zs_malloc flushes first).
 * A capacity is rounded up to a power of two (at least 16), and without
 * memory for the queue a deferred free is a synchronous one.
 */
#include "testutil.h"
#include "forkcase.h"
#include "zs/zsmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "must.h"

static unsigned char wbuf[65536], rbuf[65536], ebuf[65536];

static struct zs_pool *mk(size_t ps, enum zs_free_mode fm, int checked, size_t cap, int worker)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = ps;
	c.free_mode = fm;
	c.checked = checked;
	c.deferred_capacity = cap;
	c.deferred_worker = worker;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 29;
		memcpy(b + i, &z, n - i < 8 ? n - i : 8);
	}
}

static unsigned long put(struct zs_pool *p, size_t size, uint64_t seed)
{
	unsigned long h = zs_malloc(p, size);
	REQUIRE(!ZS_IS_ERR(h));
	fill(wbuf, size, seed);
	CHECK_EQ(zs_obj_write(p, h, wbuf, size), 0);
	return h;
}

static int ok(struct zs_pool *p, unsigned long h, size_t size, uint64_t seed)
{
	void *m = zs_obj_read_begin(p, h, size, rbuf);
	if (!m)
		return 0;
	fill(ebuf, size, seed);
	int r = !memcmp(m, ebuf, size);
	zs_obj_read_end(p, h, size, m);
	return r;
}

static unsigned long stats_pages(struct zs_pool *p)
{
	unsigned long n = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(p); i++)
		if (!zs_class_stats(p, i, &st, sizeof(st)))
			n += st.pages_used;
	return n;
}

static size_t size_of(int i, size_t ps)
{
	return 1 + ((size_t)i * 2654435761u) % ps;
}

/* No worker: enqueued objects stay until flush; then all are gone. */
static void test_defer_then_flush(void)
{
	enum { N = 3000 };
	static unsigned long h[N];
	for (int fm = 0; fm <= 2; fm++) {
		struct zs_pool *p = mk(4096, (enum zs_free_mode)fm, fm == 1, 0, -1);
		for (int i = 0; i < N; i++)
			h[i] = put(p, size_of(i, 4096), i);
		unsigned long pages = zs_get_total_pages(p);
		for (int i = 0; i < N; i += 2)
			CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		CHECK_EQ(zs_pool_objects(p), N);
		CHECK_EQ(zs_get_total_pages(p), pages);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), N / 2);
		CHECK_EQ(zs_get_total_pages(p), stats_pages(p));
		int bad = 0;
		for (int i = 1; i < N; i += 2)
			bad += !ok(p, h[i], size_of(i, 4096), i);
		CHECK_EQ(bad, 0);
		for (int i = 1; i < N; i += 2)
			CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		/* Flushing an empty queue is a no-op. */
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

/* A full queue frees synchronously: with capacity C and no worker, C stay queued. */
static void test_full_queue_fallback(void)
{
	struct zs_pool *p = mk(4096, ZS_FREE_CLASS_INDEX, 1, 16, -1);
	unsigned long h[100];
	for (int i = 0; i < 100; i++)
		h[i] = put(p, size_of(i, 4096), i);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
	CHECK_EQ(zs_pool_objects(p), 16);
	/* The queued ones are the first 16; the rest are gone (checked: refused now). */
	CHECK_EQ(zs_free(p, h[99]), -EINVAL);
	CHECK_EQ(zs_free(p, h[0]), -EINVAL); /* queued, not free yet: still refused */
	zs_free_deferred_flush(p);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	/* The queue is reusable after a drain. */
	for (int i = 0; i < 40; i++)
		h[i] = put(p, 100, i);
	for (int i = 0; i < 40; i++)
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
	CHECK_EQ(zs_pool_objects(p), 16);
	zs_free_deferred_flush(p);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/*
 * A given capacity is rounded up to a power of two, at least 16 (zsmalloc.h):
 * with no worker, exactly that many frees stay queued, the rest are synchronous.
 */
static void test_capacity_rounding(void)
{
	static const size_t given[] = { 1, 15, 16, 17, 100, 128 };
	static const unsigned long want[] = { 16, 16, 16, 32, 128, 128 };
	static unsigned long h[200];
	for (size_t k = 0; k < sizeof(given) / sizeof(given[0]); k++) {
		struct zs_pool *p = mk(4096, ZS_FREE_POOL_LOCK, 0, given[k], -1);
		for (int i = 0; i < 200; i++) {
			h[i] = zs_malloc(p, 24);
			REQUIRE(!ZS_IS_ERR(h[i]));
		}
		for (int i = 0; i < 200; i++)
			CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		if (zs_pool_objects(p) != want[k])
			fprintf(stderr, "deferred_capacity %zu: %lu queued, want %lu\n", given[k],
				zs_pool_objects(p), want[k]);
		CHECK_EQ(zs_pool_objects(p), want[k]);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

#ifndef SAN_SLOW
/* Address space in use now (VmSize), from /proc/self/statm. */
static size_t vm_bytes(void)
{
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * "Without memory for the queue it frees synchronously" (zsmalloc.h): with
 * the address space capped so that the 256 MiB queue of
 * ZS_MAX_DEFERRED_CAPACITY cannot be had, zs_free_deferred returns 0 and the
 * object is gone at once; with the cap lifted, the next call builds the
 * queue and queues.  Runs in a forked child (the cap is the process's).
 */
static int no_queue_memory(void *arg)
{
	(void)arg;
	struct zs_pool *p = mk(4096, ZS_FREE_POOL_LOCK, 1, ZS_MAX_DEFERRED_CAPACITY, -1);
	unsigned long h[4];
	for (int i = 0; i < 4; i++)
		h[i] = put(p, 100, (uint64_t)i);
	struct rlimit old, rl;
	REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
	rl = old;
	rl.rlim_cur = vm_bytes() + (64u << 20);
	REQUIRE(setrlimit(RLIMIT_AS, &rl) == 0);
	CHECK_EQ(zs_free_deferred(p, h[0]), 0);
	CHECK_EQ(zs_pool_objects(p), 3); /* freed synchronously */
	CHECK_EQ(zs_free(p, h[0]), -EINVAL);
	CHECK_EQ(zs_free_deferred(p, h[1]), 0); /* each call tries again, and frees */
	CHECK_EQ(zs_pool_objects(p), 2);
	REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
	CHECK_EQ(zs_free_deferred(p, h[2]), 0);
	CHECK_EQ(zs_pool_objects(p), 2); /* queued now (no worker) */
	zs_free_deferred_flush(p);
	CHECK_EQ(zs_pool_objects(p), 1);
	CHECK(ok(p, h[3], 100, 3));
	CHECK_EQ(zs_free(p, h[3]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_fail ? 1 : 0;
}
#endif

static void test_no_queue_memory(void)
{
#ifdef SAN_SLOW
	printf("no_queue_memory: skipped under a sanitizer (its shadow needs the address space)\n");
#else
	CHECK_EQ(fc_run("no_queue_memory", 60, no_queue_memory, NULL), 0);
#endif
}

/* The default capacity is the RFC's 128 MiB of page-size objects: 32768 at 4K, 8192 at 16K. */
static void test_default_capacity(void)
{
	static const size_t ps[] = { 4096, 16384 };
	static const long cap[] = { 32768, 8192 };
	static unsigned long h[32768 + 100];
	for (int k = 0; k < 2; k++) {
		struct zs_pool *p = mk(ps[k], ZS_FREE_POOL_LOCK, 0, 0, -1);
		long n = cap[k] + 100;
		for (long i = 0; i < n; i++) {
			h[i] = zs_malloc(p, 24);
			REQUIRE(!ZS_IS_ERR(h[i]));
		}
		for (long i = 0; i < n; i++)
			CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		CHECK_EQ(zs_pool_objects(p), cap[k]);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

/* Queued objects are still objects: compaction may move them; flush frees them where they are. */
static void test_compact_with_pending(void)
{
	enum { N = 8 * 128 };
	static unsigned long h[N];
	for (int checked = 0; checked <= 1; checked++) {
		struct zs_pool *p = mk(4096, ZS_FREE_CLASS_INDEX_UNLOCKED, checked, 0, -1);
		for (int i = 0; i < N; i++)
			h[i] = put(p, 24, i); /* 32-byte class: 8 one-page zspages */
		CHECK_EQ(zs_get_total_pages(p), 8);
		/* i%4: 0 freed now, 1 queued, 2 and 3 kept. */
		for (int i = 0; i < N; i += 4)
			CHECK_EQ(zs_free(p, h[i]), 0);
		for (int i = 1; i < N; i += 4)
			CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		CHECK_EQ(zs_pool_objects(p), N * 3 / 4);
		CHECK_EQ(zs_compact(p), 2); /* 256 free slots = 2 zspages */
		CHECK_EQ(zs_get_total_pages(p), 6);
		if (checked) {
			CHECK_EQ(zs_free_deferred(p, h[1]), -EINVAL); /* still queued after the move */
			CHECK_EQ(zs_free(p, h[5]), -EINVAL);
		}
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), N / 2);
		int bad = 0;
		for (int i = 0; i < N; i++)
			if (i % 4 >= 2)
				bad += !ok(p, h[i], 24, i);
		CHECK_EQ(bad, 0);
		CHECK_EQ(zs_compact(p), 2);
		CHECK_EQ(zs_get_total_pages(p), 4);
		for (int i = 0; i < N; i++)
			if (i % 4 >= 2)
				CHECK_EQ(zs_free(p, h[i]), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

/* The background worker drains without a flush. */
static void test_worker_drains(void)
{
	enum { N = 5000 };
	static unsigned long h[N];
	struct zs_pool *p = mk(16384, ZS_FREE_CLASS_INDEX, 0, 0, 0);
	for (int i = 0; i < N; i++)
		h[i] = put(p, size_of(i, 16384), i);
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
	/* Up to 2 s for the worker; it wakes at least every few ms. */
	for (int t = 0; t < 2000 && zs_pool_objects(p); t++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_free_deferred_flush(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Thread ids of this process, ascending in out[] (at most max); how many. */
static int tids(long *out, int max)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)) && n < max)
		if (e->d_name[0] != '.')
			out[n++] = atol(e->d_name);
	closedir(d);
	return n;
}

/* Voluntary + involuntary context switches of thread tid, or -1. */
static long switches(long tid)
{
	char path[64], line[128];
	snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
	FILE *f = fopen(path, "r");
	long n = 0;
	int seen = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		long v;
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
		    sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1) {
			n += v;
			seen++;
		}
	}
	fclose(f);
	return seen == 2 ? n : -1;
}

/*
 * zsmalloc.h: a stream of deferred frees wakes the worker about once a
 * millisecond, not once a free.  Frees 20 us apart (a region's random faults
 * come about that often); before the gathering the worker woke for every one.
 */
static void test_worker_gathers(void)
{
	enum { N = 3000 };
	static unsigned long h[N];
	long before[64], after[64];
	struct zs_pool *p = mk(4096, ZS_FREE_CLASS_INDEX, 0, 0, 0);
	for (int i = 0; i < N; i++)
		h[i] = put(p, 100 + (size_t)i % 1000, i);
	int n0 = tids(before, 64);
	CHECK_EQ(zs_free_deferred(p, h[0]), 0);   /* starts the worker */
	zs_free_deferred_flush(p);
	int n1 = tids(after, 64);
	long worker = -1;
	for (int i = 0; i < n1 && n0 >= 0; i++) {
		int old = 0;
		for (int j = 0; j < n0; j++)
			old |= before[j] == after[i];
		if (!old)
			worker = after[i];
	}
	long s0 = worker > 0 ? switches(worker) : -1;
	if (s0 < 0) {
		printf("test_worker_gathers: SKIP (the worker's /proc/self/task entry not found)\n");
		for (int i = 1; i < N; i++)
			CHECK_EQ(zs_free(p, h[i]), 0);
		zs_destroy_pool(p);
		return;
	}
	double t0 = now_ms();
	for (int i = 1; i < N; i++) {
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
		for (double t = now_ms(); now_ms() - t < 0.02;)
			;
	}
	double ms = now_ms() - t0;
	long woke = switches(worker) - s0;
	printf("test_worker_gathers: %d deferred frees in %.1f ms, the worker switched %ld times\n",
	       N - 1, ms, woke);
	/* one wake-up and one timed wake a millisecond, with room for preemption */
	CHECK(woke <= (long)(3 * ms) + 20);
	for (int t = 0; t < 2000 && zs_pool_objects(p); t++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	CHECK_EQ(zs_pool_objects(p), 0);
	zs_destroy_pool(p);
}

/* Destroying a pool with queued handles (worker or not) drains them; ASan checks the rest. */
static void test_destroy_pending(void)
{
	for (int worker = -1; worker <= 1; worker += 2) {
		struct zs_pool *p = mk(4096, ZS_FREE_CLASS_INDEX, 1, 64, worker);
		for (int i = 0; i < 500; i++) {
			unsigned long h = put(p, size_of(i, 4096), i);
			if (i % 5)
				CHECK_EQ(zs_free_deferred(p, h), 0);
		}
		zs_destroy_pool(p);
	}
}

static void test_checked_deferred(void)
{
	for (int fm = 0; fm <= 2; fm++) {
		struct zs_pool *p = mk(4096, (enum zs_free_mode)fm, 1, 0, -1);
		unsigned long a = put(p, 500, 1), b = put(p, 4096, 2), c = put(p, 60, 3);
		/* Double deferred free. */
		CHECK_EQ(zs_free_deferred(p, a), 0);
		CHECK_EQ(zs_free_deferred(p, a), -EINVAL);
		/* Deferred, then zs_free. */
		CHECK_EQ(zs_free_deferred(p, b), 0);
		CHECK_EQ(zs_free(p, b), -EINVAL);
		/* Freed, then deferred. */
		CHECK_EQ(zs_free(p, c), 0);
		CHECK_EQ(zs_free_deferred(p, c), -EINVAL);
		/* Bad and foreign handles. */
		long local = 0;
		CHECK_EQ(zs_free_deferred(p, (unsigned long)&local), -EINVAL);
		CHECK_EQ(zs_free_deferred(p, 0x1000), -EINVAL);
		CHECK_EQ(zs_free_deferred(p, a + 3), -EINVAL);
		struct zs_pool *q = mk(4096, (enum zs_free_mode)fm, 1, 0, -1);
		unsigned long qa = put(q, 70, 9);
		CHECK_EQ(zs_free_deferred(p, qa), -EINVAL);
		CHECK(ok(q, qa, 70, 9));
		CHECK_EQ(zs_pool_objects(p), 2);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_pool_objects(p), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		/* After the flush, both are plain freed handles. */
		CHECK_EQ(zs_free(p, a), -EINVAL);
		CHECK_EQ(zs_free_deferred(p, b), -EINVAL);
		CHECK_EQ(zs_pool_objects(q), 1);
		CHECK_EQ(zs_free(q, qa), 0);
		zs_destroy_pool(q);
		zs_destroy_pool(p);
	}
}

/*
 * A pool at max_pages whose frees are all queued: zs_malloc frees the queue
 * and succeeds, as it would have after zs_free; with nothing queued -ENOMEM
 * stands and changes nothing.  Without the worker the queue waits for a
 * flush, so before zs_malloc flushed on -ENOMEM this failed every time.
 */
static void test_limit_with_pending(void)
{
	static const size_t sizes[] = { 3000, 2 * 4096 + 100 };
	for (int worker = -1; worker <= 1; worker += 2) {
		for (unsigned si = 0; si < 2; si++) {
			struct zs_pool_config c;
			zs_pool_config_init(&c);
			c.max_pages = 16;
			c.max_object_size = 4 * 4096;
			c.deferred_worker = worker;
			struct zs_pool *p = must_pool_create(&c);
			REQUIRE(p);
			size_t sz = sizes[si];
			unsigned long h[64];
			int n = 0;
			while (n < 64) {
				unsigned long x = zs_malloc(p, sz);
				if (ZS_IS_ERR(x)) {
					CHECK_EQ(ZS_ERR(x), -ENOMEM);
					break;
				}
				h[n++] = x;
			}
			CHECK(n > 0 && n < 64);
			unsigned long full = zs_get_total_pages(p);
			CHECK(full <= 16);
			/* Nothing queued: refused, and the pool is as it was. */
			CHECK_EQ(ZS_ERR(zs_malloc(p, sz)), -ENOMEM);
			CHECK_EQ(zs_get_total_pages(p), full);
			CHECK_EQ(zs_pool_objects(p), (unsigned long)n);
			for (int i = 0; i < n; i++)
				CHECK_EQ(zs_free_deferred(p, h[i]), 0);
			unsigned long x = zs_malloc(p, sz);
			CHECK(!ZS_IS_ERR(x));
			if (ZS_IS_ERR(x)) {
				fprintf(stderr, "worker %d size %zu: zs_malloc after %d queued frees: %d\n",
					worker, sz, n, ZS_ERR(x));
				zs_destroy_pool(p);
				continue;
			}
			/* Every queued free is done: only the new object is left. */
			CHECK_EQ(zs_pool_objects(p), 1);
			fill(wbuf, sz, 77 + si);
			CHECK_EQ(zs_obj_write(p, x, wbuf, sz), 0);
			CHECK_EQ(zs_free(p, x), 0);
			zs_free_deferred_flush(p);
			CHECK_EQ(zs_get_total_pages(p), 0);
			zs_destroy_pool(p);
		}
	}
}

int main(void)
{
	test_defer_then_flush();
	test_full_queue_fallback();
	test_default_capacity();
	test_capacity_rounding();
	test_no_queue_memory();
	test_compact_with_pending();
	test_worker_drains();
	test_worker_gathers();
	test_destroy_pending();
	test_checked_deferred();
	test_limit_with_pending();
	return tu_done();
}
