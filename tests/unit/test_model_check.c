/*
 * Model check: a seeded stream of random operations against a shadow model,
 * spread over random pool configurations until ZS_MODEL_OPS operations have
 * run (default 10^6).  Each segment draws a config over every axis: zsmalloc
 * (page size 4K..64K, chain length 1..16 and policy, class delta, free mode,
 * checked mode, deferred free with or without its worker and queue size,
 * max_pages, failure injection, and the application profile's class copies,
 * fitted zspages and objects of up to 4 pages) or zblock (page size, checked, huge, limit,
 * injection), called directly or through the backend interface; then runs
 * alloc / free / deferred free / rewrite (whole or prefix) / read (new API
 * or legacy map, RO and RW) / compact / flush / misuse, with every object's
 * contents verified byte for byte on read and before free, and accounting
 * (pages, objects, freeable) checked at every compaction.  A segment ends
 * with free-all + compact and must leave 0 pages.
 * Why: test_zs_model covers fixed configs; this one crosses the axes (a
 * failure only under, say, 32K pages + chain 3 + deferred + limit).
 *
 *   ZS_MODEL_OPS=N     operations (default 1000000)
 *   ZS_MODEL_SEED=S    seed (or ZS_SEED; default: time), printed for reruns
 *   By hand, 10^8:     ZS_MODEL_OPS=100000000 build-rel/test_model_check
 */
#include "alloc_ut.h"
#include "testutil.h"
#include "zs/backend.h"
#include "zs/zblock.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

#include <errno.h>
#include <string.h>

#define MAXLIVE 2048

static const char *const kind_name[] = { "zsmalloc", "zblock", "zsmalloc/backend",
					 "zblock/backend" };

struct obj {
	unsigned long h;
	uint32_t size;
	uint32_t split;  /* bytes [0, split) hold pseed's pattern, the rest cseed's */
	uint64_t cseed, pseed;
};

struct seg {
	struct ut_alloc a;
	int checked, deferred, worker, injecting, zb_huge;
	size_t ps, max_size, max_pages, huge;
	struct zs_pool_config zc;
	int live_cap;
	char name[256];
};

static struct obj tab[MAXLIVE];
/* The largest object a draw allows: 4 pages of 64 KiB (setup, max_object_size). */
#define MAXOBJ ((size_t)4 * 65536)
static unsigned char wbuf[MAXOBJ + 64], rbuf[MAXOBJ + 64], expect[MAXOBJ + 64];
static uint64_t op_no;
static int failures;

/* totals for the closing summary */
static uint64_t n_ops, n_segs, n_kind[4], n_ps[17], n_alloc, n_free, n_deferred, n_read, n_map,
	n_write, n_compact, n_enomem, n_enomem_flushed, n_misuse, n_bytes_verified;

#define FAIL(s, ...)                                                                  \
	do {                                                                          \
		failures++;                                                           \
		tu_fail++;                                                            \
		fprintf(stderr, "model_check: %s: op %llu: ", (s)->name,              \
			(unsigned long long)op_no);                                   \
		fprintf(stderr, __VA_ARGS__);                                         \
		fputc('\n', stderr);                                                  \
	} while (0)

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 29;
		memcpy(b + i, &z, 8);
	}
	if (i < n) {
		uint64_t z = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ULL;
		z ^= z >> 29;
		memcpy(b + i, &z, n - i);
	}
}

static const unsigned char *expected(const struct obj *o)
{
	fill(expect, o->size, o->cseed);
	if (o->split)
		fill(expect, o->split, o->pseed);
	return expect;
}

/* ---- checks ---- */

