/*
 * Configs that can grow without a new MAJOR (docs/abi.md
 * "Growing a config"): every public config starts with struct_size and ends
 * with reserved[], its config_init sets the one and zeroes the other, and
 * every create call refuses a config whose struct_size is neither 0 nor
 * this library's, or whose reserved words are not all 0 -- so a later field
 * carved out of reserved[] (zero: today's behaviour) changes neither the
 * size nor any offset.  The sizes are pinned here (LP64): a change that
 * grows a config instead of using reserved[] fails this test.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/region.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/zswap.h"
#include "must.h"

#define NRES(c) (sizeof((c).reserved) / sizeof((c).reserved[0]))

/* Every config_init zeroes the whole tail (abi.md: "zeroes reserved"). */
#define CHECK_RES_ZERO(c)                                                     \
	do {                                                                  \
		for (size_t i_ = 0; i_ < NRES(c); i_++)                       \
			CHECK_EQ((c).reserved[i_], 0);                        \
	} while (0)

static void pool_case(void)
{
	struct zs_pool_config c;
	struct zs_pool *p;

	zs_pool_config_init(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	for (size_t i = 0; i < NRES(c); i++)
		CHECK_EQ(c.reserved[i], 0);
	c.struct_size = 0; /* 0: this library's size */
	p = must_pool_create(&c);
	CHECK(p != NULL);
	if (p)
		zs_destroy_pool(p);
	zs_pool_config_init_app(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	c.struct_size = sizeof(c) + 8;
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	c.struct_size = sizeof(c) - 8; /* smaller is as foreign as larger */
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	zs_pool_config_init(&c);
	c.reserved[NRES(c) - 1] = 1;
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
}

static void backend_case(void)
{
	struct zs_backend_config c;
	struct zs_backend *b;

	zs_backend_config_init(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	CHECK_EQ(c.zs.struct_size, sizeof(c.zs));
	CHECK_RES_ZERO(c);
	CHECK_RES_ZERO(c.zs);
	b = must_backend_create(&c);
	CHECK(b != NULL);
	if (b)
		zs_backend_destroy(b);
	c.struct_size = 0; /* 0 at either level: this library's size */
	c.zs.struct_size = 0;
	b = must_backend_create(&c);
	CHECK(b != NULL);
	if (b)
		zs_backend_destroy(b);
	c.struct_size = sizeof(c) + 8; /* the top level's own size, too */
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	zs_backend_config_init(&c);
	c.reserved[0] = 7;
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	zs_backend_config_init(&c);
	c.zs.reserved[1] = 7; /* the nested pool config is checked too */
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	c.kind = "zblock"; /* whatever the kind, though only zsmalloc reads it */
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
	zs_backend_config_init(&c);
	c.kind = "malloc";
	c.zs.struct_size = sizeof(c.zs) - 8;
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
}

static void zram_case(void)
{
	struct zs_zram_config c;
	struct zs_zram *z = NULL;
	char err[256];

	zs_zram_config_init_app(&c);
	c.disksize = 1 << 20;
	CHECK_EQ(c.struct_size, sizeof(c));
	CHECK_EQ(c.backend.struct_size, sizeof(c.backend));
	CHECK_RES_ZERO(c);
	CHECK_RES_ZERO(c.backend);
	CHECK_RES_ZERO(c.backend.zs);
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), 0);
	if (z)
		zs_zram_destroy(z);
	z = NULL;
	c.struct_size = 0;
	c.backend.struct_size = 0;
	c.backend.zs.struct_size = 0;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), 0);
	if (z)
		zs_zram_destroy(z);
	z = NULL;
	c.struct_size = 1;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL && strstr(err, "struct_size 1") != NULL);
	c.struct_size = sizeof(c);
	c.reserved[3] = 1;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "reserved[3]") != NULL);
	c.reserved[3] = 0;
	c.backend.zs.reserved[0] = 1;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	c.backend.zs.reserved[0] = 0;
	/* every nested level: the backend config's own size and tail too */
	c.backend.reserved[1] = 1;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL);
	c.backend.reserved[1] = 0;
	c.backend.struct_size = sizeof(c.backend) + 8;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL);
	c.backend.struct_size = sizeof(c.backend);
	c.backend.zs.struct_size = sizeof(c.backend.zs) - 8;
	CHECK_EQ(zs_zram_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL);
}

