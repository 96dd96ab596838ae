/*
 * Regression test: extreme config values.  An
 * extreme zs_pool_config.deferred_capacity used to wrap a malloc size and
 * write past it (1 << 60) or loop forever rounding up to a power of two
 * (SIZE_MAX).  Every numeric config field of every layer (page provider,
 * zsmalloc, zblock, backend, zram, compressor names and levels) gets values
 * at and past its documented range -- 0, -1 casts, SIZE_MAX, 1 << 60 and the
 * like -- and must either work (inside the range) or fail cleanly with
 * EINVAL (outside), never crash or hang; alarm() turns a hang into a failure
 * naming the case.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "pages/pages.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "must.h"

static char current_case[160] = "setup";

static void on_alarm(int sig)
{
	(void)sig;
	const char msg[] = "hang (alarm) in case: ";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	r = write(2, current_case, strlen(current_case));
	r = write(2, "\n", 1);
	(void)r;
	_exit(1);
}

#define SET_CASE(...) snprintf(current_case, sizeof(current_case), __VA_ARGS__)
#define P60 ((size_t)1 << 60)
#define SPAN4K (ZS_PAGES_MAX_SPAN / 4096)

/* Expect a clean EINVAL (ok == 0) or a working object (ok == 1). */
#define EXPECT(ok, got_ok, err)                                                            \
	do {                                                                               \
		if ((ok) != (got_ok) || (!(ok) && (err) != EINVAL))                         \
			fprintf(stderr, "case %s: expected %s, got %s (errno %d)\n", current_case, \
				(ok) ? "success" : "EINVAL", (got_ok) ? "success" : "failure", \
				(err));                                                    \
		CHECK((ok) == (got_ok));                                                   \
		if (!(ok))                                                                 \
			CHECK_EQ((err), EINVAL);                                           \
	} while (0)

/* ---- page provider ---- */

static void pages_case(const char *field, size_t v, int ok, struct zs_pages_config c)
{
	SET_CASE("pages.%s = %#zx", field, v);
	errno = 0;
	struct zs_pages *p = pages_create(&c);
	int err = errno;
	EXPECT(ok, p != NULL, err);
	if (p) {
		pfn_t pfn;
		CHECK_EQ(pages_alloc(p, &pfn), 0);
		pages_free(p, pfn);
		pages_destroy(p);
	}
}

static void test_pages(void)
{
	struct zs_pages_config base = { 0 }, c;
	const size_t bad_ps[] = { 1, 4095, 4097, 12288, 131072, SIZE_MAX, P60, (size_t)-4096 };
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++) {
		c = base;
		c.page_size = bad_ps[i];
		pages_case("page_size", c.page_size, 0, c);
	}
	const size_t good_ps[] = { 0, 4096, 65536 };
	for (size_t i = 0; i < 3; i++) {
		c = base;
		c.page_size = good_ps[i];
		pages_case("page_size", c.page_size, 1, c);
	}
	const size_t bad_chunk[] = { 1, 2048, 3u << 20, (size_t)1 << 31, P60, SIZE_MAX };
	for (size_t i = 0; i < sizeof(bad_chunk) / sizeof(bad_chunk[0]); i++) {
		c = base;
		c.chunk_bytes = bad_chunk[i];
		pages_case("chunk_bytes", c.chunk_bytes, 0, c);
	}
	const size_t good_chunk[] = { 0, 4096, ZS_PAGES_MAX_CHUNK };
	for (size_t i = 0; i < 3; i++) {
		c = base;
		c.chunk_bytes = good_chunk[i];
		pages_case("chunk_bytes", c.chunk_bytes, 1, c);
	}
	const size_t bad_count[] = { SPAN4K + 1, P60, SIZE_MAX - 1, (size_t)1 << 63 };
	for (size_t i = 0; i < sizeof(bad_count) / sizeof(bad_count[0]); i++) {
		c = base;
		c.max_pages = bad_count[i];
		pages_case("max_pages", c.max_pages, 0, c);
		c = base;
		c.cache_pages = bad_count[i];
		pages_case("cache_pages", c.cache_pages, 0, c);
	}
	c = base;
	c.max_pages = SIZE_MAX;
	pages_case("max_pages", c.max_pages, 0, c);
	const size_t good_count[] = { 0, 1, SPAN4K };
	for (size_t i = 0; i < 3; i++) {
		c = base;
		c.max_pages = good_count[i];
		pages_case("max_pages", c.max_pages, 1, c);
		c = base;
		c.cache_pages = good_count[i];
		pages_case("cache_pages", c.cache_pages, 1, c);
	}
	c = base;
	c.cache_pages = ZS_PAGES_NO_CACHE;
	pages_case("cache_pages", c.cache_pages, 1, c);
	/* 64K pages: the span bound scales with the page size. */
	c = base;
	c.page_size = 65536;
	c.max_pages = ZS_PAGES_MAX_SPAN / 65536 + 1;
	pages_case("max_pages@64K", c.max_pages, 0, c);
}

