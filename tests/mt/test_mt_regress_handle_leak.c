/*
 * Regression test: handle memory grew without bound
 * when objects were freed on another thread than the one that allocated
 * them.  cache_free_handle cached the slot on the freeing thread's shard,
 * cache_alloc_handle looked only at its own shard and carved fresh 64 KiB
 * chunks, so a producer/consumer pair or any deferred-free pool (the worker
 * frees) leaked 8 bytes per allocation.
 *
 * White box on purpose: the count of handle chunks (pool->nr_handle_chunks)
 * is the exact quantity that leaked, where RSS would be noisy (and is under
 * sanitizers).  The bound asserted is what the design promises: the peak of
 * live handles plus every shard's bounded cache, plus a partly carved chunk
 * per allocating shard.  The cross-thread churn also checks, byte for byte,
 * that no slot is ever handed out twice; the last two parts check that
 * zs_pool_trim gives back chunks whose slots are all free, also while other
 * threads allocate and free; the last, the stash of whole batches and the
 * chained list past it.  Runs under TSan (test_mt_*).
 */
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "zsmalloc/internal.h"
#include "must.h"

#define SLOTS_PER_CHUNK (64 * 1024 / 8 - 1)
#define SHARD_CACHE (ZS_HANDLE_SHARDS * 2 * ZS_HANDLE_BATCH)

static size_t chunks(struct zs_pool *pool)
{
	pthread_mutex_lock(&pool->handle_chunks_lock);
	size_t n = pool->nr_handle_chunks;
	pthread_mutex_unlock(&pool->handle_chunks_lock);
	return n;
}

static size_t chunk_bound(size_t peak_live, size_t alloc_threads)
{
	return (peak_live + SHARD_CACHE + SLOTS_PER_CHUNK - 1) / SLOTS_PER_CHUNK + alloc_threads;
}

/* ---- 1. one producer allocates, one consumer frees (a single-producer ring) ---- */

#define RING 2048
struct ring {
	struct zs_pool *pool;
	_Atomic unsigned long slot[RING];
	atomic_ulong head, tail;
	atomic_int done;
	atomic_int bad;
};

static void *consumer(void *arg)
{
	struct ring *r = arg;
	for (;;) {
		unsigned long t = atomic_load_explicit(&r->tail, memory_order_relaxed);
		if (t == atomic_load_explicit(&r->head, memory_order_acquire)) {
			if (atomic_load_explicit(&r->done, memory_order_acquire) &&
			    t == atomic_load_explicit(&r->head, memory_order_acquire))
				break;
			sched_yield();
			continue;
		}
		unsigned long h = atomic_load_explicit(&r->slot[t % RING], memory_order_relaxed);
		atomic_store_explicit(&r->tail, t + 1, memory_order_release);
		if (zs_free(r->pool, h))
			atomic_fetch_add(&r->bad, 1);
	}
	return NULL;
}

static void producer_consumer(enum zs_free_mode mode, unsigned long ops)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.free_mode = mode;
	c.deferred_worker = -1;
	struct ring *r = calloc(1, sizeof(*r));
	REQUIRE(r);
	r->pool = must_pool_create(&c);
	REQUIRE(r->pool);
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, consumer, r) == 0);
	for (unsigned long i = 0; i < ops; i++) {
		unsigned long h = zs_malloc(r->pool, 100);
		REQUIRE(!ZS_IS_ERR(h));
		unsigned long hd = atomic_load_explicit(&r->head, memory_order_relaxed);
		while (hd - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING)
			sched_yield();
		atomic_store_explicit(&r->slot[hd % RING], h, memory_order_relaxed);
		atomic_store_explicit(&r->head, hd + 1, memory_order_release);
	}
	atomic_store_explicit(&r->done, 1, memory_order_release);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&r->bad), 0);
	size_t n = chunks(r->pool), bound = chunk_bound(RING + 1, 1);
	printf("producer/consumer free_mode %d: %lu allocs, %zu handle chunks (bound %zu)\n", mode,
	       ops, n, bound);
	CHECK(n <= bound);
	CHECK_EQ(zs_pool_objects(r->pool), 0);
	zs_pool_trim(r->pool);
	CHECK_EQ(chunks(r->pool), 0);
	zs_destroy_pool(r->pool);
	free(r);
}

/* ---- 2. deferred free: the worker thread frees every handle ---- */

