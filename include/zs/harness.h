/*
 * libzs's measurement and test harness: failure injection, the RSS probe,
 * the loader of real files' pages, the driver of the kernel's own zram
 * (sysfs + O_DIRECT) and the malloc baselines' registration.  The `zs`
 * tool, the benchmarks and the tests use these; none of it is product API.
 *
 * Where it lives (since 3.0.0, docs/abi.md): libzs.so exports none of it
 * and this header is not installed.  The failure-injection hooks are part
 * of the layers they arm (hidden in libzs.so, linkable from libzs.a, as
 * stand-alone reproducer programs link them); everything else is the harness
 * library (harness/, built as the zs_harness object library and linked
 * whole into the tool, the benchmarks and the tests).
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
#include "zs/zswap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The page-release model (src/pages/release_cost.c) ---- */

/*
 * Busy work of ns nanoseconds per page the page provider releases (freed to
 * its cache or to the OS alike), standing in for the kernel's page-free
 * path; process-wide, 0 (the default) is none.  The environment's
 * ZS_PAGES_RELEASE_COST_NS sets it at the first use.  -EINVAL past
 * ZS_PAGES_RELEASE_COST_MAX_NS.
 */
#define ZS_PAGES_RELEASE_COST_MAX_NS 1000000
int zs_pages_set_release_cost_ns(unsigned ns);
unsigned zs_pages_release_cost_ns(void);
/*
 * The release clock: wall time spent inside page releases (the cost above
 * included), pages and calls, summed over every thread and provider.
 * Copies the sums to *out (when not NULL); on >= 0 then zeroes them and
 * turns the clock on (1) or off (0); -1 only reads.
 */
struct zs_pages_release_time {
	uint64_t ns, pages, calls;
};
void zs_pages_release_timing(int on, struct zs_pages_release_time *out);
/*
 * CPU time the pool's deferred-free worker thread has used since it
 * started, in ns; 0 when the pool has no worker.
 */
uint64_t zs_pool_deferred_worker_cpu_ns(struct zs_pool *pool);
/*
 * Deferred frees (zs_free_deferred, or zs_free in percpu-deferred) that
 * were done at once because the queue, or every per-CPU buffer, was full.
 */
uint64_t zs_pool_deferred_fallbacks(struct zs_pool *pool);
/*
 * Self-compaction's work since the process started, every pool together:
 * the passes' revocations of every thread's zspages, and the heaps its
 * looks stopped to count their free slots (one stop a heap a look).
 */
void zs_autocompact_counts(uint64_t *revocations, uint64_t *heap_stops);

/* ---- Failure injection (after == UINT64_MAX resets, where a call says so) ---- */

/*
 * Test hook: fail page allocations after `after` successes for `count`
 * allocations (0 = until reset); after == UINT64_MAX resets.
 */
void zs_pool_fail_pages(struct zs_pool *pool, uint64_t after, uint64_t count);

/* Test hook: as zs_pool_fail_pages (after == UINT64_MAX resets). */
void zblock_pool_fail_pages(struct zblock_pool *pool, uint64_t after, uint64_t count);

/*
 * Test hook: after `after` more successful file writes (reads: 0 is writes, 1
 * reads) the next `count` fail with -EIO (count 0: all); after == UINT64_MAX
 * clears it.  No-op without a backing file.
 */
void zs_zram_wb_inject(struct zs_zram *z, int reads, uint64_t after, uint64_t count);
/* The same for a zswap's backing file. */
void zs_zswap_wb_inject(struct zs_zswap *z, int reads, uint64_t after, uint64_t count);
/*
 * Test hook: the store's next `count` builds of a stream other than the
 * first (streams are built on first use, src/zram/stream.c) fail as if out
 * of memory; 0 clears it.  Returns the builds that failed since the store
 * was created, injected or not.
 */
unsigned zs_zram_stream_inject(struct zs_zram *z, unsigned count);

struct zs_region;
/*
 * Test hook: the region's next `count` pageouts by move (UFFDIO_MOVE) move
 * only their run's first page and then report failure with nothing moved
 * (EEXIST), as Linux 6.18 does now and then when the application writes a
 * zero page while it is moved (docs/reliability.md); count 0 clears it.
 * No-op where pageout does not move.
 */
void zs_region_move_inject(struct zs_region *r, unsigned count);
/*
 * Test hook: every pageout calls fn(arg, first, n) with run [first, first+n)
 * claimed (page numbers from the region's start), before paging it out, on
 * the thread paging out; fn may block to hold the run claimed while a test
 * races the application's events and faults against it.  fn NULL clears it;
 * set it while no pageout runs.
 */
void zs_region_pageout_hook(struct zs_region *r, void (*fn)(void *arg, size_t first, size_t n),
			    void *arg);

/* ---- The harness library (harness/) ---- */

/* The process's resident set size in bytes (from /proc/self/statm), for tests and tools. */
size_t zs_process_rss(void);

/*
 * Add the malloc baselines ("malloc", and "jemalloc"/"mimalloc" where built)
 * to the backend kinds.  The harness calls it from a constructor, so its
 * programs need not; idempotent.
 */
void zs_harness_register(void);

/* ---- Pages of real files (for the CLI, benchmarks and tests) ---- */

