/*
 * Fitted zspages (zs_pool_config.fit_zspages, the application
 * profile): compaction leaves each class at most one partly used
 * zspage, of the fewest pages that hold its objects.  This commits what the
 * header promises and what docs/compare.md's density numbers rest on:
 *  - a sparse class ends with short zspages and exactly the predicted pages
 *    (full chains for the full zspages, ceil(rest x slot / page) for the
 *    rest), where the kernel profile keeps a whole chain;
 *  - every object reads back, the accounting is exact (zs_get_total_pages is
 *    the sum of the classes' pages_used, obj_allocated the sum of slots), and
 *    freeing everything returns every page, after the fitted zspage filled,
 *    emptied and was compacted again;
 *  - under random churn over every class, after each compaction each class
 *    copy keeps under a page of free slots (the bound the policy claims);
 *  - a reader holding an object of the partly used zspage makes compaction
 *    leave it alone (it never waits), and the next compaction fits it;
 *  - a class that grows between compactions does not keep its old fitted
 *    zspages (full, with worse tails than the chain's): after each
 *    compaction every class is chains plus at most one fitted zspage, and
 *    the pool is never larger than without fitting;
 *  - the knob's range (0..1) and its absence from the kernel profile.
 * Seeded (printed); ZS_SEED reruns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "must.h"

#define P 4096

static struct zs_pool *make(int fit, unsigned shards)
{
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.class_shards = shards; /* 1: one copy, so a thread's CPU cannot move the numbers */
	c.fit_zspages = fit;
	c.checked = 1;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static void pattern(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((seed * 0x9e3779b97f4a7c15ULL) >> (8 * (i % 8))) ^ (unsigned char)i;
}

static int read_ok(struct zs_pool *p, unsigned long h, size_t len, uint64_t seed)
{
	unsigned char exp[P], copy[P];
	pattern(exp, len, seed);
	void *m = zs_obj_read_begin(p, h, len, copy);
	if (!m)
		return 0;
	int ok = !memcmp(m, exp, len);
	zs_obj_read_end(p, h, len, m);
	return ok;
}

static unsigned long alloc_write(struct zs_pool *p, size_t len, uint64_t seed)
{
	unsigned char b[P];
	unsigned long h = zs_malloc(p, len);
	REQUIRE(!ZS_IS_ERR(h));
	pattern(b, len, seed);
	REQUIRE(zs_obj_write(p, h, b, len) == 0);
	return h;
}

/* Sum of pages_used and of obj_allocated over the physical classes. */
static unsigned long class_pages(struct zs_pool *p, unsigned long *slots)
{
	unsigned long n = 0, s = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(p); i++)
		if (!zs_class_stats(p, i, &st, sizeof(st))) {
			n += st.pages_used;
			s += st.obj_allocated;
		}
	if (slots)
		*slots = s;
	return n;
}

/* A class of chain >= 4 holding several objects per zspage: where fitting shows. */
static int pick_class(struct zs_pool *p, struct zs_class_info *ci)
{
	for (size_t len = 400; len < 3000; len += 8) {
		int i = zs_lookup_class_index(p, len + ZS_HANDLE_SIZE);
		if (zs_class_info(p, i, ci))
			continue;
		if (ci->pages_per_zspage >= 4 && ci->objs_per_zspage >= 8)
			return i;
	}
	return -1;
}

