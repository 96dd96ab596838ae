/*
 * Deferred free under concurrency (TSan-clean stress with deferred free
 * and class-index mode on): 3 releaser threads allocate batches of
 * objects, verify them and release them with zs_free_deferred while keeping
 * a few alive; 2 allocator threads churn alloc/write/verify/zs_free on their
 * own objects; a compactor runs zs_compact in a loop; a flusher calls
 * zs_free_deferred_flush now and then; the background worker drains.  One
 * run uses a small queue so the full-queue synchronous fallback races too,
 * one runs in checked mode.  After joining and one flush the pool's counts
 * are exact: live objects == the objects the threads kept, total pages ==
 * sum of pages_used, every kept object's contents intact, and releasing
 * those leaves 0 pages.  A last part checks that checked-mode
 * zs_free_deferred never refuses a valid handle while compaction moves it.
 * The same runs cover the deferring free modes: page-deferred (the
 * allocators' zs_free hands emptied zspages to the worker) and
 * percpu-deferred (every zs_free queues into a per-CPU buffer; with a
 * 256-handle capacity the buffers run out, so the synchronous fallback
 * races too), and the compaction race in percpu-deferred.  Seed printed; ZS_MT_SECONDS sets the time per run.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include "must.h"

#define NREL 3
#define NALLOC 2
#define BATCH 64
#define KEEP 128
#define ASLOTS 256

/* Sanitized builds run the compaction-race part with fewer rounds (TSan widens the window anyway). */
#include "sanitizer.h"
#define RACE_ROUNDS (TU_SANITIZED ? 50 : 250)

struct obj {
	unsigned long h;
	size_t size;
	uint64_t cseed;
};

struct thr {
	int id;
	struct obj kept[KEEP > ASLOTS ? KEEP : ASLOTS];
	int nkept;
};

static struct zs_pool *pool;
static atomic_int stop;
static atomic_long errors, deferred, compacted, flushes;
static uint64_t base_seed;

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 29;
		memcpy(b + i, &z, n - i < 8 ? n - i : 8);
	}
}

static int put(struct obj *o, size_t size, uint64_t seed, unsigned char *buf)
{
	o->h = zs_malloc(pool, size);
	if (ZS_IS_ERR(o->h)) {
		o->h = 0;
		return 0;
	}
	o->size = size;
	o->cseed = seed;
	fill(buf, size, seed);
	return zs_obj_write(pool, o->h, buf, size) == 0;
}

static int verify(const struct obj *o, unsigned char *copy, unsigned char *exp)
{
	fill(exp, o->size, o->cseed);
	void *m = zs_obj_read_begin(pool, o->h, o->size, copy);
	if (!m)
		return 0;
	int ok = !memcmp(m, exp, o->size);
	zs_obj_read_end(pool, o->h, o->size, m);
	return ok;
}

static size_t pick_size(uint64_t r)
{
	if (r % 5 == 0)
		return 4096 - (r >> 8) % 512;
	return 1 + (r >> 8) % 2048;
}

static void *releaser(void *arg)
{
	struct thr *t = arg;
	uint64_t s = base_seed * 7 + (uint64_t)t->id;
	static _Thread_local unsigned char buf[4096], exp[4096], copy[4096];
	struct obj batch[BATCH];
	long rounds = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || rounds < 50) {
		for (int i = 0; i < BATCH; i++)
			if (!put(&batch[i], pick_size(tu_rand(&s)), tu_rand(&s), buf))
				atomic_fetch_add(&errors, 1);
		for (int i = 0; i < BATCH; i++) {
			if (!verify(&batch[i], copy, exp))
				atomic_fetch_add(&errors, 1);
			uint64_t r = tu_rand(&s);
			if (r % 16 == 0 && t->nkept < KEEP) {
				t->kept[t->nkept++] = batch[i];
				continue;
			}
			if (zs_free_deferred(pool, batch[i].h))
				atomic_fetch_add(&errors, 1);
			atomic_fetch_add_explicit(&deferred, 1, memory_order_relaxed);
		}
		/* Kept objects stay intact while their neighbours are drained and compacted. */
		for (int i = 0; i < t->nkept; i++)
			if (!verify(&t->kept[i], copy, exp))
				atomic_fetch_add(&errors, 1);
		/* Now and then release some kept ones too. */
		if (t->nkept == KEEP) {
			for (int i = KEEP / 2; i < KEEP; i++)
				if (zs_free_deferred(pool, t->kept[i].h))
					atomic_fetch_add(&errors, 1);
			t->nkept = KEEP / 2;
		}
		rounds++;
	}
	return NULL;
}

