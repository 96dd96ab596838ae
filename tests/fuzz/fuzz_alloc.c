/*
 * libFuzzer target: an operation interpreter over the allocator API.  The
 * input's first bytes choose the allocator and its config (zsmalloc called
 * directly or through the backend interface, zblock through the backend or
 * directly; page size 4K..64K, chain length and policy, class delta, free
 * mode, checked mode, deferred free with or without its worker and a small
 * queue, page limit, failure injection, class copies (with a limit too)
 * and fitted zspages (without one), and for zsmalloc the largest object:
 * one page, or 2..16 pages, a multiple of the page or not); the rest is a
 * program of alloc, free, deferred free, rewrite, read (a local copy, or
 * zsmalloc's pieces: zs_obj_read_sgv_begin and the two-piece
 * zs_obj_read_sg_begin, with the refusals around them), legacy map,
 * compact, trim and, in checked mode, misuse (double free, garbage and
 * foreign handles, end after a failed begin, stale handles kept across
 * trims and compactions, and the internal handle of a packed tail).  A shadow copy of every
 * object's bytes is compared on every read and before every free;
 * accounting is checked after every compaction (a multi-page object costs
 * its pages, or all but the last when its tail is packed into a small
 * class); at the end everything is freed and the pool must hold 0 pages.
 */
#include <errno.h>

#include "alloc_ut.h"
#include "fuzz_common.h"
#include "zs/backend.h"
#include "zs/zblock.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"
#include "zsmalloc/internal.h" /* white box: a packed tail's internal handle */
#include "must.h"

#define MAXOBJ 48
/* The largest object: 16 pages of 64 KiB (zs_pool_config.max_object_size). */
#define MAXBYTES ((size_t)ZS_MAX_OBJECT_PAGES * 65536)


struct obj {
	unsigned long h;
	size_t size;
	unsigned char *bytes; /* the shadow copy */
};

struct st {
	struct ut_alloc a;
	int checked, injecting, fit;
	size_t page_size, max_size, max_pages;
	struct zs_pool *foreign;
	struct obj o[MAXOBJ];
	unsigned long pending[64]; /* deferred frees not yet flushed: not garbage, not live */
	int npending;
	unsigned long stale[32];   /* freed handles, kept across trims and compactions */
	unsigned nstale;
	unsigned char *buf, *buf2;
	uint64_t seq;
};

/* Drain deferred frees: the pending ones are gone then. */
static void keep_stale(struct st *s, unsigned long h)
{
	s->stale[s->nstale++ % 32] = h;
}

static void t_flush(struct st *s)
{
	ut_flush(&s->a);
	for (int i = 0; i < s->npending; i++)
		keep_stale(s, s->pending[i]);
	s->npending = 0;
}

static void t_fail_pages(struct st *s, uint64_t after, uint64_t count)
{
	if (s->a.zp)
		zs_pool_fail_pages(s->a.zp, after, count);
	else if (s->a.zb)
		zblock_pool_fail_pages(s->a.zb, after, count);
	else
		return;
	s->injecting = after != UINT64_MAX;
}

static void verify(struct st *s, struct obj *e, size_t len, const char *why)
{
	void *m = ut_read_begin(&s->a, e->h, len, s->buf);
	FUZZ_CHECK(m, "%s: read_begin(size %zu, len %zu) NULL", why, e->size, len);
	int bad = memcmp(m, e->bytes, len);
	ut_read_end(&s->a, e->h, len, m);
	FUZZ_CHECK(!bad, "%s: object of %zu bytes differs from its shadow (len %zu)", why, e->size,
		   len);
}

static int is_known(struct st *s, unsigned long h)
{
	for (int i = 0; i < MAXOBJ; i++)
		if (s->o[i].h == h)
			return 1;
	for (int i = 0; i < s->npending; i++)
		if (s->pending[i] == h)
			return 1;
	return 0;
}

static unsigned long model_live(struct st *s)
{
	unsigned long live = 0;
	for (int i = 0; i < MAXOBJ; i++)
		live += s->o[i].h != 0;
	return live;
}

