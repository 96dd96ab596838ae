/*
 * libzs zsmalloc: the Linux kernel's compressed-memory allocator in user space.
 *
 * Objects of up to one page are packed into size classes; a class's storage
 * unit is a "zspage", a chain of 1..max_chain pool pages (not contiguous),
 * objects may span two pages.  A handle names an object for its whole life;
 * compaction moves objects and rewrites only what the handle points to, so
 * callers never see a move.  A handle is an opaque value (never 0, never
 * ZS_IS_ERR) that carries a generation: freeing an object and allocating
 * again may reuse its slot but gives a different handle.  Behaviour (class
 * table, placement, free lists, fullness groups, compaction order, page
 * accounting) follows the kernel's mm/zsmalloc.c so that page counts agree
 * with a running kernel operation by operation (see tests/ and `zs replay`).
 *
 * "seed 000".."seed 004" below name the upstream patches and threads this
 * follows, and words like "slot" have one meaning per layer: docs/glossary.md.
 *
 * The policies that kernel developers argue about are pool config fields,
 * each defaulting to today's kernel: class delta, chain length policy, the
 * zs_free lock mode, and deferred free.
 *
 * Errors (the convention for every libzs header is in README.md, "Errors"):
 * functions returning int return 0 or a negative errno value; zs_malloc
 * returns a handle or an error value (ZS_IS_ERR); pointer-returning calls
 * return NULL and set errno; zs_pool_create has the one constructor shape
 * (0 or -errno, *out, and a reason in err).
 *
 * Thread safety: everything may be called concurrently, as in the kernel
 * (pool rwlock, per-class locks, per-zspage reader/writer lock).
 *
 * fork(): a child may go on using every pool it inherited, and create new
 * ones, whatever the library's own threads were doing at the fork: the
 * deferred-free worker and the page provider's purge thread (zs/pages.h)
 * are held at a point where they hold no pool, class, handle or page lock
 * (pthread_atfork handlers; the worker pauses between two batches, so a
 * fork waits at most one batch of frees).  Not covered: a pool one of the
 * application's own threads was inside at the fork (a call in progress, a
 * zs_obj_read_begin or zs_map_object without its end): the child must not
 * touch that pool, as with any lock copied held; nor may it start the purge
 * thread (pages cached by a pool with a timed page_cache_decay_ms), whose
 * passes visit every pool's pages, that one's too, and whose registry
 * creating or destroying any pool then waits for.  The child has no worker:
 * its first zs_free_deferred on a pool starts one, which also frees what
 * the parent had queued; until then those handles stay queued, and
 * zs_free_deferred_flush and zs_destroy_pool free them as always.  Objects
 * are copied, not shared: what a child writes or frees the parent never
 * sees, and the other way round.
 */
#ifndef ZS_ZSMALLOC_H
#define ZS_ZSMALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An error value from zs_malloc is -errno cast to unsigned long, as the kernel's ERR_PTR. */
#define ZS_IS_ERR(h) ((unsigned long)(h) >= (unsigned long)-4095)
#define ZS_ERR(h) ((int)(long)(h))

#define ZS_HANDLE_SIZE 8       /* in-object header of non-huge objects */
#define ZS_MIN_ALLOC_SIZE 32
#define ZS_MAX_CHAIN 16
#define ZS_NR_FULLNESS_GROUPS 12

/*
 * The registries of zsmalloc's named choices: one X-macro list per kind,
 * each entry X(ID, fn, "name", "help") - the enumerator ZS_CHAIN_<ID> or
 * ZS_FREE_<ID>, the identifier its implementation is named after, the one
 * spelling tools and bindings use, and a line of help.  Everything that
 * lists a kind reads its list: the enums below, zs_*_name/_parse/_names,
 * the zs_const table, the zs tool's parsing, help and `zs replay --sweep`,
 * the Python package and the tests; so a new chain policy is one line here
 * and chain_<fn>() in src/zsmalloc/class.c (docs/policies.md).  Append
 * only: an entry's value is its position, and callers and bindings keep it.
 */
#define ZS_CHAIN_POLICIES(X) \
	X(EXHAUSTIVE, exhaustive, "exhaustive", "the kernel's: least tail waste over 1..max_chain") \
	X(HEURISTIC, heuristic, "heuristic", "seed 002 patch 2: lengthen a chain only for a real saving")

#define ZS_FREE_MODES(X) \
	X(POOL_LOCK, pool, "pool", "the kernel's: pool rwlock (read), then the class lock") \
	X(CLASS_INDEX, class, "class", "class index read from the obj, no pool lock, obj re-read") \
	X(CLASS_INDEX_UNLOCKED, class_unlocked, "class-unlocked", \
	  "as class, and empty zspages freed after the class lock drops") \
	X(PAGE_DEFERRED, page_deferred, "page-deferred", \
	  "as class-unlocked; emptied zspages' pages released later by the worker") \
	X(PERCPU_DEFERRED, percpu_deferred, "percpu-deferred", \
	  "zs_free queues per CPU; the worker frees full buffers by class")

