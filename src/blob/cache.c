/*
 * The key-value cache (zs/cache.h): the index from keys to blob handles and
 * the eviction.  Lives beside the blob store (src/blob/) rather than in a
 * folder of its own because it depends on the store's object format (the
 * key is stored inside the object, blob/internal.h) and nothing else uses
 * it; the store does not depend on the cache.
 *
 * Why the index holds no key: a RocksDB secondary cache holds millions of
 * 16-byte keys; a copy in the index, with its length and alignment, would
 * double the per-entry cost.  The object already has to be read on a hit,
 * and its first bytes are the header and the key, so the key check costs
 * one small read only on a 31-bit hash match that is not a hit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/err.h"
#include "common/stats_copy.h"
#include "blob/internal.h"
#include "pages/pages.h"

#include "zs/cache.h"

#define REF_BIT 0x80000000u
#define HASH_MASK 0x7fffffffu
#define MIN_TABLE 16u

/*
 * 16 bytes: the handle in two words (so the slot needs 4-byte alignment
 * only), the tag, and the object's size, so that a lookup reads the object
 * (header, key, value) under one pin instead of pinning the header first to
 * learn how much to read (blob_read_sized).
 */
struct slot {
	uint32_t h_lo, h_hi;
	uint32_t tag; /* REF_BIT | 31 bits of the key's hash; the table position comes from them too */
	uint32_t size; /* the object's bytes in the pool (struct blob_enc.size) */
};

struct shard {
	pthread_rwlock_t lock;
	struct slot *t;
	uint32_t mask;    /* capacity - 1 */
	uint32_t n;
	uint32_t hand;    /* CLOCK */
	atomic_ullong hits, misses, inserts, replaced, erases, evictions, key_bytes;
} __attribute__((aligned(64)));

struct zs_cache {
	struct zs_blob *b;
	unsigned nshards;
	size_t max_key;
	struct shard *sh;
	atomic_ullong index_bytes;
	atomic_ullong entries;
	atomic_uint evict_next;
};

static inline unsigned long slot_h(const struct slot *s)
{
	return (unsigned long)s->h_lo | (unsigned long)s->h_hi << 32;
}

static inline void slot_set_h(struct slot *s, unsigned long h)
{
	s->h_lo = (uint32_t)h;
	s->h_hi = (uint32_t)(h >> 32);
}

static inline int slot_empty(const struct slot *s)
{
	return !s->h_lo && !s->h_hi;
}

/* 64-bit hash of the key: 8 bytes at a time, each folded with a multiply-xorshift. */
static uint64_t key_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x6a09e667f3bcc908ULL ^ (len * 0x9e3779b97f4a7c15ULL);
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h ^= w * 0xbf58476d1ce4e5b9ULL;
		h = (h << 27 | h >> 37) * 0x94d049bb133111ebULL;
		p += 8;
		len -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, p, len);
	h ^= w * 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return h;
}

static inline uint32_t tag_pos(uint32_t tag, uint32_t mask)
{
	return (uint32_t)((tag & HASH_MASK) * 2654435761u) & mask;
}

static int args_ok(const struct zs_cache *c, const void *key, size_t klen)
{
	return c && key && klen && klen <= c->max_key;
}

static struct shard *shard_of(struct zs_cache *c, uint64_t hash, uint32_t *tag)
{
	*tag = (uint32_t)(hash >> 33) & HASH_MASK;
	return &c->sh[hash & (c->nshards - 1)];
}

/* 1 if s's object has key key/klen; 0 if not; negative on a bad object. */
static int key_eq(struct zs_cache *c, const struct slot *s, const void *key, size_t klen)
{
	size_t vlen;
	int rc = blob_read_sized(c->b, slot_h(s), s->size, key, klen, NULL, NULL, NULL, NULL, 0,
				 &vlen);
	return rc < 0 ? rc : rc == 0;
}

