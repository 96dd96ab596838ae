/*
 * Class shards (zs_pool_config.class_shards): each size class copied per
 * CPU so threads on different CPUs allocate without sharing a lock or a
 * zspage.  Checks what a user relies on: allocations on different CPUs
 * really land in different zspages, objects stay byte-exact under
 * concurrent alloc/write/read/free/deferred free/compaction with frees on
 * other CPUs than the allocation, stats sum the copies like one kernel
 * class, the pool drains to 0 pages, bad values are EINVAL, and a copy
 * costs memory only once allocated from, and at max_pages one copy's free
 * slots serve another's CPU.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "common/hints.h"
#include "testutil.h"
#include "zs/harness.h"
#include "zs/zsmalloc.h"
#include "must.h"

#include "sanitizer.h"
#define RSS_MEANINGFUL (!TU_SANITIZED) /* a sanitizer's shadow memory moves RSS on its own */

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static struct zs_pool *make(unsigned shards, int mode, int checked)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.class_shards = shards;
	cfg.free_mode = mode;
	cfg.checked = checked;
	return must_pool_create(&cfg);
}

static void test_config(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.class_shards = ZS_MAX_CLASS_SHARDS + 1;
	errno = 0;
	CHECK_POOL_REFUSED(&cfg, "class_shards");
	/* 64 KiB pages with 8-byte classes: 8189 classes, no room for a second copy. */
	cfg.class_shards = 2;
	cfg.page_size = 65536;
	cfg.class_delta = 8;
	errno = 0;
	CHECK_POOL_REFUSED(&cfg, "class_shards 2");
	cfg.class_shards = 1;
	struct zs_pool *p = must_pool_create(&cfg);
	CHECK(p != NULL);
	zs_destroy_pool(p);
	zs_pool_config_init(&cfg);
	cfg.class_shards = 32; /* 4 KiB pages: 255 classes x 32 fits */
	p = must_pool_create(&cfg);
	CHECK(p != NULL);
	CHECK_EQ(zs_pool_class_shards(p), 32);
	zs_destroy_pool(p);
	/* AUTO: one copy per online CPU, within the limits. */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = cpus > 1 ? (unsigned)cpus : 1;
	if (want > 32) /* 4 KiB pages with the kernel's delta: 8192 / 255 classes */
		want = 32;
	cfg.class_shards = ZS_CLASS_SHARDS_AUTO;
	p = must_pool_create(&cfg);
	CHECK(p != NULL);
	if (p)
		CHECK_EQ(zs_pool_class_shards(p), want);
	zs_destroy_pool(p);
	/* AUTO where no second copy fits (64 KiB pages, 8-byte classes): 1, not EINVAL. */
	cfg.page_size = 65536;
	cfg.class_delta = 8;
	p = must_pool_create(&cfg);
	CHECK(p != NULL);
	if (p)
		CHECK_EQ(zs_pool_class_shards(p), 1);
	zs_destroy_pool(p);
	zs_pool_config_init(&cfg);
	p = must_pool_create(&cfg);
	CHECK(p && zs_pool_class_shards(p) == 1); /* default: the kernel's layout */
	zs_destroy_pool(p);
}

/* Two objects of one class from two CPUs: one zspage unsharded, two sharded. */
struct one_arg {
	struct zs_pool *pool;
	int cpu;
	unsigned long h;
};
static void *alloc_on(void *a)
{
	struct one_arg *o = a;
	if (pin(o->cpu))
		o->h = 0;
	else
		o->h = zs_malloc(o->pool, 1000);
	return NULL;
}

static void test_placement(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("placement: skipped (one CPU)\n");
		return;
	}
	for (unsigned shards = 1; shards <= 2; shards++) {
		struct zs_pool *p = make(shards, ZS_FREE_CLASS_INDEX_UNLOCKED, 1);
		REQUIRE(p);
		struct one_arg a[2] = { { p, 0, 0 }, { p, 1, 0 } };
		for (int i = 0; i < 2; i++) { /* one after the other: placement, not a race */
			pthread_t t;
			REQUIRE(!pthread_create(&t, NULL, alloc_on, &a[i]));
			pthread_join(t, NULL);
		}
		CHECK(a[0].h && !ZS_IS_ERR(a[0].h) && a[1].h && !ZS_IS_ERR(a[1].h));
		int idx = zs_lookup_class_index(p, 1000 + 8);
		struct zs_class_stats st;
		CHECK_EQ(zs_class_stats(p, idx, &st, sizeof(st)), 0);
		CHECK_EQ(st.obj_used, 2);
		/* 1000-byte objects pack several per zspage: two zspages only if the copies differ. */
		CHECK_EQ(st.obj_allocated, shards * st.objs_per_zspage);
		CHECK_EQ(zs_get_total_pages(p), shards * st.pages_per_zspage);
		/* A free from a third CPU (or either) finds the object's own copy. */
		CHECK_EQ(zs_free(p, a[1].h), 0);
		CHECK_EQ(zs_free(p, a[0].h), 0);
		CHECK_EQ(zs_free(p, a[0].h), -EINVAL); /* checked: double free */
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

#define NT 4
#define SLOTS 2048
struct worker {
	struct zs_pool *pool;
	int id;
	uint64_t seed;
	unsigned long *h; /* shared table: each worker frees others' objects too */
	atomic_int *owner;
	int bad;
};
static atomic_int stop;

static void fill(unsigned char *b, size_t n, unsigned long tag)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(tag * 131 + i);
}