/* One sparse class: the predicted pages, short zspages, read-back, exact accounting. */
static void sparse_class(uint64_t seed)
{
	struct zs_pool *pf = make(1, 1), *pk = make(0, 1);
	struct zs_class_info ci;
	int idx = pick_class(pf, &ci);
	REQUIRE(idx >= 0);
	unsigned chain = ci.pages_per_zspage, objs = ci.objs_per_zspage;
	size_t len = ci.phys_size - ZS_HANDLE_SIZE; /* exactly one slot */
	enum { Z = 4 };
	unsigned n = Z * objs;
	unsigned long *hf = calloc(n, sizeof(*hf)), *hk = calloc(n, sizeof(*hk));
	char *live = calloc(n, 1), *kept = calloc(n, 1);
	REQUIRE(hf && hk && live && kept);
	for (unsigned i = 0; i < n; i++) {
		hf[i] = alloc_write(pf, len, seed + i);
		hk[i] = alloc_write(pk, len, seed + i);
		live[i] = 1;
	}
	/* Keep objs + r objects, r = 2, at random places: every zspage is holed. */
	unsigned r = 2, keep = objs + r, left = n;
	uint64_t s = seed;
	while (left > keep) {
		unsigned i = (unsigned)(tu_rand(&s) % n);
		if (!live[i])
			continue;
		CHECK_EQ(zs_free(pf, hf[i]), 0);
		CHECK_EQ(zs_free(pk, hk[i]), 0);
		live[i] = 0;
		left--;
	}
	zs_compact(pf);
	zs_compact(pk);

	/* One full chain, and the rest in ceil(r x slot / page) pages. */
	unsigned short_pages = (unsigned)((r * ci.phys_size + P - 1) / P);
	unsigned short_objs = short_pages * P / ci.phys_size;
	REQUIRE(short_pages < chain);
	struct zs_class_stats st;
	REQUIRE(zs_class_stats(pf, idx, &st, sizeof(st)) == 0);
	CHECK_EQ(st.pages_used, chain + short_pages);
	CHECK_EQ(st.obj_allocated, objs + short_objs);
	CHECK_EQ(st.obj_used, keep);
	CHECK_EQ(st.fullness[11] + (short_objs > r), 2); /* the full chain, and the short one */
	unsigned long slots;
	CHECK_EQ(zs_get_total_pages(pf), class_pages(pf, &slots));
	CHECK_EQ(slots, st.obj_allocated);
	/* The kernel profile keeps two whole chains for the same objects. */
	struct zs_class_stats sk;
	REQUIRE(zs_class_stats(pk, idx, &sk, sizeof(sk)) == 0);
	CHECK_EQ(sk.pages_used, 2 * chain);
	CHECK_EQ(zs_get_total_pages(pk), 2 * chain);
	printf("class %d (slot %u, chain %u, %u objs): %u objects in %lu pages fitted, %lu kernel\n",
	       idx, ci.phys_size, chain, objs, keep, st.pages_used, sk.pages_used);

	int bad = 0;
	for (unsigned i = 0; i < n; i++)
		if (live[i])
			bad += !read_ok(pf, hf[i], len, seed + i) + !read_ok(pk, hk[i], len, seed + i);
	CHECK_EQ(bad, 0);
	memcpy(kept, live, n);

	/* Grow again: the fitted zspage fills first, then full chains come back. */
	for (unsigned i = 0; i < n; i++)
		if (!live[i]) {
			hf[i] = alloc_write(pf, len, seed + 7 * i);
			live[i] = 2;
		}
	REQUIRE(zs_class_stats(pf, idx, &st, sizeof(st)) == 0);
	CHECK_EQ(st.obj_used, n);
	CHECK_EQ(st.pages_used, zs_get_total_pages(pf));
	CHECK(st.obj_allocated >= n && st.obj_allocated - n < objs);
	/* Empty the short zspage's neighbours and compact again: still exact. */
	for (unsigned i = 0; i < n; i += 3) {
		CHECK_EQ(zs_free(pf, hf[i]), 0);
		live[i] = 0;
	}
	zs_compact(pf);
	CHECK_EQ(zs_get_total_pages(pf), class_pages(pf, NULL));
	REQUIRE(zs_class_stats(pf, idx, &st, sizeof(st)) == 0);
	CHECK((st.obj_allocated - st.obj_used) * ci.phys_size < P);
	bad = 0;
	for (unsigned i = 0; i < n; i++)
		if (live[i])
			bad += !read_ok(pf, hf[i], len, live[i] == 2 ? seed + 7 * i : seed + i);
	CHECK_EQ(bad, 0);

	/* Free everything: no page left, in either pool. */
	for (unsigned i = 0; i < n; i++) {
		if (live[i])
			CHECK_EQ(zs_free(pf, hf[i]), 0);
		if (kept[i])
			CHECK_EQ(zs_free(pk, hk[i]), 0);
	}
	CHECK_EQ(zs_get_total_pages(pf), 0);
	CHECK_EQ(class_pages(pf, NULL), 0);
	CHECK_EQ(zs_get_total_pages(pk), 0);
	free(hf);
	free(hk);
	free(live);
	free(kept);
	zs_destroy_pool(pf);
	zs_destroy_pool(pk);
}

