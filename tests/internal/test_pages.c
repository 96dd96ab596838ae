/*
 * Tests for the page provider (src/pages/pages.c), single-threaded: the
 * contract every allocator above relies on (distinct, aligned, writable
 * pages; zeroed descriptors; contiguous runs; limits and injected failures;
 * config validation; lookups that never crash) and the reason the layer
 * exists at all, that freed memory really leaves the process's RSS.
 */
#include "testutil.h"
#include "pages/pages.h"
#include "pages/internal.h"
#include "zs/harness.h"

#include <errno.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* TSan keeps shadow memory for pages we DONTNEED, so RSS says nothing there. */
#include "sanitizer.h"
#define RSS_MEANINGFUL (!TU_TSAN)

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static struct zs_pages *mk(size_t page_size, size_t chunk_bytes, size_t max_pages, size_t cache)
{
	struct zs_pages_config c = { .page_size = page_size, .chunk_bytes = chunk_bytes,
				     .max_pages = max_pages, .cache_pages = cache };
	struct zs_pages *p = pages_create(&c);
	REQUIRE(p);
	return p;
}

static uint64_t pat(uint64_t seed, size_t i)
{
	return (seed + i) * 0x9e3779b97f4a7c15ULL ^ (seed >> 7);
}

static void fill(void *addr, size_t bytes, uint64_t seed)
{
	uint64_t *w = addr;
	for (size_t i = 0; i < bytes / 8; i++)
		w[i] = pat(seed, i);
}

static int verify(const void *addr, size_t bytes, uint64_t seed)
{
	const uint64_t *w = addr;
	for (size_t i = 0; i < bytes / 8; i++)
		if (w[i] != pat(seed, i))
			return 0;
	return 1;
}

static int desc_is_zero(const struct zs_page_desc *d)
{
	static const struct zs_page_desc z;
	return memcmp(d, &z, sizeof(z)) == 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void test_basic(void)
{
	struct zs_pages *p = pages_create(NULL);
	REQUIRE(p);
	CHECK_EQ(pages_page_size(p), 4096);
	CHECK(sizeof(struct zs_page_desc) == 64);

	pfn_t pfn = ZS_PFN_NONE;
	CHECK_EQ(pages_alloc(p, &pfn), 0);
	CHECK(pfn != ZS_PFN_NONE);
	CHECK(pages_valid(p, pfn));
	char *a = pages_addr(p, pfn);
	CHECK(((uintptr_t)a & 4095) == 0);
	memset(a, 0xab, 4096);
	CHECK(desc_is_zero(pages_desc(p, pfn)));
	CHECK_EQ(pages_pfn_of(p, a), pfn);
	CHECK_EQ(pages_pfn_of(p, a + 4095), pfn);
	CHECK_EQ(pages_in_use(p), 1);

	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.page_size, 4096);
	CHECK_EQ(st.pages_in_use, 1);
	CHECK_EQ(st.pages_peak, 1);
	CHECK_EQ(st.chunks_mapped, 1);
	CHECK_EQ(st.bytes_mapped, 2 * MIB);
	CHECK_EQ(st.allocs, 1);

	pages_free(p, pfn);
	CHECK(!pages_valid(p, pfn));
	CHECK_EQ(pages_pfn_of(p, a), ZS_PFN_NONE);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.frees, 1);
	/* The freed page, and the rest of the per-CPU cache's batch. */
	CHECK(st.pages_cached >= 1 && st.pages_cached <= 64);
	/* Double free is ignored, not fatal. */
	pages_free(p, pfn);
	pages_get_stats(p, &st);
	CHECK_EQ(st.frees, 1);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
}

/* Many pages over several chunks: distinct, aligned, writable, no overlap. */
static void test_distinct(size_t ps)
{
	enum { N = 3000 };
	struct zs_pages *p = mk(ps, 0, 0, 0);
	static pfn_t pfns[N];
	static uintptr_t addrs[N];

	for (size_t i = 0; i < N; i++) {
		REQUIRE(pages_alloc(p, &pfns[i]) == 0);
		char *a = pages_addr(p, pfns[i]);
		addrs[i] = (uintptr_t)a;
		CHECK((addrs[i] & (ps - 1)) == 0);
		CHECK(desc_is_zero(pages_desc(p, pfns[i])));
		CHECK(pages_set_owner(p, pfns[i], a) == pages_desc(p, pfns[i]));
		pages_desc(p, pfns[i])->word[5] = i;
		fill(a, ps, pfns[i]);
	}
	int ok = 1, lookups = 1;
	for (size_t i = 0; i < N; i++) {
		ok &= verify((void *)addrs[i], ps, pfns[i]);
		ok &= pages_desc(p, pfns[i])->word[5] == i;
		/* The owner word, alone and with the page's address. */
		char *at = NULL;
		ok &= pages_lookup_owner(p, pfns[i]) == (void *)addrs[i];
		ok &= pages_lookup_owner_addr(p, pfns[i], &at) == (void *)addrs[i] && at == (char *)addrs[i];
		lookups &= pages_pfn_of(p, (char *)addrs[i] + ps / 2) == pfns[i];
		lookups &= pages_valid(p, pfns[i]);
	}
	CHECK(ok);
	CHECK(lookups);
	qsort(addrs, N, sizeof(addrs[0]), cmp_ptr);
	int disjoint = 1;
	for (size_t i = 1; i < N; i++)
		disjoint &= addrs[i] - addrs[i - 1] >= ps;
	CHECK(disjoint);
	/* pfns are dense: all below N (plus a per-CPU cache's batch, 32) rounded up to a chunk. */
	pfn_t maxpfn = 0;
	for (size_t i = 0; i < N; i++)
		maxpfn = pfns[i] > maxpfn ? pfns[i] : maxpfn;
	size_t ppc = 2 * MIB / ps;
	CHECK(maxpfn < (N + 32 + ppc - 1) / ppc * ppc);

	/* Free every other page, reallocate: descriptors come back zeroed. */
	for (size_t i = 0; i < N; i += 2)
		pages_free(p, pfns[i]);
	CHECK_EQ(pages_in_use(p), N / 2);
	int zeroed = 1;
	for (size_t i = 0; i < N; i += 2) {
		REQUIRE(pages_alloc(p, &pfns[i]) == 0);
		zeroed &= desc_is_zero(pages_desc(p, pfns[i]));
		fill(pages_addr(p, pfns[i]), ps, pfns[i] ^ 77);
	}
	CHECK(zeroed);
	ok = 1;
	for (size_t i = 0; i < N; i++)
		ok &= verify(pages_addr(p, pfns[i]), ps, (i % 2) ? pfns[i] : pfns[i] ^ 77);
	CHECK(ok);
	for (size_t i = 0; i < N; i++)
		pages_free(p, pfns[i]);
	pages_trim(p);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	CHECK_EQ(st.bytes_mapped, 0);
	/* Sampled when the shared lock is taken: at most a per-CPU batch (32) short. */
	CHECK(st.pages_peak <= N && st.pages_peak + 32 >= N);
	pages_destroy(p);
}

