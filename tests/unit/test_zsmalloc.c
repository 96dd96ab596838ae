/*
 * Unit tests for zsmalloc (src/zsmalloc/), single-threaded, against the
 * published behaviour of the kernel's zsmalloc and the seeds' tables:
 *  - the class table (class counts, huge_class_size, sample geometries) at
 *    several page sizes, chain sizes, deltas and both chain policies;
 *  - zs_malloc's error values, injected page-allocation failure and the
 *    max_pages limit, after which the pool must still be consistent;
 *  - checked mode: bad, foreign, double-freed handles are refused with
 *    -EINVAL/NULL and change nothing;
 *  - object access: read/write round trips for every class at 4K/16K/64K
 *    (spanning and huge objects included), the legacy map/unmap API;
 *  - placement and accounting: per-zspage LIFO free lists, fullness groups,
 *    compaction freeing exactly what can_compact promised, the debugfs
 *    table, and free modes that must not change any page count.
 * These are the behaviours replay parity with the kernel stands on, so each
 * is asserted directly rather than through a trace.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

#include <errno.h>
#include <string.h>
#include "must.h"

static struct zs_pool *mkpool(size_t page_size, unsigned chain, unsigned delta,
			      enum zs_chain_policy pol, enum zs_free_mode fm, int checked)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = page_size;
	c.max_chain = chain;
	c.class_delta = delta;
	c.chain_policy = pol;
	c.free_mode = fm;
	c.checked = checked;
	c.deferred_worker = -1;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static struct zs_pool *mk4k(int checked)
{
	return mkpool(4096, 8, 0, ZS_CHAIN_EXHAUSTIVE, ZS_FREE_POOL_LOCK, checked);
}

/* ---- content patterns ---- */

static unsigned char pat(uint64_t seed, size_t i)
{
	uint64_t z = (seed + i / 8) * 0x9e3779b97f4a7c15ULL;
	z ^= z >> 29;
	return (unsigned char)(z >> (8 * (i % 8)));
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(seed, i);
}

static int same(const unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat(seed, i))
			return 0;
	return 1;
}

static unsigned char wbuf[65536], rbuf[65536];

static int write_obj(struct zs_pool *p, unsigned long h, size_t len, uint64_t seed)
{
	fill(wbuf, len, seed);
	return zs_obj_write(p, h, wbuf, len);
}

/* 1 if the object's first len bytes hold seed's pattern. */
static int check_obj(struct zs_pool *p, unsigned long h, size_t len, uint64_t seed)
{
	void *m = zs_obj_read_begin(p, h, len, rbuf);
	if (!m)
		return 0;
	int ok = same(m, len, seed);
	zs_obj_read_end(p, h, len, m);
	return ok;
}

static unsigned long alloc_ok(struct zs_pool *p, size_t size)
{
	unsigned long h = zs_malloc(p, size);
	REQUIRE(!ZS_IS_ERR(h) && h);
	return h;
}

static int nr_physical(struct zs_pool *p)
{
	int n = 0;
	struct zs_class_info ci;
	for (int i = 0; i < zs_class_count(p); i++) {
		REQUIRE(zs_class_info(p, i, &ci) == 0);
		n += ci.phys_index == i;
	}
	return n;
}

/* The physical class whose slot size is `size`, or fail. */
static struct zs_class_info phys_class_of_size(struct zs_pool *p, unsigned size)
{
	struct zs_class_info ci;
	for (int i = 0; i < zs_class_count(p); i++) {
		REQUIRE(zs_class_info(p, i, &ci) == 0);
		if (ci.phys_index == i && ci.size == size)
			return ci;
	}
	fprintf(stderr, "no physical class of size %u\n", size);
	CHECK(0);
	memset(&ci, 0, sizeof(ci));
	return ci;
}

/* Sum of pages_used over physical classes. */
static unsigned long stats_pages(struct zs_pool *p)
{
	unsigned long n = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(p); i++)
		if (zs_class_stats(p, i, &st, sizeof(st)) == 0)
			n += st.pages_used;
	return n;
}

/* ---- class table ---- */

static void test_class_table_4k(void)
{
	static const struct {
		unsigned chain, phys;
		size_t huge;
	} t[] = { { 8, 119, 3625 }, { 4, 69, 3257 }, { 16, 192, 3833 } };
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		struct zs_pool *p = mkpool(4096, t[k].chain, 0, ZS_CHAIN_EXHAUSTIVE, 0, 0);
		CHECK_EQ(zs_class_count(p), 255);
		CHECK_EQ(nr_physical(p), t[k].phys);
		CHECK_EQ(zs_huge_class_size(p), t[k].huge);
		zs_destroy_pool(p);
	}

	struct zs_pool *p = mk4k(0);
	struct zs_class_info ci;
	ci = phys_class_of_size(p, 32);
	CHECK_EQ(ci.pages_per_zspage, 1);
	CHECK_EQ(ci.objs_per_zspage, 128);
	CHECK_EQ(ci.tail_waste, 0);
	CHECK_EQ(ci.spanning, 0);
	ci = phys_class_of_size(p, 144);
	CHECK_EQ(ci.pages_per_zspage, 7);
	CHECK_EQ(ci.objs_per_zspage, 199);
	CHECK_EQ(ci.tail_waste, 7 * 4096 - 199 * 144);
	CHECK_EQ(ci.spanning, 6);
	ci = phys_class_of_size(p, 3072);
	CHECK_EQ(ci.pages_per_zspage, 3);
	CHECK_EQ(ci.objs_per_zspage, 4);
	CHECK_EQ(ci.tail_waste, 0);

	/* The largest non-huge class, and everything above it aliases the one huge class. */
	int largest = -1, huge_phys = -1, nhuge = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		REQUIRE(zs_class_info(p, i, &ci) == 0);
		CHECK_EQ(ci.index, i);
		CHECK_EQ(ci.size, 32 + 16 * (unsigned)i);
		if (ci.phys_index == i) {
			if (!ci.huge)
				largest = i;
			else {
				huge_phys = i;
				nhuge++;
			}
		}
		/* Aliases point up, to a physical class with identical geometry. */
		CHECK(ci.phys_index >= i);
	}
	CHECK_EQ(nhuge, 1);
	CHECK_EQ(huge_phys, 254);
	REQUIRE(largest >= 0);
	REQUIRE(zs_class_info(p, largest, &ci) == 0);
	CHECK_EQ(ci.size, 3632);
	CHECK_EQ(ci.pages_per_zspage, 8);
	CHECK_EQ(ci.objs_per_zspage, 9);
	for (int i = largest + 1; i < zs_class_count(p); i++) {
		REQUIRE(zs_class_info(p, i, &ci) == 0);
		CHECK_EQ(ci.phys_index, 254);
		CHECK(ci.huge);
		CHECK_EQ(ci.phys_size, 4096);
	}
	CHECK(zs_class_info(p, -1, &ci) != 0);
	CHECK(zs_class_info(p, 255, &ci) != 0);

	/* Lookups (no header added): class 3632 up to 3632 bytes, the huge class above. */
	CHECK_EQ(zs_lookup_class_index(p, 3632), largest);
	CHECK_EQ(zs_lookup_class_index(p, 3633), 254);
	CHECK_EQ(zs_lookup_class_index(p, 32), 0);
	CHECK_EQ(zs_lookup_class_index(p, 1), 0);
	CHECK_EQ(zs_lookup_class_index(p, 4096), 254);
	/* A huge_class_size request lands in the huge class, one byte less does not. */
	CHECK_EQ(zs_lookup_class_index(p, zs_huge_class_size(p) + ZS_HANDLE_SIZE), 254);
	CHECK(zs_lookup_class_index(p, zs_huge_class_size(p) - 1 + ZS_HANDLE_SIZE) != 254);
	zs_destroy_pool(p);
}

