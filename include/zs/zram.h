/*
 * libzs zram: the kernel's zram block device as a user-space compressed page
 * store, on any libzs backend (zsmalloc, zblock, malloc baselines).
 *
 * A store has a fixed number of page-size slots (disksize / page size).
 * Semantics follow drivers/block/zram (see docs/zram.md):
 *   - a same-filled page (every machine word equal) is kept as its fill word,
 *     no allocation;
 *   - a page compressing to >= the backend's huge class size is stored raw,
 *     as a page-size object ("huge");
 *   - overwrite: compress, allocate the new object, then free the old one;
 *   - the memory limit is checked after allocating: the write fails with
 *     -ENOMEM, the new object is freed and the old contents stay readable;
 *   - mm_stat (nine columns, kernel meanings), io_stat, compaction, idle
 *     marking, recompression with a secondary algorithm.
 *
 * Thread safety: every call may run concurrently with any other on the same
 * store.  Each slot has a lock bit; compression runs on per-stream contexts
 * taken from a small pool, so N threads compress in parallel.
 *
 * fork(): the store runs no thread of its own and its backend's are safe
 * across a fork (zs/zsmalloc.h: deferred_free's worker, the page
 * provider's purge thread), so a child may go on using a store it
 * inherited, and create new ones, unless one of the application's own
 * threads was inside a call on that store at the fork.  The slots are
 * copied, a backing file is shared: pages written back before the fork
 * read back in either process, but each process hands out the file's free
 * blocks on its own, so after the fork only one of them may write back
 * (or each uses a store of its own).
 *
 * Errors are negative errno values (README.md, "Errors"); zs_zram_create
 * sets *out to NULL on failure and says why in a
 * line of text (the backing file's refusals name the path and the reason).
 */
#ifndef ZS_ZRAM_H
#define ZS_ZRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "zs/common.h"

#include "zs/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of the numeric config fields (see struct zs_zram_config). */
#define ZS_ZRAM_MAX_SLOTS ((uint64_t)1 << 32)      /* 16 bytes each, allocated at creation */
#define ZS_ZRAM_MAX_STREAMS 1024u
#define ZS_ZRAM_MAX_MEM_LIMIT ((uint64_t)1 << 60)
#define ZS_ZRAM_MAX_WB_BATCH 1024u