static void check_accounting(struct st *s)
{
	unsigned long live = model_live(s), bytes = 0;
	for (int i = 0; i < MAXOBJ; i++)
		if (s->o[i].h)
			bytes += s->o[i].size;
	FUZZ_CHECK(ut_objects(&s->a) == live, "objects %lu, model %lu", ut_objects(&s->a), live);
	if (s->a.zp) {
		unsigned long pages = 0, used = 0;
		struct zs_class_stats cs;
		for (int i = 0; i < zs_class_count(s->a.zp); i++) {
			if (zs_class_stats(s->a.zp, i, &cs, sizeof(cs)))
				continue;
			pages += cs.pages_used;
			used += cs.obj_used;
			FUZZ_CHECK(cs.obj_used <= cs.obj_allocated, "class %d used > allocated", i);
		}
		FUZZ_CHECK(pages == zs_get_total_pages(s->a.zp), "class pages %lu, pool %lu", pages,
			   zs_get_total_pages(s->a.zp));
		/* a packed tail is a small object of its own that zs_pool_objects does not count */
		FUZZ_CHECK(zs_pool_objects(s->a.zp) == live, "pool objects %lu, model %lu",
			   zs_pool_objects(s->a.zp), live);
		FUZZ_CHECK(used >= live, "class objects %lu, model %lu", used, live);
		/* an object over a page sits alone in a zspage of its whole pages: all of them, or
		 * (its partial last page packed as a tail into a small class) all but the last */
		unsigned long multi = 0, want = 0, want_lo = 0, tails = 0;
		size_t huge = zs_huge_class_size(s->a.zp);
		struct zs_class_info ci;
		for (int i = 0; i < zs_class_count(s->a.zp); i++)
			if (!zs_class_info(s->a.zp, i, &ci) && ci.size > s->page_size &&
			    !zs_class_stats(s->a.zp, i, &cs, sizeof(cs))) {
				FUZZ_CHECK(ci.objs_per_zspage == 1 &&
					   (size_t)ci.pages_per_zspage * s->page_size == ci.size,
					   "class %d of %u bytes: %u objects in %u pages", i, ci.size,
					   ci.objs_per_zspage, ci.pages_per_zspage);
				multi += cs.pages_used;
			}
		for (int i = 0; i < MAXOBJ; i++) {
			size_t sz = s->o[i].size, P = s->page_size, rest = sz % P;
			if (!s->o[i].h || sz <= P)
				continue;
			want += (sz + P - 1) / P;
			if (rest && rest < huge) { /* may be packed: the head is its whole pages */
				want_lo += sz / P >= 2 ? sz / P : 0; /* one page: the huge class */
				tails++;
			} else {
				want_lo += (sz + P - 1) / P;
			}
		}
		FUZZ_CHECK(multi >= want_lo && multi <= want,
			   "multi-page classes hold %lu pages, their objects need %lu..%lu", multi,
			   want_lo, want);
		FUZZ_CHECK(used - live <= tails, "%lu small objects past the model, %lu tails possible",
			   used - live, tails);
	} else if (s->a.zb) {
		unsigned long pages = 0, used = 0;
		struct zblock_class_stats cs;
		for (int i = 0; i < zblock_class_count(s->a.zb); i++) {
			if (zblock_class_stats(s->a.zb, i, &cs, sizeof(cs)))
				continue;
			pages += cs.pages;
			used += cs.objects;
		}
		FUZZ_CHECK(pages == zblock_get_total_pages(s->a.zb), "zblock class pages %lu, pool %lu",
			   pages, zblock_get_total_pages(s->a.zb));
		FUZZ_CHECK(used == live, "zblock class objects %lu, model %lu", used, live);
	} else if (s->checked) {
		/* only a checked backend keeps request sizes (src/backend/backend.c) */
		struct zs_backend_stats bs;
		zs_backend_stats(s->a.be, &bs, sizeof(bs));
		FUZZ_CHECK(bs.object_bytes == bytes, "backend object_bytes %zu, model %lu",
			   bs.object_bytes, bytes);
	}
	if (s->max_pages)
		FUZZ_CHECK(ut_pages(&s->a) <= s->max_pages, "pages %lu over the limit %zu", ut_pages(&s->a),
			   s->max_pages);
}

