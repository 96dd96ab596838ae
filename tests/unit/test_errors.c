/*
 * The error convention of README.md ("Errors"), one check per rule and
 * layer, with the exact codes: int calls return 0 or -errno (a bad class
 * index is -EINVAL in zsmalloc and zblock alike, a lookup never returns a
 * bare -1), handle calls ZS_ERR codes, pointer calls NULL with errno set,
 * int constructors -errno with *out NULL, and zram passing the allocator's
 * code on instead of calling every store failure -ENOMEM.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/region.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "must.h"
#include "backend/backend_internal.h" /* swaps a backend's ops to inject faults */

static void test_zsmalloc_codes(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.page_size = 3000;
	errno = 0;
	CHECK_POOL_REFUSED(&cfg, "zs_pool_config");

	zs_pool_config_init(&cfg);
	cfg.checked = 1;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	int n = zs_class_count(p);
	struct zs_class_info ci;
	struct zs_class_stats st;
	CHECK_EQ(zs_class_info(p, -1, &ci), -EINVAL);
	CHECK_EQ(zs_class_info(p, n, &ci), -EINVAL);
	CHECK_EQ(zs_class_info(p, 0, &ci), 0);
	CHECK_EQ(zs_class_stats(p, -1, &st, sizeof(st)), -EINVAL);
	CHECK_EQ(zs_class_stats(p, n, &st, sizeof(st)), -EINVAL);
	/* A logical class merged into a larger one: valid, but its stats live elsewhere. */
	int merged = -1;
	for (int i = 0; i < n && merged < 0; i++)
		if (zs_class_info(p, i, &ci) == 0 && ci.phys_index != i)
			merged = i;
	REQUIRE(merged >= 0);
	CHECK_EQ(zs_class_stats(p, merged, &st, sizeof(st)), -ENOENT);
	CHECK_EQ(zs_class_info(p, merged, &ci), 0);
	CHECK_EQ(zs_class_stats(p, ci.phys_index, &st, sizeof(st)), 0);

	CHECK_EQ(ZS_ERR(zs_malloc(p, 0)), -EINVAL);
	CHECK_EQ(ZS_ERR(zs_malloc(p, 4097)), -ENOSPC);
	unsigned long h = zs_malloc(p, 100);
	REQUIRE(!ZS_IS_ERR(h));
	char buf[4096];
	errno = 0;
	CHECK(zs_obj_read_begin(p, h, 4096, buf) == NULL); /* longer than the object */
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(zs_obj_read_begin(p, h + 8, 10, buf) == NULL); /* not a handle */
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(zs_map_object(p, h + 8, ZS_MM_RO) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(zs_obj_write(p, h, buf, 4096), -EINVAL);
	CHECK_EQ(zs_free(p, h), 0);
	CHECK_EQ(zs_free(p, h), -EINVAL);
	zs_destroy_pool(p);
}

static void test_zblock_codes(void)
{
	struct zblock_config cfg;
	zblock_config_init(&cfg);
	cfg.checked = 1;
	struct zblock_pool *p = must_zblock_create(&cfg);
	REQUIRE(p);
	int n = zblock_class_count(p);
	struct zblock_class_info ci;
	struct zblock_class_stats st;
	CHECK_EQ(zblock_class_info(p, -1, &ci), -EINVAL);
	CHECK_EQ(zblock_class_info(p, n, &ci), -EINVAL);
	CHECK_EQ(zblock_class_stats(p, -1, &st, sizeof(st)), -EINVAL);
	CHECK_EQ(zblock_class_stats(p, n, &st, sizeof(st)), -EINVAL);
	CHECK_EQ(zblock_class_stats(p, n - 1, &st, sizeof(st)), 0);
	size_t max = zblock_max_size(p);
	CHECK_EQ(zblock_lookup_class(p, 0), -EINVAL);
	CHECK_EQ(zblock_lookup_class(p, max + 1), -ENOSPC);
	CHECK_EQ(zblock_lookup_class(p, max), n - 1);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, 0)), -EINVAL);
	CHECK_EQ(ZS_ERR(zblock_malloc(p, max + 1)), -ENOSPC);
	unsigned long h = zblock_malloc(p, 100);
	REQUIRE(!ZS_IS_ERR(h));
	errno = 0;
	CHECK(zblock_obj_read_begin(p, h, max + 1, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(zblock_free(p, h), 0);
	errno = 0;
	CHECK(zblock_obj_read_begin(p, h, 10, NULL) == NULL); /* freed */
	CHECK_EQ(errno, EINVAL);
	zblock_destroy_pool(p);
}

static void test_backend_codes(void)
{
	struct zs_backend_config bc = { .kind = "nope" };
	errno = 0;
	CHECK_BACKEND_REFUSED(&bc, -EINVAL, "zs_backend_config");
	bc.kind = "malloc";
	struct zs_backend *b = must_backend_create(&bc);
	REQUIRE(b);
	CHECK_EQ(zs_backend_lookup_class(b, 100), -EOPNOTSUPP); /* no classes: not -1 */
	zs_backend_destroy(b);
	bc.kind = "zblock";
	b = must_backend_create(&bc);
	REQUIRE(b);
	CHECK(zs_backend_lookup_class(b, 100) >= 0);
	CHECK_EQ(zs_backend_lookup_class(b, 0), -EINVAL);
	zs_backend_destroy(b);
}

/*
 * README "Errors": getters that look something up return NULL for "not
 * there" and leave errno alone (a caller may read errno from an earlier
 * call after them).
 */
static void test_getters_keep_errno(void)
{
	struct zs_backend_config bc;
	zs_backend_config_init(&bc);
	bc.kind = "zblock";
	struct zs_backend *b = must_backend_create(&bc);
	REQUIRE(b);
	errno = 4242;
	CHECK(zs_backend_zspool(b) == NULL);
	CHECK_EQ(errno, 4242);
	zs_backend_destroy(b);
	errno = 4242;
	CHECK(zs_chain_policy_name((enum zs_chain_policy)77) == NULL);
	CHECK(zs_free_mode_name((enum zs_free_mode)77) == NULL);
	CHECK_EQ(errno, 4242);
}

static void test_constructor_out_null(void)
{
	struct zs_comp *c = (struct zs_comp *)&c;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "nope", .max_src = 4096 }, &c, NULL, 0), -EINVAL);
	CHECK(c == NULL);

	struct zs_zram_config zc;
	struct zs_zram *z = (struct zs_zram *)&z;
	zs_zram_config_init(&zc);
	zc.disksize = 0;
	CHECK_EQ(zs_zram_create(&zc, &z, NULL, 0), -EINVAL);
	CHECK(z == NULL);

	struct zs_region_config rc;
	struct zs_region *r = (struct zs_region *)&r;
	memset(&rc, 0, sizeof(rc)); /* size 0: refused before userfaultfd is needed */
	CHECK_EQ(zs_region_create(&rc, &r, NULL, 0), -EINVAL);
	CHECK(r == NULL);
}

