/*
 * zblock tests: descriptor tables (kernel values at 4K, ascending everywhere),
 * the size lookup's bounds, the list policy, empty-block freeing, checked-mode
 * rejection of bad handles, failure injection, and a seeded model-based run
 * with per-object checksums at every supported page size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "zs/zblock.h"
#include "zs/harness.h"
#include "must.h"

/* S for the final 4K table as computed in the reference (LP64, H = 48). */
static const unsigned kernel_4k_S[] = {
	144,  224,  336,  400,  472,  536,  624,  672,  736,  808,  856,  904,  960,
	1008, 1064, 1112, 1160, 1224, 1288, 1352, 1456, 1528, 1624, 1696, 1808, 1904,
	2024, 2176, 2264, 2384, 2512, 2720, 2968, 3176, 3400, 3632, 4080,
};

static void fill(unsigned char *buf, size_t len, uint64_t key)
{
	uint64_t s = key;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tu_rand(&s);
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(buf + i, &v, n);
	}
}

static int same(const unsigned char *got, size_t len, uint64_t key)
{
	static unsigned char want[1 << 17];
	fill(want, len, key);
	return memcmp(got, want, len) == 0;
}

static struct zblock_pool *mkpool(size_t ps, int checked, int huge)
{
	struct zblock_config c;
	zblock_config_init(&c);
	c.page_size = ps;
	c.checked = checked;
	c.huge = huge;
	struct zblock_pool *p = must_zblock_create(&c);
	REQUIRE(p);
	return p;
}

static void test_tables(void)
{
	struct zblock_class_info ci[80];
	int n = zblock_geometry(4096, 0, ci, 80);
	CHECK_EQ(n, 37);
	for (int i = 0; i < n && i < 37; i++)
		CHECK_EQ(ci[i].slot_size, kernel_4k_S[i]);
	n = zblock_geometry(16384, 0, ci, 80);
	CHECK_EQ(n, 61);
	CHECK_EQ(ci[0].slots_per_block, 185);
	CHECK_EQ(ci[0].slot_size, 88);
	CHECK_EQ(ci[n - 1].slot_size, 16368); /* (4*16384 - 64)/4: our H is 64, the kernel's 72 */
	size_t sizes[] = { 4096, 8192, 16384, 32768, 65536 };
	for (int k = 0; k < 5; k++) {
		for (int huge = 0; huge < 2; huge++) {
			n = zblock_geometry(sizes[k], huge, ci, 80);
			CHECK(n > 8 && n <= 72);
			for (int i = 0; i < n; i++) {
				CHECK(ci[i].pages_per_block >= 1 && ci[i].pages_per_block <= 8);
				CHECK(ci[i].slots_per_block >= 1);
				CHECK((size_t)ci[i].slot_size * ci[i].slots_per_block <=
				      sizes[k] * ci[i].pages_per_block);
				if (i)
					CHECK(ci[i].slot_size > ci[i - 1].slot_size);
			}
			if (huge)
				CHECK(ci[n - 1].slot_size >= sizes[k]);
			else
				CHECK(ci[n - 1].slot_size < sizes[k]);
		}
	}
	CHECK_EQ(zblock_geometry(3000, 0, ci, 80), -EINVAL);
	CHECK_EQ(zblock_geometry(131072, 0, ci, 80), -EINVAL);
	CHECK_EQ(zblock_geometry(0, 0, ci, 80), -EINVAL);
	/* A short array: up to max entries filled, the full count returned. */
	memset(ci, 0xa5, sizeof(ci));
	CHECK_EQ(zblock_geometry(4096, 0, ci, 5), 37);
	CHECK_EQ(ci[4].slot_size, kernel_4k_S[4]);
	CHECK_EQ(ci[5].slot_size, 0xa5a5a5a5u); /* untouched */
	CHECK_EQ(zblock_geometry(4096, 0, NULL, 0), 37);
	/* NULL config: the defaults (4K pages, huge off, unchecked). */
	struct zblock_pool *dp = must_zblock_create(NULL);
	REQUIRE(dp);
	CHECK_EQ(zblock_class_count(dp), 37);
	CHECK_EQ(zblock_max_size(dp), 4080);
	CHECK_EQ(ZS_ERR(zblock_malloc(dp, 4096)), -ENOSPC);
	unsigned long dh = zblock_malloc(dp, 4080);
	CHECK(!ZS_IS_ERR(dh));
	CHECK_EQ(zblock_get_total_pages(dp), 4); /* the 4080 B class: 4 slots in 4 pages */
	CHECK_EQ(zblock_compact(dp), 0);         /* zblock moves nothing */
	CHECK_EQ(zblock_free(dp, dh), 0);
	CHECK_EQ(zblock_get_total_pages(dp), 0);
	zblock_destroy_pool(dp);
	struct zblock_config c;
	zblock_config_init(&c);
	c.page_size = 12288;
	errno = 0;
	CHECK_ZBLOCK_REFUSED(&c, "zblock_config");
}

