/*
 * Stats that can grow (4.0.0): every zs_*_stats getter writes only the
 * caller's `size` bytes.  Each getter is called three ways into a buffer
 * larger than the struct and filled with a guard byte: the whole struct
 * (nothing past sizeof is touched), an older, shorter struct (the prefix
 * matches the whole call and nothing past `size` is touched, which is what a
 * program built against a header with fewer counters relies on), and size 0
 * (-EINVAL, nothing written).
 */
#include <errno.h>
#include <string.h>
#include "testutil.h"
#include "must.h"
#include "zs/backend.h"
#include "zs/blob.h"
#include "zs/cache.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/zswap.h"

#define GUARD 0xA5
#define SLACK 64
static unsigned char buf[4096 + SLACK], whole[4096 + SLACK];

static int untouched(size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (buf[i] != GUARD)
			return 0;
	return 1;
}

/*
 * get(size) fills buf; full is sizeof the struct.  The counters must not
 * move between the calls (the object is idle), so prefixes compare exactly.
 */
#define CHECK_GROWS(name, full, get)                                                     \
	do {                                                                             \
		size_t _full = (full), _short = _full / 2 + 1;                           \
		memset(buf, GUARD, sizeof(buf));                                         \
		int _rc = (get(_full));                                                  \
		CHECK_EQ(_rc, 0);                                                        \
		if (!untouched(_full, _full + SLACK))                                    \
			fprintf(stderr, "%s: wrote past sizeof\n", name);                \
		CHECK(untouched(_full, _full + SLACK));                                  \
		memcpy(whole, buf, _full);                                               \
		memset(buf, GUARD, sizeof(buf));                                         \
		CHECK_EQ((get(_short)), 0);                                              \
		if (!untouched(_short, _full + SLACK))                                   \
			fprintf(stderr, "%s: wrote past a short size %zu\n", name, _short); \
		CHECK(untouched(_short, _full + SLACK));                                 \
		CHECK(!memcmp(buf, whole, _short));                                      \
		memset(buf, GUARD, sizeof(buf));                                         \
		CHECK_EQ((get(0)), -EINVAL);                                             \
		CHECK(untouched(0, _full + SLACK));                                      \
	} while (0)

static struct zs_pool *pool;
static struct zblock_pool *zb;
static struct zs_backend *be;
static struct zs_blob *blob;
static struct zs_cache *cache;
static struct zs_zram *zram;
static struct zs_zswap *zswap;

#define POOL(n) zs_pool_stats(pool, (struct zs_pool_stats *)buf, (n))
#define CLASS(n) zs_class_stats(pool, zs_lookup_class_index(pool, 100), (struct zs_class_stats *)buf, (n))
#define ZBCLASS(n) zblock_class_stats(zb, 0, (struct zblock_class_stats *)buf, (n))
#define BACKEND(n) zs_backend_stats(be, (struct zs_backend_stats *)buf, (n))
#define BLOB(n) zs_blob_stats(blob, (struct zs_blob_stats *)buf, (n))
#define CACHE(n) zs_cache_stats(cache, (struct zs_cache_stats *)buf, (n))
#define ZRAM(n) zs_zram_get_stats(zram, (struct zs_zram_stats *)buf, (n))
#define ZSWAP(n) zs_zswap_get_stats(zswap, (struct zs_zswap_stats *)buf, (n))
#define ZSWAPG(n) zs_zswap_group_stats(zswap, 0, (struct zs_zswap_group_stats *)buf, (n))

int main(void)
{
	static unsigned char page[4096];
	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (unsigned char)(i * 7 / 100);

	pool = must_pool_create(NULL);
	for (int i = 0; i < 50; i++)
		CHECK(!ZS_IS_ERR(zs_malloc(pool, 100)));
	zb = must_zblock_create(NULL);
	CHECK(!ZS_IS_ERR(zblock_malloc(zb, 100)));
	be = must_backend_create(NULL);
	CHECK(!ZS_IS_ERR(zs_backend_malloc_write(be, page, 300)));
	CHECK_EQ(zs_blob_create(NULL, &blob, NULL, 0), 0);
	CHECK(!ZS_IS_ERR(zs_blob_put(blob, page, sizeof(page))));
	CHECK_EQ(zs_cache_create(NULL, &cache, NULL, 0), 0);
	CHECK_EQ(zs_cache_insert(cache, "k", 1, page, sizeof(page)), 0);
	struct zs_zram_config zc;
	zs_zram_config_init(&zc);
	zc.disksize = 1 << 20;
	CHECK_EQ(zs_zram_create(&zc, &zram, NULL, 0), 0);
	CHECK_EQ(zs_zram_write(zram, 3, page), 0);
	struct zs_zswap_config wc;
	zs_zswap_config_init(&wc);
	wc.total_ram = 64 << 20;
	CHECK_EQ(zs_zswap_create(&wc, &zswap, NULL, 0), 0);
	CHECK(zs_zswap_store(zswap, 5, page, 0) >= 0);
	REQUIRE(blob && cache && zram && zswap);

	CHECK_GROWS("zs_pool_stats", sizeof(struct zs_pool_stats), POOL);
	CHECK_GROWS("zs_class_stats", sizeof(struct zs_class_stats), CLASS);
	CHECK_GROWS("zblock_class_stats", sizeof(struct zblock_class_stats), ZBCLASS);
	CHECK_GROWS("zs_backend_stats", sizeof(struct zs_backend_stats), BACKEND);
	CHECK_GROWS("zs_blob_stats", sizeof(struct zs_blob_stats), BLOB);
	CHECK_GROWS("zs_cache_stats", sizeof(struct zs_cache_stats), CACHE);
	CHECK_GROWS("zs_zram_get_stats", sizeof(struct zs_zram_stats), ZRAM);
	CHECK_GROWS("zs_zswap_get_stats", sizeof(struct zs_zswap_stats), ZSWAP);
	CHECK_GROWS("zs_zswap_group_stats", sizeof(struct zs_zswap_group_stats), ZSWAPG);

	/* The prefix is the real counters, not zeros: the shortest useful size. */
	struct zs_zram_stats zs;
	memset(&zs, 0, sizeof(zs));
	CHECK_EQ(zs_zram_get_stats(zram, &zs, offsetof(struct zs_zram_stats, orig_data_size) +
				   sizeof(zs.orig_data_size)), 0);
	CHECK_EQ(zs.orig_data_size, sizeof(page));
	/* NULL st: -EINVAL, whatever the size. */
	CHECK_EQ(zs_pool_stats(pool, NULL, sizeof(struct zs_pool_stats)), -EINVAL);

	zs_zswap_destroy(zswap);
	zs_zram_destroy(zram);
	zs_cache_destroy(cache);
	zs_blob_destroy(blob);
	zs_backend_destroy(be);
	zblock_destroy_pool(zb);
	zs_destroy_pool(pool);
	return tu_done();
}
