/*
 * The 4.0.0 constructor shape, refusal side: every public zs_*_create
 * refuses an out-of-range field with the code, leaves *out NULL, sets errno
 * to the positive code and writes a one-line reason that names the field
 * (and for ranges the accepted bounds).  One case per constructor, each a
 * field that a 3.x caller could only learn about from a bare EINVAL.
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

static char why[256];

/* A refusal: code, errno, *out NULL and every `want` in the reason. */
static void refused_(const char *what, int rc, int code, const void *out, const char *want1,
		    const char *want2)
{
	CHECK_EQ(rc, code);
	CHECK_EQ(errno, -code);
	CHECK(out == NULL);
	int named = strstr(why, want1) && (!want2 || strstr(why, want2));
	if (!named)
		fprintf(stderr, "%s: reason \"%s\" lacks \"%s\"%s%s\n", what, why, want1,
			want2 ? " or " : "", want2 ? want2 : "");
	CHECK(named);
	CHECK(strchr(why, '\n') == NULL); /* one line */
}

/* The call runs first: an argument list has no order, and out is read after it. */
#define refused(what, call, code, out, w1, w2)                                        \
	do {                                                                          \
		int _rc = (call);                                                     \
		refused_(what, _rc, code, out, w1, w2);                               \
	} while (0)

/* out is set to something non-NULL first: the refusal must clear it. */
#define STALE(p) ((p) = (void *)&why)

static void pool_case(void)
{
	struct zs_pool_config c;
	struct zs_pool *p;

	zs_pool_config_init(&c);
	c.max_chain = 99;
	STALE(p);
	errno = 0;
	refused("pool", zs_pool_create(&c, &p, why, sizeof(why)), -EINVAL, p,
		"max_chain 99", "1..");
	zs_pool_config_init(&c);
	c.page_size = 3000;
	STALE(p);
	refused("pool", zs_pool_create(&c, &p, why, sizeof(why)), -EINVAL, p, "page_size 3000",
		"4096..65536");
	/* A short buffer is truncated, never overrun, and still a string. */
	char small[8];
	memset(small, 'x', sizeof(small));
	CHECK_EQ(zs_pool_create(&c, &p, small, sizeof(small)), -EINVAL);
	CHECK(memchr(small, '\0', sizeof(small)) != NULL);
	/* No buffer: the code and errno alone, nothing written. */
	errno = 0;
	CHECK_EQ(zs_pool_create(&c, &p, NULL, 0), -EINVAL);
	CHECK_EQ(errno, EINVAL);
	/* Success leaves err empty. */
	strcpy(why, "stale");
	CHECK_EQ(zs_pool_create(NULL, &p, why, sizeof(why)), 0);
	CHECK(p != NULL && why[0] == '\0');
	zs_destroy_pool(p);
}

static void zblock_case(void)
{
	struct zblock_config c;
	struct zblock_pool *p;

	zblock_config_init(&c);
	c.huge = 2;
	STALE(p);
	refused("zblock", zblock_pool_create(&c, &p, why, sizeof(why)), -EINVAL, p, "huge 2",
		"0 or 1");
}

static void backend_case(void)
{
	struct zs_backend_config c;
	struct zs_backend *b;

	zs_backend_config_init(&c);
	c.kind = "nosuch";
	STALE(b);
	refused("backend", zs_backend_create(&c, &b, why, sizeof(why)), -EINVAL, b,
		"kind \"nosuch\"", "zsmalloc, zblock");
	zs_backend_config_init(&c);
	c.zs.free_mode = (enum zs_free_mode)77;
	STALE(b);
	refused("backend", zs_backend_create(&c, &b, why, sizeof(why)), -EINVAL, b,
		"zs_backend_config.zs", "free_mode 77");
	CHECK_EQ(zs_backend_create(NULL, &b, why, sizeof(why)), 0);
	CHECK(!strcmp(zs_backend_kind(b), "zsmalloc"));
	CHECK_EQ(zs_backend_page_size(b), 4096);
	zs_backend_destroy(b);
}