#define ZS_CHAIN_ENUM_(id, fn, name, help) ZS_CHAIN_##id,
#define ZS_FREE_ENUM_(id, fn, name, help) ZS_FREE_##id,

/* How a class's pages-per-zspage is chosen: ZS_CHAIN_EXHAUSTIVE = 0 (the kernel's),
 * ZS_CHAIN_HEURISTIC = 1, ... in registry order. */
enum zs_chain_policy {
	ZS_CHAIN_POLICIES(ZS_CHAIN_ENUM_)
	ZS_CHAIN_POLICY_COUNT /* not a policy: how many there are */
};

/* How zs_free finds and locks the object's class (seeds 000/001): ZS_FREE_POOL_LOCK = 0
 * (the kernel's), ZS_FREE_CLASS_INDEX = 1, ZS_FREE_CLASS_INDEX_UNLOCKED = 2, ... */
enum zs_free_mode {
	ZS_FREE_MODES(ZS_FREE_ENUM_)
	ZS_FREE_MODE_COUNT /* not a mode: how many there are */
};

/* Largest deferred_capacity: 2^24 queued handles (16 bytes each, reserved by the first
 * zs_free_deferred and faulted in as the queue is used). */
#define ZS_MAX_DEFERRED_CAPACITY ((size_t)1 << 24)

/*
 * Pool configuration.  Every field has the range given beside it (after its
 * 0 default is applied); zs_pool_create refuses anything else with -EINVAL,
 * so no value, however extreme, can overflow a size or loop for long.
 */
struct zs_pool_config {
	size_t struct_size;         /* sizeof this structure, set by its config_init; 0 is
	                               taken as this library's size (docs/abi.md "Growing a
	                               config"); anything else is -EINVAL */
	const char *name;           /* for stats output; NULL -> "zs" (truncated to 31 bytes) */
	size_t page_size;           /* pool page size; 0 -> 4096 (4096..65536, power of two) */
	unsigned max_chain;         /* max pages per zspage; 0 -> 8 (1..16; the kernel allows 4..16) */
	unsigned class_delta;       /* bytes between classes; 0 -> kernel: max(page_size >> 8, 16).
	                               Multiple of 8, 8..page_size.  16 at any page size is seed 002
	                               patch 1. */
	enum zs_chain_policy chain_policy; /* 0..ZS_CHAIN_POLICY_COUNT - 1 (ZS_CHAIN_POLICIES) */
	enum zs_free_mode free_mode;       /* 0..ZS_FREE_MODE_COUNT - 1 (ZS_FREE_MODES) */
	int checked;                /* 0 or 1: validate every handle; bad/foreign/double-freed/stale -> -EINVAL */
	size_t max_pages;           /* pool page limit (zs_malloc fails with -ENOMEM); 0 -> none;
	                               0..ZS_PAGES_MAX_SPAN / page_size (zs/pages.h) */
	size_t deferred_capacity;   /* zs_free_deferred queue length; 0 -> sized like the RFC:
	                               128 MiB of page-size objects / 8 (scales with page size).
	                               0..ZS_MAX_DEFERRED_CAPACITY, rounded up to a power of two
	                               (at least 16) */
	int deferred_worker;        /* 1 (default when 0): drain in a background thread,
	                               started by the first zs_free_deferred (a pool that
	                               never calls it starts none); -1: no thread, drained
	                               only by flush/full queue.  -1..1 */
	size_t page_cache_pages;    /* freed pages the page provider keeps mapped for reuse;
	                               0 -> its default (the process budget: 128 MiB, or 32 MiB a CPU past 4; one for
	                               the whole process); 0..ZS_PAGES_MAX_SPAN / page_size or
	                               ZS_PAGES_NO_CACHE; see zs/pages.h */
	unsigned page_cache_decay_ms; /* cached pages unused this long go back to the OS, with
	                               or without further calls (a background thread while
	                               pages are cached); 0 -> 500 ms (or ZS_PAGES_DECAY_MS);
	                               1..3600000 or ZS_PAGES_DECAY_NEVER (else EINVAL); see
	                               "Returning memory" in zs/pages.h */
	unsigned class_shards;      /* copies of every size class, each with its own lock and
	                               fullness lists; an allocation uses the copy of the CPU
	                               it runs on (sched_getcpu() % class_shards).  0 or 1 ->
	                               one, the kernel's layout (page-exact with the kernel);
	                               more lets threads on different CPUs allocate without
	                               meeting, at the cost of up to one partly used zspage per
	                               class and copy (compaction works within each copy);
	                               a copy of a class is built (256 bytes) when a thread on
	                               its CPU first allocates from it, so unused copies cost
	                               no memory.  Out of pages (max_pages, or the provider's
	                               memory), an allocation takes a free slot in another
	                               copy of its class: -ENOMEM only when none has one.
	                               0..ZS_MAX_CLASS_SHARDS, and classes x shards <= 8192
	                               (4 KiB pages: up to 32; 30 with
	                               max_object_size of 16 pages), else EINVAL; or
	                               ZS_CLASS_SHARDS_AUTO: one per online CPU, capped by
	                               both limits (1 on a single CPU).
	                               See docs/policies.md "Class shards". */
	size_t max_object_size;     /* largest zs_malloc in bytes; 0 -> page_size (the kernel's
	                               limit).  page_size..ZS_MAX_OBJECT_PAGES x page_size:
	                               an object over a page keeps its whole pages in a
	                               zspage of its own, with no header (the handle sits in
	                               the zspage, as for a huge object), and its partial last
	                               page either there too or, once that pays, packed into
	                               a small class (its tail); read it with
	                               zs_obj_read_begin (a local copy) or
	                               zs_obj_read_sgv_begin (one piece per page, one more
	                               where the tail crosses a page).  Costs one
	                               size class per page count; the classes up to a page are
	                               unchanged.  Those classes count in class_shards' limit
	                               (classes x shards <= 8192, else EINVAL): 64 KiB pages
	                               with class_delta 8 have 8189 classes up to a page, so
	                               take at most 4 pages; every other page size and delta
	                               takes 16.  See docs/policies.md "Objects larger than a
	                               page" */
	int fit_zspages;            /* 0 (kernel): every zspage of a class is the class's chain
	                               length.  1: zs_compact ends each class (and copy) with
	                               its objects in full zspages plus at most one partly used
	                               zspage, of the fewest pages that hold what is left
	                               (ceil(objects x slot size / page size) pages), so a
	                               sparsely used class keeps under a page of free slots
	                               instead of up to a chain's (classes of one-page
	                               zspages have nothing to fit: they keep the kernel's
	                               rule, which frees every page it can).  Classes,
	                               zs_malloc and the free paths are unchanged; not
	                               page-exact with the kernel.
	                               0..1.  The application profile sets it.  See
	                               docs/policies.md "Fitted zspages" */
	int autocompact_ms;         /* self-compaction when idle ("Self-compaction" below).
	                               0: off (the kernel profile; compaction only when called).
	                               1..3600000: compact once no allocation or free has
	                               changed the pool for this long and the trigger below
	                               holds.  The application profile sets
	                               ZS_AUTOCOMPACT_DEFAULT_MS.  Else EINVAL */
	unsigned autocompact_pct;   /* the trigger, with the next field: free slot bytes in
	                               the pool's zspages (freed since the last pass) at
	                               least this percentage of the live objects' slot
	                               bytes.  0: no share asked (an idle pass costs the
	                               program no call's time); 1..1000 */
	size_t autocompact_min_bytes; /* and at least this many such bytes; 0 -> 256 KiB;
	                               1..2^40 */
	uint64_t reserved[2];        /* must be 0: later fields are carved out of it, zero
	                               meaning today's behaviour (docs/abi.md) */
};

