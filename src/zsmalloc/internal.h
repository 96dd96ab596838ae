/*
 * zsmalloc internals shared by the files of src/zsmalloc/: the zspage, size
 * class and pool structures, and the encodings (obj <-> page + index, handle
 * <-> obj) behind accessor functions, so a policy that changes a bit layout
 * changes one place.
 *
 * obj layout (64-bit): [ pfn | class index (13 bits) | object index (16 bits) ].
 * The class index is always encoded (it costs nothing) but only the
 * class-index free modes read it without the pool lock; the pool-lock mode
 * resolves the class through the page, as the kernel does today.
 */
#ifndef ZS_SRC_ZSMALLOC_INTERNAL_H
#define ZS_SRC_ZSMALLOC_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pages/pages.h"
#include "pages/lookup.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/lock.h"
#include "common/debug.h"
#include "common/hints.h"

/* A zspage's page arrays (alloc, free) hold the longest chain or object. */
_Static_assert(ZS_MAX_OBJECT_PAGES <= ZS_MAX_CHAIN, "pfn arrays sized by ZS_MAX_CHAIN");
/* A zspage's chain is one pages_alloc_bulk call (alloc_zspage). */
_Static_assert(ZS_MAX_CHAIN <= ZS_FREE_BULK_MAX, "a chain fits one bulk allocation");

#define OBJ_IDX_BITS 16
#define OBJ_CLASS_BITS 13
#define OBJ_PFN_SHIFT (OBJ_IDX_BITS + OBJ_CLASS_BITS)
#define OBJ_IDX_MASK ((1UL << OBJ_IDX_BITS) - 1)
#define OBJ_CLASS_MASK ((1UL << OBJ_CLASS_BITS) - 1)
#define OBJ_ALLOCATED_TAG 1UL
#define FREEOBJ_END 0xffffffffu

/*
 * A handle is its slot's address plus a generation in the bits an address
 * does not use, so a handle freed and handed out again is a different value
 * and checked mode tells the stale one from the new (the object header, or a
 * huge zspage, records the whole handle, generation included).
 *
 * Free bits of a slot address, 64-bit only: bits 0-2 (slots are 8-byte
 * aligned), of which bit 0 is taken by OBJ_ALLOCATED_TAG in the object
 * header; and bits 48-63, above every user-space address Linux hands out
 * without an mmap hint beyond 2^47 (x86-64, 4- or 5-level paging) or 2^48
 * (arm64, 48- or 52-bit VA), which the page provider never passes; handle.c
 * refuses a chunk mapped higher.  The generation takes bits 1-2 and 48-59:
 * 14 bits.  Bits 60-63 stay 0 so a handle is below 2^60 (never near
 * ZS_IS_ERR, positive as a long, and a small Python int: 16 bytes less per
 * handle than a 2^60..2^64 one).
 */
_Static_assert(sizeof(unsigned long) == 8 && sizeof(void *) == 8,
	       "zsmalloc handles need a 64-bit unsigned long (addresses below 2^48 plus a generation)");
#define HANDLE_ADDR_MASK 0x0000fffffffffff8UL /* the slot address */
#define HANDLE_GEN_MASK 0x0fff000000000006UL  /* the generation: bits 1-2, 48-59 */
#define HANDLE_GEN_BITS 14
/*
 * Bit 60 marks a handle only the library holds (a multi-page object's packed
 * tail): the object's header records it, so the tail's own slot address and
 * generation, guessed or scanned, never match a header in checked mode, and
 * handle_in_pool refuses the marked value itself (no handle given to a
 * caller has a bit above 59).  Slot and generation arithmetic ignore it.
 */
#define HANDLE_INTERNAL_BIT (1UL << 60)

/* Handle slot values: a live slot holds an obj; a free slot FREE | its next generation | next free slot. */
#define HANDLE_FREE_BIT (1UL << 63)
#define HANDLE_PENDING_BIT (1UL << 62) /* checked mode: queued for deferred free */
#define HANDLE_OBJ_MASK (~(HANDLE_FREE_BIT | HANDLE_PENDING_BIT))

/* Fullness groups: 0 empty, 1..10 = 0-9% .. 90-99%, 11 full. */
enum { ZS_INUSE_RATIO_0 = 0, ZS_INUSE_RATIO_10 = 1, ZS_INUSE_RATIO_99 = 10, ZS_INUSE_RATIO_100 = 11 };
enum { ZS_OBJS_ALLOCATED = ZS_NR_FULLNESS_GROUPS, ZS_OBJS_INUSE, ZS_NR_CLASS_STATS };

/*
 * The zspage lives in the page descriptor of its first page, as the kernel
 * keeps zspage metadata beside struct page; every page's owner word
 * (pages_set_owner) points to it and its descriptor to the next page of the
 * chain.  The memory goes away with the pages, so a drained pool gives
 * everything back.
 */