static int setup(struct st *s, struct fin *in)
{
	unsigned b0 = fin_u8(in), b1 = fin_u8(in), b2 = fin_u8(in), b3 = fin_u8(in);
	/* b0's low bits pick the kind (in this order: the corpus was made with it) */
	static const int kinds[4] = { UT_ZS, UT_ZS_BACKEND, UT_ZBLOCK_BACKEND, UT_ZBLOCK };
	int kind = kinds[b0 % 4];
	/* 4K in half the inputs: a fresh 64K-page pool touches up to 1 MiB per new zspage,
	 * which costs more than the rest of a run (test_model_check weights sizes evenly) */
	static const unsigned shifts[8] = { 0, 0, 0, 0, 1, 2, 3, 4 };
	s->page_size = (size_t)4096 << shifts[(b0 >> 2) & 7];
	s->checked = (b0 >> 5) & 1;
	s->max_pages = (b1 & 1) ? 1 + (b1 >> 1) % 96 : 0;
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_size = s->page_size;
	static const unsigned deltas[] = { 0, 8, 16, 24, 32, 64, 128, 256 };
	ut_draw_zs(&c, b2 | (b3 << 7), deltas, 8);
	c.deferred_worker = (b3 >> 3) % 4 == 0 ? 1 : -1;
	c.deferred_capacity = (b3 >> 5) ? (size_t)1 << (b3 >> 5) : 0;
	if (!c.deferred_capacity && c.page_size <= 8192)
		c.deferred_capacity = 256; /* the default is 32768 cells: costly per input */
	c.checked = s->checked;
	c.max_pages = s->max_pages;
	/* b1's upper bits mean nothing without a limit: there they draw the application
	 * profile's axes, class copies (1, 2, 4, one per CPU) and fitted zspages.  With a
	 * limit, the values past 95 (which repeat limits 1..32) take two copies. */
	if (!(b1 & 1)) {
		unsigned sh = (b1 >> 1) & 3;
		c.class_shards = sh == 3 ? ZS_CLASS_SHARDS_AUTO : 1u << sh;
		c.fit_zspages = (int)((b1 >> 3) & 1);
	} else if ((b1 >> 1) >= 96) {
		c.class_shards = 2;
	}
	s->fit = c.fit_zspages && (kind == UT_ZS || kind == UT_ZS_BACKEND);
	/* b0's top bits (0 in every input made before multi-page objects, which so keep their
	 * meaning and length): zsmalloc's largest object, from one or three more bytes */
	unsigned mo = b0 >> 6;
	if (mo) {
		unsigned b4 = fin_u8(in);
		size_t P = s->page_size, k = 2 + b4 % 15;
		if (mo == 1)
			c.max_object_size = k * P;
		else if (mo == 2) /* not a multiple of the page: strictly between k-1 and k pages */
			c.max_object_size = (k - 1) * P + 1 + fin_u16(in) % (P - 1);
		else
			c.max_object_size = (b4 & 1) ? P : ZS_MAX_OBJECT_PAGES * P;
		if (mo == 3 && (b4 & 2) && (kind == UT_ZS || kind == UT_ZS_BACKEND)) {
			/* under a page or past 16 pages: refused, directly and through the backend */
			struct zs_pool_config bad = c;
			bad.max_object_size = (b4 & 4) ? P - 1 - (b4 >> 3)
						       : ZS_MAX_OBJECT_PAGES * P + 1 + (b4 >> 3);
			struct zs_pool *bp;
			FUZZ_CHECK(zs_pool_create(&bad, &bp, NULL, 0) == -EINVAL && !bp && errno == EINVAL, "max_object_size %zu (page %zu) accepted",
				   bad.max_object_size, P);
			struct zs_backend_config bc;
			zs_backend_config_init(&bc);
			bc.page_size = P;
			bc.zs = bad;
			struct zs_backend *bb;
			FUZZ_CHECK(zs_backend_create(&bc, &bb, NULL, 0) == -EINVAL && !bb && errno == EINVAL, "backend: max_object_size %zu accepted",
				   bad.max_object_size);
		}
	}
	if (c.max_object_size > s->page_size && (kind == UT_ZS || kind == UT_ZS_BACKEND)) {
		/* each page count is a class, and the classes must fit the obj's 8192 class
		 * numbers (zsmalloc.h, max_object_size): 64 KiB pages with delta 8 have 8189
		 * up to a page.  Past that the config is refused; then take what fits. */
		size_t P = s->page_size, d = c.class_delta ? c.class_delta : (P >> 8 > 16 ? P >> 8 : 16);
		size_t small = (P - ZS_MIN_ALLOC_SIZE + d - 1) / d + 1;
		size_t K = (c.max_object_size + P - 1) / P;
		if (small + K - 1 > 8192) {
			struct zs_pool *bp;
			int brc = zs_pool_create(&c, &bp, NULL, 0);
			FUZZ_CHECK(brc == -EINVAL && !bp, "%zu + %zu classes accepted", small, K - 1);
			c.max_object_size = (8192 - small + 1) * P;
		}
	}
	int err = ut_create(&s->a, kind, s->page_size, s->max_pages, s->checked, b2 & 1, &c);
	if (err && errno == EINVAL && c.class_shards > 1 && (kind == UT_ZS || kind == UT_ZS_BACKEND)) {
		/* classes x copies past the obj's 8192 class numbers: EINVAL by contract */
		c.class_shards = 1;
		err = ut_create(&s->a, kind, s->page_size, s->max_pages, s->checked, b2 & 1, &c);
	}
	FUZZ_CHECK(!err, "creating the allocator (kind %d): errno %d", kind, errno);
	s->max_size = s->a.max_size;
	return 1;
}