/*
 * Self-compaction (autocompact_ms; the application profile's default, off
 * in the kernel profile), the way a malloc's decay gives memory back to a
 * program that stopped calling.
 *   What triggers it: frees leave holes in zspages, which only compaction
 *   turns into whole free pages.  Once the holes freed since the last pass
 *   reach autocompact_min_bytes (and autocompact_pct percent of the live
 *   slot bytes, when set), and no allocation or free has changed the
 *   pool's object or page counts for autocompact_ms, the pool runs one
 *   compaction pass (zs_compact_step, a class copy at a time, so a call
 *   arriving meanwhile waits at most one class's step) and then
 *   zs_pool_trim: the pages it freed, the handle chunks left empty and the
 *   cached pages go back to the OS at once.
 *   When: on the page provider's purge thread (zs/pages.h, "Returning
 *   memory"; one for the process, no thread per pool), which looks at the
 *   pool every autocompact_ms / 2 while its counts move and backs off to
 *   once a second (at most) while they do not; a pool that holds no page
 *   is not looked at until it allocates a zspage again.  A pool left idle
 *   after frees is compacted 1 to 1.5 x autocompact_ms after its last call
 *   (200 ms by default: its memory is back about 0.3 s later).  The pass
 *   calls no malloc on that thread (its scratch is mapped for the call), so
 *   the library's thread takes none of the program's glibc arenas
 *   (tests/unit/test_zs_thread_malloc.c).
 *   Cost bound: a look walks the class copies (each lock taken briefly)
 *   and, once their counts stood still for a look, stops each thread's
 *   heap once (a membarrier) to count its zspages' free slots and to take
 *   in the frees other threads left for an owner that makes no call;
 *   a pass copies at most every live object once, and runs again only
 *   after another autocompact_min_bytes of frees.  A program that calls
 *   without pause is never compacted by it (its calls change the counts).
 *   How to turn it off: autocompact_ms = 0 (zs_compact, zs_compact_step
 *   and zs_pool_trim still work).  A provider without a cache or without a
 *   time decay (page_cache_pages = ZS_PAGES_NO_CACHE, page_cache_decay_ms =
 *   ZS_PAGES_DECAY_NEVER) has no purge thread looking at it: then the pool
 *   does not compact by itself either.
 */
#define ZS_AUTOCOMPACT_DEFAULT_MS 200

/* Largest object, in pool pages (zs_pool_config.max_object_size). */
#define ZS_MAX_OBJECT_PAGES 16