static void zswap_case(void)
{
	struct zs_zswap_config c;
	struct zs_zswap *z = NULL;
	char err[256];

	zs_zswap_config_init(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	CHECK_RES_ZERO(c);
	c.total_ram = 64 << 20;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), 0);
	if (z)
		zs_zswap_destroy(z);
	z = NULL;
	c.struct_size = 0;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), 0);
	if (z)
		zs_zswap_destroy(z);
	z = NULL;
	c.struct_size = sizeof(c);
	c.reserved[7] = 1;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "reserved[7]") != NULL);
	c.reserved[7] = 0;
	c.struct_size = sizeof(c) - 8;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "struct_size") != NULL);
	/* the nested backend and pool configs: initialised, and checked */
	zs_zswap_config_init(&c);
	c.total_ram = 64 << 20;
	CHECK_EQ(c.backend.struct_size, sizeof(c.backend));
	CHECK_EQ(c.backend.zs.struct_size, sizeof(c.backend.zs));
	CHECK_RES_ZERO(c.backend);
	CHECK_RES_ZERO(c.backend.zs);
	c.backend.reserved[0] = 1;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	c.backend.reserved[0] = 0;
	c.backend.struct_size = 5;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	c.backend.struct_size = 0;
	c.backend.zs.reserved[1] = 1;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	c.backend.zs.reserved[1] = 0;
	c.backend.zs.struct_size = sizeof(c.backend.zs) + 8;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), -EINVAL);
	CHECK(z == NULL);
	c.backend.zs.struct_size = 0;
	CHECK_EQ(zs_zswap_create(&c, &z, err, sizeof(err)), 0);
	if (z)
		zs_zswap_destroy(z);
}

static void region_case(void)
{
	struct zs_region_config c;
	struct zs_region *r = NULL;
	char err[256];

	zs_region_config_init_app(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	CHECK_EQ(c.store.struct_size, sizeof(c.store));
	CHECK_RES_ZERO(c);
	CHECK_RES_ZERO(c.store);
	c.size = 1 << 20;
	c.reserved[0] = 1; /* refused before userfaultfd is even opened */
	CHECK_EQ(zs_region_create(&c, &r, err, sizeof(err)), -EINVAL);
	CHECK(r == NULL && strstr(err, "reserved[0]") != NULL);
	c.reserved[0] = 0;
	c.struct_size = 3;
	CHECK_EQ(zs_region_create(&c, &r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "struct_size 3") != NULL);
	/* 0 is this library's size: whatever else the create call answers
	 * (no userfaultfd here, say), it is not a refusal of the size */
	c.struct_size = 0;
	err[0] = 0;
	if (zs_region_create(&c, &r, err, sizeof(err)) == 0)
		zs_region_destroy(r);
	else
		CHECK(strstr(err, "struct_size") == NULL);
	r = NULL;
	zs_region_config_init_app(&c);
	c.size = 1 << 20;
	c.store.struct_size = sizeof(c.store) + 8; /* the nested store config */
	CHECK_EQ(zs_region_create(&c, &r, err, sizeof(err)), -EINVAL);
	CHECK(r == NULL);
}

static void zblock_case(void)
{
	struct zblock_config c;
	struct zblock_pool *p;

	zblock_config_init(&c);
	CHECK_EQ(c.struct_size, sizeof(c));
	CHECK_RES_ZERO(c);
	p = must_zblock_create(&c);
	CHECK(p != NULL);
	if (p)
		zblock_destroy_pool(p);
	c.struct_size = 0;
	p = must_zblock_create(&c);
	CHECK(p != NULL);
	if (p)
		zblock_destroy_pool(p);
	c.struct_size = sizeof(c) - 8;
	errno = 0;
	CHECK_ZBLOCK_REFUSED(&c, "zblock_config");
	c.struct_size = sizeof(c);
	c.reserved[1] = 1;
	errno = 0;
	CHECK_ZBLOCK_REFUSED(&c, "zblock_config");
}

int main(void)
{
	/* 3.0.0's sizes (LP64).  A new field comes out of reserved[]: these stay. */
	if (sizeof(long) == 8) {
		CHECK_EQ(sizeof(struct zs_pool_config), 136);
		CHECK_EQ(sizeof(struct zs_backend_config), 208);
		CHECK_EQ(sizeof(struct zs_zram_config), 416);
		CHECK_EQ(sizeof(struct zs_region_config), 520);
		CHECK_EQ(sizeof(struct zs_zswap_config), 336);
		CHECK_EQ(sizeof(struct zblock_config), 72);
	}
	{	/* abi.md: "N = 2, 4, 7, 8, 8 and 4 today" */
		struct zs_pool_config a;
		struct zs_backend_config b;
		struct zs_zram_config z;
		struct zs_region_config r;
		struct zs_zswap_config w;
		struct zblock_config k;

		CHECK_EQ(NRES(a), 2);
		CHECK_EQ(NRES(b), 4);
		CHECK_EQ(NRES(z), 7);
		CHECK_EQ(NRES(r), 8);
		CHECK_EQ(NRES(w), 8);
		CHECK_EQ(NRES(k), 4);
	}
	pool_case();
	backend_case();
	zram_case();
	zswap_case();
	region_case();
	zblock_case();
	return tu_done();
}
