/*
 * The blob store (zs/blob.h): every call and every error path, each codec
 * (with and without a trained dictionary) over lengths from 0 to the limit,
 * the raw fallback, the header's cost, zero-copy reads (nested too), the
 * memory count against the process's RSS growth (within 3%), the memory
 * limit, and the compaction policy (steps from calls, the idle thread, and
 * off).  Seeded: the seed is printed, ZS_SEED reruns it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blob_gen.h"
#include "idle.h"
#include "testutil.h"
#include "zs/blob.h"
#include "must.h"

#include "sanitizer.h"
#define BLOB_ASAN TU_ASAN

static uint64_t seed;

static void fill_random(unsigned char *b, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)tu_rand(s);
}

static struct zs_blob *mk(enum zs_blob_codec codec, int level, const void *dict, size_t dl)
{
	struct zs_blob_config cfg;
	zs_blob_config_init(&cfg);
	cfg.codec = codec;
	cfg.level = level;
	cfg.dict = dict;
	cfg.dict_len = dl;
	struct zs_blob *s = NULL;
	int rc = zs_blob_create(&cfg, &s, NULL, 0);
	CHECK_EQ(rc, 0);
	REQUIRE(s);
	return s;
}

static void test_config_errors(void)
{
	struct zs_blob_config cfg;
	struct zs_blob *s = (struct zs_blob *)1;
	CHECK_EQ(zs_blob_create(NULL, NULL, NULL, 0), -EINVAL);
#define BAD(stmt)                                                     \
	do {                                                          \
		zs_blob_config_init(&cfg);                            \
		stmt;                                                 \
		s = (struct zs_blob *)1;                              \
		CHECK_EQ(zs_blob_create(&cfg, &s, NULL, 0), -EINVAL);          \
		CHECK(s == NULL);                                     \
	} while (0)
	BAD(cfg.codec = (enum zs_blob_codec)7);
	BAD(cfg.reserved[2] = 1);
	BAD(cfg.struct_size = 12);
	BAD(cfg.compact_ratio_pct = -2);
	BAD(cfg.compact_ratio_pct = 1001);
	BAD(cfg.compact_idle_ms = -5);
	BAD(cfg.compact_budget = 5000);
	BAD(cfg.compact_min_bytes = ((size_t)1 << 41));
	BAD((cfg.codec = ZS_BLOB_LZ4HC, cfg.dict = "abc", cfg.dict_len = 3));
	BAD((cfg.codec = ZS_BLOB_NONE, cfg.dict = "abc", cfg.dict_len = 3));
	BAD(cfg.dict_len = 10);
	BAD((cfg.codec = ZS_BLOB_ZSTD, cfg.level = 1000));
	BAD((cfg.codec = ZS_BLOB_NONE, cfg.level = 1));
	BAD(cfg.min_compress = 1 << 20);
	BAD(cfg.pool.max_object_size = 17 * 4096);
	BAD(cfg.pool.page_size = 3000);
	BAD(cfg.pool.max_chain = 99); /* refused by the pool */