static void test_lookup(void)
{
	struct zblock_pool *p = mkpool(4096, 1, 0);
	int n = zblock_class_count(p);
	CHECK_EQ(zblock_header_size(p), 48);
	CHECK_EQ(zblock_lookup_class(p, 1), 0);
	for (int i = 0; i < n; i++) {
		struct zblock_class_info ci;
		REQUIRE(zblock_class_info(p, i, &ci) == 0);
		/* An exact fit stays in its class (the kernel's strict > moves it up). */
		CHECK_EQ(zblock_lookup_class(p, ci.slot_size), i);
		CHECK_EQ(zblock_lookup_class(p, ci.slot_size + 1), i + 1 < n ? i + 1 : -ENOSPC);
		CHECK_EQ(zblock_lookup_class(p, ci.slot_size + 1) < 0, ci.slot_size == 4080);
		if (i)
			CHECK_EQ(zblock_lookup_class(p, ci.slot_size - 1), i);
	}
	CHECK_EQ(zblock_max_size(p), 4080);
	unsigned long h = zblock_malloc(p, 4080);
	CHECK(!ZS_IS_ERR(h));
	CHECK_EQ(zblock_free(p, h), 0);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 4081)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 4096)), -ENOSPC);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 0)), -EINVAL);
	zblock_destroy_pool(p);

	p = mkpool(4096, 1, 1);
	CHECK_EQ(zblock_max_size(p), 4096);
	h = zblock_malloc(p, 4096);
	CHECK(!ZS_IS_ERR(h));
	CHECK_EQ(zblock_get_total_pages(p), 8);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, zblock_max_size(p) + 1)), -ENOSPC);
	CHECK_EQ(zblock_free(p, h), 0);
	CHECK_EQ(zblock_get_total_pages(p), 0);
	zblock_destroy_pool(p);
}

/* Block address of a handle, for the policy test (handles are block | slot). */
static unsigned long blk(unsigned long h)
{
	return h & ~0xfffUL;
}

static void test_policy(void)
{
	struct zblock_pool *p = mkpool(4096, 1, 0);
	struct zblock_class_info ci;
	zblock_class_info(p, 0, &ci); /* 28 slots of 144 B in one page */
	unsigned n = ci.slots_per_block;
	unsigned long h[3][64];
	for (int b = 0; b < 3; b++)
		for (unsigned i = 0; i < n; i++) {
			h[b][i] = zblock_malloc(p, 100);
			REQUIRE(!ZS_IS_ERR(h[b][i]));
			CHECK_EQ(blk(h[b][i]), blk(h[b][0]));
		}
	CHECK_EQ(zblock_get_total_pages(p), 3);
	/* A and B refill in that order: A first to the list, B behind it at the tail. */
	zblock_free(p, h[0][5]);
	zblock_free(p, h[1][7]);
	unsigned long x = zblock_malloc(p, 100);
	CHECK_EQ(blk(x), blk(h[0][0]));
	CHECK_EQ(x & 0xfff, 5); /* lowest free slot */
	unsigned long y = zblock_malloc(p, 100);
	CHECK_EQ(blk(y), blk(h[1][0]));
	/* All full again: the next object opens a fourth block. */
	unsigned long z = zblock_malloc(p, 100);
	CHECK_EQ(zblock_get_total_pages(p), 4);
	CHECK_EQ(z & 0xfff, 0);
	/* Empty blocks are freed at once. */
	zblock_free(p, z);
	CHECK_EQ(zblock_get_total_pages(p), 3);
	struct zblock_class_stats st;
	zblock_class_stats(p, 0, &st, sizeof(st));
	CHECK_EQ(st.blocks, 3);
	CHECK_EQ(st.objects, 3 * n);
	CHECK_EQ(st.pages, 3);
	CHECK_EQ(zblock_pool_objects(p), 3 * n);
	zblock_destroy_pool(p);
}