/* Lock held (either mode): the slot index holding key, or -1. */
static long find(struct zs_cache *c, struct shard *sh, uint32_t tag, const void *key, size_t klen)
{
	uint32_t i = tag_pos(tag, sh->mask);
	for (uint32_t n = 0; n <= sh->mask; n++, i = (i + 1) & sh->mask) {
		struct slot *s = &sh->t[i];
		if (slot_empty(s))
			return -1;
		if ((__atomic_load_n(&s->tag, __ATOMIC_RELAXED) & HASH_MASK) == tag &&
		    key_eq(c, s, key, klen) == 1)
			return i;
	}
	return -1;
}

/* Write lock held: remove slot i by shifting the run after it back (no tombstones). */
static void remove_at(struct shard *sh, uint32_t i)
{
	uint32_t j = i;
	for (;;) {
		j = (j + 1) & sh->mask;
		if (slot_empty(&sh->t[j]))
			break;
		uint32_t k = tag_pos(sh->t[j].tag, sh->mask);
		/* Move j back to i unless its home lies cyclically in (i, j]. */
		int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			sh->t[i] = sh->t[j];
			i = j;
		}
	}
	memset(&sh->t[i], 0, sizeof(sh->t[i]));
	sh->n--;
}

/*
 * A shard's table of cap slots.  Small ones come from the heap; from
 * TABLE_MAP_SLOTS up (64 KiB) the table is a mapping of its own
 * (pages_table_map), so the one a doubling replaces goes back to the OS at
 * once and leaves no hole in the heap.  From the heap that depends on
 * glibc's dynamic mmap threshold, which the host process moves: once it
 * has freed one mapped block (RocksDB's DB open frees 520 KB), blocks below
 * that size come from the heap, and the tables a growing index frees stay
 * there as holes its later small blocks only partly fill.  Mapped tables
 * are whole OS pages (cap x 16 B is a multiple of 4 KiB from 256 slots), so
 * index_bytes stays exact.
 */
#define TABLE_MAP_SLOTS 4096u

static struct slot *table_alloc(uint32_t cap)
{
	if (cap < TABLE_MAP_SLOTS)
		return calloc(cap, sizeof(struct slot));
	size_t mapped;
	return pages_table_map((size_t)cap * sizeof(struct slot), &mapped);
}

static void table_free(struct slot *t, uint32_t cap)
{
	if (cap < TABLE_MAP_SLOTS)
		free(t);
	else
		pages_table_unmap(t, (size_t)cap * sizeof(struct slot));
}

static void place(struct slot *t, uint32_t mask, struct slot v)
{
	uint32_t i = tag_pos(v.tag, mask);
	while (!slot_empty(&t[i]))
		i = (i + 1) & mask;
	t[i] = v;
}

/* Write lock held: double the table.  0 or -ENOMEM. */
static int grow(struct zs_cache *c, struct shard *sh)
{
	uint32_t cap = (sh->mask + 1) * 2;
	if (!cap)
		return -ENOMEM;
	struct slot *t = table_alloc(cap);
	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i <= sh->mask; i++)
		if (!slot_empty(&sh->t[i]))
			place(t, cap - 1, sh->t[i]);
	table_free(sh->t, sh->mask + 1);
	atomic_fetch_add_explicit(&c->index_bytes, (unsigned long long)(cap / 2) * sizeof(*t),
				  memory_order_relaxed);
	sh->t = t;
	sh->mask = cap - 1;
	return 0;
}

/* Free an object the index no longer names (no lock needed: nobody can reach it). */
static void drop_obj(struct zs_cache *c, unsigned long h)
{
	struct blob_obj o;
	if (blob_head(c->b, h, &o) == 0)
		blob_free_obj(c->b, h, &o);
}