static void comp_case(void)
{
	struct zs_comp_config c;
	struct zs_comp *z;

	zs_comp_config_init(&c);
	c.max_src = ZS_COMP_MAX_SRC + 1;
	STALE(z);
	refused("comp", zs_comp_create(&c, &z, why, sizeof(why)), -EINVAL, z, "max_src", "1..");
	zs_comp_config_init(&c);
	c.name = "nosuch";
	STALE(z);
	refused("comp", zs_comp_create(&c, &z, why, sizeof(why)), -EINVAL, z, "name \"nosuch\"",
		NULL);
	zs_comp_config_init(&c);
	c.name = "lzo";
	c.level = 3;
	STALE(z);
	refused("comp", zs_comp_create(&c, &z, why, sizeof(why)), -EINVAL, z, "level 3", NULL);
	/* The absorbed zs_comp_create_params: level and dictionary in the one config. */
	static const char dict[] = "a dictionary of bytes that lz4 keeps as history";
	zs_comp_config_init(&c);
	c.dict = dict;
	c.dict_len = sizeof(dict);
	CHECK_EQ(zs_comp_create(&c, &z, why, sizeof(why)), 0);
	CHECK(z && zs_comp_has_dict(z));
	zs_comp_destroy(z);
}

static void blob_case(void)
{
	struct zs_blob_config c;
	struct zs_blob *s;

	zs_blob_config_init(&c);
	c.compact_budget = 5000;
	STALE(s);
	refused("blob", zs_blob_create(&c, &s, why, sizeof(why)), -EINVAL, s,
		"compact_budget 5000", "0..4096");
	/* The store's pool is checked by the pool's own rules, with the pool's reason. */
	zs_blob_config_init(&c);
	c.pool.max_chain = 0xffff;
	STALE(s);
	refused("blob", zs_blob_create(&c, &s, why, sizeof(why)), -EINVAL, s, "max_chain",
		NULL);
}

static void cache_case(void)
{
	struct zs_cache_config c;
	struct zs_cache *k;

	zs_cache_config_init(&c);
	c.shards = 3;
	STALE(k);
	refused("cache", zs_cache_create(&c, &k, why, sizeof(why)), -EINVAL, k, "shards 3",
		"power of two");
	zs_cache_config_init(&c);
	c.blob.codec = (enum zs_blob_codec)9;
	STALE(k);
	refused("cache", zs_cache_create(&c, &k, why, sizeof(why)), -EINVAL, k,
		"zs_blob_config.codec 9", NULL);
}

static void zram_case(void)
{
	struct zs_zram_config c;
	struct zs_zram *z;

	zs_zram_config_init(&c);
	c.disksize = 1 << 20;
	c.page_size = 5000;
	STALE(z);
	refused("zram", zs_zram_create(&c, &z, why, sizeof(why)), -EINVAL, z, "page_size 5000",
		"4096..65536");
}

static void zswap_case(void)
{
	struct zs_zswap_config c;
	struct zs_zswap *z;

	zs_zswap_config_init(&c);
	c.total_ram = 64 << 20;
	c.reserved[3] = 1;
	STALE(z);
	refused("zswap", zs_zswap_create(&c, &z, why, sizeof(why)), -EINVAL, z, "reserved[3]",
		NULL);
}

static void region_case(void)
{
	struct zs_region_config c;
	struct zs_region *r;

	/* Refused before userfaultfd is opened, so this runs without the permission. */
	zs_region_config_init(&c);
	c.size = 1 << 20;
	c.handler_threads = 65;
	STALE(r);
	refused("region", zs_region_create(&c, &r, why, sizeof(why)), -EINVAL, r,
		"handler_threads 65", "0..64");
}

int main(void)
{
	pool_case();
	zblock_case();
	backend_case();
	comp_case();
	blob_case();
	cache_case();
	zram_case();
	zswap_case();
	region_case();
	return tu_done();
}