/* A backend that fails on demand, wrapped around the store's real one. */
static const struct zs_backend_ops *real_ops;
static int fail_malloc_code, fail_write;

static unsigned long flaky_malloc(struct zs_backend *b, size_t size)
{
	if (fail_malloc_code)
		return (unsigned long)(long)fail_malloc_code;
	return real_ops->malloc(b, size);
}

static int flaky_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	return fail_write ? -EINVAL : real_ops->write(b, h, src, len);
}

static void test_zram_write_codes(void)
{
	struct zs_zram_config zc;
	struct zs_zram *z;
	zs_zram_config_init(&zc);
	zc.disksize = 16 * 4096;
	zc.backend.kind = "malloc";
	REQUIRE(zs_zram_create(&zc, &z, NULL, 0) == 0);
	struct zs_backend *b = zs_zram_backend(z);
	static struct zs_backend_ops flaky;
	real_ops = b->ops;
	flaky = *b->ops;
	flaky.malloc = flaky_malloc;
	flaky.write = flaky_write;
	b->ops = &flaky;

	unsigned char page[4096], out[4096];
	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (unsigned char)(i % 251 + (i / 997));
	REQUIRE(zs_zram_write(z, 0, page) == 0);

	unsigned char other[4096];
	memset(other, 7, sizeof(other));
	other[100] = 1; /* not same-filled: it needs an object */
	fail_malloc_code = -ENOSPC; /* the allocator's code reaches the caller */
	CHECK_EQ(zs_zram_write(z, 0, other), -ENOSPC);
	fail_malloc_code = -ENOMEM;
	CHECK_EQ(zs_zram_write(z, 0, other), -ENOMEM);
	fail_malloc_code = 0;
	fail_write = 1; /* a refused write is an I/O error, not a memory shortage */
	CHECK_EQ(zs_zram_write(z, 0, other), -EIO);
	fail_write = 0;
	/* Every failure left the old page. */
	CHECK_EQ(zs_zram_read(z, 0, out, sizeof(out)), 0);
	CHECK(memcmp(out, page, sizeof(page)) == 0);
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.failed_writes, 3);
	CHECK_EQ(zs_zram_write(z, 16, page), -EINVAL);
	b->ops = real_ops;
	zs_zram_destroy(z);
}