#undef BAD
	/* NULL config: the defaults. */
	CHECK_EQ(zs_blob_create(NULL, &s, NULL, 0), 0);
	CHECK_EQ(zs_blob_max_len(s), 16 * 4096 - 4);
	zs_blob_destroy(s);
	zs_blob_destroy(NULL);
	CHECK_EQ(zs_blob_max_len(NULL), 0);
	CHECK_EQ(zs_blob_mem_bytes(NULL), 0);
	CHECK(zs_blob_pool(NULL) == NULL);
	CHECK_EQ(zs_blob_compact(NULL), 0);
	struct zs_blob_stats st;
	memset(&st, 0xff, sizeof(st));
	zs_blob_stats(NULL, &st, sizeof(st));
	CHECK_EQ(st.objects, 0);
	/* The two zsmalloc calls the store is built on, at their edges. */
	unsigned cur = 5;
	size_t cached = 7;
	CHECK_EQ(zs_compact_step(NULL, &cur, 1), 0);
	CHECK_EQ(zs_pool_mem_bytes(NULL, &cached), 0);
	CHECK_EQ(cached, 0);
	struct zs_pool_config pc;
	zs_pool_config_init_app(&pc);
	struct zs_pool *p = must_pool_create(&pc);
	REQUIRE(p);
	CHECK_EQ(zs_compact_step(p, NULL, 1), 0);
	size_t empty = zs_pool_mem_bytes(p, NULL);
	CHECK(empty > 0 && empty < 256 * 1024);
	unsigned long hs[2000];
	static unsigned char src[1100];
	memset(src, 'z', sizeof(src));
	for (int i = 0; i < 2000; i++)
		hs[i] = zs_malloc_write(p, src, 40 + i % 1000);
	size_t full = zs_pool_mem_bytes(p, &cached);
	CHECK(full >= empty + zs_get_total_pages(p) * 4096);
	for (int i = 0; i < 2000; i += 2)
		zs_free(p, hs[i]);
	/* The thread's spare emptied zspages back first (a trim compacts nothing), so the pages
	 * the steps give back are the ones they report. */
	zs_pool_trim(p);
	unsigned long before = zs_get_total_pages(p), freed = 0;
	int steps = 0;
	cur = 0;
	do {
		freed += zs_compact_step(p, &cur, 1);
		steps++;
	} while (cur && steps < 10000);
	CHECK_EQ(cur, 0);
	CHECK(steps > 1);                 /* one class copy a step: several steps a pass */
	CHECK(freed > 0);
	CHECK_EQ(zs_get_total_pages(p), before - freed);
	for (int i = 1; i < 2000; i += 2)
		zs_free(p, hs[i]);
	zs_destroy_pool(p);
}

/* Round trips of every length class, compressible and not. */
static void roundtrip(struct zs_blob *s, const char *what)
{
	static const size_t lens[] = { 0, 1, 15, 16, 17, 63, 64, 100, 1000, 4091, 4096, 5000, 20000, 0 };
	size_t max = zs_blob_max_len(s);
	unsigned char *src = malloc(max), *dst = malloc(max + 1);
	REQUIRE(src && dst);
	uint64_t rs = seed;
	int bad = 0;
	for (int kind = 0; kind < 2; kind++) {
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t len = k == sizeof(lens) / sizeof(lens[0]) - 1 ? max : lens[k];
			if (kind)
				fill_random(src, len, &rs);
			else
				gen_record(src, len, seed + k);
			unsigned long h = zs_blob_put(s, src, len);
			if (ZS_IS_ERR(h)) {
				fprintf(stderr, "%s: put %zu failed %d\n", what, len, ZS_ERR(h));
				bad++;
				continue;
			}
			bad += zs_blob_size(s, h) != (long)len;
			memset(dst, 0xAB, max + 1);
			bad += zs_blob_get(s, h, dst, max + 1) != (long)len;
			bad += memcmp(src, dst, len) != 0;
			bad += dst[len] != 0xAB; /* nothing written past the value */
			bad += zs_blob_free(s, h) != 0;
		}
	}
	if (bad)
		fprintf(stderr, "%s: %d round-trip failures\n", what, bad);
	CHECK_EQ(bad, 0);
	free(src);
	free(dst);
}

static void test_codecs(void)
{
	struct zs_blob *s;
	s = mk(ZS_BLOB_NONE, 0, NULL, 0);
	roundtrip(s, "none");
	zs_blob_destroy(s);
	s = mk(ZS_BLOB_LZ4, 0, NULL, 0);
	roundtrip(s, "lz4");
	zs_blob_destroy(s);
	s = mk(ZS_BLOB_LZ4, 8, NULL, 0);
	roundtrip(s, "lz4:8");
	zs_blob_destroy(s);
	s = mk(ZS_BLOB_LZ4HC, 9, NULL, 0);
	roundtrip(s, "lz4hc");
	zs_blob_destroy(s);
	s = mk(ZS_BLOB_ZSTD, 3, NULL, 0);
	roundtrip(s, "zstd");
	zs_blob_destroy(s);
	s = mk(ZS_BLOB_ZSTD, -5, NULL, 0);
	roundtrip(s, "zstd:-5");
	zs_blob_destroy(s);
}

