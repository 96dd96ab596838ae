/*
 * 3.x source compatibility: a program written against the 3.x headers (the
 * pointer-returning constructors, the create calls without a reason, the
 * stats getters without a size) must compile against 4.x and behave as it
 * did.  The public headers map each old call onto the 4.0.0 function by its
 * argument count (docs/abi.md, 4.0.0); this file makes every such call.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/blob.h"
#include "zs/cache.h"
#include "zs/compress.h"
#include "zs/region.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/zswap.h"

static void test_pool(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	struct zs_pool *p = zs_create_pool(&cfg);
	REQUIRE(p);
	unsigned long h = zs_malloc(p, 100);
	CHECK(h != 0);
	struct zs_pool_stats ps;
	memset(&ps, 0xff, sizeof(ps));
	zs_pool_stats(p, &ps); /* 3.x: no size */
	CHECK_EQ(ps.pages_compacted, 0);
	struct zs_class_stats cs;
	int found = 0;
	for (int i = 0; i < zs_class_count(p); i++)
		if (zs_class_stats(p, i, &cs) == 0 && cs.obj_used == 1)
			found++;
	CHECK_EQ(found, 1);
	zs_free(p, h);
	zs_destroy_pool(p);

	cfg.page_size = 1234; /* out of range: NULL and errno, as in 3.x */
	errno = 0;
	CHECK(zs_create_pool(&cfg) == NULL);
	CHECK_EQ(errno, EINVAL);
}

static void test_zblock_backend(void)
{
	struct zblock_config zc;
	zblock_config_init(&zc);
	struct zblock_pool *zp = zblock_create_pool(&zc);
	REQUIRE(zp);
	struct zblock_class_stats zst;
	CHECK_EQ(zblock_class_stats(zp, 0, &zst), 0);
	zblock_destroy_pool(zp);

	struct zs_backend_config bc;
	zs_backend_config_init(&bc);
	struct zs_backend *b = zs_backend_create(&bc);
	REQUIRE(b);
	struct zs_backend_stats bs;
	CHECK_EQ(zs_backend_stats(b, &bs), 0);
	zs_backend_destroy(b);
}

static void test_stores(void)
{
	struct zs_zram_config zc;
	zs_zram_config_init(&zc);
	zc.disksize = 1 << 20;
	struct zs_zram *z = NULL;
	REQUIRE(zs_zram_create(&zc, &z) == 0);
	struct zs_zram_stats zst;
	CHECK_EQ(zs_zram_get_stats(z, &zst), 0);
	zs_zram_destroy(z);
	char why[128];
	REQUIRE(zs_zram_create_err(&zc, &z, why, sizeof(why)) == 0);
	zs_zram_destroy(z);

	struct zs_blob_config blc;
	zs_blob_config_init(&blc);
	struct zs_blob *s = NULL;
	REQUIRE(zs_blob_create(&blc, &s) == 0);
	struct zs_blob_stats bst;
	CHECK_EQ(zs_blob_stats(s, &bst), 0);
	zs_blob_destroy(s);

	struct zs_cache_config cc;
	zs_cache_config_init(&cc);
	struct zs_cache *c = NULL;
	REQUIRE(zs_cache_create(&cc, &c) == 0);
	struct zs_cache_stats cst;
	CHECK_EQ(zs_cache_stats(c, &cst), 0);
	zs_cache_destroy(c);

	struct zs_comp *comp = NULL;
	struct zs_comp_params prm = { .level = 3 };
	REQUIRE(zs_comp_create_params("zstd", 4096, &prm, &comp) == 0);
	zs_comp_destroy(comp);
	CHECK_EQ(zs_comp_create_params("nope", 4096, NULL, &comp), -EINVAL);
}

int main(void)
{
	test_pool();
	test_zblock_backend();
	test_stores();
	return tu_done();
}
