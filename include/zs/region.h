/*
 * libzs region: compressed memory for a running program.  A zs_region is an
 * anonymous private mapping registered with Linux userfaultfd and backed by a
 * libzs zram store (any backend, any compressor).  zs_region_pageout()
 * compresses resident pages into the store and drops them (RSS falls); the
 * next touch of such a page faults, a handler thread decompresses it and
 * installs it with UFFDIO_COPY (never-written pages: the zero page), and
 * frees its stored object.  This is the kernel's anonymous memory on a zram
 * swap device, done in user space with libzs's allocator and policies.
 * See docs/region.md for how it works and what it costs.
 *
 * Requirements: Linux userfaultfd with missing and write-protect modes for
 * anonymous memory (5.7+).  Creating a region needs one of: root
 * (CAP_SYS_PTRACE), read/write access to /dev/userfaultfd, or
 * sysctl vm.unprivileged_userfaultfd=1.  Without it zs_region_create returns
 * -EPERM and, when `err` is given, a message naming those fixes.
 *
 * The application's own changes to the range behave as on anonymous memory
 * (the region asks the kernel for the remove, unmap and remap events):
 *   - madvise(MADV_DONTNEED/MADV_REMOVE) of (part of) the range: the pages
 *     read as zeros afterwards and their stored objects are freed (stats:
 *     removed).  A page the library is paging out at that moment is dropped
 *     too (its slot freed).  MADV_FREE frees stored objects the same way;
 *     resident pages keep their contents or read zeros, as the kernel
 *     decides for anonymous memory.
 *   - munmap() of part of the range, mremap() shrinking it, or a MAP_FIXED
 *     mapping placed over it: that part is no longer the region's.  Its
 *     stored objects are freed (stats: unmapped), calls whose range touches
 *     it return -EFAULT, and zs_region_destroy never unmaps it (whatever is
 *     mapped there now is left alone, and so does a pageout in flight over
 *     those pages).  The rest keeps working.  One window remains where
 *     pageout must copy (kernels before 6.8, which lack UFFDIO_MOVE, or a
 *     run the kernel refuses to move): memory the application maps at those
 *     addresses within microseconds of its munmap, while a pageout is
 *     dropping those very pages, can lose a page (docs/region.md).
 *   - mremap() moving (part of) the range: the moved part is the
 *     application's memory at its new address, with its contents - pages
 *     that were stored are decompressed when first touched there - and is
 *     no longer the region's: calls on the old addresses return -EFAULT,
 *     calls on the new ones -EINVAL (-EFAULT inside the region's range),
 *     and zs_region_destroy leaves it (the caller unmaps it; pages still
 *     stored there when the region is destroyed read as zeros after).
 *     stats.broken is set and stderr says so once.  mremap() growing the range in place adds plain anonymous
 *     memory that is not the region's.
 * What a program may do with region memory, besides the above (the tests
 * named check each point):
 *   - load and store from any thread and from signal handlers (Threading,
 *     below; test_mt_region, test_mt_region_sig_store, test_mt_region_stress).
 *   - pass it to system calls as a buffer (read, write, pread, pwrite, ...):
 *     the kernel's copy faults stored pages in as the program's own access
 *     would, and what it writes there stays written across pageouts
 *     (test_mt_region_dma buffered_read, buffered_write).
 *   - direct I/O into and out of it (O_DIRECT, io_uring fixed buffers,
 *     anything that pins pages): a pinned page is never paged out.  A
 *     pageout leaves it resident (not counted in its return) and takes it
 *     on a later call once unpinned, as the kernel's reclaim does, so what
 *     the device writes is what the program reads (test_mt_region_dma,
 *     test_mt_region_stress).  Seeing a pin needs UFFDIO_MOVE (Linux 6.8+,
 *     stats.uffd_move): on older kernels, and with ZS_REGION_MOVE=zap in
 *     the environment, pageout cannot tell a pinned page and direct I/O
 *     into pages must not overlap a pageout of those pages.
 *   - mprotect part of it read-only and back: stored pages read right while
 *     read-only, a pageout may leave read-only pages resident, and writes
 *     work again once writable (test_region_mprotect).
 *   - madvise, munmap and mremap as described above (test_region_misuse,
 *     test_mt_repro_region_madvise, test_mt_region_move_race).
 * Not supported:
 *   - fork(): the range is MADV_DONTFORK, so a child has no mapping there
 *     (touching it in the child is SIGSEGV); the parent is unaffected
 *     (test_mt_region).  The child must not call zs_region_* on an
 *     inherited region (its handler and reclaim threads stayed in the
 *     parent); pools, stores and zswaps it inherited, other than the
 *     region's own store, and new ones work there (zs/zsmalloc.h, "fork()";
 *     test_mt_fork_threads).
 *   - Huge pages (THP) inside the range: the range is MADV_NOHUGEPAGE.
 *
 * Read errors: a stored page that cannot be read back (e.g. its backing
 * file failed after writeback; the store retries transient errors first)
 * is never answered with other bytes: the access gets SIGBUS, as the
 * kernel answers a swap read error, and so does every later access until
 * the page is released, dropped with MADV_DONTNEED or unmapped (it reads
 * zeros after).  Counted in stats sigbus_pages and read_errors.  This uses
 * UFFDIO_POISON (Linux 6.6+); on older kernels the faulting thread is sent
 * SIGBUS with tgkill instead (stderr says so once).
 *
 * Threading: every call may run concurrently with any other call and with
 * application threads touching the memory, except zs_region_destroy (no
 * other call may be in progress or follow).  Any access to region memory,
 * from any thread or signal handler, completes while other threads are
 * inside region calls: the fault handlers never wait for a page that a
 * library call owns, and the calls that take pages or store locks
 * (pageout, release, advise, reclaim) block every blockable signal while
 * they run, so a signal handler never runs on a thread that owns a page or
 * holds a store lock (a pending signal is delivered when the call returns).
 * The library's threads (fault handlers, reclaimer) run with every signal
 * blocked.  The store (zs_region_store) is created with
 * zs_zram_block_signals on, so calls made on it directly (zs_zram_compact,
 * zs_zram_writeback, ...) block signals the same way.  Writes
 * to a page while it is being paged out are never lost (see
 * src/region/reclaim.c, "pageout protocol").  Reads are not stopped: the
 * page stays mapped until its pageout drops it, so a read in that window
 * sees the page without bringing it back, and once the pageout completes
 * the page lives in the store - in the backing file too, if a
 * zs_zram_writeback took its slot meanwhile - just as if the read had come
 * before the pageout.  To know which pages a read brought back into memory,
 * let the pageouts in flight finish first (zs_region_reclaim waits for the
 * reclaim thread's pass).  Accessing a released range
 * reads zeros; releasing a range while other threads write into it leaves
 * those pages in an unspecified (but consistent, page-granular) state, like
 * munmap racing with stores.
 *
 * Statistics are counters read without stopping anything: a page whose
 * fault has just returned may be counted a moment later.
 *
 * Errors are negative errno values (README.md, "Errors").
 */
