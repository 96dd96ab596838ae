/*
 * Parked zspages (src/zsmalloc/park.c): in the application profile a zspage
 * emptied by zs_free stays whole in its class copy and is the class's next
 * new zspage; parked pages leave a decay later with no call made (the purge
 * thread's hook), at once on a trim or a compaction, and never in the kernel
 * profile.  White box: the parked stacks (pool->park) and the provider's
 * pages in use are the quantities promised.  The last part runs threads that
 * park and unpark while the purge thread reclaims with a 10 ms decay (TSan
 * in CI: test_mt_*), checking every byte.
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "idle.h"
#include "zs/harness.h"
#include "zsmalloc/internal.h"
#include "pages/internal.h" /* purge_defaults, purge_budget_room */
#include "must.h"

#define OBJ 1000 /* one size: one class */
#define N 400

static unsigned parked_nr(struct zs_pool *pool)
{
	unsigned n = 0;
	for (size_t e = 0; pool->park && e < (size_t)pool->nr_classes * pool->nr_shards; e++)
		n += atomic_load_explicit(&pool->park[e].nr, memory_order_relaxed);
	return n;
}

static struct zs_pool *mk(int app, unsigned decay_ms)
{
	struct zs_pool_config c;
	if (app)
		zs_pool_config_init_app(&c);
	else
		zs_pool_config_init(&c);
	c.checked = 1;
	c.deferred_worker = -1;
	c.page_cache_decay_ms = decay_ms;
	struct zs_pool *pool = must_pool_create(&c);
	REQUIRE(pool);
	return pool;
}

static void fill(struct zs_pool *pool, unsigned long *h, int n, unsigned char tag)
{
	unsigned char buf[OBJ];
	for (int i = 0; i < n; i++) {
		memset(buf, tag ^ (unsigned char)i, sizeof(buf));
		h[i] = zs_malloc(pool, OBJ);
		REQUIRE(!ZS_IS_ERR(h[i]));
		REQUIRE(zs_obj_write(pool, h[i], buf, OBJ) == 0);
	}
}

/* Free n objects, each checked. */
static void free_all(struct zs_pool *pool, const unsigned long *h, int n)
{
	for (int i = 0; i < n; i++)
		CHECK_EQ(zs_free(pool, h[i]), 0);
}

static int intact(struct zs_pool *pool, unsigned long h, unsigned char want)
{
	unsigned char buf[OBJ];
	const unsigned char *m = zs_obj_read_begin(pool, h, OBJ, buf);
	if (!m)
		return 0;
	int ok = 1;
	for (int k = 0; k < OBJ; k++)
		ok &= m[k] == want;
	zs_obj_read_end(pool, h, OBJ, (void *)m);
	return ok;
}