/* Each field's range is beside it; zs_zram_create refuses anything else with -EINVAL. */
struct zs_zram_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	size_t page_size;      /* 0 -> 4096 (4096..65536, power of two); also the backend's */
	uint64_t disksize;     /* bytes; slots = disksize / page_size (rounded down), which must
	                          be 1..ZS_ZRAM_MAX_SLOTS */
	const char *comp;      /* primary compressor, zs/compress.h names and level ranges;
	                          NULL -> "lz4" */
	const char *recomp;    /* secondary for zs_zram_recompress; NULL -> none */
	struct zs_backend_config backend;  /* kind NULL -> "zsmalloc"; its page_size (and its
	                                      pool's) is not read: page_size above is the one
	                                      knob; other fields as zs/backend.h */
	uint64_t mem_limit;    /* bytes of backend memory, rounded up to pages; 0 -> none;
	                          0..ZS_ZRAM_MAX_MEM_LIMIT */
	int deferred_free;     /* 0 or 1.  1: free slots' objects with zs_backend_free_deferred;
	                          a write that finds the store past mem_limit first waits for
	                          the frees already queued (zs_zram_flush) and fails with
	                          -ENOMEM only if that leaves no room */
	unsigned streams;      /* compression streams; 0 -> 2 x online CPUs (min 4, at most
	                          ZS_ZRAM_MAX_STREAMS); 0..ZS_ZRAM_MAX_STREAMS.  The first
	                          is built at create (a bad compressor, level, dictionary or
	                          filter fails it there), each other on its first use, so an
	                          empty store holds one (lz4 ~14 KiB, zstd ~110 KiB); a
	                          stream that cannot be built for lack of memory is not an
	                          error: its thread waits for the first one */
	int track_actime;      /* 0 or 1.  1: stamp each slot's last access (for idle by age) */
	/*
	 * Algorithm parameters (zs/compress.h, struct zs_comp_params: ranges and
	 * which algorithms take a dictionary).  A dictionary is given as bytes
	 * (comp_dict/comp_dict_len, copied at create) or as a file whose whole
	 * contents are the dictionary (comp_dict_path, 1..ZS_COMP_MAX_DICT bytes,
	 * e.g. from `zs dict train`), not both.  recomp_* are the secondary's own.
	 * Out of range, both forms, or a dictionary for recomp without recomp:
	 * -EINVAL; an unreadable path: its -errno.  All 0/NULL: today's behaviour.
	 */
	int comp_level;
	const void *comp_dict;
	size_t comp_dict_len;
	const char *comp_dict_path;
	int recomp_level;
	const void *recomp_dict;
	size_t recomp_dict_len;
	const char *recomp_dict_path;
	/*
	 * Writeback (the kernel's backing_dev, CONFIG_ZRAM_WRITEBACK): an
	 * existing regular file or block device that the store can write and
	 * read back, opened read-write at create.  A regular file is grown
	 * (sparse) to disksize; a block device offers min(its size, disksize)
	 * / page_size blocks.  Refused at create (zs_zram_create names the
	 * path and the reason): a directory, a FIFO, a socket and any
	 * character device (/dev/null, /dev/zero: what is written is not read
	 * back) with -EINVAL; a regular file or device with no write permission
	 * bit (mode & 0222 == 0; refused even for root, who could open it) with
	 * -EACCES; one that cannot be opened read-write (read-only mount,
	 * permissions, missing) with open's -errno (-EROFS, -EACCES, -ENOENT);
	 * a block device is opened exclusively (O_EXCL), so a mounted or
	 * otherwise claimed one is -EBUSY.
	 * The type is checked before the path is opened, so a FIFO or device is
	 * never opened.  Each block written is checksummed (docs/zram.md).
	 * NULL -> no writeback (the fields below must then stay 0: -EINVAL
	 * otherwise).
	 */
	const char *backing_path;
	unsigned writeback_batch_size; /* slots read, written and committed per batch;
	                                  0 -> 32; 0..ZS_ZRAM_MAX_WB_BATCH */
	int writeback_compressed;      /* 0 or 1.  1: write the compressed object (decompressed
	                                  on read) instead of the page */
	/*
	 * Large-folio objects (the 64 KiB mTHP RFC): group_pages contiguous
	 * slots are compressed together as one object.  0 or 1 -> off (every
	 * slot its own object, today's behaviour); otherwise a power of two
	 * 2..16 with group_pages * page_size <= 65536.  Layout: on zsmalloc a
	 * group is one object of up to group_pages pool pages of page_size
	 * (zs_pool_config.max_object_size), whole pages plus its partial last
	 * page packed into a small class once that pays, so it costs about the
	 * bytes it compressed to; a group whose last page would not pack is kept
	 * raw.  Other backends (zblock, the malloc baselines) get a pool whose
	 * page is the group.  The slot API is unchanged: a
	 * read of one slot decompresses its group; a write or discard of one
	 * slot is a read-modify-write of the group under a per-group stripe
	 * lock; zs_zram_write_range/read_range move whole aligned groups
	 * without the read-modify-write.  Statistics, idle, recompression and
	 * writeback work per group (orig_data_size counts whole groups, a
	 * partial write counts as a group read plus a group write).
	 * disksize is rounded up to whole groups inside.
	 */
	unsigned group_pages;
	/*
	 * Filter for typed data (zs/compress.h, zs_filter_check): "shuffle:N",
	 * "delta:N" or "delta+shuffle:N" with N = 2, 4 or 8 bytes per element;
	 * NULL, "" or "none" -> off (today's behaviour).  Each page (each group
	 * when grouped) is filtered before it is compressed and unfiltered after
	 * it is decompressed, by the primary and the secondary alike, on every
	 * path (read, writeback read-back, recompression).  Same-filled and huge
	 * detection look at the raw page; a huge page is stored unfiltered.  Any
	 * other spec: -EINVAL, with the reason from zs_zram_create.
	 */
	const char *filter;
	uint64_t reserved[7];        /* must be 0: later fields are carved out of it, zero
	                               meaning today's behaviour (docs/abi.md); `filter` took
	                               the first of the 8 words (LP64) */
};

