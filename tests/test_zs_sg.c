/*
 * zs_obj_read_sg_begin/end: the pieces are exactly the object's bytes, for
 * every class size (so spanning and non-spanning slots both occur), huge
 * objects and larger pool pages; one piece for objects inside a page, two
 * for objects crossing a page boundary; checked mode refuses bad handles and
 * lengths and leaves nothing locked (compaction still runs afterwards).
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"

static int sg_equals(const struct zs_obj_piece *sg, int n, const unsigned char *want, size_t len)
{
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		if (at + sg[i].len > len || memcmp(sg[i].addr, want + at, sg[i].len))
			return 0;
		at += sg[i].len;
	}
	return at == len;
}

static void run(size_t page_size, int checked, uint64_t *seed)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.page_size = page_size;
	cfg.checked = checked;
	struct zs_pool *p = zs_create_pool(&cfg);
	REQUIRE(p);
	enum { N = 600 };
	static unsigned long h[N];
	static size_t len[N];
	static unsigned char data[N][65536];
	unsigned long spans = 0, single = 0;

	for (int i = 0; i < N; i++) {
		/* All sizes from tiny to a full page (huge) across the run. */
		len[i] = 1 + (size_t)(tu_rand(seed) % page_size);
		if (i % 50 == 0)
			len[i] = page_size;
		for (size_t k = 0; k < len[i]; k++)
			data[i][k] = (unsigned char)tu_rand(seed);
		h[i] = zs_malloc(p, len[i]);
		REQUIRE(!ZS_IS_ERR(h[i]));
		CHECK_EQ(zs_obj_write(p, h[i], data[i], len[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		struct zs_obj_piece sg[2];
		int n = zs_obj_read_sg_begin(p, h[i], len[i], sg);

		CHECK(n == 1 || n == 2);
		if (n < 1)
			continue;
		CHECK(sg_equals(sg, n, data[i], len[i]));
		if (n == 2) {
			spans++;
			/* The first piece ends exactly at a page boundary. */
			CHECK_EQ(((uintptr_t)sg[0].addr + sg[0].len) % page_size, 0);
			CHECK(sg[1].len > 0);
		} else {
			single++;
		}
		/* Same bytes as the copying read. */
		static unsigned char copy[65536];
		zs_obj_read_sg_end(p, h[i]);
		void *m = zs_obj_read_begin(p, h[i], len[i], copy);
		REQUIRE(m);
		CHECK(!memcmp(m, data[i], len[i]));
		zs_obj_read_end(p, h[i], len[i], m);
		/* A prefix is a prefix. */
		n = zs_obj_read_sg_begin(p, h[i], 1, sg);
		CHECK_EQ(n, 1);
		if (n == 1) {
			CHECK_EQ(sg[0].len, 1);
			CHECK_EQ(*(const unsigned char *)sg[0].addr, data[i][0]);
			zs_obj_read_sg_end(p, h[i]);
		}
	}
	CHECK(spans > 0);
	CHECK(single > 0);
	printf("page %zu checked %d: %lu spanning, %lu single\n", page_size, checked, spans, single);

	struct zs_obj_piece sg[2];
	CHECK_EQ(zs_obj_read_sg_begin(p, h[0], 0, sg), -EINVAL);
	/* Longer than the slot: refused, and the zspage is not left locked. */
	CHECK_EQ(zs_obj_read_sg_begin(p, h[1], page_size + 1, sg), -EINVAL);
	if (checked) {
		unsigned long bogus = 12345;
		CHECK_EQ(zs_obj_read_sg_begin(p, bogus, 8, sg), -EINVAL);
		zs_obj_read_sg_end(p, bogus);  /* ignored */
		unsigned long dead = zs_malloc(p, 100);
		REQUIRE(!ZS_IS_ERR(dead));
		zs_free(p, dead);
		CHECK_EQ(zs_obj_read_sg_begin(p, dead, 8, sg), -EINVAL);
	}
	/* Free half, compact (needs every zspage unlocked), re-check the rest move intact. */
	for (int i = 0; i < N; i += 2)
		zs_free(p, h[i]);
	zs_compact(p);
	for (int i = 1; i < N; i += 2) {
		int n = zs_obj_read_sg_begin(p, h[i], len[i], sg);
		CHECK(n >= 1 && sg_equals(sg, n, data[i], len[i]));
		if (n >= 1)
			zs_obj_read_sg_end(p, h[i]);
		zs_free(p, h[i]);
	}
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_sg");
	run(4096, 0, &seed);
	run(4096, 1, &seed);
	run(16384, 1, &seed);
	run(65536, 0, &seed);
	return tu_done();
}