/* Free-all parks every zspage; the next allocations take the same zspages back, newest first. */
static void same_zspages_back(void)
{
	struct zs_pool *pool = mk(1, 600000); /* ten minutes: no reclaim meanwhile */
	unsigned long h[N];
	pfn_t first[N];
	fill(pool, h, N, 0x11);
	size_t pages = zs_get_total_pages(pool), in_use = pages_in_use(pool->pages);
	CHECK(pages > 0);
	for (int i = 0; i < N; i++)
		first[i] = obj_to_pfn(handle_to_obj(h[i]));
	unsigned long stale = h[0];
	free_all(pool, h, N);
	/* Not the pool's pages any more, still the provider's: parked, not freed. */
	CHECK_EQ(zs_get_total_pages(pool), 0);
	CHECK_EQ(pages_in_use(pool->pages), in_use);
	unsigned nz = parked_nr(pool);
	CHECK(nz > 0);
	/* A stale handle into a parked zspage is refused (checked mode). */
	CHECK_EQ(zs_free(pool, stale), -EINVAL);
	fill(pool, h, N, 0x22);
	CHECK_EQ(parked_nr(pool), 0);
	CHECK_EQ(zs_get_total_pages(pool), pages);
	CHECK_EQ(pages_in_use(pool->pages), in_use); /* no page came from the provider */
	/* Every zspage came back: the same set of pages holds the objects. */
	size_t same = 0;
	for (int i = 0; i < N; i++) {
		pfn_t pfn = obj_to_pfn(handle_to_obj(h[i]));
		for (int j = 0; j < N; j++)
			if (first[j] == pfn) {
				same++;
				break;
			}
	}
	CHECK_EQ(same, (size_t)N);
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= intact(pool, h[i], (unsigned char)(0x22 ^ i));
	CHECK(ok);
	CHECK_EQ(zs_free(pool, stale), -EINVAL); /* reused slot, older generation */
	printf("park: %d objects, %zu pages, %u zspages parked and taken back whole\n", N,
	       pages, nz);
	free_all(pool, h, N);
	/* A trim and a compaction give them back at once. */
	CHECK(parked_nr(pool) > 0);
	zs_pool_trim(pool);
	CHECK_EQ(parked_nr(pool), 0);
	CHECK_EQ(pages_in_use(pool->pages), 0);
	/* And the process budget is back to nothing cached, to the page: the CPUs' unsynced
	 * counts went with them (a total stuck above the purge thread's start would never
	 * start it again). */
	unsigned decay;
	size_t budget;
	purge_defaults(&decay, &budget);
	CHECK(purge_budget_room(budget) && !purge_budget_room(budget + 1)); /* 0, not below */
	fill(pool, h, N, 0x33);
	free_all(pool, h, N);
	CHECK(parked_nr(pool) > 0);
	zs_compact(pool);
	CHECK_EQ(parked_nr(pool), 0);
	CHECK_EQ(pages_in_use(pool->pages), 0);
	zs_destroy_pool(pool);
}

/* No call after the free: the purge thread gives parked zspages back a decay later. */
static void decay_without_calls(void)
{
	struct zs_pool *pool = mk(1, 50);
	unsigned long h[N];
	fill(pool, h, N, 0x44);
	free_all(pool, h, N);
	unsigned nz = parked_nr(pool);
	CHECK(nz > 0);
	/* 400 x 1000 B is ~100 pages: under the purge thread's 2 MiB start, so kick it with more. */
	unsigned long *big = calloc(4000, sizeof(*big));
	REQUIRE(big);
	for (int i = 0; i < 4000; i++)
		REQUIRE(!ZS_IS_ERR(big[i] = zs_malloc(pool, 3000)));
	for (int i = 0; i < 4000; i++)
		CHECK_EQ(zs_free(pool, big[i]), 0);
	free(big);
	unsigned waited = 0;
	while (parked_nr(pool) && waited < 3000) {
		idle_sleep_ms(20);
		waited += 20;
	}
	printf("decay 50 ms: %u zspages parked, none after %u ms with no call\n", nz, waited);
	CHECK_EQ(parked_nr(pool), 0);
	CHECK_EQ(pages_in_use(pool->pages), 0);
	zs_destroy_pool(pool);
}

/*
 * Another pool's cache that no thread ever returns (ZS_PAGES_DECAY_NEVER,
 * in the process budget) holds the budget past the purge thread's start:
 * parked zspages must still start the thread and go a decay later.
 */