/*
 * Fill *cfg with defaults (4 KiB pages, 1 GiB disksize, lz4, zsmalloc).
 * zs_zram_config_init: the kernel profile (backend.zs from
 * zs_pool_config_init), page-exact with kernel zram; `zs zram --vs-kernel`
 * and the replay tools use it.  zs_zram_config_init_app: the same, with
 * backend.zs from zs_pool_config_init_app (zsmalloc.h: the application
 * profile, same density, faster with threads); nothing else differs.
 */
ZS_API void zs_zram_config_init(struct zs_zram_config *cfg);
ZS_API void zs_zram_config_init_app(struct zs_zram_config *cfg);

struct zs_zram;

/*
 * Returns 0 and sets *out, or -EINVAL (bad config/compressor), -EOPNOTSUPP,
 * -ENOMEM, or a backing file's refusal (backing_path above). On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 * (4.0.0 folded zs_zram_create_err into this.)
 */
ZS_API int zs_zram_create(const struct zs_zram_config *cfg, struct zs_zram **out, char *err,
			  size_t errlen);
/*
 * Make every call on z that takes the allocator's locks (write, discard,
 * their ranges, free_notify, reset, compact; writeback and recompress
 * always do) block all blockable signals while it runs, so that an
 * application signal handler never runs on a thread that holds one of the
 * store's locks.  zs_region_create turns it on for the region's store: the
 * region's fault handlers read and free in this store, and a handler that
 * touched region memory there would wait for its own thread.  Costs two
 * system calls per outermost call.  Turning it on also builds every
 * compression stream now (a store builds them on first use otherwise, see
 * `streams`), so fault handlers never allocate one between an munmap and the
 * program's next mmap; a stream it cannot build is built on first use as
 * usual.  0, or -EINVAL (z NULL, on not 0/1).
 */
ZS_API int zs_zram_block_signals(struct zs_zram *z, int on);
/* Frees every stored object (deferred frees drained) and the store. */
ZS_API void zs_zram_destroy(struct zs_zram *z);

ZS_API uint64_t zs_zram_slots(const struct zs_zram *z);
ZS_API size_t zs_zram_page_size(const struct zs_zram *z);
ZS_API struct zs_backend *zs_zram_backend(struct zs_zram *z);
ZS_API const char *zs_zram_comp_name(const struct zs_zram *z);

/*
 * Store one page (page_size bytes) in slot `index`.  0, or -EINVAL (index
 * out of range), the backend allocator's error (-ENOMEM: no memory or its
 * page limit; -ENOSPC: the object is larger than the allocator takes - no
 * built-in backend refuses a page, as zs_backend always gives zblock its huge
 * class), -ENOMEM (memory limit reached), -EIO (the
 * allocator refused to store the object).  On any error the slot keeps its
 * old contents.  In a grouped store a write of one slot succeeds also when
 * its group cannot be read back (the group's other slots then read -EIO).
 */
ZS_API int zs_zram_write(struct zs_zram *z, uint64_t index, const void *page);
/*
 * Read slot `index` into buf (buf_len >= page_size).  Never-written slots
 * read as zeros.  -EIO when the page cannot be read back (its block of the
 * backing file fails to read or its checksum does not match, after
 * retries; a slot of a lost group): buf is then zeroed, never wrong bytes.
 */
ZS_API int zs_zram_read(struct zs_zram *z, uint64_t index, void *buf, size_t buf_len);
/*
 * Drop slot `index` (the kernel's discard: counts notify_free).  0 or
 * -EINVAL (index out of range): it never fails for lack of memory, also not
 * in a grouped store, nor because the slot's group cannot be read back.
 */
