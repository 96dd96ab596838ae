/*
 * Every free mode, the two deferring ones above all (page-deferred: only
 * the page release waits for the worker; percpu-deferred: zs_free queues
 * into a per-CPU buffer the worker frees), on one thread, byte-checked:
 *   - a seeded random mix of allocations (small, huge and multi-page with a
 *     packed tail), zs_free and zs_free_deferred, zs_compact and
 *     zs_free_deferred_flush, every live object checked against its
 *     pattern after each compaction and flush and at the end, in plain and
 *     checked mode, with and without the worker; after freeing the rest and
 *     a flush the pool and its page provider hold nothing;
 *   - what each mode promises about when: page-deferred frees the object
 *     and drops the pool's page count inside zs_free, the provider's pages
 *     wait for the worker (a pool with no worker releases them at once);
 *     percpu-deferred frees nothing inside zs_free until a flush when the
 *     worker cannot run (checked here with a worker that is busy: the
 *     buffers hold them), and a pool with no worker frees at once;
 *   - checked mode catches a second free of a queued handle;
 *   - the deferred-free hooks: push sees every deferred handle in the
 *     caller, drain sees the same handles once each after they are freed,
 *     for zs_free_deferred's queue and for percpu-deferred's buffers;
 *     bad arguments and a second setting are refused;
 *   - the settable page-release cost: every released page costs at least
 *     the set busy time, as the release clock sees it, and out-of-range
 *     costs are refused.
 * Seed printed (ZS_SEED reruns one).
 */
#include "testutil.h"
#include "zs/harness.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "must.h"

#define NOBJ 3000
#define PAGE 4096

struct obj {
	unsigned long h;
	size_t size;
	uint64_t seed;
};

static uint64_t g_seed;

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		b[i] = (unsigned char)(seed >> (8 * (i % 8)));
	}
}

static int put(struct zs_pool *p, struct obj *o, size_t size, uint64_t seed)
{
	static unsigned char buf[4 * PAGE];
	o->h = zs_malloc(p, size);
	if (ZS_IS_ERR(o->h)) {
		o->h = 0;
		return 0;
	}
	o->size = size;
	o->seed = seed;
	fill(buf, size, seed);
	return zs_obj_write(p, o->h, buf, size) == 0;
}

static int same(struct zs_pool *p, const struct obj *o)
{
	static unsigned char exp[4 * PAGE], copy[4 * PAGE];
	fill(exp, o->size, o->seed);
	void *m = zs_obj_read_begin(p, o->h, o->size, copy);
	if (!m)
		return 0;
	int ok = !memcmp(m, exp, o->size);
	zs_obj_read_end(p, o->h, o->size, m);
	return ok;
}

static int bad_objects(struct zs_pool *p, const struct obj *o, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++)
		if (o[i].h && !same(p, &o[i]))
			bad++;
	return bad;
}

static size_t provider_pages(struct zs_pool *p)
{
	struct zs_pages_stats st;
	pages_get_stats(p->pages, &st);
	return st.pages_in_use;
}

static struct zs_pool *new_pool(enum zs_free_mode m, int checked, int worker)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.free_mode = m;
	c.checked = checked;
	c.deferred_worker = worker;
	c.max_object_size = 4 * PAGE;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static size_t pick_size(uint64_t r)
{
	switch (r % 10) {
	case 0:
		return 3600 + (r >> 8) % 497;             /* huge class */
	case 1:
		return PAGE + 1 + (r >> 8) % (3 * PAGE - 1); /* multi-page, a tail */
	default:
		return 1 + (r >> 8) % 3000;
	}
}

