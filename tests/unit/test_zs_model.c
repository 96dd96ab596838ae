/*
 * Seeded model-based test of zsmalloc: a random mix of alloc (sizes across
 * every class, huge included), free, rewrite, read-verify and compact runs
 * against a shadow table of (handle, size, content seed), for page sizes
 * 4K/16K/64K, every free mode and both chain policies (checked mode on in
 * half the runs).  After every compaction and at the end every live object
 * is verified, and the allocator's accounting is checked against the model:
 * total pages == sum of per-class pages_used, per-class obj_used == the
 * model's count for that class, a compaction frees exactly the pages the
 * classes reported freeable, and a drained pool holds 0 pages.
 * Why: unit tests pin single behaviours; this finds the interactions
 * (compaction moving objects that later get rewritten, freed, re-read).
 * Rerun a failure with ZS_SEED=<printed seed>.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"

#include <errno.h>
#include <string.h>
#include "must.h"

#define LIVE 1024

/* Sanitizer builds run a third of the operations (same coverage per config, fewer steps). */
#include "sanitizer.h"
#define OPS_DIV (TU_SANITIZED ? 3 : 1)

struct shadow {
	unsigned long h;
	size_t size;
	uint64_t cseed;
	uint64_t pseed; /* a prefix rewrite's pattern */
	size_t split;   /* bytes [0, split) hold pseed's pattern */
	int cls;
};

static struct shadow tab[LIVE];
static unsigned char wbuf[65536], rbuf[65536];
static long class_live[8192];

/* Content: word i of a pattern is a hash of (seed, i); fast enough to verify every object often. */
static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 31;
		memcpy(b + i, &z, n - i < 8 ? n - i : 8);
	}
}

static unsigned char expect[65536];

/* Expected bytes of an object: its seed's pattern, the first `split` bytes from pseed. */
static void expected(const struct shadow *s)
{
	fill(expect, s->size, s->cseed);
	if (s->split)
		fill(expect, s->split, s->pseed);
}

/* 0 if equal, else 1 + the first differing byte. */
static size_t mismatch(const unsigned char *b, const struct shadow *s)
{
	expected(s);
	if (!memcmp(b, expect, s->size))
		return 0;
	for (size_t i = 0; i < s->size; i++)
		if (b[i] != expect[i])
			return i + 1;
	return 0;
}

static const char *cfg_name;
static uint64_t op_no;

static int verify_one(struct zs_pool *p, const struct shadow *s, int use_map)
{
	if (use_map) {
		const unsigned char *m = zs_map_object(p, s->h, ZS_MM_RO);
		if (!m) {
			fprintf(stderr, "%s op %llu: map NULL size %zu\n", cfg_name,
				(unsigned long long)op_no, s->size);
			return 0;
		}
		size_t bad = mismatch(m, s);
		zs_unmap_object(p, s->h);
		if (bad)
			fprintf(stderr, "%s op %llu: map size %zu differs at byte %zu\n", cfg_name,
				(unsigned long long)op_no, s->size, bad - 1);
		return !bad;
	}
	void *m = zs_obj_read_begin(p, s->h, s->size, rbuf);
	if (!m) {
		fprintf(stderr, "%s op %llu: read_begin NULL size %zu\n", cfg_name,
			(unsigned long long)op_no, s->size);
		return 0;
	}
	size_t bad = mismatch(m, s);
	zs_obj_read_end(p, s->h, s->size, m);
	if (bad)
		fprintf(stderr, "%s op %llu: size %zu class %d differs at byte %zu\n", cfg_name,
			(unsigned long long)op_no, s->size, s->cls, bad - 1);
	return !bad;
}

static void verify_all(struct zs_pool *p)
{
	int bad = 0;
	for (int i = 0; i < LIVE; i++)
		if (tab[i].h && !verify_one(p, &tab[i], 0))
			bad++;
	CHECK_EQ(bad, 0);
}

/* Accounting: pages and per-class object counts agree with the model. */
static void verify_accounting(struct zs_pool *p, long live)
{
	unsigned long pages = 0, used = 0;
	int bad_cls = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(p); i++) {
		if (zs_class_stats(p, i, &st, sizeof(st)))
			continue;
		pages += st.pages_used;
		used += st.obj_used;
		if ((long)st.obj_used != class_live[i])
			bad_cls++;
		unsigned long z = 0;
		for (int g = 0; g < ZS_NR_FULLNESS_GROUPS; g++)
			z += st.fullness[g];
		if (z * st.objs_per_zspage != st.obj_allocated || st.obj_used > st.obj_allocated)
			bad_cls++;
	}
	CHECK_EQ(zs_get_total_pages(p), pages);
	CHECK_EQ(used, live);
	CHECK_EQ(zs_pool_objects(p), live);
	CHECK_EQ(bad_cls, 0);
}

static unsigned long total_freeable(struct zs_pool *p)
{
	unsigned long f = 0;
	struct zs_class_stats st;
	for (int i = 0; i < zs_class_count(p); i++)
		if (!zs_class_stats(p, i, &st, sizeof(st)))
			f += st.freeable;
	return f;
}

