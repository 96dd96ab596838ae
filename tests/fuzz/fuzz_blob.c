/*
 * libFuzzer target: the blob store and the cache (zs/blob.h, zs/cache.h)
 * driven by an operation program and checked against shadow maps.  The
 * input's first bytes choose the codec and level, min_compress, a memory
 * limit (none, or small enough to refuse and evict), the compaction policy
 * (off, every call, default), the cache's shards and longest key; the rest
 * is a program of puts, gets (exact, short and roomy buffers), sizes,
 * callback reads, frees, misuse (stale, foreign and made-up handles, double
 * frees), compaction, and cache inserts, lookups, erases, enumerations and
 * clears over a small key space.  Every value read is compared with what
 * the shadow says was stored; with a limit, the cache may have evicted a
 * key (a miss is then allowed, a wrong value never).  At the end the cache
 * is enumerated against its shadow and both are destroyed (LeakSanitizer
 * checks nothing stayed).
 */
#include <errno.h>

#include "fuzz_common.h"
#include "zs/blob.h"
#include "zs/cache.h"

#define NOBJ 32
#define NKEY 24
#define MAXV 9000

struct bobj {
	unsigned long h;
	size_t len;
	uint64_t seed;
	int text;
};

struct kv {
	int present;
	size_t len;
	uint64_t seed;
	int text;
};

static unsigned char vbuf[MAXV + 64], obuf[MAXV + 64];

/* Values: either text-like (compresses) or xorshift bytes (does not). */
NO_COV static void make(unsigned char *b, size_t n, uint64_t seed, int text)
{
	if (!text) {
		fuzz_fill(b, n, seed);
		return;
	}
	static const char w[] = "{\"key\":\"value\",\"n\":12345,\"list\":[1,2,3]},";
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)w[(i + seed) % (sizeof(w) - 1)];
}

