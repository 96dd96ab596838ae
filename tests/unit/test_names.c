/*
 * The names of named choices (zs_*_name / _parse / _names) and the constants
 * table (zs_const) that tools and the Python binding read instead of keeping
 * copies: each name round-trips, unknown names are refused, and the table
 * answers with the headers' own values; the library reports the headers'
 * version.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/common.h"
#include "zs/pages.h"
#include "zs/region.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "must.h"

static unsigned long long cval(const char *name)
{
	unsigned long long v = 0xdeadbeefULL;

	CHECK_EQ(zs_const(name, &v), 0);
	return v;
}

/* 0 when a pool with this policy and free mode is made (and a few objects live in it). */
static int pool_with(enum zs_chain_policy cp, enum zs_free_mode fm)
{
	struct zs_pool_config cfg;
	struct zs_pool *p;
	int ret = 0;

	zs_pool_config_init(&cfg);
	cfg.chain_policy = cp;
	cfg.free_mode = fm;
	p = try_pool_create(&cfg);
	if (!p)
		return -1;
	for (size_t sz = 40; sz < 4096; sz += 509) {
		unsigned long h = zs_malloc(p, sz);

		if (ZS_IS_ERR(h) || zs_free(p, h))
			ret = -2;
	}
	zs_destroy_pool(p);
	return ret;
}