static int verify(struct seg *s, const struct obj *o, size_t len, int use_map)
{
	const unsigned char *exp = expected(o);
	int bad;
	if (use_map) {
		unsigned char *m = zs_map_object(s->a.zp, o->h, ZS_MM_RO);
		if (!m) {
			FAIL(s, "map of a live object (%u bytes) NULL", o->size);
			return 0;
		}
		bad = memcmp(m, exp, len);
		zs_unmap_object(s->a.zp, o->h);
	} else {
		void *m = ut_read_begin(&s->a, o->h, len, rbuf);
		if (!m) {
			FAIL(s, "read_begin of a live object (%u bytes, len %zu) NULL", o->size, len);
			return 0;
		}
		bad = memcmp(m, exp, len);
		ut_read_end(&s->a, o->h, len, m);
	}
	if (bad) {
		size_t at = 0;
		const unsigned char *m = ut_read_begin(&s->a, o->h, len, rbuf);
		while (m && at < len && m[at] == exp[at])
			at++;
		if (m)
			ut_read_end(&s->a, o->h, len, (void *)m);
		FAIL(s, "object of %u bytes differs at byte %zu (split %u)", o->size, at, o->split);
		return 0;
	}
	n_bytes_verified += len;
	return 1;
}

static void verify_all(struct seg *s)
{
	for (int i = 0; i < s->live_cap; i++)
		if (tab[i].h)
			verify(s, &tab[i], tab[i].size, 0);
}

static long model_live(struct seg *s)
{
	long n = 0;
	for (int i = 0; i < s->live_cap; i++)
		n += tab[i].h != 0;
	return n;
}

/* Pages, objects and (zsmalloc) freeable agree with the classes and the model. */
static void check_accounting(struct seg *s)
{
	long live = model_live(s), big = 0;
	unsigned long pages = 0, used = 0;
	for (int i = 0; i < s->live_cap; i++)
		big += tab[i].h && tab[i].size > s->ps;
	if (s->a.zp) {
		struct zs_class_stats st;
		for (int i = 0; i < zs_class_count(s->a.zp); i++) {
			if (zs_class_stats(s->a.zp, i, &st, sizeof(st)))
				continue;
			pages += st.pages_used;
			used += st.obj_used;
			unsigned long z = 0;
			for (int g = 0; g < ZS_NR_FULLNESS_GROUPS; g++)
				z += st.fullness[g];
			/* Fitted zspages (fit_zspages) hold from one slot up to the chain's. */
			int fits = s->zc.fit_zspages ? st.obj_allocated <= z * st.objs_per_zspage &&
							       st.obj_allocated >= z &&
							       st.pages_used <= z * st.pages_per_zspage
						     : z * st.objs_per_zspage == st.obj_allocated;
			if (!fits || st.obj_used > st.obj_allocated)
				FAIL(s, "class %d: %lu zspages x %u objects != %lu allocated (%lu used)", i,
				     z, st.objs_per_zspage, st.obj_allocated, st.obj_used);
		}
	} else if (s->a.zb) {
		struct zblock_class_stats st;
		for (int i = 0; i < zblock_class_count(s->a.zb); i++) {
			if (zblock_class_stats(s->a.zb, i, &st, sizeof(st)))
				continue;
			pages += st.pages;
			used += st.objects;
			if (st.objects > st.blocks * st.slots_per_block)
				FAIL(s, "zblock class %d: %lu objects in %lu blocks", i, st.objects,
				     st.blocks);
		}
	}
	else
		pages = ut_pages(&s->a), used = ut_objects(&s->a); /* zblock through the backend: no classes */
	if (pages != ut_pages(&s->a))
		FAIL(s, "class pages %lu != pool pages %lu", pages, ut_pages(&s->a));
	/* An object past a page whose last page was packed counts in two classes (its tail). */
	if ((long)used < live || (long)used > live + big || (long)ut_objects(&s->a) != live)
		FAIL(s, "objects: classes %lu, pool %lu, model %ld (%ld past a page)", used,
		     ut_objects(&s->a), live, big);
	if (s->max_pages && ut_pages(&s->a) > s->max_pages)
		FAIL(s, "%lu pages over the limit %zu", ut_pages(&s->a), s->max_pages);
	if (s->a.be) {
		struct zs_backend_stats bs;
		zs_backend_stats(s->a.be, &bs, sizeof(bs));
		if ((long)bs.objects != live || bs.pages != pages)
			FAIL(s, "backend stats: %lu objects, %lu pages", bs.objects, bs.pages);
	}
}