struct zspage {
	uint32_t size;             /* the class's slot size (alloc_zspage), for the owned free */
	uint8_t chain;             /* ZS_CHAIN_* (owned.c, chain_note); 0 in a new zspage */
	uint8_t spare[3];
	pfn_t next;             /* desc.next: next page in the chain */
	union {
		struct zspage *lnext;  /* fullness list (classes of several objects per zspage) */
		unsigned long tail;    /* one-object zspage (huge, multi-page): the handle of the
		                          object's last partial page, packed in a small class
		                          (class.c, "Objects larger than a page"), or 0 */
	};
	struct zspage *lprev;
	uint32_t inuse;
	uint32_t freeobj;          /* head of the LIFO free list (object index) */
	uint16_t class_idx;        /* physical class index */
	uint8_t fullness;
	uint8_t huge;
	atomic_int lock;           /* zspage reader/writer lock */
	union {
		unsigned long huge_handle; /* huge zspage: the object's handle (no in-object header) */
		/*
		 * Any other zspage: slots from this index on were never handed
		 * out and are on no free list (obj_malloc takes them in
		 * index order once the free list is empty, which is the order
		 * the kernel's fully linked list gives), so a new zspage writes
		 * none of its objects and allocating one reads no link out of
		 * cold memory.  Written under the class lock; read relaxed by
		 * checked mode under the pool lock (validate_obj).
		 */
		struct {
			uint32_t untouched;
			/*
			 * Owned zspages (owned.c): the owning thread heap's id
			 * with ZSPAGE_OWNED (its zid, which no huge zspage's
			 * handle word can equal, so an owned free needs no huge
			 * test), 0 when the zspage belongs to its class (on its lists,
			 * parked, or being compacted).  Written by the owner (or
			 * its revoker, the owner kept out) holding the class lock,
			 * so the owner reads it in an operation and another
			 * thread under the class lock.
			 */
			uint32_t heap_id;
		};
	};
	/*
	 * Its slot count: the class's, except in a fitted zspage
	 * (cfg.fit_zspages: compact.c, "Fitted zspages"), which is shorter and
	 * holds fewer; its length follows (zspage_pages).  Everything about one
	 * zspage reads these, never the class's.  This word keeps the overlay
	 * exactly one descriptor long.
	 */
	uint32_t objs;
	uint32_t pfn;              /* first page: its own page number */
};
static_assert(sizeof(struct zspage) == sizeof(struct zs_page_desc), "zspage overlays a page desc");
static_assert(offsetof(struct zspage, next) == offsetof(struct zs_page_desc, next), "next");
_Static_assert((unsigned long)ZS_MAX_CHAIN * (ZS_PAGE_SIZE_MAX / ZS_MIN_ALLOC_SIZE) <=
		       OBJ_IDX_MASK + 1,
	       "a zspage's slots fit an obj's index");

struct size_class {
	spinlock_t lock;
	unsigned page_size;          /* the pool's, for a fitted zspage's length (in the lock's hole) */
	struct zspage *fullness_list[ZS_NR_FULLNESS_GROUPS];
	unsigned size;               /* slot size, header included */
	unsigned objs_per_zspage;
	unsigned pages_per_zspage;
	unsigned index;              /* physical index (the kernel's class number) */
	unsigned enc;                /* index + shard * nr_classes: what obj and zspage record */
	int huge;
	unsigned long stats[ZS_NR_CLASS_STATS];
	unsigned tails_declined;     /* tails stored unpacked since this class last grew for one */
	/* Fitted zspages only (compact.c): how many, their pages and slots; the rest are chains. */
	unsigned fitted_nr, fitted_pages, fitted_objs;
} __attribute__((aligned(64)));
/* Four cache lines: pool->classes[] is indexed by a shift, not a multiply, on every malloc
 * (a checked-lock build's bigger lock may cost that). */
_Static_assert(sizeof(spinlock_t) > 4 || sizeof(struct size_class) == 256,
	       "size_class is 256 bytes");

/* Geometry of one logical class, computed once at pool creation (class.c). */
struct class_geom {
	unsigned size;
	unsigned pages;
	unsigned objs;
	int phys;        /* logical index of the physical class it aliases */
};

#define ZS_HANDLE_SHARDS 16
#define ZS_HANDLE_BATCH 64 /* free slots moved between a shard and the pool at a time */
/*
 * A thread heap's handle cache and a magazine (handle.c): four shard batches,
 * so a thread's churn trades its cache with the pool's magazines (a lock
 * round on the pool's one stack, which threads share) once in 256 frees or
 * allocations, not once in 64.  2 KiB of values a heap.
 */
#define ZS_HEAP_HANDLES 256
_Static_assert(ZS_HEAP_HANDLES % ZS_HANDLE_BATCH == 0, "a full heap cache is whole shard batches");

/* A LIFO list of free handle slots threaded through the slots (handle.c). */
struct handle_list {
	unsigned long head, tail; /* slot addresses; valid only while n > 0 */
	unsigned long n;
};

/*
 * A shard caches at most 2 * ZS_HANDLE_BATCH free slots: `cur`, which alloc
 * pops and free pushes, and `spare`, one full batch.  Past that, a full batch
 * goes to the pool's shared list, where any shard's alloc finds it.
 */
struct handle_shard {
	spinlock_t lock;
	struct handle_list cur;   /* n <= ZS_HANDLE_BATCH */
	struct handle_list spare; /* n == 0 or ZS_HANDLE_BATCH */
	char *bump, *bump_end;    /* never-used slots of the shard's current chunk */
	unsigned long bump_gen;   /* their first generation (the chunk's, handle bits) */
	struct gen_record *bump_rec; /* or each slot's, when the chunk's address had a record */
	long live;                /* allocations minus frees through this shard */
} __attribute__((aligned(64)));

struct deferred_queue; /* deferred.c */
struct handle_mag;     /* handle.c */

/* A class copy's parked zspages (park.c): the stack and its accounting, under the class lock. */
struct zs_park {
	struct zspage *top;       /* newest first, linked through lnext */
	_Atomic unsigned nr;      /* zspages on it; read without the lock by the purge pass */
};