/* Raw fallback and the header's cost, read from the statistics. */
static void test_raw_and_header(void)
{
	struct zs_blob *s = mk(ZS_BLOB_LZ4, 0, NULL, 0);
	unsigned char buf[1000];
	uint64_t rs = seed ^ 1;
	fill_random(buf, sizeof(buf), &rs);
	unsigned long h = zs_blob_put(s, buf, sizeof(buf));
	REQUIRE(!ZS_IS_ERR(h));
	struct zs_blob_stats st;
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.objects, 1);
	CHECK_EQ(st.raw_objects, 1);          /* random bytes do not compress: kept raw */
	CHECK_EQ(st.value_bytes, 1000);
	CHECK_EQ(st.stored_bytes, 1000 + 3);  /* tag + 2-byte varint length */
	zs_blob_free(s, h);
	gen_record(buf, sizeof(buf), 7);
	h = zs_blob_put(s, buf, sizeof(buf));
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.raw_objects, 0);
	CHECK(st.stored_bytes < 700);         /* JSON-like text: compressed */
	zs_blob_free(s, h);
	/* Shorter than min_compress: raw, however compressible. */
	memset(buf, 'a', 60);
	h = zs_blob_put(s, buf, 60);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.raw_objects, 1);
	CHECK_EQ(st.stored_bytes, 62);
	zs_blob_free(s, h);
	/* An empty value: padded to the smallest object. */
	h = zs_blob_put(s, NULL, 0);
	CHECK(!ZS_IS_ERR(h) && h != 0);
	CHECK_EQ(zs_blob_size(s, h), 0);
	CHECK_EQ(zs_blob_get(s, h, NULL, 0), 0);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.stored_bytes, 16);
	zs_blob_free(s, h);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.objects, 0);
	CHECK_EQ(st.stored_bytes, 0);
	zs_blob_destroy(s);
}

static void test_errors(void)
{
	struct zs_blob *s = mk(ZS_BLOB_LZ4, 0, NULL, 0), *t = mk(ZS_BLOB_LZ4, 0, NULL, 0);
	size_t max = zs_blob_max_len(s);
	unsigned char *big = calloc(1, max + 2);
	REQUIRE(big);
	CHECK_EQ(ZS_ERR(zs_blob_put(s, big, max + 1)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zs_blob_put(s, NULL, 5)), -EINVAL);
	CHECK_EQ(ZS_ERR(zs_blob_put(NULL, big, 5)), -EINVAL);
	unsigned char v[300];
	gen_record(v, sizeof(v), 3);
	unsigned long h = zs_blob_put(s, v, sizeof(v));
	REQUIRE(!ZS_IS_ERR(h));
	unsigned char small[299];
	memset(small, 0x5a, sizeof(small));
	CHECK_EQ(zs_blob_get(s, h, small, sizeof(small)), -ENOSPC);
	int untouched = 1;
	for (size_t i = 0; i < sizeof(small); i++)
		untouched &= small[i] == 0x5a;
	CHECK(untouched);
	CHECK_EQ(zs_blob_get(s, h, NULL, 10), -EINVAL);
	CHECK_EQ(zs_blob_get(NULL, h, small, 10), -EINVAL);
	CHECK_EQ(zs_blob_size(NULL, h), -EINVAL);
	CHECK_EQ(zs_blob_read(s, h, NULL, NULL), -EINVAL);
	/* Foreign: a handle of another store. */
	unsigned long ht = zs_blob_put(t, v, sizeof(v));
	CHECK_EQ(zs_blob_size(s, ht), -EINVAL);
	CHECK_EQ(zs_blob_get(s, ht, big, max), -EINVAL);
	CHECK_EQ(zs_blob_free(s, ht), -EINVAL);
	CHECK_EQ(zs_blob_size(t, ht), (long)sizeof(v)); /* and it is left alone */
	/* Made up and 0. */
	CHECK_EQ(zs_blob_size(s, 0), -EINVAL);
	CHECK_EQ(zs_blob_size(s, 12345), -EINVAL);
	CHECK_EQ(zs_blob_free(s, (unsigned long)-EINVAL), -EINVAL);
	/* Stale: freed, then freed again or read. */
	CHECK_EQ(zs_blob_free(s, h), 0);
	CHECK_EQ(zs_blob_free(s, h), -EINVAL);
	CHECK_EQ(zs_blob_size(s, h), -EINVAL);
	CHECK_EQ(zs_blob_get(s, h, big, max), -EINVAL);
	CHECK_EQ(zs_blob_free(NULL, h), -EINVAL);
	struct zs_blob_stats st;
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.objects, 0);
	free(big);
	zs_blob_destroy(s);
	zs_blob_destroy(t);
}

struct rd {
	struct zs_blob *s;
	unsigned long other;
	const unsigned char *want;
	size_t len;
	int nested_ok;
};

