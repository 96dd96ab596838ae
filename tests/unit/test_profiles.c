/*
 * The two named config profiles: zs_pool_config_init is
 * the kernel's layout, which every parity tool relies on, and
 * zs_pool_config_init_app differs from it in exactly the fields zsmalloc.h
 * documents (class_shards, free_mode, fit_zspages).  A silent drift in either would
 * either break kernel parity or quietly cost applications density, so this
 * pins: the field-by-field difference, the kernel profile's class table
 * (the kernel's numbers, and the table a NULL config gets), the app
 * profile's table being the same one, both pools working and holding the
 * same pages for the same data, and the zram/region app configs carrying
 * the app pool config and nothing else new.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "zs/region.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "must.h"

static void test_fields(void)
{
	struct zs_pool_config k, a, x;
	zs_pool_config_init(&k);
	zs_pool_config_init_app(&a);
	CHECK_EQ(k.class_shards, 0);
	CHECK_EQ(k.free_mode, ZS_FREE_POOL_LOCK);
	CHECK_EQ(k.page_size, 4096);
	CHECK_EQ(k.max_chain, 8);
	CHECK_EQ(a.class_shards, ZS_CLASS_SHARDS_AUTO);
	CHECK_EQ(a.free_mode, ZS_FREE_CLASS_INDEX);
	CHECK_EQ(k.fit_zspages, 0);
	CHECK_EQ(a.fit_zspages, 1);
	CHECK_EQ(k.autocompact_ms, 0);
	CHECK_EQ(a.autocompact_ms, ZS_AUTOCOMPACT_DEFAULT_MS);
	/* Put the documented fields back: everything else must be identical. */
	x = a;
	x.class_shards = k.class_shards;
	x.free_mode = k.free_mode;
	x.fit_zspages = k.fit_zspages;
	x.autocompact_ms = k.autocompact_ms;
	CHECK(memcmp(&x, &k, sizeof(k)) == 0);
}

static int same_table(struct zs_pool *p, struct zs_pool *q)
{
	if (zs_class_count(p) != zs_class_count(q) || zs_huge_class_size(p) != zs_huge_class_size(q))
		return 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		struct zs_class_info ci, cj;
		if (zs_class_info(p, i, &ci) || zs_class_info(q, i, &cj) ||
		    memcmp(&ci, &cj, sizeof(ci)))
			return 0;
	}
	return 1;
}

static int nr_physical(struct zs_pool *p)
{
	int n = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		struct zs_class_info ci;
		if (!zs_class_info(p, i, &ci) && ci.phys_index == i)
			n++;
	}
	return n;
}

/* Fill with a fixed size mix, read everything back; returns pool pages at peak. */
static unsigned long fill_check(struct zs_pool *p, unsigned n, int *bad)
{
	unsigned long *h = calloc(n, sizeof(*h));
	unsigned char buf[4096], back[4096];
	uint64_t s = 42;
	REQUIRE(h);
	for (unsigned i = 0; i < n; i++) {
		size_t len = 200 + (size_t)(tu_rand(&s) % 3401);
		h[i] = zs_malloc(p, len);
		if (ZS_IS_ERR(h[i])) {
			(*bad)++;
			h[i] = 0;
			continue;
		}
		memset(buf, (int)(i & 0xff), len);
		zs_obj_write(p, h[i], buf, len);
	}
	unsigned long pages = zs_get_total_pages(p);
	s = 42;
	for (unsigned i = 0; i < n; i++) {
		size_t len = 200 + (size_t)(tu_rand(&s) % 3401);
		if (!h[i])
			continue;
		memset(buf, (int)(i & 0xff), len);
		void *q = zs_obj_read_begin(p, h[i], len, back);
		*bad += memcmp(q, buf, len) != 0;
		zs_obj_read_end(p, h[i], len, q);
		zs_free(p, h[i]);
	}
	zs_compact(p);
	*bad += zs_get_total_pages(p) != 0;
	free(h);
	return pages;
}