struct zs_pool {
	struct zs_pool_config cfg;
	char name[32];
	struct zs_pages *pages;
	struct zs_pages *handle_pages;
	unsigned page_size;
	unsigned page_shift;
	unsigned page_mask;             /* page_size - 1, for the owned free's offset: one and */
	unsigned delta;
	int nr_classes;                 /* logical, multi-page ones included */
	int nr_small;                   /* logical classes of objects up to a page (the kernel's) */
	unsigned nr_shards;             /* copies of the class table (cfg.class_shards, >= 1) */
	struct size_class *classes;     /* [shard * nr_classes + logical index of the physical one] */
	size_t classes_bytes;           /* its mapping (class.c, classes_build) */
	pthread_mutex_t class_init_lock; /* builds a class copy on its first use (class.c) */
	struct class_geom *geom;        /* logical geometry */
	uint16_t *size_lut;             /* (alloc size + 7) / 8 -> physical class (class.c) */
	size_t huge_class_size;
	size_t max_object_size;         /* cfg.max_object_size, 0 resolved to page_size */

	rwlock_t lock;
	/* The kernel's pages_allocated, sharded by thread (a shared counter bounced per zspage); summed on read. */
	struct {
		atomic_long n;
	} __attribute__((aligned(64))) pages_allocated[ZS_RW_SHARDS];
	atomic_ulong pages_compacted;
	atomic_long nr_tails;            /* packed tails: objects the user does not count */
	/*
	 * The deferring free modes' entries into deferred.c, set by
	 * deferred_init for those modes only.  free.c reaches them through
	 * here because deferred.c's drain calls free.c's frees: a direct call
	 * both ways would tie the two files in a cycle (tests/package/layering.sh).
	 * defer_push (percpu-deferred's zs_free): 0 queued, -EINVAL refused
	 * (checked mode), 1 free it now.  defer_release (page-deferred): an
	 * unlinked empty zspage's pages, for the worker to release.
	 */
	int (*defer_push)(struct zs_pool *pool, unsigned long handle);
	void (*defer_release)(struct zs_pool *pool, struct zspage *zspage);
	atomic_int compaction_in_progress;

	struct handle_shard shards[ZS_HANDLE_SHARDS];
	spinlock_t handle_free_lock;   /* after a shard lock */
	struct handle_list handle_free;   /* batches past the stash, linked (tail unused) */
	struct handle_list *handle_stash; /* full batches that shards gave back, each its own
	                                     list: taken whole in O(1) (handle.c) */
	size_t stash_n, stash_cap;
	/* Thread heaps' full handle caches, as arrays (handle.c, "Magazines"), under
	 * handle_free_lock; their slots count live in the shards, as a heap's cache does. */
	struct handle_mag *mag_full, *mag_empty;
	unsigned long nmag_full, nmags; /* nmags: full and empty, at most HANDLE_MAGS_MAX */
	pthread_mutex_t handle_chunks_lock;
	pfn_t *handle_chunks;
	size_t nr_handle_chunks, cap_handle_chunks;

	/* park.c: one per class copy (nr_classes * nr_shards), NULL when the pool does not park */
	struct zs_park *park;
	size_t park_bytes;              /* its mapping */

	/*
	 * owned.c: thread-owned zspages.  small_limit is zs_malloc's one size
	 * test: page_size, or 0 when owned so that every size leaves the kernel
	 * path there, at no cost to a pool without them.  heap_key: this pool's
	 * unique number for the per-thread heap lookup (never reused, so a
	 * destroyed pool's heap is never matched).  heaps: the registry, under
	 * the global heap lock (owned.c).
	 */
	int owned;
	int free_flags;                 /* cfg.checked */
	unsigned long free_limit;       /* zs_free's first test: (unsigned long)-4096, or 0 when owned */
	unsigned small_limit;
	uint64_t heap_key;
	struct zs_heap *heaps;

	/*
	 * autocompact.c: self-compaction on the purge thread.  ac_on: the
	 * provider runs its hooks (read-only after create).  ac_next: when the
	 * next look is due, UINT64_MAX while the pool holds no page (the
	 * thread's next pass over the provider with pages in use, which a new
	 * chunk asks for, sets it again).  The rest is the thread's alone (its
	 * idle work runs one at a time).
	 */
	int ac_on;
	_Atomic uint64_t ac_next;
	uint64_t ac_sig, ac_quiet_since, ac_period_ns, ac_idle_ns;
	size_t ac_floor, ac_min_bytes;
	unsigned long ac_seen_compacted; /* pages_compacted after its last whole pass */
	unsigned ac_pct;
	atomic_ulong ac_passes, ac_looks;

	/* deferred.c: NULL until the first zs_free_deferred creates it under the lock */
	_Atomic(struct deferred_queue *) deferred;
	pthread_mutex_t deferred_init_lock;
};

static inline void pool_pages_add(struct zs_pool *pool, long d)
{
	atomic_fetch_add_explicit(&pool->pages_allocated[thread_shard() % ZS_RW_SHARDS].n, d,
				  memory_order_relaxed);
}

/* ---- encodings ---- */

