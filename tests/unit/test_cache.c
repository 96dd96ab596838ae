/*
 * The key-value cache (zs/cache.h): every call and error path, a seeded
 * random sequence checked against a shadow table, enumeration (each key once,
 * resumable after -ENOSPC), clear, the index's bytes per entry at 200,000
 * 16-byte keys, lookups after compaction moved the objects, and eviction:
 * the capacity holds (less pages cached for reuse) and CLOCK keeps the
 * entries being looked up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blob_gen.h"
#include "testutil.h"
#include "zs/cache.h"

static uint64_t seed;

static struct zs_cache *mk(size_t limit, unsigned shards)
{
	struct zs_cache_config cfg;
	zs_cache_config_init(&cfg);
	cfg.blob.mem_limit = limit;
	cfg.shards = shards;
	struct zs_cache *c = NULL;
	CHECK_EQ(zs_cache_create(&cfg, &c, NULL, 0), 0);
	REQUIRE(c);
	return c;
}

static void test_config(void)
{
	struct zs_cache_config cfg;
	struct zs_cache *c;
	CHECK_EQ(zs_cache_create(NULL, NULL, NULL, 0), -EINVAL);
#define BAD(stmt)                                            \
	do {                                                 \
		zs_cache_config_init(&cfg);                  \
		stmt;                                        \
		c = (struct zs_cache *)1;                    \
		CHECK_EQ(zs_cache_create(&cfg, &c, NULL, 0), -EINVAL); \
		CHECK(c == NULL);                            \
	} while (0)
	BAD(cfg.shards = 3);
	BAD(cfg.shards = 8192);
	BAD(cfg.max_key = ZS_CACHE_MAX_KEY + 1);
	BAD(cfg.reserved[0] = 1);
	BAD(cfg.struct_size = 1);
	BAD(cfg.blob.compact_ratio_pct = 5000);
#undef BAD
	CHECK_EQ(zs_cache_create(NULL, &c, NULL, 0), 0);
	zs_cache_destroy(c);
	zs_cache_destroy(NULL);
	zs_cache_clear(NULL);
	CHECK(zs_cache_blob(NULL) == NULL);
	struct zs_cache_stats st;
	memset(&st, 0xff, sizeof(st));
	zs_cache_stats(NULL, &st, sizeof(st));
	CHECK_EQ(st.entries, 0);
}

static int cb_sum(const void *d, size_t len, void *arg)
{
	const unsigned char *p = d;
	unsigned s = 0;
	for (size_t i = 0; i < len; i++)
		s += p[i];
	*(unsigned *)arg = s;
	return (int)len;
}

struct nest {
	struct zs_cache *c;
	int ok;
};

static int cb_nested(const void *d, size_t len, void *arg)
{
	struct nest *n = arg;
	char buf[64];
	/* A lookup from inside a callback (same or another shard) is allowed. */
	n->ok = zs_cache_lookup(n->c, "k1", 2, buf, sizeof(buf)) == 5 && memcmp(buf, "one!!", 5) == 0;
	(void)d;
	return (int)len;
}