static void test_runs(size_t ps)
{
	struct zs_pages *p = mk(ps, 0, 0, 0);
	size_t ppc = 2 * MIB / ps;
	pfn_t firsts[65];

	for (unsigned n = 1; n <= 64; n++) {
		if (n > ppc) {
			CHECK_EQ(pages_alloc_run(p, n, &firsts[n]), -ENOMEM);
			firsts[n] = ZS_PFN_NONE;
			continue;
		}
		REQUIRE(pages_alloc_run(p, n, &firsts[n]) == 0);
		char *a = pages_addr(p, firsts[n]);
		int contig = 1;
		for (unsigned i = 0; i < n; i++) {
			contig &= (char *)pages_addr(p, firsts[n] + i) == a + (size_t)i * ps;
			contig &= pages_valid(p, firsts[n] + i);
			contig &= desc_is_zero(pages_desc(p, firsts[n] + i));
			contig &= (firsts[n] + i) / ppc == firsts[n] / ppc;
		}
		CHECK(contig);
		fill(a, n * ps, n);
	}
	int ok = 1;
	for (unsigned n = 1; n <= 64; n++)
		if (firsts[n] != ZS_PFN_NONE)
			ok &= verify(pages_addr(p, firsts[n]), n * ps, n);
	CHECK(ok);
	/* Free the odd runs and fill the holes with new runs. */
	for (unsigned n = 1; n <= 64; n += 2)
		if (firsts[n] != ZS_PFN_NONE)
			pages_free_run(p, firsts[n], n);
	for (unsigned n = 1; n <= 64; n += 2) {
		if (firsts[n] == ZS_PFN_NONE)
			continue;
		REQUIRE(pages_alloc_run(p, n, &firsts[n]) == 0);
		fill(pages_addr(p, firsts[n]), n * ps, n + 1000);
	}
	ok = 1;
	for (unsigned n = 1; n <= 64; n++)
		if (firsts[n] != ZS_PFN_NONE)
			ok &= verify(pages_addr(p, firsts[n]), n * ps, n % 2 ? n + 1000 : n);
	CHECK(ok);
	for (unsigned n = 1; n <= 64; n++)
		if (firsts[n] != ZS_PFN_NONE)
			pages_free_run(p, firsts[n], n);
	CHECK_EQ(pages_in_use(p), 0);

	pfn_t f;
	CHECK_EQ(pages_alloc_run(p, 0, &f), -EINVAL);
	CHECK_EQ(pages_alloc_run(p, 65, &f), -EINVAL);
	CHECK_EQ(pages_alloc_run(p, 1, NULL), -EINVAL);
	pages_trim(p);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
}

/*
 * A run may take pages out of the shared hot cache (not out of per-CPU
 * caches, which a bound of 100 pages leaves off).
 */
static void test_run_uses_cache(void)
{
	struct zs_pages *p = mk(4096, 64 * KIB, 0, 100); /* 16 pages per chunk */
	pfn_t pf[16], f;

	for (int i = 0; i < 16; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < 16; i++)
		pages_free(p, pf[i]);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 16);
	CHECK_EQ(st.chunks_mapped, 1);
	REQUIRE(pages_alloc_run(p, 16, &f) == 0);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.chunks_mapped, 1);
	fill(pages_addr(p, f), 16 * 4096, 5);
	CHECK(verify(pages_addr(p, f), 16 * 4096, 5));
	pages_free_run(p, f, 16);
	REQUIRE(pages_alloc(p, &f) == 0);
	CHECK(desc_is_zero(pages_desc(p, f)));
	pages_free(p, f);
	pages_destroy(p);
}

