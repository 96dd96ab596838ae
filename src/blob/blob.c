/*
 * The blob store (zs/blob.h): owns the object format (a tag byte, varint
 * lengths, an optional key, then the value raw or compressed), the pool of
 * compression contexts, the per-thread buffers, the memory count and limit,
 * and the compaction steps from calls; compaction when idle is the pool's
 * own (zs_pool_config.autocompact_ms, which the compact_* knobs set).  The
 * cache (cache.c) builds on it through internal.h; the pool under it is a
 * plain zsmalloc pool.
 *
 * Why objects carry their own lengths: a zsmalloc slot is rounded up to its
 * class size and the pool does not keep the requested size, so without a
 * header every caller would keep the length (and the codec) beside the
 * handle, which is most of what an index entry costs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/err.h"
#include "common/stats_copy.h"
#include "blob/internal.h"
#include "zsmalloc/compact.h"
#include "zs/compress.h"
#include "zsmalloc/internal.h" /* obj_read_begin_own: the cache's reads of its own handles */

/*
 * Tag byte: 0xA0 marks an object of ours, bit 2 a key, bits 0-1 the codec:
 * the format it decodes with, so ZS_BLOB_ZSTD_HUF (a plain zstd frame, and
 * 4, past two bits) is tagged ZS_BLOB_ZSTD.
 */
#define TAG_MAGIC 0xA0u
#define TAG_MASK 0xF8u
#define TAG_KEY 0x04u
#define TAG_CODEC(c) ((c) == ZS_BLOB_ZSTD_HUF ? (unsigned)ZS_BLOB_ZSTD : (unsigned)(c))

#define MAX_CTX 64

struct ctx_slot {
	pthread_mutex_t lock;
	struct zs_comp *c; /* built by the first thread that takes the slot */
} __attribute__((aligned(64)));

struct zs_blob {
	struct zs_pool *pool;
	struct zs_blob_config cfg;   /* defaults resolved; dict points at dict_copy */
	void *dict_copy;
	const char *comp_name;       /* NULL for ZS_BLOB_NONE */
	size_t max_len;              /* largest value */
	size_t max_obj;              /* largest object (pool max_object_size) */
	size_t page_size;
	size_t ctx_est;              /* estimated bytes of one context */

	unsigned nctx;
	struct ctx_slot *ctx;
	atomic_uint nctx_built;

	/* Accounting (relaxed: statistics and the policy's triggers, not synchronisation). */
	atomic_ullong objects, value_bytes, stored_bytes, raw_objects;
	atomic_ullong freed_bytes;   /* since the last completed pass */
	atomic_ullong steps, passes, pages_compacted, refusals;
	atomic_llong limit_delta;     /* exact count less the cheap one (blob_over_limit) */
	atomic_uint limit_tick;

	/* Compaction: one compactor of this store at a time (calls try, never wait). */
	pthread_mutex_t cmu;
	unsigned cursor;             /* under cmu */
	atomic_int pass_open;        /* cursor != 0, for readers without cmu */
	unsigned long long pass_start_freed;
};

/* ---- per-thread buffers ----------------------------------------------- */

struct tbuf {
	uint8_t *p;
	size_t cap;
	int busy;
};

static pthread_key_t tbuf_key;
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;
static int tbuf_key_ok;

static void tbuf_free(void *v)
{
	struct tbuf *t = v;
	if (t) {
		free(t->p);
		free(t);
	}
}

static void tbuf_init(void)
{
	tbuf_key_ok = pthread_key_create(&tbuf_key, tbuf_free) == 0;
}

/*
 * A buffer of n bytes: the thread's own (grown as needed) unless a call
 * further up this thread's stack holds it (a read callback calling the store
 * again), then one of its own.  NULL without memory.
 */
static void *buf_get(size_t n)
{
	pthread_once(&tbuf_once, tbuf_init);
	struct tbuf *t = tbuf_key_ok ? pthread_getspecific(tbuf_key) : NULL;
	if (tbuf_key_ok && !t) {
		t = calloc(1, sizeof(*t));
		if (t && pthread_setspecific(tbuf_key, t)) {
			free(t);
			t = NULL;
		}
	}
	if (!t || t->busy)
		return malloc(n ? n : 1);
	if (t->cap < n) {
		uint8_t *p = realloc(t->p, n);
		if (!p)
			return NULL;
		t->p = p;
		t->cap = n;
	}
	t->busy = 1;
	return t->p;
}

static void buf_put(void *p)
{
	struct tbuf *t = tbuf_key_ok ? pthread_getspecific(tbuf_key) : NULL;
	if (t && t->busy && p == t->p)
		t->busy = 0;
	else
		free(p);
}

