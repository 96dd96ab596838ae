/*
 * libzs blob store: variable-length byte strings kept compressed in a
 * zsmalloc pool, named by a handle.  What an application would otherwise
 * write around raw handles: compressing (or keeping the bytes raw when
 * compression does not pay), remembering each object's length and codec,
 * reading back into a caller's buffer, holding the store to a memory limit
 * that counts everything it keeps resident, and compacting the pool at the
 * right moments without any one call paying for a whole pass.
 *
 * Objects.  Each object carries a header of 2..7 bytes (a tag byte with the
 * codec, the value's length as a varint, and the stored length as a varint
 * when compressed; a cache key's length adds up to 2), so zs_blob_size and zs_blob_get need nothing from the
 * caller but the handle.  Objects shorter than 16 bytes are padded to 16
 * (the pool's smallest slot holds 24 anyway).  A value of up to
 * zs_blob_max_len bytes is taken: the pool is created with max_object_size
 * of ZS_MAX_OBJECT_PAGES pages (64 KiB at 4 KiB pages), less the largest
 * header; 0-byte values are allowed.
 *
 * Codecs: ZS_BLOB_NONE, ZS_BLOB_LZ4 (the default), ZS_BLOB_LZ4HC,
 * ZS_BLOB_ZSTD, ZS_BLOB_ZSTD_HUF, each with the level ranges of zs/compress.h,
 * and an optional dictionary for lz4 and the two zstd codecs (zs_blob_dict_train makes a zstd one from
 * samples, with zstd's fastCover trainer: below).  A value is kept raw when it is
 * shorter than min_compress or when compressing it would not save at least
 * a sixteenth of it: reading a raw value is a copy, no decompression.
 * Compression contexts are kept in a small pool in the store (about two per
 * CPU, each used by one thread at a time, built on first use): threads do
 * not share one and an idle store holds none it never needed.
 *
 * Thread safety: every call may be made from any thread at once, on
 * different handles or the same one, except that a handle must not be used
 * after (or while) zs_blob_free frees it.  The pool is made from the
 * application profile (zs_pool_config_init_app, one copy of each size class
 * per CPU) unless the caller fills cfg.pool otherwise.
 *
 * Checked mode (cfg.pool.checked = 1, the default of zs_blob_config_init):
 * a handle that is stale (freed), foreign (another store's) or made up gets
 * -EINVAL from every call that takes one; unchecked, such a handle is
 * undefined behaviour, as in zsmalloc.
 *
 * Memory (zs_blob_mem_bytes): the pool's pages in use, the pages parked or
 * cached for its reuse, its handle slots, its tables, the store's own
 * structure and an estimate of each compression context built (lz4: 16 KiB
 * plus twice max_len; lz4hc: 256 KiB plus twice max_len; zstd: 1 MiB plus
 * twice max_len).  tests/unit/test_blob.c checks it against the process's RSS
 * growth after a fill (within 3%).
 *
 * Memory limit (cfg.mem_limit, bytes, 0: none).  Before each store the
 * store adds the new object's size to what it holds and refuses with
 * -ENOMEM when that would pass the limit.  What it holds is counted as in
 * zs_blob_mem_bytes, less the pool pages cached for reuse (the pool's next
 * zspages come from them before it takes new memory, and they go back to
 * the OS at the decay).  Holes left by freed objects count until
 * compaction gives their pages back.  The count is cheap (no lock) far from
 * the limit and exact (the page providers' locks) within an
 * eighth of it.  So the limit is passed by at most what one allocation adds
 * beyond its own bytes, the rest of a new zspage (at most max_chain pages,
 * 32 KiB at the defaults), per thread storing at that moment, plus the
 * pages cached for reuse until their decay.  A cache on this store
 * (zs/cache.h) evicts instead of failing.
 *
 * Compaction policy.  Freeing an object leaves a hole in its zspage; the
 * pool only gives pages back once compaction moves objects together.  The
 * store counts the bytes freed since its last completed compaction pass
 * ("freed bytes") and compacts by itself, a bounded step at a time:
 *   compact_ratio_pct  When freed bytes pass this percentage of the bytes
 *                      stored, each zs_blob_put and zs_blob_free runs one
 *                      compaction step (zs_compact_step with compact_budget
 *                      class copies) until a pass completes, which resets
 *                      the count.  Default 10 (percent); 0 -> the default;
 *                      -1: never from calls (only idle and zs_blob_compact).
 *                      1..1000 otherwise.  Below compact_min_bytes of freed
 *                      bytes nothing starts, whatever the ratio.
 *   compact_min_bytes  Freed bytes below which no compaction starts (from
 *                      calls or idle; sets cfg.pool.autocompact_min_bytes).
 *                      Default 256 KiB; 0 -> the default; 1..2^40.
 *   compact_budget     Class copies compacted per step (each moves at most
 *                      one class's objects: at 4 KiB pages a few hundred KiB
 *                      in the worst case).  Default 2; 0 -> the default;
 *                      1..4096.
 *   compact_idle_ms    Idle compaction, which is the pool's self-compaction
 *                      ("Self-compaction" in zs/zsmalloc.h: one policy, on
 *                      the page provider's purge thread, no thread of the
 *                      store's): this sets cfg.pool.autocompact_ms.  Once no
 *                      put or free has changed the pool for this long and
 *                      the holes freed since its last pass reach
 *                      compact_min_bytes, the pool runs a whole
 *                      pass and gives what it freed back to the OS at once:
 *                      a store left idle is back to its live data about 1.5
 *                      x compact_idle_ms after its last call.  Default
 *                      200 ms; 0 -> the default; -1: none (compaction only
 *                      from calls and zs_blob_compact); 1..3600000
 *                      otherwise.  The store sets cfg.pool.autocompact_ms
 *                      and autocompact_min_bytes from these two knobs,
 *                      whatever they held.
 * zs_blob_compact runs a whole pass at once and returns cached pages to the
 * OS (zs_compact).
 *
 * Errors (README.md, "Errors"): calls returning int or long return >= 0 or
 * a negative errno; zs_blob_put returns a handle or an error value tested
 * with ZS_IS_ERR (zs/zsmalloc.h).
 */