static void decay_past_a_kept_cache(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_cache_decay_ms = ZS_PAGES_DECAY_NEVER;
	struct zs_pool *keep = must_pool_create(&c);
	REQUIRE(keep);
	enum { K = 4000 };
	unsigned long *big = calloc(K, sizeof(*big));
	REQUIRE(big);
	for (int i = 0; i < K; i++)
		REQUIRE(!ZS_IS_ERR(big[i] = zs_malloc(keep, 3000)));
	for (int i = 0; i < K; i++)
		CHECK_EQ(zs_free(keep, big[i]), 0);
	/* ~12 MiB cached for good; let any thread that started for it find nothing and end. */
	idle_sleep_ms(200);
	struct zs_pool *pool = mk(1, 50);
	unsigned long h[N];
	for (int round = 0; round < 4; round++) { /* past a sync batch of parked pages */
		fill(pool, h, N, 0x3c);
		free_all(pool, h, N);
	}
	unsigned nz = parked_nr(pool), waited = 0;
	CHECK(nz > 0);
	while (parked_nr(pool) && waited < 3000) {
		idle_sleep_ms(20);
		waited += 20;
	}
	printf("past a kept cache: %u zspages parked, %u left after %u ms with no call\n", nz,
	       parked_nr(pool), waited);
	CHECK_EQ(parked_nr(pool), 0);
	zs_destroy_pool(pool);

	/* The same for a kernel-profile pool's cached pages (the provider's shared cache). */
	struct zs_pool *kp = mk(0, 50);
	idle_sleep_ms(200);
	for (int i = 0; i < K; i++)
		REQUIRE(!ZS_IS_ERR(big[i] = zs_malloc(kp, 3000)));
	for (int i = 0; i < K; i++)
		CHECK_EQ(zs_free(kp, big[i]), 0);
	struct zs_pages_stats st;
	pages_get_stats(kp->pages, &st);
	size_t cached = st.pages_cached;
	waited = 0;
	while (st.pages_cached > st.pages_cpu_cached && waited < 3000) {
		idle_sleep_ms(20);
		waited += 20;
		pages_get_stats(kp->pages, &st);
	}
	printf("past a kept cache: kernel profile %zu pages cached, %zu left after %u ms\n", cached,
	       st.pages_cached, waited);
	CHECK(cached > 0);
	CHECK_EQ(st.pages_cached - st.pages_cpu_cached, 0);
	zs_destroy_pool(kp);
	zs_destroy_pool(keep);
	free(big);
}

/*
 * The kernel profile frees every emptied zspage (page-exact counts); so do
 * pools whose provider could not return parked pages: one with its own cache
 * bound (outside the process budget) and one that never decays.
 */
static void who_parks(void)
{
	struct zs_pool *k = mk(0, 0);
	CHECK(k->park == NULL);
	unsigned long h[N];
	fill(k, h, N, 0x55);
	free_all(k, h, N);
	CHECK_EQ(parked_nr(k), 0);
	zs_destroy_pool(k);

	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.page_cache_pages = 4096; /* its own bound, outside the process budget: no parking */
	struct zs_pool *b = must_pool_create(&c);
	REQUIRE(b);
	fill(b, h, N, 0x66);
	free_all(b, h, N);
	CHECK_EQ(parked_nr(b), 0);
	CHECK(b->park == NULL);
	zs_destroy_pool(b);

	struct zs_pool *never = mk(1, ZS_PAGES_DECAY_NEVER);
	CHECK(never->park == NULL);
	fill(never, h, N, 0x77);
	free_all(never, h, N);
	CHECK_EQ(parked_nr(never), 0);
	zs_destroy_pool(never);
}

/* ---- threads park and unpark while the purge thread reclaims (10 ms decay) ---- */

struct churn {
	struct zs_pool *pool;
	unsigned id;
	_Atomic int bad;
};

static void *churner(void *arg)
{
	struct churn *c = arg;
	enum { M = 300 };
	unsigned long h[M];
	unsigned char buf[OBJ];
	uint64_t s = 0x9e3779b97f4a7c15ull * (c->id + 1);
	for (int round = 0; round < 40; round++) {
		size_t sz = 200 + tu_rand(&s) % (OBJ - 200);
		for (int i = 0; i < M; i++) {
			memset(buf, (int)(c->id * 16 + (unsigned)i), sz);
			h[i] = zs_malloc(c->pool, sz);
			if (ZS_IS_ERR(h[i]) || zs_obj_write(c->pool, h[i], buf, sz)) {
				atomic_store(&c->bad, 1);
				return NULL;
			}
		}
		for (int i = 0; i < M; i++) {
			const unsigned char *m = zs_obj_read_begin(c->pool, h[i], sz, buf);
			unsigned char want = (unsigned char)(c->id * 16 + (unsigned)i);
			for (size_t k = 0; m && k < sz; k++)
				if (m[k] != want) {
					atomic_store(&c->bad, 1);
					break;
				}
			if (m)
				zs_obj_read_end(c->pool, h[i], sz, (void *)m);
			if (zs_free(c->pool, h[i]))
				atomic_store(&c->bad, 1);
		}
		if (round % 8 == 7)
			idle_sleep_ms(15); /* past the decay: the purge pass takes some */
	}
	return NULL;
}