/* ---- zsmalloc ---- */

static void zs_case(const char *field, long long v, int ok, struct zs_pool_config c)
{
	SET_CASE("zsmalloc.%s = %lld (%#llx)", field, v, (unsigned long long)v);
	errno = 0;
	struct zs_pool *p = try_pool_create(&c);
	int err = errno;
	EXPECT(ok, p != NULL, err);
	if (p) {
		unsigned long h = zs_malloc(p, 100), h2 = zs_malloc(p, 3000);
		CHECK(!ZS_IS_ERR(h) && !ZS_IS_ERR(h2));
		CHECK_EQ(zs_free_deferred(p, h), 0);
		CHECK_EQ(zs_free(p, h2), 0);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
	}
}

#define ZS_FIELD(field, val, ok)                                     \
	do {                                                         \
		struct zs_pool_config c_ = base;                     \
		c_.field = val;                                      \
		zs_case(#field, (long long)c_.field, ok, c_);        \
	} while (0)

static void test_zsmalloc(void)
{
	struct zs_pool_config base;
	zs_pool_config_init(&base);
	base.deferred_worker = -1;

	/* The reproducer's two values first. */
	ZS_FIELD(deferred_capacity, (size_t)0x1000000000000000ULL, 0);
	ZS_FIELD(deferred_capacity, SIZE_MAX, 0);
	ZS_FIELD(deferred_capacity, ZS_MAX_DEFERRED_CAPACITY + 1, 0);
	ZS_FIELD(deferred_capacity, (size_t)1 << 63, 0);
	ZS_FIELD(deferred_capacity, 0, 1);
	ZS_FIELD(deferred_capacity, 1, 1);
	ZS_FIELD(deferred_capacity, 1000, 1);
	ZS_FIELD(deferred_capacity, ZS_MAX_DEFERRED_CAPACITY, 1); /* the bound itself */

	const size_t bad_ps[] = { 1, 4095, 12288, 131072, SIZE_MAX, P60 };
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++)
		ZS_FIELD(page_size, bad_ps[i], 0);
	ZS_FIELD(page_size, 0, 1);
	ZS_FIELD(page_size, 65536, 1);

	ZS_FIELD(max_chain, 17, 0);
	ZS_FIELD(max_chain, UINT_MAX, 0);
	ZS_FIELD(max_chain, 1u << 31, 0);
	ZS_FIELD(max_chain, 0, 1);
	ZS_FIELD(max_chain, 1, 1);
	ZS_FIELD(max_chain, ZS_MAX_CHAIN, 1);

	const unsigned bad_delta[] = { 1, 7, 12, 4104, 8192, UINT_MAX, (unsigned)-8, 1u << 31 };
	for (size_t i = 0; i < sizeof(bad_delta) / sizeof(bad_delta[0]); i++)
		ZS_FIELD(class_delta, bad_delta[i], 0);
	ZS_FIELD(class_delta, 0, 1);
	ZS_FIELD(class_delta, 8, 1);
	ZS_FIELD(class_delta, 4096, 1);

	const size_t bad_max_obj[] = { 1, 4095, 16 * 4096 + 1, 1u << 20, SIZE_MAX, P60 };
	for (size_t i = 0; i < sizeof(bad_max_obj) / sizeof(bad_max_obj[0]); i++)
		ZS_FIELD(max_object_size, bad_max_obj[i], 0);
	ZS_FIELD(max_object_size, 0, 1);
	ZS_FIELD(max_object_size, 4096, 1);
	ZS_FIELD(max_object_size, 20000, 1);
	ZS_FIELD(max_object_size, 16 * 4096, 1);

	ZS_FIELD(chain_policy, (enum zs_chain_policy)2, 0);
	ZS_FIELD(chain_policy, (enum zs_chain_policy)-1, 0);
	ZS_FIELD(chain_policy, (enum zs_chain_policy)INT_MAX, 0);
	ZS_FIELD(chain_policy, ZS_CHAIN_HEURISTIC, 1);
	ZS_FIELD(free_mode, (enum zs_free_mode)ZS_FREE_MODE_COUNT, 0); /* the first value past the registry */
	ZS_FIELD(free_mode, (enum zs_free_mode)-1, 0);
	ZS_FIELD(free_mode, (enum zs_free_mode)INT_MIN, 0);
	ZS_FIELD(free_mode, ZS_FREE_CLASS_INDEX_UNLOCKED, 1);

	ZS_FIELD(checked, 2, 0);
	ZS_FIELD(checked, -1, 0);
	ZS_FIELD(checked, INT_MAX, 0);
	ZS_FIELD(checked, 1, 1);

	ZS_FIELD(fit_zspages, 2, 0);
	ZS_FIELD(fit_zspages, -1, 0);
	ZS_FIELD(fit_zspages, INT_MIN, 0);
	ZS_FIELD(fit_zspages, INT_MAX, 0);
	ZS_FIELD(fit_zspages, 1, 1);

	ZS_FIELD(max_pages, SIZE_MAX, 0);
	ZS_FIELD(max_pages, P60, 0);
	ZS_FIELD(max_pages, SPAN4K + 1, 0);
	ZS_FIELD(max_pages, SPAN4K, 1);
	ZS_FIELD(max_pages, 16, 1);

	ZS_FIELD(deferred_worker, 2, 0);
	ZS_FIELD(deferred_worker, -2, 0);
	ZS_FIELD(deferred_worker, INT_MIN, 0);
	ZS_FIELD(deferred_worker, INT_MAX, 0);
	ZS_FIELD(deferred_worker, 0, 1);
	ZS_FIELD(deferred_worker, 1, 1);

	ZS_FIELD(page_cache_pages, SIZE_MAX - 1, 0);
	ZS_FIELD(page_cache_pages, P60, 0);
	ZS_FIELD(page_cache_pages, ZS_PAGES_NO_CACHE, 1);
	ZS_FIELD(page_cache_pages, SPAN4K, 1);
	ZS_FIELD(page_cache_pages, SPAN4K + 1, 0);

	/* 1..ZS_PAGES_MAX_DECAY_MS or ZS_PAGES_DECAY_NEVER; 0 is the default. */
	ZS_FIELD(page_cache_decay_ms, 0, 1);
	ZS_FIELD(page_cache_decay_ms, 1, 1);
	ZS_FIELD(page_cache_decay_ms, ZS_PAGES_MAX_DECAY_MS, 1);
	ZS_FIELD(page_cache_decay_ms, ZS_PAGES_MAX_DECAY_MS + 1, 0);
	ZS_FIELD(page_cache_decay_ms, ZS_PAGES_DECAY_NEVER, 1);
	ZS_FIELD(page_cache_decay_ms, ZS_PAGES_DECAY_NEVER - 1, 0);

	/* 0..ZS_MAX_CLASS_SHARDS and classes x shards <= 8192: 255 classes at 4 KiB take 32. */
	ZS_FIELD(class_shards, 0, 1);
	ZS_FIELD(class_shards, 32, 1);
	ZS_FIELD(class_shards, 33, 0);
	ZS_FIELD(class_shards, ZS_CLASS_SHARDS_AUTO, 1);
	ZS_FIELD(class_shards, ZS_CLASS_SHARDS_AUTO - 1, 0);
	ZS_FIELD(class_shards, UINT_MAX / 2, 0);

	/* The bounds that scale with the page size, at 16 and 64 KiB pages. */
	struct zs_pool_config b16 = base, b64 = base;
	b16.page_size = 16384;
	b64.page_size = 65536;
#define ZS_FIELD_AT(b, field, val, ok)                                            \
	do {                                                                     \
		struct zs_pool_config c_ = (b);                                  \
		c_.field = val;                                                  \
		zs_case(#b "." #field, (long long)c_.field, ok, c_);              \
	} while (0)
	ZS_FIELD_AT(b16, class_delta, 16384, 1);
	ZS_FIELD_AT(b16, class_delta, 16392, 0);
	ZS_FIELD_AT(b16, max_object_size, 16383, 0);
	ZS_FIELD_AT(b16, max_object_size, 16384, 1);
	ZS_FIELD_AT(b16, max_object_size, 16 * 16384, 1);
	ZS_FIELD_AT(b16, max_object_size, 16 * 16384 + 1, 0);
	ZS_FIELD_AT(b64, max_pages, ZS_PAGES_MAX_SPAN / 65536, 1);
	ZS_FIELD_AT(b64, max_pages, ZS_PAGES_MAX_SPAN / 65536 + 1, 0);
	ZS_FIELD_AT(b64, page_cache_pages, ZS_PAGES_MAX_SPAN / 65536, 1);
	ZS_FIELD_AT(b64, page_cache_pages, ZS_PAGES_MAX_SPAN / 65536 + 1, 0);
	/* Delta 4096 leaves few classes: the shard cap itself, 64, is the bound. */
	b16 = base;
	b16.class_delta = 4096;
	ZS_FIELD_AT(b16, class_shards, ZS_MAX_CLASS_SHARDS, 1);
	ZS_FIELD_AT(b16, class_shards, ZS_MAX_CLASS_SHARDS + 1, 0);
#undef ZS_FIELD_AT
}

/* ---- zblock ---- */

static void zb_case(const char *field, long long v, int ok, struct zblock_config c)
{
	SET_CASE("zblock.%s = %lld (%#llx)", field, v, (unsigned long long)v);
	errno = 0;
	struct zblock_pool *p = try_zblock_create(&c);
	int err = errno;
	EXPECT(ok, p != NULL, err);
	if (p) {
		unsigned long h = zblock_malloc(p, 100);
		CHECK(!ZS_IS_ERR(h));
		CHECK_EQ(zblock_free(p, h), 0);
		zblock_destroy_pool(p);
	}
}

#define ZB_FIELD(field, val, ok)                                 \
	do {                                                     \
		struct zblock_config c_ = base;                  \
		c_.field = val;                                  \
		zb_case(#field, (long long)c_.field, ok, c_);    \
	} while (0)

static void test_zblock(void)
{
	struct zblock_config base;
	zblock_config_init(&base);
	const size_t bad_ps[] = { 1, 4095, 12288, 131072, SIZE_MAX, P60 };
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++)
		ZB_FIELD(page_size, bad_ps[i], 0);
	ZB_FIELD(page_size, 0, 1);
	ZB_FIELD(page_size, 65536, 1);
	ZB_FIELD(max_pages, SIZE_MAX, 0);
	ZB_FIELD(max_pages, P60, 0);
	ZB_FIELD(max_pages, SPAN4K + 1, 0);
	ZB_FIELD(max_pages, SPAN4K, 1);
	ZB_FIELD(checked, 2, 0);
	ZB_FIELD(checked, -1, 0);
	ZB_FIELD(checked, 1, 1);
	ZB_FIELD(huge, 2, 0);
	ZB_FIELD(huge, INT_MIN, 0);
	ZB_FIELD(huge, 1, 1);
	ZB_FIELD(page_cache_pages, SIZE_MAX - 1, 0);
	ZB_FIELD(page_cache_pages, P60, 0);
	ZB_FIELD(page_cache_pages, ZS_PAGES_NO_CACHE, 1);
	ZB_FIELD(page_cache_pages, SPAN4K, 1);
	ZB_FIELD(page_cache_pages, SPAN4K + 1, 0);
	base.page_size = 65536;
	ZB_FIELD(max_pages, ZS_PAGES_MAX_SPAN / 65536, 1);
	ZB_FIELD(max_pages, ZS_PAGES_MAX_SPAN / 65536 + 1, 0);
	ZB_FIELD(page_cache_pages, ZS_PAGES_MAX_SPAN / 65536 + 1, 0);
}

/* ---- backend (every kind) ---- */

static void be_case(const char *field, long long v, int ok, struct zs_backend_config c)
{
	SET_CASE("backend[%s].%s = %lld (%#llx)", c.kind, field, v, (unsigned long long)v);
	errno = 0;
	struct zs_backend *b = try_backend_create(&c);
	int err = errno;
	EXPECT(ok, b != NULL, err);
	if (b) {
		unsigned long h = zs_backend_malloc(b, 100);
		CHECK(!ZS_IS_ERR(h));
		CHECK_EQ(zs_backend_free(b, h), 0);
		zs_backend_destroy(b);
	}
}

#define BE_FIELD(field, val, ok)                                 \
	do {                                                     \
		struct zs_backend_config c_ = base;              \
		c_.field = val;                                  \
		be_case(#field, (long long)c_.field, ok, c_);    \
	} while (0)

static void test_backend(void)
{
	const char *const *kinds = zs_backend_kinds();
	for (int k = 0; kinds[k]; k++) {
		struct zs_backend_config base;
		zs_backend_config_init(&base);
		base.zs.deferred_worker = -1;
		base.kind = kinds[k];
		BE_FIELD(page_size, SIZE_MAX, 0);
		BE_FIELD(page_size, P60, 0);
		BE_FIELD(page_size, 4095, 0);
		BE_FIELD(page_size, 0, 1);
		BE_FIELD(page_size, 65536, 1);
		BE_FIELD(page_size, 131072, 0);
		BE_FIELD(max_pages, SIZE_MAX, 0);
		BE_FIELD(max_pages, P60, 0);
		BE_FIELD(max_pages, SPAN4K, 1);
		BE_FIELD(max_pages, SPAN4K + 1, 0);
		BE_FIELD(checked, 2, 0);
		BE_FIELD(checked, -1, 0);
		BE_FIELD(checked, 1, 1);
		/* The nested pool config: its ranges hold for every kind, whether or not the
		 * kind reads it (zs/backend.h); the three fields the backend's own replace are
		 * not read, so not checked. */
		BE_FIELD(zs.deferred_capacity, SIZE_MAX, 0);
		BE_FIELD(zs.deferred_capacity, P60, 0);
		BE_FIELD(zs.class_delta, UINT_MAX, 0);
		BE_FIELD(zs.deferred_worker, INT_MIN, 0);
		BE_FIELD(zs.page_cache_pages, P60, 0);
		BE_FIELD(zs.free_mode, (enum zs_free_mode)-1, 0);
		BE_FIELD(zs.page_cache_decay_ms, ZS_PAGES_MAX_DECAY_MS + 1, 0);
		BE_FIELD(zs.page_cache_decay_ms, ZS_PAGES_MAX_DECAY_MS, 1);
		BE_FIELD(zs.class_shards, 33, 0); /* 255 classes x 33 > 8192 */
		BE_FIELD(zs.class_shards, 32, 1);
		BE_FIELD(zs.max_chain, ZS_MAX_CHAIN + 1, 0);
		BE_FIELD(zs.page_size, 3000, 1);
		BE_FIELD(zs.max_pages, SIZE_MAX, 1);
		BE_FIELD(zs.checked, 7, 1);
	}
	SET_CASE("backend kind 'nope'");
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	c.kind = "nope";
	errno = 0;
	CHECK_BACKEND_REFUSED(&c, -EINVAL, "zs_backend_config");
}

/* ---- zram store ---- */

static void zram_case(const char *field, long long v, int ok, struct zs_zram_config c)
{
	SET_CASE("zram.%s = %lld (%#llx)", field, v, (unsigned long long)v);
	struct zs_zram *z = NULL;
	int rc = zs_zram_create(&c, &z, NULL, 0);
	EXPECT(ok, rc == 0, -rc);
	CHECK(rc == 0 ? z != NULL : z == NULL);
	if (z) {
		unsigned char page[65536], back[65536];
		size_t ps = zs_zram_page_size(z);
		for (size_t i = 0; i < ps; i++)
			page[i] = (unsigned char)(i * 7 / 13);
		CHECK_EQ(zs_zram_write(z, 0, page), 0);
		CHECK_EQ(zs_zram_read(z, 0, back, ps), 0);
		CHECK(memcmp(page, back, ps) == 0);
		zs_zram_destroy(z);
	}
}

#define ZRAM_FIELD(field, val, ok)                                 \
	do {                                                       \
		struct zs_zram_config c_ = base;                   \
		c_.field = val;                                    \
		zram_case(#field, (long long)c_.field, ok, c_);    \
	} while (0)

static void zram_name_case(int recomp, const char *name, int ok, struct zs_zram_config c)
{
	SET_CASE("zram.%s = \"%s\"", recomp ? "recomp" : "comp", name);
	if (recomp)
		c.recomp = name;
	else
		c.comp = name;
	struct zs_zram *z = NULL;
	int rc = zs_zram_create(&c, &z, NULL, 0);
	EXPECT(ok, rc == 0, -rc);
	if (z)
		zs_zram_destroy(z);
}

static void test_zram(void)
{
	struct zs_zram_config base;
	zs_zram_config_init(&base);
	base.disksize = 64 * 4096;
	base.streams = 2;
	base.backend.zs.deferred_worker = -1;

	const size_t bad_ps[] = { 1, 4095, 12288, 131072, SIZE_MAX, P60 };
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++)
		ZRAM_FIELD(page_size, bad_ps[i], 0);
	ZRAM_FIELD(page_size, 0, 1);
	ZRAM_FIELD(page_size, 65536, 1);
	ZRAM_FIELD(page_size, 2048, 0);    /* a power of two below the range */
	ZRAM_FIELD(page_size, 4096, 1);
	ZRAM_FIELD(page_size, 8192, 1);

	const uint64_t bad_disk[] = { 0, 4095, UINT64_MAX, (uint64_t)1 << 60, (uint64_t)1 << 63,
				      (ZS_ZRAM_MAX_SLOTS + 1) * 4096 };
	for (size_t i = 0; i < sizeof(bad_disk) / sizeof(bad_disk[0]); i++)
		ZRAM_FIELD(disksize, bad_disk[i], 0);
	ZRAM_FIELD(disksize, 4096, 1);
	ZRAM_FIELD(disksize, 4096 * 3 + 17, 1);

	ZRAM_FIELD(mem_limit, UINT64_MAX, 0);
	ZRAM_FIELD(mem_limit, UINT64_MAX - 100, 0);
	ZRAM_FIELD(mem_limit, ZS_ZRAM_MAX_MEM_LIMIT + 1, 0);
	ZRAM_FIELD(mem_limit, ZS_ZRAM_MAX_MEM_LIMIT, 1);
	ZRAM_FIELD(mem_limit, (1 << 20) + 1, 1); /* rounded up to whole pages */

	ZRAM_FIELD(streams, UINT_MAX, 0);
	ZRAM_FIELD(streams, 1u << 31, 0);
	ZRAM_FIELD(streams, ZS_ZRAM_MAX_STREAMS + 1, 0);
	ZRAM_FIELD(streams, 0, 1);
	ZRAM_FIELD(streams, 1, 1);
	ZRAM_FIELD(streams, ZS_ZRAM_MAX_STREAMS, 1);

	ZRAM_FIELD(deferred_free, 2, 0);
	ZRAM_FIELD(deferred_free, -1, 0);
	ZRAM_FIELD(deferred_free, 1, 1);
	ZRAM_FIELD(track_actime, INT_MAX, 0);
	ZRAM_FIELD(track_actime, -1, 0);
	ZRAM_FIELD(track_actime, 1, 1);

	/* Levels, dictionaries, writeback and groups. */
	ZRAM_FIELD(comp_level, INT_MAX, 0);
	ZRAM_FIELD(comp_level, INT_MIN, 0);
	ZRAM_FIELD(comp_level, 65538, 0);  /* lz4 acceleration 1..65537 */
	ZRAM_FIELD(comp_level, 65537, 1);
	ZRAM_FIELD(comp_dict_len, SIZE_MAX, 0); /* length without bytes */
	ZRAM_FIELD(recomp_level, 3, 0);          /* no recomp configured */
	ZRAM_FIELD(recomp_dict_len, 1, 0);
	ZRAM_FIELD(writeback_batch_size, UINT_MAX, 0);
	ZRAM_FIELD(writeback_batch_size, 1, 0);  /* no backing file */
	ZRAM_FIELD(writeback_compressed, 1, 0);
	ZRAM_FIELD(writeback_compressed, -1, 0);
	ZRAM_FIELD(group_pages, UINT_MAX, 0);
	ZRAM_FIELD(group_pages, 3, 0);
	ZRAM_FIELD(group_pages, 32, 0);
	ZRAM_FIELD(group_pages, 0, 1);
	ZRAM_FIELD(group_pages, 1, 1);
	ZRAM_FIELD(group_pages, 2, 1);
	ZRAM_FIELD(group_pages, 16, 1);
	ZRAM_FIELD(group_pages, 17, 0);

	/* Nested backend and pool configs are checked through the store too. */
	ZRAM_FIELD(backend.max_pages, SIZE_MAX, 0);
	ZRAM_FIELD(backend.checked, 7, 0);
	ZRAM_FIELD(backend.zs.deferred_capacity, SIZE_MAX, 0);
	ZRAM_FIELD(backend.zs.deferred_capacity, (size_t)0x1000000000000000ULL, 0);
	ZRAM_FIELD(backend.zs.max_chain, UINT_MAX, 0);

	/* Compressor names and levels. */
	const char *bad_names[] = { "", "lz4:", "lz4:0", "lz4:-1", "lz4:65538", "lz4: 1", "lz4:+1",
				    "lz4:1x", "lz4:0x10", "lz4hc:0", "lz4hc:13",
				    "zstd:99999999999999999999", "zstd:-99999999999999999999",
				    "zstd:23", "zstd:-", "lzo:1", "lz5", "zstd:2147483648" };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		zram_name_case(0, bad_names[i], 0, base);
		zram_name_case(1, bad_names[i], 0, base);
	}
	const char *good_names[] = { "lz4", "lz4:1", "lz4:65537", "lz4hc:1", "lz4hc:12", "zstd:1",
				     "zstd:-5", "lzo" };
	for (size_t i = 0; i < sizeof(good_names) / sizeof(good_names[0]); i++)
		zram_name_case(0, good_names[i], 1, base);

	/* Run-time enum argument: recompression type. */
	SET_CASE("zs_zram_recompress type out of range");
	struct zs_zram_config c = base;
	c.recomp = "zstd";
	struct zs_zram *z = NULL;
	REQUIRE(zs_zram_create(&c, &z, NULL, 0) == 0);
	struct zs_zram_recomp_result r;
	CHECK_EQ(zs_zram_recompress(z, (enum zs_zram_recomp_type)4, 0, 0, &r), -EINVAL);
	CHECK_EQ(zs_zram_recompress(z, (enum zs_zram_recomp_type)-1, 0, 0, &r), -EINVAL);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, SIZE_MAX, 0, &r), -EINVAL);
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, ULONG_MAX, &r), 0);
	zs_zram_destroy(z);
}

