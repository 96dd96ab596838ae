/*
 * The thread-owned zspages' internals (application profile), shared by
 * heaps.c (the registry, revocation, remote frees), owned.c (turnover) and
 * the fast paths in zsmalloc.c and free.c.  Split out of internal.h, which
 * includes it at its end: everything here builds on the zspage, class and
 * pool structures there.  Included through internal.h only.
 */
#ifndef ZS_SRC_ZSMALLOC_OWNED_H
#define ZS_SRC_ZSMALLOC_OWNED_H

#ifndef ZS_SRC_ZSMALLOC_INTERNAL_H
#error "include zsmalloc/internal.h, which includes this file"
#endif

/*
 * ---- heaps.c, owned.c: thread-owned zspages (application profile) ----
 * A thread heap (one per thread and pool) owns, per class, a current
 * zspage it allocates from and the zspages it filled, off the class's
 * fullness lists; allocation and the owner's frees touch only the heap,
 * with no locked instruction (heaps.c, "Revocation").
 * Another thread's free into an owned zspage goes under the class lock onto
 * the heap's remote stack, which the owner collects when its current
 * zspage runs dry (mimalloc's thread-free list).  An owned zspage counts as
 * wholly in use in its class's stats (class->stats[ZS_OBJS_INUSE] includes
 * its free slots), so the class's counts and compaction's arithmetic stay
 * what they were for the zspages on the lists.
 */
#ifndef ZS_OWNED_ZSPAGES
#define ZS_OWNED_ZSPAGES 1
#endif
/*
 * Whether an owned zspage's pages are a run (consecutive numbers in one
 * chunk: consecutive descriptors and addresses), noted in z->chain by the
 * heap that takes it from its class (owned.c, chain_note) so that making it
 * current again (a spare, parked, on its class's lists) walks no chain.  The
 * provider zeroes descriptors as it hands pages out, so a new zspage reads
 * UNKNOWN.  Written under the class lock, read by the owner.
 */
enum { ZS_CHAIN_UNKNOWN, ZS_CHAIN_RUN, ZS_CHAIN_SCATTERED };

/* Fullness values of owned zspages, past the class groups (on no class list). */
enum { ZS_OWNED_CUR = ZS_NR_FULLNESS_GROUPS + 1, ZS_OWNED_FULL, ZS_OWNED_PARTIAL, ZS_OWNED_SPARE };
#define ZS_TL_HEAPS 4      /* pools a thread keeps a heap for at once */
/*
 * Emptied zspages a heap keeps per class (owned.c, "Spares"): the class's
 * next refills take them with no lock, and they go to and come from the
 * class's park in batches of up to ZS_HEAP_SPARES + 1 under one class lock.
 */
#define ZS_HEAP_SPARES 3

struct zs_heap_class {
	struct zspage *cur;      /* allocated from; NULL until the first allocation */
	/*
	 * cur's next untouched slot, ready (set_cur): its header's address and
	 * its obj less the index, so a fresh allocation is a pointer bump, an
	 * or and its stores, with no multiply, shift or page-table lookup.  Valid
	 * while cur is set and cur->untouched < cur->objs; bpi is the chain page
	 * bnext lies in.  Pool pages are page-aligned (the provider aligns its
	 * chunks), so a slot's offset in its page is its address's low bits.
	 */
	char *bnext;
	unsigned long bbase;
	unsigned size;           /* the class's slot size (0: not known yet) */
	/* The pool's page size - 1 and shift, beside the size: the placement reads no pool field,
	 * so the allocation keeps one pointer less live and saves no register for it */
	unsigned pmask;
	uint8_t pshift;
	uint8_t bpi;
	uint8_t off;             /* a one-object class: never owned */
	uint8_t nspare;          /* on spare, at most ZS_HEAP_SPARES */
	uint8_t streak;          /* refills in a row that took an empty zspage from the class:
	                            the parked ones the next takes at once, less one */
	uint8_t flat;            /* cur's pages are a run (consecutive numbers and addresses):
	                            the cursor crosses a page with no remap, no object splits */
	struct zspage *partial;  /* owned, with slots the owner freed (lnext/lprev) */
	struct zspage *full;     /* owned, no free slot */
	struct zspage *spare;    /* owned and empty, of the class's shape (lnext only) */
	/* cur's pages, so an allocation finds its slot without the page table or a chain walk */
	char *addr[ZS_MAX_CHAIN];
	uint32_t pfn[ZS_MAX_CHAIN];
};
/* 256 bytes, no padding needed: the allocation finds its class's entry with a shift, not a
 * multiply, and cur, the cursor and the size share its first line. */