static void *allocator(void *arg)
{
	struct thr *t = arg;
	uint64_t s = base_seed * 13 + (uint64_t)t->id;
	static _Thread_local unsigned char buf[4096], exp[4096], copy[4096];
	long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || ops < 2000) {
		uint64_t r = tu_rand(&s);
		struct obj *o = &t->kept[r % ASLOTS];
		if (!o->h) {
			if (!put(o, pick_size(tu_rand(&s)), tu_rand(&s), buf))
				atomic_fetch_add(&errors, 1);
		} else {
			if (!verify(o, copy, exp))
				atomic_fetch_add(&errors, 1);
			if ((r >> 32) % 2) {
				if (zs_free(pool, o->h))
					atomic_fetch_add(&errors, 1);
				o->h = 0;
			}
		}
		ops++;
	}
	/* Compact the slots so nkept/kept[] describe the live set. */
	t->nkept = 0;
	for (int i = 0; i < ASLOTS; i++)
		if (t->kept[i].h)
			t->kept[t->nkept++] = t->kept[i];
	return NULL;
}

static void *compactor(void *arg)
{
	(void)arg;
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || n < 20) {
		atomic_fetch_add(&compacted, (long)zs_compact(pool));
		if (++n % 4 == 0) {
			zs_free_deferred_flush(pool);
			atomic_fetch_add(&flushes, 1);
		}
		struct timespec ts = { 0, 300000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static unsigned long stats_pages(void)
{
	unsigned long n = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(pool); i++)
		if (!zs_class_stats(pool, i, &st, sizeof(st)))
			n += st.pages_used;
	return n;
}

static void run(enum zs_free_mode fm, int checked, size_t cap, double seconds)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.free_mode = fm;
	c.checked = checked;
	c.deferred_capacity = cap;
	c.deferred_worker = 1;
	pool = must_pool_create(&c);
	REQUIRE(pool);
	atomic_store(&stop, 0);
	atomic_store(&errors, 0);
	atomic_store(&deferred, 0);
	atomic_store(&compacted, 0);
	atomic_store(&flushes, 0);

	static struct thr th[NREL + NALLOC];
	memset(th, 0, sizeof(th));
	pthread_t t[NREL + NALLOC + 1];
	for (int i = 0; i < NREL + NALLOC; i++) {
		th[i].id = i;
		REQUIRE(pthread_create(&t[i], NULL, i < NREL ? releaser : allocator, &th[i]) == 0);
	}
	REQUIRE(pthread_create(&t[NREL + NALLOC], NULL, compactor, NULL) == 0);
	struct timespec ts = { (time_t)seconds, (long)((seconds - (long)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < NREL + NALLOC + 1; i++)
		pthread_join(t[i], NULL);

	zs_free_deferred_flush(pool);
	long kept = 0;
	int bad = 0;
	unsigned char exp[4096], copy[4096];
	for (int i = 0; i < NREL + NALLOC; i++) {
		kept += th[i].nkept;
		for (int k = 0; k < th[i].nkept; k++)
			bad += !verify(&th[i].kept[k], copy, exp);
	}
	CHECK_EQ(zs_pool_objects(pool), kept);
	CHECK_EQ(zs_get_total_pages(pool), stats_pages());
	CHECK_EQ(bad, 0);
	CHECK_EQ(errors, 0);
	CHECK(deferred > 0);

	/* Release the rest, half deferred, half directly; nothing may remain. */
	for (int i = 0; i < NREL + NALLOC; i++)
		for (int k = 0; k < th[i].nkept; k++)
			CHECK_EQ(k % 2 ? zs_free(pool, th[i].kept[k].h)
				       : zs_free_deferred(pool, th[i].kept[k].h),
				 0);
	zs_free_deferred_flush(pool);
	zs_compact(pool);
	CHECK_EQ(zs_pool_objects(pool), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	printf("free mode %d checked %d capacity %zu: %ld deferred frees, %ld kept, %ld pages "
	       "compacted concurrently, %ld flushes, %ld errors\n",
	       fm, checked, cap, (long)deferred, kept, (long)compacted, (long)flushes,
	       (long)errors);
	zs_destroy_pool(pool);
}

/*
 * Checked mode: a valid handle must be accepted by zs_free_deferred even
 * while a compactor is moving its object (the check must read the handle's
 * obj under the pool lock, not before taking it).
 */
static atomic_long spurious;

static void *frag_releaser(void *arg)
{
	(void)arg;
	enum { N = 4096 };
	unsigned long *h = malloc(sizeof(*h) * N);
	REQUIRE(h);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		for (int i = 0; i < N; i++) {
			h[i] = zs_malloc(pool, 24);
			REQUIRE(!ZS_IS_ERR(h[i]));
		}
		for (int i = 0; i < N; i += 2) /* holes, so compaction moves the rest */
			if (zs_free(pool, h[i]))
				atomic_fetch_add(&errors, 1);
		for (int i = 1; i < N; i += 2) {
			if (zs_free_deferred(pool, h[i]) == 0)
				continue;
			atomic_fetch_add(&spurious, 1);
			if (zs_free(pool, h[i])) /* it was valid: the direct free takes it */
				atomic_fetch_add(&errors, 1);
		}
	}
	free(h);
	return NULL;
}

static void *spin_compactor(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		zs_compact(pool);
	return NULL;
}

static void test_checked_deferred_vs_compaction(enum zs_free_mode fm)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.free_mode = fm;
	c.checked = 1;
	pool = must_pool_create(&c);
	REQUIRE(pool);
	atomic_store(&stop, 0);
	atomic_store(&errors, 0);
	atomic_store(&spurious, 0);
	pthread_t t[4];
	REQUIRE(pthread_create(&t[0], NULL, spin_compactor, NULL) == 0);
	for (int i = 1; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, frag_releaser, NULL) == 0);
	for (int i = 1; i < 4; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(t[0], NULL);
	zs_free_deferred_flush(pool);
	printf("checked deferred free under compaction: %ld valid handles refused\n",
	       (long)spurious);
	CHECK_EQ(spurious, 0);
	CHECK_EQ(errors, 0);
	CHECK_EQ(zs_pool_objects(pool), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
}

int main(void)
{
	base_seed = tu_seed("test_mt_zs_deferred");
	const char *e = getenv("ZS_MT_SECONDS");
	double secs = e ? atof(e) : 1.5;
	run(ZS_FREE_CLASS_INDEX, 0, 0, secs);
	run(ZS_FREE_CLASS_INDEX, 1, 256, secs);  /* small queue: the sync fallback races too */
	run(ZS_FREE_CLASS_INDEX_UNLOCKED, 1, 0, secs);
	run(ZS_FREE_PAGE_DEFERRED, 0, 0, secs);
	run(ZS_FREE_PAGE_DEFERRED, 1, 0, secs);
	run(ZS_FREE_PERCPU_DEFERRED, 0, 0, secs);
	run(ZS_FREE_PERCPU_DEFERRED, 1, 256, secs); /* few buffers: the fallback races too */
	test_checked_deferred_vs_compaction(ZS_FREE_CLASS_INDEX);
	test_checked_deferred_vs_compaction(ZS_FREE_PERCPU_DEFERRED);
	return tu_done();
}