static void test_pools(void)
{
	struct zs_pool_config k, a;
	zs_pool_config_init(&k);
	zs_pool_config_init_app(&a);
	struct zs_pool *pk = must_pool_create(&k), *pa = must_pool_create(&a), *pd = must_pool_create(NULL);
	REQUIRE(pk && pa && pd);

	/* The kernel profile is the kernel's table (4K, chain 8: the numbers
	 * tests/unit/test_zsmalloc.c holds against the kernel) and the default's. */
	CHECK_EQ(zs_class_count(pk), 255);
	CHECK_EQ(nr_physical(pk), 119);
	CHECK_EQ(zs_huge_class_size(pk), 3625);
	CHECK_EQ(zs_pool_class_shards(pk), 1);
	CHECK(same_table(pk, pd));
	/* The app profile keeps that table (where its density comes from). */
	CHECK(same_table(pk, pa));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned sh = zs_pool_class_shards(pa);
	CHECK(sh >= 1 && sh <= ZS_MAX_CLASS_SHARDS);
	CHECK(sh * (unsigned)zs_class_count(pa) <= 8192);
	if (ncpu == 1)
		CHECK_EQ(sh, 1);
	else
		CHECK(sh > 1);

	/* Both work, and hold about the same pages for the same data.  One
	 * thread may still migrate between CPUs, spreading over shards: each
	 * shard can leave one partly used zspage per class, hence 3% here
	 * (docs/benchmarks.md section 5 has the measured difference). */
	int bad = 0;
	unsigned long kp = fill_check(pk, 40000, &bad);
	unsigned long ap = fill_check(pa, 40000, &bad);
	CHECK_EQ(bad, 0);
	CHECK(kp > 0 && ap > 0);
	CHECK(ap * 100 <= kp * 103 && kp * 100 <= ap * 103);
	printf("pool pages after the same fill: kernel %lu, app %lu (%+.2f%%), app shards %u\n", kp,
	       ap, kp ? 100.0 * ((double)ap - (double)kp) / (double)kp : 0.0, sh);
	zs_destroy_pool(pk);
	zs_destroy_pool(pa);
	zs_destroy_pool(pd);
}

static void test_store_configs(void)
{
	struct zs_pool_config a;
	struct zs_zram_config zk, za, zx;
	struct zs_region_config rk, ra, rx;
	zs_pool_config_init_app(&a);

	zs_zram_config_init(&zk);
	zs_zram_config_init_app(&za);
	CHECK(memcmp(&za.backend.zs, &a, sizeof(a)) == 0);
	zx = za;
	zs_pool_config_init(&zx.backend.zs);
	CHECK(memcmp(&zx, &zk, sizeof(zk)) == 0); /* nothing else differs */

	zs_region_config_init(&rk);
	zs_region_config_init_app(&ra);
	CHECK(memcmp(&ra.store.backend.zs, &a, sizeof(a)) == 0);
	CHECK(memcmp(&ra.store, &za, sizeof(za)) == 0);
	rx = ra;
	zs_pool_config_init(&rx.store.backend.zs);
	CHECK(memcmp(&rx, &rk, sizeof(rk)) == 0);

	/* The app store works (a region needs userfaultfd; its config is enough here). */
	struct zs_zram *z;
	za.disksize = 64 * 4096;
	REQUIRE(zs_zram_create(&za, &z, NULL, 0) == 0);
	unsigned char page[4096], back[4096];
	for (int i = 0; i < 4096; i++)
		page[i] = (unsigned char)(i * 7 / 5);
	CHECK_EQ(zs_zram_write(z, 3, page), 0);
	CHECK_EQ(zs_zram_read(z, 3, back, sizeof(back)), 0);
	CHECK(memcmp(page, back, sizeof(page)) == 0);
	zs_zram_destroy(z);
}

int main(void)
{
	test_fields();
	test_pools();
	test_store_configs();
	return tu_done();
}
