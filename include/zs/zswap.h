/*
 * libzs zswap: the kernel's zswap front end (mm/zswap.c, Linux 6.18) as a
 * user-space compressed swap cache on any libzs backend (zsmalloc with any
 * pool policy, zblock, the malloc baselines).  Where zram (zs/zram.h) is a
 * block device with a fixed slot table, zswap sits in front of a swap
 * device: pages are stored by swap offset (any value below
 * ZS_ZSWAP_MAX_OFFSET, sparse), loaded exclusively, limited by a share of
 * RAM, and written back, coldest first, to a backing file that plays the
 * swap device.  Each rule below is the kernel's unless it says otherwise.
 *
 * What one offset holds, and how it changes:
 *   - nothing;
 *   - a zero mark: the swap layer's zero-page bypass (the kernel's zeromap):
 *     an all-zero page is never compressed or stored, only remembered
 *     (swpout_zero; a load gives zeros and counts swpin_zero);
 *   - an entry: the compressed page in the backend (stored_pages), or the
 *     raw page as a page-size object when compression does not make it
 *     smaller than a page (stored_incompressible_pages).  There is no
 *     same-filled path: a page of 0xAB bytes is compressed like any other;
 *   - a written-back page: moved to the backing file at offset x page_size
 *     (written_back_pages, zswpwb); a load reads it back from there.
 *   Every load is exclusive (the kernel always loads exclusively): after a
 *   successful load the offset holds nothing.  A store replaces whatever the
 *   offset held (a stale entry is freed, as the kernel frees it).  A store
 *   that is rejected also drops what the offset held, as the kernel drops a
 *   stale entry when zswap_store fails: the caller now keeps the page
 *   elsewhere (its swap device), and the old contents are stale.
 *
 * Store order (the kernel's): group limit, pool limit, compression,
 * allocation, insertion.  The pool limit has hysteresis: when pool pages
 * >= max_pages (total_ram / page_size * max_pool_percent / 100) a store
 * counts pool_limit_hit, the store becomes "full" and is rejected; while
 * full every store is rejected until pool pages <= max_pages *
 * accept_threshold_percent / 100.  A store rejected while full wakes the
 * shrink worker (with a backing file), which writes back cold entries
 * until the pool is at the accept threshold.
 *
 * Groups stand for memory cgroups (cgroup v2's memory.zswap.max and
 * memory.zswap.writeback): every store names one (0..ZS_ZSWAP_MAX_GROUPS-1;
 * group 0 is the root).  Groups are flat (no hierarchy).  A group's charge
 * is the bytes of its entries' objects (memory.zswap.current).
 *
 * Thread safety: every call may run concurrently with any other on the same
 * zswap, except zs_zswap_destroy.  The offset table is sharded by a hash of
 * the offset (the kernel keeps one xarray per 64 MiB of swap), each shard
 * with its own lock and its own part of the LRU, so threads storing and
 * loading different offsets rarely meet; compression runs outside the
 * shard lock on per-stream contexts (2 per CPU, at least 4; the first built
 * at create, each other on its first use, so an empty zswap holds one).  Writeback, the shrinker call and the
 * shrink worker may run at the same time as each other and as stores and
 * loads: each LRU step is done under the one shard lock of the entry it
 * moves (the page's file write included, so a load never sees it half
 * moved).  zs_zswap_writeback, zs_zswap_shrink and zs_zswap_compact block
 * every blockable signal while they run, as zs_zram_writeback does; the
 * shrink worker runs with all signals blocked.  Concurrent calls on the
 * same offset are serialized by its shard lock: each sees the offset before
 * or after the other, never half of it.
 *
 * fork(): a child may go on using a zswap it inherited, and create new
 * ones, whatever the shrink worker (or the pool's deferred-free worker,
 * zs/zsmalloc.h) was doing: a fork waits until the worker is between two
 * LRU steps, where it holds no lock.  Not covered: a zswap one of the
 * application's own threads was inside at the fork.  The child has no
 * worker; a pass the parent had queued or was running is not run in the
 * child, and the child's next store rejected while full queues a pass and
 * starts the child's own worker.  The entries are copied, the backing file
 * is shared: a page written back before the fork reads back in either
 * process, but a load or invalidate of a written-back page punches its
 * range for both, and writeback in either writes page `offset` at offset
 * x page_size, where the other's page of that offset may live.  A child
 * that stores or writes back should use offsets its parent does not (or a
 * zswap of its own, with its own file).
 *
 * Errors are negative errno values (README.md, "Errors").  Arguments that
 * are out of range (NULL pointers, an offset >= ZS_ZSWAP_MAX_OFFSET, a group
 * >= ZS_ZSWAP_MAX_GROUPS, a size out of range, a config field out of its
 * range) are -EINVAL and change nothing.
 */