static void test_class_table_16k(void)
{
	struct zs_pool *p = mkpool(16384, 8, 0, ZS_CHAIN_EXHAUSTIVE, 0, 0);
	struct zs_class_info ci;
	CHECK_EQ(zs_class_count(p), 257);
	CHECK_EQ(nr_physical(p), 121);
	CHECK_EQ(zs_huge_class_size(p), 14553);
	/* Seed 002's row, delta 64: 1072 | 1120 | 8 | 117 | 32. */
	REQUIRE(zs_class_info(p, zs_lookup_class_index(p, 1072), &ci) == 0);
	CHECK_EQ(ci.size, 1120);
	CHECK_EQ(ci.pages_per_zspage, 8);
	CHECK_EQ(ci.objs_per_zspage, 117);
	CHECK_EQ(ci.tail_waste, 32);
	zs_destroy_pool(p);

	p = mkpool(16384, 8, 16, ZS_CHAIN_EXHAUSTIVE, 0, 0);
	CHECK_EQ(zs_class_count(p), 1023);
	CHECK_EQ(nr_physical(p), 264);
	static const unsigned rows[][4] = {
		{ 1072, 4, 61, 144 }, { 1088, 1, 15, 64 }, { 1104, 6, 89, 48 }, { 1120, 8, 117, 32 }
	};
	for (int k = 0; k < 4; k++) {
		REQUIRE(zs_class_info(p, zs_lookup_class_index(p, rows[k][0]), &ci) == 0);
		CHECK_EQ(ci.size, rows[k][0]);
		CHECK_EQ(ci.pages_per_zspage, rows[k][1]);
		CHECK_EQ(ci.objs_per_zspage, rows[k][2]);
		CHECK_EQ(ci.tail_waste, rows[k][3]);
	}
	zs_destroy_pool(p);

	p = mkpool(16384, 8, 16, ZS_CHAIN_HEURISTIC, 0, 0);
	CHECK_EQ(nr_physical(p), 279);
	REQUIRE(zs_class_info(p, zs_lookup_class_index(p, 1104), &ci) == 0);
	CHECK_EQ(ci.pages_per_zspage, 3);
	CHECK_EQ(ci.objs_per_zspage, 44);
	CHECK_EQ(ci.tail_waste, 576);
	REQUIRE(zs_class_info(p, zs_lookup_class_index(p, 1120), &ci) == 0);
	CHECK_EQ(ci.pages_per_zspage, 2);
	CHECK_EQ(ci.objs_per_zspage, 29);
	CHECK_EQ(ci.tail_waste, 288);
	zs_destroy_pool(p);

	p = mkpool(16384, 8, 64, ZS_CHAIN_HEURISTIC, 0, 0);
	CHECK_EQ(nr_physical(p), 134);
	zs_destroy_pool(p);
}

static void test_chain_policies(void)
{
	static const unsigned ex[][3] = {
		/* size, exhaustive pages, heuristic pages (4K, chain 10, delta 16) */
		{ 48, 3, 1 }, { 160, 5, 2 }, { 176, 4, 1 }, { 208, 3, 2 }, { 304, 9, 7 }, { 320, 5, 3 },
	};
	struct zs_pool *pe = mkpool(4096, 10, 16, ZS_CHAIN_EXHAUSTIVE, 0, 0);
	struct zs_pool *ph = mkpool(4096, 10, 16, ZS_CHAIN_HEURISTIC, 0, 0);
	CHECK_EQ(nr_physical(pe), 141);
	CHECK_EQ(nr_physical(ph), 145);
	for (size_t k = 0; k < sizeof(ex) / sizeof(ex[0]); k++) {
		struct zs_class_info ce = phys_class_of_size(pe, ex[k][0]);
		struct zs_class_info ch = phys_class_of_size(ph, ex[k][0]);
		CHECK_EQ(ce.index, (int)(ex[k][0] - 32) / 16);
		CHECK_EQ(ce.pages_per_zspage, ex[k][1]);
		CHECK_EQ(ch.pages_per_zspage, ex[k][2]);
		CHECK_EQ(ch.objs_per_zspage, ex[k][2] * 4096 / ex[k][0]);
	}
	/* Differ at 84 of the 255 sizes (before merging). */
	int differ = 0;
	for (int i = 0; i < 255; i++) {
		struct zs_class_info a, b;
		REQUIRE(zs_class_info(pe, i, &a) == 0 && zs_class_info(ph, i, &b) == 0);
		/* Physical classes only carry their own chain. */
		if (a.phys_index == i && b.phys_index == i && a.pages_per_zspage != b.pages_per_zspage)
			differ++;
	}
	CHECK(differ > 0);
	zs_destroy_pool(pe);
	zs_destroy_pool(ph);

	/* Chain 8, delta 16: 119 vs 128 physical classes. */
	pe = mkpool(4096, 8, 16, ZS_CHAIN_EXHAUSTIVE, 0, 0);
	ph = mkpool(4096, 8, 16, ZS_CHAIN_HEURISTIC, 0, 0);
	CHECK_EQ(nr_physical(pe), 119);
	CHECK_EQ(nr_physical(ph), 128);
	zs_destroy_pool(pe);
	zs_destroy_pool(ph);
}