/* A size for a pool that takes objects over a page: page counts and their edges, the limit
 * and past it (only such inputs read the extra bytes, so older ones keep their sizes). */
static size_t multi_size(struct st *s, unsigned v, struct fin *in)
{
	size_t P = s->page_size, max = s->max_size, K = (max + P - 1) / P;
	unsigned w = fin_u16(in);
	size_t k = 1 + w % K;
	switch ((v >> 2) % 8) {
	case 0: return k * P;             /* exactly k pages */
	case 1: return k * P + 1;         /* one byte into page k + 1 (or past the limit) */
	case 2: return k * P - 1;
	case 3: return max;
	case 4: return max + 1 + (w >> 8) % 4; /* -ENOSPC */
	case 5: return (w & 1) ? 0 : P + 1;
	default: return 1 + (((size_t)(v >> 5) << 16) | w) % max;
	}
}

static void op_alloc(struct st *s, struct obj *e, struct fin *in)
{
	int fused = fin_u8(in) & 1; /* zs_malloc_write (or the backend's) instead of malloc + write */
	unsigned v = fin_u16(in);
	size_t size;
	if (s->max_size > s->page_size && (v & 3))
		size = multi_size(s, v, in);
	else switch (v & 3) {
	case 0: size = 1 + (v >> 2) % 256; break;
	case 1: size = (v >> 2) % (s->max_size + 2); break; /* 0 and max+1 included */
	case 2: size = s->max_size - (v >> 2) % 64; break;
	default: size = 1 + ((size_t)(v >> 2) * 4 + 3) % s->max_size;
	}
	unsigned long pages = ut_pages(&s->a);
	if (size && size <= s->max_size)
		fuzz_fill(e->bytes, size, s->seq + 1);
	unsigned long h = fused ? ut_malloc_write(&s->a, e->bytes, size) : ut_malloc(&s->a, size);
	if (size == 0) {
		FUZZ_CHECK(ZS_IS_ERR(h) && ZS_ERR(h) == -EINVAL, "malloc(0) -> %lx", h);
		return;
	}
	if (size > s->max_size) {
		FUZZ_CHECK(ZS_IS_ERR(h) && ZS_ERR(h) == -ENOSPC, "malloc(%zu > max %zu) -> %lx", size,
			   s->max_size, h);
		return;
	}
	if (ZS_IS_ERR(h)) {
		FUZZ_CHECK(ZS_ERR(h) == -ENOMEM, "malloc(%zu) -> error %d", size, ZS_ERR(h));
		FUZZ_CHECK(s->injecting || (s->max_pages && pages + 16 > s->max_pages),
			   "malloc(%zu) -ENOMEM with %lu pages, limit %zu, no injection", size, pages,
			   s->max_pages);
		t_flush(s); /* the object count includes deferred frees still queued */
		FUZZ_CHECK(ut_pages(&s->a) <= pages && ut_objects(&s->a) == model_live(s),
			   "failed malloc changed pages %lu -> %lu or objects", pages, ut_pages(&s->a));
		return;
	}
	FUZZ_CHECK(h != 0, "malloc(%zu) returned handle 0", size);
	for (int i = 0; i < MAXOBJ; i++)
		FUZZ_CHECK(s->o[i].h != h, "malloc returned a live handle %lx", h);
	/* a deferred free may already have been drained (worker, full queue): reuse is fine */
	for (int i = 0; i < s->npending; i++)
		if (s->pending[i] == h)
			s->pending[i] = s->pending[--s->npending];
	e->h = h;
	e->size = size;
	++s->seq;
	if (!fused)
		FUZZ_CHECK(ut_write(&s->a, h, e->bytes, size) == 0, "write of a new object (%zu)", size);
}