/* Upper bound of zs_pool_config.class_shards. */
#define ZS_MAX_CLASS_SHARDS 64
/* zs_pool_config.class_shards: as many copies as online CPUs, within the limits. */
#define ZS_CLASS_SHARDS_AUTO 0xffffffffu

/* Legacy mapping modes (zs_map_object). */
enum zs_mapmode { ZS_MM_RW = 0, ZS_MM_RO = 1, ZS_MM_WO = 2 };

struct zs_pool;

/*
 * Two named profiles; fill with one, then change fields.
 *
 * zs_pool_config_init: the kernel profile (today's kernel, 4K pages, chain 8,
 * pool-lock free, one copy of each class).  Its layout is the kernel's page
 * for page, and every parity tool (zs replay, record, classes, testmod,
 * zram --vs-kernel, tests/cli/replay.sh) depends on that: it will not change.
 *
 * zs_pool_config_init_app: the application profile, the fastest measured
 * layout on the kernel's class table (density below).  It differs from the
 * kernel profile in exactly four fields:
 *   class_shards = ZS_CLASS_SHARDS_AUTO  (one copy of each class per CPU)
 *   free_mode    = ZS_FREE_CLASS_INDEX   (no pool lock in zs_free)
 *   fit_zspages  = 1                     (compaction fits each class's last
 *                                         partly used zspage to its objects,
 *                                         keeping the lowest-placed zspages)
 *   autocompact_ms = ZS_AUTOCOMPACT_DEFAULT_MS (compacts by itself when idle
 *                                         after frees: "Self-compaction")
 * Same class table and chain; zs_malloc and zs_free from threads on
 * different CPUs do not meet.  The density cost of the copies: each CPU's
 * copy of a class keeps its own partly used zspages.  Filled from one thread
 * (no compaction) it holds the kernel profile's pages exactly; with two
 * threads overwriting at random (2 CPUs) it measured +0.0..+3.8% pages at
 * 76 MiB live (median +2.1%) and +0.5..+1.8% at 300 MiB (median +0.7%):
 * docs/benchmarks.md section 5, "Two profiles".  After churn and zs_compact
 * it holds fewer pages than the kernel profile: 96.0-97.7% of the pool is
 * live data on the four `zs compare` workloads at 4 KiB, against
 * 91.2-96.9% (docs/compare.md, "Where zsmalloc's waste goes").  To compare
 * with a kernel (the app profile is not page-exact), use zs_pool_config_init.
 * With more than one copy of each class (and the default page cache), a
 * zspage that zs_free empties stays whole in its class copy, parked, and is
 * that class's next new zspage (a thread's refill whose own copy has none
 * parked takes another copy's before new pages, so a thread that moved CPUs
 * reuses what it left behind): it is cached memory, not the pool's (not in
 * zs_get_total_pages), counted in the process's page-cache budget, and goes
 * back to the OS page_cache_decay_ms after it was parked with no call made,
 * at once on zs_pool_trim or zs_compact, or when an allocation finds no
 * pages (src/zsmalloc/park.c; tests/mt/test_mt_zs_park.c).
 *
 * Thread-owned zspages.  A pool with free_mode ZS_FREE_CLASS_INDEX or
 * ZS_FREE_CLASS_INDEX_UNLOCKED, checked 0 and fit_zspages 1 (so the
 * application profile, not the kernel one) gives each thread that
 * allocates from it a heap: per size class one current zspage the thread
 * allocates from, and the zspages it filled, kept off the class's lists.
 * zs_malloc and zs_malloc_write of up to a page, and zs_free of an object
 * in one of the calling thread's zspages, then take no lock at all and
 * run no locked instruction, and move no zspage between lists: the handles
 * come from a per-thread cache of up to 256 moved whole to and from the
 * pool (a full cache as a malloc'd copy, a "magazine": at most 128 a
 * pool, 257 KiB, while that many freed handles wait for reuse; zs_pool_trim
 * frees the empty ones, and with a handle chunk's worth free, 8,191, all of
 * them, as a compaction does that gives handle memory back).  In its current zspage a thread takes the never-used slots first,
 * in order, then the ones it freed there (the same count before the zspage
 * is full, so the same pages).  A zs_free from another thread takes the class lock and leaves the
 * object for the owner, who frees it when its current zspage runs dry.
 * zs_class_stats stops every heap of the pool for the whole count (one
 * snapshot of the class and the heaps), frees each heap's such objects
 * (so they never count in obj_used once the other thread's zs_free has
 * returned, even when the owner makes no further call) and counts its free
 * slots out of obj_used; the calls below stop each heap in turn to take
 * its zspages back.  Each such call costs one
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) per heap (an interrupt to
 * each CPU running a thread of the process), the price of the owner's
 * fence-free path.  Where the kernel refuses membarrier, or with
 * ZS_OWNED_FENCED=1 in the environment when the process's first heap is
 * made, the owners fence each operation instead (one locked instruction
 * an operation).  A call made from a signal handler that interrupted the
 * same thread's operation on the same pool takes the class path.  zs_compact does not see an owned
 * zspage: zs_compact, zs_compact_step
 * and zs_pool_trim first give every thread's zspages back to their classes
 * (so compaction frees what it would without owners), as does a thread's
 * exit.  What a thread holds between those calls: per class, its current
 * zspage, the zspages it filled that still hold an object, and at most 3
 * empty spares.  A zspage its owner empties goes back to its class at once
 * (parked or freed as any), except while the thread holds full zspages of
 * that class and none with free slots (its zspages emptied in turn, as a
 * free-all does): then it stays the thread's as a spare for the class's
 * next refills, which take it without a lock; the fourth sends all four
 * back together.  Spares count in the pool's pages and in zs_class_stats
 * (as empty zspages) like any owned zspage, and go back on the calls above,
 * a refill that finds free slots to fill, the thread's exit, an allocation
 * out of memory, and self-compaction's look once the pool is quiet
 * (autocompact_ms; with it off, a free-all leaves up to 3 spares a class
 * until one of the others).  A thread keeps
 * heaps for the last 4 pools it allocated from (a fifth gives the oldest
 * back).  Not fork-safe across a fork taken while another thread allocates
 * from such a pool (a child should not use a pool the parent's threads were
 * using).  Compile with -DZS_OWNED_ZSPAGES=0 to leave it out.
 */