static void test_bad_config(void)
{
	struct zs_pool_config c;
	size_t bad_ps[] = { 1000, 2048, 4095, 12288, 131072 };
	for (size_t k = 0; k < sizeof(bad_ps) / sizeof(bad_ps[0]); k++) {
		zs_pool_config_init(&c);
		c.page_size = bad_ps[k];
		errno = 0;
		CHECK_POOL_REFUSED(&c, "zs_pool_config");
	}
	zs_pool_config_init(&c);
	c.max_chain = 17;
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	zs_pool_config_init(&c);
	c.class_delta = 12; /* not a multiple of 8 */
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	zs_pool_config_init(&c);
	c.free_mode = (enum zs_free_mode)7;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");

	/* NULL config and zero fields give the defaults. */
	struct zs_pool *p = must_pool_create(NULL);
	REQUIRE(p);
	CHECK_EQ(zs_pool_page_size(p), 4096);
	CHECK_EQ(zs_pool_get_config(p)->max_chain, 8);
	CHECK_EQ(zs_class_count(p), 255);
	CHECK_EQ(zs_huge_class_size(p), 3625);
	zs_destroy_pool(p);
	zs_destroy_pool(NULL);

	/* name: NULL -> "zs", longer than 31 bytes -> its first 31. */
	char longname[64];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	zs_pool_config_init(&c);
	c.name = longname;
	p = must_pool_create(&c);
	REQUIRE(p);
	CHECK_EQ(strlen(zs_pool_get_config(p)->name), 31);
	CHECK(!strncmp(zs_pool_get_config(p)->name, longname, 31));
	zs_destroy_pool(p);
	c.name = NULL;
	p = must_pool_create(&c);
	REQUIRE(p);
	CHECK(!strcmp(zs_pool_get_config(p)->name, "zs"));
	zs_destroy_pool(p);
}

/* ---- malloc errors, failures, limits ---- */

static void test_malloc_errors(void)
{
	struct zs_pool *p = mk4k(0);
	unsigned long h = zs_malloc(p, 0);
	CHECK(ZS_IS_ERR(h));
	CHECK_EQ(ZS_ERR(h), -EINVAL);
	h = zs_malloc(p, 4097);
	CHECK(ZS_IS_ERR(h));
	CHECK_EQ(ZS_ERR(h), -ENOSPC);
	h = zs_malloc(p, (size_t)-1);
	CHECK_EQ(ZS_ERR(h), -ENOSPC);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	h = zs_malloc(p, 4096);
	CHECK(!ZS_IS_ERR(h));
	CHECK_EQ(zs_get_total_pages(p), 1);
	h = zs_malloc(p, 1);
	CHECK(!ZS_IS_ERR(h));
	CHECK_EQ(zs_get_total_pages(p), 2);
	/* zs_free ignores 0 and error values. */
	CHECK_EQ(zs_free(p, 0), 0);
	CHECK_EQ(zs_free(p, (unsigned long)-ENOMEM), 0);
	CHECK_EQ(zs_free(p, (unsigned long)-EINVAL), 0);
	CHECK_EQ(zs_free_deferred(p, 0), 0);
	CHECK_EQ(zs_free_deferred(p, (unsigned long)-ENOMEM), 0);
	CHECK_EQ(zs_pool_objects(p), 2);
	CHECK_EQ(zs_get_total_pages(p), 2);
	zs_destroy_pool(p);

	p = mkpool(16384, 8, 0, 0, 0, 0);
	CHECK_EQ(ZS_ERR(zs_malloc(p, 16385)), -ENOSPC);
	CHECK(!ZS_IS_ERR(zs_malloc(p, 16384)));
	zs_destroy_pool(p);
}

/*
 * Lengths are checked in both modes (only handles need checked mode): a read
 * or write of the whole slot works, one byte more is refused, and the slot is
 * the class's (phys_size less the header), not the size asked for.
 */