/* Write lock held: the CLOCK victim's handle, removed from the table; 0 if the shard is empty. */
static unsigned long clock_evict(struct zs_cache *c, struct shard *sh)
{
	if (!sh->n)
		return 0;
	/* Two sweeps at most: the first clears every reference bit it passes. */
	for (uint32_t n = 0; n < 2 * (sh->mask + 1); n++) {
		uint32_t i = sh->hand & sh->mask;
		sh->hand = i + 1;
		struct slot *s = &sh->t[i];
		if (slot_empty(s))
			continue;
		if (s->tag & REF_BIT) {
			s->tag &= ~REF_BIT;
			continue;
		}
		unsigned long h = slot_h(s);
		struct blob_obj o;
		if (blob_head(c->b, h, &o) == 0)
			atomic_fetch_sub_explicit(&sh->key_bytes, o.klen, memory_order_relaxed);
		remove_at(sh, i);
		/* The run shifted back into i: look at i again next. */
		sh->hand = i;
		return h;
	}
	return 0;
}

/*
 * Evict one entry.  Shards take turns (a shared counter picks where to
 * start), so the evictions one insert needs spread over the shards and each
 * shard's CLOCK sees its share: evicting from the inserting key's shard
 * drained that shard whole while the holes waited for compaction.
 * 1 if one went, 0 if the cache is empty.
 */
static int evict_one(struct zs_cache *c)
{
	unsigned start = atomic_fetch_add_explicit(&c->evict_next, 1, memory_order_relaxed);
	for (unsigned k = 0; k < c->nshards; k++) {
		struct shard *sh = &c->sh[(start + k) & (c->nshards - 1)];
		pthread_rwlock_wrlock(&sh->lock);
		unsigned long h = clock_evict(c, sh);
		pthread_rwlock_unlock(&sh->lock);
		if (h) {
			drop_obj(c, h);
			atomic_fetch_add_explicit(&sh->evictions, 1, memory_order_relaxed);
			atomic_fetch_sub_explicit(&c->entries, 1, memory_order_relaxed);
			return 1;
		}
	}
	return 0;
}

void zs_cache_config_init(struct zs_cache_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	zs_blob_config_init(&cfg->blob);
	cfg->blob.pool.name = "cache";
}

#define REFUSE(...) do { set_err(err, err_len, __VA_ARGS__); return -EINVAL; } while (0)
static int cache_create(const struct zs_cache_config *ucfg, struct zs_cache **out, char *err,
			size_t err_len)
{
	if (!out)
		REFUSE("zs_cache_create: out is NULL");
	*out = NULL;
	struct zs_cache_config cfg;
	if (ucfg)
		cfg = *ucfg;
	else
		zs_cache_config_init(&cfg);
	int bad;
	if (ZS_CONFIG_ABI_CHECK(&cfg, &bad)) {
		config_abi_err(err, err_len, "zs_cache_config", cfg.struct_size, sizeof(cfg), bad);
		return -EINVAL;
	}
	if (!cfg.max_key)
		cfg.max_key = 1024;
	if (cfg.max_key > ZS_CACHE_MAX_KEY)
		REFUSE("zs_cache_config.max_key %zu: must be 0..%zu", (size_t)cfg.max_key,
		       (size_t)ZS_CACHE_MAX_KEY);
	if (!cfg.shards) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned want = cpus > 0 ? (unsigned)cpus * 4 : 8;
		cfg.shards = 8;
		while (cfg.shards < want && cfg.shards < 4096)
			cfg.shards *= 2;
	}
	if (cfg.shards > 4096 || (cfg.shards & (cfg.shards - 1)))
		REFUSE("zs_cache_config.shards %u: must be 0 or a power of two up to 4096",
		       (unsigned)cfg.shards);
	struct zs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->nshards = cfg.shards;
	c->max_key = cfg.max_key;
	int rc = zs_blob_create(&cfg.blob, &c->b, err, err_len);
	if (rc) {
		free(c);
		return rc;
	}
	c->sh = aligned_alloc(64, c->nshards * sizeof(struct shard));
	if (!c->sh) {
		zs_blob_destroy(c->b);
		free(c);
		return -ENOMEM;
	}
	memset(c->sh, 0, c->nshards * sizeof(struct shard));
	for (unsigned i = 0; i < c->nshards; i++) {
		struct shard *sh = &c->sh[i];
		pthread_rwlock_init(&sh->lock, NULL);
		sh->t = table_alloc(MIN_TABLE);
		sh->mask = MIN_TABLE - 1;
		if (!sh->t) {
			c->nshards = i + 1;
			zs_cache_destroy(c);
			return -ENOMEM;
		}
	}
	c->index_bytes = sizeof(*c) + (unsigned long long)c->nshards *
		(sizeof(struct shard) + MIN_TABLE * sizeof(struct slot));
	*out = c;
	return 0;
}
#undef REFUSE