/* ---- compressor contexts ---- */

static void test_compress(void)
{
	const size_t bad_src[] = { 0, ZS_COMP_MAX_SRC + 1, (size_t)INT_MAX + 1, P60, SIZE_MAX };
	const char *const *names = zs_comp_names();
	for (int n = 0; names[n]; n++) {
		for (size_t i = 0; i < sizeof(bad_src) / sizeof(bad_src[0]); i++) {
			SET_CASE("zs_comp_create(%s, max_src %#zx)", names[n], bad_src[i]);
			struct zs_comp *c = (struct zs_comp *)1;
			int rc = zs_comp_create(&(struct zs_comp_config){ .name = names[n], .max_src = bad_src[i] }, &c, NULL, 0);
			CHECK_EQ(rc, -EINVAL);
			CHECK(c == NULL);
		}
		SET_CASE("zs_comp_create(%s, max_src 1 MiB)", names[n]);
		struct zs_comp *c = NULL;
		int rc = zs_comp_create(&(struct zs_comp_config){ .name = names[n], .max_src = ZS_COMP_MAX_SRC }, &c, NULL, 0);
		if (rc == -EOPNOTSUPP)
			continue;
		CHECK_EQ(rc, 0);
		zs_comp_destroy(c);
	}
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(120);
	test_pages();
	test_zsmalloc();
	test_zblock();
	test_backend();
	test_zram();
	test_compress();
	return tu_done();
}
