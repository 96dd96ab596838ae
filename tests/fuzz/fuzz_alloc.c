/*
 * libFuzzer target: an operation interpreter over the allocator API.  The
 * input's first bytes choose the allocator and its config (zsmalloc called
 * directly or through the backend interface, zblock through the backend or
 * directly; page size 4K..64K, chain length and policy, class delta, free
 * mode, checked mode, deferred free with or without its worker and a small
 * queue, page limit, failure injection); the rest is a program of alloc,
 * free, deferred free, rewrite, read, legacy map, compact, trim and, in
 * checked mode, misuse (double free, garbage and foreign handles, end after
 * a failed begin).  A shadow copy of every object's bytes is compared on
 * every read and before every free; accounting is checked after every
 * compaction; at the end everything is freed and the pool must hold 0 pages.
 */
#include <errno.h>

#include "fuzz_common.h"
#include "zs/backend.h"
#include "zs/zblock.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

#define MAXOBJ 48

enum { T_ZS, T_ZS_BACKEND, T_ZBLOCK_BACKEND, T_ZBLOCK, T_NR };

struct obj {
	unsigned long h;
	size_t size;
	unsigned char *bytes; /* the shadow copy */
};

struct st {
	int kind, checked, injecting;
	size_t page_size, max_size, max_pages;
	struct zs_pool *zp, *foreign;
	struct zblock_pool *zb;
	struct zs_backend *be;
	struct obj o[MAXOBJ];
	unsigned long pending[64]; /* deferred frees not yet flushed: not garbage, not live */
	int npending;
	unsigned char *buf, *buf2;
	uint64_t seq;
};

static unsigned long t_malloc(struct st *s, size_t size)
{
	switch (s->kind) {
	case T_ZS: return zs_malloc(s->zp, size);
	case T_ZBLOCK: return zblock_malloc(s->zb, size);
	default: return zs_backend_malloc(s->be, size);
	}
}

static int t_free(struct st *s, unsigned long h, int deferred)
{
	switch (s->kind) {
	case T_ZS: return deferred ? zs_free_deferred(s->zp, h) : zs_free(s->zp, h);
	case T_ZBLOCK: return zblock_free(s->zb, h);
	default: return deferred ? zs_backend_free_deferred(s->be, h) : zs_backend_free(s->be, h);
	}
}

static void t_flush(struct st *s)
{
	if (s->kind == T_ZS)
		zs_free_deferred_flush(s->zp);
	else if (s->be)
		zs_backend_flush(s->be);
	s->npending = 0;
}

static void *t_read_begin(struct st *s, unsigned long h, size_t len, void *local)
{
	switch (s->kind) {
	case T_ZS: return zs_obj_read_begin(s->zp, h, len, local);
	case T_ZBLOCK: return zblock_obj_read_begin(s->zb, h, len, local);
	default: return zs_backend_read_begin(s->be, h, len, local);
	}
}

static void t_read_end(struct st *s, unsigned long h, size_t len, void *mem)
{
	switch (s->kind) {
	case T_ZS: zs_obj_read_end(s->zp, h, len, mem); break;
	case T_ZBLOCK: zblock_obj_read_end(s->zb, h, len, mem); break;
	default: zs_backend_read_end(s->be, h, len, mem);
	}
}

static int t_write(struct st *s, unsigned long h, const void *src, size_t len)
{
	switch (s->kind) {
	case T_ZS: return zs_obj_write(s->zp, h, src, len);
	case T_ZBLOCK: return zblock_obj_write(s->zb, h, src, len);
	default: return zs_backend_write(s->be, h, src, len);
	}
}

static unsigned long t_pages(struct st *s)
{
	if (s->zp)
		return zs_get_total_pages(s->zp);
	if (s->zb)
		return zblock_get_total_pages(s->zb);
	struct zs_backend_stats bs;
	zs_backend_stats(s->be, &bs);
	return bs.pages;
}

static unsigned long t_objects(struct st *s)
{
	if (s->zp)
		return zs_pool_objects(s->zp);
	if (s->zb)
		return zblock_pool_objects(s->zb);
	struct zs_backend_stats bs;
	zs_backend_stats(s->be, &bs);
	return bs.objects;
}