static void test_basic(void)
{
	struct zs_cache *c = mk(0, 4);
	char buf[8192];
	CHECK_EQ(zs_cache_insert(c, "k1", 2, "one!!", 5), 0);
	CHECK_EQ(zs_cache_lookup(c, "k1", 2, buf, sizeof(buf)), 5);
	CHECK(memcmp(buf, "one!!", 5) == 0);
	CHECK_EQ(zs_cache_lookup(c, "k2", 2, buf, sizeof(buf)), -ENOENT);
	CHECK_EQ(zs_cache_value_size(c, "k1", 2), 5);
	CHECK_EQ(zs_cache_value_size(c, "k2", 2), -ENOENT);
	/* Too small: -ENOSPC, buffer untouched. */
	memset(buf, 'x', 8);
	CHECK_EQ(zs_cache_lookup(c, "k1", 2, buf, 4), -ENOSPC);
	CHECK(buf[0] == 'x' && buf[3] == 'x');
	CHECK_EQ(zs_cache_lookup(c, "k1", 2, NULL, 0), -ENOSPC);
	/* Empty value. */
	CHECK_EQ(zs_cache_insert(c, "e", 1, NULL, 0), 0);
	CHECK_EQ(zs_cache_lookup(c, "e", 1, NULL, 0), 0);
	/* Replace, compressed value, callback. */
	unsigned char v[3000];
	gen_record(v, sizeof(v), 1);
	CHECK_EQ(zs_cache_insert(c, "k1", 2, v, sizeof(v)), 0);
	CHECK_EQ(zs_cache_lookup(c, "k1", 2, buf, sizeof(buf)), (long)sizeof(v));
	CHECK(memcmp(buf, v, sizeof(v)) == 0);
	unsigned want = 0, got = 0;
	for (size_t i = 0; i < sizeof(v); i++)
		want += v[i];
	CHECK_EQ(zs_cache_lookup_cb(c, "k1", 2, cb_sum, &got), (int)sizeof(v));
	CHECK_EQ(got, want);
	CHECK_EQ(zs_cache_lookup_cb(c, "nope", 4, cb_sum, &got), -ENOENT);
	CHECK_EQ(zs_cache_insert(c, "k1", 2, "one!!", 5), 0);
	struct nest n = { c, 0 };
	CHECK_EQ(zs_cache_lookup_cb(c, "k1", 2, cb_nested, &n), 5);
	CHECK(n.ok);
	/* Erase. */
	CHECK_EQ(zs_cache_erase(c, "k1", 2), 0);
	CHECK_EQ(zs_cache_erase(c, "k1", 2), -ENOENT);
	CHECK_EQ(zs_cache_lookup(c, "k1", 2, buf, sizeof(buf)), -ENOENT);
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	CHECK_EQ(st.entries, 1);
	CHECK_EQ(st.inserts, 4);
	CHECK_EQ(st.replaced, 2);
	CHECK_EQ(st.erases, 1);
	CHECK_EQ(st.evictions, 0);
	CHECK_EQ(st.hits, 8);   /* lookups that found (ENOSPC ones included), callbacks, nested */
	CHECK_EQ(st.misses, 3);
	CHECK_EQ(st.key_bytes, 1);
	CHECK_EQ(st.blob.objects, 1);
	CHECK(st.mem_bytes == st.blob.mem_bytes + st.index_bytes);
	/* Bad arguments. */
	CHECK_EQ(zs_cache_insert(NULL, "a", 1, "b", 1), -EINVAL);
	CHECK_EQ(zs_cache_insert(c, NULL, 1, "b", 1), -EINVAL);
	CHECK_EQ(zs_cache_insert(c, "a", 0, "b", 1), -EINVAL);
	CHECK_EQ(zs_cache_insert(c, "a", 1, NULL, 1), -EINVAL);
	CHECK_EQ(zs_cache_insert(c, buf, 1025, "b", 1), -EINVAL); /* past max_key */
	size_t max = zs_blob_max_len(zs_cache_blob(c));
	unsigned char *big = calloc(1, max);
	REQUIRE(big);
	CHECK_EQ(zs_cache_insert(c, "a", 1, big, max), -ENOSPC);
	CHECK_EQ(zs_cache_insert(c, "a", 1, big, max - 3), 0); /* key + 2 bytes of header more */
	CHECK_EQ(zs_cache_lookup(c, "a", 1, big, max), (long)max - 3);
	free(big);
	CHECK_EQ(zs_cache_lookup(NULL, "a", 1, buf, 1), -EINVAL);
	CHECK_EQ(zs_cache_lookup(c, "a", 1, NULL, 5), -EINVAL);
	CHECK_EQ(zs_cache_lookup_cb(c, "a", 1, NULL, NULL), -EINVAL);
	CHECK_EQ(zs_cache_erase(c, NULL, 1), -EINVAL);
	CHECK_EQ(zs_cache_value_size(c, "a", 0), -EINVAL);
	uint64_t cur = 0;
	size_t kl;
	CHECK_EQ(zs_cache_next(NULL, &cur, buf, 1, &kl), -EINVAL);
	CHECK_EQ(zs_cache_next(c, NULL, buf, 1, &kl), -EINVAL);
	CHECK_EQ(zs_cache_next(c, &cur, NULL, 1, &kl), -EINVAL);
	zs_cache_destroy(c);
}

