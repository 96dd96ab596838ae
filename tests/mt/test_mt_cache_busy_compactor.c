/*
 * An insert at the cache's capacity while another compactor holds the
 * pool's compactor place (as the pool's idle compaction does during each of
 * its steps).  The store holds objects outside the cache's index, half of
 * them freed, so nothing is left to evict and only compaction gives the
 * room back; a helper thread holds the place for 300 ms from the moment the
 * insert starts.  zs/cache.h promises -ENOMEM only for an entry that alone
 * would not fit: the insert must wait for the place and succeed, and it must
 * not return before the place was given back (else the setup needed no
 * compaction and proves nothing).  An insert that gives up after a few
 * passes returns -ENOMEM here, whatever their number or spacing, because
 * the place is held longer than any of them.  The same for zs_blob_compact,
 * and the non-waiting calls report the busy place: zs_compact_step 0 with
 * the cursor kept, the internal step -EBUSY.  Seeded (the values' bytes).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "zsmalloc/compact.h"
#include "zs/cache.h"

#define CAP ((size_t)2 << 20)
#define OBJ 1000
#define BIG 60000
#define HOLD_MS 300

static uint64_t seed;

struct holder {
	struct zs_pool *pool;
	atomic_int started;   /* the call under test is about to run */
	atomic_int released;  /* the place is about to be given back */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void fill_random(unsigned char *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)tu_rand(s);
}

/* Holds the compactor's place (taken by the caller) until HOLD_MS after the call starts. */
static void *hold(void *arg)
{
	struct holder *h = arg;
	while (!atomic_load(&h->started))
		sleep_ms(1);
	sleep_ms(HOLD_MS);
	atomic_store(&h->released, 1);
	compact_place_give(h->pool);
	return NULL;
}

/* What the capacity counts: the store's memory less pool pages cached for reuse (zs/blob.h). */
static size_t held(struct zs_blob *b)
{
	struct zs_blob_stats st;
	REQUIRE(zs_blob_stats(b, &st, sizeof(st)) == 0);
	return (size_t)(st.mem_bytes - st.cached_bytes);
}

/*
 * A cache at its capacity whose store holds only objects the index does not
 * know, every other one freed: holes that only compaction turns into room.
 */
static struct zs_cache *holey_cache(unsigned long **hs, size_t *n)
{
	struct zs_cache_config cfg;
	zs_cache_config_init(&cfg);
	cfg.blob.mem_limit = CAP;
	cfg.blob.compact_ratio_pct = -1; /* no steps from calls: the holes stay */
	cfg.blob.compact_idle_ms = -1;   /* no idle compaction: the test holds the place */
	cfg.blob.compact_budget = 4096;
	struct zs_cache *c;
	char why[256];
	int rc = zs_cache_create(&cfg, &c, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "zs_cache_create: %d %s\n", rc, why);
		REQUIRE(rc == 0);
	}
	struct zs_blob *b = zs_cache_blob(c);
	unsigned char v[OBJ];
	size_t cap = 8192, k = 0;
	unsigned long *h = malloc(cap * sizeof(*h));
	REQUIRE(h);
	/* Random bytes do not compress: every object is OBJ bytes and a header.  Up to the limit. */
	for (;;) {
		fill_random(v, sizeof(v), &seed);
		unsigned long x = zs_blob_put(b, v, sizeof(v));
		if (ZS_IS_ERR(x)) {
			REQUIRE(ZS_ERR(x) == -ENOMEM);
			break;
		}
		if (k == cap) {
			cap *= 2;
			h = realloc(h, cap * sizeof(*h));
			REQUIRE(h);
		}
		h[k++] = x;
	}
	REQUIRE(k > 1000);
	for (size_t i = 0; i < k; i += 2) {
		CHECK_EQ(zs_blob_free(b, h[i]), 0);
		h[i] = 0;
	}
	*hs = h;
	*n = k;
	return c;
}

static void free_rest(struct zs_cache *c, unsigned long *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (h[i])
			CHECK_EQ(zs_blob_free(zs_cache_blob(c), h[i]), 0);
	free(h);
}

static void case_insert_waits(void)
{
	size_t n;
	unsigned long *h;
	struct zs_cache *c = holey_cache(&h, &n);
	struct zs_pool *pool = zs_blob_pool(zs_cache_blob(c));
	unsigned char *big = malloc(BIG);
	REQUIRE(big);
	fill_random(big, BIG, &seed);
	/* Without the room from compaction the entry would not fit. */
	REQUIRE(held(zs_cache_blob(c)) + BIG > CAP);

	struct holder hd = { .pool = pool };
	REQUIRE(compact_place_take(pool, 0));
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, hold, &hd) == 0);
	atomic_store(&hd.started, 1);
	int rc = zs_cache_insert(c, "big", 3, big, BIG);
	int after = atomic_load(&hd.released);
	pthread_join(t, NULL);
	CHECK_EQ(rc, 0);
	CHECK_EQ(after, 1); /* it waited for the place: the room came from compaction */
	long got = zs_cache_lookup(c, "big", 3, big, BIG);
	CHECK_EQ(got, BIG);
	CHECK(held(zs_cache_blob(c)) <= CAP);
	free(big);
	free_rest(c, h, n);
	zs_cache_destroy(c);
}

static void case_blob_compact_waits(void)
{
	size_t n;
	unsigned long *h;
	struct zs_cache *c = holey_cache(&h, &n);
	struct zs_blob *b = zs_cache_blob(c);
	struct zs_pool *pool = zs_blob_pool(b);
	struct holder hd = { .pool = pool };
	REQUIRE(compact_place_take(pool, 0));

	/* While the place is held: the public step says 0 and keeps the cursor; the internal one says busy. */
	unsigned cur = 0;
	CHECK_EQ(zs_compact_step(pool, &cur, 1), 0);
	CHECK_EQ(cur, 0);
	CHECK_EQ(compact_step(pool, &cur, 1, 0), -EBUSY);
	CHECK_EQ(zs_compact(pool), 0);
	CHECK_EQ(compact_step(NULL, &cur, 1, 1), -EINVAL);
	CHECK_EQ(compact_step(pool, NULL, 1, 1), -EINVAL);

	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, hold, &hd) == 0);
	atomic_store(&hd.started, 1);
	unsigned long freed = zs_blob_compact(b);
	int after = atomic_load(&hd.released);
	pthread_join(t, NULL);
	CHECK(freed > 0);
	CHECK_EQ(after, 1);
	free_rest(c, h, n);
	zs_cache_destroy(c);
}

int main(void)
{
	seed = tu_seed("test_mt_cache_busy_compactor");
	case_insert_waits();
	case_blob_compact_waits();
	return tu_done();
}