#ifndef ZS_REGION_H
#define ZS_REGION_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"

#include "zs/zram.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zs_region_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	size_t size;                 /* bytes; rounded up to page size; 1 page ..
	                                ZS_ZRAM_MAX_SLOTS pages */
	struct zs_zram_config store; /* the backing store; disksize is set to size, page_size
	                                must be the system page size (0 -> it) */
	unsigned handler_threads;    /* fault-handler threads; 0 -> 1 (1..64).  Spinning ones,
	                                at least as many as the CPUs the process may use (and
	                                two or more), are bound one per CPU, round robin
	                                (environment ZS_REGION_SPREAD=0: not bound), so a fault
	                                is read on its thread's CPU; fewer are left to the
	                                scheduler.  One faulting thread with a CPU to spare:
	                                2 measured 25% faster random faults; with every CPU
	                                busy faulting (other processes' regions), 1 measured
	                                better (docs/region.md, "How many handler threads") */
	unsigned fault_around;       /* pages installed per fault when access looks sequential,
	                                the faulting page included; 0/1 -> off (max 256) */
	unsigned spin_us;            /* handlers spin on a non-blocking read this long after the
	                                last event before sleeping in poll(); 0 -> 50, set
	                                ZS_REGION_NO_SPIN for poll() only */
	size_t resident_limit;       /* bytes; 0 -> no automatic reclaim.  Above it a reclaim
	                                thread pages out cold pages (CLOCK over fault-in and
	                                explicit hints) until resident < 7/8 of the limit */
	uint64_t reserved[8];        /* must be 0: later fields are carved out of it, zero
	                               meaning today's behaviour (docs/abi.md) */
};
#define ZS_REGION_NO_SPIN 0xffffffffu

/*
 * Defaults: size 0 (must be set), store defaults (lz4, zsmalloc), 1 handler, fault-around 16.
 * zs_region_config_init: the store from zs_zram_config_init (kernel profile);
 * zs_region_config_init_app: the store from zs_zram_config_init_app (the
 * application profile, zsmalloc.h); nothing else differs.
 */
ZS_API void zs_region_config_init(struct zs_region_config *cfg);
ZS_API void zs_region_config_init_app(struct zs_region_config *cfg);

struct zs_region;

/*
 * Create a region.  0 and *out, or -EINVAL (bad config), -EPERM (no
 * userfaultfd permission), -ENOSYS/-EOPNOTSUPP (kernel lacks the needed
 * userfaultfd features), -ENOMEM. On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 */
ZS_API int zs_region_create(const struct zs_region_config *cfg, struct zs_region **out, char *err,
			    size_t errlen);
/*
 * Stop the handlers, free every stored object and unmap what is still the
 * region's (never a part the application unmapped or moved).  NULL is a no-op,
 * and so is a pointer that is not a live region (destroyed already, or never
 * returned by zs_region_create): it is looked up first, never dereferenced,
 * and a line on stderr names it.
 */