#ifndef ZS_ZSWAP_H
#define ZS_ZSWAP_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"

#include "zs/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Offsets are 0..ZS_ZSWAP_MAX_OFFSET-1 (2^40: offset x 64 KiB still fits a file offset).
 * Writeback puts page `offset` at byte offset x page_size of the backing file; where that
 * is past what the file can hold (ext4: 16 TiB) the write fails and counts
 * reject_reclaim_fail, and the entry stays.
 */
#define ZS_ZSWAP_MAX_OFFSET ((uint64_t)1 << 40)
/* Groups are 0..ZS_ZSWAP_MAX_GROUPS-1; group 0 is the root. */
#define ZS_ZSWAP_MAX_GROUPS 256u
/* zs_zswap_group_set's max_bytes for "no limit" (memory.zswap.max = max). */
#define ZS_ZSWAP_NO_LIMIT UINT64_MAX
/* The shrink worker gives up after this many steps that wrote nothing back (the kernel's
 * MAX_RECLAIM_RETRIES). */
#define ZS_ZSWAP_WORKER_RETRIES 16u

/*
 * Fill with zs_zswap_config_init, then change fields: the one way to make
 * one.  Each field's range is beside it; zs_zswap_create refuses anything
 * else with -EINVAL.
 *
 * ABI growth, as for every public config (docs/abi.md "Growing a
 * config"): `struct_size` is 0 or the library's size and `reserved` all
 * zero (config_init sets both; anything else is -EINVAL).  A later field
 * is carved out of `reserved`, with zero meaning today's behaviour, so the
 * structure's size and the offsets of its fields never change: such an
 * addition is a MINOR version.  The same holds for the stats structures'
 * `reserved` tails.
 */
struct zs_zswap_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	size_t page_size;        /* 0 -> 4096 (4096..65536, power of two); also the backend's */
	const char *comp;        /* compressor, zs/compress.h names; NULL -> "lzo" (the kernel's
	                            default, CONFIG_ZSWAP_COMPRESSOR_DEFAULT) */
	int comp_level;          /* 0 -> the name's level; else zs/compress.h's ranges */
	struct zs_backend_config backend; /* kind NULL -> "zsmalloc", any pool policy; its
	                                     page_size (and its pool's) is not read: page_size
	                                     above is the one knob; other fields as zs/backend.h */
	uint64_t total_ram;      /* bytes the pool limit is a share of (the kernel's
	                            totalram_pages); 0 -> this machine's physical RAM; else
	                            page_size..2^60 */
	unsigned max_pool_percent;         /* 0..100 (default 20); 0 rejects every store */
	unsigned accept_threshold_percent; /* 0..100 (default 90) */
	int shrinker_enabled;    /* 0 or 1 (default 0, as CONFIG_ZSWAP_SHRINKER_DEFAULT_ON=n):
	                            zs_zswap_shrink writes back only when 1 */
	int deferred_free;       /* 0 or 1.  1: invalidate and load free their object with
	                            zs_backend_free_deferred (seed 001 patch 4); writeback and
	                            replacement free at once (the pool must shrink for them);
	                            a store that finds the pool at max_pages first waits for
	                            the frees already queued, then applies the limit */
	/*
	 * The swap device that writeback writes to: an existing regular file or
	 * block device the process can write, opened read-write at create; page
	 * `offset` lives at byte offset x page_size (a regular file grows
	 * sparse; freed pages are punched out).  Refused as zs_zram_config's
	 * backing_path is (zs/zram.h: directories, FIFOs, character devices
	 * -EINVAL; no write bit -EACCES; open's -errno; a claimed block device
	 * -EBUSY), with the reason in create's err.  NULL -> no writeback:
	 * zs_zswap_writeback/shrink are -EOPNOTSUPP and the shrink worker never
	 * starts.
	 */
	const char *backing_path;
	uint64_t reserved[8];    /* must be 0 (see "ABI growth" above) */
};