/* An emptied chunk is unmapped at once without a cache, and its slot (so its pfns) reused. */
static void test_slot_reuse(void)
{
	struct zs_pages *p = mk(4096, 64 * KIB, 0, ZS_PAGES_NO_CACHE); /* 16 pages per chunk */
	pfn_t pf[48];
	struct zs_pages_stats st;

	for (int i = 0; i < 48; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		CHECK_EQ(pf[i], i);
	}
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 3);
	for (int i = 0; i < 16; i++)
		pages_free(p, pf[i]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 2);
	CHECK_EQ(st.bytes_mapped, 128 * KIB);
	CHECK(!pages_valid(p, pf[0]));
	for (int i = 0; i < 16; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		CHECK_EQ(pf[i], i);
		CHECK(desc_is_zero(pages_desc(p, pf[i])));
		CHECK_EQ(pages_pfn_of(p, pages_addr(p, pf[i])), pf[i]);
	}
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 3);
	/* Freed low pages are refilled before a new chunk is mapped. */
	pages_free(p, pf[20]);
	pfn_t x;
	REQUIRE(pages_alloc(p, &x) == 0);
	CHECK_EQ(x, 20);
	pages_destroy(p); /* with pages in use */
}

static void test_limit(void)
{
	struct zs_pages *p = mk(4096, 0, 10, 0);
	pfn_t pf[10], x;

	for (int i = 0; i < 10; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	CHECK_EQ(pages_alloc(p, &x), -ENOMEM);
	CHECK_EQ(pages_alloc_run(p, 2, &x), -ENOMEM);
	pages_free(p, pf[3]);
	CHECK_EQ(pages_alloc_run(p, 2, &x), -ENOMEM);
	CHECK_EQ(pages_alloc(p, &pf[3]), 0);
	CHECK_EQ(pages_alloc(p, &x), -ENOMEM);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.failed_allocs, 4);
	CHECK_EQ(st.pages_in_use, 10);

	pages_set_limit(p, 12);
	CHECK_EQ(pages_alloc_run(p, 2, &x), 0);
	pfn_t y;
	CHECK_EQ(pages_alloc(p, &y), -ENOMEM);
	pages_set_limit(p, 5); /* below use: nothing is taken away */
	CHECK_EQ(pages_in_use(p), 12);
	CHECK(pages_valid(p, pf[9]));
	CHECK_EQ(pages_alloc(p, &y), -ENOMEM);
	pages_set_limit(p, 0);
	CHECK_EQ(pages_alloc(p, &y), 0);
	pages_free(p, y);
	pages_free_run(p, x, 2);
	for (int i = 0; i < 10; i++)
		pages_free(p, pf[i]);
	CHECK_EQ(pages_in_use(p), 0);
	pages_destroy(p);
}

/*
 * pages_alloc_bulk: all n pages or none, and the very pages n single
 * allocations would give in the same order (so zsmalloc's chains, and the
 * kernel profile's page counts, are what they were with n calls).
 */
static void test_alloc_bulk(size_t cache)
{
	struct zs_pages *p = mk(4096, 0, 0, cache);
	pfn_t a[64], b[64], warm[40];

	CHECK_EQ(pages_alloc_bulk(p, 0, a), -EINVAL);
	CHECK_EQ(pages_alloc_bulk(p, ZS_FREE_BULK_MAX + 1, a), -EINVAL);
	/* Warm the caches so the pages come from them, then give them back. */
	for (int i = 0; i < 40; i++)
		REQUIRE(pages_alloc(p, &warm[i]) == 0);
	pages_free_bulk(p, warm, 40);
	for (unsigned n = 1; n <= 16; n += 5) {
		size_t use = pages_in_use(p);
		CHECK_EQ(pages_alloc_bulk(p, n, a), 0);
		CHECK_EQ(pages_in_use(p), use + n);
		int ok = 1;
		for (unsigned i = 0; i < n; i++) {
			ok &= pages_valid(p, a[i]) && desc_is_zero(pages_desc(p, a[i]));
			for (unsigned j = 0; j < i; j++)
				ok &= a[i] != a[j];
			fill(pages_addr(p, a[i]), 4096, a[i]);
		}
		CHECK(ok);
		for (unsigned i = 0; i < n; i++)
			ok &= verify(pages_addr(p, a[i]), 4096, a[i]);
		CHECK(ok);
		/* Freed coldest first, the caches are as before: n singles then pop the same pages. */
		for (unsigned i = n; i-- > 0;)
			pages_free(p, a[i]);
		for (unsigned i = 0; i < n; i++)
			REQUIRE(pages_alloc(p, &b[i]) == 0);
		CHECK(!memcmp(a, b, n * sizeof(a[0])));
		pages_free_bulk(p, b, n);
		CHECK_EQ(pages_in_use(p), use);
	}

	/* None past the limit: the pages it did get go back. */
	size_t use = pages_in_use(p);
	pages_set_limit(p, use + 3);
	CHECK_EQ(pages_alloc_bulk(p, 5, a), -ENOMEM);
	CHECK_EQ(pages_in_use(p), use);
	CHECK_EQ(pages_alloc_bulk(p, 3, a), 0);
	CHECK_EQ(pages_in_use(p), use + 3);
	pages_free_bulk(p, a, 3);
	pages_set_limit(p, 0);

	/* An injected failure in the middle: the first two are given back. */
	pages_fail_after(p, 2, 1);
	CHECK_EQ(pages_alloc_bulk(p, 4, a), -ENOMEM);
	CHECK_EQ(pages_in_use(p), use);
	pages_fail_reset(p);
	CHECK_EQ(pages_alloc_bulk(p, 4, a), 0);
	pages_free_bulk(p, a, 4);
	CHECK_EQ(pages_in_use(p), 0);
	pages_destroy(p);
}