static void do_compact(struct seg *s)
{
	ut_flush(&s->a);
	unsigned long freeable = 0, got, pages_before = ut_pages(&s->a);
	if (s->a.zp) {
		struct zs_class_stats st;
		for (int i = 0; i < zs_class_count(s->a.zp); i++)
			if (!zs_class_stats(s->a.zp, i, &st, sizeof(st)))
				freeable += st.freeable;
	}
	got = s->a.kind == UT_ZS ? zs_compact(s->a.zp) : s->a.kind == UT_ZBLOCK ? zblock_compact(s->a.zb)
									 : zs_backend_compact(s->a.be);
	if (s->a.zp && s->zc.fit_zspages) {
		/*
		 * Fitted zspages: the kernel's estimate counts chain-long zspages, so
		 * it misjudges a class holding fitted ones either way (freeing one
		 * gives back fewer pages; its objects may need a new chain, then
		 * fitted again).  What fit_zspages promises is the end: at most one
		 * partly used zspage per copy of a class of multi-page zspages
		 * (zsmalloc.h), and never more pages than before.
		 */
		(void)freeable;
		if (ut_pages(&s->a) > pages_before)
			FAIL(s, "compact grew the pool: %lu -> %lu pages", pages_before, ut_pages(&s->a));
		unsigned copies = zs_pool_class_shards(s->a.zp);
		struct zs_class_stats st;
		for (int i = 0; i < zs_class_count(s->a.zp); i++) {
			/* One-page zspages keep the kernel's rule: every page that can go has gone. */
			if (zs_class_stats(s->a.zp, i, &st, sizeof(st)) || st.pages_per_zspage == 1)
				continue;
			unsigned long partial = 0;
			for (int g = 1; g <= 10; g++)
				partial += st.fullness[g];
			if (partial > copies)
				FAIL(s, "class %d: %lu partly used zspages after compaction (%u copies)", i,
				     partial, copies);
		}
	} else if (got != freeable) {
		FAIL(s, "compact freed %lu pages, the classes said %lu", got, freeable);
	}
	n_compact++;
	verify_all(s);
	check_accounting(s);
}

/* A zsmalloc pool with thread-owned zspages (zs/zsmalloc.h, "Thread-owned zspages"). */
static int seg_owned(const struct seg *s)
{
	return s->a.zp && s->zc.free_mode != ZS_FREE_POOL_LOCK && !s->zc.checked && s->zc.fit_zspages;
}

/* An allocation failed with -ENOMEM: only a limit or an injected failure may cause it,
 * and only when the class had no free slot (no new page was needed otherwise).
 * zs_malloc frees the queued deferred frees before it gives up (the worker's
 * batch in hand included), and takes back the thread heaps' emptied spare
 * zspages, so the limit rule holds at the pages it failed at, with or
 * without the worker; those are the only ways a failed malloc may change
 * the pool's pages, and only downwards. */
static void check_enomem(struct seg *s, size_t size, unsigned long pages_before)
{
	n_enomem++;
	unsigned long pages = ut_pages(&s->a);
	if (s->deferred || seg_owned(s) ? pages > pages_before : pages != pages_before)
		FAIL(s, "a failed malloc changed the pool's pages %lu -> %lu", pages_before, pages);
	if (pages < pages_before)
		n_enomem_flushed++;
	/* This stream is the only producer: every free it queued is done now. */
	if (s->deferred && (long)ut_objects(&s->a) != model_live(s))
		FAIL(s, "malloc(%zu) -ENOMEM with deferred frees still queued: pool %lu, model %ld",
		     size, ut_objects(&s->a), model_live(s));
	if (!s->injecting && !(s->max_pages && pages + ZS_MAX_CHAIN > s->max_pages))
		FAIL(s, "malloc(%zu) -ENOMEM at %lu pages, limit %zu, no injection", size, pages,
		     s->max_pages);
	if (s->a.zp) {
		struct zs_class_stats st;
		int c = zs_lookup_class_index(s->a.zp, size + ZS_HANDLE_SIZE); /* as zs_malloc */
		if (c >= 0 && !zs_class_stats(s->a.zp, c, &st, sizeof(st)) && st.obj_used < st.obj_allocated)
			FAIL(s, "malloc(%zu) -ENOMEM with a free slot in class %d (%lu/%lu)", size, c,
			     st.obj_used, st.obj_allocated);
	} else if (s->a.zb) {
		struct zblock_class_stats st;
		int c = zblock_lookup_class(s->a.zb, size);
		if (c >= 0 && !zblock_class_stats(s->a.zb, c, &st, sizeof(st)) &&
		    st.objects < st.blocks * st.slots_per_block)
			FAIL(s, "zblock_malloc(%zu) -ENOMEM with a free slot in class %d", size, c);
	}
}