#ifndef ZS_BLOB_H
#define ZS_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"
#include "zs/zsmalloc.h"

#ifdef __cplusplus
extern "C" {
#endif

enum zs_blob_codec {
	ZS_BLOB_NONE = 0,  /* keep every value raw */
	ZS_BLOB_LZ4 = 1,   /* level: acceleration 1..65537 (0 -> 1) */
	ZS_BLOB_ZSTD = 2,  /* level: ZSTD_minCLevel()..ZSTD_maxCLevel() (0 -> 3) */
	ZS_BLOB_LZ4HC = 3, /* level 1..12 (0 -> 9); no dictionary */
	ZS_BLOB_ZSTD_HUF = 4, /* zstd's levels and dictionary, literals always Huffman-coded
	                         (zs/compress.h "zstd-huf"): at negative levels 10-13%
	                         smaller on text-like values for the entropy stage's CPU */
};

/* Values shorter than this are kept raw unless min_compress says otherwise (0 -> 64). */
#define ZS_BLOB_DEFAULT_MIN_COMPRESS 64

struct zs_blob_config {
	size_t struct_size;        /* set by zs_blob_config_init; 0 is taken as this library's */
	enum zs_blob_codec codec;  /* ZS_BLOB_NONE..ZS_BLOB_ZSTD_HUF; default ZS_BLOB_LZ4 */
	int level;                 /* 0 -> the codec's default; else its range (above) */
	const void *dict;          /* NULL or dict_len bytes (lz4, zstd; copied at create) */
	size_t dict_len;           /* 0..ZS_COMP_MAX_DICT (zs/compress.h) */
	size_t min_compress;       /* values shorter are stored raw; 0 -> 64; 1..max_len */
	size_t mem_limit;          /* bytes, 0: none (see "Memory limit") */
	int compact_ratio_pct;     /* see "Compaction policy"; 0 -> 10, -1 never, 1..1000 */
	unsigned compact_budget;   /* class copies per step; 0 -> 2; 1..4096 */
	size_t compact_min_bytes;  /* 0 -> 256 KiB; 1..2^40 */
	int compact_idle_ms;       /* 0 -> 200, -1 no idle thread, 1..3600000 */
	struct zs_pool_config pool; /* zs_pool_config_init_app + checked = 1 by
	                               zs_blob_config_init; max_object_size 0 is taken as
	                               ZS_MAX_OBJECT_PAGES pages (the most the pool takes) */
	uint64_t reserved[4];      /* must be 0 */
};

struct zs_blob;

/* Fill cfg with the defaults above (application profile, checked handles, lz4). */
ZS_API void zs_blob_config_init(struct zs_blob_config *cfg);

/*
 * Create a store.  NULL cfg -> the defaults.  Returns 0 and sets *out, or
 * -EINVAL (a field out of its range, a dictionary for lz4hc/none, a bad level,
 * nonzero reserved, an invalid pool config, out NULL) or -ENOMEM; *out is
 * NULL on failure. On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 */
ZS_API int zs_blob_create(const struct zs_blob_config *cfg, struct zs_blob **out, char *err,
			  size_t errlen);
/* Free the store and every object in it; NULL is ignored. */
ZS_API void zs_blob_destroy(struct zs_blob *s);

/* Largest value zs_blob_put takes, in bytes (65532 at 4 KiB pages and the default pool). */
ZS_API size_t zs_blob_max_len(const struct zs_blob *s);

/*
 * Store len bytes (0..zs_blob_max_len; data may be NULL only when len is 0).
 * Returns a handle (never 0), or -EINVAL (s NULL, data NULL with len > 0),
 * -ENOSPC (len past zs_blob_max_len), -ENOMEM (memory, or mem_limit would be
 * passed), -EIO (the compressor failed).
 */
ZS_API unsigned long zs_blob_put(struct zs_blob *s, const void *data, size_t len);

/* The value's length in bytes, or -EINVAL (bad handle in checked mode, s NULL). */
ZS_API long zs_blob_size(struct zs_blob *s, unsigned long h);

/*
 * Copy the value into buf (cap bytes).  Returns its length; -ENOSPC when cap
 * is smaller than the value (buf untouched: zs_blob_size says how much is
 * needed), -EINVAL (bad handle in checked mode, s NULL, buf NULL with cap >
 * 0), -EIO (an object that does not decode: memory corrupted under the store).
 */
ZS_API long zs_blob_get(struct zs_blob *s, unsigned long h, void *buf, size_t cap);

/*
 * Zero-copy read: call fn(data, len, arg) with the value, either straight in
 * the pool (a raw value within one page) or in a per-thread buffer.  data is
 * valid only during fn; fn must not free h, and may call the store again
 * (a nested read uses a buffer of its own).  Returns what fn returns, or
 * -EINVAL / -EIO as zs_blob_get (fn not called).
 */
typedef int (*zs_blob_read_fn)(const void *data, size_t len, void *arg);
ZS_API int zs_blob_read(struct zs_blob *s, unsigned long h, zs_blob_read_fn fn, void *arg);

/* Free an object.  0, or -EINVAL (bad handle in checked mode, s NULL).  May run a compaction step. */
ZS_API int zs_blob_free(struct zs_blob *s, unsigned long h);

/* Bytes of memory the store holds (see "Memory" above); 0 for NULL. */
ZS_API size_t zs_blob_mem_bytes(struct zs_blob *s);

/* Compact the whole pool now and return cached pages to the OS; returns pages freed. */
ZS_API unsigned long zs_blob_compact(struct zs_blob *s);

struct zs_blob_stats {
	uint64_t objects;        /* live objects */
	uint64_t value_bytes;    /* their values' lengths, summed */
	uint64_t stored_bytes;   /* their objects' sizes in the pool (headers included) */
	uint64_t raw_objects;    /* of the live objects, those kept raw */
	uint64_t mem_bytes;      /* zs_blob_mem_bytes */
	uint64_t pool_pages;     /* zs_get_total_pages of the pool */
	uint64_t freed_bytes;    /* freed since the last completed compaction pass */
	uint64_t compact_steps;  /* compaction steps run from calls */
	uint64_t compact_passes; /* completed passes: from calls, plus the pool's idle
	                            passes (zs_pool_autocompact_passes) */
	uint64_t pages_compacted;/* pages the steps and zs_blob_compact freed (the idle
	                            passes' are in the pool's zs_pool_stats) */
	uint64_t limit_refusals; /* puts refused with -ENOMEM by mem_limit */
	uint64_t cached_bytes;   /* of mem_bytes, pool pages cached for reuse (not in the limit's count) */
	uint64_t reserved[4];
};
/*
 * 0 (all counters zero for a NULL store). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 */
ZS_API int zs_blob_stats(struct zs_blob *s, struct zs_blob_stats *st, size_t size);

/* The store's pool, for zsmalloc's statistics calls (zs_print_classes...). */
ZS_API struct zs_pool *zs_blob_pool(struct zs_blob *s);

/*
 * Train a zstd dictionary of up to cap bytes from n samples laid end to end in
 * samples (sizes[i] bytes each), for zs_blob_config.dict with ZS_BLOB_ZSTD or
 * ZS_BLOB_ZSTD_HUF (lz4 uses its last 64 KiB, its content).  Returns the
 * dictionary's length, or -EINVAL (NULL arguments, n 0, cap under 256 or over
 * ZS_COMP_MAX_DICT, too few or too uniform samples for zstd to train on).
 *
 * zstd's fastCover trainer with 2^16-entry tables, dmers of 6 bytes and
 * level 1, its segment size chosen from 50..1600 bytes by zstd level 1's
 * output on the last quarter of the samples (held out of training when n is
 * 8 or more).  Unlike zstd's default trainer (`zs dict train`), nothing it
 * allocates is over about 530 KiB besides cap-sized buffers and one output
 * buffer for the largest sample: glibc's malloc raises its mmap threshold
 * for the rest of the process to the size of any mapped block freed, so a
 * trainer that frees 4 MiB tables leaves a long-running program's heap
 * holding more memory.  Its dictionaries are as dense as the default
 * trainer's on RocksDB's db_bench blocks, for about 1.7 times the CPU (0.6
 * s for 6.4 MB of samples here).
 */
ZS_API long zs_blob_dict_train(const void *samples, const size_t *sizes, size_t n, void *dict,
			       size_t cap);

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
#define ZS_V3_zs_blob_create_(cfg, out) zs_blob_create(cfg, out, (char *)0, 0)
#define zs_blob_create(...) ZS_PICK4_(__VA_ARGS__, zs_blob_create, ~, ZS_V3_zs_blob_create_, ~)(__VA_ARGS__)
#define ZS_V3_zs_blob_stats_(s, st) zs_blob_stats(s, st, sizeof(*(st)))
#define zs_blob_stats(...) ZS_PICK3_(__VA_ARGS__, zs_blob_stats, ZS_V3_zs_blob_stats_, ~)(__VA_ARGS__)
#endif
#endif