/* ---- compression contexts --------------------------------------------- */

static _Thread_local unsigned ctx_pref_plus1;
static atomic_uint ctx_next;

/* A context for this thread, locked; NULL without memory (-ENOMEM) or on a create error. */
static struct ctx_slot *ctx_take(struct zs_blob *s, int *err)
{
	if (!ctx_pref_plus1)
		ctx_pref_plus1 = atomic_fetch_add_explicit(&ctx_next, 1, memory_order_relaxed) + 1;
	unsigned start = (ctx_pref_plus1 - 1) % s->nctx;
	struct ctx_slot *slot = NULL;
	for (unsigned i = 0; i < s->nctx; i++) {
		struct ctx_slot *t = &s->ctx[(start + i) % s->nctx];
		if (pthread_mutex_trylock(&t->lock) == 0) {
			slot = t;
			break;
		}
	}
	if (!slot) {
		slot = &s->ctx[start];
		pthread_mutex_lock(&slot->lock);
	}
	if (!slot->c) {
		struct zs_comp_params p = { .level = s->cfg.level, .dict = s->cfg.dict,
					    .dict_len = s->cfg.dict_len };
		int rc = zs_comp_create(&(struct zs_comp_config){ .name = s->comp_name, .max_src = s->max_obj, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &slot->c, NULL, 0);
		if (rc) {
			slot->c = NULL;
			pthread_mutex_unlock(&slot->lock);
			*err = rc;
			return NULL;
		}
		atomic_fetch_add_explicit(&s->nctx_built, 1, memory_order_relaxed);
	}
	return slot;
}

static void ctx_give(struct ctx_slot *slot)
{
	pthread_mutex_unlock(&slot->lock);
}

/* ---- object format ---------------------------------------------------- */

static size_t varint_len(size_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *varint_put(uint8_t *p, size_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Decode a varint of at most 3 bytes from p[0..n); returns bytes used, 0 if malformed. */
static size_t varint_get(const uint8_t *p, size_t n, size_t *v)
{
	size_t x = 0;
	for (size_t i = 0; i < 3 && i < n; i++) {
		x |= (size_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = x;
			return i + 1;
		}
	}
	return 0;
}

static size_t hdr_len(size_t vlen, size_t plen, int compressed, size_t klen)
{
	return 1 + varint_len(vlen) + (compressed ? varint_len(plen) : 0) + (klen ? varint_len(klen) : 0);
}

static int parse_hdr(const uint8_t *p, size_t n, struct blob_obj *o)
{
	if ((p[0] & TAG_MASK) != TAG_MAGIC)
		return -EIO;
	o->codec = p[0] & 3u;
	size_t at = 1, k;
	if (!(k = varint_get(p + at, n - at, &o->vlen)))
		return -EIO;
	at += k;
	o->plen = o->vlen;
	if (o->codec != ZS_BLOB_NONE) {
		if (!(k = varint_get(p + at, n - at, &o->plen)))
			return -EIO;
		at += k;
	}
	o->klen = 0;
	if (p[0] & TAG_KEY) {
		if (!(k = varint_get(p + at, n - at, &o->klen)) || !o->klen)
			return -EIO;
		at += k;
	}
	o->hdr = at;
	o->size = at + o->klen + o->plen;
	if (o->size < BLOB_MIN_OBJ)
		o->size = BLOB_MIN_OBJ;
	return 0;
}

size_t blob_max_obj(const struct zs_blob *s)
{
	return s->max_obj;
}

int blob_encode(struct zs_blob *s, const void *key, size_t klen, const void *val, size_t vlen,
		struct blob_enc *e)
{
	if (vlen > s->max_len || klen > s->max_len ||
	    hdr_len(vlen, vlen, 0, klen) + klen + vlen > s->max_obj)
		return -ENOSPC;
	/* Room: the largest header, the key, the value (raw or a compressor's output
	 * capped below it), and padding to the smallest object. */
	size_t cap = BLOB_MAX_HDR + klen + vlen + BLOB_MIN_OBJ;
	uint8_t *b = buf_get(cap);
	if (!b)
		return -ENOMEM;
	uint8_t *pay = b + BLOB_MAX_HDR + klen;
	size_t plen = vlen;
	int compressed = 0;
	if (s->comp_name && vlen >= s->cfg.min_compress) {
		/* Kept compressed only if it saves a sixteenth: the cap makes the compressor stop early. */
		size_t want = vlen - vlen / 16;
		if (want > 0) {
			int err = 0;
			struct ctx_slot *slot = ctx_take(s, &err);
			if (!slot) {
				buf_put(b);
				return err == -ENOMEM ? -ENOMEM : -EIO;
			}
			int n = zs_compress(slot->c, val, vlen, pay, want);
			ctx_give(slot);
			if (n > 0 && (size_t)n < want) {
				plen = (size_t)n;
				compressed = 1;
			} else if (n < 0 && n != -ENOSPC) {
				buf_put(b);
				return n == -ENOMEM ? -ENOMEM : -EIO;
			}
		}
	}
	if (!compressed && vlen)
		memcpy(pay, val, vlen);
	size_t hl = hdr_len(vlen, plen, compressed, klen);
	uint8_t *o = b + BLOB_MAX_HDR - hl;
	uint8_t *p = o;
	*p++ = (uint8_t)(TAG_MAGIC | (klen ? TAG_KEY : 0) |
			 (compressed ? TAG_CODEC(s->cfg.codec) : ZS_BLOB_NONE));
	p = varint_put(p, vlen);
	if (compressed)
		p = varint_put(p, plen);
	if (klen)
		p = varint_put(p, klen);
	if (klen)
		memcpy(p, key, klen);
	size_t size = hl + klen + plen;
	if (size < BLOB_MIN_OBJ) {
		memset(o + size, 0, BLOB_MIN_OBJ - size);
		size = BLOB_MIN_OBJ;
	}
	*e = (struct blob_enc){ .obj = o, .size = size, .vlen = vlen, .raw = !compressed, .mem = b };
	return 0;
}

void blob_enc_done(struct blob_enc *e)
{
	if (e->mem)
		buf_put(e->mem);
	e->mem = NULL;
}

/* ---- accounting, limit, compaction ------------------------------------ */

static size_t fixed_bytes(struct zs_blob *s)
{
	return sizeof(*s) + s->nctx * sizeof(struct ctx_slot) + s->cfg.dict_len +
	       atomic_load_explicit(&s->nctx_built, memory_order_relaxed) * s->ctx_est;
}

/* What the limit counts, without the providers' locks: pool pages, 8 bytes of handle an object. */
static size_t cheap_base(struct zs_blob *s)
{
	return zs_get_total_pages(s->pool) * s->page_size +
	       (size_t)atomic_load_explicit(&s->objects, memory_order_relaxed) * sizeof(unsigned long) +
	       fixed_bytes(s);
}

int blob_has_limit(const struct zs_blob *s)
{
	return s->cfg.mem_limit != 0;
}

size_t blob_limit(const struct zs_blob *s)
{
	return s->cfg.mem_limit;
}

/*
 * The cheap count misses parked zspages, whole handle chunks and the pool's
 * tables; their sum (delta) changes slowly, so it is measured exactly every
 * 256 calls and on every call within an eighth of the limit.
 */
int blob_over_limit(struct zs_blob *s, size_t extra)
{
	size_t limit = s->cfg.mem_limit;
	if (!limit)
		return 0;
	long long base = (long long)cheap_base(s);
	long long est = base + atomic_load_explicit(&s->limit_delta, memory_order_relaxed);
	unsigned tick = atomic_fetch_add_explicit(&s->limit_tick, 1, memory_order_relaxed);
	if (est + (long long)extra + (long long)(limit / 8) > (long long)limit || !(tick & 255)) {
		size_t cached;
		long long ex = (long long)(zs_pool_mem_bytes(s->pool, &cached) - cached + fixed_bytes(s));
		atomic_store_explicit(&s->limit_delta, ex - base, memory_order_relaxed);
		est = ex;
	}
	return est + (long long)extra > (long long)limit;
}

/*
 * cmu held: one step; ends the pass when the cursor comes back to 0.  With
 * wait, a compactor already running (the pool's idle compaction) is waited
 * for and the step runs after it: the callers that wait need memory now.
 * Without, the step is skipped (0) and the pass stays where it was.
 */
static int step_locked(struct zs_blob *s, int wait)
{
	if (s->cursor == 0)
		s->pass_start_freed = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
	long f = compact_step(s->pool, &s->cursor, s->cfg.compact_budget, wait);
	if (f < 0)
		return 0;
	atomic_fetch_add_explicit(&s->steps, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->pages_compacted, (unsigned long)f, memory_order_relaxed);
	atomic_store_explicit(&s->pass_open, s->cursor != 0, memory_order_relaxed);
	if (s->cursor == 0) {
		/* What was freed during the pass may sit behind the cursor: only the count at its start goes. */
		unsigned long long cur = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(
			&s->freed_bytes, &cur, cur > s->pass_start_freed ? cur - s->pass_start_freed : 0,
			memory_order_relaxed, memory_order_relaxed))
			;
		atomic_fetch_add_explicit(&s->passes, 1, memory_order_relaxed);
	}
	return 1;
}

static int compaction_due(struct zs_blob *s)
{
	unsigned long long freed = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
	if (freed < s->cfg.compact_min_bytes)
		return 0;
	unsigned long long stored = atomic_load_explicit(&s->stored_bytes, memory_order_relaxed);
	return freed * 100 >= (unsigned long long)s->cfg.compact_ratio_pct * stored;
}

static void maybe_step(struct zs_blob *s)
{
	if (s->cfg.compact_ratio_pct < 0)
		return;
	/* A pass once begun goes on step by step; a new one starts only when due. */
	if (!atomic_load_explicit(&s->pass_open, memory_order_relaxed) && !compaction_due(s))
		return;
	if (pthread_mutex_trylock(&s->cmu))
		return;
	if (s->cursor || compaction_due(s))
		step_locked(s, 0); /* a compactor running: this call's share is its */
	pthread_mutex_unlock(&s->cmu);
}

size_t blob_freed_bytes(struct zs_blob *s)
{
	return (size_t)atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
}

void blob_step_now(struct zs_blob *s)
{
	pthread_mutex_lock(&s->cmu);
	step_locked(s, 1);
	pthread_mutex_unlock(&s->cmu);
}

void blob_pass_now(struct zs_blob *s)
{
	pthread_mutex_lock(&s->cmu);
	do
		step_locked(s, 1);
	while (s->cursor);
	pthread_mutex_unlock(&s->cmu);
}

void blob_after_free(struct zs_blob *s)
{
	maybe_step(s);
}

/* ---- objects ---------------------------------------------------------- */

unsigned long blob_store_enc(struct zs_blob *s, const struct blob_enc *e)
{
	unsigned long h = zs_malloc_write(s->pool, e->obj, e->size);
	if (ZS_IS_ERR(h))
		return h;
	atomic_fetch_add_explicit(&s->objects, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->value_bytes, e->vlen, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->stored_bytes, e->size, memory_order_relaxed);
	if (e->raw)
		atomic_fetch_add_explicit(&s->raw_objects, 1, memory_order_relaxed);
	return h;
}

int blob_head(struct zs_blob *s, unsigned long h, struct blob_obj *o)
{
	uint8_t tmp[BLOB_MIN_OBJ];
	if (!h || ZS_IS_ERR(h))
		return -EINVAL;
	const uint8_t *p = zs_obj_read_begin(s->pool, h, BLOB_MIN_OBJ, tmp);
	if (!p)
		return -EINVAL;
	int rc = parse_hdr(p, BLOB_MIN_OBJ, o);
	zs_obj_read_end(s->pool, h, BLOB_MIN_OBJ, (void *)p);
	if (!rc && (o->size > s->max_obj || o->plen > s->max_obj))
		rc = -EIO;
	return rc;
}

int blob_free_obj(struct zs_blob *s, unsigned long h, const struct blob_obj *o)
{
	int rc = zs_free(s->pool, h);
	if (rc)
		return rc;
	atomic_fetch_sub_explicit(&s->objects, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&s->value_bytes, o->vlen, memory_order_relaxed);
	atomic_fetch_sub_explicit(&s->stored_bytes, o->size, memory_order_relaxed);
	if (o->codec == ZS_BLOB_NONE)
		atomic_fetch_sub_explicit(&s->raw_objects, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->freed_bytes, o->size, memory_order_relaxed);
	return 0;
}

/* Decode the payload at p into dst (o->vlen bytes). */
static int decode(struct zs_blob *s, const struct blob_obj *o, const uint8_t *p, void *dst)
{
	if (o->codec == ZS_BLOB_NONE) {
		if (o->vlen)
			memcpy(dst, p, o->vlen);
		return 0;
	}
	if (o->codec != TAG_CODEC(s->cfg.codec) || !s->comp_name)
		return -EIO;
	int err = 0;
	struct ctx_slot *slot = ctx_take(s, &err);
	if (!slot)
		return err == -ENOMEM ? -ENOMEM : -EIO;
	int n = zs_decompress(slot->c, p, o->plen, dst, o->vlen);
	ctx_give(slot);
	return n == (int)o->vlen ? 0 : -EIO;
}

int blob_read_obj(struct zs_blob *s, unsigned long h, const struct blob_obj *o, const void *key,
		  size_t klen, zs_blob_read_fn fn, void *arg, int *fn_ret, void *buf)
{
	size_t total = o->hdr + o->klen + o->plen;
	if (total < BLOB_MIN_OBJ)
		total = BLOB_MIN_OBJ;
	/* One buffer: the object's copy (when it spans pages) and, for fn, the decoded value. */
	int need_val = fn && o->codec != ZS_BLOB_NONE;
	uint8_t *tmp = buf_get(total + (need_val ? o->vlen : 0));
	if (!tmp)
		return -ENOMEM;
	const uint8_t *p = zs_obj_read_begin(s->pool, h, total, tmp);
	if (!p) {
		buf_put(tmp);
		return -EINVAL;
	}
	int rc = 0;
	if (key && (o->klen != klen || memcmp(p + o->hdr, key, klen)))
		rc = 1;
	if (rc == 0) {
		const uint8_t *pay = p + o->hdr + o->klen;
		if (buf)
			rc = decode(s, o, pay, buf);
		else if (fn && o->codec == ZS_BLOB_NONE)
			*fn_ret = fn(pay, o->vlen, arg);
		else if (fn) {
			uint8_t *val = tmp + total;
			rc = decode(s, o, pay, val);
			if (!rc)
				*fn_ret = fn(val, o->vlen, arg);
		}
	}
	zs_obj_read_end(s->pool, h, total, (void *)p);
	buf_put(tmp);
	return rc;
}

int blob_read_key(struct zs_blob *s, unsigned long h, const struct blob_obj *o, void *dst)
{
	size_t n = o->hdr + o->klen;
	if (n < BLOB_MIN_OBJ)
		n = BLOB_MIN_OBJ;
	uint8_t *tmp = buf_get(n);
	if (!tmp)
		return -ENOMEM;
	const uint8_t *p = zs_obj_read_begin(s->pool, h, n, tmp);
	if (!p) {
		buf_put(tmp);
		return -EINVAL;
	}
	memcpy(dst, p + o->hdr, o->klen);
	zs_obj_read_end(s->pool, h, n, (void *)p);
	buf_put(tmp);
	return 0;
}

/*
 * One pin for a lookup: the index recorded the object's size, so the header,
 * the key and the payload come from a single read (blob_head then
 * blob_read_obj pinned it twice).  The handle is the cache's own, so the read
 * skips checked mode's validation (obj_read_begin_own), which at begin and
 * at end cost more than the rest of the path beside the decompression.  A
 * key check alone reads only the header and the key.  Objects that span
 * pages are stitched in a stack buffer when small, so the thread's buffer
 * stays free for the decoded value.
 */
int blob_read_sized(struct zs_blob *s, unsigned long h, size_t size, const void *key, size_t klen,
		    zs_blob_read_fn fn, void *arg, int *fn_ret, void *buf, size_t cap, size_t *vlen)
{
	if (size < BLOB_MIN_OBJ || size > s->max_obj)
		return -EIO;
	int want_val = fn || buf;
	size_t mem = want_val ? size : BLOB_MAX_HDR + klen;
	if (mem > size)
		mem = size;
	uint8_t stack[4096];
	uint8_t *tmp = mem <= sizeof(stack) ? stack : buf_get(mem);
	if (!tmp)
		return -ENOMEM;
	const uint8_t *p = obj_read_begin_own(s->pool, h, mem, tmp);
	if (!p) {
		if (tmp != stack)
			buf_put(tmp);
		return -EINVAL;
	}
	struct blob_obj o;
	int rc = parse_hdr(p, mem, &o);
	if (!rc && o.size != size)
		rc = -EIO;
	/* A key of another length is a miss before its bytes are known to lie within mem. */
	if (!rc && (o.klen != klen || o.hdr + klen > mem || memcmp(p + o.hdr, key, klen)))
		rc = 1;
	if (!rc) {
		*vlen = o.vlen;
		const uint8_t *pay = p + o.hdr + o.klen;
		if (buf && !fn) {
			if (cap < o.vlen)
				rc = 2;
			else
				rc = decode(s, &o, pay, buf);
		} else if (fn && o.codec == ZS_BLOB_NONE) {
			*fn_ret = fn(pay, o.vlen, arg);
		} else if (fn) {
			uint8_t *val = buf_get(o.vlen);
			if (!val) {
				rc = -ENOMEM;
			} else {
				rc = decode(s, &o, pay, val);
				if (!rc)
					*fn_ret = fn(val, o.vlen, arg);
				buf_put(val);
			}
		}
	}
	obj_read_end_own(s->pool, h, mem, (void *)p);
	if (tmp != stack)
		buf_put(tmp);
	return rc;
}

/* ---- public calls ----------------------------------------------------- */

void zs_blob_config_init(struct zs_blob_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->codec = ZS_BLOB_LZ4;
	zs_pool_config_init_app(&cfg->pool);
	cfg->pool.checked = 1;
	cfg->pool.name = "blob";
}

static size_t ctx_estimate(enum zs_blob_codec c, size_t max_obj)
{
	switch (c) {
	case ZS_BLOB_LZ4:
		return 16384 + 2 * max_obj;
	case ZS_BLOB_LZ4HC:
		return 262144 + 2 * max_obj;
	case ZS_BLOB_ZSTD:
	case ZS_BLOB_ZSTD_HUF:
		return 1048576 + 2 * max_obj;
	default:
		return 0;
	}
}

#define REFUSE(...) do { set_err(err, err_len, __VA_ARGS__); return -EINVAL; } while (0)
static int blob_create(const struct zs_blob_config *ucfg, struct zs_blob **out, char *err,
		       size_t err_len)
{
	if (!out)
		REFUSE("zs_blob_create: out is NULL");
	*out = NULL;
	struct zs_blob_config cfg;
	if (ucfg)
		cfg = *ucfg;
	else
		zs_blob_config_init(&cfg);
	int bad;
	if (ZS_CONFIG_ABI_CHECK(&cfg, &bad)) {
		config_abi_err(err, err_len, "zs_blob_config", cfg.struct_size, sizeof(cfg), bad);
		return -EINVAL;
	}
	if ((unsigned)cfg.codec > ZS_BLOB_ZSTD_HUF)
		REFUSE("zs_blob_config.codec %d: must be ZS_BLOB_NONE..ZS_BLOB_ZSTD_HUF (0..%d)",
		       (int)cfg.codec, (int)ZS_BLOB_ZSTD_HUF);
	if (cfg.dict_len && !cfg.dict)
		REFUSE("zs_blob_config.dict is NULL with dict_len %zu", cfg.dict_len);
	if (cfg.dict && (!cfg.dict_len || cfg.dict_len > ZS_COMP_MAX_DICT))
		REFUSE("zs_blob_config.dict_len %zu: must be 1..%zu with a dict", cfg.dict_len,
		       (size_t)ZS_COMP_MAX_DICT);
	if (cfg.dict && cfg.codec != ZS_BLOB_LZ4 && cfg.codec != ZS_BLOB_ZSTD &&
	    cfg.codec != ZS_BLOB_ZSTD_HUF)
		REFUSE("zs_blob_config.dict: only codecs ZS_BLOB_LZ4, ZS_BLOB_ZSTD and ZS_BLOB_ZSTD_HUF take one");
	if (cfg.codec == ZS_BLOB_NONE && cfg.level)
		REFUSE("zs_blob_config.level %d: must be 0 with codec ZS_BLOB_NONE", cfg.level);
	if (cfg.compact_ratio_pct == 0)
		cfg.compact_ratio_pct = 10;
	if (cfg.compact_ratio_pct < -1 || cfg.compact_ratio_pct > 1000)
		REFUSE("zs_blob_config.compact_ratio_pct %d: must be -1..1000",
		       (int)cfg.compact_ratio_pct);
	if (!cfg.compact_budget)
		cfg.compact_budget = 2;
	if (cfg.compact_budget > 4096)
		REFUSE("zs_blob_config.compact_budget %u: must be 0..4096",
		       (unsigned)cfg.compact_budget);
	if (!cfg.compact_min_bytes)
		cfg.compact_min_bytes = 256 * 1024;
	if (cfg.compact_min_bytes > ((size_t)1 << 40))
		REFUSE("zs_blob_config.compact_min_bytes %zu: must be 0..2^40",
		       (size_t)cfg.compact_min_bytes);
	if (cfg.compact_idle_ms == 0)
		cfg.compact_idle_ms = 200;
	if (cfg.compact_idle_ms < -1 || cfg.compact_idle_ms > 3600000)
		REFUSE("zs_blob_config.compact_idle_ms %d: must be -1..3600000",
		       (int)cfg.compact_idle_ms);
	/* Idle compaction is the pool's (one policy for every pool): the knobs map onto it. */
	cfg.pool.autocompact_ms = cfg.compact_idle_ms < 0 ? 0 : cfg.compact_idle_ms;
	cfg.pool.autocompact_min_bytes = cfg.compact_min_bytes;

	size_t page = cfg.pool.page_size ? cfg.pool.page_size : 4096;
	if (!cfg.pool.max_object_size)
		cfg.pool.max_object_size = ZS_MAX_OBJECT_PAGES * page;
	if (page < 4096 || page > 65536 || (page & (page - 1)) ||
	    cfg.pool.max_object_size > ZS_MAX_OBJECT_PAGES * page || cfg.pool.max_object_size < page)
		REFUSE("zs_blob_config.pool: page_size %zu must be a power of two in 4096..65536 and "
		       "max_object_size %zu in page_size..%d pages", page,
		       (size_t)cfg.pool.max_object_size, ZS_MAX_OBJECT_PAGES);
	size_t max_obj = cfg.pool.max_object_size;
	if (max_obj > ZS_COMP_MAX_SRC)
		max_obj = ZS_COMP_MAX_SRC;
	size_t max_len = max_obj - 4; /* a raw value's header: the tag and a 3-byte length */
	if (cfg.min_compress == 0)
		cfg.min_compress = ZS_BLOB_DEFAULT_MIN_COMPRESS;
	if (cfg.min_compress > max_len)
		REFUSE("zs_blob_config.min_compress %zu: must be 0..%zu", (size_t)cfg.min_compress,
		       max_len);

	struct zs_blob *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	static const char *const names[] = { NULL, "lz4", "zstd", "lz4hc", "zstd-huf" };
	s->comp_name = names[cfg.codec];
	if (s->comp_name) {
		struct zs_comp_params p = { .level = cfg.level, .dict = cfg.dict, .dict_len = cfg.dict_len };
		int rc = zs_comp_check_params(s->comp_name, &p);
		if (rc) {
			set_err(err, err_len, "zs_blob_config.level %d or dict refused by codec %s",
				cfg.level, s->comp_name);
			free(s);
			return rc;
		}
	}
	if (cfg.dict) {
		s->dict_copy = malloc(cfg.dict_len);
		if (!s->dict_copy) {
			free(s);
			return -ENOMEM;
		}
		memcpy(s->dict_copy, cfg.dict, cfg.dict_len);
		cfg.dict = s->dict_copy;
	}
	s->max_obj = max_obj;
	s->max_len = max_len;
	s->page_size = page;
	s->ctx_est = ctx_estimate(cfg.codec, max_obj);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	s->nctx = cpus > 0 ? (unsigned)cpus * 2 : 2;
	if (s->nctx > MAX_CTX)
		s->nctx = MAX_CTX;
	s->ctx = aligned_alloc(64, s->nctx * sizeof(struct ctx_slot));
	if (!s->ctx) {
		free(s->dict_copy);
		free(s);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->nctx; i++) {
		pthread_mutex_init(&s->ctx[i].lock, NULL);
		s->ctx[i].c = NULL;
	}
	pthread_mutex_init(&s->cmu, NULL);
	s->cfg = cfg;
	int prc = zs_pool_create(&cfg.pool, &s->pool, err, err_len);
	if (prc) {
		zs_blob_destroy(s);
		return prc == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	/* Make a compression context now, so a bad level or dictionary fails here, not in a put. */
	if (s->comp_name) {
		int crc = 0;
		struct ctx_slot *slot = ctx_take(s, &crc);
		if (!slot) {
			set_err(err, err_len, "zs_blob_config.level %d: codec %s made no context",
				cfg.level, s->comp_name);
			zs_blob_destroy(s);
			return crc ? crc : -ENOMEM;
		}
		ctx_give(slot);
	}
	*out = s;
	return 0;
}
#undef REFUSE

int zs_blob_create(const struct zs_blob_config *cfg, struct zs_blob **out, char *err,
		   size_t err_len)
{
	create_begin(err, err_len);
	int rc = blob_create(cfg, out, err, err_len);
	if (rc && out)
		*out = NULL;
	return create_finish("zs_blob_create", rc, err, err_len);
}

void zs_blob_destroy(struct zs_blob *s)
{
	if (!s)
		return;
	if (s->pool)
		zs_destroy_pool(s->pool);
	for (unsigned i = 0; i < s->nctx; i++) {
		zs_comp_destroy(s->ctx[i].c);
		pthread_mutex_destroy(&s->ctx[i].lock);
	}
	free(s->ctx);
	pthread_mutex_destroy(&s->cmu);
	free(s->dict_copy);
	free(s);
}

size_t zs_blob_max_len(const struct zs_blob *s)
{
	return s ? s->max_len : 0;
}

unsigned long zs_blob_put(struct zs_blob *s, const void *data, size_t len)
{
	if (!s || (!data && len))
		return (unsigned long)-EINVAL;
	if (len > s->max_len)
		return (unsigned long)-ENOSPC;
	struct blob_enc e;
	int rc = blob_encode(s, NULL, 0, data, len, &e);
	if (rc)
		return (unsigned long)(long)rc;
	if (blob_over_limit(s, e.size)) {
		blob_enc_done(&e);
		atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
		return (unsigned long)-ENOMEM;
	}
	unsigned long h = blob_store_enc(s, &e);
	blob_enc_done(&e);
	if (!ZS_IS_ERR(h))
		maybe_step(s);
	return h;
}

long zs_blob_size(struct zs_blob *s, unsigned long h)
{
	if (!s)
		return -EINVAL;
	struct blob_obj o;
	int rc = blob_head(s, h, &o);
	return rc ? rc : (long)o.vlen;
}

long zs_blob_get(struct zs_blob *s, unsigned long h, void *buf, size_t cap)
{
	if (!s || (!buf && cap))
		return -EINVAL;
	struct blob_obj o;
	int rc = blob_head(s, h, &o);
	if (rc)
		return rc;
	if (cap < o.vlen)
		return -ENOSPC;
	if (!o.vlen)
		return 0;
	rc = blob_read_obj(s, h, &o, NULL, 0, NULL, NULL, NULL, buf);
	return rc ? rc : (long)o.vlen;
}

int zs_blob_read(struct zs_blob *s, unsigned long h, zs_blob_read_fn fn, void *arg)
{
	if (!s || !fn)
		return -EINVAL;
	struct blob_obj o;
	int rc = blob_head(s, h, &o);
	if (rc)
		return rc;
	int ret = 0;
	rc = blob_read_obj(s, h, &o, NULL, 0, fn, arg, &ret, NULL);
	return rc ? rc : ret;
}

int zs_blob_free(struct zs_blob *s, unsigned long h)
{
	if (!s)
		return -EINVAL;
	struct blob_obj o;
	int rc = blob_head(s, h, &o);
	if (rc)
		return rc == -EIO ? -EINVAL : rc;
	rc = blob_free_obj(s, h, &o);
	if (!rc)
		blob_after_free(s);
	return rc;
}

size_t zs_blob_mem_bytes(struct zs_blob *s)
{
	if (!s)
		return 0;
	return zs_pool_mem_bytes(s->pool, NULL) + fixed_bytes(s);
}

unsigned long zs_blob_compact(struct zs_blob *s)
{
	if (!s)
		return 0;
	pthread_mutex_lock(&s->cmu);
	unsigned long long start = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
	/* "Now": a running compactor (the idle one) is waited for, not taken for this pass. */
	unsigned long f = compact_all_wait(s->pool);
	s->cursor = 0;
	atomic_store_explicit(&s->pass_open, 0, memory_order_relaxed);
	unsigned long long cur = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&s->freed_bytes, &cur, cur > start ? cur - start : 0,
						      memory_order_relaxed, memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&s->passes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->pages_compacted, f, memory_order_relaxed);
	pthread_mutex_unlock(&s->cmu);
	return f;
}

static void fill_blob_stats(struct zs_blob *s, struct zs_blob_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!s)
		return;
	st->objects = atomic_load_explicit(&s->objects, memory_order_relaxed);
	st->value_bytes = atomic_load_explicit(&s->value_bytes, memory_order_relaxed);
	st->stored_bytes = atomic_load_explicit(&s->stored_bytes, memory_order_relaxed);
	st->raw_objects = atomic_load_explicit(&s->raw_objects, memory_order_relaxed);
	size_t cached;
	st->mem_bytes = zs_pool_mem_bytes(s->pool, &cached) + fixed_bytes(s);
	st->cached_bytes = cached;
	st->pool_pages = zs_get_total_pages(s->pool);
	st->freed_bytes = atomic_load_explicit(&s->freed_bytes, memory_order_relaxed);
	st->compact_steps = atomic_load_explicit(&s->steps, memory_order_relaxed);
	st->compact_passes = atomic_load_explicit(&s->passes, memory_order_relaxed) +
			     zs_pool_autocompact_passes(s->pool);
	st->pages_compacted = atomic_load_explicit(&s->pages_compacted, memory_order_relaxed);
	st->limit_refusals = atomic_load_explicit(&s->refusals, memory_order_relaxed);
}

int zs_blob_stats(struct zs_blob *s, struct zs_blob_stats *st, size_t size)
{
	struct zs_blob_stats full;

	if (!st || !size)
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	fill_blob_stats(s, &full);
	return stats_copy_out(st, size, &full, sizeof(full));
}

struct zs_pool *zs_blob_pool(struct zs_blob *s)
{
	return s ? s->pool : NULL;
}
