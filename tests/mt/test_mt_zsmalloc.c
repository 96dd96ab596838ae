/*
 * Multi-threaded stress of zsmalloc (run under TSan in CI): per free mode
 * (and once with fitted zspages, whose compaction allocates a short zspage
 * and moves a class's last partly used one into it),
 * 3 workers allocate / write / read-verify / free their own objects with
 * seeded contents, 1 compactor calls zs_compact in a loop, and 1 reader
 * keeps reading a shared set of long-lived objects (zs_obj_read_begin/end
 * and the legacy RO map) and verifying them while compaction moves them.
 * The shared objects start interleaved with freed slots, so compaction has
 * real work on their zspages.  At the end every object is verified, the
 * accounting agrees (total pages == sum of pages_used, live objects), and
 * freeing everything leaves 0 pages.
 * Why: the lock hierarchy (pool rwlock, class locks, zspage reader lock that
 * compaction only trylocks) and the lock-free class-index free paths are
 * only exercised by real concurrency.  Seed printed; ZS_SEED reruns it
 * (thread interleaving still varies).  ZS_MT_SECONDS sets the run time per mode.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include "must.h"

#define NWORKERS 3
#define WSLOTS 384
#define NSHARED 512

struct obj {
	unsigned long h;
	size_t size;
	uint64_t cseed;
};

static struct zs_pool *pool;
static struct obj shared[NSHARED];
static atomic_int stop;
static atomic_long errors, reads_shared, compacted, worker_ops;
static uint64_t base_seed;

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 29;
		memcpy(b + i, &z, n - i < 8 ? n - i : 8);
	}
}

/* Read the object with the new API into `copy`, compare with its pattern in `exp`. */
static int verify(const struct obj *o, unsigned char *copy, unsigned char *exp, int legacy)
{
	fill(exp, o->size, o->cseed);
	int ok;
	if (legacy) {
		const void *m = zs_map_object(pool, o->h, ZS_MM_RO);
		if (!m)
			return 0;
		ok = !memcmp(m, exp, o->size);
		zs_unmap_object(pool, o->h);
		return ok;
	}
	void *m = zs_obj_read_begin(pool, o->h, o->size, copy);
	if (!m)
		return 0;
	ok = !memcmp(m, exp, o->size);
	zs_obj_read_end(pool, o->h, o->size, m);
	return ok;
}

static size_t pick_size(uint64_t r)
{
	if (r % 4 == 0)
		return 4096 - (r >> 8) % 600; /* huge and near-huge */
	if (r % 4 == 1)
		return 1 + (r >> 8) % 256;
	return 1 + (r >> 8) % 4096;
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	uint64_t s = base_seed * 31 + (uint64_t)id;
	static _Thread_local unsigned char buf[4096], exp[4096], copy[4096];
	struct obj *mine = calloc(WSLOTS, sizeof(*mine));
	REQUIRE(mine);
	long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || ops < 2000) {
		uint64_t r = tu_rand(&s);
		struct obj *o = &mine[r % WSLOTS];
		r = tu_rand(&s);
		if (!o->h) {
			o->size = pick_size(r);
			o->cseed = tu_rand(&s);
			fill(buf, o->size, o->cseed);
			/* Half through zs_malloc_write: its pin races compaction too. */
			int fused = (r >> 16) & 1;
			o->h = fused ? zs_malloc_write(pool, buf, o->size) : zs_malloc(pool, o->size);
			if (ZS_IS_ERR(o->h)) {
				atomic_fetch_add(&errors, 1);
				o->h = 0;
				continue;
			}
			if (!fused && zs_obj_write(pool, o->h, buf, o->size))
				atomic_fetch_add(&errors, 1);
		} else if (r % 3 == 0) {
			if (!verify(o, copy, exp, 0))
				atomic_fetch_add(&errors, 1);
			if (zs_free(pool, o->h))
				atomic_fetch_add(&errors, 1);
			o->h = 0;
		} else if (r % 3 == 1) {
			o->cseed = tu_rand(&s);
			fill(buf, o->size, o->cseed);
			if (zs_obj_write(pool, o->h, buf, o->size))
				atomic_fetch_add(&errors, 1);
		} else {
			if (!verify(o, copy, exp, (r >> 8) % 8 == 0))
				atomic_fetch_add(&errors, 1);
		}
		ops++;
	}
	/* Verify and free what is left. */
	for (int i = 0; i < WSLOTS; i++) {
		if (!mine[i].h)
			continue;
		if (!verify(&mine[i], copy, exp, 0))
			atomic_fetch_add(&errors, 1);
		if (zs_free(pool, mine[i].h))
			atomic_fetch_add(&errors, 1);
	}
	free(mine);
	atomic_fetch_add(&worker_ops, ops);
	return NULL;
}