static void deferred_worker_frees(unsigned long ops)
{
	enum { LIVE = 1024, QUEUE = 1024 };
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.deferred_capacity = QUEUE;
	c.deferred_worker = 1;
	struct zs_pool *pool = must_pool_create(&c);
	REQUIRE(pool);
	static unsigned long live[LIVE];
	memset(live, 0, sizeof(live));
	for (unsigned long i = 0; i < ops; i++) {
		unsigned long h = zs_malloc(pool, 200);
		REQUIRE(!ZS_IS_ERR(h));
		if (live[i % LIVE])
			CHECK_EQ(zs_free_deferred(pool, live[i % LIVE]), 0);
		live[i % LIVE] = h;
	}
	zs_free_deferred_flush(pool);
	/* Live: LIVE objects plus at most a full queue still pending (the queue rounds to 2^k >= 16). */
	size_t n = chunks(pool), bound = chunk_bound(LIVE + QUEUE, 1);
	printf("deferred worker: %lu allocs, %zu handle chunks (bound %zu)\n", ops, n, bound);
	CHECK(n <= bound);
	for (int i = 0; i < LIVE; i++)
		CHECK_EQ(zs_free(pool, live[i]), 0);
	zs_compact(pool);
	zs_pool_trim(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	CHECK_EQ(chunks(pool), 0);
	zs_destroy_pool(pool);
}

/* ---- 3. every thread allocates and frees other threads' objects ---- */

#define T 4
#define BOX 512
struct churn {
	struct zs_pool *pool;
	_Atomic unsigned long box[BOX]; /* handles in flight between threads; 0 = empty */
	unsigned long ops;
	uint64_t seed;
	atomic_int bad;
};
struct churn_arg {
	struct churn *c;
	int id;
};

/* Each object holds its own handle value repeated: a slot handed out twice shows up as a mismatch. */
static int verify(struct zs_pool *pool, unsigned long h, size_t len)
{
	unsigned long buf[64], *m = zs_obj_read_begin(pool, h, len, buf);
	if (!m)
		return 0;
	int ok = 1;
	for (size_t i = 0; i < len / sizeof(unsigned long); i++)
		ok &= m[i] == h;
	zs_obj_read_end(pool, h, len, m);
	return ok;
}

static void *churner(void *arg)
{
	struct churn_arg *a = arg;
	struct churn *c = a->c;
	uint64_t rng = c->seed + (uint64_t)a->id * 0x9e3779b97f4a7c15ULL;
	unsigned long pattern[64];
	const size_t len = sizeof(pattern);
	for (unsigned long i = 0; i < c->ops; i++) {
		unsigned long h = zs_malloc(c->pool, len);
		if (ZS_IS_ERR(h)) {
			atomic_fetch_add(&c->bad, 1);
			break;
		}
		for (int k = 0; k < 64; k++)
			pattern[k] = h;
		if (zs_obj_write(c->pool, h, pattern, len))
			atomic_fetch_add(&c->bad, 1);
		/* Swap it into a random box; whatever was there (likely another thread's) is ours to free. */
		unsigned long old = atomic_exchange(&c->box[tu_rand(&rng) % BOX], h);
		if (old) {
			if (!verify(c->pool, old, len) || zs_free(c->pool, old))
				atomic_fetch_add(&c->bad, 1);
		}
	}
	return NULL;
}

static void cross_thread_churn(unsigned long ops_per_thread, uint64_t seed)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.checked = 1;
	cfg.free_mode = ZS_FREE_CLASS_INDEX;
	cfg.deferred_worker = -1;
	struct churn *c = calloc(1, sizeof(*c));
	REQUIRE(c);
	c->pool = must_pool_create(&cfg);
	REQUIRE(c->pool);
	c->ops = ops_per_thread;
	c->seed = seed;
	pthread_t th[T];
	struct churn_arg args[T];
	for (int i = 0; i < T; i++) {
		args[i] = (struct churn_arg){ c, i };
		REQUIRE(pthread_create(&th[i], NULL, churner, &args[i]) == 0);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(atomic_load(&c->bad), 0);
	size_t n = chunks(c->pool), bound = chunk_bound(BOX + T, T);
	printf("cross-thread churn: %d x %lu allocs, %zu handle chunks (bound %zu)\n", T,
	       ops_per_thread, n, bound);
	CHECK(n <= bound);
	for (int i = 0; i < BOX; i++) {
		unsigned long h = atomic_load(&c->box[i]);
		if (h) {
			CHECK(verify(c->pool, h, 512));
			CHECK_EQ(zs_free(c->pool, h), 0);
		}
	}
	CHECK_EQ(zs_pool_objects(c->pool), 0);
	zs_compact(c->pool);
	zs_pool_trim(c->pool);
	CHECK_EQ(zs_get_total_pages(c->pool), 0);
	CHECK_EQ(chunks(c->pool), 0);
	zs_destroy_pool(c->pool);
	free(c);
}

/* ---- 4. a peak, then most objects freed: zs_pool_trim gives the free chunks back ---- */

static void peak_then_trim(void)
{
	enum { PEAK = 100000, KEEP = 1000 };
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = 1;
	c.deferred_worker = -1;
	struct zs_pool *pool = must_pool_create(&c);
	REQUIRE(pool);
	unsigned long *h = calloc(PEAK, sizeof(*h));
	REQUIRE(h);
	for (int i = 0; i < PEAK; i++) {
		h[i] = zs_malloc(pool, 64);
		REQUIRE(!ZS_IS_ERR(h[i]));
		REQUIRE(zs_obj_write(pool, h[i], &h[i], sizeof(h[i])) == 0);
	}
	size_t at_peak = chunks(pool);
	/* The first KEEP stay: they were carved first, so they pin one chunk. */
	for (int i = KEEP; i < PEAK; i++)
		CHECK_EQ(zs_free(pool, h[i]), 0);
	zs_compact(pool);
	zs_pool_trim(pool);
	size_t after = chunks(pool);
	printf("peak %d handles: %zu chunks; %d kept after trim: %zu chunks\n", PEAK, at_peak, KEEP,
	       after);
	CHECK(at_peak >= PEAK / SLOTS_PER_CHUNK);
	CHECK(after <= 2); /* the survivors' chunk, and the one this thread's shard still carves */
	/* A handle in a chunk given back is no longer the pool's: checked mode refuses it. */
	CHECK_EQ(zs_free(pool, h[PEAK - 100]), -EINVAL);
	for (int i = 0; i < KEEP; i++) {
		unsigned long v = 0, *m = zs_obj_read_begin(pool, h[i], sizeof(v), &v);
		CHECK(m && *m == h[i]);
		if (m)
			zs_obj_read_end(pool, h[i], sizeof(v), m);
	}
	/* Grow again: the slots left on the free lists and fresh chunks serve it. */
	for (int i = KEEP; i < PEAK; i++) {
		h[i] = zs_malloc(pool, 64);
		REQUIRE(!ZS_IS_ERR(h[i]));
		REQUIRE(zs_obj_write(pool, h[i], &h[i], sizeof(h[i])) == 0);
	}
	int ok = 1;
	for (int i = 0; i < PEAK; i++) {
		unsigned long v = 0, *m = zs_obj_read_begin(pool, h[i], sizeof(v), &v);
		ok &= m && *m == h[i];
		if (m)
			zs_obj_read_end(pool, h[i], sizeof(v), m);
		CHECK_EQ(zs_free(pool, h[i]), 0);
	}
	CHECK(ok);
	zs_compact(pool);
	CHECK_EQ(chunks(pool), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
	free(h);
}

/* ---- 5. bursts on several threads while another thread keeps trimming ---- */

#define BURST 20000
struct burst {
	struct zs_pool *pool;
	atomic_int running, bad;
	unsigned long trims, shrinks; /* trims, and trims after which fewer chunks were left */
};

static void *burster(void *arg)
{
	struct burst *b = arg;
	unsigned long *h = malloc(BURST * sizeof(*h));
	if (!h) {
		atomic_fetch_add(&b->bad, 1);
		atomic_fetch_sub(&b->running, 1);
		return NULL;
	}
	for (int round = 0; round < 6; round++) {
		int n = BURST / (1 + round % 3);
		for (int i = 0; i < n; i++) {
			h[i] = zs_malloc(b->pool, 48);
			if (ZS_IS_ERR(h[i]) || zs_obj_write(b->pool, h[i], &h[i], sizeof(h[i]))) {
				atomic_fetch_add(&b->bad, 1);
				n = i;
				break;
			}
		}
		for (int i = 0; i < n; i++) {
			unsigned long v = 0, *m = zs_obj_read_begin(b->pool, h[i], sizeof(v), &v);
			if (!m || *m != h[i])
				atomic_fetch_add(&b->bad, 1);
			if (m)
				zs_obj_read_end(b->pool, h[i], sizeof(v), m);
		}
		sched_yield(); /* let the trimmer in at the peak, too */
		/* Free in an order that leaves whole chunks free now and then. */
		for (int i = 0; i < n; i++) {
			if (zs_free(b->pool, h[(round & 1) ? n - 1 - i : i]))
				atomic_fetch_add(&b->bad, 1);
			if (i % 4096 == 0)
				sched_yield();
		}
	}
	free(h);
	atomic_fetch_sub(&b->running, 1);
	return NULL;
}

static void *trimmer(void *arg)
{
	struct burst *b = arg;
	while (atomic_load(&b->running) > 0) {
		size_t before = chunks(b->pool);
		zs_pool_trim(b->pool);
		if (chunks(b->pool) < before)
			b->shrinks++;
		if (b->trims++ % 4 == 0)
			zs_compact(b->pool);
		sched_yield();
	}
	return NULL;
}

static void bursts_with_trim(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = 1;
	c.free_mode = ZS_FREE_CLASS_INDEX_UNLOCKED;
	c.deferred_worker = -1;
	struct burst b = { .pool = must_pool_create(&c) };
	REQUIRE(b.pool);
	atomic_init(&b.running, 3);
	atomic_init(&b.bad, 0);
	pthread_t th[4];
	for (int i = 0; i < 3; i++)
		REQUIRE(pthread_create(&th[i], NULL, burster, &b) == 0);
	REQUIRE(pthread_create(&th[3], NULL, trimmer, &b) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	printf("bursts with a concurrent trimmer: %lu trims, %lu gave chunks back, %zu chunks left\n",
	       b.trims, b.shrinks, chunks(b.pool));
	CHECK_EQ(atomic_load(&b.bad), 0);
	CHECK_EQ(zs_pool_objects(b.pool), 0);
	zs_pool_trim(b.pool);
	CHECK_EQ(chunks(b.pool), 0);
	zs_destroy_pool(b.pool);
}

/*
 * ---- 6. the stash: whole batches taken in O(1), and the chained list past it ----
 * Freed handles past a shard's cache go to the pool's stash as whole batches
 * (handle.c); when the stash is full they chain onto a list, which the stash
 * then grows past, and a later take walks that list.  Every path must hand
 * out each slot once, and a trim must still find every free slot.
 */
static void stash_paths(void)
{
	enum { N = 64 * 40, HALF = N / 2 };
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = 1;
	c.deferred_worker = -1;
	/* Counts below assume a freshly carved chunk, not one re-carved from an earlier pool's record. */
	handle_gen_forget();
	struct zs_pool *pool = must_pool_create(&c);
	REQUIRE(pool);
	unsigned long *h = calloc(N, sizeof(*h));
	REQUIRE(h);
	for (int i = 0; i < N; i++)
		REQUIRE(!ZS_IS_ERR(h[i] = zs_malloc(pool, 48)));
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_free(pool, h[i]), 0);
	/* All but the shard's two batches went to the stash, save the first: the
	 * stash has no room until a batch is turned away (then it grows). */
	CHECK_EQ(pool->stash_n, (size_t)(N / ZS_HANDLE_BATCH - 3));
	CHECK_EQ(pool->handle_free.n, ZS_HANDLE_BATCH);
	for (int i = 0; i < HALF; i++)
		REQUIRE(!ZS_IS_ERR(h[i] = zs_malloc(pool, 48)));
	/* Pretend the stash is full: the next batch chains, and the stash grows. */
	spin_lock(&pool->handle_free_lock);
	size_t cap = pool->stash_n;
	pool->stash_cap = cap;
	spin_unlock(&pool->handle_free_lock);
	for (int i = 0; i < HALF; i++)
		CHECK_EQ(zs_free(pool, h[i]), 0);
	CHECK_EQ(pool->handle_free.n, 2 * ZS_HANDLE_BATCH);
	CHECK(pool->stash_cap >= 2 * cap && cap > 0);
	/* Take everything back (stash, then the list's walk, then fresh slots): no slot twice. */
	for (int i = 0; i < N; i++) {
		REQUIRE(!ZS_IS_ERR(h[i] = zs_malloc(pool, 48)));
		REQUIRE(zs_obj_write(pool, h[i], &h[i], sizeof(h[i])) == 0);
	}
	int ok = 1;
	for (int i = 0; i < N; i++) {
		unsigned long v = 0, *m = zs_obj_read_begin(pool, h[i], sizeof(v), &v);
		ok &= m && *m == h[i];
		if (m)
			zs_obj_read_end(pool, h[i], sizeof(v), m);
	}
	CHECK(ok);
	size_t before = chunks(pool);
	/* A trim with batches stashed and chained: every slot is found free. */
	for (int i = 1; i < N; i++)
		CHECK_EQ(zs_free(pool, h[i]), 0);
	zs_pool_trim(pool);
	CHECK_EQ(pool->stash_n, 0);
	CHECK(chunks(pool) <= before);
	CHECK_EQ(zs_free(pool, h[0]), 0);
	zs_pool_trim(pool);
	CHECK_EQ(chunks(pool), 0);
	printf("stash: %zu batches stashed, one chained past a full stash of %zu\n",
	       (size_t)(N / ZS_HANDLE_BATCH - 3), cap);
	zs_destroy_pool(pool);
	free(h);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_regress_handle_leak");
	/* 300k allocations leaked ~37 chunks before the fix; the bound here is 2. */
	producer_consumer(ZS_FREE_POOL_LOCK, 300000);
	producer_consumer(ZS_FREE_CLASS_INDEX_UNLOCKED, 300000);
	deferred_worker_frees(300000);
	cross_thread_churn(50000, seed);
	peak_then_trim();
	bursts_with_trim();
	stash_paths();
	return tu_done();
}