static void t_fail_pages(struct st *s, uint64_t after, uint64_t count)
{
	if (s->zp)
		zs_pool_fail_pages(s->zp, after, count);
	else if (s->zb)
		zblock_pool_fail_pages(s->zb, after, count);
	else
		return;
	s->injecting = after != UINT64_MAX;
}

static void verify(struct st *s, struct obj *e, size_t len, const char *why)
{
	void *m = t_read_begin(s, e->h, len, s->buf);
	FUZZ_CHECK(m, "%s: read_begin(size %zu, len %zu) NULL", why, e->size, len);
	int bad = memcmp(m, e->bytes, len);
	t_read_end(s, e->h, len, m);
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
	FUZZ_CHECK(t_objects(s) == live, "objects %lu, model %lu", t_objects(s), live);
	if (s->zp) {
		unsigned long pages = 0, used = 0;
		struct zs_class_stats cs;
		for (int i = 0; i < zs_class_count(s->zp); i++) {
			if (zs_class_stats(s->zp, i, &cs))
				continue;
			pages += cs.pages_used;
			used += cs.obj_used;
			FUZZ_CHECK(cs.obj_used <= cs.obj_allocated, "class %d used > allocated", i);
		}
		FUZZ_CHECK(pages == zs_get_total_pages(s->zp), "class pages %lu, pool %lu", pages,
			   zs_get_total_pages(s->zp));
		FUZZ_CHECK(used == live, "class objects %lu, model %lu", used, live);
	} else if (s->zb) {
		unsigned long pages = 0, used = 0;
		struct zblock_class_stats cs;
		for (int i = 0; i < zblock_class_count(s->zb); i++) {
			if (zblock_class_stats(s->zb, i, &cs))
				continue;
			pages += cs.pages;
			used += cs.objects;
		}
		FUZZ_CHECK(pages == zblock_get_total_pages(s->zb), "zblock class pages %lu, pool %lu",
			   pages, zblock_get_total_pages(s->zb));
		FUZZ_CHECK(used == live, "zblock class objects %lu, model %lu", used, live);
	} else if (s->checked) {
		/* only a checked backend keeps request sizes (src/backend/backend.c) */
		struct zs_backend_stats bs;
		zs_backend_stats(s->be, &bs);
		FUZZ_CHECK(bs.object_bytes == bytes, "backend object_bytes %zu, model %lu",
			   bs.object_bytes, bytes);
	}
	if (s->max_pages)
		FUZZ_CHECK(t_pages(s) <= s->max_pages, "pages %lu over the limit %zu", t_pages(s),
			   s->max_pages);
}

static int setup(struct st *s, struct fin *in)
{
	unsigned b0 = fin_u8(in), b1 = fin_u8(in), b2 = fin_u8(in), b3 = fin_u8(in);
	s->kind = b0 % T_NR;
	/* 4K in half the inputs: a fresh 64K-page pool touches up to 1 MiB per new zspage,
	 * which costs more than the rest of a run (test_model_check weights sizes evenly) */
	static const unsigned shifts[8] = { 0, 0, 0, 0, 1, 2, 3, 4 };
	s->page_size = (size_t)4096 << shifts[(b0 >> 2) & 7];
	s->checked = (b0 >> 5) & 1;
	s->max_pages = (b1 & 1) ? 1 + (b1 >> 1) % 96 : 0;
	if (s->kind == T_ZS || s->kind == T_ZS_BACKEND) {
		struct zs_pool_config c;
		zs_pool_config_init(&c);
		c.page_size = s->page_size;
		c.max_chain = 1 + (b2 & 15);
		c.chain_policy = (enum zs_chain_policy)((b2 >> 4) & 1);
		c.free_mode = (enum zs_free_mode)(((b2 >> 5) & 3) % 3);
		static const unsigned deltas[] = { 0, 8, 16, 24, 32, 64, 128, 256 };
		c.class_delta = deltas[b3 & 7];
		c.deferred_worker = (b3 >> 3) % 4 == 0 ? 1 : -1;
		c.deferred_capacity = (b3 >> 5) ? (size_t)1 << (b3 >> 5) : 0;
		if (!c.deferred_capacity && c.page_size <= 8192)
			c.deferred_capacity = 256; /* the default is 32768 cells: costly per input */
		c.checked = s->checked;
		c.max_pages = s->max_pages;
		if (s->kind == T_ZS) {
			s->zp = zs_create_pool(&c);
			FUZZ_CHECK(s->zp, "zs_create_pool: errno %d", errno);
			s->max_size = s->page_size;
		} else {
			struct zs_backend_config bc;
			zs_backend_config_init(&bc);
			bc.page_size = s->page_size;
			bc.max_pages = s->max_pages;
			bc.checked = s->checked;
			bc.zs = c;
			s->be = zs_backend_create(&bc);
			FUZZ_CHECK(s->be, "zs_backend_create(zsmalloc): errno %d", errno);
			s->zp = zs_backend_zspool(s->be);
			s->max_size = s->page_size;
		}
	} else {
		if (s->kind == T_ZBLOCK) {
			struct zblock_config c;
			zblock_config_init(&c);
			c.page_size = s->page_size;
			c.max_pages = s->max_pages;
			c.checked = s->checked;
			c.huge = b2 & 1;
			s->zb = zblock_create_pool(&c);
			FUZZ_CHECK(s->zb, "zblock_create_pool: errno %d", errno);
			s->max_size = zblock_max_size(s->zb);
		} else {
			struct zs_backend_config bc;
			zs_backend_config_init(&bc);
			bc.kind = "zblock";
			bc.page_size = s->page_size;
			bc.max_pages = s->max_pages;
			bc.checked = s->checked;
			s->be = zs_backend_create(&bc);
			FUZZ_CHECK(s->be, "zs_backend_create(zblock): errno %d", errno);
			s->max_size = s->page_size; /* the backend turns huge on */
		}
	}
	return 1;
}