ZS_API void zs_pool_config_init(struct zs_pool_config *cfg);
ZS_API void zs_pool_config_init_app(struct zs_pool_config *cfg);

/*
 * NULL cfg -> defaults.  0 and *out, or -EINVAL (a field out of range) or
 * -ENOMEM. On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 * (zs_create_pool before 4.0.0.)
 * An empty pool holds under 32 KiB of memory in either profile (about 15 KiB at 4 KiB
 * pages: its size classes are built on their first allocation, tests/mt/test_mt_zs_shards.c
 * measures both); its first allocation maps its page tables too (under 128 KiB more, about
 * 70 KiB here).
 */
ZS_API int zs_pool_create(const struct zs_pool_config *cfg, struct zs_pool **out, char *err,
			  size_t errlen);
/* Frees everything, live objects included; drains deferred frees first. */
ZS_API void zs_destroy_pool(struct zs_pool *pool);

/*
 * Allocate an object of `size` bytes (1..max_object_size, by default the page
 * size).  Returns a handle, or -EINVAL (size 0), -ENOSPC (size over
 * max_object_size), -ENOMEM (no memory / limit).  Before it returns -ENOMEM
 * with zs_free_deferred frees still queued, it frees them (as
 * zs_free_deferred_flush) and tries once more: queued frees never make an
 * allocation fail that the same frees done with zs_free would not.
 * Contents are unspecified until written.
 */
ZS_API unsigned long zs_malloc(struct zs_pool *pool, size_t size);
/*
 * Free an object.  0 and error values are ignored (returns 0), like the kernel.
 * In checked mode a bad, foreign or already freed handle returns -EINVAL and
 * changes nothing; unchecked, such a handle is undefined behaviour.
 * "Already freed" includes a stale handle whose slot a later zs_malloc
 * reused: the new object's handle differs in its 14-bit generation, which
 * every checked call compares, so the stale one is refused unless the slot
 * was reused a multiple of 2^14 times since, also when the handle's memory
 * was trimmed, or its pool destroyed, and carved again at the same address
 * (docs/reliability.md, "What checked mode promises").  Handles the pool
 * keeps for itself (a multi-page object's packed tail) are refused too.
 * The same holds for every call below that takes a handle.
 */
ZS_API int zs_free(struct zs_pool *pool, unsigned long handle);

/*
 * Deferred free (seed 001): O(1) enqueue into a fixed per-pool array, no
 * allocation; a worker drains in batches, taking each class lock once per
 * batch of that class.  Falls back to a synchronous zs_free when the array is
 * full.  Returns as zs_free (checked mode validates before enqueueing).
 * The pool's first call creates the queue and the worker, once, whichever
 * thread gets there first (a short lock); without memory for the queue it
 * frees synchronously.  The worker sleeps until an enqueue finds it idle
 * with nothing queued, then gathers for up to 1 ms (or until 256 handles are
 * queued) and frees the batch: a steady stream of deferred frees wakes it
 * about once a millisecond, not once a free, and a freed object's memory
 * comes back up to that much later.  zs_free_deferred_flush frees at once.
 * When the worker cannot be started (pthread_create fails, as under a
 * thread limit; a forked child starts its own at its first call), the call
 * drains the queue itself, the handle included, and tries to start the
 * worker again at most once a second: a deferred free is never left waiting
 * for a thread.
 */
ZS_API int zs_free_deferred(struct zs_pool *pool, unsigned long handle);
/* Wait until every handle enqueued before the call is freed. */
ZS_API void zs_free_deferred_flush(struct zs_pool *pool);