static void op_free(struct st *s, struct obj *e, unsigned how)
{
	verify(s, e, e->size, "before free");
	int deferred = how & 1;
	if (deferred && s->npending == 64)
		t_flush(s);
	int ret = ut_free(&s->a, e->h, deferred);
	FUZZ_CHECK(ret == 0, "free -> %d", ret);
	if (deferred) {
		s->pending[s->npending++] = e->h;
	} else if (s->checked && (how & 2)) {
		ret = ut_free(&s->a, e->h, 0);
		FUZZ_CHECK(ret == -EINVAL, "double free in checked mode -> %d", ret);
		void *m = ut_read_begin(&s->a, e->h, 1, s->buf);
		FUZZ_CHECK(!m, "read_begin of a freed handle in checked mode -> %p", m);
		FUZZ_CHECK(ut_write(&s->a, e->h, e->bytes, 1) == -EINVAL, "write to a freed handle");
	}
	if (!deferred)
		keep_stale(s, e->h);
	e->h = 0;
}

static void op_rewrite(struct st *s, struct obj *e, struct fin *in)
{
	unsigned v = fin_u16(in);
	size_t len = (v & 1) ? e->size : 1 + (v >> 1) % e->size;
	fuzz_fill(s->buf2, len, ++s->seq);
	int ret = ut_write(&s->a, e->h, s->buf2, len);
	FUZZ_CHECK(ret == 0, "write(%zu of %zu) -> %d", len, e->size, ret);
	memcpy(e->bytes, s->buf2, len);
	if (v & 2) {
		/* longer than the object: must fail unless the slot happens to be big enough; we only
		 * require that a failure changes nothing */
		size_t big = e->size + 1 + (v >> 2) % 64;
		if (big <= s->page_size || (s->max_size > s->page_size && big <= s->max_size + 64)) {
			fuzz_fill(s->buf2, big, ++s->seq);
			if (ut_write(&s->a, e->h, s->buf2, big) == 0)
				memcpy(e->bytes, s->buf2, e->size);
		}
	}
}

/* Pieces sg[0..n) hold exactly want[0..len). */
static void check_pieces(const struct zs_obj_piece *sg, int n, const unsigned char *want, size_t len,
			 const char *why)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		FUZZ_CHECK(sg[i].len && at + sg[i].len <= len, "%s: piece %d of %d: %zu bytes at %zu of %zu",
			   why, i, n, sg[i].len, at, len);
		FUZZ_CHECK(!memcmp(sg[i].addr, want + at, sg[i].len), "%s: piece %d of %d differs", why,
			   i, n);
		at += sg[i].len;
	}
	FUZZ_CHECK(at == len, "%s: pieces hold %zu of %zu bytes", why, at, len);
}

