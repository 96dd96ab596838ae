/*
 * Where zs_pool_config.max_object_size meets the class table's limit: each
 * page count past one is a size class, and classes x class_shards must fit
 * the 8192 numbers an obj's class field holds (include/zs/zsmalloc.h).
 * fuzz_alloc found the one documented config this refuses: 64 KiB pages with
 * class_delta 8 have 8189 classes up to a page, so only 3 page counts more
 * (objects of up to 4 pages) fit.  Every other page size and delta takes all
 * 16 pages; with 16 pages at 4 KiB, 30 class shards fit (32 without them);
 * the automatic shard count shrinks to fit (down to one copy, which must
 * fit too).  Deterministic: no random input.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"

#include <errno.h>
#include "must.h"

/* 1 if the pool is created, 0 if refused with EINVAL (anything else fails the test). */
static int creates(size_t page, unsigned delta, size_t max_obj, unsigned shards)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = page;
	c.class_delta = delta;
	c.max_object_size = max_obj;
	c.class_shards = shards;
	errno = 0;
	struct zs_pool *p = try_pool_create(&c);
	if (!p) {
		CHECK_EQ(errno, EINVAL);
		return 0;
	}
	zs_destroy_pool(p);
	return 1;
}

int main(void)
{
	const size_t P64 = 65536;
	/* 64 KiB pages, delta 8: four pages fit, five do not, whatever the shards */
	CHECK(creates(P64, 8, 4 * P64, 0));
	CHECK(creates(P64, 8, 4 * P64 - 1, 0));
	CHECK(!creates(P64, 8, 4 * P64 + 1, 0));
	CHECK(!creates(P64, 8, 16 * P64, 0));
	CHECK(!creates(P64, 8, 5 * P64, ZS_CLASS_SHARDS_AUTO));
	CHECK(creates(P64, 8, 0, 0)); /* the kernel's limit, as before */

	/* every other page size and these deltas take all 16 pages */
	static const unsigned deltas[] = { 0, 8, 16, 24, 64, 256 };
	for (size_t page = 4096; page <= P64; page *= 2)
		for (unsigned i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++)
			if (page != P64 || deltas[i] != 8)
				CHECK(creates(page, deltas[i], ZS_MAX_OBJECT_PAGES * page, 0));

	/* 4 KiB pages, 16-page objects: 255 + 15 classes, 30 shards fit, 31 do not */
	CHECK(creates(4096, 0, 16 * 4096, 30));
	CHECK(!creates(4096, 0, 16 * 4096, 31));
	CHECK(creates(4096, 0, 0, 32));
	CHECK(creates(4096, 0, 16 * 4096, ZS_CLASS_SHARDS_AUTO));
	return tu_done();
}