/*
 * Defaults: 4 KiB pages, "lzo", zsmalloc (zs_backend_config_init), total_ram
 * 0 (physical RAM), max_pool_percent 20, accept_threshold_percent 90,
 * shrinker off, deferred free off, no backing file.  Never fails; cfg must
 * not be NULL.
 */
ZS_API void zs_zswap_config_init(struct zs_zswap_config *cfg);

struct zs_zswap;

/*
 * Create a zswap (NULL cfg -> defaults).  Returns 0 and sets *out, or sets
 * *out to NULL and returns -EINVAL (a field out of range, an unknown
 * compressor or backend kind, reserved not zero, out NULL), -EOPNOTSUPP (a
 * compressor or backend not built in), -ENOMEM, or a backing file's refusal
 * (see backing_path). On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.  No thread is started here: the shrink worker
 * starts at the first store rejected while the pool is full, and the
 * backend's deferred-free worker at the first deferred free.
 */
ZS_API int zs_zswap_create(const struct zs_zswap_config *cfg, struct zs_zswap **out, char *err,
			   size_t errlen);
/*
 * Stop the shrink worker, free every entry (deferred frees drained), close
 * the backing file and free z.  NULL is ignored.  No other call may run on
 * z during or after it.
 */
ZS_API void zs_zswap_destroy(struct zs_zswap *z);

/* These three answer 0, "" and NULL for z NULL. */
ZS_API size_t zs_zswap_page_size(const struct zs_zswap *z);
/* The compressor's canonical name ("lzo", "zstd:3"). */
ZS_API const char *zs_zswap_comp_name(const struct zs_zswap *z);
/* The backend entries live in (for its stats and its own calls; do not free objects in it). */
ZS_API struct zs_backend *zs_zswap_backend(struct zs_zswap *z);

/* ---- Store, load, invalidate ---- */

/* Positive results of zs_zswap_store/store_compressed/load: success, but not from an entry. */
#define ZS_ZSWAP_ZERO 1    /* store: an all-zero page, marked, not stored (swpout_zero);
                              load: zeros from a zero mark (swpin_zero) */
#define ZS_ZSWAP_DISK 2    /* load: read back from the backing file (pswpin) */
#define ZS_ZSWAP_NODATA 3  /* load: an entry stored without data (store_compressed with
                              cdata NULL): accounted as a load, page filled with zeros */

/*
 * Store one page (page_size bytes) at `offset`, charged to `group`.
 * Returns:
 *   0              stored (stored_pages, zswpout; stored_incompressible_pages
 *                  when kept raw); the entry is the LRU's youngest, referenced;
 *   ZS_ZSWAP_ZERO  the page is all zeros: only marked (swpout_zero); nothing
 *                  is compressed, allocated or charged (what the offset held is
 *                  dropped; -ENOMEM if there is no memory for the mark);
 *   -EINVAL        bad arguments (nothing changes, the old contents stay);
 * and rejections, after which the offset holds nothing (see the top):
 *   -EDQUOT        the group's memory.zswap.max: its charge is >= its max_bytes
 *                  (max 0: always) and writing back one of its entries failed or
 *                  was not possible (no backing file, writeback off, no entry);
 *   -ENOSPC        the pool limit: pool pages >= max_pages (counts pool_limit_hit),
 *                  or the pool is still full (above the accept threshold);
 *   -E2BIG         incompressible (compressed size >= page_size) in a group with
 *                  writeback off (reject_compress_poor);
 *   -EIO           the compressor failed in a group with writeback off
 *                  (reject_compress_fail), or the backend refused to write a
 *                  handle it gave out;
 *   -ENOMEM        no memory for the entry (reject_kmemcache_fail) or the
 *                  backend could not allocate (reject_alloc_fail; its page limit
 *                  included); the backend's -ENOSPC (an object larger than it
 *                  takes) is passed on and counts reject_compress_poor.
 * In a group with writeback on, a failed or useless compression stores the
 * page raw (never a rejection).  Thread safe.
 */
ZS_API int zs_zswap_store(struct zs_zswap *z, uint64_t offset, const void *page, unsigned group);
/*
 * zs_zswap_store for a page compressed elsewhere with this zswap's
 * compressor (what trace replay uses: it knows only sizes).  clen 0: the
 * page was all zeros (ZS_ZSWAP_ZERO, cdata not read).  clen >= page_size:
 * the page is incompressible and is stored raw as a page-size object; cdata
 * is then the compressed data and is decompressed to get the page (-EINVAL
 * when it does not decompress to a page), or NULL.  cdata NULL with clen >
 * 0: a size-only entry, accounted exactly as one with data (a load gives
 * ZS_ZSWAP_NODATA).  Otherwise the clen bytes are stored as they are; bytes
 * that do not decompress make a later load fail (-EIO, decompress_fail).
 * clen above zs_comp_bound of a page: -EINVAL.  Same returns and rejections
 * as zs_zswap_store (-EIO for a compressor failure does not occur).
 */