/*
 * zsmalloc's reads in pieces (the pool direct or under the backend): straight
 * from the pool pages, at most one piece per page the bytes touch; a
 * multi-page object starts its zspage, so ceil(len / page) pieces, or one
 * more where its packed tail crosses a page.
 * Too few pieces allowed (the two-piece call included), len 0 or past the
 * slot: -EINVAL with nothing left locked (the next compaction would find the
 * zspage held; every read after it would still work).
 */
static void op_read_sg(struct st *s, struct obj *e, size_t len, unsigned how)
{
	struct zs_pool *zp = s->a.zp;
	size_t P = s->page_size, pages = (len + P - 1) / P;
	struct zs_obj_piece sg[ZS_MAX_OBJECT_PAGES + 1];
	int n = zs_obj_read_sgv_begin(zp, e->h, len, sg, ZS_MAX_OBJECT_PAGES + 1);
	FUZZ_CHECK(n >= 1, "sgv read of %zu of %zu bytes -> %d", len, e->size, n);
	check_pieces(sg, n, e->bytes, len, "sgv");
	if (e->size > P) /* and one more where a packed tail crosses a page */
		FUZZ_CHECK((size_t)n == pages || (size_t)n == pages + 1,
			   "sgv: %d pieces for %zu bytes of a %zu-byte object", n, len, e->size);
	else
		FUZZ_CHECK(n <= 2 && (size_t)n >= pages, "sgv: %d pieces for %zu bytes", n, len);
	zs_obj_read_sg_end(zp, e->h);
	if (how & 2) {
		/* the kernel's two-piece call: the same pieces, or refused when it needs more */
		struct zs_obj_piece sg2[2];
		int m = zs_obj_read_sg_begin(zp, e->h, len, sg2);
		if (n <= 2) {
			FUZZ_CHECK(m == n, "sg read of %zu bytes -> %d, sgv gave %d", len, m, n);
			check_pieces(sg2, m, e->bytes, len, "sg");
			zs_obj_read_sg_end(zp, e->h);
		} else {
			FUZZ_CHECK(m == -EINVAL, "sg read needing %d pieces -> %d", n, m);
		}
	}
	if (n > 1 && (how & 4)) {
		int m = zs_obj_read_sgv_begin(zp, e->h, len, sg, n - 1);
		FUZZ_CHECK(m == -EINVAL, "sgv with %d of %d pieces allowed -> %d", n - 1, n, m);
	}
	if (how & 8) {
		int m = zs_obj_read_sgv_begin(zp, e->h, 0, sg, ZS_MAX_OBJECT_PAGES + 1);
		FUZZ_CHECK(m == -EINVAL, "sgv of 0 bytes -> %d", m);
		if (e->size > P) {
			/* a multi-page object's slot is its pages: one byte more is refused */
			size_t past = (e->size + P - 1) / P * P + 1;
			m = zs_obj_read_sgv_begin(zp, e->h, past, sg, ZS_MAX_OBJECT_PAGES + 1);
			FUZZ_CHECK(m == -EINVAL, "sgv of %zu bytes of a %zu-byte object -> %d", past,
				   e->size, m);
			FUZZ_CHECK(!zs_obj_read_begin(zp, e->h, past, s->buf),
				   "read_begin of %zu bytes of a %zu-byte object", past, e->size);
		}
	}
	/* nothing a refusal did is left behind: the object still reads, whole */
	verify(s, e, e->size, "after piece reads");
}

static void op_read(struct st *s, struct obj *e, struct fin *in, unsigned how)
{
	unsigned v = fin_u16(in);
	size_t len = (v & 1) ? e->size : 1 + (v >> 1) % e->size;
	if (s->a.zp && (how & 1))
		op_read_sg(s, e, len, how);
	else
		verify(s, e, len, "read");
}

