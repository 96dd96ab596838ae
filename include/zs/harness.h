/*
 * libzs's measurement and test harness: failure injection, the RSS probe,
 * the loader of real files' pages, and the driver of the kernel's own zram
 * (sysfs + O_DIRECT).  The `zs` tool, the benchmarks, the tests and the
 * Python binding use these; they are exported (ZS_API) but are not product
 * API: they may change in any minor release, without a SONAME bump (see
 * docs/abi.md).  A program that stores data with libzs needs none of this.
 */
#ifndef ZS_HARNESS_H
#define ZS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "zs/common.h"
#include "zs/pages.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Failure injection (after == UINT64_MAX resets, where a call says so) ---- */

/*
 * Failure injection for tests: after `after` more successful allocations,
 * fail the next `count` allocations (count 0 = every one until reset).
 * zs_pages_fail_reset() turns injection off.
 */
ZS_API void zs_pages_fail_after(struct zs_pages *p, uint64_t after, uint64_t count);
ZS_API void zs_pages_fail_reset(struct zs_pages *p);

/* The process's resident set size in bytes (from /proc/self/statm), for tests and tools. */
ZS_API size_t zs_process_rss(void);

/*
 * Test hook: fail page allocations after `after` successes for `count`
 * allocations (0 = until reset); after == UINT64_MAX resets.
 */
ZS_API void zs_pool_fail_pages(struct zs_pool *pool, uint64_t after, uint64_t count);

/* Test hook: as zs_pool_fail_pages (after == UINT64_MAX resets). */
ZS_API void zblock_pool_fail_pages(struct zblock_pool *pool, uint64_t after, uint64_t count);

/*
 * Test hook: after `after` more successful file writes (reads: 0 is writes, 1
 * reads) the next `count` fail with -EIO (count 0: all); after == UINT64_MAX
 * clears it.  No-op without a backing file.
 */
ZS_API void zs_zram_wb_inject(struct zs_zram *z, int reads, uint64_t after, uint64_t count);

/* ---- Pages of real files (for the CLI, benchmarks and tests) ---- */

struct zs_pageset {
	size_t page_size;
	size_t npages;
	unsigned char *data;   /* npages x page_size, page aligned */
	size_t files;          /* files read */
	uint64_t file_bytes;   /* bytes read (the last page of each file is zero padded) */
	size_t map_bytes;      /* internal: size of the mapping behind data */
};

/*
 * Load the pages of files and of regular files under directories
 * (recursively, symlinks not followed), stopping at max_bytes (0 -> no
 * limit).  Unreadable files are skipped.  Returns 0 or -errno; *ps is valid
 * (maybe empty) on 0.
 */
ZS_API int zs_pageset_load(struct zs_pageset *ps, size_t page_size, char *const *paths, int npaths,
		    uint64_t max_bytes);
ZS_API void zs_pageset_free(struct zs_pageset *ps);

/* ---- The kernel's zram, driven through sysfs and O_DIRECT (root only) ---- */

/* 1 if /sys/class/zram-control exists and we can write to it. */
ZS_API int zs_kzram_available(void);

struct zs_kzram_result {
	int dev;                 /* device number used (removed again) */
	double write_s, read_s;  /* wall time of the O_DIRECT page writes / reads */
	uint64_t mm_stat[9];     /* mm_stat after writing, kernel column order */
	uint64_t io_stat[4];
	uint64_t mismatches;     /* pages read back different from what was written */
	char comp[32];           /* algorithm the device used */
};

/*
 * hot_add a device, set comp_algorithm and disksize (npages pages), write
 * every page with 4 KiB O_DIRECT pwrite, read mm_stat, read the pages back
 * with O_DIRECT and compare, then hot_remove (always, also on error).
 * Pages must be 4096 bytes.  Returns 0 or -errno; msg gets a reason.
 */
ZS_API int zs_kzram_run(const char *comp, const unsigned char *pages, size_t npages,
		 struct zs_kzram_result *res, char *msg, size_t msg_len);

/*
 * The same with `threads` (1..ZS_KZRAM_MAX_THREADS, else -EINVAL) threads,
 * each writing and then reading its own contiguous range of the device's
 * pages; write_s/read_s are the wall time from the first start to the last end.
 */
#define ZS_KZRAM_MAX_THREADS 64
ZS_API int zs_kzram_run_threads(const char *comp, const unsigned char *pages, size_t npages,
			 unsigned threads, struct zs_kzram_result *res, char *msg, size_t msg_len);

/*
 * The kernel's stored size of each page (compr_data_size after each write,
 * one 4 KiB O_DIRECT write at a time on a fresh device: 0 same-filled,
 * 4096 huge), to find the pages where kernel and user-space compressors
 * agree.  Same device handling and returns as zs_kzram_run.
 */
ZS_API int zs_kzram_sizes(const char *comp, const unsigned char *pages, size_t npages, uint32_t *sizes,
		   char *msg, size_t msg_len);

#ifdef __cplusplus
}
#endif
#endif