/* Every class, churn and compaction: under a page of free slots per class copy, data intact. */
static void churn(uint64_t seed, unsigned shards)
{
	struct zs_pool *p = make(1, shards);
	unsigned sh = zs_pool_class_shards(p);
	enum { N = 12000 };
	unsigned long *h = calloc(N, sizeof(*h));
	size_t *len = calloc(N, sizeof(*len));
	uint64_t *cs = calloc(N, sizeof(*cs));
	REQUIRE(h && len && cs);
	uint64_t s = seed;
	for (int i = 0; i < N; i++) {
		len[i] = 1 + tu_rand(&s) % P;
		cs[i] = tu_rand(&s);
		h[i] = alloc_write(p, len[i], cs[i]);
	}
	int bad = 0;
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			uint64_t r = tu_rand(&s) % 10;
			if (r >= 5)
				continue;
			if (h[i])
				CHECK_EQ(zs_free(p, h[i]), 0);
			h[i] = 0;
			if (r < 2) { /* some come back, smaller: classes go sparse */
				len[i] = 1 + tu_rand(&s) % (P / (round + 1));
				cs[i] = tu_rand(&s);
				h[i] = alloc_write(p, len[i], cs[i]);
			}
		}
		zs_compact(p);
		CHECK_EQ(zs_get_total_pages(p), class_pages(p, NULL));
		int over = 0;
		struct zs_class_stats st;
		for (int c = 0; c < zs_class_count(p); c++) {
			if (zs_class_stats(p, c, &st, sizeof(st)))
				continue;
			/* Each copy keeps under a page of free slots (a one-page class always did). */
			if ((st.obj_allocated - st.obj_used) * st.size >= (unsigned long)sh * P)
				over++;
			/* And a class of longer chains at most one partly used zspage per copy. */
			if (st.pages_per_zspage > 1 &&
			    st.fullness[1] + st.fullness[2] + st.fullness[3] + st.fullness[4] +
				    st.fullness[5] + st.fullness[6] + st.fullness[7] +
				    st.fullness[8] + st.fullness[9] + st.fullness[10] > sh)
				over++;
		}
		CHECK_EQ(over, 0);
		for (int i = 0; i < N; i++)
			if (h[i])
				bad += !read_ok(p, h[i], len[i], cs[i]);
	}
	CHECK_EQ(bad, 0);
	for (int i = 0; i < N; i++)
		if (h[i])
			CHECK_EQ(zs_free(p, h[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(class_pages(p, NULL), 0);
	free(h);
	free(len);
	free(cs);
	zs_destroy_pool(p);
}

/*
 * With at most one fitted zspage of m < objs slots, a class's slots are
 * a x objs + m and its pages a x chain + ceil(m x slot / page).
 */
static int classes_chains_plus_one(struct zs_pool *p)
{
	int bad = 0;
	struct zs_class_stats st;
	for (int c = 0; c < zs_class_count(p); c++) {
		if (zs_class_stats(p, c, &st, sizeof(st)) || !st.obj_allocated)
			continue;
		unsigned long a = st.obj_allocated / st.objs_per_zspage;
		unsigned long m = st.obj_allocated % st.objs_per_zspage;
		unsigned long want = a * st.pages_per_zspage + (m * st.size + P - 1) / P;
		if (st.pages_used != want) {
			fprintf(stderr, "class %d: %lu pages, %lu slots: not chains + one fitted\n", c,
				st.pages_used, st.obj_allocated);
			bad++;
		}
	}
	return bad;
}

/* Grow a few objects at a time, compacting after each step, fitted and not. */
static void growth(uint64_t seed)
{
	struct zs_pool *pf = make(1, 1), *pn = make(0, 1);
	enum { STEPS = 300, PER = 20 };
	unsigned long *h = calloc(STEPS * PER, sizeof(*h));
	size_t *len = calloc(STEPS * PER, sizeof(*len));
	REQUIRE(h && len);
	uint64_t s = seed;
	int bad = 0, shape = 0, more = 0;
	for (int k = 0, n = 0; k < STEPS; k++) {
		for (int i = 0; i < PER; i++, n++) {
			len[n] = 200 + tu_rand(&s) % 3000;
			h[n] = alloc_write(pf, len[n], seed + (uint64_t)n);
			REQUIRE(!ZS_IS_ERR(zs_malloc(pn, len[n])));
		}
		zs_compact(pf);
		zs_compact(pn);
		shape += classes_chains_plus_one(pf);
		more += zs_get_total_pages(pf) > zs_get_total_pages(pn);
	}
	CHECK_EQ(shape, 0);
	CHECK_EQ(more, 0);
	CHECK_EQ(zs_get_total_pages(pf), class_pages(pf, NULL));
	size_t live = 0;
	for (int n = 0; n < STEPS * PER; n++)
		live += len[n];
	unsigned long fp = zs_get_total_pages(pf), np = zs_get_total_pages(pn);
	printf("grown %d x %d objects, compacted each step: %lu pages fitted (%.1f%% live), %lu "
	       "not (%.1f%%)\n",
	       STEPS, PER, fp, 100.0 * (double)live / (double)(fp * P), np,
	       100.0 * (double)live / (double)(np * P));
	for (int n = 0; n < STEPS * PER; n++)
		bad += !read_ok(pf, h[n], len[n], seed + (uint64_t)n);
	CHECK_EQ(bad, 0);
	for (int n = 0; n < STEPS * PER; n++)
		CHECK_EQ(zs_free(pf, h[n]), 0);
	CHECK_EQ(zs_get_total_pages(pf), 0);
	free(h);
	free(len);
	zs_destroy_pool(pf);
	zs_destroy_pool(pn);
}

/* A pinned object's zspage is not moved; once released, the next compaction fits it. */
static void pinned(uint64_t seed)
{
	struct zs_pool *p = make(1, 1);
	struct zs_class_info ci;
	int idx = pick_class(p, &ci);
	REQUIRE(idx >= 0);
	size_t len = ci.phys_size - ZS_HANDLE_SIZE;
	unsigned n = ci.objs_per_zspage;
	unsigned long *h = calloc(n, sizeof(*h));
	REQUIRE(h);
	for (unsigned i = 0; i < n; i++)
		h[i] = alloc_write(p, len, seed + i);
	for (unsigned i = 1; i < n; i++)
		CHECK_EQ(zs_free(p, h[i]), 0);
	unsigned char copy[P];
	void *m = zs_obj_read_begin(p, h[0], len, copy);
	REQUIRE(m);
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), ci.pages_per_zspage);
	zs_obj_read_end(p, h[0], len, m);
	zs_compact(p);
	unsigned fitted = (unsigned)((ci.phys_size + P - 1) / P);
	CHECK_EQ(zs_get_total_pages(p), fitted);
	CHECK(read_ok(p, h[0], len, seed));
	CHECK_EQ(zs_free(p, h[0]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	free(h);
	zs_destroy_pool(p);
}

static void config(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	CHECK_EQ(c.fit_zspages, 0);
	c.fit_zspages = 2;
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	c.fit_zspages = -1;
	errno = 0;
	CHECK_POOL_REFUSED(&c, "zs_pool_config");
	zs_pool_config_init_app(&c);
	CHECK_EQ(c.fit_zspages, 1);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_fit");
	config();
	sparse_class(seed);
	churn(seed + 1, 1);
	churn(seed + 2, ZS_CLASS_SHARDS_AUTO);
	pinned(seed + 3);
	growth(seed + 4);
	return tu_done();
}