/* The legacy API (zsmalloc only): RO verifies, WO/RW write a new pattern through the mapping. */
static void op_map(struct st *s, struct obj *e, unsigned how)
{
	enum zs_mapmode mm = (enum zs_mapmode)(how % 3);
	unsigned char *m = zs_map_object(s->a.zp, e->h, mm);
	FUZZ_CHECK(m, "map NULL");
	if (mm != ZS_MM_WO)
		FUZZ_CHECK(!memcmp(m, e->bytes, e->size), "mapped object differs from its shadow");
	if (mm != ZS_MM_RO) {
		fuzz_fill(e->bytes, e->size, ++s->seq);
		memcpy(m, e->bytes, e->size);
	}
	zs_unmap_object(s->a.zp, e->h);
}

static void op_compact(struct st *s)
{
	t_flush(s);
	unsigned long freeable = 0, pages_before = ut_pages(&s->a);
	if (s->a.zp) {
		struct zs_class_stats cs;
		for (int i = 0; i < zs_class_count(s->a.zp); i++)
			if (!zs_class_stats(s->a.zp, i, &cs, sizeof(cs)))
				freeable += cs.freeable;
	}
	unsigned long got = s->a.zp ? zs_compact(s->a.zp) : s->a.zb ? zblock_compact(s->a.zb)
							      : zs_backend_compact(s->a.be);
	if (s->a.zp && s->fit) /* the chain-based estimate misjudges fitted zspages either way */
		FUZZ_CHECK(ut_pages(&s->a) <= pages_before, "compact grew the pool %lu -> %lu",
			   pages_before, ut_pages(&s->a));
	else if (s->a.zp)
		FUZZ_CHECK(got == freeable, "compact freed %lu, classes said %lu", got, freeable);
	else
		FUZZ_CHECK(got == 0, "zblock compact freed %lu", got);
	for (int i = 0; i < MAXOBJ; i++)
		if (s->o[i].h)
			verify(s, &s->o[i], s->o[i].size, "after compact");
	check_accounting(s);
}

