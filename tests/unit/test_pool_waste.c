/*
 * The waste breakdown `zs compare` prints (tools/lib/waste.c): its five parts
 * must add up to pool memory - live bytes, and each part must mean what its
 * name says, on both profiles, after fill, churn and compaction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "waste.h"
#include "zs/zsmalloc.h"
#include "must.h"

static long long sum_parts(const struct zs_waste *w)
{
	return (long long)w->rounding + (long long)w->tails + (long long)w->free_slots +
	       (long long)w->handles + w->other;
}

/* Parts add up to pool - live exactly, and nothing is unexplained beyond a page. */
static void check_sum(struct zs_pool *pool, size_t live, const char *what)
{
	struct zs_waste w;
	zs_waste_measure(pool, live, &w);
	size_t ps = zs_pool_page_size(pool);
	CHECK_EQ(w.pool_bytes, zs_get_total_pages(pool) * ps);
	CHECK_EQ(sum_parts(&w), (long long)w.pool_bytes - (long long)live);
	CHECK(w.other > -(long long)ps && w.other < (long long)ps);
	if (w.other <= -(long long)ps || w.other >= (long long)ps)
		fprintf(stderr, "%s: other %lld\n", what, w.other);
}

/* One object of a slot's exact payload: no rounding, the class's tail, its other slots free. */
static void exact_fit(int app)
{
	struct zs_pool_config cfg;
	if (app)
		zs_pool_config_init_app(&cfg);
	else
		zs_pool_config_init(&cfg);
	struct zs_pool *pool = must_pool_create(&cfg);
	REQUIRE(pool);
	size_t ps = zs_pool_page_size(pool);
	int ci = zs_lookup_class_index(pool, 200 + ZS_HANDLE_SIZE);
	struct zs_class_info info;
	REQUIRE(zs_class_info(pool, ci, &info) == 0);
	size_t payload = info.phys_size - ZS_HANDLE_SIZE;
	unsigned long h = zs_malloc(pool, payload);
	REQUIRE(!ZS_IS_ERR(h));
	struct zs_waste w;
	zs_waste_measure(pool, payload, &w);
	CHECK_EQ(w.rounding, 0);
	CHECK_EQ(w.handles, ZS_HANDLE_SIZE);
	CHECK_EQ(w.tails, info.tail_waste);
	CHECK_EQ(w.free_slots, (size_t)(info.objs_per_zspage - 1) * info.phys_size);
	CHECK_EQ(w.other, 0);
	CHECK_EQ(w.partial_zspages, info.objs_per_zspage > 1 ? 1 : 0);
	CHECK_EQ(w.pool_bytes, (size_t)info.pages_per_zspage * ps);
	/* One byte less: one byte of rounding, nothing else moves. */
	zs_waste_measure(pool, payload - 1, &w);
	CHECK_EQ(w.rounding, 1);
	zs_free(pool, h);
	zs_waste_measure(pool, 0, &w);
	CHECK_EQ(w.pool_bytes, 0);
	CHECK_EQ(w.partial_zspages, 0);
	CHECK_EQ(sum_parts(&w), 0);
	zs_destroy_pool(pool);
}

/* Random sizes (huge ones included), churn, compaction: the sum holds at every step. */
static void churn(int app, size_t ps, uint64_t seed)
{
	struct zs_pool_config cfg;
	if (app)
		zs_pool_config_init_app(&cfg);
	else
		zs_pool_config_init(&cfg);
	cfg.page_size = ps;
	struct zs_pool *pool = must_pool_create(&cfg);
	REQUIRE(pool);
	enum { N = 20000 };
	unsigned long *h = calloc(N, sizeof(*h));
	size_t *len = calloc(N, sizeof(*len));
	REQUIRE(h && len);
	uint64_t s = seed;
	size_t live = 0;
	for (int i = 0; i < N; i++) {
		len[i] = 1 + tu_rand(&s) % ps;
		h[i] = zs_malloc(pool, len[i]);
		REQUIRE(!ZS_IS_ERR(h[i]));
		live += len[i];
	}
	check_sum(pool, live, "fill");
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < N; i++) {
			if (tu_rand(&s) % 10 >= 4)
				continue;
			zs_free(pool, h[i]);
			live -= len[i];
			len[i] = 1 + tu_rand(&s) % (ps / 2);
			h[i] = zs_malloc(pool, len[i]);
			REQUIRE(!ZS_IS_ERR(h[i]));
			live += len[i];
		}
		for (int i = 0; i < N; i += 3) {
			if (!h[i])
				continue;
			zs_free(pool, h[i]);
			live -= len[i];
			h[i] = 0;
			len[i] = 0;
		}
		check_sum(pool, live, "churn");
		zs_compact(pool);
		check_sum(pool, live, "compact");
		/* Compaction leaves about one zspage's worth of free slots per class and copy. */
		struct zs_waste w;
		zs_waste_measure(pool, live, &w);
		CHECK(w.free_slots < w.partial_zspages * ZS_MAX_CHAIN * ps);
		CHECK(w.free_slots < (size_t)zs_class_count(pool) * zs_pool_class_shards(pool) *
					     ZS_MAX_CHAIN * ps);
	}
	for (int i = 0; i < N; i++)
		zs_free(pool, h[i]);
	check_sum(pool, 0, "empty");
	free(h);
	free(len);
	zs_destroy_pool(pool);
}

int main(void)
{
	uint64_t seed = tu_seed("test_pool_waste");
	for (int app = 0; app <= 1; app++) {
		exact_fit(app);
		churn(app, 4096, seed);
		churn(app, 16384, seed + 1);
	}
	return tu_done();
}