static void test_slot_lengths(void)
{
	for (int checked = 0; checked <= 1; checked++) {
		struct zs_pool *p = mk4k(checked);
		unsigned long h = alloc_ok(p, 100);
		struct zs_class_info ci;
		REQUIRE(zs_class_info(p, zs_lookup_class_index(p, 100 + ZS_HANDLE_SIZE), &ci) == 0);
		size_t cap = ci.phys_size - ZS_HANDLE_SIZE;
		CHECK(cap >= 100);
		CHECK_EQ(write_obj(p, h, cap, 5), 0);
		CHECK(check_obj(p, h, cap, 5));
		CHECK_EQ(zs_obj_write(p, h, wbuf, cap + 1), -EINVAL);
		CHECK(check_obj(p, h, cap, 5)); /* the refused write wrote nothing */
		errno = 0;
		CHECK(zs_obj_read_begin(p, h, cap + 1, rbuf) == NULL);
		CHECK_EQ(errno, EINVAL);
		struct zs_obj_piece sg[2];
		CHECK_EQ(zs_obj_read_sg_begin(p, h, cap + 1, sg), -EINVAL);
		/* A huge object's slot is the page. */
		unsigned long hh = alloc_ok(p, 4000);
		CHECK_EQ(write_obj(p, hh, 4096, 6), 0);
		CHECK_EQ(zs_obj_write(p, hh, wbuf, 4097), -EINVAL);
		CHECK(zs_obj_read_begin(p, hh, 4097, rbuf) == NULL);
		CHECK(check_obj(p, hh, 4096, 6));
		CHECK_EQ(zs_free(p, h), 0);
		CHECK_EQ(zs_free(p, hh), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

static void test_alloc_failure(void)
{
	for (int checked = 0; checked <= 1; checked++) {
		struct zs_pool *p = mk4k(checked);
		unsigned long keep = alloc_ok(p, 100);
		CHECK_EQ(write_obj(p, keep, 100, 7), 0);
		unsigned long before = zs_get_total_pages(p);

		/* 144-byte class (136 + header): 7 pages per zspage; fail the 4th page. */
		zs_pool_fail_pages(p, 3, 1);
		unsigned long h = zs_malloc(p, 136);
		CHECK(ZS_IS_ERR(h));
		CHECK_EQ(ZS_ERR(h), -ENOMEM);
		CHECK_EQ(zs_get_total_pages(p), before);
		CHECK_EQ(zs_pool_objects(p), 1);
		CHECK_EQ(stats_pages(p), before);
		/* The failure was one allocation; the next zspage builds. */
		h = zs_malloc(p, 136);
		CHECK(!ZS_IS_ERR(h));
		CHECK_EQ(zs_get_total_pages(p), before + 7);

		/* A class with a partly used zspage needs no page: no failure. */
		zs_pool_fail_pages(p, 0, 0);
		unsigned long h2 = zs_malloc(p, 136);
		CHECK(!ZS_IS_ERR(h2));
		unsigned long hh = zs_malloc(p, 4000);
		CHECK_EQ(ZS_ERR(hh), -ENOMEM);
		hh = zs_malloc(p, 4000);
		CHECK_EQ(ZS_ERR(hh), -ENOMEM);
		CHECK_EQ(zs_get_total_pages(p), before + 7);
		zs_pool_fail_pages(p, UINT64_MAX, 0);
		hh = zs_malloc(p, 4000);
		CHECK(!ZS_IS_ERR(hh));
		CHECK_EQ(zs_get_total_pages(p), before + 8);
		CHECK(check_obj(p, keep, 100, 7));
		CHECK_EQ(zs_free(p, h), 0);
		CHECK_EQ(zs_free(p, h2), 0);
		CHECK_EQ(zs_free(p, hh), 0);
		CHECK_EQ(zs_free(p, keep), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		CHECK_EQ(zs_pool_objects(p), 0);
		zs_destroy_pool(p);
	}
}

static void test_max_pages(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.max_pages = 10;
	c.deferred_worker = -1;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	unsigned long h[16];
	int n = 0;
	for (int i = 0; i < 16; i++) {
		h[n] = zs_malloc(p, 4096);
		if (ZS_IS_ERR(h[n])) {
			CHECK_EQ(ZS_ERR(h[n]), -ENOMEM);
			continue;
		}
		n++;
	}
	CHECK_EQ(n, 10);
	CHECK_EQ(zs_get_total_pages(p), 10);
	/* A 7-page zspage cannot fit either. */
	CHECK_EQ(ZS_ERR(zs_malloc(p, 136)), -ENOMEM);
	CHECK_EQ(zs_free(p, h[3]), 0);
	h[3] = zs_malloc(p, 2000);
	CHECK(!ZS_IS_ERR(h[3]));
	CHECK_EQ(zs_get_total_pages(p), 10);
	for (int i = 0; i < n; i++)
		zs_free(p, h[i]);
	CHECK_EQ(zs_get_total_pages(p), 0);
	/* With the pages back, a 7-page zspage fits. */
	unsigned long x = zs_malloc(p, 136);
	CHECK(!ZS_IS_ERR(x));
	CHECK_EQ(zs_get_total_pages(p), 7);
	zs_destroy_pool(p);
}

/* ---- checked mode ---- */

static void test_checked_bad_handles(void)
{
	for (int fm = 0; fm <= 2; fm++) {
		struct zs_pool *p = mkpool(4096, 8, 0, 0, (enum zs_free_mode)fm, 1);
		struct zs_pool *q = mkpool(4096, 8, 0, 0, (enum zs_free_mode)fm, 1);
		unsigned long h[64];
		size_t sz[64];
		for (int i = 0; i < 64; i++) {
			sz[i] = 20 + (size_t)i * 61;
			h[i] = alloc_ok(p, sz[i]);
			CHECK_EQ(write_obj(p, h[i], sz[i], 100 + i), 0);
		}
		unsigned long qh = alloc_ok(q, 50);
		CHECK_EQ(write_obj(q, qh, 50, 999), 0);
		unsigned long pages = zs_get_total_pages(p);
		long stack_word = 0;
		unsigned long bad[] = {
			1, 8, 0x1000, 0xdeadbeef, 0xdeadbee8, 0x7fffffff0000UL,
			(unsigned long)&stack_word, (unsigned long)wbuf, h[5] + 1, h[5] + 4,
			h[5] & ~0xffffUL, /* the chunk base: never a handle */
			qh,               /* foreign */
			/* reliability.md: a live handle with any bit set outside its address and
			 * generation (bits 60-63), or with its generation changed (bits 1-2,
			 * 48-59), is not that object's handle */
			h[5] | 1UL << 60, h[5] | 1UL << 61, h[5] | 1UL << 62, h[5] | 1UL << 63,
			h[5] ^ 1UL << 48, h[5] ^ 1UL << 59, h[5] ^ 2UL,
		};
		for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			CHECK_EQ(zs_free(p, bad[k]), -EINVAL);
			CHECK(zs_obj_read_begin(p, bad[k], 8, rbuf) == NULL);
			CHECK_EQ(zs_obj_write(p, bad[k], wbuf, 8), -EINVAL);
			CHECK(zs_map_object(p, bad[k], ZS_MM_RO) == NULL);
			CHECK_EQ(zs_free_deferred(p, bad[k]), -EINVAL);
		}
		/* Double free, and access after free. */
		CHECK_EQ(zs_free(p, h[10]), 0);
		CHECK_EQ(zs_free(p, h[10]), -EINVAL);
		CHECK(zs_obj_read_begin(p, h[10], 8, rbuf) == NULL);
		CHECK_EQ(zs_obj_write(p, h[10], wbuf, 8), -EINVAL);
		CHECK_EQ(zs_free_deferred(p, h[10]), -EINVAL);
		h[10] = 0;
		/* Nothing changed: counts, pages, every other object, the foreign pool. */
		CHECK_EQ(zs_pool_objects(p), 63);
		CHECK(zs_get_total_pages(p) <= pages);
		CHECK_EQ(stats_pages(p), zs_get_total_pages(p));
		int ok = 1;
		for (int i = 0; i < 64; i++)
			if (h[i] && !check_obj(p, h[i], sz[i], 100 + i))
				ok = 0;
		CHECK(ok);
		CHECK(check_obj(q, qh, 50, 999));
		CHECK_EQ(zs_pool_objects(q), 1);
		/* Everything still frees normally. */
		for (int i = 0; i < 64; i++)
			if (h[i])
				CHECK_EQ(zs_free(p, h[i]), 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		CHECK_EQ(zs_free(q, qh), 0);
		CHECK_EQ(zs_get_total_pages(q), 0);
		/* After the last object, handles of an emptied pool are still refused. */
		CHECK_EQ(zs_free(p, h[3]), -EINVAL);
		zs_compact(p);
		zs_pool_trim(p);
		CHECK_EQ(zs_free(p, h[3]), -EINVAL);
		CHECK(zs_obj_read_begin(p, h[3], 8, rbuf) == NULL);
		zs_destroy_pool(p);
		zs_destroy_pool(q);
	}
}

/* A freed huge object's handle: the zspage is gone, the handle is free. */
static void test_checked_huge(void)
{
	struct zs_pool *p = mk4k(1);
	unsigned long a = alloc_ok(p, 4096), b = alloc_ok(p, 4000);
	CHECK_EQ(write_obj(p, a, 4096, 1), 0);
	CHECK_EQ(write_obj(p, b, 4000, 2), 0);
	CHECK_EQ(zs_free(p, a), 0);
	CHECK_EQ(zs_free(p, a), -EINVAL);
	CHECK(check_obj(p, b, 4000, 2));
	CHECK_EQ(zs_get_total_pages(p), 1);
	CHECK_EQ(zs_free(p, b), 0);
	zs_destroy_pool(p);
}

/* ---- object access ---- */

/*
 * For every physical class: fill one zspage with maximum-size objects, write
 * each with its own pattern, read all back; spanning reads must come back in
 * local_copy, exactly info.spanning of them per zspage.
 */
static void roundtrip_all_classes(size_t ps, unsigned delta)
{
	struct zs_pool *p = mkpool(ps, 8, delta, 0, 0, 1);
	struct zs_class_info ci;
	static unsigned long hs[2048];
	int bad_lookup = 0, bad_data = 0, bad_span = 0, bad_len = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		REQUIRE(zs_class_info(p, i, &ci) == 0);
		if (ci.phys_index != i)
			continue;
		size_t len = ci.huge ? ps : ci.phys_size - ZS_HANDLE_SIZE;
		REQUIRE(ci.objs_per_zspage <= 2048);
		if (zs_lookup_class_index(p, ci.huge ? ps : len + ZS_HANDLE_SIZE) != i)
			bad_lookup++;
		unsigned spans = 0;
		for (unsigned k = 0; k < ci.objs_per_zspage; k++) {
			hs[k] = alloc_ok(p, len);
			if (write_obj(p, hs[k], len, (uint64_t)i << 20 | k))
				bad_data++;
		}
		/* Exactly one zspage. */
		if (zs_get_total_pages(p) != ci.pages_per_zspage)
			bad_data++;
		for (unsigned k = 0; k < ci.objs_per_zspage; k++) {
			void *m = zs_obj_read_begin(p, hs[k], len, rbuf);
			if (!m) {
				bad_data++;
				continue;
			}
			if (m == (void *)rbuf) {
				spans++;
				/* Without a local copy a spanning object cannot be returned. */
			}
			if (!same(m, len, (uint64_t)i << 20 | k))
				bad_data++;
			zs_obj_read_end(p, hs[k], len, m);
			if (m == (void *)rbuf) {
				if (zs_obj_read_begin(p, hs[k], len, NULL) != NULL)
					bad_span++;
			}
			/* More than the slot holds. */
			if (zs_obj_read_begin(p, hs[k], len + 1, rbuf) != NULL)
				bad_len++;
			if (zs_obj_write(p, hs[k], wbuf, len + 1) != -EINVAL)
				bad_len++;
		}
		if (spans != ci.spanning)
			bad_span++;
		/* A partial read of a spanning object's head needs no copy. */
		for (unsigned k = 0; k < ci.objs_per_zspage; k++)
			CHECK_EQ(zs_free(p, hs[k]), 0);
		if (zs_get_total_pages(p) != 0)
			bad_data++;
	}
	if (bad_lookup || bad_data || bad_span || bad_len)
		fprintf(stderr, "roundtrip ps %zu delta %u: lookup %d data %d span %d len %d\n", ps,
			delta, bad_lookup, bad_data, bad_span, bad_len);
	CHECK_EQ(bad_lookup, 0);
	CHECK_EQ(bad_data, 0);
	CHECK_EQ(bad_span, 0);
	CHECK_EQ(bad_len, 0);
	zs_destroy_pool(p);
}

static void test_roundtrip(void)
{
	roundtrip_all_classes(4096, 0);
	roundtrip_all_classes(16384, 0);
	roundtrip_all_classes(65536, 0);
	roundtrip_all_classes(16384, 16);
	roundtrip_all_classes(4096, 8); /* slots may start 8 bytes before a page end */
}

/* Every request size 1..page_size reads back what was written, at its own length. */
static void test_every_size(void)
{
	struct zs_pool *p = mk4k(0);
	static unsigned long hs[4097];
	for (size_t s = 1; s <= 4096; s++) {
		hs[s] = alloc_ok(p, s);
		CHECK_EQ(write_obj(p, hs[s], s, s), 0);
	}
	int bad = 0;
	for (size_t s = 1; s <= 4096; s++)
		if (!check_obj(p, hs[s], s, s))
			bad++;
	CHECK_EQ(bad, 0);
	CHECK_EQ(zs_pool_objects(p), 4096);
	CHECK_EQ(zs_get_total_pages(p), stats_pages(p));
	for (size_t s = 1; s <= 4096; s += 2)
		zs_free(p, hs[s]);
	zs_compact(p);
	bad = 0;
	for (size_t s = 2; s <= 4096; s += 2)
		if (!check_obj(p, hs[s], s, s))
			bad++;
	CHECK_EQ(bad, 0);
	for (size_t s = 2; s <= 4096; s += 2)
		zs_free(p, hs[s]);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/* Legacy zs_map_object/zs_unmap_object: RO, RW, WO on non-spanning, spanning and huge objects. */
static void test_legacy_map(void)
{
	static const size_t ps_list[] = { 4096, 16384 };
	for (size_t pi = 0; pi < 2; pi++) {
		size_t ps = ps_list[pi];
		struct zs_pool *p = mkpool(ps, 8, 0, 0, 0, 1);
		/* 144-byte class at 4K spans 6 times per zspage; take a whole zspage of several classes. */
		static const unsigned sizes[] = { 136, 200, 1000, 3000 };
		int bad = 0;
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			size_t len = sizes[si];
			struct zs_class_info ci;
			REQUIRE(zs_class_info(p, zs_lookup_class_index(p, len + ZS_HANDLE_SIZE), &ci) == 0);
			unsigned n = ci.objs_per_zspage;
			unsigned long *h = calloc(n, sizeof(*h));
			REQUIRE(h);
			for (unsigned k = 0; k < n; k++)
				h[k] = alloc_ok(p, len);
			/* RW write, RO read. */
			for (unsigned k = 0; k < n; k++) {
				unsigned char *m = zs_map_object(p, h[k], ZS_MM_RW);
				REQUIRE(m);
				fill(m, len, 1000 + k);
				zs_unmap_object(p, h[k]);
			}
			for (unsigned k = 0; k < n; k++) {
				unsigned char *m = zs_map_object(p, h[k], ZS_MM_RO);
				REQUIRE(m);
				bad += !same(m, len, 1000 + k);
				zs_unmap_object(p, h[k]);
				bad += !check_obj(p, h[k], len, 1000 + k);
			}
			/* RW read-modify-write. */
			for (unsigned k = 0; k < n; k++) {
				unsigned char *m = zs_map_object(p, h[k], ZS_MM_RW);
				REQUIRE(m);
				bad += !same(m, len, 1000 + k);
				fill(m, len, 2000 + k);
				zs_unmap_object(p, h[k]);
			}
			/* WO, in reverse so the bounce buffer last held another object. */
			for (unsigned k = n; k-- > 0;) {
				unsigned char *m = zs_map_object(p, h[k], ZS_MM_WO);
				REQUIRE(m);
				fill(m, len, 3000 + k);
				zs_unmap_object(p, h[k]);
			}
			for (unsigned k = 0; k < n; k++)
				bad += !check_obj(p, h[k], len, 3000 + k);
			/* The in-object headers survived: checked frees accept every handle. */
			int freed_bad = 0;
			for (unsigned k = 0; k < n; k += 2)
				freed_bad += zs_free(p, h[k]) != 0;
			CHECK_EQ(freed_bad, 0);
			/* Compaction moves objects by their headers; contents must follow. */
			zs_compact(p);
			for (unsigned k = 1; k < n; k += 2)
				bad += !check_obj(p, h[k], len, 3000 + k);
			for (unsigned k = 1; k < n; k += 2)
				freed_bad += zs_free(p, h[k]) != 0;
			CHECK_EQ(freed_bad, 0);
			free(h);
		}
		/* Huge object. */
		unsigned long hh = alloc_ok(p, ps);
		unsigned char *m = zs_map_object(p, hh, ZS_MM_WO);
		REQUIRE(m);
		fill(m, ps, 77);
		zs_unmap_object(p, hh);
		m = zs_map_object(p, hh, ZS_MM_RO);
		REQUIRE(m);
		bad += !same(m, ps, 77);
		zs_unmap_object(p, hh);
		CHECK_EQ(zs_free(p, hh), 0);
		if (bad)
			fprintf(stderr, "legacy map ps %zu: %d bad\n", ps, bad);
		CHECK_EQ(bad, 0);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

/*
 * Checked mode, one mapping per thread (zs/zsmalloc.h): a second zs_map_object
 * before the unmap, of any handle or pool, returns NULL with EBUSY and leaves
 * the first mapping in force; the unmap of the refused handle is ignored.
 */
static void test_legacy_map_one_at_a_time(void)
{
	struct zs_pool *p = mk4k(1), *q = mk4k(1);
	unsigned long a = alloc_ok(p, 200), b = alloc_ok(p, 300), c = alloc_ok(q, 100);
	CHECK_EQ(write_obj(p, a, 200, 11), 0);
	unsigned char *m = zs_map_object(p, a, ZS_MM_RW);
	REQUIRE(m);
	errno = 0;
	CHECK(zs_map_object(p, b, ZS_MM_RO) == NULL);
	CHECK_EQ(errno, EBUSY);
	errno = 0;
	CHECK(zs_map_object(p, a, ZS_MM_RO) == NULL); /* the same handle again */
	CHECK_EQ(errno, EBUSY);
	errno = 0;
	CHECK(zs_map_object(q, c, ZS_MM_RO) == NULL); /* another pool */
	CHECK_EQ(errno, EBUSY);
	zs_unmap_object(p, b); /* not the mapping in force: ignored */
	zs_unmap_object(q, c);
	CHECK(same(m, 200, 11));
	fill(m, 200, 12); /* the RW mapping is still a's, written back at its unmap */
	zs_unmap_object(p, a);
	CHECK(check_obj(p, a, 200, 12));
	m = zs_map_object(p, b, ZS_MM_RO); /* after the unmap, a new mapping works */
	CHECK(m != NULL);
	if (m)
		zs_unmap_object(p, b);
	CHECK_EQ(zs_free(p, a), 0);
	CHECK_EQ(zs_free(p, b), 0);
	CHECK_EQ(zs_free(q, c), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	zs_destroy_pool(q);
}

/*
 * The smallest case of the above: a WO mapping of a spanning object must not
 * write the 8-byte in-object header back from the bounce buffer (the kernel's
 * __zs_unmap_object skips it), else the header names the handle mapped before.
 */
static void test_legacy_wo_keeps_header(void)
{
	struct zs_pool *p = mk4k(1);
	/* 144-byte class: slot 28 (offset 4032) spans pages 0 and 1; 56 spans too. */
	unsigned long h[199];
	for (int k = 0; k < 199; k++)
		h[k] = alloc_ok(p, 136);
	unsigned char *m = zs_map_object(p, h[28], ZS_MM_RW);
	REQUIRE(m);
	fill(m, 136, 1);
	zs_unmap_object(p, h[28]);
	m = zs_map_object(p, h[56], ZS_MM_WO);
	REQUIRE(m);
	fill(m, 136, 2);
	zs_unmap_object(p, h[56]);
	CHECK(check_obj(p, h[28], 136, 1));
	CHECK(check_obj(p, h[56], 136, 2));
	CHECK_EQ(zs_free(p, h[56]), 0); /* fails if h[56]'s header now names h[28] */
	CHECK_EQ(zs_free(p, h[28]), 0);
	zs_destroy_pool(p);
}

/* ---- placement ---- */

static void test_lifo(void)
{
	struct zs_pool *p = mk4k(0);
	/* 32-byte class (24 + header): one page, 128 slots. */
	unsigned long h[5];
	void *addr[5];
	for (int i = 0; i < 5; i++) {
		h[i] = alloc_ok(p, 24);
		addr[i] = zs_obj_read_begin(p, h[i], 24, NULL);
		REQUIRE(addr[i]);
		zs_obj_read_end(p, h[i], 24, addr[i]);
	}
	/* A fresh zspage hands out slots in address order. */
	for (int i = 1; i < 5; i++)
		CHECK_EQ((char *)addr[i] - (char *)addr[i - 1], 32);
	/* Free 1 then 3: LIFO gives 3 back first, then 1. */
	zs_free(p, h[1]);
	zs_free(p, h[3]);
	unsigned long a = alloc_ok(p, 24), b = alloc_ok(p, 24), c = alloc_ok(p, 24);
	void *pa = zs_obj_read_begin(p, a, 24, NULL);
	zs_obj_read_end(p, a, 24, pa);
	void *pb = zs_obj_read_begin(p, b, 24, NULL);
	zs_obj_read_end(p, b, 24, pb);
	void *pc = zs_obj_read_begin(p, c, 24, NULL);
	zs_obj_read_end(p, c, 24, pc);
	CHECK(pa == addr[3]);
	CHECK(pb == addr[1]);
	CHECK((char *)pc == (char *)addr[4] + 32);
	CHECK_EQ(zs_get_total_pages(p), 1);
	zs_destroy_pool(p);
}

static void test_fullness_and_compaction(void)
{
	struct zs_pool *p = mk4k(0);
	struct zs_class_stats st;
	int cls = zs_lookup_class_index(p, 32);
	CHECK_EQ(cls, 0);
	CHECK_EQ(zs_class_stats(p, 1 + zs_lookup_class_index(p, 3632), &st, sizeof(st)), -ENOENT);
	static unsigned long h[8 * 128];
	h[0] = alloc_ok(p, 24);
	REQUIRE(zs_class_stats(p, cls, &st, sizeof(st)) == 0);
	CHECK_EQ(st.fullness[1], 1);
	CHECK_EQ(st.obj_used, 1);
	CHECK_EQ(st.obj_allocated, 128);
	CHECK_EQ(st.pages_used, 1);
	CHECK_EQ(st.size, 32);
	CHECK_EQ(st.pages_per_zspage, 1);
	CHECK_EQ(st.objs_per_zspage, 128);
	for (int i = 1; i < 64; i++)
		h[i] = alloc_ok(p, 24);
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[1], 0);
	CHECK_EQ(st.fullness[6], 1); /* 64/128 = 50% -> group 6 */
	for (int i = 64; i < 127; i++)
		h[i] = alloc_ok(p, 24);
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[10], 1); /* 127/128 = 99% */
	h[127] = alloc_ok(p, 24);
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[11], 1);
	CHECK_EQ(st.fullness[10], 0);
	for (int i = 128; i < 8 * 128; i++)
		h[i] = alloc_ok(p, 24);
	for (int i = 0; i < 8 * 128; i++)
		write_obj(p, h[i], 24, i);
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[11], 8);
	CHECK_EQ(st.freeable, 0);
	CHECK_EQ(zs_compact(p), 0);
	/* Free every other object: each zspage half full, four pages' worth free. */
	for (int i = 0; i < 8 * 128; i += 2) {
		zs_free(p, h[i]);
		h[i] = 0;
	}
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[6], 8);
	CHECK_EQ(st.obj_used, 512);
	CHECK_EQ(st.freeable, 4);
	CHECK_EQ(zs_get_total_pages(p), 8);
	CHECK_EQ(zs_compact(p), 4);
	struct zs_pool_stats ps;
	zs_pool_stats(p, &ps, sizeof(ps));
	CHECK_EQ(ps.pages_compacted, 4);
	CHECK_EQ(zs_get_total_pages(p), 4);
	zs_class_stats(p, cls, &st, sizeof(st));
	CHECK_EQ(st.fullness[11], 4);
	CHECK_EQ(st.freeable, 0);
	CHECK_EQ(st.pages_used, 4);
	int bad = 0;
	for (int i = 1; i < 8 * 128; i += 2)
		bad += !check_obj(p, h[i], 24, i);
	CHECK_EQ(bad, 0);

	/* 144-byte class: 7 pages / 199 objs; four zspages, every other freed -> 14 freeable. */
	int c2 = zs_lookup_class_index(p, 144);
	static unsigned long g[4 * 199];
	for (int i = 0; i < 4 * 199; i++) {
		g[i] = alloc_ok(p, 136);
		write_obj(p, g[i], 136, 50000 + i);
	}
	CHECK_EQ(zs_get_total_pages(p), 4 + 28);
	for (int i = 0; i < 4 * 199; i += 2)
		zs_free(p, g[i]);
	zs_class_stats(p, c2, &st, sizeof(st));
	CHECK_EQ(st.obj_used, 398);
	CHECK_EQ(st.freeable, 14);
	CHECK_EQ(zs_compact(p), 14);
	zs_pool_stats(p, &ps, sizeof(ps));
	CHECK_EQ(ps.pages_compacted, 18);
	CHECK_EQ(zs_get_total_pages(p), 4 + 14);
	CHECK_EQ(stats_pages(p), 18);
	bad = 0;
	for (int i = 1; i < 4 * 199; i += 2)
		bad += !check_obj(p, g[i], 136, 50000 + i);
	CHECK_EQ(bad, 0);
	for (int i = 1; i < 8 * 128; i += 2)
		zs_free(p, h[i]);
	for (int i = 1; i < 4 * 199; i += 2)
		zs_free(p, g[i]);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_pool_stats(p, &ps, sizeof(ps));
	CHECK_EQ(ps.pages_compacted, 18);
	zs_destroy_pool(p);
}

static void test_print_classes(void)
{
	struct zs_pool *p = mk4k(0);
	unsigned long a = alloc_ok(p, 24), b = alloc_ok(p, 4096);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	REQUIRE(f);
	zs_print_classes(p, f);
	fclose(f);
	REQUIRE(buf);
	CHECK(strstr(buf, "class") != NULL);
	CHECK(strstr(buf, "size") != NULL);
	CHECK(strstr(buf, "obj_allocated") != NULL);
	CHECK(strstr(buf, "pages_per_zspage") != NULL);
	CHECK(strstr(buf, "freeable") != NULL);
	CHECK(strstr(buf, "100%") != NULL);
	CHECK(strstr(buf, "Total") != NULL);
	/* Row for class 0 (size 32) and class 254 (size 4096). */
	CHECK(strstr(buf, "\n     0    32 ") != NULL);
	CHECK(strstr(buf, "\n   254  4096 ") != NULL);
	free(buf);
	zs_free(p, a);
	zs_free(p, b);
	zs_destroy_pool(p);
}

/* Free modes change locking only: the same sequence gives the same page counts. */
static void test_free_modes_same_pages(void)
{
	enum { OPS = 20000, LIVE = 3000 };
	static unsigned long trace[3][OPS];
	static unsigned long pc[3];
	for (int fm = 0; fm <= 2; fm++) {
		struct zs_pool *p = mkpool(4096, 8, 0, 0, (enum zs_free_mode)fm, fm == 2);
		static unsigned long h[LIVE];
		memset(h, 0, sizeof(h));
		uint64_t s = 12345;
		for (int i = 0; i < OPS; i++) {
			uint64_t r = tu_rand(&s);
			int slot = (int)(r % LIVE);
			if (r >> 60 == 0) {
				zs_compact(p);
			} else if (h[slot]) {
				CHECK_EQ(zs_free(p, h[slot]), 0);
				h[slot] = 0;
			} else {
				h[slot] = alloc_ok(p, 1 + (r >> 20) % 4096);
			}
			trace[fm][i] = zs_get_total_pages(p);
		}
		struct zs_pool_stats st;
		zs_pool_stats(p, &st, sizeof(st));
		pc[fm] = st.pages_compacted;
		for (int i = 0; i < LIVE; i++)
			zs_free(p, h[i]);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
	CHECK(pc[0] > 0);
	CHECK_EQ(pc[1], pc[0]);
	CHECK_EQ(pc[2], pc[0]);
	CHECK(memcmp(trace[0], trace[1], sizeof(trace[0])) == 0);
	CHECK(memcmp(trace[0], trace[2], sizeof(trace[0])) == 0);
}

/*
 * zs_malloc_write (allocate + write in one call): errors as zs_malloc's with
 * nothing allocated, every size reads back in both profiles and checked
 * mode, it places objects exactly where zs_malloc + zs_obj_write do (the
 * same pages and per-class counts, object for object), multi-page objects
 * work, a limit refuses it cleanly, and queued deferred frees are freed and
 * the call retried before it says -ENOMEM.
 */
static void test_malloc_write(void)
{
	fill(wbuf, sizeof(wbuf), 77);
	struct zs_pool *p = mk4k(0);
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, wbuf, 0)), -EINVAL);
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, NULL, 100)), -EINVAL);
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, wbuf, 4097)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, wbuf, (size_t)-1)), -ENOSPC);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	zs_destroy_pool(p);

	static unsigned long hw[4097], hp[4097];
	for (int prof = 0; prof < 3; prof++) { /* kernel, application, kernel checked */
		struct zs_pool_config c;
		if (prof == 1)
			zs_pool_config_init_app(&c);
		else
			zs_pool_config_init(&c);
		c.checked = prof == 2;
		c.class_shards = prof == 1 ? 1 : 0; /* one copy: the pair's pool places alike */
		struct zs_pool *pw = must_pool_create(&c), *pp = must_pool_create(&c);
		REQUIRE(pw && pp);
		int bad = 0;
		for (size_t s = 1; s <= 4096; s++) {
			fill(wbuf, s, s);
			hw[s] = zs_malloc_write(pw, wbuf, s);
			REQUIRE(!ZS_IS_ERR(hw[s]));
			hp[s] = alloc_ok(pp, s);
			CHECK_EQ(zs_obj_write(pp, hp[s], wbuf, s), 0);
			if (zs_get_total_pages(pw) != zs_get_total_pages(pp))
				bad++;
		}
		CHECK_EQ(bad, 0);
		for (size_t s = 1; s <= 4096; s++)
			if (!check_obj(pw, hw[s], s, s))
				bad++;
		CHECK_EQ(bad, 0);
		/* Free every other one, compact both: still the same pages, class by class. */
		for (size_t s = 1; s <= 4096; s += 2) {
			CHECK_EQ(zs_free(pw, hw[s]), 0);
			CHECK_EQ(zs_free(pp, hp[s]), 0);
		}
		zs_compact(pw);
		zs_compact(pp);
		for (int i = 0; i < zs_class_count(pw); i++) {
			struct zs_class_stats a, b;
			if (zs_class_stats(pw, i, &a, sizeof(a)) || zs_class_stats(pp, i, &b, sizeof(b)))
				continue;
			if (a.obj_used != b.obj_used || a.obj_allocated != b.obj_allocated ||
			    a.pages_used != b.pages_used)
				bad++;
		}
		CHECK_EQ(bad, 0);
		for (size_t s = 2; s <= 4096; s += 2)
			if (!check_obj(pw, hw[s], s, s))
				bad++;
		CHECK_EQ(bad, 0);
		zs_destroy_pool(pw);
		zs_destroy_pool(pp);
	}

	/* Multi-page objects (with packed tails) read back whole. */
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.max_object_size = 4 * 4096;
	p = must_pool_create(&c);
	REQUIRE(p);
	unsigned long big[8];
	for (int i = 0; i < 8; i++) {
		size_t len = 4097 + (size_t)i * 1500;
		fill(wbuf, len, 1000 + (uint64_t)i);
		big[i] = zs_malloc_write(p, wbuf, len);
		REQUIRE(!ZS_IS_ERR(big[i]));
	}
	for (int i = 0; i < 8; i++)
		CHECK(check_obj(p, big[i], 4097 + (size_t)i * 1500, 1000 + (uint64_t)i));
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, wbuf, 4 * 4096 + 1)), -ENOSPC);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(zs_free(p, big[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);

	/* At max_pages: -ENOMEM, nothing allocated; a queued deferred free makes room. */
	zs_pool_config_init(&c);
	c.max_pages = 10;
	c.deferred_worker = -1; /* no worker: the queue holds the free until flushed */
	p = must_pool_create(&c);
	REQUIRE(p);
	unsigned long h[10];
	for (int i = 0; i < 10; i++) {
		fill(wbuf, 4096, 500 + (uint64_t)i);
		h[i] = zs_malloc_write(p, wbuf, 4096);
		REQUIRE(!ZS_IS_ERR(h[i]));
	}
	CHECK_EQ(ZS_ERR(zs_malloc_write(p, wbuf, 4096)), -ENOMEM);
	CHECK_EQ(zs_pool_objects(p), 10);
	CHECK_EQ(zs_get_total_pages(p), 10);
	CHECK_EQ(zs_free_deferred(p, h[4]), 0);
	fill(wbuf, 4096, 999);
	h[4] = zs_malloc_write(p, wbuf, 4096);
	CHECK(!ZS_IS_ERR(h[4]));
	CHECK(check_obj(p, h[4], 4096, 999));
	CHECK(check_obj(p, h[5], 4096, 505));
	CHECK_EQ(zs_pool_objects(p), 10);
	zs_destroy_pool(p);
}

int main(void)
{
	test_class_table_4k();
	test_class_table_16k();
	test_chain_policies();
	test_bad_config();
	test_malloc_errors();
	test_slot_lengths();
	test_alloc_failure();
	test_max_pages();
	test_checked_bad_handles();
	test_checked_huge();
	test_roundtrip();
	test_every_size();
	test_legacy_map();
	test_legacy_map_one_at_a_time();
	test_legacy_wo_keeps_header();
	test_lifo();
	test_fullness_and_compaction();
	test_print_classes();
	test_free_modes_same_pages();
	test_malloc_write();
	return tu_done();
}