/* ---- configuration ---- */

static int setup(struct seg *s, uint64_t *rng)
{
	memset(s, 0, sizeof(*s));
	uint64_t r = tu_rand(rng), r2 = tu_rand(rng);
	unsigned k = r % 16;
	int kind = k < 11 ? UT_ZS : k < 13 ? UT_ZBLOCK : k < 15 ? UT_ZS_BACKEND : UT_ZBLOCK_BACKEND;
	s->ps = (size_t)4096 << ((r >> 4) % 5);
	s->checked = (r >> 8) & 1;
	s->max_pages = (r >> 9) % 4 == 0 ? 32 + (r2 % 4096) : 0;
	s->live_cap = (int)(64 + (r2 >> 12) % (MAXLIVE - 64));
	/* big pages: fewer live objects, the run stays about as fast */
	if (s->ps >= 32768 && s->live_cap > 512)
		s->live_cap = 512;
	zs_pool_config_init(&s->zc);
	s->zc.page_size = s->ps;
	static const unsigned deltas[] = { 0, 0, 0, 8, 16, 24, 32, 64, 128, 512 };
	ut_draw_zs(&s->zc, (unsigned)(r >> 12), deltas, 10);
	s->zc.checked = s->checked;
	s->zc.max_pages = s->max_pages;
	s->deferred = (r >> 24) % 3;  /* 0 none, 1 queue drained by flush/full, 2 worker */
	s->worker = s->deferred == 2;
	s->zc.deferred_worker = s->worker ? 1 : -1;
	s->zc.deferred_capacity = (r >> 26) & 1 ? (size_t)16 << ((r >> 27) % 8) : 0;
	s->zb_huge = (r >> 30) & 1;
	/*
	 * The application profile's axes: class copies (1, 2, 4 or one per CPU),
	 * fitted zspages, and objects of up to 4 pages (one config in four).  A
	 * table too big for its copies (classes x copies > 8192: 64 KiB pages
	 * with small deltas) is EINVAL by contract; such a draw takes one copy.
	 */
	unsigned sh = (unsigned)(r2 >> 40) % 4;
	s->zc.class_shards = sh == 3 ? ZS_CLASS_SHARDS_AUTO : 1u << sh;
	s->zc.fit_zspages = (int)((r2 >> 42) & 1);
	if ((r2 >> 43) % 4 == 0)
		s->zc.max_object_size = s->ps * (2 + (size_t)((r2 >> 45) % 3)); /* <= MAXOBJ */
	const char *kn = kind_name[kind];
	int err = ut_create(&s->a, kind, s->ps, s->max_pages, s->checked, s->zb_huge, &s->zc);
	if (err && errno == EINVAL && s->zc.class_shards != 1 &&
	    (kind == UT_ZS || kind == UT_ZS_BACKEND)) {
		s->zc.class_shards = 1;
		err = ut_create(&s->a, kind, s->ps, s->max_pages, s->checked, s->zb_huge, &s->zc);
	}
	if (kind == UT_ZBLOCK_BACKEND)
		s->zb_huge = 1; /* the backend asks for the huge class */
	s->max_size = s->a.max_size;
	if (s->a.zp) {
		s->huge = zs_huge_class_size(s->a.zp);
		snprintf(s->name, sizeof(s->name),
			 "%s ps %zu chain %u policy %d delta %u free_mode %d checked %d deferred %d "
			 "(cap %zu) max_pages %zu live %d shards %u fit %d max_object %zu",
			 kn, s->ps, s->zc.max_chain, s->zc.chain_policy, s->zc.class_delta,
			 s->zc.free_mode, s->checked, s->deferred, s->zc.deferred_capacity,
			 s->max_pages, s->live_cap, zs_pool_class_shards(s->a.zp), s->zc.fit_zspages,
			 s->max_size);
	} else {
		snprintf(s->name, sizeof(s->name), "%s ps %zu huge %d checked %d max_pages %zu live %d",
			 kn, s->ps, s->zb_huge, s->checked, s->max_pages, s->live_cap);
		s->deferred = s->a.kind == UT_ZBLOCK_BACKEND ? s->deferred : 0;
		s->worker = 0;
	}
	if (err) {
		FAIL(s, "create failed: errno %d", errno);
		return 0;
	}
	return 1;
}