ZS_API int zs_zram_discard(struct zs_zram *z, uint64_t index);
/*
 * The swap slot-free hook: like discard but never waits; if the slot is
 * locked it counts miss_free and returns -EBUSY.
 */
ZS_API int zs_zram_free_notify(struct zs_zram *z, uint64_t index);

/*
 * Ranges: `n` consecutive slots from `first`, pages back to back in buf.
 * -EINVAL for a range outside the store; otherwise an error of any page is
 * the call's result (never 0 when part failed).  write_range and read_range
 * stop at the first failed page (a read's buf contents are then
 * unspecified: read page by page to learn which failed); discard_range
 * tries every slot and returns the first error.
 */
ZS_API int zs_zram_write_range(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf);
ZS_API int zs_zram_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf, size_t buf_len);
ZS_API int zs_zram_discard_range(struct zs_zram *z, uint64_t first, uint64_t n);

/*
 * zram's store rule for one page, in the one copy that zs_zram_write, the
 * zs tool, the benchmarks and the Python report all use (the kernel's
 * zram_write_page):
 *   1. a same-filled page (every machine word equal to the first) keeps only
 *      its fill word: nothing is compressed or allocated;
 *   2. otherwise the page is compressed; a result of huge_size bytes or more
 *      (huge_size is the backend's zs_backend_huge_class_size, capped at the
 *      page size) is not worth an object of its own size: the page is
 *      stored raw, as a page_size object ("huge");
 *   3. otherwise the compressed bytes are stored.
 * All three functions are pure (no store involved) and thread safe; the
 * compressor in zs_zram_store_decide is used as zs_compress uses it (one
 * thread at a time per context).
 */
enum zs_zram_store_kind {
	ZS_ZRAM_STORE_SAME = 0,        /* step 1: the fill word only */
	ZS_ZRAM_STORE_COMPRESSED = 1,  /* step 3 */
	ZS_ZRAM_STORE_RAW = 2,         /* step 2: a page_size object ("huge") */
};

/*
 * Step 1.  page_size: a multiple of sizeof(unsigned long) (every valid page
 * size is).  1 if same-filled, with the word in *fill when fill is not
 * NULL; else 0.
 */
ZS_API int zs_zram_page_same_filled(const void *page, size_t page_size, unsigned long *fill);
/*
 * Steps 2-3 for a page that is not same-filled, given the compressor's
 * result comp_len: RAW when comp_len >= huge_size or comp_len <= 0 (a
 * compressor that produced nothing), else COMPRESSED.
 */
ZS_API enum zs_zram_store_kind zs_zram_store_kind(long comp_len, size_t huge_size);

struct zs_zram_store_decision {
	enum zs_zram_store_kind kind;
	unsigned long fill;   /* SAME: the fill word; else 0 */
	const void *data;     /* bytes to store: buf (COMPRESSED), page (RAW), NULL (SAME) */
	size_t len;           /* their length: comp_len, page_size, or 0 */
	size_t comp_len;      /* the compressed size (RAW included); 0 for SAME */
};
struct zs_comp;
/*
 * The whole rule for `page` (page_size bytes): step 1, then compression
 * with `comp` (zs/compress.h) into buf (buf_cap >= zs_comp_bound(comp,
 * page_size)), then steps 2-3.  Fills *d and returns 0, or returns the
 * compressor's negative errno (zs_zram_write counts that a failed write).
 */
ZS_API int zs_zram_store_decide(struct zs_comp *comp, const void *page, size_t page_size,
				size_t huge_size, void *buf, size_t buf_cap,
				struct zs_zram_store_decision *d);

/* Free every slot (the kernel's reset, keeping the store configured). */
ZS_API void zs_zram_reset(struct zs_zram *z);
/* Wait for deferred frees queued so far (no-op when deferred_free is off). */
ZS_API void zs_zram_flush(struct zs_zram *z);