ZS_API int zs_zswap_store_compressed(struct zs_zswap *z, uint64_t offset, const void *cdata,
				     size_t clen, unsigned group);
/*
 * Load the page at `offset` into page (page_size bytes), exclusively: what
 * the offset held is freed (the entry's object with zs_backend_free_deferred
 * under deferred_free) and it then holds nothing.  Returns 0 (from an entry:
 * zswpin), ZS_ZSWAP_ZERO (a zero mark: swpin_zero), ZS_ZSWAP_DISK (from the
 * backing file: pswpin), ZS_ZSWAP_NODATA (a size-only entry: zswpin), or
 * -ENOENT (the offset holds nothing; page untouched), -EINVAL (bad
 * arguments), -EIO (the entry does not decompress: decompress_fail; or the
 * backing file cannot be read): page is then zeroed and the offset keeps
 * what it held (invalidate drops it).  Thread safe.
 */
ZS_API int zs_zswap_load(struct zs_zswap *z, uint64_t offset, void *page);
/*
 * The swap slot is freed (zswap_invalidate): drop what `offset` holds (an
 * entry's object is freed with zs_backend_free_deferred under
 * deferred_free; a written-back page's file range is punched).  0, -ENOENT
 * (nothing there), -EINVAL (offset out of range).  Thread safe.
 */
ZS_API int zs_zswap_invalidate(struct zs_zswap *z, uint64_t offset);

/* ---- Writeback, shrinker, pool limit ---- */

/*
 * Write back up to nr entries, coldest first, to the backing file.  The LRU
 * is the kernel's with second chance: the coldest entry, if referenced
 * (every entry is when stored), loses its referenced bit and becomes the
 * youngest instead; otherwise it is decompressed, written at offset x
 * page_size, freed (written_back_pages, zswpwb) and the offset holds a
 * written-back page.  A failed write (or decompression) counts
 * reject_reclaim_fail and the entry becomes the youngest, kept.  Entries of
 * groups with writeback off are passed over (they become the youngest,
 * their referenced bit kept).  The walk visits at most twice the entries on
 * the LRU when it starts, so it ends when every entry failed.  Returns the
 * number written (0..nr), -EOPNOTSUPP without a backing file, -EINVAL (z
 * NULL).  Thread safe (see the top: concurrent walks each take their own
 * steps).
 */
ZS_API long zs_zswap_writeback(struct zs_zswap *z, size_t nr);
/*
 * The memory-aware shrinker's two calls (shrinker_enabled).  count: how many
 * pages the shrinker would free: the entries of writeback-on groups, scaled
 * by pool pages / stored pages (compressed entries free less than a page
 * each), 0 with the shrinker off or no backing file.  shrink: walk
 * nr_to_scan LRU steps (each step rotates a referenced entry or writes one
 * back, as zs_zswap_writeback) and return the pages written back; 0 with
 * the shrinker off, -EOPNOTSUPP without a backing file, -EINVAL (z NULL).
 * Thread safe.
 */
ZS_API unsigned long zs_zswap_shrink_count(struct zs_zswap *z);
ZS_API long zs_zswap_shrink(struct zs_zswap *z, unsigned long nr_to_scan);
/*
 * Change the pool limit at run time (the module parameters): 0..100 each,
 * else -EINVAL.  The full state stays as it is until the next store checks
 * it.  Thread safe.
 */
ZS_API int zs_zswap_set_pool_limit(struct zs_zswap *z, unsigned max_pool_percent,
				   unsigned accept_threshold_percent);
/*
 * Wait until deferred frees queued so far are done and the shrink worker is
 * idle (no pass queued or running).  Thread safe.
 */
ZS_API void zs_zswap_flush(struct zs_zswap *z);
/* Backend compaction; returns pool pages freed.  Blocks signals while it runs.  Thread safe. */
ZS_API unsigned long zs_zswap_compact(struct zs_zswap *z);

/* ---- Groups (memory cgroups) ---- */