static inline unsigned long location_to_obj(pfn_t pfn, unsigned class_idx, unsigned obj_idx)
{
	return ((unsigned long)pfn << OBJ_PFN_SHIFT) | ((unsigned long)class_idx << OBJ_IDX_BITS) |
	       obj_idx;
}
static inline pfn_t obj_to_pfn(unsigned long obj)
{
	return (obj & HANDLE_OBJ_MASK) >> OBJ_PFN_SHIFT;
}
static inline unsigned obj_to_idx(unsigned long obj)
{
	return obj & OBJ_IDX_MASK;
}
static inline unsigned obj_to_class_idx(unsigned long obj)
{
	return (obj >> OBJ_IDX_BITS) & OBJ_CLASS_MASK;
}
static inline atomic_ulong *handle_slot(unsigned long handle)
{
	return (atomic_ulong *)(handle & HANDLE_ADDR_MASK);
}
/* The generation after handle's own: every other bit set to 1 carries the +1 across the address. */
static inline unsigned long handle_gen_next(unsigned long handle)
{
	return ((handle | ~HANDLE_GEN_MASK) + 1) & HANDLE_GEN_MASK;
}
/* Generation number n (mod 2^HANDLE_GEN_BITS) in handle bits. */
static inline unsigned long handle_gen_of(unsigned long n)
{
	return ((n & 3) << 1) | (((n >> 2) & 0xfff) << 48);
}
static inline unsigned long handle_to_obj(unsigned long handle)
{
	return atomic_load_explicit(handle_slot(handle), memory_order_relaxed) & HANDLE_OBJ_MASK;
}
static inline void record_obj(unsigned long handle, unsigned long obj)
{
	atomic_store_explicit(handle_slot(handle), obj, memory_order_relaxed);
}
/*
 * ZS_DEBUG handle states: a slot is free (HANDLE_FREE_BIT: on a free list),
 * pending (HANDLE_PENDING_BIT: checked mode, queued for deferred free) or
 * live (an obj, neither bit).  zs_free takes a live handle, the deferred
 * worker a live or pending one, cache_free_handle only one that is not free.
 */
static inline int handle_is_free(unsigned long handle)
{
	return (atomic_load_explicit(handle_slot(handle), memory_order_relaxed) & HANDLE_FREE_BIT) != 0;
}
static inline int handle_is_live(unsigned long handle)
{
	return !(atomic_load_explicit(handle_slot(handle), memory_order_relaxed) &
		 (HANDLE_FREE_BIT | HANDLE_PENDING_BIT));
}

static inline struct zspage *page_desc(const struct zs_pool *pool, pfn_t pfn)
{
	return (struct zspage *)zs_page_desc(pool->pages, pfn);
}
static inline char *page_addr(const struct zs_pool *pool, pfn_t pfn)
{
	return pages_lookup_addr(pool->pages, pfn);
}
/* The zspage holding page pfn: its owner word (pages/lookup.h), set by alloc_zspage. */
static inline struct zspage *page_zspage(const struct zs_pool *pool, pfn_t pfn)
{
	return pages_lookup_owner(pool->pages, pfn);
}
static inline struct zspage *obj_to_zspage(const struct zs_pool *pool, unsigned long obj)
{
	return page_zspage(pool, obj_to_pfn(obj));
}
static inline struct size_class *zspage_class(const struct zs_pool *pool, const struct zspage *zspage)
{
	return &pool->classes[zspage->class_idx];
}

/*
 * A zspage's length.  A full-length one has the class's slots; a fitted one
 * (fewer slots) is the fewest pages that hold them, since it was made as
 * ceil(k x size / page) pages for k objects and holds every slot that fits
 * (so objs x size > its pages minus one, times the page size).  Asked only
 * where a whole zspage comes or goes, never per object.
 */
static inline unsigned zspage_pages(const struct size_class *class, const struct zspage *zspage)
{
	if (likely(zspage->objs == class->objs_per_zspage))
		return class->pages_per_zspage;
	return (unsigned)(((unsigned long)zspage->objs * class->size + class->page_size - 1) /
			  class->page_size);
}

/*
 * One-object classes (huge, multi-page) keep their zspages off the fullness
 * lists: such a zspage is full or freed, so no allocation or compaction
 * ever looks for it there, and its list link holds the tail handle instead.
 */
static inline int class_single(const struct size_class *class)
{
	return class->objs_per_zspage == 1;
}
/* The tail handle of a multi-page object's head zspage, 0 for every other zspage. */
static inline unsigned long zspage_tail(const struct zspage *zspage)
{
	return zspage->huge ? zspage->tail : 0;
}

/* An emptied zspage's tail handle (0: none), cleared so the descriptor is clean for reuse. */
static inline unsigned long zspage_take_tail(struct zspage *empty)
{
	unsigned long tail = empty ? zspage_tail(empty) : 0;
	if (tail)
		empty->tail = 0;
	return tail;
}

/*
 * Has this class (copy) been built?  Every copy of a class is built on its
 * first allocation (class.c, alloc_class), none with the pool.  Its size
 * is the flag: 0 until the copy is whole, published with release, so a copy
 * read after this says 1 is whole.
 */
static inline int class_live(const struct size_class *class)
{
	return __atomic_load_n(&class->size, __ATOMIC_ACQUIRE) != 0;
}

/* Does an encoded class index (obj / zspage) name a built physical class of some shard? */
static inline int class_enc_valid(const struct zs_pool *pool, unsigned enc)
{
	if (enc >= (unsigned)pool->nr_classes * pool->nr_shards)
		return 0;
	unsigned i = enc % (unsigned)pool->nr_classes;
	return pool->geom[i].phys == (int)i && class_live(&pool->classes[enc]);
}

/*
 * ---- object geometry: the one home of "where does object idx lie" ----
 * Objects of slot size `size` sit back to back along the zspage's chain, so
 * object idx starts idx * size bytes in: in chain page obj_page_index, at
 * obj_page_offset within it, and may run on into the next page.
 */