static void test_fail_injection(void)
{
	struct zs_pages *p = mk(4096, 0, 0, 0);
	pfn_t pf[20];
	int n = 0;

	pages_fail_after(p, 3, 2);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);
	CHECK_EQ(pages_alloc_run(p, 1, &pf[n++]), 0);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);
	CHECK_EQ(pages_alloc(p, &pf[n]), -ENOMEM);
	CHECK_EQ(pages_alloc_run(p, 4, &pf[n]), -ENOMEM);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);

	pages_fail_after(p, 0, 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(pages_alloc(p, &pf[n]), -ENOMEM);
	pages_fail_reset(p);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);

	pages_fail_after(p, 1, 0);
	CHECK_EQ(pages_alloc(p, &pf[n++]), 0);
	CHECK_EQ(pages_alloc(p, &pf[n]), -ENOMEM);
	CHECK_EQ(pages_alloc(p, &pf[n]), -ENOMEM);
	pages_fail_reset(p);

	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.failed_allocs, 9);
	CHECK_EQ(st.allocs, (uint64_t)n);
	CHECK_EQ(st.pages_in_use, n);
	for (int i = 0; i < n; i++)
		pages_free(p, pf[i]);
	pages_destroy(p);
}

static void test_bad_config(void)
{
	static const size_t bad_ps[] = { 1, 1000, 2048, 4097, 12288, 131072, (size_t)1 << 40 };
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++) {
		struct zs_pages_config c = { .page_size = bad_ps[i] };
		errno = 0;
		CHECK(pages_create(&c) == NULL);
		CHECK_EQ(errno, EINVAL);
	}
	static const size_t bad_chunk[] = { 1, 4095, 2048, 3 * 4096, 3 * MIB, (size_t)1 << 40 };
	for (size_t i = 0; i < sizeof(bad_chunk) / sizeof(bad_chunk[0]); i++) {
		struct zs_pages_config c = { .chunk_bytes = bad_chunk[i] };
		errno = 0;
		CHECK(pages_create(&c) == NULL);
		CHECK_EQ(errno, EINVAL);
	}
	struct zs_pages_config c = { .page_size = 65536, .chunk_bytes = 32 * KIB };
	errno = 0;
	CHECK(pages_create(&c) == NULL);
	CHECK_EQ(errno, EINVAL);

	/* Smallest legal chunk: one page. */
	struct zs_pages *p = mk(16384, 16384, 0, ZS_PAGES_NO_CACHE);
	pfn_t a, b, r;
	CHECK_EQ(pages_alloc(p, &a), 0);
	CHECK_EQ(pages_alloc(p, &b), 0);
	CHECK(a != b);
	CHECK_EQ(pages_alloc_run(p, 2, &r), -ENOMEM);
	pages_free(p, a);
	pages_free(p, b);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);

	/* NULL everywhere is harmless. */
	pages_destroy(NULL);
	pages_free(NULL, 0);
	pages_trim(NULL);
	CHECK_EQ(pages_in_use(NULL), 0);
	CHECK(!pages_valid(NULL, 0));
	CHECK_EQ(pages_alloc(NULL, &a), -EINVAL);
}

/* Garbage pfns and addresses must be answered, never crash. */
static void test_garbage_lookups(uint64_t *rng)
{
	struct zs_pages *p = mk(4096, 0, 0, 0);
	pfn_t pf[600];
	int stack_var = 0;

	CHECK(!pages_valid(p, 0));
	CHECK(!pages_valid(p, ZS_PFN_NONE));
	for (int i = 0; i < 600; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < 300; i++)
		pages_free(p, pf[i]);
	pages_trim(p);
	int bad = 0;
	for (int i = 0; i < 300; i++)
		bad += pages_valid(p, pf[i]);
	for (int i = 300; i < 600; i++)
		bad += !pages_valid(p, pf[i]);
	CHECK_EQ(bad, 0);
	int hits = 0;
	for (int i = 0; i < 100000; i++) {
		pfn_t g = tu_rand(rng);
		switch (i % 4) {
		case 0: g &= 0xffff; break;
		case 1: g &= 0xffffffffu; break;
		case 2: g = ZS_PFN_NONE - (g & 0xff); break;
		default: break;
		}
		hits += pages_valid(p, g);
		if (!pages_valid(p, g))
			pages_free(p, g); /* freeing what is not in use is a no-op */
		hits += pages_pfn_of(p, (void *)(uintptr_t)tu_rand(rng)) != ZS_PFN_NONE;
	}
	CHECK_EQ(pages_in_use(p), 300);
	CHECK(hits >= 0);
	CHECK_EQ(pages_pfn_of(p, NULL), ZS_PFN_NONE);
	CHECK_EQ(pages_pfn_of(p, &stack_var), ZS_PFN_NONE);
	CHECK_EQ(pages_pfn_of(p, (void *)UINTPTR_MAX), ZS_PFN_NONE);
	for (int i = 300; i < 600; i++)
		pages_free(p, pf[i]);
	pages_destroy(p);
}

static void test_cache(void)
{
	/* 64 pages: below the per-CPU caches' threshold, so one exact LIFO cache. */
	struct zs_pages *p = mk(4096, 0, 0, 64);
	pfn_t pf[100];
	struct zs_pages_stats st;

	for (int i = 0; i < 100; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < 100; i++)
		pages_free(p, pf[i]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 64);
	CHECK_EQ(st.chunks_mapped, 1);
	/* Pages beyond the bound went back at once; hot pages are reused first, last cached first. */
	pfn_t x;
	REQUIRE(pages_alloc(p, &x) == 0);
	CHECK_EQ(x, pf[63]);
	pages_free(p, x);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);

	p = mk(65536, 0, 0, 4);
	for (int i = 0; i < 10; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < 10; i++)
		pages_free(p, pf[i]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 4);
	pages_destroy(p);

	p = mk(4096, 0, 0, ZS_PAGES_NO_CACHE);
	for (int i = 0; i < 10; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < 10; i++)
		pages_free(p, pf[i]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
}