/*
 * Set a group's memory.zswap.max (bytes of object charge; 0 forbids zswap,
 * ZS_ZSWAP_NO_LIMIT: none, the initial value of every group) and
 * memory.zswap.writeback (0 or 1, initially 1).  A store is refused when the
 * group's charge is >= max_bytes (the check is before the store, so one
 * store may go over), after trying to write back one of the group's entries.
 * Writeback 0: the group's incompressible pages are rejected and its entries
 * are never written back.  0, or -EINVAL (group out of range, writeback not
 * 0/1).  Thread safe.
 */
ZS_API int zs_zswap_group_set(struct zs_zswap *z, unsigned group, uint64_t max_bytes, int writeback);

/* A group's memory.stat zswap keys and its settings. */
struct zs_zswap_group_stats {
	uint64_t zswap;        /* bytes charged: sum of its entries' object sizes */
	uint64_t zswapped;     /* its entries x page_size */
	uint64_t zswpin, zswpout, zswpwb;
	uint64_t max_bytes;    /* as set (ZS_ZSWAP_NO_LIMIT: none) */
	int writeback;
	uint64_t reserved[8];  /* 0 (ABI growth, as the config's) */
};
/*
 * 0, or -EINVAL (z NULL, group out of range, st NULL).  Thread safe (each
 * field read atomically). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 */
ZS_API int zs_zswap_group_stats(struct zs_zswap *z, unsigned group, struct zs_zswap_group_stats *st,
				size_t size);

/* ---- Statistics ---- */

/*
 * Named as the kernel's debugfs files (/sys/kernel/debug/zswap/), vmstat and
 * meminfo.  Levels are exact when no call runs concurrently; events are
 * cumulative.
 */
struct zs_zswap_stats {
	/* debugfs levels */
	uint64_t stored_pages;                /* entries (raw ones included) */
	uint64_t stored_incompressible_pages; /* entries kept raw as page-size objects */
	uint64_t pool_total_size;             /* pool pages x page_size */
	/* debugfs events */
	uint64_t pool_limit_hit;
	uint64_t reject_reclaim_fail;
	uint64_t reject_alloc_fail;
	uint64_t reject_kmemcache_fail;
	uint64_t reject_compress_fail;
	uint64_t reject_compress_poor;
	uint64_t decompress_fail;
	uint64_t written_back_pages;
	/* vmstat */
	uint64_t zswpout, zswpin, zswpwb;
	uint64_t swpout_zero, swpin_zero;
	/* meminfo, in bytes */
	uint64_t meminfo_zswap;     /* Zswap: pool pages x page_size */
	uint64_t meminfo_zswapped;  /* Zswapped: stored pages x page_size */
	/* Not in the kernel's files: state the front end keeps besides the entries */
	uint64_t pool_pages;        /* pool pages (for backends without pages: their bytes
	                               rounded up to pages) */
	uint64_t max_pool_pages;    /* the limit's max_pages, and its accept threshold */
	uint64_t accept_pool_pages;
	int reached_full;           /* the pool limit's hysteresis state */
	uint64_t stored_bytes;      /* sum of the entries' object sizes */
	uint64_t zero_pages;        /* offsets holding a zero mark */
	uint64_t disk_pages;        /* offsets holding a written-back page */
	uint64_t pswpin;            /* pages loaded back from the backing file */
	uint64_t shrink_worker_runs;/* passes of the shrink worker */
	uint64_t reserved[8];       /* 0 (ABI growth, as the config's) */
};

/*
 * 0 (all counters zero for z NULL).  Thread safe (each counter is read atomically;
 * the set is not a snapshot). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 */
ZS_API int zs_zswap_get_stats(struct zs_zswap *z, struct zs_zswap_stats *st, size_t size);

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
#define ZS_V3_zs_zswap_get_stats_(z, st) zs_zswap_get_stats(z, st, sizeof(*(st)))
#define zs_zswap_get_stats(...) \
	ZS_PICK3_(__VA_ARGS__, zs_zswap_get_stats, ZS_V3_zs_zswap_get_stats_, ~)(__VA_ARGS__)
#define ZS_V3_zs_zswap_group_stats_(z, g, st) zs_zswap_group_stats(z, g, st, sizeof(*(st)))
#define zs_zswap_group_stats(...) \
	ZS_PICK4_(__VA_ARGS__, zs_zswap_group_stats, ZS_V3_zs_zswap_group_stats_, ~, ~)(__VA_ARGS__)
#endif
#endif