/* Backend compaction (the sysfs `compact` write); returns pages freed. */
ZS_API unsigned long zs_zram_compact(struct zs_zram *z);

/*
 * Mark slots idle, as writing to sysfs `idle`: age_seconds 0 marks every
 * stored slot ("all"); otherwise (track_actime only) slots not accessed for
 * at least that long.  Same-filled slots are never marked.  Returns the
 * number of slots marked, or -EINVAL for a nonzero age when the store was
 * created without track_actime (there is no access time to compare).
 */
ZS_API long zs_zram_mark_idle(struct zs_zram *z, unsigned age_seconds);

/* Which slots zs_zram_recompress considers (the kernel's `type=`). */
enum zs_zram_recomp_type {
	ZS_ZRAM_RECOMP_ALL = 0,       /* any eligible slot */
	ZS_ZRAM_RECOMP_IDLE = 1,
	ZS_ZRAM_RECOMP_HUGE = 2,
	ZS_ZRAM_RECOMP_HUGE_IDLE = 3, /* both idle and huge */
};

struct zs_zram_recomp_result {
	unsigned long scanned;        /* slots tried */
	unsigned long recompressed;   /* moved to a smaller class */
	unsigned long incompressible; /* no gain: marked incompressible */
};

/*
 * Recompress slots with the secondary compressor (cfg.recomp).  A result is
 * kept only if it lands in a smaller backend class (zs_backend_lookup_class;
 * smaller size for backends without classes) and below `threshold` bytes
 * (0 -> the huge class size); otherwise the slot is marked incompressible
 * and never tried again until rewritten.  max_pages 0 -> no limit.
 * Returns 0 or -EINVAL (no secondary configured, type not one of the four
 * above, threshold not below the huge class size), -ENOMEM, or a store error
 * as zs_zram_write's (the allocator's code, -EIO).
 */
ZS_API int zs_zram_recompress(struct zs_zram *z, enum zs_zram_recomp_type type, size_t threshold,
		       unsigned long max_pages, struct zs_zram_recomp_result *res);

/* ---- Writeback to the backing file (needs cfg.backing_path) ---- */

/* Which slots zs_zram_writeback moves (the kernel's writeback `type=`). */
enum zs_zram_wb_type {
	ZS_ZRAM_WB_IDLE = 1,           /* marked idle (zs_zram_mark_idle) */
	ZS_ZRAM_WB_HUGE = 2,           /* stored raw */
	ZS_ZRAM_WB_HUGE_IDLE = 3,      /* both */
	ZS_ZRAM_WB_INCOMPRESSIBLE = 4, /* marked incompressible by recompression */
};

struct zs_zram_wb_result {
	unsigned long scanned;   /* slots that matched the type */
	unsigned long written;   /* moved to the file (their objects freed) */
};

/*
 * Move the data of matching slots to the backing file, writeback_batch_size
 * at a time: read (or, with writeback_compressed, copy the compressed
 * object) under the slot lock, write the batch without slot locks, then
 * commit each slot whose contents did not change meanwhile (a slot read,
 * written, discarded or recompressed during the batch keeps its object and
 * its block is released): its object is freed and later reads come from the
 * file.  Same-filled and already written-back slots are never moved.
 * max_pages 0 -> no limit.  One writeback runs at a time (others wait).
 * Returns 0; -EINVAL (no backing file, bad type); -EIO when the writeback
 * limit is enabled and used up (pages before that are written); -ENOSPC
 * when the file has no free block; a file error as its -errno (e.g. -EIO,
 * -ENOSPC), after which the slots of the failed batch keep their objects.
 */
ZS_API int zs_zram_writeback(struct zs_zram *z, enum zs_zram_wb_type type, unsigned long max_pages,
		      struct zs_zram_wb_result *res);
/*
 * The kernel's writeback_limit_enable and writeback_limit: with enable 1,
 * each page written back uses one unit of `pages` (units of page_size;
 * 0..UINT64_MAX) and writeback stops with -EIO at 0.  Disabled (the
 * initial state) there is no limit.  Both calls: -EINVAL without a backing
 * file; set also for enable outside 0..1.  get returns the remaining budget.
 */