static int nested_cb(const void *d, size_t len, void *arg)
{
	struct rd *r = arg;
	return len == r->len && memcmp(d, r->want, len) == 0 ? 7 : -1;
}

static int outer_cb(const void *d, size_t len, void *arg)
{
	struct rd *r = arg;
	unsigned char copy[3000];
	if (len > sizeof(copy))
		return -1;
	memcpy(copy, d, len);
	/* A read inside the callback: its own buffer, ours must stay intact. */
	struct rd inner = { r->s, 0, r->want, r->len, 0 };
	r->nested_ok = zs_blob_read(r->s, r->other, nested_cb, &inner) == 7;
	return memcmp(copy, d, len) == 0 && len == r->len && memcmp(d, r->want, len) == 0 ? 42 : -1;
}

static void test_read_cb(void)
{
	struct zs_blob *s = mk(ZS_BLOB_ZSTD, 0, NULL, 0);
	unsigned char v[2500], w[100];
	gen_record(v, sizeof(v), 11);
	uint64_t rs = seed ^ 5;
	fill_random(w, sizeof(w), &rs);
	unsigned long h1 = zs_blob_put(s, v, sizeof(v)), h2 = zs_blob_put(s, v, sizeof(v));
	unsigned long h3 = zs_blob_put(s, w, sizeof(w));
	struct rd r = { s, h2, v, sizeof(v), 0 };
	CHECK_EQ(zs_blob_read(s, h1, outer_cb, &r), 42);
	CHECK(r.nested_ok);
	struct rd r3 = { s, 0, w, sizeof(w), 0 };
	CHECK_EQ(zs_blob_read(s, h3, nested_cb, &r3), 7); /* raw: in place */
	zs_blob_free(s, h3);
	CHECK_EQ(zs_blob_read(s, h3, nested_cb, &r3), -EINVAL);
	zs_blob_destroy(s);
}

static void test_dict(void)
{
	enum { N = 400, L = 600 };
	unsigned char *samples = malloc((size_t)N * L);
	size_t sizes[N];
	REQUIRE(samples);
	for (int i = 0; i < N; i++) {
		gen_record(samples + (size_t)i * L, L, 1000 + (uint64_t)i);
		sizes[i] = L;
	}
	unsigned char dict[16384];
	CHECK_EQ(zs_blob_dict_train(NULL, sizes, N, dict, sizeof(dict)), -EINVAL);
	CHECK_EQ(zs_blob_dict_train(samples, sizes, 0, dict, sizeof(dict)), -EINVAL);
	CHECK_EQ(zs_blob_dict_train(samples, sizes, N, dict, 100), -EINVAL);
	long dl = zs_blob_dict_train(samples, sizes, N, dict, sizeof(dict));
	CHECK(dl > 0);
	if (dl <= 0) {
		free(samples);
		return;
	}
	struct zs_blob *plain = mk(ZS_BLOB_ZSTD, 3, NULL, 0), *withd = mk(ZS_BLOB_ZSTD, 3, dict, (size_t)dl);
	roundtrip(withd, "zstd+dict");
	unsigned char v[L], out[L];
	for (int i = 0; i < 200; i++) {
		gen_record(v, L, 5000 + (uint64_t)i);
		zs_blob_put(plain, v, L);
		unsigned long h = zs_blob_put(withd, v, L);
		CHECK_EQ(zs_blob_get(withd, h, out, L), L);
	}
	CHECK(memcmp(v, out, L) == 0);
	struct zs_blob_stats a, b;
	zs_blob_stats(plain, &a, sizeof(a));
	zs_blob_stats(withd, &b, sizeof(b));
	printf("dict: 200 records of %d B: %llu B stored without, %llu with a %ld B dictionary\n", L,
	       (unsigned long long)a.stored_bytes, (unsigned long long)b.stored_bytes, dl);
	CHECK(b.stored_bytes < a.stored_bytes * 3 / 4);
	/* The dictionary was copied: the caller's bytes may go. */
	memset(dict, 0, sizeof(dict));
	unsigned long h = zs_blob_put(withd, v, L);
	CHECK_EQ(zs_blob_get(withd, h, out, L), L);
	CHECK(memcmp(v, out, L) == 0);
	/* Raw bytes as an lz4 dictionary. */
	struct zs_blob *l = mk(ZS_BLOB_LZ4, 0, samples, 8192);
	roundtrip(l, "lz4+dict");
	zs_blob_destroy(l);
	zs_blob_destroy(plain);
	zs_blob_destroy(withd);
	free(samples);
}

