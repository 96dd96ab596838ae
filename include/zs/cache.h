/*
 * libzs cache: a key-value cache of byte strings on a blob store (zs/blob.h),
 * for a program that keeps many small records compressed in RAM (a RocksDB
 * secondary cache: 16-byte keys, 2-5 KB blocks; a Python mapping).
 *
 * Index.  Keys are hashed (64 bits) into power-of-two shards, each an
 * open-addressing table (linear probing, deletion by backward shift, no
 * tombstones) under its own reader/writer lock: lookups of one shard share
 * it, inserts and erases take it alone.  A table slot is 16 bytes, the
 * object's handle, 31 bits of the key's hash and the object's size (so a
 * lookup reads header, key and value in one access to the pool rather than
 * reading the header first to learn the size); the key itself is stored in
 * the blob object beside the value (uncompressed, after the header), so the
 * index holds no copy of it.  Tables grow at 80% load, so a slot is 20 to 40
 * bytes per entry between growths, plus the key inside the object:
 * tests/unit/test_cache.c measures it (zs_cache_stats index_bytes / entries).
 * A table of 64 KiB or more is a mapping of its own, not heap memory, so the
 * one a growth replaces goes back to the OS at once whatever the process's
 * malloc settings are (tests/unit/test_cache_tables.c).
 *
 * Capacity and eviction.  The blob store's mem_limit is the cache's
 * capacity in real memory: an insert that would take the store past it
 * evicts entries first, the shards taking turns, and runs at most one
 * compaction step (zs/blob.h) once the holes evictions left would hold the
 * new entry, turning them
 * into pages given back.  Eviction is CLOCK (second chance): a lookup sets
 * the entry's reference bit with one atomic OR under the shard's read lock;
 * the eviction hand clears set bits and evicts the first entry found clear.
 * LRU would need a list link per entry (16 more bytes, over the index
 * budget) and a write to shared list heads on every hit, which would make
 * lookups exclusive; CLOCK keeps lookups read-only on the index and costs 1
 * bit.  With mem_limit 0 nothing is evicted and an insert fails with
 * -ENOMEM only when memory runs out.
 *
 * Values are copied in and out (zs_cache_lookup), or read in place through a
 * callback (zs_cache_lookup_cb: straight from the pool for a raw value within
 * one page, else from a buffer of the library's: the decoded value, or the
 * stitched object).  Inserting a key that exists
 * replaces its value.
 *
 * Thread safety: every call may be made from any thread at once.  A callback
 * runs under its shard's read lock: it may look up keys (any shard) but must
 * not insert, erase or clear (that would wait for its own lock: deadlock).
 *
 * Errors (README.md, "Errors"): negative errno values.  Bad arguments
 * (NULL cache, NULL key, key length 0 or past max_key, NULL value with a
 * nonzero length) are -EINVAL.
 */
#ifndef ZS_CACHE_H
#define ZS_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"
#include "zs/blob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key max_key allows. */
#define ZS_CACHE_MAX_KEY 4096

struct zs_cache_config {
	size_t struct_size;          /* set by zs_cache_config_init; 0 is taken as this library's */
	struct zs_blob_config blob;  /* the store; blob.mem_limit is the capacity (0: none) */
	unsigned shards;             /* index shards; 0 -> 4 per online CPU rounded up to a power
	                                of two (at least 8); else a power of two 1..4096 */
	size_t max_key;              /* longest key in bytes; 0 -> 1024; 1..ZS_CACHE_MAX_KEY */
	uint64_t reserved[4];        /* must be 0 */
};

struct zs_cache;

/* Defaults: zs_blob_config_init for the store, no capacity, automatic shards, 1 KiB keys. */
ZS_API void zs_cache_config_init(struct zs_cache_config *cfg);
/*
 * 0 and *out, or -EINVAL (a field out of range, or the store's) / -ENOMEM. On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 */
ZS_API int zs_cache_create(const struct zs_cache_config *cfg, struct zs_cache **out, char *err,
			   size_t errlen);
/* Free the cache and all its entries; NULL is ignored. */
ZS_API void zs_cache_destroy(struct zs_cache *c);

/*
 * Insert or replace key -> value (vlen 0..zs_blob_max_len less the key's
 * length and 2 bytes).  0, or -EINVAL, -ENOSPC (value too long), -ENOMEM
 * (memory; or, with a capacity, the entry alone would not fit in it).
 */