/*
 * pages_free_bulk: same result as one pages_free per page, in any
 * order, ignoring repeated and foreign pfns; pages beyond the cache go back
 * to the OS (RSS) and a chunk left empty is unmapped.
 */
static void test_free_bulk(uint64_t *rng)
{
	enum { N = 96, CACHE = 5 };
	/* 32 pages per chunk: 3 chunks. */
	struct zs_pages *p = mk(4096, 128 * KIB, 0, CACHE);
	pfn_t pf[N], batch[N + 2];
	struct zs_pages_stats st;

	for (int i = 0; i < N; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		fill(pages_addr(p, pf[i]), 4096, pf[i]);
	}
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 3);
	/* Free all of chunk 0 and the even pages of chunks 1-2, shuffled, plus junk. */
	unsigned nb = 0;
	for (int i = 0; i < N; i++)
		if (i < 32 || i % 2 == 0)
			batch[nb++] = pf[i];
	unsigned nvalid = nb;
	batch[nb++] = pf[0];        /* repeated */
	batch[nb++] = ZS_PFN_NONE;  /* foreign */
	for (unsigned i = nb - 1; i > 0; i--) {
		unsigned j = (unsigned)(tu_rand(rng) % (i + 1));
		pfn_t t = batch[i];
		batch[i] = batch[j];
		batch[j] = t;
	}
	pages_free_bulk(p, batch, nb);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, N - nvalid);
	CHECK_EQ(st.frees, nvalid);
	CHECK_EQ(st.pages_cached, CACHE);
	int ok = 1;
	for (int i = 0; i < N; i++) {
		int freed = i < 32 || i % 2 == 0;
		ok &= pages_valid(p, pf[i]) == !freed;
		if (!freed)
			ok &= verify(pages_addr(p, pf[i]), 4096, pf[i]);
	}
	CHECK(ok);
	/* Chunk 0 went away unless a cached page still pins it. */
	CHECK(st.chunks_mapped == 2 || st.chunks_mapped == 3);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 2);

	/* The rest, in one call: everything is unmapped, nothing cached survives a trim. */
	nb = 0;
	for (int i = 32; i < N; i++)
		if (i % 2)
			batch[nb++] = pf[i];
	pages_free_bulk(p, batch, nb);
	pages_free_bulk(p, batch, nb); /* all double frees: ignored */
	pages_free_bulk(p, batch, 0);
	pages_free_bulk(NULL, batch, nb);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.frees, N);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);

	/* Beyond the cache the memory leaves the process. */
	size_t n = 32 * MIB / 4096;
	pfn_t *big = malloc(n * sizeof(*big));
	REQUIRE(big);
	p = mk(4096, 0, 0, 64);
	size_t rss0 = zs_process_rss();
	for (size_t i = 0; i < n; i++) {
		REQUIRE(pages_alloc(p, &big[i]) == 0);
		memset(pages_addr(p, big[i]), 0x5a, 4096);
	}
	size_t rss1 = zs_process_rss();
	/* In batches of 7 (a zspage chain), more than ZS_FREE_BULK_MAX at the end. */
	size_t i = 0;
	for (; i + 7 <= n - 100; i += 7)
		pages_free_bulk(p, big + i, 7);
	pages_free_bulk(p, big + i, (unsigned)(n - i));
	size_t rss2 = zs_process_rss();
	printf("free_bulk rss: start %zu KiB, touched %zu KiB, freed %zu KiB\n", rss0 / KIB,
	       rss1 / KIB, rss2 / KIB);
	CHECK(rss1 >= rss0 + 30 * MIB);
	CHECK(!RSS_MEANINGFUL || rss2 <= rss0 + MIB);
	CHECK_EQ(pages_in_use(p), 0);
	pages_destroy(p);
	free(big);
}

/*
 * 64 MiB touched then freed.  Under the default bound (128 MiB) the pages
 * stay cached, mapped and hot, until a trim returns them all; with a small
 * bound they leave the process as they are freed.  Either way RSS ends where
 * it started: the memory leaves the process, not just the pool.
 */
static void test_rss(size_t ps, size_t cache)
{
	size_t n = 64 * MIB / ps;
	pfn_t *pf = malloc(n * sizeof(*pf));
	REQUIRE(pf);
	struct zs_pages *p = mk(ps, 0, 0, cache);
	size_t rss0 = zs_process_rss();
	CHECK(rss0 > 0);
	for (size_t i = 0; i < n; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		memset(pages_addr(p, pf[i]), (int)(i | 1), ps);
	}
	size_t rss1 = zs_process_rss();
	CHECK(rss1 >= rss0 + 60 * MIB);
	for (size_t i = 0; i < n; i++)
		pages_free(p, pf[i]);
	size_t rss_cached = zs_process_rss();
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	if (cache == 0) {
		CHECK(st.pages_cached >= n && st.pages_cached <= n + 64);
		CHECK(!RSS_MEANINGFUL || rss_cached + MIB >= rss1);
	} else {
		CHECK(st.pages_cached <= cache);
		CHECK(!RSS_MEANINGFUL || rss_cached <= rss0 + cache * ps + MIB);
	}
	pages_trim(p);
	size_t rss2 = zs_process_rss();
	printf("rss %zuK page, cache %zu: start %zu KiB, touched %zu KiB, freed %zu KiB, "
	       "trimmed %zu KiB\n",
	       ps / KIB, cache, rss0 / KIB, rss1 / KIB, rss_cached / KIB, rss2 / KIB);
	CHECK(!RSS_MEANINGFUL || rss2 <= rss0 + MIB);
	pages_get_stats(p, &st);
	CHECK_EQ(st.bytes_mapped, 0);
	CHECK_EQ(st.pages_cached, 0);
	pages_destroy(p);
	free(pf);
}

