/*
 * Backend interface tests, run for every kind compiled in: a seeded
 * model-based run with per-object checksums through zs_backend_*, in checked
 * and unchecked mode, at 4K and 16K; bad input (size 0, too large, bad,
 * foreign and double-freed handles) returns errors in checked mode; registry
 * errors; stats agree with the model.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "zs/backend.h"
#include "must.h"
#include "backend/backend_internal.h" /* swaps a backend's ops to inject faults */

static void fill(unsigned char *buf, size_t len, uint64_t key)
{
	uint64_t s = key;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tu_rand(&s);
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static struct zs_backend *mk(const char *kind, size_t ps, int checked)
{
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	c.kind = kind;
	c.page_size = ps;
	c.checked = checked;
	struct zs_backend *b = try_backend_create(&c);
	if (!b)
		fprintf(stderr, "create %s/%zu failed: %s\n", kind, ps, strerror(errno));
	REQUIRE(b);
	return b;
}

struct obj {
	unsigned long h;
	size_t size;
	uint64_t key;
};

static void model(const char *kind, size_t ps, int checked, uint64_t seed)
{
	struct zs_backend *b = mk(kind, ps, checked);
	CHECK(!strcmp(b->kind, kind));
	CHECK(!strcmp(b->ops->kind, kind));
	CHECK_EQ(b->page_size, ps);
	CHECK_EQ(zs_backend_zspool(b) != NULL, !strcmp(kind, "zsmalloc"));
	enum { CAP = 3000, OPS = 20000 };
	struct obj *o = calloc(CAP, sizeof(*o));
	unsigned char *buf = malloc(ps), *want = malloc(ps), *local = malloc(ps);
	int live = 0;
	size_t bytes = 0;
	uint64_t s = seed;
	for (int op = 0; op < OPS; op++) {
		uint64_t r = tu_rand(&s) % 100;
		if (live < CAP && (live == 0 || r < 55)) {
			size_t size = tu_rand(&s) % 3 ? 1 + tu_rand(&s) % (ps / 2) : 1 + tu_rand(&s) % ps;
			uint64_t key = tu_rand(&s);
			fill(buf, size, key);
			/* Half in one call (zs_malloc_write for zsmalloc, malloc + write otherwise). */
			unsigned long h;
			if (key & 1) {
				h = zs_backend_malloc_write(b, buf, size);
				REQUIRE(!ZS_IS_ERR(h));
			} else {
				h = zs_backend_malloc(b, size);
				REQUIRE(!ZS_IS_ERR(h));
				CHECK_EQ(zs_backend_write(b, h, buf, size), 0);
			}
			o[live++] = (struct obj){ h, size, key };
			bytes += size;
		} else if (r < 85) {
			int i = (int)(tu_rand(&s) % (uint64_t)live);
			/* Exercise the deferred path where a kind has one. */
			int rc = tu_rand(&s) % 4 ? zs_backend_free(b, o[i].h)
						 : zs_backend_free_deferred(b, o[i].h);
			CHECK_EQ(rc, 0);
			bytes -= o[i].size;
			o[i] = o[--live];
		} else {
			int i = (int)(tu_rand(&s) % (uint64_t)live);
			void *m = zs_backend_read_begin(b, o[i].h, o[i].size, local);
			REQUIRE(m);
			fill(want, o[i].size, o[i].key);
			CHECK(memcmp(m, want, o[i].size) == 0);
			zs_backend_read_end(b, o[i].h, o[i].size, m);
		}
		if (op == OPS / 2) {
			zs_backend_flush(b);
			zs_backend_compact(b);
		}
	}
	zs_backend_flush(b);
	struct zs_backend_stats st;
	zs_backend_stats(b, &st, sizeof(st));
	CHECK_EQ(st.objects, live);
	if (checked)
		CHECK_EQ(st.object_bytes, bytes);
	/* Capabilities, so that callers never compare kind names: the pool kinds have pages,
	 * classes and free on destroy, only zsmalloc compacts (zblock moves nothing),
	 * jemalloc frees its arena on destroy, glibc and mimalloc have none. */
	int pool_kind = !strcmp(kind, "zsmalloc") || !strcmp(kind, "zblock");
	unsigned caps = zs_backend_caps(b);
	CHECK_EQ(!!(caps & ZS_BACKEND_CAP_PAGES), pool_kind);
	CHECK_EQ(!!(caps & ZS_BACKEND_CAP_CLASSES), pool_kind);
	CHECK_EQ(!!(caps & ZS_BACKEND_CAP_COMPACT), !strcmp(kind, "zsmalloc"));
	CHECK_EQ(!!(caps & ZS_BACKEND_CAP_FREES_ON_DESTROY), pool_kind || !strcmp(kind, "jemalloc"));
	CHECK_EQ(zs_backend_total_pages(b), st.pages);
	CHECK_EQ(zs_backend_class_count(b) > 0, pool_kind);
	CHECK_EQ(zs_backend_lookup_class(b, 100) >= 0, pool_kind);
	if (pool_kind)
		CHECK(zs_backend_lookup_class(b, 100) < zs_backend_class_count(b));
	if (pool_kind) {
		CHECK(st.pages > 0);
		CHECK_EQ(st.mem_bytes, st.pages * ps);
		CHECK_EQ(zs_backend_mem_bytes(b, &st), st.pages * ps);
		/* Pool kinds never hold less than the bytes they store. */
		CHECK(st.mem_bytes >= bytes);
	} else {
		CHECK_EQ(zs_backend_mem_bytes(b, &st), st.mem_bytes ? st.mem_bytes : st.object_bytes);
	}
	zs_backend_compact(b);
	for (int i = 0; i < live; i++) {
		void *m = zs_backend_read_begin(b, o[i].h, o[i].size, local);
		REQUIRE(m);
		fill(want, o[i].size, o[i].key);
		CHECK(memcmp(m, want, o[i].size) == 0);
		zs_backend_read_end(b, o[i].h, o[i].size, m);
		if (i % 2)
			CHECK_EQ(zs_backend_free(b, o[i].h), 0);
	}
	/* The other half is left live: destroy must free it. */
	zs_backend_destroy(b);
	free(o);
	free(buf);
	free(want);
	free(local);
}

static void bad_input(const char *kind, size_t ps)
{
	struct zs_backend *b = mk(kind, ps, 1), *other = mk(kind, ps, 1);
	unsigned char buf[64] = { 0 }, local[64];
	CHECK(ZS_IS_ERR(zs_backend_malloc(b, 0)));
	CHECK_EQ(ZS_ERR(zs_backend_malloc(b, 0)), -EINVAL);
	CHECK(ZS_IS_ERR(zs_backend_malloc(b, ps + 1)));
	CHECK(ZS_IS_ERR(zs_backend_malloc(b, (size_t)1 << 40)));
	/* Past the largest object is -ENOSPC for every kind (zsmalloc.h's codes). */
	CHECK_EQ(ZS_ERR(zs_backend_malloc(b, ps + 1)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zs_backend_malloc(b, (size_t)1 << 40)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zs_backend_malloc(b, SIZE_MAX)), -ENOSPC);
	/* The one-call store refuses as malloc does, checked or not, and allocates nothing. */
	struct zs_backend *u = mk(kind, ps, 0);
	struct zs_backend *bu[2] = { b, u };
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(ZS_ERR(zs_backend_malloc_write(bu[i], buf, 0)), -EINVAL);
		CHECK_EQ(ZS_ERR(zs_backend_malloc_write(bu[i], local, ps + 1)), -ENOSPC);
		struct zs_backend_stats su;
		zs_backend_stats(bu[i], &su, sizeof(su));
		CHECK_EQ(su.objects, 0);
		CHECK_EQ(zs_backend_total_pages(bu[i]), 0);
	}
	zs_backend_destroy(u);
	unsigned long h = zs_backend_malloc(b, 40), f = zs_backend_malloc(other, 40);
	REQUIRE(!ZS_IS_ERR(h) && !ZS_IS_ERR(f));
	CHECK_EQ(zs_backend_write(b, h, buf, 40), 0);
	CHECK_EQ(zs_backend_write(b, h, buf, 41), -EINVAL);
	CHECK(zs_backend_read_begin(b, h, 41, local) == NULL);
	CHECK_EQ(zs_backend_free(b, 0), 0);
	CHECK_EQ(zs_backend_free(b, (unsigned long)-EINVAL), 0);
	CHECK_EQ(zs_backend_free(b, f), -EINVAL);
	CHECK_EQ(zs_backend_free(b, 0x1234560UL), -EINVAL);
	CHECK_EQ(zs_backend_write(b, f, buf, 8), -EINVAL);
	CHECK(zs_backend_read_begin(b, f, 8, local) == NULL);
	CHECK_EQ(zs_backend_free(b, h), 0);
	CHECK_EQ(zs_backend_free(b, h), -EINVAL);
	CHECK_EQ(zs_backend_free_deferred(b, h), -EINVAL);
	CHECK(zs_backend_read_begin(b, h, 8, local) == NULL);
	CHECK_EQ(zs_backend_write(b, h, buf, 8), -EINVAL);
	struct zs_backend_stats st;
	zs_backend_stats(b, &st, sizeof(st));
	CHECK_EQ(st.objects, 0);
	CHECK_EQ(st.object_bytes, 0);
	CHECK_EQ(zs_backend_free(other, f), 0);
	zs_backend_destroy(b);
	zs_backend_destroy(other);
}