static void *churn(void *arg)
{
	struct worker *w = arg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pin((int)(w->id % (ncpu > 0 ? ncpu : 1)));
	unsigned char buf[4096], tmp[4096];
	for (int op = 0; op < 40000; op++) {
		int s = (int)(tu_rand(&w->seed) % SLOTS);
		int expect = 0;
		/* Claim the slot so one worker at a time touches it. */
		if (!atomic_compare_exchange_strong(&w->owner[s], &expect, w->id + 1))
			continue;
		unsigned long h = w->h[s];
		if (!h) {
			size_t len = tu_rand(&w->seed) % 3600 + 1;
			h = zs_malloc(w->pool, len);
			if (ZS_IS_ERR(h)) {
				w->bad++;
			} else {
				fill(buf, len, h);
				if (zs_obj_write(w->pool, h, buf, len))
					w->bad++;
				w->h[s] = h;
				w->h[SLOTS + s] = len;
			}
		} else {
			size_t len = w->h[SLOTS + s];
			fill(buf, len, h);
			void *m = zs_obj_read_begin(w->pool, h, len, tmp);
			if (!m || memcmp(m, buf, len))
				w->bad++;
			if (m)
				zs_obj_read_end(w->pool, h, len, m);
			int r = (tu_rand(&w->seed) & 1) ? zs_free(w->pool, h) : zs_free_deferred(w->pool, h);
			if (r)
				w->bad++;
			w->h[s] = 0;
		}
		atomic_store(&w->owner[s], 0);
	}
	return NULL;
}

static void *compactor(void *arg)
{
	struct zs_pool *p = arg;
	while (!atomic_load(&stop)) {
		zs_compact(p);
		usleep(500);
	}
	return NULL;
}

static void test_concurrent(uint64_t seed, int mode)
{
	struct zs_pool *p = make(4, mode, 1);
	REQUIRE(p);
	static unsigned long h[2 * SLOTS];
	static atomic_int owner[SLOTS];
	memset(h, 0, sizeof(h));
	for (int i = 0; i < SLOTS; i++)
		atomic_init(&owner[i], 0);
	struct worker w[NT];
	pthread_t t[NT], c;
	atomic_store(&stop, 0);
	REQUIRE(!pthread_create(&c, NULL, compactor, p));
	for (int i = 0; i < NT; i++) {
		w[i] = (struct worker){ p, i, seed + (uint64_t)i * 7919, h, owner, 0 };
		REQUIRE(!pthread_create(&t[i], NULL, churn, &w[i]));
	}
	int bad = 0;
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
	}
	atomic_store(&stop, 1);
	pthread_join(c, NULL);
	CHECK_EQ(bad, 0);
	zs_free_deferred_flush(p);
	/* Stats of the copies add up to the live objects. */
	unsigned long live = 0;
	for (int s = 0; s < SLOTS; s++)
		live += h[s] != 0;
	CHECK_EQ(zs_pool_objects(p), live);
	unsigned char buf[4096], tmp[4096];
	for (int s = 0; s < SLOTS; s++) {
		if (!h[s])
			continue;
		fill(buf, h[SLOTS + s], h[s]);
		void *m = zs_obj_read_begin(p, h[s], h[SLOTS + s], tmp);
		CHECK(m && !memcmp(m, buf, h[SLOTS + s]));
		if (m)
			zs_obj_read_end(p, h[s], h[SLOTS + s], m);
		CHECK_EQ(zs_free(p, h[s]), 0);
	}
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/*
 * A class (and each copy of it) costs memory once it is allocated from, not
 * at pool creation: an empty pool of 32 copies costs less than one copy's
 * table (built whole, the 32 were 2 MiB a pool), and a copy built by a CPU's first
 * allocation keeps its objects like any other: bytes, stats summed with the
 * other copies, a free from another CPU, compaction, and 0 pages at the end.
 */