ZS_API int zs_cache_insert(struct zs_cache *c, const void *key, size_t klen, const void *val,
			   size_t vlen);
/*
 * Copy key's value into buf (cap bytes).  Returns its length; -ENOENT (no
 * such key: a miss), -ENOSPC (cap too small; buf untouched, the length is
 * returned by zs_cache_value_size), -EINVAL.  Counts a hit or a miss.
 */
ZS_API long zs_cache_lookup(struct zs_cache *c, const void *key, size_t klen, void *buf, size_t cap);
/* Length of key's value, -ENOENT or -EINVAL; counts no hit or miss. */
ZS_API long zs_cache_value_size(struct zs_cache *c, const void *key, size_t klen);
/*
 * Zero-copy lookup: fn(value, len, arg) under the shard's read lock (see
 * "Thread safety"); returns what fn returns, or -ENOENT / -EINVAL (fn not
 * called).  Counts a hit or a miss.
 */
ZS_API int zs_cache_lookup_cb(struct zs_cache *c, const void *key, size_t klen, zs_blob_read_fn fn,
			      void *arg);
/* Remove key.  0, -ENOENT, -EINVAL. */
ZS_API int zs_cache_erase(struct zs_cache *c, const void *key, size_t klen);
/* Remove every entry (counted as erases, not evictions). */
ZS_API void zs_cache_clear(struct zs_cache *c);

/*
 * Enumerate keys.  Start with *cursor = 0; each call copies the next key
 * into keybuf (cap bytes), sets *klen and advances *cursor; -ENOENT at the
 * end, -ENOSPC when cap is under the key's length (*klen set, *cursor left at
 * that key: call again with a larger buffer), -EINVAL.  Every key present
 * for the whole enumeration and not moved meanwhile is returned once; an
 * insert or erase in the shard being read may move an entry across the
 * cursor, so under concurrent change a key can be missed or returned twice
 * (a Python mapping raises on a size change, as dict iteration does).
 */
ZS_API int zs_cache_next(struct zs_cache *c, uint64_t *cursor, void *keybuf, size_t cap,
			 size_t *klen);

struct zs_cache_stats {
	uint64_t entries;
	uint64_t hits, misses;
	uint64_t inserts;     /* new keys and replacements */
	uint64_t replaced;    /* of the inserts, those that replaced a value */
	uint64_t erases;      /* zs_cache_erase and zs_cache_clear */
	uint64_t evictions;
	uint64_t index_bytes; /* the shards' tables and locks */
	uint64_t key_bytes;   /* keys' bytes, summed (stored inside the objects) */
	uint64_t mem_bytes;   /* zs_blob_mem_bytes of the store plus index_bytes */
	struct zs_blob_stats blob;
	uint64_t reserved[4];
};
/*
 * 0 (all counters zero for a NULL cache). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 * `blob` is embedded whole, so zs_blob_stats can only grow in a MAJOR:
 * its new counters would move the fields after it here.
 */
ZS_API int zs_cache_stats(struct zs_cache *c, struct zs_cache_stats *st, size_t size);
/* The blob store under the cache (statistics, zs_blob_compact); not for storing into. */
ZS_API struct zs_blob *zs_cache_blob(struct zs_cache *c);

#ifdef __cplusplus
}
#endif

/*
 * 3.x source compatibility (off with ZS_NO_COMPAT3; libzs's own tree builds
 * with it off).  A program written for 3.x compiles unchanged against 4.x:
 * the calls below pick the 4.0.0 function by their argument count, so the
 * 4.0.0 symbols are the only ones in libzs.so and the old calls lose only
 * the reason text.  Reading struct zs_backend's fields is the one 3.x usage
 * not kept (the struct is opaque).  docs/abi.md, 4.0.0.
 */
#ifndef ZS_NO_COMPAT3
#define ZS_V3_zs_cache_create_(cfg, out) zs_cache_create(cfg, out, (char *)0, 0)
#define zs_cache_create(...) ZS_PICK4_(__VA_ARGS__, zs_cache_create, ~, ZS_V3_zs_cache_create_, ~)(__VA_ARGS__)
#define ZS_V3_zs_cache_stats_(c, st) zs_cache_stats(c, st, sizeof(*(st)))
#define zs_cache_stats(...) ZS_PICK3_(__VA_ARGS__, zs_cache_stats, ZS_V3_zs_cache_stats_, ~)(__VA_ARGS__)
#endif
#endif