static void teardown(struct seg *s)
{
	ut_destroy(&s->a);
}

static size_t pick_size(struct seg *s, uint64_t r)
{
	size_t m = s->max_size;
	switch (r % 16) {
	case 0: case 1: case 2: case 3: case 4: case 5: case 6:
		return 1 + (r >> 8) % (m < 256 ? m : 256);
	case 7: case 8: case 9: case 10:
		return 1 + (r >> 8) % (m < 2048 ? m : 2048);
	case 11: case 12: case 13:
		return 1 + (r >> 8) % m;
	case 14:
		if (s->huge && s->huge > 64 && s->huge <= m)
			return s->huge - 32 + (r >> 8) % 64 > m ? m : s->huge - 32 + (r >> 8) % 64;
		return m - (r >> 8) % 64;
	default:
		return m - (r >> 8) % 16;
	}
}

/* ---- one segment ---- */

static void run_segment(uint64_t *rng, uint64_t ops)
{
	struct seg s;
	if (!setup(&s, rng))
		return;
	n_segs++;
	n_kind[s.a.kind]++;
	n_ps[s.ps >> 12]++;
	memset(tab, 0, sizeof(tab));
	/* failure injection: armed at a random point for a random count, in half the segments */
	uint64_t inject_at = tu_rand(rng) % 2 ? tu_rand(rng) % (ops + 1) : UINT64_MAX;
	int can_inject = s.a.zp || s.a.zb;

	for (uint64_t i = 0; i < ops; i++, op_no++) {
		uint64_t r = tu_rand(rng);
		struct obj *o = &tab[r % (uint64_t)s.live_cap];
		unsigned kind = (unsigned)(r >> 54); /* 0..1023 */
		r = tu_rand(rng);
		/* Every step draws the same three numbers whatever happens: which branch runs
		 * depends on earlier outcomes (an -ENOMEM refusal is timing-dependent with the
		 * deferred worker), and the stream must not, so a seed replays exactly. */
		uint64_t r3 = tu_rand(rng);
		if (i == inject_at && can_inject) {
			uint64_t after = r % 64, count = (r >> 8) % 8;
			if (s.a.zp)
				zs_pool_fail_pages(s.a.zp, after, count);
			else
				zblock_pool_fail_pages(s.a.zb, after, count);
			s.injecting = 1;
		}
		if (kind < 1) {
			do_compact(&s);
		} else if (kind < 3) {
			ut_flush(&s.a);
		} else if (!o->h) {
			size_t size = pick_size(&s, r);
			uint64_t cseed = r3;
			unsigned long before = ut_pages(&s.a);
			/* Half the objects stored in one call (zs_malloc_write and the backend's). */
			int fused = (int)(r3 >> 63);
			fill(wbuf, size, cseed);
			unsigned long h = fused ? ut_malloc_write(&s.a, wbuf, size) : ut_malloc(&s.a, size);
			n_alloc++;
			if (ZS_IS_ERR(h)) {
				if (ZS_ERR(h) != -ENOMEM)
					FAIL(&s, "malloc(%zu) -> %d", size, ZS_ERR(h));
				else
					check_enomem(&s, size, before);
				continue;
			}
			if (!h) {
				FAIL(&s, "malloc(%zu) returned 0", size);
				continue;
			}
			o->h = h;
			o->size = (uint32_t)size;
			o->split = 0;
			o->cseed = cseed;
			if (!fused && ut_write(&s.a, h, wbuf, size))
				FAIL(&s, "write of a new object of %zu bytes failed", size);
		} else if (kind < 400) {
			verify(&s, o, o->size, 0);
			int deferred = s.deferred && (r & 1);
			int ret = ut_free(&s.a, o->h, deferred);
			n_free++;
			n_deferred += deferred;
			if (ret)
				FAIL(&s, "free -> %d", ret);
			if (s.checked && !deferred && (r & 6) == 0) {
				/* misuse, refused and harmless in checked mode */
				n_misuse++;
				if ((ret = ut_free(&s.a, o->h, 0)) != -EINVAL)
					FAIL(&s, "double free -> %d", ret);
				void *m = ut_read_begin(&s.a, o->h, 1, rbuf);
				if (m)
					FAIL(&s, "read_begin of a freed handle -> %p", m);
				ut_read_end(&s.a, o->h, 1, m); /* an end after a failed begin: a no-op */
				if (ut_write(&s.a, o->h, wbuf, 1) != -EINVAL)
					FAIL(&s, "write to a freed handle accepted");
				if (s.a.kind == UT_ZS) {
					m = zs_map_object(s.a.zp, o->h, ZS_MM_RO);
					if (m)
						FAIL(&s, "map of a freed handle -> %p", m);
					zs_unmap_object(s.a.zp, o->h);
				}
			}
			o->h = 0;
		} else if (kind < 600) {
			uint64_t ns = r3;
			n_write++;
			size_t split = o->size >= 2 ? 1 + (size_t)(r >> 8) % (o->size - 1) : 0;
			if (r % 4 == 0 && split && split >= o->split) {
				/* a prefix: the rest must stay (a shorter prefix than the last one
				 * would leave two patterns: those get a whole rewrite below) */
				o->split = (uint32_t)split;
				o->pseed = ns;
				fill(wbuf, split, ns);
				if (ut_write(&s.a, o->h, wbuf, split))
					FAIL(&s, "prefix write of %zu failed", split);
			} else if (s.a.kind == UT_ZS && r % 4 == 1) {
				/* legacy write through a mapping */
				enum zs_mapmode mm = (r >> 8) & 1 ? ZS_MM_RW : ZS_MM_WO;
				unsigned char *m = zs_map_object(s.a.zp, o->h, mm);
				if (!m) {
					FAIL(&s, "map RW/WO NULL");
				} else {
					if (mm == ZS_MM_RW && memcmp(m, expected(o), o->size))
						FAIL(&s, "RW mapping of %u bytes differs", o->size);
					fill(m, o->size, ns);
					zs_unmap_object(s.a.zp, o->h);
					o->cseed = ns;
					o->split = 0;
				}
				n_map++;
			} else {
				o->cseed = ns;
				o->split = 0;
				fill(wbuf, o->size, ns);
				if (ut_write(&s.a, o->h, wbuf, o->size))
					FAIL(&s, "write of %u bytes failed", o->size);
			}
		} else {
			int use_map = s.a.kind == UT_ZS && r % 8 == 0;
			size_t len = r % 4 == 1 ? 1 + (size_t)(r >> 8) % o->size : o->size;
			verify(&s, o, use_map ? o->size : len, use_map);
			n_read++;
			n_map += use_map;
		}
		if (failures > 20) {
			fprintf(stderr, "model_check: too many failures, stopping\n");
			break;
		}
	}

	/* free-all + compact: 0 pages */
	if (s.a.zp)
		zs_pool_fail_pages(s.a.zp, UINT64_MAX, 0);
	else if (s.a.zb)
		zblock_pool_fail_pages(s.a.zb, UINT64_MAX, 0);
	do_compact(&s);
	for (int i = 0; i < s.live_cap; i++) {
		int j = (int)(tu_rand(rng) % (uint64_t)s.live_cap);
		struct obj t = tab[i];
		tab[i] = tab[j];
		tab[j] = t;
	}
	for (int i = 0; i < s.live_cap; i++) {
		if (!tab[i].h)
			continue;
		verify(&s, &tab[i], tab[i].size, 0);
		int ret = ut_free(&s.a, tab[i].h, s.deferred && (i & 1));
		if (ret)
			FAIL(&s, "free at the end -> %d", ret);
		tab[i].h = 0;
	}
	do_compact(&s);
	if (ut_pages(&s.a) != 0 || ut_objects(&s.a) != 0)
		FAIL(&s, "after free-all + compact: %lu pages, %lu objects", ut_pages(&s.a),
		     ut_objects(&s.a));
	teardown(&s);
	n_ops += ops;
}