/* Seeded random inserts, replaces, erases and lookups against a shadow. */
static void test_shadow(void)
{
	enum { K = 3000, OPS = 60000 };
	struct zs_cache *c = mk(0, 8);
	uint32_t *ver = calloc(K, sizeof(*ver)); /* 0: absent, else the value's seed */
	uint16_t *len = calloc(K, sizeof(*len));
	REQUIRE(ver && len);
	uint64_t rs = seed;
	unsigned char v[5000], out[5000];
	char key[40];
	int bad = 0;
	long live = 0;
	for (int op = 0; op < OPS; op++) {
		uint64_t r = tu_rand(&rs);
		unsigned k = (unsigned)(r % K);
		size_t kl = (size_t)snprintf(key, sizeof(key), "key-%u-%s", k, k % 3 ? "x" : "longer-key-part");
		switch ((r >> 20) % 4) {
		case 0:
		case 1: {
			uint32_t s = (uint32_t)(r >> 32) | 1;
			size_t l = (size_t)((r >> 12) % 4500);
			gen_record(v, l, s);
			bad += zs_cache_insert(c, key, kl, v, l) != 0;
			live += !ver[k];
			ver[k] = s;
			len[k] = (uint16_t)l;
			break;
		}
		case 2: {
			int rc = zs_cache_erase(c, key, kl);
			bad += rc != (ver[k] ? 0 : -ENOENT);
			live -= !!ver[k];
			ver[k] = 0;
			break;
		}
		default: {
			long n = zs_cache_lookup(c, key, kl, out, sizeof(out));
			if (!ver[k]) {
				bad += n != -ENOENT;
			} else {
				gen_record(v, len[k], ver[k]);
				bad += n != len[k] || memcmp(v, out, len[k]) != 0;
			}
		}
		}
	}
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	CHECK_EQ(bad, 0);
	CHECK_EQ(st.entries, live);
	CHECK_EQ(st.blob.objects, live);
	/* Enumerate: each live key exactly once. */
	unsigned char *seen = calloc(K, 1);
	REQUIRE(seen);
	uint64_t cur = 0;
	size_t kl;
	long count = 0;
	int dup = 0, rc, enospc = 0;
	char small[6];
	/* A buffer too small: -ENOSPC with the length, the cursor stays. */
	rc = zs_cache_next(c, &cur, small, sizeof(small), &kl);
	if (rc == -ENOSPC) {
		enospc = 1;
		CHECK(kl > sizeof(small));
		CHECK_EQ(cur >> 32, 0); /* still in the first shard: at the key, not past it */
	}
	CHECK(enospc);
	while ((rc = zs_cache_next(c, &cur, key, sizeof(key), &kl)) == 0) {
		unsigned k;
		key[kl < sizeof(key) ? kl : sizeof(key) - 1] = 0;
		REQUIRE(sscanf(key, "key-%u-", &k) == 1 && k < K);
		dup += seen[k]++;
		bad += !ver[k];
		count++;
	}
	CHECK_EQ(rc, -ENOENT);
	CHECK_EQ(zs_cache_next(c, &cur, key, sizeof(key), &kl), -ENOENT);
	CHECK_EQ(count, live);
	CHECK_EQ(dup, 0);
	CHECK_EQ(bad, 0);
	/* Clear. */
	zs_cache_clear(c);
	zs_cache_stats(c, &st, sizeof(st));
	CHECK_EQ(st.entries, 0);
	CHECK_EQ(st.blob.objects, 0);
	CHECK_EQ(st.key_bytes, 0);
	cur = 0;
	CHECK_EQ(zs_cache_next(c, &cur, key, sizeof(key), &kl), -ENOENT);
	CHECK_EQ(zs_cache_lookup(c, "key-1-x", 7, out, sizeof(out)), -ENOENT);
	CHECK_EQ(zs_cache_insert(c, "key-1-x", 7, "v", 1), 0);
	CHECK_EQ(zs_cache_lookup(c, "key-1-x", 7, out, sizeof(out)), 1);
	free(seen);
	free(ver);
	free(len);
	zs_cache_destroy(c);
}