static void op_alloc(struct st *s, struct obj *e, struct fin *in)
{
	unsigned v = fin_u16(in);
	size_t size;
	switch (v & 3) {
	case 0: size = 1 + (v >> 2) % 256; break;
	case 1: size = (v >> 2) % (s->max_size + 2); break; /* 0 and max+1 included */
	case 2: size = s->max_size - (v >> 2) % 64; break;
	default: size = 1 + ((size_t)(v >> 2) * 4 + 3) % s->max_size;
	}
	unsigned long pages = t_pages(s);
	unsigned long h = t_malloc(s, size);
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
		FUZZ_CHECK(t_pages(s) <= pages && t_objects(s) == model_live(s),
			   "failed malloc changed pages %lu -> %lu or objects", pages, t_pages(s));
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
	fuzz_fill(e->bytes, size, ++s->seq);
	FUZZ_CHECK(t_write(s, h, e->bytes, size) == 0, "write of a new object (%zu)", size);
}

static void op_free(struct st *s, struct obj *e, unsigned how)
{
	verify(s, e, e->size, "before free");
	int deferred = how & 1;
	if (deferred && s->npending == 64)
		t_flush(s);
	int ret = t_free(s, e->h, deferred);
	FUZZ_CHECK(ret == 0, "free -> %d", ret);
	if (deferred) {
		s->pending[s->npending++] = e->h;
	} else if (s->checked && (how & 2)) {
		ret = t_free(s, e->h, 0);
		FUZZ_CHECK(ret == -EINVAL, "double free in checked mode -> %d", ret);
		void *m = t_read_begin(s, e->h, 1, s->buf);
		FUZZ_CHECK(!m, "read_begin of a freed handle in checked mode -> %p", m);
		FUZZ_CHECK(t_write(s, e->h, e->bytes, 1) == -EINVAL, "write to a freed handle");
	}
	e->h = 0;
}

static void op_rewrite(struct st *s, struct obj *e, struct fin *in)
{
	unsigned v = fin_u16(in);
	size_t len = (v & 1) ? e->size : 1 + (v >> 1) % e->size;
	fuzz_fill(s->buf2, len, ++s->seq);
	int ret = t_write(s, e->h, s->buf2, len);
	FUZZ_CHECK(ret == 0, "write(%zu of %zu) -> %d", len, e->size, ret);
	memcpy(e->bytes, s->buf2, len);
	if (v & 2) {
		/* longer than the object: must fail unless the slot happens to be big enough; we only
		 * require that a failure changes nothing */
		size_t big = e->size + 1 + (v >> 2) % 64;
		if (big <= s->page_size) {
			fuzz_fill(s->buf2, big, ++s->seq);
			if (t_write(s, e->h, s->buf2, big) == 0)
				memcpy(e->bytes, s->buf2, e->size);
		}
	}
}