/* zs_blob_mem_bytes against the process's RSS growth after a fill. */
static void test_mem_vs_rss(void)
{
	if (BLOB_ASAN || !IDLE_RSS_MEANINGFUL) {
		printf("mem vs rss: skipped (sanitizer: RSS is not the program's)\n");
		return;
	}
	/* Large enough that the partly written last zspage of each class copy (allocated,
	 * counted, not yet all resident: up to a chain of pages each) stays under 2%. */
	enum { N = 80000 };
	unsigned long *hs = calloc(N, sizeof(*hs));
	unsigned char *v = malloc(4096);
	REQUIRE(hs && v);
	memset(hs, 1, N * sizeof(*hs)); /* touched before the baseline */
	/* Warm the per-thread buffers and the library's one-time state in another store. */
	struct zs_blob *w = mk(ZS_BLOB_LZ4, 0, NULL, 0);
	gen_record(v, 4000, 1);
	zs_blob_free(w, zs_blob_put(w, v, 4000));
	size_t before = idle_rss();
	struct zs_blob *s = mk(ZS_BLOB_LZ4, 0, NULL, 0);
	uint64_t rs = seed ^ 9;
	for (int i = 0; i < N; i++) {
		size_t len = 200 + tu_rand(&rs) % 3300;
		gen_record(v, len, (uint64_t)i);
		hs[i] = zs_blob_put(s, v, len);
		REQUIRE(!ZS_IS_ERR(hs[i]));
	}
	size_t after = idle_rss();
	size_t mem = zs_blob_mem_bytes(s);
	double growth = (double)after - (double)before;
	double err = ((double)mem - growth) / growth;
	printf("mem vs rss: %d objects, RSS grew %.2f MiB, zs_blob_mem_bytes %.2f MiB (%+.2f%%)\n", N,
	       growth / IDLE_MIB, (double)mem / IDLE_MIB, err * 100);
	CHECK(err < 0.03 && err > -0.03);
	zs_blob_destroy(s);
	zs_blob_destroy(w);
	free(hs);
	free(v);
}

static void test_limit(void)
{
	struct zs_blob_config cfg;
	zs_blob_config_init(&cfg);
	cfg.mem_limit = 4 << 20;
	struct zs_blob *s = NULL;
	REQUIRE(zs_blob_create(&cfg, &s, NULL, 0) == 0);
	unsigned char v[3000];
	uint64_t rs = seed ^ 3;
	int n = 0;
	unsigned long h;
	for (;;) {
		size_t len = 200 + tu_rand(&rs) % 2800;
		gen_record(v, len, (uint64_t)n);
		h = zs_blob_put(s, v, len);
		if (ZS_IS_ERR(h))
			break;
		n++;
		REQUIRE(n < 1000000);
	}
	CHECK_EQ(ZS_ERR(h), -ENOMEM);
	size_t mem = zs_blob_mem_bytes(s);
	struct zs_blob_stats st;
	zs_blob_stats(s, &st, sizeof(st));
	printf("limit: 4 MiB limit, %d objects stored, %zu B held (limit %+ld B), %llu B of it cached "
	       "for reuse, %llu refused\n", n, mem, (long)mem - (long)cfg.mem_limit,
	       (unsigned long long)st.cached_bytes, (unsigned long long)st.limit_refusals);
	/* Passed by at most the last allocation's zspage (8 pages at the defaults), less the cache. */
	CHECK(mem - st.cached_bytes <= cfg.mem_limit + 8 * 4096);
	CHECK(st.cached_bytes <= 256 * 4096);
	CHECK(mem > cfg.mem_limit - cfg.mem_limit / 10);
	CHECK_EQ(st.limit_refusals, 1);
	zs_blob_destroy(s);
}