int main(void)
{
	const char *const *n;
	enum zs_free_mode fm = ZS_FREE_POOL_LOCK;
	enum zs_chain_policy cp = ZS_CHAIN_EXHAUSTIVE;
	int count = 0;

	/* names round-trip, in enum order, and match the documented spellings */
	for (n = zs_free_mode_names(); *n; n++, count++) {
		CHECK_EQ(zs_free_mode_parse(*n, &fm), 0);
		CHECK_EQ(fm, count);
		CHECK(!strcmp(zs_free_mode_name(fm), *n));
	}
	CHECK_EQ(count, ZS_FREE_MODE_COUNT);
	CHECK(count >= 3);
	CHECK(!strcmp(zs_free_mode_name(ZS_FREE_CLASS_INDEX_UNLOCKED), "class-unlocked"));
	CHECK(!strcmp(zs_free_mode_name(ZS_FREE_POOL_LOCK), "pool"));
	count = 0;
	for (n = zs_chain_policy_names(); *n; n++, count++) {
		CHECK_EQ(zs_chain_policy_parse(*n, &cp), 0);
		CHECK_EQ(cp, count);
		CHECK(!strcmp(zs_chain_policy_name(cp), *n));
	}
	CHECK_EQ(count, ZS_CHAIN_POLICY_COUNT);
	CHECK(count >= 2);
	CHECK(!strcmp(zs_chain_policy_name(ZS_CHAIN_HEURISTIC), "heuristic"));

	/* unknown names and values: refused, the output left alone */
	fm = ZS_FREE_CLASS_INDEX;
	CHECK_EQ(zs_free_mode_parse("class_unlocked", &fm), -EINVAL);
	CHECK_EQ(zs_free_mode_parse("", &fm), -EINVAL);
	CHECK_EQ(zs_free_mode_parse(NULL, &fm), -EINVAL);
	CHECK_EQ(fm, ZS_FREE_CLASS_INDEX);
	cp = ZS_CHAIN_HEURISTIC;
	CHECK_EQ(zs_chain_policy_parse("Heuristic", &cp), -EINVAL);
	CHECK_EQ(zs_chain_policy_parse("", &cp), -EINVAL);
	CHECK_EQ(zs_chain_policy_parse(NULL, &cp), -EINVAL);
	CHECK_EQ(cp, ZS_CHAIN_HEURISTIC);
	CHECK(zs_chain_policy_name((enum zs_chain_policy)ZS_CHAIN_POLICY_COUNT) == NULL);
	CHECK(zs_free_mode_name((enum zs_free_mode)-1) == NULL);
	CHECK(zs_free_mode_name((enum zs_free_mode)ZS_FREE_MODE_COUNT) == NULL);
	CHECK(zs_chain_policy_name((enum zs_chain_policy)-1) == NULL);

	/* constants: the headers' values, every listed name resolves, others do not */
	CHECK_EQ(cval("ZS_ZRAM_F_SAME"), ZS_ZRAM_F_SAME);
	CHECK_EQ(cval("ZS_ZRAM_F_HUGE"), ZS_ZRAM_F_HUGE);
	CHECK_EQ(cval("ZS_ZRAM_F_INCOMPRESSIBLE"), ZS_ZRAM_F_INCOMPRESSIBLE);
	CHECK(cval("ZS_PAGES_NO_CACHE") == (unsigned long long)ZS_PAGES_NO_CACHE);
	CHECK_EQ(cval("ZS_CLASS_SHARDS_AUTO"), ZS_CLASS_SHARDS_AUTO);
	CHECK_EQ(cval("ZS_REGION_PAGEOUT"), ZS_REGION_PAGEOUT);
	CHECK_EQ(cval("ZS_FREE_CLASS_INDEX_UNLOCKED"), ZS_FREE_CLASS_INDEX_UNLOCKED);
	CHECK_EQ(cval("ZS_PAGE_SIZE_MIN"), 4096);
	count = 0;
	for (n = zs_const_names(); *n; n++, count++) {
		unsigned long long v;

		CHECK_EQ(zs_const(*n, &v), 0);
		CHECK(!strncmp(*n, "ZS_", 3));
	}
	CHECK(count >= 30);
	CHECK_EQ(zs_const("ZS_NO_SUCH_THING", NULL), -ENOENT);
	CHECK_EQ(zs_const("zs_zram_f_same", NULL), -ENOENT);
	CHECK_EQ(zs_const(NULL, NULL), -ENOENT);
	CHECK_EQ(zs_const("ZS_ZRAM_F_SAME", NULL), 0);

	/* the registries reach the constants table and the pool: every entry has its
	 * ZS_CHAIN_<ID> / ZS_FREE_<ID> constant, a pool is made with it, and the
	 * first value past the registry is refused */
#define CHECK_CHAIN(id, fn, name, help) \
	CHECK_EQ(cval("ZS_CHAIN_" #id), ZS_CHAIN_##id); \
	CHECK(!strcmp(zs_chain_policy_name(ZS_CHAIN_##id), name)); \
	CHECK(pool_with(ZS_CHAIN_##id, ZS_FREE_POOL_LOCK) == 0);
#define CHECK_FREE(id, fn, name, help) \
	CHECK_EQ(cval("ZS_FREE_" #id), ZS_FREE_##id); \
	CHECK(!strcmp(zs_free_mode_name(ZS_FREE_##id), name)); \
	CHECK(pool_with(ZS_CHAIN_EXHAUSTIVE, ZS_FREE_##id) == 0);
	ZS_CHAIN_POLICIES(CHECK_CHAIN)
	ZS_FREE_MODES(CHECK_FREE)
	CHECK_EQ(cval("ZS_CHAIN_POLICY_COUNT"), ZS_CHAIN_POLICY_COUNT);
	CHECK_EQ(cval("ZS_FREE_MODE_COUNT"), ZS_FREE_MODE_COUNT);
	CHECK_EQ(pool_with((enum zs_chain_policy)ZS_CHAIN_POLICY_COUNT, ZS_FREE_POOL_LOCK), -1);
	CHECK_EQ(pool_with(ZS_CHAIN_EXHAUSTIVE, (enum zs_free_mode)ZS_FREE_MODE_COUNT), -1);

	/* zs/common.h: the loaded library's version, as a number and as "MAJOR.MINOR.PATCH". */
	char v[32];
	snprintf(v, sizeof(v), "%d.%d.%d", ZS_VERSION_MAJOR, ZS_VERSION_MINOR, ZS_VERSION_PATCH);
	CHECK_EQ(zs_version(), ZS_VERSION_NUMBER);
	/* docs/abi.md: NUMBER is MAJOR*10000 + MINOR*100 + PATCH */
	CHECK_EQ(ZS_VERSION_NUMBER, ZS_VERSION_MAJOR * 10000 + ZS_VERSION_MINOR * 100 + ZS_VERSION_PATCH);
	CHECK(!strcmp(zs_version_string(), v));
	CHECK(zs_version_string() == zs_version_string()); /* a static string */
	return tu_done();
}