/*
 * The two deferred free modes (ZS_FREE_MODES; docs/deferred.md has what
 * each costs and saves, measured):
 *
 * ZS_FREE_PAGE_DEFERRED ("page-deferred"): zs_free does all the object work
 * at once (the object is free and the pool's page count drops when it
 * returns), but an emptied zspage's pages go to the deferred worker, which
 * hands them back to the page provider in batches.  Only the page release
 * is deferred.  Pages waiting for it are still in the provider's use until
 * the worker (or zs_free_deferred_flush, zs_destroy_pool, a failing
 * zs_malloc) gets to them.  Without a worker (deferred_worker -1) the pages
 * are released at once, as in class-unlocked.
 *
 * ZS_FREE_PERCPU_DEFERRED ("percpu-deferred"): zs_free itself is deferred,
 * as zs_free_deferred is, but each CPU queues into a buffer of its own (a
 * page of handles, taken from a pool of buffers preallocated with the
 * queue, so a free never allocates) behind a lock that only threads on that
 * CPU normally take; a full buffer goes to the worker, which frees it grouped
 * by class, on whatever CPU it runs (no CPU is bound to it).  User space
 * cannot disable preemption, so "per CPU" is the CPU sched_getcpu() gives at
 * the call (a thread moved meanwhile just shares another CPU's buffer, under
 * its lock).  A buffer that stays part-filled is freed by the worker's next
 * pass (it wakes at the first handle of a fresh buffer and gathers for up to
 * 1 ms, as zs_free_deferred's worker does) or by zs_free_deferred_flush.
 * When every buffer is full, or there is no worker, the free is synchronous
 * (as class-unlocked).  zs_free_deferred in this mode queues the same way.
 * A freed handle is invalid at once whatever the mode; the object's memory
 * comes back when the buffer is drained.
 */

/*
 * Deferred-free hooks, so a layer above (zram, zswap) can defer its own
 * bookkeeping with the frees: push(ctx, handle) runs in the caller of
 * zs_free_deferred (or zs_free in percpu-deferred mode) after the handle was
 * queued; drain(ctx, handles, n) runs in the thread that drains (the worker,
 * or a flush), after those n handles were freed, with no pool lock held
 * (their values only: the handles are invalid).  A free that falls back to a
 * synchronous one calls neither.  Either function may be NULL.  Set once
 * per pool, best before its first deferred free (handles queued before the
 * call may be drained without the hooks): -EINVAL for a NULL pool or hooks,
 * -EBUSY when hooks are set already, -ENOMEM when the queue cannot be built.
 */
struct zs_deferred_hooks {
	void (*push)(void *ctx, unsigned long handle);
	void (*drain)(void *ctx, const unsigned long *handles, size_t n);
	void *ctx;
};
ZS_API int zs_set_deferred_hooks(struct zs_pool *pool, const struct zs_deferred_hooks *hooks);

/*
 * Read access (seed 004 API).  Returns a pointer to mem_len bytes of the
 * object: straight into the pool page, or, when the object spans pages (two,
 * or more for a multi-page object), into local_copy (>= mem_len bytes) after
 * copying the parts.  The object
 * cannot move until zs_obj_read_end.  Returns NULL on a bad handle (checked
 * mode) or mem_len larger than the object's slot.
 */
ZS_API void *zs_obj_read_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			void *local_copy);
/*
 * End a read begun by a successful zs_obj_read_begin.  Checked mode: a bad,
 * foreign, freed or stale handle, or one whose zspage no reader holds (an end
 * after a failed begin), is ignored and touches nothing else.
 * Unchecked, such a call is undefined behaviour.
 */
ZS_API void zs_obj_read_end(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem);
/*
 * Scatter-gather read (the kernel's zs_obj_read_sg_begin/end, 7.0): the
 * object's first mem_len payload bytes as one piece, or two when the object
 * spans two pool pages, pointing straight into the pool pages, no copy and
 * no bounce buffer.  sg[0] then sg[1] in order; their lengths add up to
 * mem_len.  The object cannot move until zs_obj_read_sg_end.  Returns the
 * number of pieces (1 or 2), or -EINVAL on a bad handle (checked mode,
 * validated as zs_obj_read_begin) or mem_len 0 or larger than the object's
 * slot (nothing stays locked then).  Read-only: never write through a piece.
 */
struct zs_obj_piece {
	const void *addr;
	size_t len;
};
ZS_API int zs_obj_read_sg_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 struct zs_obj_piece sg[2]);
/*
 * As zs_obj_read_sg_begin for any object, multi-page ones included: up to
 * nr_sg pieces, one per pool page the first mem_len bytes touch (at most
 * ZS_MAX_OBJECT_PAGES + 1).  Returns the number of pieces, or -EINVAL as
 * zs_obj_read_sg_begin, and also when the object needs more than nr_sg
 * pieces (nothing stays locked).  Ended by zs_obj_read_sg_end.
 */
ZS_API int zs_obj_read_sgv_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
				 struct zs_obj_piece *sg, int nr_sg);