_Static_assert(sizeof(struct zs_heap_class) == 256, "a heap class entry is a power of two");

struct zs_heap {
	/*
	 * The owner's "in an operation" word and a revoker's request (heaps.c,
	 * "Revocation" has the protocol): the owner stores busy with plain
	 * stores and reads revoke, and pays no locked instruction; a revoker
	 * sets revoke, runs a process-wide barrier and waits for busy to clear.
	 * Each on a line of its own: busy is the owner's, written every op.
	 */
	atomic_uint busy;
	uint32_t id;             /* index in the heap table */
	uint32_t zid;            /* id | ZSPAGE_OWNED: the heap_id of the zspages it owns */
	struct zs_pool *pool;    /* NULL once the pool is destroyed (global heap lock) */
	struct zs_heap *next;    /* pool->heaps (global heap lock) */
	/* The owner thread's write pin slot under the number it has (one always set when it has
	 * none: the zspage read lock then).  The thread's exit resets it before the number goes
	 * back (heaps_number_gone), so a slot here is never another live thread's. */
	struct zs_wpin *wpin;
	/*
	 * The handle cache: hn ready handles in hv[0..hn), each its slot's
	 * address and the generation it hands out next, so an allocation takes
	 * hv[--hn] and a free stores hv[hn++] with no write to the slot (outside
	 * ZS_DEBUG, a cached slot still holds its last obj: nothing reads it
	 * until handle.c writes it free, when the values leave for a shard list).
	 * Full and empty caches move whole to and from the pool's magazines.
	 */
	unsigned long hn;
	unsigned long hv[ZS_HEAP_HANDLES];
	atomic_uint revoke __attribute__((aligned(64))); /* HEAP_REVOKE | HEAP_FENCED */
	atomic_ulong remote;     /* (obj << 1) | 1 of the last object another thread freed into an
	                            owned zspage, each object's header the next one; 0: none */
	struct zs_heap_class cls[] __attribute__((aligned(64))); /* by physical class index of copy 0 */
};
#define HEAP_REVOKE 1u /* a revoker owns the heap's data until it clears this */
#define HEAP_FENCED 2u /* no process-wide barrier: the owner fences (heaps.c) */
#define ZSPAGE_OWNED 0x80000000u /* in an owned zspage's heap_id, with its heap's id */
/* heap_id is huge_handle's upper half (little-endian), whose top bit a handle never has. */
_Static_assert(((HANDLE_ADDR_MASK | HANDLE_GEN_MASK | HANDLE_INTERNAL_BIT) >> 32 & ZSPAGE_OWNED) == 0,
	       "no handle has the owned zspage tag");
_Static_assert(offsetof(struct zspage, heap_id) == offsetof(struct zspage, huge_handle) + 4,
	       "heap_id is the handle's upper half");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "heap_id overlays the handle's upper half");
#define HEAP_BUSY 4u   /* busy's value in an operation: apart from revoke's bits (heap_enter_word) */

/* Owner: start an operation on its heap (1), or 0: take the class path (revoked, nested). */
int heap_enter_slow(struct zs_heap *h);
/*
 * The fast paths' entry, one test: busy as it was (HEAP_BUSY: a call nested
 * in one of this thread's, a signal handler's, or heap_none) or'ed with
 * revoke, read after busy is set.  Setting busy over a set busy changes
 * nothing, so a nested call sets it too; not 0 sends the caller out of line,
 * where HEAP_BUSY in the word means nested (the class path, busy left as it
 * is) and its absence a revoke or HEAP_FENCED (busy is this call's:
 * heap_enter_slow decides).  Four instructions, against five for a busy test
 * before the store.
 */