static void test_checked(void)
{
	struct zblock_pool *p = mkpool(4096, 1, 0), *q = mkpool(4096, 1, 0);
	unsigned long a = zblock_malloc(p, 500), b = zblock_malloc(p, 500), f = zblock_malloc(q, 500);
	REQUIRE(!ZS_IS_ERR(a) && !ZS_IS_ERR(b) && !ZS_IS_ERR(f));
	unsigned char buf[600];
	CHECK_EQ(zblock_free(p, 0), 0);
	CHECK_EQ(zblock_free(p, (unsigned long)-ENOMEM), 0);
	CHECK_EQ(zblock_free(p, f), -EINVAL);            /* foreign */
	CHECK_EQ(zblock_free(p, 0x12345678UL), -EINVAL); /* garbage */
	CHECK_EQ(zblock_free(p, (unsigned long)buf), -EINVAL);
	CHECK_EQ(zblock_free(p, blk(a) | 0xff0), -EINVAL); /* slot past n */
	CHECK_EQ(zblock_free(p, (blk(a) + 4096) | 1), -EINVAL);
	CHECK(zblock_obj_read_begin(p, f, 10, buf) == NULL);
	CHECK(zblock_obj_read_begin(p, a, 537, buf) == NULL); /* larger than the 536 B slot */
	CHECK(zblock_obj_read_begin(p, a, 536, buf) != NULL);
	CHECK_EQ(zblock_obj_write(p, a, buf, 537), -EINVAL);
	CHECK_EQ(zblock_obj_write(p, f, buf, 10), -EINVAL);
	CHECK_EQ(zblock_free(p, a), 0);
	CHECK_EQ(zblock_free(p, a), -EINVAL); /* double free, block still live (b) */
	CHECK(zblock_obj_read_begin(p, a, 10, buf) == NULL);
	CHECK_EQ(zblock_obj_write(p, a, buf, 10), -EINVAL);
	CHECK_EQ(zblock_pool_objects(p), 1);
	CHECK_EQ(zblock_free(p, b), 0);
	CHECK_EQ(zblock_free(p, b), -EINVAL); /* double free, block gone */
	CHECK_EQ(zblock_get_total_pages(p), 0);
	CHECK_EQ(zblock_free(q, f), 0);
	zblock_destroy_pool(p);
	zblock_destroy_pool(q);
}

/* Lengths are checked unchecked too (zblock.h: only handles need checked mode). */
static void test_unchecked_lengths(void)
{
	struct zblock_pool *p = mkpool(4096, 0, 0);
	unsigned long a = zblock_malloc(p, 500);
	REQUIRE(!ZS_IS_ERR(a));
	unsigned char buf[600];
	fill(buf, sizeof(buf), 3);
	CHECK_EQ(zblock_obj_write(p, a, buf, 536), 0); /* the whole 536 B slot */
	CHECK_EQ(zblock_obj_write(p, a, buf, 537), -EINVAL);
	errno = 0;
	CHECK(zblock_obj_read_begin(p, a, 537, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	unsigned char *m = zblock_obj_read_begin(p, a, 536, NULL);
	CHECK(m && same(m, 536, 3));
	if (m)
		zblock_obj_read_end(p, a, 536, m);
	CHECK_EQ(zblock_free(p, a), 0);
	CHECK_EQ(zblock_get_total_pages(p), 0);
	zblock_destroy_pool(p);
}

static void test_failures(void)
{
	struct zblock_pool *p = mkpool(4096, 1, 0);
	zblock_pool_fail_pages(p, 0, 1);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 100)), -ENOMEM);
	unsigned long h = zblock_malloc(p, 100);
	CHECK(!ZS_IS_ERR(h));
	zblock_pool_fail_pages(p, 0, 0);
	unsigned long h2 = zblock_malloc(p, 100); /* fits the existing block: no page needed */
	CHECK(!ZS_IS_ERR(h2));
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 3000)), -ENOMEM);
	zblock_pool_fail_pages(p, UINT64_MAX, 0);
	unsigned long h3 = zblock_malloc(p, 3000);
	CHECK(!ZS_IS_ERR(h3));
	zblock_destroy_pool(p); /* with live objects */

	struct zblock_config c;
	zblock_config_init(&c);
	c.max_pages = 8;
	p = must_zblock_create(&c);
	REQUIRE(p);
	unsigned long hs[4];
	for (int i = 0; i < 2; i++)
		hs[i] = zblock_malloc(p, 4000); /* 4 slots in 4 pages */
	CHECK_EQ(zblock_get_total_pages(p), 4);
	hs[2] = zblock_malloc(p, 3600); /* 9 x 8 pages: over the limit */
	CHECK_EQ(ZS_ERR(hs[2]), -ENOMEM);
	hs[3] = zblock_malloc(p, 2000); /* 2 x 1 page */
	CHECK(!ZS_IS_ERR(hs[3]));
	zblock_destroy_pool(p);
}