static inline unsigned obj_page_index(const struct zs_pool *pool, unsigned size, unsigned idx)
{
	return (unsigned)(((unsigned long)idx * size) >> pool->page_shift);
}
static inline unsigned obj_page_offset(const struct zs_pool *pool, unsigned size, unsigned idx)
{
	return (unsigned)(((unsigned long)idx * size) & (pool->page_size - 1));
}

/* The word at the start of object idx in its first page pfn (its header, or its free-list link). */
static inline unsigned long *obj_header(const struct zs_pool *pool, pfn_t pfn, unsigned idx,
					unsigned size)
{
	return (unsigned long *)(page_addr(pool, pfn) + obj_page_offset(pool, size, idx));
}

/*
 * Payload offset of obj within its first page, and the payload capacity: a
 * non-huge object starts with its handle word and the payload follows it; a
 * huge object (alone on its page) is all payload.
 */
static inline unsigned payload_offset(const struct zs_pool *pool, const struct size_class *class,
				      unsigned long obj, unsigned *cap)
{
	unsigned off = obj_page_offset(pool, class->size, obj_to_idx(obj));
	if (class->huge) {
		*cap = class->size;
		return off;
	}
	*cap = class->size - ZS_HANDLE_SIZE;
	return off + ZS_HANDLE_SIZE;
}

/*
 * Copy len bytes of an object at (pfn, off) out of / into the pool, the part
 * past the end of pfn from the start of the chain's next page (and the pages
 * after it, for a multi-page object).  Every spanning copy (reads, writes,
 * map/unmap, compaction) goes through these.
 */
static inline void span_read(const struct zs_pool *pool, pfn_t pfn, unsigned off, void *buf,
			     size_t len)
{
	size_t done = pool->page_size - off < len ? pool->page_size - off : len;
	memcpy(buf, page_addr(pool, pfn) + off, done);
	while (done < len) { /* two pages at most, but for a multi-page object */
		size_t n = len - done < pool->page_size ? len - done : pool->page_size;
		pfn = page_desc(pool, pfn)->next;
		memcpy((char *)buf + done, page_addr(pool, pfn), n);
		done += n;
	}
}
static inline void span_write(const struct zs_pool *pool, pfn_t pfn, unsigned off,
			      const void *buf, size_t len)
{
	size_t done = pool->page_size - off < len ? pool->page_size - off : len;
	memcpy(page_addr(pool, pfn) + off, buf, done);
	while (done < len) {
		size_t n = len - done < pool->page_size ? len - done : pool->page_size;
		pfn = page_desc(pool, pfn)->next;
		memcpy(page_addr(pool, pfn), (const char *)buf + done, n);
		done += n;
	}
}

/*
 * A new zspage of `pages` pages (one pages_alloc_bulk call) and `objs`
 * slots, every slot free and untouched, none linked (struct zspage); on no
 * list and in no count (the caller adds it).  Takes
 * no lock: zs_malloc calls it with none held, compaction under its own.
 * Inline: it is zs_malloc's slow path, which the kernel profile's
 * instruction counts (docs/benchmarks.md) include.  gcc, inlining it into
 * compaction, cannot see that an object of a zspage starts in one of its
 * `pages` pages (objs x size <= pages x page size), so pfns[] is "maybe
 * uninitialized" to it; zeroing the array would cost every zs_malloc that
 * allocates a zspage.
 */
/* A zspage as new: every slot free and untouched, none linked, on no list, unlocked. */
static inline void zspage_reset(struct zspage *zspage, int huge)
{
	zspage->inuse = 0;
	/* Nothing linked: every slot untouched (a huge zspage's one object is slot 0). */
	zspage->freeobj = huge ? 0 : FREEOBJ_END;
	zspage->huge_handle = 0; /* and untouched = 0: a descriptor keeps what its last user left */
	zspage->lnext = zspage->lprev = NULL;
	atomic_store_explicit(&zspage->lock, 0, memory_order_relaxed);
}

/* ---- autocompact.c ---- */
/* init: before the page provider exists (its purge thread reads the fields from then on);
 * started: after, when it is known whether the thread runs the hooks. */