int main(int argc, char **argv)
{
	const char *e = getenv("ZS_MODEL_OPS");
	uint64_t total = argc > 1 ? strtoull(argv[1], NULL, 0) : e ? strtoull(e, NULL, 0) : 1000000;
	const char *se = getenv("ZS_MODEL_SEED");
	uint64_t seed;
	if (se) {
		seed = strtoull(se, NULL, 0);
		printf("test_model_check: seed %" PRIu64 " (rerun with ZS_MODEL_SEED=%" PRIu64 ")\n",
		       seed, seed);
	} else {
		seed = tu_seed("test_model_check");
	}
	uint64_t rng = seed;
	printf("test_model_check: %" PRIu64 " operations\n", total);
	fflush(stdout);
	time_t t0 = time(NULL), last = t0;
	while (n_ops < total && failures <= 20) {
		uint64_t left = total - n_ops;
		uint64_t ops = 1000 + tu_rand(&rng) % 20000;
		if (ops > left)
			ops = left;
		uint64_t before = (uint64_t)tu_fail;
		run_segment(&rng, ops);
		if ((uint64_t)tu_fail != before)
			fprintf(stderr, "model_check: segment %" PRIu64 " failed (seed %" PRIu64 ")\n",
				n_segs, seed);
		else
			tu_pass++;
		if (time(NULL) - last >= 60) {
			last = time(NULL);
			printf("  %" PRIu64 " ops, %" PRIu64 " segments, %ld s\n", n_ops, n_segs,
			       (long)(last - t0));
			fflush(stdout);
		}
	}
	printf("test_model_check: %" PRIu64 " operations in %" PRIu64 " pool configurations "
	       "(zsmalloc %" PRIu64 ", zblock %" PRIu64 ", zsmalloc/backend %" PRIu64
	       ", zblock/backend %" PRIu64 "), %ld s\n",
	       n_ops, n_segs, n_kind[0], n_kind[1], n_kind[2], n_kind[3], (long)(time(NULL) - t0));
	printf("  page sizes 4K/8K/16K/32K/64K: %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
	       "/%" PRIu64 " segments\n",
	       n_ps[1], n_ps[2], n_ps[4], n_ps[8], n_ps[16]);
	printf("  alloc %" PRIu64 " (-ENOMEM %" PRIu64 ", of which %" PRIu64
	       " after freeing queued deferred frees), free %" PRIu64 " (deferred %" PRIu64
	       "), write %" PRIu64 ", read %" PRIu64 " (map %" PRIu64 "), compact %" PRIu64
	       ", misuse %" PRIu64 ", bytes verified %" PRIu64 "\n",
	       n_alloc, n_enomem, n_enomem_flushed, n_free, n_deferred, n_write, n_read, n_map, n_compact, n_misuse,
	       n_bytes_verified);
	printf("  mismatches and failed checks: %d\n", failures);
	return tu_done();
}