static void op_read(struct st *s, struct obj *e, struct fin *in)
{
	unsigned v = fin_u16(in);
	size_t len = (v & 1) ? e->size : 1 + (v >> 1) % e->size;
	verify(s, e, len, "read");
}

/* The legacy API (zsmalloc only): RO verifies, WO/RW write a new pattern through the mapping. */
static void op_map(struct st *s, struct obj *e, unsigned how)
{
	enum zs_mapmode mm = (enum zs_mapmode)(how % 3);
	unsigned char *m = zs_map_object(s->zp, e->h, mm);
	FUZZ_CHECK(m, "map NULL");
	if (mm != ZS_MM_WO)
		FUZZ_CHECK(!memcmp(m, e->bytes, e->size), "mapped object differs from its shadow");
	if (mm != ZS_MM_RO) {
		fuzz_fill(e->bytes, e->size, ++s->seq);
		memcpy(m, e->bytes, e->size);
	}
	zs_unmap_object(s->zp, e->h);
}

static void op_compact(struct st *s)
{
	t_flush(s);
	unsigned long freeable = 0;
	if (s->zp) {
		struct zs_class_stats cs;
		for (int i = 0; i < zs_class_count(s->zp); i++)
			if (!zs_class_stats(s->zp, i, &cs))
				freeable += cs.freeable;
	}
	unsigned long got = s->zp ? zs_compact(s->zp) : s->zb ? zblock_compact(s->zb)
							      : zs_backend_compact(s->be);
	if (s->zp)
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
		if (s->kind != T_ZS)
			return;
		if (!s->foreign) {
			struct zs_pool_config c;
			zs_pool_config_init(&c);
			c.checked = 1;
			c.deferred_worker = -1;
			c.deferred_capacity = 16;
			s->foreign = zs_create_pool(&c);
			FUZZ_CHECK(s->foreign, "foreign pool");
		}
		h = zs_malloc(s->foreign, 1 + h % 4096);
		FUZZ_CHECK(!ZS_IS_ERR(h), "foreign malloc");
		if (is_known(s, h)) {
			zs_free(s->foreign, h);
			return;
		}
	} else if (!h || ZS_IS_ERR(h) || is_known(s, h)) {
		return;
	}
	t_flush(s);
	unsigned long pages = t_pages(s);
	switch ((how >> 1) % 5) {
	case 0:
		FUZZ_CHECK(t_free(s, h, 0) == -EINVAL, "free of a bad handle %lx", h);
		break;
	case 1:
		if (s->kind != T_ZBLOCK) /* zblock has no deferred free */
			FUZZ_CHECK(t_free(s, h, 1) == -EINVAL, "deferred free of a bad handle %lx", h);
		break;
	case 2: {
		void *m = t_read_begin(s, h, 1 + (how >> 4), s->buf);
		FUZZ_CHECK(!m, "read_begin of a bad handle %lx -> %p", h, m);
		/* a caller that ends anyway must not disturb any other object */
		t_read_end(s, h, 1 + (how >> 4), m);
		break;
	}
	case 3:
		FUZZ_CHECK(t_write(s, h, s->buf, 1 + (how >> 4)) == -EINVAL, "write to a bad handle %lx",
			   h);
		break;
	default:
		if (s->kind == T_ZS) {
			void *m = zs_map_object(s->zp, h, ZS_MM_RO);
			FUZZ_CHECK(!m, "map of a bad handle %lx -> %p", h, m);
			zs_unmap_object(s->zp, h);
		}
	}
	FUZZ_CHECK(t_pages(s) == pages && t_objects(s) == model_live(s),
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
	/* buffers for the largest page, allocated once: per-input mappings cost more than the run */
	static unsigned char shadow[MAXOBJ][65536], buf[2][2 * 65536 + 64];
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
				op_read(&s, e, &in);
			break;
		case 10:
			if (e->h && s.kind == T_ZS)
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
			if (s.zp)
				zs_pool_trim(s.zp);
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
	FUZZ_CHECK(t_pages(&s) == 0, "%lu pages left after freeing everything", t_pages(&s));
	if (s.kind == T_ZS)
		zs_destroy_pool(s.zp);
	else if (s.kind == T_ZBLOCK)
		zblock_destroy_pool(s.zb);
	else
		zs_backend_destroy(s.be);
	if (s.foreign)
		zs_destroy_pool(s.foreign);
	return 0;
}