/* Bytes of index per entry: 200,000 16-byte keys (a RocksDB block cache's). */
static void test_index_cost(void)
{
	enum { N = 200000 };
	struct zs_cache *c = mk(0, 0);
	unsigned char key[16], v[64];
	memset(v, 'v', sizeof(v));
	uint64_t rs = seed ^ 0x1d;
	for (int i = 0; i < N; i++) {
		uint64_t a = tu_rand(&rs), b = (uint64_t)i;
		memcpy(key, &a, 8);
		memcpy(key + 8, &b, 8);
		REQUIRE(zs_cache_insert(c, key, 16, v, sizeof(v)) == 0);
	}
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	double per = (double)st.index_bytes / (double)st.entries;
	printf("index: %llu entries, %llu B of index, %.1f B per entry (key bytes in the objects: %llu)\n",
	       (unsigned long long)st.entries, (unsigned long long)st.index_bytes, per,
	       (unsigned long long)st.key_bytes);
	CHECK_EQ(st.entries, N);
	CHECK(per <= 40.0);
	CHECK_EQ(st.key_bytes, 16ull * N);
	zs_cache_destroy(c);
}

/* A value of length l for key k, version v: compressible records, or raw bytes every fifth key. */
static void moved_value(unsigned char *v, size_t l, unsigned k, uint32_t ver)
{
	gen_record(v, l, (uint64_t)k << 32 | ver);
	if (k % 5 == 0) {
		uint64_t rs = (uint64_t)k * 0x9e3779b97f4a7c15ULL + ver;
		for (size_t i = 0; i < l; i++)
			v[i] = (unsigned char)tu_rand(&rs);
	}
}

/*
 * Lookups after compaction moved the objects: the index keeps each object's
 * size beside its handle and reads the object under one pin by that size,
 * so an entry whose recorded size disagreed with its object (a replace that
 * left the old size) reads as -EIO, and one whose read went to where the
 * object was before compaction would return the wrong bytes.  Sizes from 1
 * byte to past a page (objects stitched from two pages, objects over 4 KiB,
 * a multi-page object), compressed and raw; keys of two lengths; both
 * checked and unchecked pools.
 */
static void test_after_compact(void)
{
	enum { K = 6000 };
	static const size_t lens[] = { 1, 40, 700, 1884, 3000, 4090, 5000, 9000, 20000 };
	unsigned char *v = malloc(20000), *out = malloc(20000);
	uint32_t *ver = calloc(K, sizeof(*ver));
	REQUIRE(v && out && ver);
	for (int checked = 0; checked < 2; checked++) {
		struct zs_cache_config cfg;
		zs_cache_config_init(&cfg);
		cfg.shards = 8;
		cfg.blob.pool.checked = checked;
		cfg.blob.compact_ratio_pct = -1; /* moves only when the test compacts */
		cfg.blob.compact_idle_ms = -1;
		struct zs_cache *c = NULL;
		REQUIRE(zs_cache_create(&cfg, &c, NULL, 0) == 0);
		char key[48];
		uint64_t rs = seed ^ 0xc0ac7;
		for (unsigned k = 0; k < K; k++) {
			size_t kl = (size_t)snprintf(key, sizeof(key), k % 2 ? "m-%u" : "moved-key-%u", k);
			size_t l = lens[k % (sizeof(lens) / sizeof(lens[0]))];
			moved_value(v, l, k, 1);
			REQUIRE(zs_cache_insert(c, key, kl, v, l) == 0);
			ver[k] = 1;
		}
		/* Three in four go, and a third of the rest get a value of another length:
		 * the holes make compaction move most of what stays. */
		for (unsigned k = 0; k < K; k++) {
			size_t kl = (size_t)snprintf(key, sizeof(key), k % 2 ? "m-%u" : "moved-key-%u", k);
			uint64_t r = tu_rand(&rs);
			if (r % 4) {
				CHECK_EQ(zs_cache_erase(c, key, kl), 0);
				ver[k] = 0;
			} else if (r % 3 == 0) {
				size_t l = lens[(k + 3) % (sizeof(lens) / sizeof(lens[0]))];
				moved_value(v, l, k, 2);
				CHECK_EQ(zs_cache_insert(c, key, kl, v, l), 0);
				ver[k] = 2;
			}
		}
		unsigned long pages = zs_blob_compact(zs_cache_blob(c));
		printf("after compact (checked %d): %lu pages freed\n", checked, pages);
		CHECK(pages > 0);
		int wrong = 0;
		for (unsigned k = 0; k < K; k++) {
			size_t kl = (size_t)snprintf(key, sizeof(key), k % 2 ? "m-%u" : "moved-key-%u", k);
			size_t l = lens[(k + (ver[k] == 2 ? 3 : 0)) % (sizeof(lens) / sizeof(lens[0]))];
			if (!ver[k]) {
				wrong += zs_cache_lookup(c, key, kl, out, 20000) != -ENOENT;
				wrong += zs_cache_value_size(c, key, kl) != -ENOENT;
				continue;
			}
			moved_value(v, l, k, ver[k]);
			long n = zs_cache_lookup(c, key, kl, out, 20000);
			wrong += n != (long)l || memcmp(out, v, l) != 0;
			wrong += zs_cache_value_size(c, key, kl) != (long)l;
			unsigned want = 0, got = 0;
			for (size_t i = 0; i < l; i++)
				want += v[i];
			wrong += zs_cache_lookup_cb(c, key, kl, cb_sum, &got) != (int)l || got != want;
			if (l > 1)
				wrong += zs_cache_lookup(c, key, kl, out, l - 1) != -ENOSPC;
		}
		if (wrong)
			printf("after compact (checked %d): %d wrong results\n", checked, wrong);
		CHECK_EQ(wrong, 0);
		zs_cache_destroy(c);
	}
	free(v);
	free(out);
	free(ver);
}