static void *compactor(void *arg)
{
	(void)arg;
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || n < 20) {
		atomic_fetch_add(&compacted, (long)zs_compact(pool));
		n++;
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	static _Thread_local unsigned char exp[4096], copy[4096];
	long n = 0;
	uint64_t s = base_seed ^ 0xabcdef;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) || n < 2000) {
		const struct obj *o = &shared[n % NSHARED];
		if (!verify(o, copy, exp, tu_rand(&s) % 8 == 0))
			atomic_fetch_add(&errors, 1);
		n++;
	}
	atomic_fetch_add(&reads_shared, n);
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

static void run(enum zs_free_mode fm, int checked, int fit, double seconds)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.free_mode = fm;
	c.checked = checked;
	c.fit_zspages = fit;
	c.deferred_worker = -1;
	pool = must_pool_create(&c);
	REQUIRE(pool);
	atomic_store(&stop, 0);
	atomic_store(&errors, 0);
	atomic_store(&reads_shared, 0);
	atomic_store(&compacted, 0);
	atomic_store(&worker_ops, 0);

	/* Shared objects interleaved with freed ones, so their zspages are compactable. */
	uint64_t s = base_seed + (uint64_t)fm;
	static unsigned long gap[NSHARED];
	unsigned char buf[4096];
	for (int i = 0; i < NSHARED; i++) {
		uint64_t r = tu_rand(&s);
		shared[i].size = 1 + r % 3000;
		shared[i].cseed = tu_rand(&s);
		shared[i].h = zs_malloc(pool, shared[i].size);
		gap[i] = zs_malloc(pool, shared[i].size);
		REQUIRE(!ZS_IS_ERR(shared[i].h) && !ZS_IS_ERR(gap[i]));
		fill(buf, shared[i].size, shared[i].cseed);
		CHECK_EQ(zs_obj_write(pool, shared[i].h, buf, shared[i].size), 0);
	}
	for (int i = 0; i < NSHARED; i++)
		zs_free(pool, gap[i]);

	pthread_t t[NWORKERS + 2];
	for (long i = 0; i < NWORKERS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	REQUIRE(pthread_create(&t[NWORKERS], NULL, compactor, NULL) == 0);
	REQUIRE(pthread_create(&t[NWORKERS + 1], NULL, reader, NULL) == 0);
	struct timespec ts = { (time_t)seconds, (long)((seconds - (long)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < NWORKERS + 2; i++)
		pthread_join(t[i], NULL);

	/* Workers freed theirs: only the shared objects remain. */
	CHECK_EQ(zs_pool_objects(pool), NSHARED);
	CHECK_EQ(zs_get_total_pages(pool), stats_pages());
	unsigned char exp[4096], copy[4096];
	int bad = 0;
	for (int i = 0; i < NSHARED; i++)
		bad += !verify(&shared[i], copy, exp, 0);
	zs_compact(pool);
	for (int i = 0; i < NSHARED; i++)
		bad += !verify(&shared[i], copy, exp, 0);
	CHECK_EQ(bad, 0);
	for (int i = 0; i < NSHARED; i++)
		CHECK_EQ(zs_free(pool, shared[i].h), 0);
	zs_compact(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	CHECK_EQ(zs_pool_objects(pool), 0);
	struct zs_pool_stats pst;
	zs_pool_stats(pool, &pst, sizeof(pst));
	CHECK_EQ(errors, 0);
	CHECK(compacted > 0);
	CHECK(pst.pages_compacted >= (unsigned long)compacted);
	printf("free mode %d checked %d fit %d: %ld worker ops, %ld shared reads, %ld pages compacted "
	       "concurrently, %ld errors\n",
	       fm, checked, fit, (long)worker_ops, (long)reads_shared, (long)compacted, (long)errors);
	zs_destroy_pool(pool);
}

int main(void)
{
	base_seed = tu_seed("test_mt_zsmalloc");
	const char *e = getenv("ZS_MT_SECONDS");
	double secs = e ? atof(e) : 1.5;
	run(ZS_FREE_POOL_LOCK, 0, 0, secs);
	run(ZS_FREE_CLASS_INDEX, 0, 0, secs);
	run(ZS_FREE_CLASS_INDEX_UNLOCKED, 1, 0, secs);
	run(ZS_FREE_CLASS_INDEX, 1, 1, secs);
	return tu_done();
}