static unsigned ncpu_caches(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	return n <= 0 ? 1 : n > 256 ? 256 : (unsigned)n;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts))
		;
}

/*
 * Per-CPU caches: with a bound large enough they are on; a freed page is the
 * next one handed out (hot reuse), they hold at most 64 pages per CPU, and
 * their pages are neither valid nor lost (trim returns them).
 */
static void test_cpu_cache(void)
{
	struct zs_pages *p = mk(4096, 0, 0, 0);
	struct zs_pages_stats st;
	pfn_t pf[300], x;

	for (int i = 0; i < 300; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	pages_free(p, pf[17]);
	CHECK(!pages_valid(p, pf[17]));
	pages_free(p, pf[17]); /* double free: ignored */
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 299);
	CHECK_EQ(st.frees, 1);
	CHECK(st.pages_cpu_cached >= 1);
	REQUIRE(pages_alloc(p, &x) == 0);
	CHECK_EQ(x, pf[17]);
	for (int i = 0; i < 300; i++)
		pages_free(p, pf[i]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK(st.pages_cached >= 300 && st.pages_cached <= 300 + 64 * (size_t)ncpu_caches());
	CHECK(st.pages_cpu_cached >= 1 && st.pages_cpu_cached <= 64 * (size_t)ncpu_caches());
	CHECK_EQ(st.allocs, st.frees);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.pages_cpu_cached, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
}

/*
 * The bound holds with per-CPU caches on: the cache (per-CPU part included)
 * never exceeds cache_pages, the cold pages go first, and RSS stays within
 * the bound above the live pages.
 */
static void test_bound(void)
{
	size_t bound = (size_t)2 * 64 * ncpu_caches() + 100, n = 4000;
	struct zs_pages *p = mk(4096, 0, 0, bound);
	pfn_t *pf = malloc(n * sizeof(*pf));
	struct zs_pages_stats st;
	int ok = 1;

	REQUIRE(pf);
	size_t rss0 = zs_process_rss();
	for (size_t i = 0; i < n; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		memset(pages_addr(p, pf[i]), 1, 4096);
	}
	for (size_t i = 0; i < n; i++) {
		pages_free(p, pf[i]);
		if (i % 97 == 0) {
			pages_get_stats(p, &st);
			ok &= st.pages_cached <= bound;
		}
	}
	CHECK(ok);
	pages_get_stats(p, &st);
	CHECK(st.pages_cached <= bound && st.pages_cached >= bound / 2);
	CHECK_EQ(st.pages_decayed, 0);
	size_t rss1 = zs_process_rss();
	printf("bound %zu pages: RSS start %zu KiB, after freeing %zu pages %zu KiB\n", bound,
	       rss0 / KIB, n, rss1 / KIB);
	CHECK(!RSS_MEANINGFUL || rss1 <= rss0 + bound * 4096 + MIB);
	pages_destroy(p);
	free(pf);
}

/*
 * The decay: cached pages unused for decay_ms leave on the next call that
 * looks (pages_decay, or lazily any 64 operations of a per-CPU cache), not
 * before; the per-CPU caches' own pages stay until a trim.
 */
static void test_decay(void)
{
	struct zs_pages_config c = { .page_size = 4096, .decay_ms = 40 };
	struct zs_pages *p = pages_create(&c);
	struct zs_pages_stats st;
	enum { N = 4000 };
	static pfn_t pf[N];

	REQUIRE(p);
	size_t rss0 = zs_process_rss();
	for (int i = 0; i < N; i++) {
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
		memset(pages_addr(p, pf[i]), 2, 4096);
	}
	for (int i = 0; i < N; i++)
		pages_free(p, pf[i]);
	pages_decay(p); /* too early: nothing goes */
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, N);
	CHECK_EQ(st.pages_decayed, 0);
	size_t rss1 = zs_process_rss();
	sleep_ms(120);
	pages_decay(p);
	pages_get_stats(p, &st);
	size_t rss2 = zs_process_rss();
	CHECK_EQ(st.pages_cached, st.pages_cpu_cached);
	CHECK_EQ(st.pages_decayed, N - st.pages_cpu_cached);
	printf("decay: RSS start %zu KiB, freed+cached %zu KiB, after the decay %zu KiB\n",
	       rss0 / KIB, rss1 / KIB, rss2 / KIB);
	CHECK(!RSS_MEANINGFUL || rss1 >= rss0 + 12 * MIB);
	CHECK(!RSS_MEANINGFUL || rss2 <= rss0 + 64 * 4096 * (size_t)ncpu_caches() + MIB);

	/* Lazily: no explicit call, just traffic on a per-CPU cache after the delay. */
	for (int i = 0; i < N; i++)
		REQUIRE(pages_alloc(p, &pf[i]) == 0);
	for (int i = 0; i < N; i++)
		pages_free(p, pf[i]);
	uint64_t before = st.pages_decayed;
	sleep_ms(120);
	for (int i = 0; i < 200; i++) {
		pfn_t x;
		REQUIRE(pages_alloc(p, &x) == 0);
		pages_free(p, x);
	}
	pages_get_stats(p, &st);
	CHECK(st.pages_decayed >= before + N - 2 * 64 * (uint64_t)ncpu_caches());
	pages_destroy(p);
}