/*
 * ZS_BACKEND_CAP_COMPACT means what zs/backend.h says: compact moves objects
 * and gives pages back.  Fragment a page-backed kind (keep 1 object in 8) and
 * compact: with the flag it frees pages (and counts them in pages_compacted),
 * every object reading back; a page-backed kind without it frees none.
 */
static void compact_cap(const char *kind)
{
	struct zs_backend *b = mk(kind, 4096, 1);
	unsigned caps = zs_backend_caps(b);
	if (!(caps & ZS_BACKEND_CAP_PAGES)) {
		zs_backend_destroy(b);
		return;
	}
	enum { N = 4000, LEN = 200 };
	static unsigned long h[N];
	unsigned char buf[LEN], local[LEN];
	for (int i = 0; i < N; i++) {
		h[i] = zs_backend_malloc(b, LEN);
		REQUIRE(!ZS_IS_ERR(h[i]));
		fill(buf, LEN, (uint64_t)i);
		CHECK_EQ(zs_backend_write(b, h[i], buf, LEN), 0);
	}
	for (int i = 0; i < N; i++)
		if (i % 8)
			CHECK_EQ(zs_backend_free(b, h[i]), 0);
	unsigned long before = zs_backend_total_pages(b);
	unsigned long freed = zs_backend_compact(b);
	unsigned long after = zs_backend_total_pages(b);
	struct zs_backend_stats st;
	zs_backend_stats(b, &st, sizeof(st));
	if (caps & ZS_BACKEND_CAP_COMPACT) {
		CHECK(freed > 0);
		CHECK_EQ(after, before - freed);
		CHECK_EQ(st.pages_compacted, freed);
	} else {
		CHECK_EQ(freed, 0);
		CHECK_EQ(after, before);
		CHECK_EQ(st.pages_compacted, 0);
	}
	int bad = 0;
	for (int i = 0; i < N; i += 8) {
		fill(buf, LEN, (uint64_t)i);
		void *m = zs_backend_read_begin(b, h[i], LEN, local);
		bad += !m || memcmp(m, buf, LEN);
		if (m)
			zs_backend_read_end(b, h[i], LEN, m);
		CHECK_EQ(zs_backend_free(b, h[i]), 0);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(zs_backend_total_pages(b), 0);
	zs_backend_destroy(b);
}

/*
 * max_pages (zs/backend.h): the page-backed kinds stop at it with -ENOMEM
 * (zsmalloc.h's code for a limit) and work again once pages come back; the
 * malloc kinds ignore it.
 */
static void page_limit(const char *kind)
{
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	c.kind = kind;
	c.max_pages = 4;
	struct zs_backend *b = must_backend_create(&c);
	REQUIRE(b);
	int paged = !!(zs_backend_caps(b) & ZS_BACKEND_CAP_PAGES);
	enum { N = 16 };
	unsigned long h[N];
	int n = 0, enomem = 0;
	for (int i = 0; i < N; i++) {
		unsigned long x = zs_backend_malloc(b, 4000);
		if (ZS_IS_ERR(x))
			enomem += ZS_ERR(x) == -ENOMEM;
		else
			h[n++] = x;
	}
	if (paged) {
		CHECK(n >= 1 && n <= 4);
		CHECK_EQ(enomem, N - n);
		CHECK(zs_backend_total_pages(b) <= 4);
	} else {
		CHECK_EQ(n, N);
	}
	for (int i = 0; i < n; i++)
		CHECK_EQ(zs_backend_free(b, h[i]), 0);
	unsigned long x = zs_backend_malloc(b, 4000);
	CHECK(!ZS_IS_ERR(x));
	CHECK_EQ(zs_backend_free(b, x), 0);
	zs_backend_destroy(b);
}

static void registry(void)
{
	const char *const *k = zs_backend_kinds();
	int n = 0, zs = 0, zb = 0, ml = 0;
	for (; k[n]; n++) {
		zs |= !strcmp(k[n], "zsmalloc");
		zb |= !strcmp(k[n], "zblock");
		ml |= !strcmp(k[n], "malloc");
	}
	CHECK(n >= 3 && zs && zb && ml);
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	c.kind = "nosuch";
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	c.kind = "zblock";
	c.page_size = 5000;
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	struct zs_backend *b = must_backend_create(NULL);
	REQUIRE(b);
	CHECK(!strcmp(b->kind, "zsmalloc"));
	CHECK_EQ(b->page_size, 4096);
	CHECK(zs_backend_huge_class_size(b) > 0 && zs_backend_huge_class_size(b) <= 4096);
	CHECK(zs_backend_lookup_class(b, 100) >= 0);
	zs_backend_destroy(b);
	zs_backend_destroy(NULL);
}

int main(void)
{
	uint64_t seed = tu_seed("test_backend");
	registry();
	struct zs_backend_config dc;
	memset(&dc, 0x5a, sizeof(dc));
	zs_backend_config_init(&dc);
	CHECK(!strcmp(dc.kind, "zsmalloc"));
	CHECK_EQ(dc.page_size, 4096);
	CHECK_EQ(dc.max_pages, 0);
	CHECK_EQ(dc.checked, 0);
	CHECK_EQ(dc.zs.max_chain, 8);
	const char *const *k = zs_backend_kinds();
	for (int i = 0; k[i]; i++) {
		printf("kind %s\n", k[i]);
		size_t sizes[] = { 4096, 16384 };
		for (int j = 0; j < 2; j++) {
			model(k[i], sizes[j], 1, seed + (uint64_t)(i * 10 + j));
			model(k[i], sizes[j], 0, seed + (uint64_t)(i * 10 + j + 5));
			bad_input(k[i], sizes[j]);
		}
		compact_cap(k[i]);
		page_limit(k[i]);
	}
	return tu_done();
}