static size_t keyof(char *k, unsigned i, size_t maxk)
{
	size_t n = (size_t)snprintf(k, 64, "key%u:%.*s", i, (int)(i % 5) * 8, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	return n < maxk ? n : maxk;
}

struct cbctx {
	const unsigned char *want;
	size_t len;
};

static int cb_cmp(const void *d, size_t len, void *arg)
{
	struct cbctx *c = arg;
	return len == c->len && memcmp(d, c->want, len) == 0 ? 1 : 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size, 0 };
	unsigned b0 = fin_u8(&in), b1 = fin_u8(&in), b2 = fin_u8(&in);
	static const enum zs_blob_codec codecs[] = { ZS_BLOB_LZ4, ZS_BLOB_ZSTD, ZS_BLOB_LZ4HC, ZS_BLOB_NONE };
	static const size_t limits[] = { 0, 0, 3u << 20, 5u << 20 };
	static const int ratios[] = { 0, -1, 1, 50 };
	struct zs_cache_config cc;
	zs_cache_config_init(&cc);
	cc.blob.codec = codecs[b0 & 3];
	cc.blob.level = cc.blob.codec == ZS_BLOB_ZSTD ? (int)((b0 >> 2) & 3) - 1
			: cc.blob.codec == ZS_BLOB_NONE ? 0 : (int)((b0 >> 2) & 3);
	if (cc.blob.codec == ZS_BLOB_LZ4HC && cc.blob.level == 0)
		cc.blob.level = 1;
	cc.blob.min_compress = (b0 >> 4) & 1 ? 1 : 0;
	cc.blob.mem_limit = limits[(b0 >> 5) & 3];
	cc.blob.compact_ratio_pct = ratios[b1 & 3];
	cc.blob.compact_min_bytes = (b1 >> 2) & 1 ? 1 : 0;
	cc.blob.compact_budget = 1 + ((b1 >> 3) & 3);
	cc.blob.compact_idle_ms = -1; /* no thread: every run the same */
	cc.shards = 1u << (b2 & 3);
	cc.max_key = 8 + ((b2 >> 2) & 63);
	struct zs_cache *c = NULL;
	int rc = zs_cache_create(&cc, &c, NULL, 0);
	FUZZ_CHECK(rc == 0, "cache create %d", rc);
	struct zs_blob *s = NULL;
	rc = zs_blob_create(&cc.blob, &s, NULL, 0);
	FUZZ_CHECK(rc == 0, "blob create %d", rc);
	/* Another store's handle, made once (a store per input costs a third of the time). */
	static struct zs_blob *other;
	static unsigned long foreign;
	if (!other) {
		rc = zs_blob_create(NULL, &other, NULL, 0);
		FUZZ_CHECK(rc == 0, "blob create %d", rc);
		foreign = zs_blob_put(other, "foreign", 7);
		FUZZ_CHECK(!ZS_IS_ERR(foreign), "foreign put");
	}
	int limited = cc.blob.mem_limit != 0;

	struct bobj o[NOBJ];
	struct kv kv[NKEY];
	memset(o, 0, sizeof(o));
	memset(kv, 0, sizeof(kv));
	unsigned long stale = 0;
	uint64_t seq = 1;
	char key[80];

	for (int step = 0; step < 400 && fin_more(&in); step++) {
		unsigned op = fin_u8(&in), a = fin_u8(&in);
		struct bobj *e = &o[a % NOBJ];
		unsigned ki = a % NKEY;
		size_t kl = keyof(key, ki, cc.max_key);
		switch (op % 16) {
		case 0:
		case 1: { /* put (replacing the slot's object) */
			size_t len = fin_u16(&in) % MAXV;
			int text = op & 0x10;
			uint64_t sd = seq++;
			make(vbuf, len, sd, text);
			unsigned long h = zs_blob_put(s, vbuf, len);
			if (ZS_IS_ERR(h)) {
				FUZZ_CHECK(limited && ZS_ERR(h) == -ENOMEM, "put %zu: %d", len, ZS_ERR(h));
				break;
			}
			if (e->h) {
				FUZZ_CHECK(zs_blob_free(s, e->h) == 0, "free on replace");
				stale = e->h;
			}
			*e = (struct bobj){ h, len, sd, text };
			break;
		}
		case 2: { /* get: exact, short, roomy */
			if (!e->h)
				break;
			size_t cap = (op & 0x30) == 0x10 && e->len ? e->len - 1 : (op & 0x20) ? MAXV + 8 : e->len;
			memset(obuf, 0xEE, cap);
			long n = zs_blob_get(s, e->h, obuf, cap);
			if (cap < e->len) {
				FUZZ_CHECK(n == -ENOSPC, "short get %ld", n);
				FUZZ_CHECK(!cap || obuf[0] == 0xEE, "short get wrote");
				break;
			}
			make(vbuf, e->len, e->seed, e->text);
			FUZZ_CHECK(n == (long)e->len && !memcmp(obuf, vbuf, e->len), "get: %ld of %zu", n, e->len);
			FUZZ_CHECK(zs_blob_size(s, e->h) == (long)e->len, "size");
			break;
		}
		case 3: { /* callback read */
			if (!e->h)
				break;
			make(vbuf, e->len, e->seed, e->text);
			struct cbctx cx = { vbuf, e->len };
			FUZZ_CHECK(zs_blob_read(s, e->h, cb_cmp, &cx) == 1, "read cb");
			break;
		}
		case 4: /* free */
			if (!e->h)
				break;
			FUZZ_CHECK(zs_blob_free(s, e->h) == 0, "free");
			stale = e->h;
			e->h = 0;
			break;
		case 5: /* misuse */
			if (stale) {
				/* A freed handle is refused even when a new object took its slot
				 * (the generation differs); the same value again would be a live one. */
				int live = 0;
				for (int i = 0; i < NOBJ; i++)
					live |= o[i].h == stale;
				if (!live) {
					FUZZ_CHECK(zs_blob_size(s, stale) == -EINVAL, "stale size");
					FUZZ_CHECK(zs_blob_free(s, stale) == -EINVAL, "stale free");
				}
			}
			FUZZ_CHECK(zs_blob_size(s, foreign) == -EINVAL, "foreign size");
			FUZZ_CHECK(zs_blob_get(s, foreign, obuf, MAXV) == -EINVAL, "foreign get");
			FUZZ_CHECK(zs_blob_free(s, 0) == -EINVAL, "free 0");
			FUZZ_CHECK(ZS_ERR(zs_blob_put(s, NULL, 3)) == -EINVAL, "put NULL");
			FUZZ_CHECK(ZS_ERR(zs_blob_put(s, vbuf, zs_blob_max_len(s) + 1)) == -ENOSPC, "put big");
			break;
		case 6:
			if (op & 0x10)
				zs_blob_compact(s);
			else
				zs_blob_compact(zs_cache_blob(c));
			break;
		case 7:
		case 8:
		case 9: { /* cache insert */
			size_t len = fin_u16(&in) % MAXV;
			int text = op & 0x10;
			uint64_t sd = seq++;
			make(vbuf, len, sd, text);
			rc = zs_cache_insert(c, key, kl, vbuf, len);
			if (rc) {
				FUZZ_CHECK(limited && rc == -ENOMEM, "insert %zu: %d", len, rc);
				break;
			}
			kv[ki] = (struct kv){ 1, len, sd, text };
			break;
		}
		case 10:
		case 11: { /* cache lookup */
			long n = zs_cache_lookup(c, key, kl, obuf, MAXV);
			if (!kv[ki].present) {
				FUZZ_CHECK(n == -ENOENT, "lookup absent: %ld", n);
				break;
			}
			if (n == -ENOENT && limited) {
				kv[ki].present = 0; /* evicted */
				break;
			}
			make(vbuf, kv[ki].len, kv[ki].seed, kv[ki].text);
			FUZZ_CHECK(n == (long)kv[ki].len && !memcmp(obuf, vbuf, kv[ki].len), "lookup %ld of %zu", n,
				   kv[ki].len);
			if (kv[ki].len) {
				FUZZ_CHECK(zs_cache_lookup(c, key, kl, obuf, kv[ki].len - 1) == -ENOSPC, "short lookup");
				FUZZ_CHECK(zs_cache_value_size(c, key, kl) == (long)kv[ki].len, "value size");
			}
			struct cbctx cx = { vbuf, kv[ki].len };
			FUZZ_CHECK(zs_cache_lookup_cb(c, key, kl, cb_cmp, &cx) == 1, "lookup cb");
			break;
		}
		case 12: { /* cache erase */
			rc = zs_cache_erase(c, key, kl);
			if (kv[ki].present)
				FUZZ_CHECK(rc == 0 || (limited && rc == -ENOENT), "erase present %d", rc);
			else
				FUZZ_CHECK(rc == -ENOENT, "erase absent %d", rc);
			kv[ki].present = 0;
			break;
		}
		case 13: { /* enumerate: every key returned is one the shadow may hold */
			uint64_t cur = 0;
			size_t l;
			char kb[80];
			int n = 0;
			while ((rc = zs_cache_next(c, &cur, kb, (op & 0x10) ? 4 : sizeof(kb), &l)) == 0 && n < 100) {
				unsigned id;
				FUZZ_CHECK(sscanf(kb, "key%u:", &id) == 1 || l < 4, "enumerated key");
				n++;
			}
			FUZZ_CHECK(rc == -ENOENT || rc == -ENOSPC || n == 100, "next %d", rc);
			break;
		}
		case 14:
			if ((op & 0x70) == 0x70) {
				zs_cache_clear(c);
				memset(kv, 0, sizeof(kv));
			}
			break;
		default: { /* bad arguments */
			FUZZ_CHECK(zs_cache_insert(c, NULL, 1, vbuf, 1) == -EINVAL, "insert NULL key");
			FUZZ_CHECK(zs_cache_insert(c, key, 0, vbuf, 1) == -EINVAL, "insert empty key");
			FUZZ_CHECK(zs_cache_insert(c, key, cc.max_key + 1, vbuf, 1) == -EINVAL, "insert long key");
			FUZZ_CHECK(zs_cache_lookup(c, key, kl, NULL, 3) == -EINVAL, "lookup NULL buf");
			break;
		}
		}
	}
	/* The end: every key the shadow holds reads back (or was evicted under a limit). */
	long want = 0;
	for (unsigned i = 0; i < NKEY; i++) {
		size_t kl = keyof(key, i, cc.max_key);
		long n = zs_cache_lookup(c, key, kl, obuf, MAXV);
		if (kv[i].present && n != -ENOENT) {
			make(vbuf, kv[i].len, kv[i].seed, kv[i].text);
			FUZZ_CHECK(n == (long)kv[i].len && !memcmp(obuf, vbuf, kv[i].len), "final lookup");
			want++;
		} else {
			FUZZ_CHECK(n == -ENOENT || !kv[i].present, "final: present key");
			FUZZ_CHECK(kv[i].present || n == -ENOENT, "final: absent key found");
		}
	}
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	FUZZ_CHECK((long)st.entries == want || limited, "entries %llu, shadow %ld", (unsigned long long)st.entries,
		   want);
	for (int i = 0; i < NOBJ; i++)
		if (o[i].h)
			FUZZ_CHECK(zs_blob_free(s, o[i].h) == 0, "final free");
	struct zs_blob_stats bs;
	zs_blob_stats(s, &bs, sizeof(bs));
	FUZZ_CHECK(bs.objects == 0 && bs.stored_bytes == 0, "blob objects left %llu",
		   (unsigned long long)bs.objects);
	zs_cache_destroy(c);
	zs_blob_destroy(s);
	return 0;
}