#define NPOOLS 16
struct lazy_arg {
	struct zs_pool *pool;
	unsigned long h[3];
	int bad;
};
static const size_t lazy_sizes[3] = { 100, 1000, 3000 };

static void *lazy_alloc(void *a)
{
	struct lazy_arg *o = a;
	unsigned char buf[3000];
	if (pin(1)) {
		o->bad = 1;
		return NULL;
	}
	for (int i = 0; i < 3; i++) {
		memset(buf, 0x40 + i, lazy_sizes[i]);
		o->h[i] = zs_malloc(o->pool, lazy_sizes[i]);
		if (ZS_IS_ERR(o->h[i]) || zs_obj_write(o->pool, o->h[i], buf, lazy_sizes[i]))
			o->bad = 1;
	}
	return NULL;
}

static void test_lazy_copies(void)
{
	struct zs_pool_config cfg;
	struct zs_pool *p[NPOOLS];
	zs_pool_config_init(&cfg);
	cfg.class_shards = 32;
	cfg.checked = 1;
	size_t rss0 = zs_process_rss();
	for (int i = 0; i < NPOOLS; i++)
		REQUIRE((p[i] = must_pool_create(&cfg)));
	size_t rss1 = zs_process_rss();
	/* Bounds from above only: RSS may also drop meanwhile (the purge thread, a heap trim). */
	size_t one_copy = (size_t)zs_class_count(p[0]) * 256,
	       per_pool = rss1 > rss0 ? (rss1 - rss0) / NPOOLS : 0;
	printf("lazy copies: %zu KiB per empty pool of 32 copies (one copy's table: %zu KiB)\n",
	       per_pool / 1024, one_copy / 1024);
	if (RSS_MEANINGFUL)
		CHECK(per_pool < one_copy && per_pool < 32 * 1024); /* zsmalloc.h */
	/* A first object maps the page providers' tables and one page of each: under 128 KiB. */
	unsigned long first[NPOOLS];
	for (int i = 0; i < NPOOLS; i++)
		first[i] = zs_malloc(p[i], 500);
	size_t rss2 = zs_process_rss(), per_first = rss2 > rss1 ? (rss2 - rss1) / NPOOLS : 0;
	printf("lazy copies: a first object adds %zu KiB a pool\n", per_first / 1024);
	if (RSS_MEANINGFUL)
		CHECK(per_first < 128 * 1024);
	for (int i = 0; i < NPOOLS; i++)
		CHECK(!ZS_IS_ERR(first[i]) && zs_free(p[i], first[i]) == 0);
	for (int i = 1; i < NPOOLS; i++)
		zs_destroy_pool(p[i]);

	struct zs_pool *pool = p[0];
	CHECK_EQ(zs_compact(pool), 0); /* 31 copies never built: nothing to do, no crash */
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("lazy copies: the CPU-1 part skipped (one CPU)\n");
		zs_destroy_pool(pool);
		return;
	}
	struct lazy_arg a = { .pool = pool };
	pthread_t t;
	REQUIRE(!pthread_create(&t, NULL, lazy_alloc, &a));
	pthread_join(t, NULL);
	CHECK(!a.bad);
	REQUIRE(!pin(0));
	/* Copy 1 built on CPU 1, copy 0 on CPU 0: one object of each size in each. */
	unsigned long h0[3];
	unsigned char buf[3000];
	for (int i = 0; i < 3; i++) {
		memset(buf, 0x50 + i, lazy_sizes[i]);
		h0[i] = zs_malloc(pool, lazy_sizes[i]);
		CHECK(!ZS_IS_ERR(h0[i]) && !zs_obj_write(pool, h0[i], buf, lazy_sizes[i]));
	}
	for (int i = 0; i < 3; i++) {
		struct zs_class_stats st;
		CHECK_EQ(zs_class_stats(pool, zs_lookup_class_index(pool, lazy_sizes[i] + 8), &st, sizeof(st)), 0);
		CHECK_EQ(st.obj_used, 2);
		CHECK_EQ(st.obj_allocated, 2 * st.objs_per_zspage);
		unsigned char *m = zs_obj_read_begin(pool, a.h[i], lazy_sizes[i], buf);
		int same = 1;
		for (size_t k = 0; m && k < lazy_sizes[i]; k++)
			same &= m[k] == 0x40 + i;
		CHECK(m && same);
		if (m)
			zs_obj_read_end(pool, a.h[i], lazy_sizes[i], m);
	}
	CHECK_EQ(zs_pool_objects(pool), 6);
	for (int i = 0; i < 3; i++) { /* CPU 1's objects freed on CPU 0 */
		CHECK_EQ(zs_free(pool, a.h[i]), 0);
		CHECK_EQ(zs_free(pool, a.h[i]), -EINVAL);
	}
	zs_compact(pool);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(zs_free(pool, h0[i]), 0);
	CHECK_EQ(zs_pool_objects(pool), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
}