int zs_cache_create(const struct zs_cache_config *cfg, struct zs_cache **out, char *err,
		    size_t err_len)
{
	create_begin(err, err_len);
	int rc = cache_create(cfg, out, err, err_len);
	if (rc && out)
		*out = NULL;
	return create_finish("zs_cache_create", rc, err, err_len);
}

void zs_cache_destroy(struct zs_cache *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->nshards; i++) {
		table_free(c->sh[i].t, c->sh[i].mask + 1);
		pthread_rwlock_destroy(&c->sh[i].lock);
	}
	free(c->sh);
	zs_blob_destroy(c->b); /* frees every object */
	free(c);
}

int zs_cache_insert(struct zs_cache *c, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!args_ok(c, key, klen) || (!val && vlen))
		return -EINVAL;
	struct blob_enc e;
	int rc = blob_encode(c->b, key, klen, val, vlen, &e);
	if (rc)
		return rc;
	uint32_t tag;
	struct shard *sh = shard_of(c, key_hash(key, klen), &tag);
	if (blob_has_limit(c->b)) {
		size_t idx = (size_t)atomic_load_explicit(&c->index_bytes, memory_order_relaxed);
		size_t cap = (size_t)blob_limit(c->b);
		int stepped = 0, passed = 0, full = 0;
		while (blob_over_limit(c->b, e.size + idx)) {
			/* Evicting leaves holes that only compaction gives back: when they would
			 * hold this entry, one step (at most one per insert), then evict. */
			if (!stepped && blob_freed_bytes(c->b) >= e.size + cap / 64) {
				blob_step_now(c->b);
				stepped = 1;
				continue;
			}
			if (evict_one(c)) {
				blob_after_free(c->b);
				continue;
			}
			/* Nothing left to evict (other threads took it): what is held is holes
			 * and entries being inserted; one whole pass before giving up.  It waits
			 * for a compactor already running (the pool's idle compaction: a steady
			 * cache at its limit can look idle to it) and then runs, so the holes
			 * are gone whoever held the compactor's place. */
			if (passed) {
				full = 1;
				break;
			}
			blob_pass_now(c->b);
			passed = 1;
			stepped = 1;
		}
		if (full) {
			blob_enc_done(&e);
			return -ENOMEM;
		}
	}
	unsigned long h = blob_store_enc(c->b, &e);
	size_t e_size = e.size;
	blob_enc_done(&e);
	if (ZS_IS_ERR(h))
		return ZS_ERR(h);

	unsigned long old = 0;
	pthread_rwlock_wrlock(&sh->lock);
	long i = find(c, sh, tag, key, klen);
	if (i >= 0) {
		old = slot_h(&sh->t[i]);
		slot_set_h(&sh->t[i], h);
		sh->t[i].size = (uint32_t)e_size;
	} else {
		if ((uint64_t)(sh->n + 1) * 5 > (uint64_t)(sh->mask + 1) * 4 && grow(c, sh)) {
			pthread_rwlock_unlock(&sh->lock);
			drop_obj(c, h);
			return -ENOMEM;
		}
		struct slot v = { 0, 0, tag, (uint32_t)e_size };
		slot_set_h(&v, h);
		place(sh->t, sh->mask, v);
		sh->n++;
		atomic_fetch_add_explicit(&c->entries, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sh->key_bytes, klen, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&sh->inserts, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&sh->lock);
	if (old) {
		atomic_fetch_add_explicit(&sh->replaced, 1, memory_order_relaxed);
		drop_obj(c, old);
		blob_after_free(c->b);
	}
	return 0;
}