struct obj {
	unsigned long h;
	size_t size;
	uint64_t key;
};

/* Random alloc/free/verify against a model; sizes mix small, mid and max. */
static void test_model(size_t ps, int checked, int huge, uint64_t seed, int ops)
{
	struct zblock_pool *p = mkpool(ps, checked, huge);
	size_t maxsz = zblock_max_size(p);
	int cap = 4000, live = 0;
	struct obj *o = calloc((size_t)cap, sizeof(*o));
	unsigned char *buf = malloc(1 << 17), *tmp = malloc(1 << 17);
	uint64_t s = seed;
	for (int op = 0; op < ops; op++) {
		uint64_t r = tu_rand(&s);
		if (live < cap && (live == 0 || r % 100 < 55)) {
			size_t size;
			switch (tu_rand(&s) % 4) {
			case 0: size = 1 + tu_rand(&s) % 256; break;
			case 1: size = 1 + tu_rand(&s) % maxsz; break;
			case 2: size = maxsz - tu_rand(&s) % 64; break;
			default: size = 1 + tu_rand(&s) % (maxsz / 2); break;
			}
			unsigned long h = zblock_malloc(p, size);
			REQUIRE(!ZS_IS_ERR(h));
			uint64_t key = tu_rand(&s);
			fill(buf, size, key);
			CHECK_EQ(zblock_obj_write(p, h, buf, size), 0);
			o[live++] = (struct obj){ h, size, key };
		} else if (r % 100 < 85) {
			int i = (int)(tu_rand(&s) % (uint64_t)live);
			CHECK_EQ(zblock_free(p, o[i].h), 0);
			o[i] = o[--live];
		} else {
			int i = (int)(tu_rand(&s) % (uint64_t)live);
			void *m = zblock_obj_read_begin(p, o[i].h, o[i].size, tmp);
			REQUIRE(m);
			CHECK(same(m, o[i].size, o[i].key));
			zblock_obj_read_end(p, o[i].h, o[i].size, m);
		}
		if (op % 5000 == 4999) {
			unsigned long pages = 0, objs = 0;
			for (int c = 0; c < zblock_class_count(p); c++) {
				struct zblock_class_stats st;
				zblock_class_stats(p, c, &st, sizeof(st));
				pages += st.pages;
				objs += st.objects;
				/* Every block but the partly used ones is full: blocks <= objs/n + partial. */
				CHECK(st.objects <= st.blocks * st.slots_per_block);
				CHECK(st.blocks == 0 || st.objects > 0);
			}
			CHECK_EQ(pages, zblock_get_total_pages(p));
			CHECK_EQ(objs, live);
		}
	}
	for (int i = 0; i < live; i++) {
		void *m = zblock_obj_read_begin(p, o[i].h, o[i].size, tmp);
		REQUIRE(m);
		CHECK(same(m, o[i].size, o[i].key));
		CHECK_EQ(zblock_free(p, o[i].h), 0);
	}
	CHECK_EQ(zblock_get_total_pages(p), 0);
	CHECK_EQ(zblock_pool_objects(p), 0);
	zblock_destroy_pool(p);
	free(o);
	free(buf);
	free(tmp);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zblock");
	test_tables();
	test_lookup();
	test_policy();
	test_checked();
	test_failures();
	test_unchecked_lengths();
	size_t sizes[] = { 4096, 16384, 8192, 65536 };
	for (int k = 0; k < 4; k++) {
		test_model(sizes[k], 1, 1, seed + (uint64_t)k, 40000);
		test_model(sizes[k], 0, k & 1, seed + 100 + (uint64_t)k, 40000);
	}
	return tu_done();
}