/*
 * At max_pages a sharded pool refuses an object only when no copy of its
 * class has a free slot: this CPU's copy full (or empty) and the pages
 * spent, an allocation takes a slot in another copy's zspage, as an
 * unsharded pool takes one in its class.  The pool is one zspage big.
 */
static void test_limit_other_copy(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("limit across copies: skipped (one CPU)\n");
		return;
	}
	const size_t size = 1000;
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.class_shards = 2;
	cfg.checked = 1;
	struct zs_pool *probe = must_pool_create(&cfg);
	REQUIRE(probe);
	struct zs_class_info ci;
	REQUIRE(!zs_class_info(probe, zs_lookup_class_index(probe, size + 8), &ci));
	zs_destroy_pool(probe);
	cfg.max_pages = ci.pages_per_zspage;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	struct one_arg a = { p, 1, 0 };
	pthread_t t;
	REQUIRE(!pthread_create(&t, NULL, alloc_on, &a)); /* copy 1 takes every page */
	pthread_join(t, NULL);
	REQUIRE(a.h && !ZS_IS_ERR(a.h));
	REQUIRE(!pin(0));
	unsigned long *h = calloc(ci.objs_per_zspage, sizeof(*h));
	REQUIRE(h);
	unsigned char buf[1000];
	unsigned placed = 0;
	for (unsigned i = 0; i + 1 < ci.objs_per_zspage; i++) {
		memset(buf, (int)(i & 0xff), size);
		/* Every other one through zs_malloc_write: it writes into the other copy too. */
		if (i & 1) {
			h[i] = zs_malloc_write(p, buf, size);
			placed += !ZS_IS_ERR(h[i]);
		} else {
			h[i] = zs_malloc(p, size);
			placed += !ZS_IS_ERR(h[i]) && !zs_obj_write(p, h[i], buf, size);
		}
	}
	CHECK_EQ(placed, ci.objs_per_zspage - 1); /* on CPU 0, in copy 1's zspage */
	CHECK_EQ(zs_get_total_pages(p), ci.pages_per_zspage);
	unsigned long over = zs_malloc(p, size);
	CHECK_EQ(over, (unsigned long)-ENOMEM); /* now no copy has a slot */
	CHECK_EQ(zs_malloc_write(p, buf, size), (unsigned long)-ENOMEM);
	CHECK_EQ(zs_pool_objects(p), ci.objs_per_zspage);
	for (unsigned i = 0; i + 1 < ci.objs_per_zspage; i++) {
		unsigned char *m = ZS_IS_ERR(h[i]) ? NULL : zs_obj_read_begin(p, h[i], size, buf);
		CHECK(m && m[0] == (i & 0xff) && m[size - 1] == (i & 0xff));
		if (m)
			zs_obj_read_end(p, h[i], size, m);
		if (!ZS_IS_ERR(h[i]))
			CHECK_EQ(zs_free(p, h[i]), 0);
	}
	CHECK_EQ(zs_free(p, a.h), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	free(h);
	zs_destroy_pool(p);
}

/*
 * current_cpu (common/hints.h), which picks a class copy and a page cache,
 * reads the rseq area instead of calling sched_getcpu: pinned to each CPU
 * in turn, it must name that CPU, as sched_getcpu does.
 */
static void test_cpu_id(void)
{
	cpu_set_t old;
	REQUIRE(!sched_getaffinity(0, sizeof(old), &old));
	int tried = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE && tried < 64; cpu++) {
		if (!CPU_ISSET(cpu, &old))
			continue;
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			continue;
		tried++;
		CHECK_EQ(sched_getcpu(), cpu);
		CHECK_EQ(current_cpu(), cpu);
	}
	REQUIRE(!sched_setaffinity(0, sizeof(old), &old));
	CHECK(tried > 0);
	printf("cpu_id: agrees with sched_getcpu on %d CPUs\n", tried);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_zs_shards");
	test_config();
	test_cpu_id();
	test_placement();
	test_lazy_copies();
	test_limit_other_copy();
	test_concurrent(seed, ZS_FREE_CLASS_INDEX_UNLOCKED);
	test_concurrent(seed + 1, ZS_FREE_POOL_LOCK);
	return tu_done();
}