void autocompact_init(struct zs_pool *pool);
void autocompact_started(struct zs_pool *pool);
void autocompact_stop(struct zs_pool *pool);
uint64_t autocompact_due(void *ctx, uint64_t now_ns, bool *run);
void autocompact_work(void *ctx);

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static inline struct zspage *alloc_zspage(struct zs_pool *pool,
					     const struct size_class *class, unsigned pages,
					     unsigned objs)
{
	pfn_t pfns[ZS_MAX_CHAIN];
	assert_internal(pages >= 1 && pages <= ZS_MAX_CHAIN && objs >= 1 && objs <= OBJ_IDX_MASK + 1);
	if (pages_alloc_bulk(pool->pages, pages, pfns))
		return NULL;
	struct zspage *zspage = page_desc(pool, pfns[0]);
	for (unsigned i = 0; i < pages; i++) {
		struct zs_page_desc *d = pages_set_owner(pool->pages, pfns[i], zspage);
		d->next = i + 1 < pages ? pfns[i + 1] : ZS_PFN_NONE;
	}
	zspage->size = class->size;
	zspage->pfn = (uint32_t)pfns[0];
	zspage->class_idx = (uint16_t)class->enc;
	zspage->huge = (uint8_t)class->huge;
	zspage->objs = objs;
	zspage_reset(zspage, class->huge);
	return zspage;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/*
 * ---- park.c: emptied zspages kept whole in their class copy (application profile) ----
 * park_zspage: class lock held, an unlinked empty zspage (unlink_empty_zspage):
 * 1 when parked, 0 when the caller frees it as before.  unpark_zspage: class lock
 * held: the newest parked zspage, as alloc_zspage leaves a new one, or NULL.
 * park_reclaim: the provider's reclaim hook (pages.h).  park_release_all: no
 * lock held: every parked zspage's pages back to the OS (trim, compaction, an
 * allocation that found no pages).
 */
int park_init(struct zs_pool *pool);
void park_destroy(struct zs_pool *pool);
int park_zspage(struct zs_pool *pool, struct size_class *class, struct zspage *zspage);
struct zspage *unpark_zspage(struct zs_pool *pool, struct size_class *class);
/* The same in batches (class lock held, a heap's spares): up to max zspages into out[], one
 * accounting step for them all; park_zspages: n unlinked empty zspages of the class's shape,
 * linked through lnext, all parked (1) or none (0: the caller frees them). */
unsigned unpark_zspages(struct zs_pool *pool, struct size_class *class, struct zspage **out,
			unsigned max);
int park_zspages(struct zs_pool *pool, struct size_class *class, struct zspage *list, unsigned n);
/* No class lock held: a zspage parked in another copy of class's physical class, returned with
 * that copy's lock held (*held names it), or NULL (none, or a compaction running). */
struct zspage *unpark_other_copy(struct zs_pool *pool, const struct size_class *class,
				 struct size_class **held);
uint64_t park_reclaim(void *ctx, uint64_t now_ns, uint64_t decay_ns);
unsigned long park_release_all(struct zs_pool *pool); /* pages given back */

/* ---- class.c ---- */
/* A class table's dimensions, from the config alone (no pool needed). */
struct zs_class_shape {
	unsigned delta;  /* bytes between classes */
	int small;       /* logical classes of objects up to a page */
	int n;           /* logical classes in all (multi-page ones included) */
	unsigned shards; /* copies of each class (ZS_CLASS_SHARDS_AUTO resolved) */
};
/*
 * cfg's table at page size P (cfg's ranges already checked): 0, or -EINVAL
 * when it does not fit the class index an obj records (classes x shards).
 */
int classes_shape(const struct zs_pool_config *cfg, unsigned P, struct zs_class_shape *s);
int classes_build(struct zs_pool *pool);
void classes_free(struct zs_pool *pool);
/*
 * Physical class (of copy 0) of an allocation of `size` bytes, header
 * included: the physical class its logical class aliases.  Past a page,
 * class nr_small - 2 + k holds objects of k pages (class.c, "Objects larger
 * than a page"), stored without a header, so the +8 comes off; those never
 * alias (each has its own page count), so logical and physical agree.
 */
static inline int size_to_class(const struct zs_pool *pool, size_t size)
{
	if (unlikely(size > pool->page_size + ZS_HANDLE_SIZE))
		return pool->nr_small - 2 +
		       (int)((size - ZS_HANDLE_SIZE + pool->page_size - 1) >> pool->page_shift);
	return pool->size_lut[(size + 7) >> 3];
}
/* Build a class copy on its first allocation (class.c; under class_init_lock). */
struct size_class *class_build(struct zs_pool *pool, struct size_class *copy);
/*
 * The copy for this CPU of physical class `index` (size_to_class of the
 * slot size).  current_cpu() is one thread-local load (common/hints.h);
 * threads that migrate only cost locality, never correctness (any copy may
 * free any object: the object's zspage records its copy).
 */
static inline struct size_class *alloc_class(struct zs_pool *pool, int index)
{
	struct size_class *class = &pool->classes[index];
	if (unlikely(pool->nr_shards != 1)) {
		int cpu = current_cpu();
		unsigned s = (cpu >= 0 ? (unsigned)cpu : thread_shard()) % pool->nr_shards;
		class += (size_t)s * (unsigned)pool->nr_classes;
	}
	if (unlikely(!class_live(class)))
		return class_build(pool, class);
	return class;
}

/* ---- handle.c ---- */
int handles_init(struct zs_pool *pool);
void handles_destroy(struct zs_pool *pool);
/*
 * The slow paths (handle.c); the per-object fast paths are inline below, as
 * the zspage steps are: one shard lock round and a list push or pop.
 */
unsigned long handle_alloc_slow(struct zs_pool *pool, struct handle_shard *s);
void handle_free_full(struct zs_pool *pool, struct handle_shard *s);

static inline struct handle_shard *handle_shard_pick(struct zs_pool *pool)
{
	return &pool->shards[thread_index() % ZS_HANDLE_SHARDS];
}

/* Pop a slot: the handle is its address with the generation the free slot kept. */
static inline unsigned long list_pop(struct handle_list *l)
{
	unsigned long h = l->head;
	assert_internal(l->n > 0 && handle_is_free(h));
	unsigned long w = atomic_load_explicit(handle_slot(h), memory_order_relaxed);
	l->head = w & HANDLE_ADDR_MASK;
	l->n--;
	return h | (w & HANDLE_GEN_MASK);
}

/* A free handle slot from this thread's shard, or 0 without memory for one. */
static inline unsigned long cache_alloc_handle(struct zs_pool *pool)
{
	struct handle_shard *s = handle_shard_pick(pool);
	unsigned long h;
	spin_lock(&s->lock);
	if (likely(s->cur.n))
		h = list_pop(&s->cur);
	else
		h = handle_alloc_slow(pool, s);
	if (likely(h))
		s->live++;
	spin_unlock(&s->lock);
	/*
	 * ZS_DEBUG: a handed-out slot is no longer free even before zs_malloc
	 * records its obj (its failure path frees it unrecorded), so
	 * cache_free_handle's double-free check holds.  A fresh bump slot may hold
	 * anything the page provider left there.
	 */
	if (ZS_DEBUG_ON && h)
		record_obj(h, 0);
	return h;
}

/* Give a handle's slot back to this thread's shard; its next handle is a generation on. */
static inline void cache_free_handle(struct zs_pool *pool, unsigned long handle)
{
	struct handle_shard *s = handle_shard_pick(pool);
	unsigned long slot = handle & HANDLE_ADDR_MASK;
	unsigned long gen = handle_gen_next(handle);
	/* Live or pending (the deferred worker), never already free: that is a double free. */
	assert_internal(!handle_is_free(handle));
	spin_lock(&s->lock);
	assert_internal(s->cur.n <= ZS_HANDLE_BATCH &&
			   (s->spare.n == 0 || s->spare.n == ZS_HANDLE_BATCH));
	if (unlikely(s->cur.n == ZS_HANDLE_BATCH))
		handle_free_full(pool, s); /* the cache is full: this batch becomes the spare */
	atomic_store_explicit(handle_slot(slot), HANDLE_FREE_BIT | gen | (s->cur.n ? s->cur.head : 0),
			      memory_order_relaxed);
	if (!s->cur.n)
		s->cur.tail = slot;
	s->cur.head = slot;
	s->cur.n++;
	s->live--;
	spin_unlock(&s->lock);
}
int handle_in_pool(const struct zs_pool *pool, unsigned long handle);
/* Drop every given-back chunk's generation record (white-box tests that count carved slots). */
void handle_gen_forget(void);
void handles_trim(struct zs_pool *pool, int eager);
/* Checked mode, before any lock: the handle is ours, neither free nor queued, its class valid. */
int handle_precheck(struct zs_pool *pool, unsigned long handle, unsigned long *obj);

/*
 * ---- zspage.c: lists, chains and objects of a zspage (class lock held) ----
 * The per-object steps (fullness, slot pop and push, the chain walk) are
 * inline here: every zs_malloc and zs_free runs each once or twice, and a
 * call into another file cost as much as the step itself (docs/benchmarks.md,
 * "Where the instructions go").  Moving a zspage between lists, which a
 * fullness change needs, stays out of line.
 */
int validate_obj(struct zs_pool *pool, unsigned long handle, unsigned long obj);
int class_lists_sane(const struct size_class *class); /* ZS_DEBUG checks only */

static inline int get_fullness_group(const struct size_class *class, const struct zspage *zspage)
{
	(void)class;
	unsigned inuse = zspage->inuse, objs = zspage->objs;
	assert_internal(inuse <= objs);
	if (inuse == 0)
		return ZS_INUSE_RATIO_0;
	if (inuse == objs)
		return ZS_INUSE_RATIO_100;
	/* 32-bit division (inuse <= objs <= 2^16): the same quotient as the kernel's, cheaper. */
	return (int)(100u * inuse / objs) / 10 + 1;
}

/* ZS_DEBUG: zspage is linked into the list its fullness names (neighbours agree). */
static inline int zspage_on_its_list(const struct size_class *class, const struct zspage *zspage)
{
	if (zspage->fullness >= ZS_NR_FULLNESS_GROUPS)
		return 0;
	if (zspage->lprev ? zspage->lprev->lnext != zspage
			  : class->fullness_list[zspage->fullness] != zspage)
		return 0;
	return !zspage->lnext || zspage->lnext->lprev == zspage;
}

/* ZS_DEBUG: isolated, on no list (a fresh zspage's descriptor is zeroed). */
static inline int zspage_off_lists(const struct size_class *class, const struct zspage *zspage)
{
	return !zspage->lnext && !zspage->lprev &&
	       (zspage->fullness >= ZS_NR_FULLNESS_GROUPS ||
		class->fullness_list[zspage->fullness] != zspage);
}

static inline void insert_zspage(struct size_class *class, struct zspage *zspage, int fullness)
{
	struct zspage *head = class->fullness_list[fullness];
	assert_internal(spin_held(&class->lock));
	assert_internal(zspage->class_idx == class->enc);
	assert_internal(fullness == get_fullness_group(class, zspage));
	if (class_single(class)) { /* counted, not linked (internal.h, class_single) */
		zspage->fullness = (uint8_t)fullness;
		class->stats[fullness]++;
		return;
	}
	assert_internal(zspage_off_lists(class, zspage));
	zspage->lprev = NULL;
	zspage->lnext = head;
	if (head)
		head->lprev = zspage;
	class->fullness_list[fullness] = zspage;
	zspage->fullness = (uint8_t)fullness;
	class->stats[fullness]++;
}

static inline void remove_zspage(struct size_class *class, struct zspage *zspage)
{
	assert_internal(spin_held(&class->lock));
	if (class_single(class)) {
		assert_internal(class->stats[zspage->fullness] > 0);
		class->stats[zspage->fullness]--;
		return;
	}
	assert_internal(zspage_on_its_list(class, zspage));
	assert_internal(class->stats[zspage->fullness] > 0);
	if (zspage->lprev)
		zspage->lprev->lnext = zspage->lnext;
	else
		class->fullness_list[zspage->fullness] = zspage->lnext;
	if (zspage->lnext)
		zspage->lnext->lprev = zspage->lprev;
	zspage->lnext = zspage->lprev = NULL;
	class->stats[zspage->fullness]--;
}




/* Move a zspage whose group changed to the head of its new list; unchanged keeps its place. */
static inline int fix_fullness_group(struct size_class *class, struct zspage *zspage)
{
	int fg = get_fullness_group(class, zspage);
	if (fg != zspage->fullness) {
		remove_zspage(class, zspage);
		insert_zspage(class, zspage, fg);
	}
	return fg;
}

/* Page k of a zspage's chain. */
static inline pfn_t zspage_page(const struct zs_pool *pool, const struct zspage *zspage, unsigned k)
{
	pfn_t pfn = zspage->pfn;
	while (k--)
		pfn = page_desc(pool, pfn)->next;
	return pfn;
}

/*
 * Pop the zspage's free-list head for `handle`, else its first untouched
 * slot (class lock held); returns the new obj.
 */
static inline unsigned long obj_malloc(struct zs_pool *pool, struct zspage *zspage, unsigned long handle)
{
	struct size_class *class = zspage_class(pool, zspage);
	unsigned idx = zspage->freeobj;
	int fresh = !zspage->huge && idx == FREEOBJ_END;
	if (fresh)
		idx = zspage->untouched;
	assert_internal(spin_held(&class->lock));
	assert_internal(zspage->inuse < zspage->objs && idx < zspage->objs);
	pfn_t pfn = zspage_page(pool, zspage, obj_page_index(pool, class->size, idx));
	if (!zspage->huge) {
		unsigned long *hdr = obj_header(pool, pfn, idx, class->size);
		if (fresh) {
			__atomic_store_n(&zspage->untouched, idx + 1, __ATOMIC_RELAXED);
		} else {
			assert_internal(!(*hdr & OBJ_ALLOCATED_TAG)); /* the free list's head is free */
			zspage->freeobj = (uint32_t)(*hdr >> 1);
		}
		*hdr = handle | OBJ_ALLOCATED_TAG;
	} else {
		assert_internal(!zspage->huge_handle);
		zspage->freeobj = FREEOBJ_END;
		zspage->huge_handle = handle;
	}
	zspage->inuse++;
	return location_to_obj(pfn, class->enc, idx);
}

/* ---- free.c: used by zs_free, deferred free and compaction ---- */
/* Free the tail object of a multi-page object whose head was freed (no lock held). */
void free_tail(struct zs_pool *pool, unsigned long tail);
/* zspage.c: an empty zspage off its list and out of the accounting (class lock held), and an
 * unlinked zspage's pages back to the provider (no lock needed). */
void unlink_empty_zspage(struct zs_pool *pool, struct size_class *class, struct zspage *zspage);

/* Push the object's index on its zspage's free list (class lock held). */
static inline void obj_free(struct zs_pool *pool, struct size_class *class, unsigned long obj)
{
	pfn_t pfn = obj_to_pfn(obj);
	unsigned idx = obj_to_idx(obj);
	struct zspage *zspage = page_zspage(pool, pfn);
	assert_internal(spin_held(&class->lock) && zspage_class(pool, zspage) == class);
	assert_internal(zspage->inuse > 0 && idx < zspage->objs);
	/* The object is live: its header (or the huge zspage) names a handle. */
	assert_internal(zspage->huge ? zspage->huge_handle != 0
					: (*obj_header(pool, pfn, idx, class->size) & OBJ_ALLOCATED_TAG));
	if (!zspage->huge)
		*obj_header(pool, pfn, idx, class->size) = (unsigned long)zspage->freeobj << 1;
	else
		zspage->huge_handle = 0;
	zspage->freeobj = idx;
	zspage->inuse--;
}

/* Free one object with its class lock held; returns an unlinked empty zspage to free, or NULL. */
static inline struct zspage *free_locked(struct zs_pool *pool, struct size_class *class, unsigned long obj)
{
	struct zspage *zspage = obj_to_zspage(pool, obj);
	assert_internal(spin_held(&class->lock));
	assert_internal(obj_to_class_idx(obj) == class->enc);
	assert_internal(class->stats[ZS_OBJS_INUSE] > 0);
	class->stats[ZS_OBJS_INUSE]--;
	obj_free(pool, class, obj);
	if (fix_fullness_group(class, zspage) != ZS_INUSE_RATIO_0)
		return NULL;
	unlink_empty_zspage(pool, class, zspage);
	return zspage;
}
void free_zspage_pages(struct zs_pool *pool, struct zspage *zspage);  /* zspage.c */

/* ---- deferred.c ---- */
void deferred_init(struct zs_pool *pool);
void deferred_destroy(struct zs_pool *pool);
/* Frees queued and not yet done (the worker's batch in hand included)? */
int deferred_pending(struct zs_pool *pool);

/* ---- compact.c ---- */
/* A class's pages: its chains, plus its fitted zspages (class lock held). */
static inline unsigned long class_pages_used(const struct size_class *class)
{
	return (class->stats[ZS_OBJS_ALLOCATED] - class->fitted_objs) / class->objs_per_zspage *
		       class->pages_per_zspage +
	       class->fitted_pages;
}
unsigned long can_compact(const struct size_class *class);

/* Thread-owned zspages (heaps.c, owned.c): their own header, on top of everything above. */
#include "zsmalloc/owned.h"

/*
 * access.c: zs_obj_read_begin/_end for a handle the library holds itself
 * (the blob cache's index), without checked mode's validation; same
 * arguments and results, but local_copy must not be NULL.  Never for a
 * handle a caller passed in.
 */
void *obj_read_begin_own(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 void *local_copy);
void obj_read_end_own(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem);

unsigned heaps_look(struct zs_pool *pool, unsigned long *free_slots); /* heaps.c: self-compaction's look */

#endif