/* The lookups' common part: read lock, probe, one read of the object on a tag match. */
static int lookup(struct zs_cache *c, const void *key, size_t klen, zs_blob_read_fn fn, void *arg,
		  void *buf, size_t cap, long *len, int count)
{
	uint32_t tag;
	struct shard *sh = shard_of(c, key_hash(key, klen), &tag);
	int rc = -ENOENT;
	pthread_rwlock_rdlock(&sh->lock);
	uint32_t i = tag_pos(tag, sh->mask);
	for (uint32_t n = 0; n <= sh->mask; n++, i = (i + 1) & sh->mask) {
		struct slot *s = &sh->t[i];
		if (slot_empty(s))
			break;
		if ((__atomic_load_n(&s->tag, __ATOMIC_RELAXED) & HASH_MASK) != tag)
			continue;
		int ret = 0;
		size_t vlen = 0;
		/* Size only (neither fn nor buf): the key decides, the value is not read. */
		int r = blob_read_sized(c->b, slot_h(s), s->size, key, klen, fn, arg, &ret, buf, cap,
					&vlen);
		if (r == 1)
			continue;
		if (r < 0) {
			rc = r;
			break;
		}
		*len = fn ? ret : (long)vlen;
		rc = r == 2 ? -ENOSPC : 0;
		if (count && !(__atomic_load_n(&s->tag, __ATOMIC_RELAXED) & REF_BIT))
			__atomic_fetch_or(&s->tag, REF_BIT, __ATOMIC_RELAXED);
		break;
	}
	pthread_rwlock_unlock(&sh->lock);
	if (count)
		atomic_fetch_add_explicit(rc == -ENOENT ? &sh->misses : &sh->hits, 1, memory_order_relaxed);
	return rc;
}

long zs_cache_lookup(struct zs_cache *c, const void *key, size_t klen, void *buf, size_t cap)
{
	if (!args_ok(c, key, klen) || (!buf && cap))
		return -EINVAL;
	long len = 0;
	/* A NULL buffer of capacity 0 still reads as "buffer too small" unless the value is empty. */
	static char none;
	int rc = lookup(c, key, klen, NULL, NULL, buf ? buf : &none, cap, &len, 1);
	return rc ? rc : len;
}

long zs_cache_value_size(struct zs_cache *c, const void *key, size_t klen)
{
	if (!args_ok(c, key, klen))
		return -EINVAL;
	long len = 0;
	int rc = lookup(c, key, klen, NULL, NULL, NULL, 0, &len, 0);
	return rc ? rc : len;
}

int zs_cache_lookup_cb(struct zs_cache *c, const void *key, size_t klen, zs_blob_read_fn fn, void *arg)
{
	if (!args_ok(c, key, klen) || !fn)
		return -EINVAL;
	long ret = 0;
	int rc = lookup(c, key, klen, fn, arg, NULL, 0, &ret, 1);
	return rc ? rc : (int)ret;
}

int zs_cache_erase(struct zs_cache *c, const void *key, size_t klen)
{
	if (!args_ok(c, key, klen))
		return -EINVAL;
	uint32_t tag;
	struct shard *sh = shard_of(c, key_hash(key, klen), &tag);
	pthread_rwlock_wrlock(&sh->lock);
	long i = find(c, sh, tag, key, klen);
	unsigned long h = 0;
	if (i >= 0) {
		h = slot_h(&sh->t[i]);
		remove_at(sh, (uint32_t)i);
		atomic_fetch_sub_explicit(&sh->key_bytes, klen, memory_order_relaxed);
	}
	pthread_rwlock_unlock(&sh->lock);
	if (!h)
		return -ENOENT;
	atomic_fetch_add_explicit(&sh->erases, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->entries, 1, memory_order_relaxed);
	drop_obj(c, h);
	blob_after_free(c->b);
	return 0;
}