/* Checked mode: handles that are not live must be refused and change nothing. */
static void op_misuse(struct st *s, struct fin *in)
{
	unsigned how = fin_u8(in);
	unsigned long h = (unsigned long)fin_u64(in);
	if (how & 1) {
		/* a foreign handle: live in another pool of the same kind (zsmalloc direct only) */
		if (s->a.kind != UT_ZS)
			return;
		if (!s->foreign) {
			struct zs_pool_config c;
			zs_pool_config_init(&c);
			c.checked = 1;
			c.deferred_worker = -1;
			c.deferred_capacity = 16;
			s->foreign = must_pool_create(&c);
			FUZZ_CHECK(s->foreign, "foreign pool");
		}
		h = zs_malloc(s->foreign, 1 + h % 4096);
		FUZZ_CHECK(!ZS_IS_ERR(h), "foreign malloc");
		if (is_known(s, h)) {
			zs_free(s->foreign, h);
			return;
		}
	} else if ((how & 0xc0) == 0x40 && s->nstale) {
		/* a stale handle (generations never wrap within one input's few thousand uses) */
		h = s->stale[h % (s->nstale < 32 ? s->nstale : 32)];
		if (is_known(s, h)) /* zblock has no generations: a reused slot is the same value */
			return;
	} else if ((how & 0xc0) == 0x80 && s->a.kind == UT_ZS) {
		/* a live multi-page object's packed tail: its internal handle, and its slot alone */
		struct obj *e = &s->o[h % MAXOBJ];
		if (!e->h || e->size <= s->page_size)
			return;
		read_lock(&s->a.zp->lock);
		unsigned long tail = zspage_tail(obj_to_zspage(s->a.zp, handle_to_obj(e->h)));
		read_unlock(&s->a.zp->lock);
		if (!tail)
			return;
		h = (h >> 8) & 1 ? tail : tail & (HANDLE_ADDR_MASK | HANDLE_GEN_MASK);
	} else if (!h || ZS_IS_ERR(h) || is_known(s, h)) {
		return;
	}
	t_flush(s);
	unsigned long pages = ut_pages(&s->a);
	switch ((how >> 1) % 5) {
	case 0:
		FUZZ_CHECK(ut_free(&s->a, h, 0) == -EINVAL, "free of a bad handle %lx", h);
		break;
	case 1:
		if (s->a.kind != UT_ZBLOCK) /* zblock has no deferred free */
			FUZZ_CHECK(ut_free(&s->a, h, 1) == -EINVAL, "deferred free of a bad handle %lx", h);
		break;
	case 2: {
		void *m = ut_read_begin(&s->a, h, 1 + (how >> 4), s->buf);
		FUZZ_CHECK(!m, "read_begin of a bad handle %lx -> %p", h, m);
		/* a caller that ends anyway must not disturb any other object */
		ut_read_end(&s->a, h, 1 + (how >> 4), m);
		break;
	}
	case 3:
		FUZZ_CHECK(ut_write(&s->a, h, s->buf, 1 + (how >> 4)) == -EINVAL, "write to a bad handle %lx",
			   h);
		break;
	default:
		if (s->a.kind == UT_ZS) {
			void *m = zs_map_object(s->a.zp, h, ZS_MM_RO);
			FUZZ_CHECK(!m, "map of a bad handle %lx -> %p", h, m);
			zs_unmap_object(s->a.zp, h);
		}
	}
	FUZZ_CHECK(ut_pages(&s->a) == pages && ut_objects(&s->a) == model_live(s),
		   "a refused handle changed the pool");
	if (how & 1)
		zs_free(s->foreign, h);
	/* every live object still reads back (a disturbed lock would hang or fail here) */
	for (int i = 0; i < MAXOBJ; i++)
		if (s->o[i].h)
			verify(s, &s->o[i], s->o[i].size, "after misuse");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size, 0 };
	static struct st s;
	/* buffers for the largest object, allocated once: per-input mappings cost more than the
	 * run (untouched, they cost no memory) */
	static unsigned char shadow[MAXOBJ][MAXBYTES], buf[2][MAXBYTES + 2 * 65536];
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < MAXOBJ; i++)
		s.o[i].bytes = shadow[i];
	s.buf = buf[0];
	s.buf2 = buf[1];
	if (!setup(&s, &in))
		return 0;
	int ops = 0;
	while (fin_more(&in) && ops++ < 4096) {
		unsigned op = fin_u8(&in);
		struct obj *e = &s.o[fin_u8(&in) % MAXOBJ];
		switch (op % 16) {
		case 0: case 1: case 2: case 3:
			if (!e->h)
				op_alloc(&s, e, &in);
			else
				op_free(&s, e, op >> 4);
			break;
		case 4: case 5:
			if (e->h)
				op_free(&s, e, op >> 4);
			break;
		case 6: case 7:
			if (e->h)
				op_rewrite(&s, e, &in);
			break;
		case 8: case 9:
			if (e->h)
				op_read(&s, e, &in, op >> 4);
			break;
		case 10:
			if (e->h && s.a.kind == UT_ZS)
				op_map(&s, e, op >> 4);
			break;
		case 11:
			op_compact(&s);
			break;
		case 12:
			t_flush(&s);
			break;
		case 13: {
			/* failure injection: fail after A more page allocations, B times (0: until reset) */
			unsigned a = fin_u8(&in), b = fin_u8(&in);
			t_fail_pages(&s, a == 255 ? UINT64_MAX : a % 32, b % 4);
			break;
		}
		case 14:
			if (s.checked)
				op_misuse(&s, &in);
			break;
		default:
			if (s.a.zp)
				zs_pool_trim(s.a.zp);
			else
				check_accounting(&s);
		}
	}

	/* End: every object reads back, free all, compact, no page left. */
	t_fail_pages(&s, UINT64_MAX, 0);
	for (int i = 0; i < MAXOBJ; i++)
		if (s.o[i].h)
			op_free(&s, &s.o[i], (unsigned)i);
	op_compact(&s);
	FUZZ_CHECK(ut_pages(&s.a) == 0, "%lu pages left after freeing everything", ut_pages(&s.a));
	ut_destroy(&s.a);
	if (s.foreign)
		zs_destroy_pool(s.foreign);
	return 0;
}