/* End a read begun by a successful zs_obj_read_sg_begin; checked mode as zs_obj_read_end. */
ZS_API void zs_obj_read_sg_end(struct zs_pool *pool, unsigned long handle);
/* Copy len bytes into the object (one memcpy per page it touches).  -EINVAL on bad handle/len. */
ZS_API int zs_obj_write(struct zs_pool *pool, unsigned long handle, const void *src, size_t len);
/*
 * zs_malloc(pool, len) and zs_obj_write of src's len bytes into it, in one
 * call: the object is placed and written under one lock round, without the
 * pool lock and handle lookup that zs_obj_write takes for a handle others
 * may hold (about 100 instructions and two atomic operations less than the
 * pair; docs/benchmarks.md).  While it copies, compaction leaves the new
 * object's zspage alone (a per-thread write pin, two plain stores; with
 * more than 256 threads alive at once, the threads numbered past 256 take
 * the zspage's read lock instead: numbers of exited threads are reused).
 * The same object in the same place as the
 * pair gives, in either profile.  Returns the handle, or the errors of
 * zs_malloc (-EINVAL also for src NULL); on an error nothing is allocated.
 */
ZS_API unsigned long zs_malloc_write(struct zs_pool *pool, const void *src, size_t len);

/*
 * Legacy API (pre seed 004), kept to measure against: returns a pointer to the
 * object's payload, using a per-thread bounce buffer (the kernel's per-CPU
 * mapping area) for spanning objects, copied back on unmap for RW/WO.  One
 * mapping per thread at a time.  NULL on a bad handle (checked mode).
 */
ZS_API void *zs_map_object(struct zs_pool *pool, unsigned long handle, enum zs_mapmode mm);
/*
 * Checked mode: only the calling thread's mapping in force is undone; an
 * unmap after a failed map, or of another handle or pool, is ignored, and a
 * second map before the unmap (any handle, any pool) returns NULL with errno
 * EBUSY, the first mapping staying in force.  Unchecked: undefined behaviour.
 */
ZS_API void zs_unmap_object(struct zs_pool *pool, unsigned long handle);

/* Requests of this size or more go to a one-object-per-page class. */
ZS_API size_t zs_huge_class_size(const struct zs_pool *pool);
/* Physical class index for a request of `size` bytes (no header added), as the kernel. */
ZS_API int zs_lookup_class_index(const struct zs_pool *pool, size_t size);

/*
 * Compact every class; returns pages freed by this call.  Then returns the
 * page provider's cached pages to the OS (as zs_pool_trim).
 */
ZS_API unsigned long zs_compact(struct zs_pool *pool);
/*
 * A bounded share of zs_compact: the same per-class compaction, over at most
 * max_classes class copies that have anything to move (0 is taken as 1),
 * starting where the step before left off.  *cursor is the caller's (start it
 * at 0); it is 0 again when a whole pass over the classes is done, and that
 * step also trims unused handle memory.  Unlike zs_compact it returns no cached
 * page to the OS at once (they go at the cache's decay, zs/pages.h).  Returns
 * the pages freed; 0 when another compaction is running (it waits for none)
 * or pool or cursor is NULL.  For callers that spread compaction over their
 * own calls so no single call pays for a whole pass (zs/blob.h).
 */
ZS_API unsigned long zs_compact_step(struct zs_pool *pool, unsigned *cursor, unsigned max_classes);
/* Passes the pool's self-compaction ran ("Self-compaction" above); 0 for NULL. */
ZS_API unsigned long zs_pool_autocompact_passes(const struct zs_pool *pool);
/*
 * The memory the pool holds, in bytes: its pages in use (parked zspages
 * included), the freed pages its page cache still keeps mapped for reuse
 * (per-CPU caches included), its handle slots (in use and cached), the page
 * descriptors of every chunk mapped (64 bytes and a little more per page of
 * the chunk, kept while any page of it is in use) and its own tables.  zs_get_total_pages counts only the first part, less parked zspages.  This is what the
 * pool adds to the process's RSS once its pages have been written, to within
 * the pages of a chunk never touched (none are counted).  With cached not
 * NULL, *cached is the part that is pool pages cached for reuse (the next
 * zspages come from them before new memory is taken; they go back to the OS
 * at the decay, zs/pages.h).  Takes the page providers' locks briefly; 0
 * (and *cached 0) for a NULL pool.
 */
ZS_API size_t zs_pool_mem_bytes(const struct zs_pool *pool, size_t *cached);
/* Pool pages in use (the kernel's pages_allocated). */
ZS_API unsigned long zs_get_total_pages(const struct zs_pool *pool);
/* Copies of each size class the pool has (1: the kernel's layout; see class_shards). */
ZS_API unsigned zs_pool_class_shards(const struct zs_pool *pool);

struct zs_pool_stats {
	unsigned long pages_compacted;  /* total over the pool's life */
};
/* 0, or -EINVAL (pool NULL). Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL. */
ZS_API int zs_pool_stats(const struct zs_pool *pool, struct zs_pool_stats *st, size_t size);

/* --- Introspection: class table and per-class statistics --- */