/* Bind this thread to the CPU it runs on (its affinity before into *old): one per-CPU cache. */
static void pin_here(cpu_set_t *old)
{
	cpu_set_t one;
	REQUIRE(sched_getaffinity(0, sizeof *old, old) == 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
}

/*
 * Parked chains (cache.c): a bulk free of up to 16 pages is this CPU's next
 * bulk allocation of as many, whole, in order and with zeroed descriptors,
 * last parked first; a parked page is not valid and a second free of it is
 * ignored; a bulk allocation of another length does not take it; parked
 * pages show as per-CPU cached, not in use; a trim returns them all (and the
 * chunks go).  Bound to one CPU, so "this CPU's cache" is one cache.
 */
static void test_park(void)
{
	cpu_set_t old;
	pin_here(&old);
	struct zs_pages_config pc = { .page_size = 4096, .park_chains = 1 };
	struct zs_pages *p = pages_create(&pc);
	REQUIRE(p);
	struct zs_pages_stats st;
	static pfn_t big[200][4];
	pfn_t a[5], b[5];
	int ok = 1;

	REQUIRE(pages_alloc_bulk(p, 5, a) == 0);
	for (int i = 0; i < 5; i++)
		fill(pages_addr(p, a[i]), 4096, a[i]);
	pages_free_bulk(p, a, 5);
	for (int i = 0; i < 5; i++)
		ok &= !pages_valid(p, a[i]);
	CHECK(ok);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK(st.pages_cpu_cached >= 5);
	size_t cpu_cached = st.pages_cpu_cached;
	uint64_t frees = st.frees;
	pages_free_bulk(p, a, 5); /* parked already: ignored */
	pages_free(p, a[2]);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cpu_cached, cpu_cached);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.frees, frees);

	/* Another length leaves the chain alone. */
	REQUIRE(pages_alloc_bulk(p, 4, b) == 0);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 5; j++)
			ok &= b[i] != a[j];
	CHECK(ok);
	pages_free_bulk(p, b, 4);
	/* The same length: the chain, whole and in order. */
	REQUIRE(pages_alloc_bulk(p, 5, b) == 0);
	CHECK(!memcmp(a, b, sizeof a));
	for (int i = 0; i < 5; i++)
		ok &= pages_valid(p, b[i]) && desc_is_zero(pages_desc(p, b[i]));
	CHECK(ok);
	pages_free_bulk(p, b, 5);

	/* Many: every chain parked, the last freed handed out first. */
	for (int k = 0; k < 200; k++)
		REQUIRE(pages_alloc_bulk(p, 4, big[k]) == 0);
	for (int k = 0; k < 200; k++)
		pages_free_bulk(p, big[k], 4);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK(st.pages_cpu_cached >= 800 + 5);
	REQUIRE(pages_alloc_bulk(p, 4, b) == 0);
	CHECK(!memcmp(b, big[199], sizeof big[199]));
	pages_free_bulk(p, b, 4);
	pages_trim(p);
	pages_get_stats(p, &st);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.pages_cpu_cached, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
	REQUIRE(sched_setaffinity(0, sizeof old, &old) == 0);
}

/*
 * Parked chains that wait a decay go back to the OS though their CPU's
 * cache stays busy (the purge thread's pass, cache.c park_release): a
 * CPU that frees zspages which another CPU allocates again must not keep
 * them for as long as it runs.  Fails if only an idle cache gave them back.
 */
static void test_park_decay(void)
{
	cpu_set_t old;
	pin_here(&old);
	struct zs_pages_config pc = { .page_size = 4096, .decay_ms = 50, .park_chains = 1 };
	struct zs_pages *p = pages_create(&pc);
	REQUIRE(p);
	struct zs_pages_stats st;
	static pfn_t big[300][4];

	for (int k = 0; k < 300; k++)
		REQUIRE(pages_alloc_bulk(p, 4, big[k]) == 0);
	for (int k = 0; k < 300; k++)
		pages_free_bulk(p, big[k], 4);
	pages_get_stats(p, &st);
	CHECK(st.pages_cpu_cached >= 1200);
	uint64_t decayed0 = st.pages_decayed;
	/* Busy: a single page out and back every millisecond, for eight decays. */
	for (int i = 0; i < 400; i++) {
		pfn_t x;
		REQUIRE(pages_alloc(p, &x) == 0);
		pages_free(p, x);
		sleep_ms(1);
	}
	pages_get_stats(p, &st);
	printf("park decay: per-CPU cached %zu pages, decayed %llu after 400 busy ms\n",
	       st.pages_cpu_cached, (unsigned long long)(st.pages_decayed - decayed0));
	CHECK(st.pages_cpu_cached <= 64 * (size_t)ncpu_caches());
	CHECK(st.pages_decayed - decayed0 >= 1200);
	pages_destroy(p);
	REQUIRE(sched_setaffinity(0, sizeof old, &old) == 0);
}

/*
 * The built-in process budget grows with the CPUs (zs/pages.h): 128 MiB up
 * to 4, then 32 MiB a CPU; and a provider left at cache_pages 0 gets this
 * machine's (purge_defaults, which pages.c reads for it), unless
 * ZS_PAGES_CACHE_MB says otherwise.
 */