static inline __attribute__((always_inline)) unsigned heap_enter_word(struct zs_heap *h)
{
	unsigned was = atomic_load_explicit(&h->busy, memory_order_relaxed);
	atomic_store_explicit(&h->busy, HEAP_BUSY, memory_order_relaxed);
	/* The revoker's membarrier orders the store before the load (heaps.c). */
	atomic_signal_fence(memory_order_seq_cst);
	return was | atomic_load_explicit(&h->revoke, memory_order_acquire);
}
static inline int heap_enter(struct zs_heap *h)
{
	unsigned w = heap_enter_word(h);
	if (likely(!w))
		return 1;
	return w & HEAP_BUSY ? 0 : heap_enter_slow(h);
}
/* Owner: the operation's heap writes are done; a revoker may take the heap from here on. */
static inline void heap_exit(struct zs_heap *h)
{
	atomic_store_explicit(&h->busy, 0, memory_order_release);
}

/* Per thread: the heaps of the last pools used, by pool->heap_key (slot 0 the latest); a
 * used slot's heap is never NULL (heap_none). */
struct heap_tls {
	uint64_t key[ZS_TL_HEAPS];
	struct zs_heap *heap[ZS_TL_HEAPS];
};
extern _Thread_local struct heap_tls heap_tls ZS_TLS_IE;
/* What a slot holds for a pool with no heap to be had: busy for good (heaps.c). */
extern struct zs_heap heap_none;
/* This thread's heap for an owned pool, or NULL (not owned, or no heap to be had). */
struct zs_heap *heap_lookup(struct zs_pool *pool);
static inline struct zs_heap *heap_mine(struct zs_pool *pool)
{
	if (likely(heap_tls.key[0] == pool->heap_key))
		return heap_tls.heap[0] == &heap_none ? NULL : heap_tls.heap[0];
	return heap_lookup(pool);
}
/* owned.c, for revocation and the looks (heaps.c): a stopped heap's zspages of one class back
 * to it, its spares alone, and the remote stack collected as the owner would. */
void heap_class_give_back(struct zs_pool *pool, struct zs_heap_class *c);
void heap_spares_give_back(struct zs_pool *pool, struct zs_heap_class *c);
void heap_collect_remote(struct zs_pool *pool, struct zs_heap *h);
void heaps_pool_init(struct zs_pool *pool);
void heaps_pool_gone(struct zs_pool *pool);
/* Free slots in owned zspages of physical class phys, all copies, and each owned zspage
 * added to fullness[] under its group (zs_class_stats). */
/* heaps.c: zs_class_stats' snapshot (every heap stopped between begin and end) */
void heaps_stats_begin(struct zs_pool *pool);
void heaps_stats_end(struct zs_pool *pool);
unsigned long heaps_owned_free(struct zs_pool *pool, int phys, unsigned long *fullness);
/* Every heap of the pool gives its zspages back to their classes (compaction, trim). */
void heaps_revoke_all(struct zs_pool *pool);
/* The owner, in an operation: the class's current zspage with a free slot, or NULL (class path). */
struct zspage *heap_refill(struct zs_pool *pool, struct zs_heap *h, int idx);
/* The owner, in an operation: after a free that filled no longer or emptied z (list moves, release). */
void heap_free_slow(struct zs_pool *pool, struct zs_heap *h, struct zspage *z);
/* The same, then heap_exit (the owner's free, which ends its operation there); returns 0. */
int heap_free_moved(struct zs_pool *pool, struct zs_heap *h, struct zspage *z);
/* Class lock held: another thread frees obj, in zspage z owned by a heap. */
void heap_remote_free(struct zs_pool *pool, struct zspage *z, unsigned long obj);
/* The owner, in an operation, its handle cache empty: a magazine, or from this thread's shard
 * (0: none). */