ZS_API void zs_region_destroy(struct zs_region *r);

ZS_API void *zs_region_addr(const struct zs_region *r);
ZS_API size_t zs_region_size(const struct zs_region *r);
ZS_API struct zs_zram *zs_region_store(struct zs_region *r);

/*
 * Compress every resident page of [addr, addr+len) into the store and drop
 * it.  Pages never touched (or released) are skipped.  Range must lie in the
 * region and be page aligned.  Returns the number of pages stored (>= 0), or
 * -EINVAL, -EFAULT (part of the range was unmapped or moved away by the
 * application), -ENOMEM (store full or at its mem_limit before the call
 * stored any page; a call that stored some first returns their number).
 * Pages a failed or partial pageout did not store stay resident and intact.
 */
ZS_API long zs_region_pageout(struct zs_region *r, void *addr, size_t len);

/*
 * Forget the contents of [addr, addr+len): free stored objects, drop
 * resident pages; the pages read as zeros afterwards (the munmap analogue,
 * keeping the range).  Objects are freed with the store's free mode and,
 * with store.deferred_free, only queued (zs_zram_flush to wait).
 * Returns 0, -EINVAL, -EFAULT (part of the range unmapped or moved away).
 */
ZS_API int zs_region_release(struct zs_region *r, void *addr, size_t len);

/* Access hints for automatic reclaim. */
enum zs_region_advice {
	ZS_REGION_COLD = 1,      /* page these out first */
	ZS_REGION_HOT = 2,       /* treat as just accessed */
	ZS_REGION_PAGEOUT = 3,   /* page out now (zs_region_pageout) */
};
/*
 * Returns 0; -EINVAL (range as zs_region_pageout's, or adv not one of the
 * three), -EFAULT (as zs_region_pageout); ZS_REGION_PAGEOUT also its -ENOMEM.
 */
ZS_API int zs_region_advise(struct zs_region *r, void *addr, size_t len, enum zs_region_advice adv);

/*
 * Run one reclaim pass now: page out cold pages until resident <= target bytes.
 * Pages stored.  Passes run one at a time: it starts only after the reclaim
 * thread's pass in flight (resident_limit) has finished, so a target at or
 * above the region's size just waits for that pass.
 */
ZS_API long zs_region_reclaim(struct zs_region *r, size_t target);

#define ZS_REGION_LAT_BUCKETS 24   /* bucket i: service time in [2^i, 2^(i+1)) * 128 ns */

struct zs_region_stats {
	uint64_t pages;              /* region size in pages */
	uint64_t resident;           /* pages mapped (installed or written, not paged out) */
	uint64_t stored;             /* pages held in the store */
	uint64_t faults;             /* missing-page faults handled */
	uint64_t faults_zero;        /* ... answered with zero pages (never written) */
	uint64_t faults_wp;          /* write-protect faults: writers that hit a page mid-pageout */
	uint64_t pages_in;           /* pages installed from the store (fault-around included) */
	uint64_t fault_around_pages; /* of pages_in, installed beside the faulting page */
	uint64_t pageouts;           /* pages stored by pageout/reclaim */
	uint64_t reclaimed;          /* of pageouts, by automatic reclaim */
	uint64_t releases;           /* pages released */
	uint64_t lat_hist[ZS_REGION_LAT_BUCKETS]; /* handler service time per fault */
	struct zs_zram_stats store;  /* the store's mm_stat and counters */
	int uffd_move;               /* 1: the kernel has UFFDIO_MOVE (pageout moves pages out with it) */
	int broken;                  /* 1: mremap moved part of the range away (no longer the region's) */
	uint64_t removed;            /* pages dropped by the application (MADV_DONTNEED/REMOVE/FREE) */
	uint64_t unmapped;           /* pages the application unmapped or moved away */
	uint64_t sigbus_pages;       /* faults answered with SIGBUS: stored page unreadable */
	uint64_t read_errors;        /* store reads that failed (zs_zram_read != 0) */
};
/* 0, or -EINVAL (r NULL). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL. */
ZS_API int zs_region_get_stats(struct zs_region *r, struct zs_region_stats *st, size_t size);
/* Latency percentile (0..100) in ns from a histogram (bucket's upper bound). */
ZS_API double zs_region_lat_percentile(const uint64_t *hist, double pct);

/*
 * 1 if this process can create regions, 0 if not (reason in err), without
 * creating one: opens userfaultfd and checks the features.
 */
ZS_API int zs_region_available(char *err, size_t err_len);

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
#define ZS_V3_zs_region_get_stats_(r, st) zs_region_get_stats(r, st, sizeof(*(st)))
#define zs_region_get_stats(...) \
	ZS_PICK3_(__VA_ARGS__, zs_region_get_stats, ZS_V3_zs_region_get_stats_, ~)(__VA_ARGS__)
#endif
#endif