/*
 * zs_zram_free_notify never waits: on a slot another call holds locked it
 * counts miss_free and returns -EBUSY, leaving the slot as it was.  A read
 * holds slot 0's lock while the backend's read_begin runs; that hook parks
 * the reader there until the main thread has tried.
 */
static atomic_int rd_parked, rd_go;

static void *parked_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *copy)
{
	atomic_store(&rd_parked, 1);
	while (!atomic_load(&rd_go))
		sched_yield();
	return real_ops->read_begin(b, h, len, copy);
}

static void *reader(void *arg)
{
	static unsigned char out[4096];
	return (void *)(intptr_t)zs_zram_read(arg, 0, out, sizeof(out));
}

static void test_zram_free_notify_busy(void)
{
	struct zs_zram_config zc;
	struct zs_zram *z;
	zs_zram_config_init(&zc);
	zc.disksize = 4 * 4096;
	zc.backend.kind = "malloc";
	REQUIRE(zs_zram_create(&zc, &z, NULL, 0) == 0);
	unsigned char page[4096], out[4096];
	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (unsigned char)(i % 251 + (i / 997));
	REQUIRE(zs_zram_write(z, 0, page) == 0);

	struct zs_backend *b = zs_zram_backend(z);
	static struct zs_backend_ops parked;
	real_ops = b->ops;
	parked = *b->ops;
	parked.read_begin = parked_read_begin;
	b->ops = &parked;
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, reader, z) == 0);
	while (!atomic_load(&rd_parked))
		sched_yield();
	CHECK_EQ(zs_zram_free_notify(z, 0), -EBUSY);
	atomic_store(&rd_go, 1);
	void *rc;
	pthread_join(t, &rc);
	CHECK_EQ((intptr_t)rc, 0);
	b->ops = real_ops;

	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.miss_free, 1);
	CHECK_EQ(st.pages_stored, 1);   /* the missed free left the slot */
	CHECK_EQ(zs_zram_read(z, 0, out, sizeof(out)), 0);
	CHECK(memcmp(out, page, sizeof(page)) == 0);
	CHECK_EQ(zs_zram_free_notify(z, 0), 0);   /* unlocked: freed at once */
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, 0);
	CHECK_EQ(st.miss_free, 1);
	zs_zram_destroy(z);
}

/*
 * zs_zram_recompress: a store error is the call's result as for
 * zs_zram_write (the allocator's code; -EIO for a refused write), and the
 * slot it was moving keeps its old object.
 */
static void test_zram_recompress_codes(void)
{
	struct zs_zram_config zc;
	struct zs_zram *z;
	zs_zram_config_init(&zc);
	zc.disksize = 4 * 4096;
	zc.comp = "lz4";
	zc.recomp = "zstd:9";
	REQUIRE(zs_zram_create(&zc, &z, NULL, 0) == 0);
	unsigned char page[4096], out[4096];
	for (size_t i = 0; i < sizeof(page); i += 16) {
		char row[17];
		snprintf(row, sizeof(row), "row %06zu pad..", i / 16 % 7);
		memcpy(page + i, row, 16);
	}
	REQUIRE(zs_zram_write(z, 0, page) == 0);

	struct zs_backend *b = zs_zram_backend(z);
	static struct zs_backend_ops flaky;
	real_ops = b->ops;
	flaky = *b->ops;
	flaky.malloc = flaky_malloc;
	flaky.write = flaky_write;
	b->ops = &flaky;
	struct zs_zram_recomp_result r;
	fail_malloc_code = -ENOSPC;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &r), -ENOSPC);
	fail_malloc_code = -ENOMEM;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &r), -ENOMEM);
	fail_malloc_code = 0;
	fail_write = 1;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &r), -EIO);
	fail_write = 0;
	b->ops = real_ops;
	unsigned prio = 9;
	CHECK_EQ(zs_zram_slot_info(z, 0, NULL, NULL, &prio), 0);
	CHECK_EQ(prio, 0);   /* still the primary's object */
	CHECK_EQ(zs_zram_read(z, 0, out, sizeof(out)), 0);
	CHECK(memcmp(out, page, sizeof(page)) == 0);
	/* and the store works on: the next pass moves it */
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &r), 0);
	CHECK_EQ(r.recompressed, 1);
	CHECK_EQ(zs_zram_read(z, 0, out, sizeof(out)), 0);
	CHECK(memcmp(out, page, sizeof(page)) == 0);
	zs_zram_destroy(z);
}

int main(void)
{
	test_zsmalloc_codes();
	test_zblock_codes();
	test_backend_codes();
	test_getters_keep_errno();
	test_constructor_out_null();
	test_zram_write_codes();
	test_zram_free_notify_busy();
	test_zram_recompress_codes();
	return tu_done();
}