int heap_handles_refill(struct zs_pool *pool, struct zs_heap *h);
/* The owner (its cache full, or leaving the pool) or its revoker: every cached handle back. */
void heap_handles_drain(struct zs_pool *pool, struct zs_heap *h, int owner);
/* handle.c: up to ZS_HEAP_HANDLES ready handles into v (their count, 0 without memory); and n
 * of them back (a magazine when n is a full batch and one is to be had, else the shard). */
unsigned handle_take_values(struct zs_pool *pool, unsigned long *v);
void handle_give_values(struct zs_pool *pool, const unsigned long *v, unsigned n, int may_grow);

/* The owner's heap id, or 0 (its class's).  A huge zspage's word is the upper half of its
 * handle, which never has ZSPAGE_OWNED (a handle's bit 63 is clear), so it reads 0 too. */
static inline uint32_t zspage_heap_id(const struct zspage *z)
{
	uint32_t w = __atomic_load_n(&z->heap_id, __ATOMIC_RELAXED);
	return w & ZSPAGE_OWNED ? w & ~ZSPAGE_OWNED : 0;
}
/* zspage_heap_id(z) != 0, as one bit test (the class paths' frees ask only this). */
static inline int zspage_owned(const struct zspage *z)
{
	return (__atomic_load_n(&z->heap_id, __ATOMIC_RELAXED) & ZSPAGE_OWNED) != 0;
}

/* The owner frees obj in its zspage z (in an operation, or revoking its own heap). */
static inline void heap_obj_free(struct zs_pool *pool, struct zs_heap *h, struct zspage *z,
				    unsigned long obj)
{
	unsigned idx = obj_to_idx(obj);
	unsigned long *hdr = obj_header(pool, obj_to_pfn(obj), idx, zspage_class(pool, z)->size);
	assert_internal(zspage_heap_id(z) == h->id && z->inuse > 0 && idx < z->objs);
	*hdr = (unsigned long)z->freeobj << 1;
	z->freeobj = idx;
	z->inuse--;
	/* Current or partial and not emptied: nothing moves (no fullness is kept for owned zspages). */
	if (unlikely(z->fullness == ZS_OWNED_FULL || !z->inuse))
		heap_free_slow(pool, h, z);
}

/* A handle's ready value: its slot with the generation the slot hands out next. */
static inline unsigned long handle_next(unsigned long handle)
{
	return (handle & HANDLE_ADDR_MASK) | handle_gen_next(handle);
}

/*
 * A freed handle into the heap's cache (not full: the caller drains a full
 * one first).  ZS_DEBUG writes the slot free (no link: it is on no list) so
 * that a second free of the handle trips the assert here, and the pop's
 * assert finds the slot free at the generation it hands out.
 */
static inline void heap_handle_put(struct zs_heap *h, unsigned long handle)
{
	unsigned long n = h->hn;
	unsigned long v = handle_next(handle);
	assert_internal(n < ZS_HEAP_HANDLES && !handle_is_free(handle));
	if (ZS_DEBUG_ON)
		atomic_store_explicit(handle_slot(v), HANDLE_FREE_BIT | (v & HANDLE_GEN_MASK),
				      memory_order_relaxed);
	h->hv[n] = v;
	h->hn = n + 1;
}

/* A handle from the heap's cache (not empty). */
static inline unsigned long heap_handle_pop(struct zs_heap *h)
{
	unsigned long n = h->hn - 1;
	unsigned long v = h->hv[n];
	assert_internal(h->hn > 0 && handle_is_free(v) &&
			((atomic_load_explicit(handle_slot(v), memory_order_relaxed) ^ v) & HANDLE_GEN_MASK) == 0);
	h->hn = n;
	return v;
}

/* Free with the class lock held, into an owned zspage too (the class-index free, deferred). */
static inline struct zspage *free_locked_any(struct zs_pool *pool, struct size_class *class,
						unsigned long obj)
{
	struct zspage *z = obj_to_zspage(pool, obj);
	if (unlikely(zspage_owned(z))) {
		heap_remote_free(pool, z, obj);
		return NULL;
	}
	return free_locked(pool, class, obj);
}

#endif