static void test_budget_rule(void)
{
	CHECK(purge_budget_for(-1) == ZS_PAGES_DEFAULT_CACHE_BYTES);
	CHECK(purge_budget_for(0) == ZS_PAGES_DEFAULT_CACHE_BYTES);
	CHECK(purge_budget_for(2) == (size_t)128 << 20);
	CHECK(purge_budget_for(4) == (size_t)128 << 20);
	CHECK(purge_budget_for(5) == (size_t)160 << 20);
	CHECK(purge_budget_for(16) == (size_t)512 << 20);
	CHECK(purge_budget_for(64) == (size_t)2048 << 20);
	if (getenv("ZS_PAGES_CACHE_MB"))
		return;
	unsigned decay;
	size_t budget;
	purge_defaults(&decay, &budget);
	CHECK(budget == purge_budget_for(sysconf(_SC_NPROCESSORS_ONLN)));
}

static void test_bad_cache_config(void)
{
	struct zs_pages_config c = { .page_size = 4096, .decay_ms = ZS_PAGES_MAX_DECAY_MS + 1 };
	errno = 0;
	CHECK(pages_create(&c) == NULL && errno == EINVAL);
	c.decay_ms = ZS_PAGES_MAX_DECAY_MS;
	struct zs_pages *p = pages_create(&c);
	CHECK(p != NULL);
	pages_destroy(p);
	c.decay_ms = 0;
	c.cache_pages = ((size_t)1 << 40) / 4096 + 1;
	errno = 0;
	CHECK(pages_create(&c) == NULL && errno == EINVAL);
	c.cache_pages = ((size_t)1 << 40) / 4096;
	p = pages_create(&c);
	CHECK(p != NULL);
	pages_destroy(p);
}

/* Seeded random single/run alloc and free with per-page checksums. */
static void test_random(uint64_t *rng, size_t ps, size_t chunk, size_t cache)
{
	enum { SLOTS = 512, OPS = 20000 };
	struct item { pfn_t first; unsigned n; uint64_t seed; } items[SLOTS];
	struct zs_pages *p = mk(ps, chunk, 0, cache);
	size_t ppc = (chunk ? chunk : 2 * MIB) / ps;
	size_t live = 0;
	int ok = 1;

	memset(items, 0, sizeof(items));
	for (int i = 0; i < SLOTS; i++)
		items[i].first = ZS_PFN_NONE;
	for (int op = 0; op < OPS; op++) {
		struct item *it = &items[tu_rand(rng) % SLOTS];
		if (it->first == ZS_PFN_NONE) {
			unsigned n = tu_rand(rng) % 4 ? 1 : 1 + (unsigned)(tu_rand(rng) % 8);
			if (n > ppc)
				n = 1;
			int rc = n == 1 && tu_rand(rng) % 2 ? pages_alloc(p, &it->first)
							    : pages_alloc_run(p, n, &it->first);
			REQUIRE(rc == 0);
			it->n = n;
			it->seed = tu_rand(rng);
			for (unsigned i = 0; i < n; i++) {
				ok &= desc_is_zero(pages_desc(p, it->first + i));
				pages_desc(p, it->first + i)->word[0] = it->seed + i;
			}
			fill(pages_addr(p, it->first), n * ps, it->seed);
			live += n;
		} else {
			ok &= verify(pages_addr(p, it->first), it->n * ps, it->seed);
			for (unsigned i = 0; i < it->n; i++) {
				ok &= pages_desc(p, it->first + i)->word[0] == it->seed + i;
				ok &= pages_valid(p, it->first + i);
			}
			if (it->n > 1 && tu_rand(rng) % 2) {
				for (unsigned i = 0; i < it->n; i++)
					pages_free(p, it->first + i);
			} else {
				pages_free_run(p, it->first, it->n);
			}
			it->first = ZS_PFN_NONE;
			live -= it->n;
		}
		if (op % 5000 == 0)
			pages_trim(p);
		if (pages_in_use(p) != live)
			ok = 0;
	}
	CHECK(ok);
	for (int i = 0; i < SLOTS; i++) {
		if (items[i].first == ZS_PFN_NONE)
			continue;
		ok &= verify(pages_addr(p, items[i].first), items[i].n * ps, items[i].seed);
		pages_free_run(p, items[i].first, items[i].n);
	}
	CHECK(ok);
	CHECK_EQ(pages_in_use(p), 0);
	pages_trim(p);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(st.chunks_mapped, 0);
	CHECK_EQ(st.pages_cached, 0);
	pages_destroy(p);
}

int main(void)
{
	uint64_t rng = tu_seed("test_pages");

	/*
	 * Stay on one CPU: the per-CPU caches are chosen by sched_getcpu(), and
	 * the exact counts checked here (a freed page is the next one handed out,
	 * what a cache holds) assume one cache.  The multi-CPU case is
	 * test_mt_pages's.
	 */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() > 0 ? sched_getcpu() : 0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		printf("could not pin to one CPU; per-CPU cache counts may vary\n");

	test_basic();
	test_bad_config();
	for (size_t ps = 4096; ps <= 65536; ps *= 4) {
		test_distinct(ps);
		test_runs(ps);
		test_rss(ps, 0);
		test_rss(ps, 16);
		test_random(&rng, ps, 0, 0);
	}
	test_run_uses_cache();
	test_slot_reuse();
	test_limit();
	test_fail_injection();
	test_alloc_bulk(0);
	test_alloc_bulk(ZS_PAGES_NO_CACHE);
	test_garbage_lookups(&rng);
	test_cache();
	test_cpu_cache();
	test_park();
	test_park_decay();
	test_bound();
	test_decay();
	test_bad_cache_config();
	test_budget_rule();
	test_free_bulk(&rng);
	test_random(&rng, 4096, 64 * KIB, 3);
	test_random(&rng, 4096, 32 * KIB, ZS_PAGES_NO_CACHE);
	test_random(&rng, 16384, 16384, 1);
	return tu_done();
}