void zs_cache_clear(struct zs_cache *c)
{
	if (!c)
		return;
	for (unsigned k = 0; k < c->nshards; k++) {
		struct shard *sh = &c->sh[k];
		pthread_rwlock_wrlock(&sh->lock);
		uint64_t n = 0;
		for (uint32_t i = 0; i <= sh->mask; i++) {
			if (slot_empty(&sh->t[i]))
				continue;
			drop_obj(c, slot_h(&sh->t[i]));
			n++;
		}
		struct slot *t = table_alloc(MIN_TABLE);
		if (t) {
			atomic_fetch_sub_explicit(&c->index_bytes,
						  (unsigned long long)(sh->mask + 1 - MIN_TABLE) * sizeof(*t),
						  memory_order_relaxed);
			table_free(sh->t, sh->mask + 1);
			sh->t = t;
			sh->mask = MIN_TABLE - 1;
		} else {
			memset(sh->t, 0, (size_t)(sh->mask + 1) * sizeof(*sh->t));
		}
		sh->n = 0;
		sh->hand = 0;
		atomic_store_explicit(&sh->key_bytes, 0, memory_order_relaxed);
		pthread_rwlock_unlock(&sh->lock);
		atomic_fetch_add_explicit(&sh->erases, n, memory_order_relaxed);
		atomic_fetch_sub_explicit(&c->entries, n, memory_order_relaxed);
	}
	blob_after_free(c->b);
}

int zs_cache_next(struct zs_cache *c, uint64_t *cursor, void *keybuf, size_t cap, size_t *klen)
{
	if (!c || !cursor || !klen || (!keybuf && cap))
		return -EINVAL;
	for (uint64_t k = *cursor >> 32; k < c->nshards; k++) {
		struct shard *sh = &c->sh[k];
		uint64_t i = k == *cursor >> 32 ? (uint32_t)*cursor : 0;
		pthread_rwlock_rdlock(&sh->lock);
		for (; i <= sh->mask; i++) {
			if (slot_empty(&sh->t[i]))
				continue;
			unsigned long h = slot_h(&sh->t[i]);
			struct blob_obj o;
			int rc = blob_head(c->b, h, &o);
			if (!rc && o.klen > cap) {
				*klen = o.klen;
				*cursor = k << 32 | i;
				pthread_rwlock_unlock(&sh->lock);
				return -ENOSPC;
			}
			if (!rc)
				rc = blob_read_key(c->b, h, &o, keybuf);
			if (rc)
				continue;
			*klen = o.klen;
			*cursor = k << 32 | (i + 1);
			pthread_rwlock_unlock(&sh->lock);
			return 0;
		}
		pthread_rwlock_unlock(&sh->lock);
	}
	*cursor = (uint64_t)c->nshards << 32;
	return -ENOENT;
}

static void fill_cache_stats(struct zs_cache *c, struct zs_cache_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!c)
		return;
	for (unsigned k = 0; k < c->nshards; k++) {
		struct shard *sh = &c->sh[k];
		st->hits += atomic_load_explicit(&sh->hits, memory_order_relaxed);
		st->misses += atomic_load_explicit(&sh->misses, memory_order_relaxed);
		st->inserts += atomic_load_explicit(&sh->inserts, memory_order_relaxed);
		st->replaced += atomic_load_explicit(&sh->replaced, memory_order_relaxed);
		st->erases += atomic_load_explicit(&sh->erases, memory_order_relaxed);
		st->evictions += atomic_load_explicit(&sh->evictions, memory_order_relaxed);
		st->key_bytes += atomic_load_explicit(&sh->key_bytes, memory_order_relaxed);
	}
	st->entries = atomic_load_explicit(&c->entries, memory_order_relaxed);
	st->index_bytes = atomic_load_explicit(&c->index_bytes, memory_order_relaxed);
	zs_blob_stats(c->b, &st->blob, sizeof(st->blob));
	st->mem_bytes = st->blob.mem_bytes + st->index_bytes;
}

int zs_cache_stats(struct zs_cache *c, struct zs_cache_stats *st, size_t size)
{
	struct zs_cache_stats full;

	if (!st || !size)
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	fill_cache_stats(c, &full);
	return stats_copy_out(st, size, &full, sizeof(full));
}

struct zs_blob *zs_cache_blob(struct zs_cache *c)
{
	return c ? c->b : NULL;
}