struct zs_pageset {
	size_t page_size;
	size_t npages;         /* pages holding data: len rounded up */
	unsigned char *data;   /* page aligned, zero filled past len */
	size_t len;            /* bytes filled (padded layout: npages x page_size) */
	size_t files;          /* files read */
	uint64_t file_bytes;   /* bytes read */
	size_t map_bytes;      /* capacity: size of the mapping behind data */
};

/*
 * Load the pages of files and of regular files under directories
 * (recursively, symlinks not followed), each file from a page boundary, its
 * last page zero padded, stopping at max_bytes (0 -> no limit).  Unreadable
 * files are skipped.  Returns 0 or -errno; *ps is valid (maybe empty) on 0.
 */
int zs_pageset_load(struct zs_pageset *ps, size_t page_size, char *const *paths, int npaths,
		    uint64_t max_bytes);

/* An empty set with room for cap_bytes (rounded up to pages), for zs_pageset_add. */
int zs_pageset_init(struct zs_pageset *ps, size_t page_size, uint64_t cap_bytes);
/* zs_pageset_add's flags */
#define ZS_PAGESET_PACK 1u       /* files' bytes back to back, no padding between them */
#define ZS_PAGESET_TOP_LEVEL 2u  /* a directory: its top-level regular files (not hidden),
                                    sorted by name, instead of the recursive walk */
/*
 * Append a file, or a directory's files, at len: up to `want` bytes (0: until
 * the set is full).  Returns 0 or -errno (out of memory); a path that cannot
 * be read adds nothing.
 */
int zs_pageset_add(struct zs_pageset *ps, const char *path, uint64_t want, unsigned flags);
void zs_pageset_free(struct zs_pageset *ps);

/* ---- The kernel's one-value files (sysfs, debugfs, /proc/sys) ---- */

/* The file's first line into buf (at most len - 1 bytes, newline dropped, NUL-terminated);
 * 0 or -errno. */
int zs_sysfs_read(const char *path, char *buf, size_t len);
/* Write val (strlen) in one write(2); 0, -errno, or -EIO for a short write.
 * Async-signal-safe. */
int zs_sysfs_write(const char *path, const char *val);

/* ---- The kernel's zram, driven through sysfs and O_DIRECT (root only) ---- */

/* 1 if /sys/class/zram-control exists and we can write to it. */
int zs_kzram_available(void);

/*
 * One kernel zram device of our own: the one place the harness makes and
 * removes them (zs_kzram_run*, `zs record`, bench_region's swap device).
 */
struct zs_kzram_dev {
	int dev;              /* N of /dev/zramN; -1: none */
	int fd;               /* O_DIRECT descriptor, or -1 (not asked for, or closed) */
	int made;             /* node is our own mknod (removed with the device) */
	char node[128];       /* the device node opened */
	char reset_path[64];  /* prepared for zs_kzram_dev_remove_signal */
	char num[16];
};

/*
 * hot_add a device, set comp_algorithm and disksize (bytes) and, with
 * open_direct, open it O_DIRECT (k->fd).  Returns 0 or -errno with a reason
 * in msg; on error nothing is left behind.  Root only (-EPERM otherwise).
 */
int zs_kzram_dev_add(struct zs_kzram_dev *k, const char *comp, uint64_t disksize, int open_direct,
		     char *msg, size_t msg_len);
/* Write one attribute of the device (/sys/block/zramN/ATTR).  0 or -errno. */
int zs_kzram_dev_set(const struct zs_kzram_dev *k, const char *attr, const char *val);
/* Read mm_stat (kernel column order; a missing 9th column reads 0).  0 or -errno. */
int zs_kzram_dev_mm_stat(const struct zs_kzram_dev *k, uint64_t v[9]);
/* Close, reset and hot_remove the device (retrying while it is busy); no-op without one. */
void zs_kzram_dev_remove(struct zs_kzram_dev *k);
/* The same, async-signal-safe (no retry): for a SIGINT/SIGTERM handler. */
void zs_kzram_dev_remove_signal(const struct zs_kzram_dev *k);

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
int zs_kzram_run(const char *comp, const unsigned char *pages, size_t npages,
		 struct zs_kzram_result *res, char *msg, size_t msg_len);

/*
 * The same with `threads` (1..ZS_KZRAM_MAX_THREADS, else -EINVAL) threads,
 * each writing and then reading its own contiguous range of the device's
 * pages; write_s/read_s are the wall time from the first start to the last end.
 */
#define ZS_KZRAM_MAX_THREADS 64
int zs_kzram_run_threads(const char *comp, const unsigned char *pages, size_t npages,
			 unsigned threads, struct zs_kzram_result *res, char *msg, size_t msg_len);

/*
 * The kernel's stored size of each page (compr_data_size after each write,
 * one 4 KiB O_DIRECT write at a time on a fresh device: 0 same-filled,
 * 4096 huge), to find the pages where kernel and user-space compressors
 * agree.  Same device handling and returns as zs_kzram_run.
 */
int zs_kzram_sizes(const char *comp, const unsigned char *pages, size_t npages, uint32_t *sizes,
		   char *msg, size_t msg_len);

#ifdef __cplusplus
}
#endif
#endif