/* Geometry of logical class i (0 .. zs_class_count-1). */
struct zs_class_info {
	int index;              /* logical index */
	int phys_index;         /* physical class it merged into (== index when not merged) */
	unsigned size;          /* logical slot size: min(32 + index*delta, page_size) */
	unsigned phys_size;     /* slot size of the physical class (header included) */
	unsigned pages_per_zspage;
	unsigned objs_per_zspage;
	unsigned tail_waste;    /* (pages*page_size) % phys_size */
	unsigned spanning;      /* slots per zspage that cross a page boundary */
	int huge;               /* one object per one-page zspage */
};
/* Number of logical classes. */
ZS_API int zs_class_count(const struct zs_pool *pool);
/* 0, or -EINVAL for an index outside 0 .. zs_class_count - 1. */
ZS_API int zs_class_info(const struct zs_pool *pool, int index, struct zs_class_info *info);

/*
 * Per physical class stats, the kernel's debugfs "classes" columns.
 * obj_allocated and pages_used count every zspage of the class as it is:
 * with fit_zspages a class may hold zspages shorter than pages_per_zspage
 * (with fewer slots than objs_per_zspage), so obj_allocated need not be a
 * multiple of objs_per_zspage; the pool's page count is still the sum of
 * pages_used.
 */
struct zs_class_stats {
	int index;
	unsigned size;
	unsigned long fullness[ZS_NR_FULLNESS_GROUPS]; /* zspages per group; [1..10]=10%..99%, [11]=100% */
	unsigned long obj_allocated;
	unsigned long obj_used;
	unsigned long pages_used;
	unsigned pages_per_zspage;
	unsigned objs_per_zspage;
	unsigned long freeable;   /* pages zs_compact could free (can_compact), the kernel's
	                             estimate: exact for chain-long zspages; with fit_zspages a
	                             class holding fitted ones may free more or fewer */
};
/*
 * Returns 0; -EINVAL for an index outside 0 .. zs_class_count - 1; -ENOENT
 * for a logical class merged into another (its objects are counted there).
 * Fills the first `size` bytes of *st (pass sizeof *st) and
 * writes nothing past them, so counters appended in a later MINOR leave a
 * caller built against an older header intact (docs/abi.md, "Stats that
 * grow"); a size of 0 or a NULL st is -EINVAL.
 */
ZS_API int zs_class_stats(struct zs_pool *pool, int index, struct zs_class_stats *st, size_t size);
/* Print the debugfs "classes" table (physical classes with objects, plus Total). */
ZS_API void zs_print_classes(struct zs_pool *pool, FILE *out);

ZS_API size_t zs_pool_page_size(const struct zs_pool *pool);
ZS_API const struct zs_pool_config *zs_pool_get_config(const struct zs_pool *pool);
/* Live objects: the sum of obj_used, less the packed tails (an object past a page whose last
 * page sits in a small class counts there too, and once here). */
ZS_API unsigned long zs_pool_objects(struct zs_pool *pool);
/*
 * Return the page provider's cached pages (per-CPU caches included), the
 * application profile's parked zspages and unused handle memory to the OS
 * now, rather than at the cache's decay: every 64 KiB
 * chunk of handle slots whose slots are all free (all of them once the pool is
 * empty).  Briefly stops allocation and free on the pool.  Cached pages also
 * go by themselves decay_ms after their last use, with or without calls (see
 * "Returning memory" in zs/pages.h); handle memory goes only here and in
 * compaction (8 bytes per object at the pool's peak).
 */
ZS_API void zs_pool_trim(struct zs_pool *pool);

/*
 * The one spelling of each named choice, for tools, benchmarks and bindings,
 * from the registries above (ZS_CHAIN_POLICIES, ZS_FREE_MODES): chain
 * policies "exhaustive" | "heuristic", free modes "pool" | "class" |
 * "class-unlocked", in value order.  *_name returns a static string, NULL for a value outside
 * the enum; *_parse returns 0 and the value, -EINVAL for an unknown name
 * (the value is then left alone).  *_names: the names, NULL-terminated.
 */
ZS_API const char *zs_chain_policy_name(enum zs_chain_policy p);
ZS_API int zs_chain_policy_parse(const char *name, enum zs_chain_policy *out);
ZS_API const char *const *zs_chain_policy_names(void);
ZS_API const char *zs_free_mode_name(enum zs_free_mode m);
ZS_API int zs_free_mode_parse(const char *name, enum zs_free_mode *out);
ZS_API const char *const *zs_free_mode_names(void);

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
static inline struct zs_pool *zs_create_pool(const struct zs_pool_config *cfg)
{
	struct zs_pool *p;
	return zs_pool_create(cfg, &p, (char *)0, 0) ? (struct zs_pool *)0 : p;
}
#define ZS_V3_zs_pool_stats_(p, st) zs_pool_stats(p, st, sizeof(*(st)))
#define zs_pool_stats(...) ZS_PICK3_(__VA_ARGS__, zs_pool_stats, ZS_V3_zs_pool_stats_, ~)(__VA_ARGS__)
#define ZS_V3_zs_class_stats_(p, i, st) zs_class_stats(p, i, st, sizeof(*(st)))
#define zs_class_stats(...) ZS_PICK4_(__VA_ARGS__, zs_class_stats, ZS_V3_zs_class_stats_, ~, ~)(__VA_ARGS__)
#endif
#endif