static size_t pick_size(uint64_t r, size_t ps, size_t huge)
{
	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		return 1 + (r >> 8) % 512; /* small classes, the dense part of the table */
	case 3:
	case 4:
	case 5:
		return 1 + (r >> 8) % ps; /* any class */
	case 6:
		return huge - 64 + (r >> 8) % 128; /* around the huge threshold */
	default:
		return (r >> 8) % 2 ? ps : ps - (r >> 9) % 64; /* huge */
	}
}

static void run(size_t ps, enum zs_free_mode fm, enum zs_chain_policy pol, int checked,
		uint64_t seed, int ops)
{
	char name[96];
	snprintf(name, sizeof(name), "ps %zu mode %d policy %d checked %d", ps, fm, pol, checked);
	cfg_name = name;
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = ps;
	c.free_mode = fm;
	c.chain_policy = pol;
	c.checked = checked;
	c.deferred_worker = -1;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	REQUIRE(zs_class_count(p) <= 8192);
	memset(tab, 0, sizeof(tab));
	memset(class_live, 0, sizeof(class_live));
	size_t huge = zs_huge_class_size(p);
	long live = 0;
	unsigned long compacted = 0;
	int read_bad = 0, write_bad = 0, free_bad = 0, compact_bad = 0;
	uint64_t s = seed;

	for (op_no = 0; op_no < (uint64_t)ops; op_no++) {
		uint64_t r = tu_rand(&s);
		struct shadow *e = &tab[r % LIVE];
		unsigned kind = (unsigned)(r >> 56);
		r = tu_rand(&s);
		if (kind < 1) {
			/* compact: frees exactly what the classes said was freeable */
			unsigned long f = total_freeable(p);
			unsigned long got = zs_compact(p);
			compacted += got;
			if (got != f) {
				fprintf(stderr, "%s op %llu: compact freed %lu, freeable was %lu\n",
					name, (unsigned long long)op_no, got, f);
				compact_bad++;
			}
			if (total_freeable(p) != 0)
				compact_bad++;
			verify_all(p);
			verify_accounting(p, live);
		} else if (!e->h) {
			size_t sz = pick_size(r, ps, huge);
			unsigned long h = zs_malloc(p, sz);
			REQUIRE(!ZS_IS_ERR(h) && h);
			e->h = h;
			e->size = sz;
			e->cseed = tu_rand(&s);
			e->split = 0;
			e->cls = zs_lookup_class_index(p, sz + ZS_HANDLE_SIZE);
			class_live[e->cls]++;
			live++;
			fill(wbuf, sz, e->cseed);
			write_bad += zs_obj_write(p, h, wbuf, sz) != 0;
		} else if (kind < 100) {
			if (zs_free(p, e->h) != 0)
				free_bad++;
			if (checked && zs_free(p, e->h) != -EINVAL)
				free_bad++;
			class_live[e->cls]--;
			live--;
			e->h = 0;
		} else if (kind < 150) {
			/* rewrite: the whole object, or only a prefix (the rest must stay) */
			uint64_t ns = tu_rand(&s);
			if (r % 4 == 0 && !e->split && e->size >= 2) {
				e->split = 1 + (size_t)(r >> 8) % (e->size - 1);
				e->pseed = ns;
				fill(wbuf, e->split, ns);
				write_bad += zs_obj_write(p, e->h, wbuf, e->split) != 0;
			} else {
				e->cseed = ns;
				e->split = 0;
				fill(wbuf, e->size, ns);
				write_bad += zs_obj_write(p, e->h, wbuf, e->size) != 0;
			}
		} else {
			read_bad += !verify_one(p, e, r % 8 == 0);
		}
	}
	verify_all(p);
	verify_accounting(p, live);
	struct zs_pool_stats pst;
	zs_pool_stats(p, &pst, sizeof(pst));
	CHECK_EQ(pst.pages_compacted, compacted);
	CHECK_EQ(read_bad, 0);
	CHECK_EQ(write_bad, 0);
	CHECK_EQ(free_bad, 0);
	CHECK_EQ(compact_bad, 0);

	/* Drain in random order with compactions in between. */
	for (int i = 0; i < LIVE; i++) {
		int j = (int)(tu_rand(&s) % LIVE);
		struct shadow t = tab[i];
		tab[i] = tab[j];
		tab[j] = t;
	}
	for (int i = 0; i < LIVE; i++) {
		if (!tab[i].h)
			continue;
		CHECK_EQ(zs_free(p, tab[i].h), 0);
		class_live[tab[i].cls]--;
		live--;
		tab[i].h = 0;
		if (i % 256 == 0) {
			zs_compact(p);
			verify_all(p);
			verify_accounting(p, live);
		}
	}
	zs_compact(p);
	verify_accounting(p, 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_model");
	static const size_t ps[] = { 4096, 16384, 65536 };
	static const int ops[] = { 40000, 20000, 8000 };
	int n = 0;
	for (int i = 0; i < 3; i++)
		for (int fm = 0; fm <= 2; fm++)
			for (int pol = 0; pol <= 1; pol++) {
				int before = tu_fail;
				run(ps[i], (enum zs_free_mode)fm, (enum zs_chain_policy)pol, n % 2,
				    seed + (uint64_t)n, ops[i] / OPS_DIV);
				if (tu_fail != before)
					fprintf(stderr, "config failed: ps %zu mode %d policy %d seed %llu\n",
						ps[i], fm, pol, (unsigned long long)(seed + n));
				n++;
			}
	return tu_done();
}