/* The random mix, byte-checked; returns nothing, CHECKs as it goes. */
static void churn(enum zs_free_mode m, int checked, int worker)
{
	struct zs_pool *p = new_pool(m, checked, worker);
	static struct obj o[NOBJ];
	memset(o, 0, sizeof(o));
	uint64_t s = g_seed ^ ((uint64_t)m << 8 | (uint64_t)checked << 4 | (uint64_t)(worker + 1));
	long frees = 0, deferred = 0, compactions = 0, flushes = 0, bad = 0, errs = 0;
	for (int step = 0; step < 40000; step++) {
		uint64_t r = tu_rand(&s);
		struct obj *x = &o[r % NOBJ];
		if (!x->h) {
			if (!put(p, x, pick_size(r >> 16), tu_rand(&s)))
				errs++;
		} else if ((r >> 40) % 3 == 0) {
			if (!same(p, x))
				bad++;
			int d = (r >> 50) & 1;
			if (d ? zs_free_deferred(p, x->h) : zs_free(p, x->h))
				errs++;
			deferred += d;
			frees++;
			x->h = 0;
		}
		if (step % 4999 == 0) {
			zs_compact(p);
			compactions++;
			bad += bad_objects(p, o, NOBJ);
		}
		if (step % 7001 == 0) {
			zs_free_deferred_flush(p);
			flushes++;
			bad += bad_objects(p, o, NOBJ);
		}
	}
	bad += bad_objects(p, o, NOBJ);
	long live = 0;
	for (int i = 0; i < NOBJ; i++)
		live += o[i].h != 0;
	zs_free_deferred_flush(p);
	CHECK_EQ((long)zs_pool_objects(p), live);
	for (int i = 0; i < NOBJ; i++)
		if (o[i].h) {
			if (i % 2 ? zs_free(p, o[i].h) : zs_free_deferred(p, o[i].h))
				errs++;
			o[i].h = 0;
		}
	zs_free_deferred_flush(p);
	CHECK_EQ(bad, 0);
	CHECK_EQ(errs, 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(provider_pages(p), 0);
	printf("%-15s checked %d worker %2d: %ld frees (%ld deferred), %ld compactions, %ld "
	       "flushes, %ld bad objects, %ld errors\n",
	       zs_free_mode_name(m), checked, worker, frees, deferred, compactions, flushes, bad,
	       errs);
	zs_destroy_pool(p);
}

/* Fill n objects of one class so that freeing them all empties whole zspages. */
static void fill_class(struct zs_pool *p, struct obj *o, int n)
{
	for (int i = 0; i < n; i++)
		REQUIRE(put(p, &o[i], 1000, (uint64_t)i + 1));
}

static void test_page_deferred_timing(void)
{
	static struct obj o[400];
	/* With a worker: the object work and the page count inside zs_free, the pages later. */
	struct zs_pool *p = new_pool(ZS_FREE_PAGE_DEFERRED, 0, 1);
	/* The worker exists from the first release on; hold it in a flush-free state by
	 * freeing all at once and checking the counts the free itself must have set. */
	fill_class(p, o, 400);
	size_t before = provider_pages(p);
	CHECK(before > 0 && zs_get_total_pages(p) == before);
	for (int i = 0; i < 400; i++)
		CHECK_EQ(zs_free(p, o[i].h), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);    /* accounted inside zs_free */
	zs_free_deferred_flush(p);
	CHECK_EQ(provider_pages(p), 0);        /* and released by the flush at the latest */
	zs_destroy_pool(p);

	/* No worker: page-deferred releases at once, as class-unlocked. */
	p = new_pool(ZS_FREE_PAGE_DEFERRED, 0, -1);
	fill_class(p, o, 400);
	for (int i = 0; i < 400; i++)
		CHECK_EQ(zs_free(p, o[i].h), 0);
	CHECK_EQ(provider_pages(p), 0);
	zs_destroy_pool(p);
}

/* A drain hook that blocks the worker until released, so the test sees what is queued. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int gate_entered;

static void blocking_drain(void *ctx, const unsigned long *h, size_t n)
{
	(void)ctx;
	(void)h;
	(void)n;
	atomic_store(&gate_entered, 1);
	pthread_mutex_lock(&gate_lock);
	pthread_mutex_unlock(&gate_lock);
}

static void test_percpu_timing(void)
{
	static struct obj o[400];
	/* No worker: zs_free is synchronous. */
	struct zs_pool *p = new_pool(ZS_FREE_PERCPU_DEFERRED, 0, -1);
	fill_class(p, o, 400);
	for (int i = 0; i < 400; i++)
		CHECK_EQ(zs_free(p, o[i].h), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(provider_pages(p), 0);
	zs_destroy_pool(p);

	/*
	 * With a worker held inside a drain (its hook blocks): frees stay in
	 * the buffers, the objects stay allocated until the flush.
	 */
	p = new_pool(ZS_FREE_PERCPU_DEFERRED, 0, 1);
	struct zs_deferred_hooks hk = { .drain = blocking_drain };
	CHECK_EQ(zs_set_deferred_hooks(p, &hk), 0);
	pthread_mutex_lock(&gate_lock);
	atomic_store(&gate_entered, 0);
	fill_class(p, o, 400);
	CHECK_EQ(zs_free(p, o[0].h), 0);
	/* The worker wakes for the first handle, gathers up to 1 ms, drains it and blocks. */
	while (!atomic_load(&gate_entered))
		sched_yield();
	for (int i = 1; i < 400; i++)
		CHECK_EQ(zs_free(p, o[i].h), 0);
	CHECK_EQ(zs_pool_objects(p), 399); /* queued, not freed: the worker is held */
	CHECK(zs_get_total_pages(p) > 0);
	pthread_mutex_unlock(&gate_lock);
	zs_free_deferred_flush(p);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(provider_pages(p), 0);
	zs_destroy_pool(p);
}

static void test_checked_double_free(void)
{
	for (int m = ZS_FREE_PAGE_DEFERRED; m <= ZS_FREE_PERCPU_DEFERRED; m++) {
		struct zs_pool *p = new_pool((enum zs_free_mode)m, 1, 1);
		unsigned long h = zs_malloc(p, 100);
		REQUIRE(!ZS_IS_ERR(h));
		CHECK_EQ(zs_free(p, h), 0);
		CHECK_EQ(zs_free(p, h), -EINVAL);          /* queued (percpu) or freed: refused */
		CHECK_EQ(zs_free_deferred(p, h), -EINVAL);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_free(p, h), -EINVAL);
		CHECK_EQ(zs_free(p, 12345), -EINVAL);
		CHECK_EQ(zs_pool_objects(p), 0);
		zs_destroy_pool(p);
	}
}