/* Fill, free 60% in random order, with the policy given; returns pages before/after. */
static void churn(struct zs_blob *s, unsigned long *hs, int n, uint64_t *rs)
{
	unsigned char v[3500];
	for (int i = 0; i < n; i++) {
		size_t len = 200 + tu_rand(rs) % 3300;
		gen_record(v, len, (uint64_t)i);
		hs[i] = zs_blob_put(s, v, len);
		REQUIRE(!ZS_IS_ERR(hs[i]));
	}
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(tu_rand(rs) % (uint64_t)(i + 1));
		unsigned long t = hs[i];
		hs[i] = hs[j];
		hs[j] = t;
	}
	for (int i = 0; i < n * 6 / 10; i++) {
		CHECK_EQ(zs_blob_free(s, hs[i]), 0);
		hs[i] = 0;
	}
}

static int check_live(struct zs_blob *s, unsigned long *hs, int n)
{
	(void)s;
	int bad = 0;
	for (int i = 0; i < n; i++)
		if (hs[i] && zs_blob_size(s, hs[i]) < 200)
			bad++;
	return bad;
}

static void test_compaction_policy(void)
{
	enum { N = 20000 };
	unsigned long *hs = calloc(N, sizeof(*hs));
	REQUIRE(hs);
	struct zs_blob_config cfg;
	struct zs_blob_stats st;
	uint64_t rs = seed ^ 77;

	/* Off: no step from calls, no thread. */
	zs_blob_config_init(&cfg);
	cfg.compact_ratio_pct = -1;
	cfg.compact_idle_ms = -1;
	struct zs_blob *s = NULL;
	REQUIRE(zs_blob_create(&cfg, &s, NULL, 0) == 0);
	churn(s, hs, N, &rs);
	usleep(300000);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.compact_steps, 0);
	unsigned long frag_pages = st.pool_pages;
	CHECK(st.freed_bytes > 0);
	unsigned long f = zs_blob_compact(s);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK(f > 0);
	CHECK_EQ(st.freed_bytes, 0);
	CHECK_EQ(st.compact_passes, 1);
	unsigned long compact_pages = st.pool_pages;
	printf("policy off: %lu pages after the frees, %lu after zs_blob_compact\n", frag_pages, compact_pages);
	CHECK_EQ(check_live(s, hs, N), 0);
	zs_blob_destroy(s);

	/* From calls: steps during the frees, in a budget of 1 class copy, several per pass. */
	zs_blob_config_init(&cfg);
	cfg.compact_idle_ms = -1;
	cfg.compact_budget = 1;
	REQUIRE(zs_blob_create(&cfg, &s, NULL, 0) == 0);
	churn(s, hs, N, &rs);
	zs_blob_stats(s, &st, sizeof(st));
	printf("policy calls: %llu steps, %llu passes, %llu pages compacted, %llu pages left\n",
	       (unsigned long long)st.compact_steps, (unsigned long long)st.compact_passes,
	       (unsigned long long)st.pages_compacted, (unsigned long long)st.pool_pages);
	CHECK(st.compact_passes >= 1);
	CHECK(st.compact_steps > st.compact_passes * 2);
	CHECK(st.pool_pages < frag_pages);
	CHECK_EQ(check_live(s, hs, N), 0);
	zs_blob_destroy(s);

	/* Idle: nothing from calls, the thread compacts once calls stop. */
	zs_blob_config_init(&cfg);
	cfg.compact_ratio_pct = -1;
	cfg.compact_idle_ms = 50;
	REQUIRE(zs_blob_create(&cfg, &s, NULL, 0) == 0);
	churn(s, hs, N, &rs);
	zs_blob_stats(s, &st, sizeof(st));
	CHECK_EQ(st.compact_steps, 0);
	unsigned long idle_before = st.pool_pages;
	for (int i = 0; i < 40 && (zs_blob_stats(s, &st, sizeof(st)), st.compact_passes == 0); i++)
		usleep(50000);
	zs_blob_stats(s, &st, sizeof(st));
	printf("policy idle: %lu pages after the frees, %llu after idle compaction (%llu passes)\n",
	       idle_before, (unsigned long long)st.pool_pages, (unsigned long long)st.compact_passes);
	CHECK(st.compact_passes >= 1);
	CHECK(st.pool_pages < idle_before * 3 / 4);
	CHECK_EQ(check_live(s, hs, N), 0);
	zs_blob_destroy(s);
	free(hs);
}

int main(void)
{
	seed = tu_seed("test_blob");
	test_config_errors();
	test_codecs();
	test_raw_and_header();
	test_errors();
	test_read_cb();
	test_dict();
	test_mem_vs_rss();
	test_limit();
	test_compaction_policy();
	return tu_done();
}