static void threads_with_reclaim(void)
{
	struct zs_pool *pool = mk(1, 10);
	enum { T = 4 };
	pthread_t t[T];
	struct churn c[T];
	for (unsigned i = 0; i < T; i++) {
		c[i] = (struct churn){ .pool = pool, .id = i };
		REQUIRE(pthread_create(&t[i], NULL, churner, &c[i]) == 0);
	}
	for (unsigned i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(atomic_load(&c[i].bad), 0);
	}
	CHECK_EQ(zs_pool_objects(pool), 0);
	zs_pool_trim(pool);
	CHECK_EQ(parked_nr(pool), 0);
	CHECK_EQ(pages_in_use(pool->pages), 0);
	zs_destroy_pool(pool);
}

/*
 * An allocation that finds no pages gives back the parked zspages and tries
 * once more: other classes' parked pages must not make it fail.  One
 * injected page failure stands for the memory running out.
 */
static void release_on_failure(void)
{
	struct zs_pool *pool = mk(1, 600000);
	unsigned long h[N];
	fill(pool, h, N, 0x5a);
	free_all(pool, h, N);
	CHECK(parked_nr(pool) > 0);
	zs_pool_fail_pages(pool, 0, 1);
	unsigned long big = zs_malloc(pool, 3000); /* another class: nothing parked there */
	CHECK(!ZS_IS_ERR(big));
	CHECK_EQ(parked_nr(pool), 0);
	if (!ZS_IS_ERR(big))
		CHECK_EQ(zs_free(pool, big), 0);
	/* With nothing parked the failure is the caller's, as before. */
	zs_pool_trim(pool);
	zs_pool_fail_pages(pool, 0, 1);
	CHECK_EQ(zs_malloc(pool, 3000), (unsigned long)-ENOMEM);
	zs_pool_fail_pages(pool, UINT64_MAX, 0);
	zs_destroy_pool(pool);
}

/*
 * A pool destroyed with zspages parked takes them out of the process budget:
 * the budget counts them (to within a sync batch) and nothing else would
 * (a leak here left later pools unable to cache anything).
 */
static void destroy_parked(void)
{
	unsigned decay;
	size_t budget;
	purge_defaults(&decay, &budget);
	unsigned long h[N];
	for (int k = 0; k < 40; k++) {
		struct zs_pool *pool = mk(1, 600000);
		fill(pool, h, N, (unsigned char)k);
		for (int i = 0; i < N; i++)
			CHECK_EQ(zs_free(pool, h[i]), 0);
		CHECK(parked_nr(pool) > 0);
		zs_destroy_pool(pool);
	}
	/* 40 x 100 parked pages would be 16 MiB of budget if leaked: none, and not below 0. */
	CHECK(purge_budget_room(budget) && !purge_budget_room(budget + 1));
}

int main(void)
{
	(void)tu_seed("test_mt_zs_park");
	/* One CPU for the exact parts: the class copy is chosen by the CPU. */
	cpu_set_t all, one;
	REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() > 0 ? sched_getcpu() : 0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		printf("could not pin to one CPU\n");
	same_zspages_back();
	decay_without_calls();
	decay_past_a_kept_cache();
	who_parks();
	destroy_parked();
	release_on_failure();
	sched_setaffinity(0, sizeof(all), &all);
	threads_with_reclaim();
	return tu_done();
}