ZS_API int zs_zram_set_writeback_limit(struct zs_zram *z, int enable, uint64_t pages);
ZS_API int zs_zram_get_writeback_limit(struct zs_zram *z, int *enable, uint64_t *pages);

/* ---- Statistics ---- */

struct zs_zram_stats {
	/* mm_stat, in the kernel's column order; sizes in bytes */
	uint64_t orig_data_size;   /* pages stored (same-filled and huge included) x page size */
	uint64_t compr_data_size;  /* sum of stored object sizes (huge count page_size) */
	uint64_t mem_used_total;   /* backend memory: pool pages x page size */
	uint64_t mem_limit;
	uint64_t mem_used_max;     /* peak of mem_used_total (see zs_zram_reset_mem_used_max) */
	uint64_t same_pages;
	uint64_t pages_compacted;
	uint64_t huge_pages;       /* current */
	uint64_t huge_pages_since; /* cumulative */
	/* io_stat */
	uint64_t failed_reads, failed_writes, invalid_io, notify_free;
	/* debug_stat and counters the kernel keeps elsewhere */
	uint64_t miss_free;
	uint64_t num_reads, num_writes;
	uint64_t pages_stored;
	uint64_t incompressible_pages;  /* slots marked by recompression */
	/* bd_stat (kernel meanings, in pages): blocks in use on the backing file, pages
	   read from it, pages written to it */
	uint64_t bd_count, bd_reads, bd_writes;
	/* Backing-file read faults (not in the kernel's bd_stat; appended, so older fields keep
	   their offsets): retries of a failed or mismatching block read, reads that failed for
	   good (-EIO after every try), and checksum mismatches seen (each try counts). */
	uint64_t bd_read_retries, bd_read_errors, bd_csum_errors;
};

/* 0, or -EINVAL (z NULL). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL. */
ZS_API int zs_zram_get_stats(struct zs_zram *z, struct zs_zram_stats *st, size_t size);
/* The kernel's "echo 0 > mem_used_max": reset the peak to current usage. */
ZS_API void zs_zram_reset_mem_used_max(struct zs_zram *z);
/* The kernel's file formats, one line each (newline included). */
ZS_API int zs_zram_format_mm_stat(const struct zs_zram_stats *st, char *buf, size_t len);
ZS_API int zs_zram_format_io_stat(const struct zs_zram_stats *st, char *buf, size_t len);
ZS_API int zs_zram_format_bd_stat(const struct zs_zram_stats *st, char *buf, size_t len);

/* Per-slot flags as the kernel names them (for tests and tools). */
#define ZS_ZRAM_F_SAME           (1u << 17)
#define ZS_ZRAM_F_WB             (1u << 19) /* data lives in the backing file */
#define ZS_ZRAM_F_HUGE           (1u << 21)
#define ZS_ZRAM_F_IDLE           (1u << 22)
#define ZS_ZRAM_F_INCOMPRESSIBLE (1u << 23)
/* Stored size, flags (ZS_ZRAM_F_*) and recompression priority of a slot; -EINVAL out of range. */
ZS_API int zs_zram_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
		      unsigned *prio);

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
#define ZS_V3_zs_zram_create_(cfg, out) zs_zram_create(cfg, out, (char *)0, 0)
#define zs_zram_create(...) ZS_PICK4_(__VA_ARGS__, zs_zram_create, ~, ZS_V3_zs_zram_create_, ~)(__VA_ARGS__)
#define zs_zram_create_err zs_zram_create
#define ZS_V3_zs_zram_get_stats_(z, st) zs_zram_get_stats(z, st, sizeof(*(st)))
#define zs_zram_get_stats(...) \
	ZS_PICK3_(__VA_ARGS__, zs_zram_get_stats, ZS_V3_zs_zram_get_stats_, ~)(__VA_ARGS__)
#endif
#endif