struct hook_log {
	atomic_long pushes, drained;
	atomic_ulong push_sum, drain_sum; /* sums of handles: the same multiset, or not */
	pthread_t caller;
	atomic_int push_off_caller;
};

static void log_push(void *ctx, unsigned long h)
{
	struct hook_log *l = ctx;
	atomic_fetch_add(&l->pushes, 1);
	atomic_fetch_add(&l->push_sum, h);
	if (!pthread_equal(pthread_self(), l->caller))
		atomic_store(&l->push_off_caller, 1);
}

static void log_drain(void *ctx, const unsigned long *h, size_t n)
{
	struct hook_log *l = ctx;
	atomic_fetch_add(&l->drained, (long)n);
	for (size_t i = 0; i < n; i++)
		atomic_fetch_add(&l->drain_sum, h[i]);
}

static void test_hooks(enum zs_free_mode m, int use_deferred_call)
{
	struct zs_pool *p = new_pool(m, 0, 1);
	struct hook_log l = { .caller = pthread_self() };
	struct zs_deferred_hooks hk = { log_push, log_drain, &l };
	CHECK_EQ(zs_set_deferred_hooks(NULL, &hk), -EINVAL);
	CHECK_EQ(zs_set_deferred_hooks(p, NULL), -EINVAL);
	CHECK_EQ(zs_set_deferred_hooks(p, &hk), 0);
	CHECK_EQ(zs_set_deferred_hooks(p, &hk), -EBUSY);
	uint64_t s = g_seed + 99;
	enum { N = 2000 };
	long queued = 0;
	for (int i = 0; i < N; i++) {
		unsigned long h = zs_malloc(p, 1 + tu_rand(&s) % 3000);
		REQUIRE(!ZS_IS_ERR(h));
		CHECK_EQ(use_deferred_call ? zs_free_deferred(p, h) : zs_free(p, h), 0);
		queued++;
	}
	zs_free_deferred_flush(p);
	printf("hooks, %s via %s: %ld pushes, %ld drained\n", zs_free_mode_name(m),
	       use_deferred_call ? "zs_free_deferred" : "zs_free", (long)l.pushes, (long)l.drained);
	/* Each queued once (no fallback here: the buffers outnumber 2000 handles). */
	CHECK_EQ(l.pushes, queued);
	CHECK_EQ(l.drained, queued);
	CHECK(l.push_sum == l.drain_sum);
	CHECK_EQ(l.push_off_caller, 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	zs_destroy_pool(p);
}

static void test_release_cost(void)
{
	static struct obj o[400];
	struct zs_pool *p = new_pool(ZS_FREE_CLASS_INDEX_UNLOCKED, 0, -1);
	fill_class(p, o, 400);
	size_t pages = provider_pages(p);
	CHECK_EQ(zs_pages_set_release_cost_ns(ZS_PAGES_RELEASE_COST_MAX_NS + 1), -EINVAL);
	CHECK_EQ(zs_pages_set_release_cost_ns(20000), 0);
	CHECK_EQ(zs_pages_release_cost_ns(), 20000);
	zs_pages_release_timing(1, NULL);
	for (int i = 0; i < 400; i++)
		CHECK_EQ(zs_free(p, o[i].h), 0);
	struct zs_pages_release_time rt;
	zs_pages_release_timing(0, &rt);
	CHECK_EQ(zs_pages_set_release_cost_ns(0), 0);
	printf("release cost 20000 ns: %llu pages in %llu calls, %.2f ms\n",
	       (unsigned long long)rt.pages, (unsigned long long)rt.calls, (double)rt.ns / 1e6);
	CHECK_EQ(rt.pages, pages);
	CHECK(rt.calls > 0 && rt.calls <= pages);
	CHECK(rt.ns >= (uint64_t)pages * 20000);
	zs_destroy_pool(p);
}

int main(void)
{
	g_seed = tu_seed("test_zs_free_modes");
	for (int m = 0; m < ZS_FREE_MODE_COUNT; m++)
		for (int checked = 0; checked < 2; checked++) {
			churn((enum zs_free_mode)m, checked, 1);
			if (m >= ZS_FREE_PAGE_DEFERRED)
				churn((enum zs_free_mode)m, checked, -1);
		}
	test_page_deferred_timing();
	test_percpu_timing();
	test_checked_double_free();
	test_hooks(ZS_FREE_PERCPU_DEFERRED, 0);
	test_hooks(ZS_FREE_PERCPU_DEFERRED, 1);
	test_hooks(ZS_FREE_CLASS_INDEX, 1);
	test_release_cost();
	return tu_done();
}
