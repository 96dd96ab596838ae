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
#include "must.h"

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
	struct zs_pool *p = must_pool_create(&cfg);
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

/*
 * zs_obj_read_sgv_begin's refusals (zs/zsmalloc.h): fewer pieces than the
 * object needs, nr_sg below 1, mem_len 0 or past the slot, and in checked
 * mode a freed or bogus handle are -EINVAL with nothing left locked.  The
 * proof of "nothing locked": compaction write-trylocks a zspage before
 * moving its objects and skips a locked one, so after the refusals on the
 * last object of zspage A it must still move that object to B and free A.
 */
static void sgv_refusals(int checked)
{
	enum { N = 199, SPAN = 28 }; /* 136 B + header: 199 slots in 7 pages; slot 28 spans */
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.checked = checked;
	cfg.deferred_worker = -1;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	static unsigned long a[N], b[N];
	unsigned char want[136];
	for (size_t k = 0; k < sizeof(want); k++)
		want[k] = (unsigned char)(k * 7 + 3);
	for (int i = 0; i < N; i++) {
		a[i] = zs_malloc(p, 136);
		REQUIRE(!ZS_IS_ERR(a[i]));
	}
	for (int i = 0; i < N; i++) {
		b[i] = zs_malloc(p, 136);
		REQUIRE(!ZS_IS_ERR(b[i]));
	}
	CHECK_EQ(zs_get_total_pages(p), 14);
	unsigned long h = a[SPAN];
	CHECK_EQ(zs_obj_write(p, h, want, sizeof(want)), 0);
	struct zs_obj_piece sg[4];
	int need = zs_obj_read_sgv_begin(p, h, sizeof(want), sg, 4);
	REQUIRE(need == 2); /* the spanning slot: the test needs two pieces */
	CHECK(sg_equals(sg, need, want, sizeof(want)));
	zs_obj_read_sg_end(p, h);
	for (int i = 0; i < N; i++)
		if (i != SPAN)
			CHECK_EQ(zs_free(p, a[i]), 0);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(zs_free(p, b[i]), 0); /* room in B for h */

	struct zs_class_info ci;
	REQUIRE(zs_class_info(p, zs_lookup_class_index(p, 136 + ZS_HANDLE_SIZE), &ci) == 0);
	size_t cap = ci.phys_size - ZS_HANDLE_SIZE;
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, sizeof(want), sg, need - 1), -EINVAL);
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, sizeof(want), sg, 0), -EINVAL);
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, sizeof(want), sg, -1), -EINVAL);
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, 0, sg, 4), -EINVAL);
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, cap + 1, sg, 4), -EINVAL);
	CHECK_EQ(zs_obj_read_sg_begin(p, h, cap + 1, sg), -EINVAL);
	if (checked) {
		CHECK_EQ(zs_obj_read_sgv_begin(p, a[SPAN - 1], 8, sg, 4), -EINVAL); /* freed */
		CHECK_EQ(zs_obj_read_sgv_begin(p, 12345, 8, sg, 4), -EINVAL);
		zs_obj_read_sg_end(p, 12345); /* ignored */
	}
	/* A's only object moves to B and A's 7 pages go: nothing held A. */
	CHECK_EQ(zs_compact(p), 7);
	CHECK_EQ(zs_get_total_pages(p), 7);
	int n = zs_obj_read_sgv_begin(p, h, sizeof(want), sg, 4);
	CHECK(n >= 1 && sg_equals(sg, n, want, sizeof(want)));
	if (n >= 1)
		zs_obj_read_sg_end(p, h);
	CHECK_EQ(zs_free(p, h), 0);
	for (int i = 10; i < N; i++)
		CHECK_EQ(zs_free(p, b[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/* The same for a multi-page object: one piece per page it touches, and no fewer. */
static void sgv_multipage(void)
{
	enum { P = 4096 };
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.checked = 1;
	cfg.max_object_size = 4 * P;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	static unsigned char want[3 * P + 100];
	for (size_t k = 0; k < sizeof(want); k++)
		want[k] = (unsigned char)(k * 13 + 1);
	unsigned long h = zs_malloc(p, sizeof(want));
	REQUIRE(!ZS_IS_ERR(h));
	CHECK_EQ(zs_obj_write(p, h, want, sizeof(want)), 0);
	struct zs_obj_piece sg[ZS_MAX_OBJECT_PAGES + 1];
	int need = zs_obj_read_sgv_begin(p, h, sizeof(want), sg, ZS_MAX_OBJECT_PAGES + 1);
	CHECK(need >= 4);
	if (need >= 1) {
		CHECK(sg_equals(sg, need, want, sizeof(want)));
		zs_obj_read_sg_end(p, h);
	}
	if (need >= 2)
		CHECK_EQ(zs_obj_read_sgv_begin(p, h, sizeof(want), sg, need - 1), -EINVAL);
	CHECK_EQ(zs_obj_read_sg_begin(p, h, sizeof(want), sg), -EINVAL);
	CHECK_EQ(zs_obj_read_sgv_begin(p, h, 4 * P + 1, sg, ZS_MAX_OBJECT_PAGES + 1), -EINVAL);
	/* The refusals left no reader: the object is still readable and freeable. */
	static unsigned char copy[4 * P];
	void *m = zs_obj_read_begin(p, h, sizeof(want), copy);
	CHECK(m && !memcmp(m, want, sizeof(want)));
	if (m)
		zs_obj_read_end(p, h, sizeof(want), m);
	CHECK_EQ(zs_free(p, h), 0);
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
	sgv_refusals(0);
	sgv_refusals(1);
	sgv_multipage();
	return tu_done();
}