/* A capacity: inserts evict, the capacity holds, looked-up entries stay. */
static void test_eviction(void)
{
	const size_t cap = 8 << 20;
	struct zs_cache *c = mk(cap, 8);
	enum { HOT = 300, N = 30000 };
	unsigned char v[2500], out[2500];
	char key[32];
	uint64_t rs = seed ^ 0xe7;
	for (int i = 0; i < HOT; i++) {
		size_t kl = (size_t)snprintf(key, sizeof(key), "hot-%d", i);
		gen_record(v, sizeof(v), (uint64_t)i);
		REQUIRE(zs_cache_insert(c, key, kl, v, sizeof(v)) == 0);
	}
	size_t worst = 0;
	for (int i = 0; i < N; i++) {
		size_t kl = (size_t)snprintf(key, sizeof(key), "cold-%d", i);
		size_t l = 1000 + tu_rand(&rs) % 1500;
		gen_record(v, l, 1000000 + (uint64_t)i);
		REQUIRE(zs_cache_insert(c, key, kl, v, l) == 0);
		/* The hot set is looked up all the time. */
		int h = (int)(tu_rand(&rs) % HOT);
		kl = (size_t)snprintf(key, sizeof(key), "hot-%d", h);
		zs_cache_lookup(c, key, kl, out, sizeof(out));
		if (i % 1000 == 999) {
			struct zs_cache_stats st;
			zs_cache_stats(c, &st, sizeof(st));
			size_t held = st.mem_bytes - st.blob.cached_bytes;
			if (held > worst)
				worst = held;
		}
	}
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	int hot_left = 0;
	for (int i = 0; i < HOT; i++) {
		size_t kl = (size_t)snprintf(key, sizeof(key), "hot-%d", i);
		gen_record(v, sizeof(v), (uint64_t)i);
		long n = zs_cache_lookup(c, key, kl, out, sizeof(out));
		hot_left += n == (long)sizeof(v) && memcmp(out, v, sizeof(v)) == 0;
	}
	double cold_frac = (double)(st.entries - (uint64_t)hot_left) / N;
	printf("eviction: capacity %zu B, worst held %zu B (%+.2f%%), %llu entries, %llu evictions, "
	       "%d/%d hot entries kept, %.1f%% of cold ones\n",
	       cap, worst, 100.0 * ((double)worst - (double)cap) / (double)cap,
	       (unsigned long long)st.entries, (unsigned long long)st.evictions, hot_left, HOT,
	       100 * cold_frac);
	CHECK(st.evictions > 0);
	CHECK(worst <= cap + 64 * 1024);
	CHECK(st.mem_bytes - st.blob.cached_bytes <= cap + 64 * 1024);
	CHECK(hot_left >= HOT * 9 / 10);
	CHECK(cold_frac < 0.5);
	zs_cache_destroy(c);
}

int main(void)
{
	seed = tu_seed("test_cache");
	test_config();
	test_basic();
	test_shadow();
	test_index_cost();
	test_after_compact();
	test_eviction();
	return tu_done();
}
