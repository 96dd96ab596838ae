/*
 * Thread-owned zspages (application profile): the per-thread heaps, how a
 * heap takes a zspage from its class and gives it back, the remote-free
 * stack, the heaps' handle caches, and revocation.  Why: a zs_malloc or
 * zs_free on the class path pays for the class lock, the fullness lists
 * (a division and list moves), a shared stats counter and the handle shard
 * lock on every object; a thread that owns its zspages pays for none of
 * them, and for no locked instruction at all.
 *
 * Taken from mimalloc (its design, not its code): a thread allocates from
 * the free list of a page only it owns (_mi_page_malloc), frees into it
 * without atomics when it owns the page, and another thread's free goes
 * onto an atomic list that the owner collects when its list runs dry
 * (mi_free's xthread_free).  Differences: the remote list is per heap, not
 * per zspage (a zspage descriptor has no room for it), and is pushed under
 * the object's class lock, so that "is this zspage owned" and the push are
 * one step against a revocation, which disowns each zspage under its class
 * lock and then drains the heap's remote list through the class path.
 *
 * Revocation.  Only the owner touches its heap's data (its lists, handle
 * cache, page addresses, and the freeobj/inuse of the zspages it owns),
 * except a revoker: zs_compact, zs_compact_step, zs_pool_trim, an
 * allocation out of memory (each through heaps_revoke_all) and
 * zs_class_stats (heaps_owned_free).  The owner brackets each operation with
 * heap_enter / heap_exit (internal.h):
 *     owner:   busy = HEAP_BUSY (relaxed); compiler barrier; r = revoke (acquire);
 *              r ? class path : { heap work; busy = 0 (release) }
 *     revoker: revoke |= REVOKE (seq_cst); membarrier(PRIVATE_EXPEDITED);
 *              wait until busy == 0 (acquire); heap work; revoke &= ~REVOKE (release)
 * This is Dekker's mutual exclusion with the owner's fence moved to the
 * revoker: membarrier runs a full barrier on every thread of the process
 * that is running, and a thread that is not running has passed one (the
 * kernel's context switch), so at the barrier each owner's earlier stores
 * are visible and its later loads come after the revoker's store.  Either
 * the owner's busy store precedes the barrier (the revoker sees it and waits
 * for busy = 0, whose release hands it the owner's writes) or the owner's
 * load of revoke follows it (the owner sees REVOKE and takes the class
 * path, touching no heap data).  The revoker's heap writes reach the owner
 * through the release that clears REVOKE and the acquire load that finds it
 * clear.  So the owner pays two plain stores and a load an operation, and
 * the revoker a barrier (a few microseconds, IPIs to the process's running
 * CPUs) a heap.  Where the kernel refuses membarrier (before Linux 4.14, a
 * seccomp filter) or ZS_OWNED_FENCED=1 is set, every heap carries
 * HEAP_FENCED: the owner's heap_enter then goes to heap_enter_slow, which
 * stores busy with a seq_cst exchange and reads revoke seq_cst, the revoker
 * reads busy seq_cst after its seq_cst or (the plain C11 form of Dekker).
 * A barrier that fails after registration (a forked child whose
 * registration did not carry over and cannot be renewed) makes the revoker
 * skip the heap: revocation only gives memory back sooner, no caller needs
 * it for correctness (owned zspages are on no class list, so compaction
 * never sees them).  The copy of zs_malloc_write runs after heap_exit,
 * under the write pin (lock.h), so a source that faults into a handler
 * that compacts this pool does not wait for itself.  A call nested in the
 * owner's own operation (a signal handler) finds busy set and takes the
 * class path.
 *
 * Lock order: the global heap lock (a mutex) -> waiting for an owner's busy
 * -> a class lock or a handle shard lock -> the page provider.  An owner
 * holds no lock while busy that a revoker holds while it waits (the revoker
 * holds only the global heap lock, which an owner never takes while busy).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zsmalloc/internal.h"

_Thread_local struct heap_tls heap_tls ZS_TLS_IE;

#define ZS_MAX_HEAPS 4096 /* heap ids are 1..ZS_MAX_HEAPS-1; a thread past that has no heap */

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct zs_heap *) heap_table[ZS_MAX_HEAPS];
static uint32_t heap_hint = 1;
static atomic_ulong heap_keys = 1;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;

/* A heap whose thread has no pin slot points here: a pin that always reads set, so the write
 * takes the zspage read lock with no test for a missing slot. */
static struct zs_wpin wpin_none = { .z = &wpin_none };

/*
 * A thread slot whose pool has no heap to be had (no heap id left, out of
 * memory) holds this one, not NULL: its busy word is set for good, so the
 * fast paths' one busy test sends such a thread to the class path with no
 * test for a missing heap.  Never registered or entered; the only write is
 * heap_enter_word's store of the busy it already holds.
 */
struct zs_heap heap_none = { .busy = HEAP_BUSY, .wpin = &wpin_none };

/* ---- heap lists (lnext/lprev, free while a zspage is off its class's lists) ---- */

static void hl_push(struct zspage **head, struct zspage *z)
{
	z->lprev = NULL;
	z->lnext = *head;
	if (*head)
		(*head)->lprev = z;
	*head = z;
}

static void hl_unlink(struct zspage **head, struct zspage *z)
{
	if (z->lprev)
		z->lprev->lnext = z->lnext;
	else
		*head = z->lnext;
	if (z->lnext)
		z->lnext->lprev = z->lprev;
	z->lnext = z->lprev = NULL;
}

/* ---- taking a zspage from its class, giving it back ---- */

/* Class lock held, z on no list and counted in ALLOCATED: the heap owns it, counted full. */
static void own(struct size_class *class, struct zs_heap *h, struct zspage *z)
{
	class->stats[ZS_OBJS_INUSE] += z->objs - z->inuse;
	z->lnext = z->lprev = NULL;
	z->fullness = ZS_OWNED_CUR;
	__atomic_store_n(&z->heap_id, h->zid, __ATOMIC_RELAXED);
}

/* The heap's owner or its revoker, z off the heap's lists: back on its class's lists, or parked/freed when empty. */
static void disown(struct zs_pool *pool, struct zspage *z)
{
	struct size_class *class = zspage_class(pool, z);
	spin_lock(&class->lock);
	__atomic_store_n(&z->heap_id, 0, __ATOMIC_RELAXED);
	assert_internal(class->stats[ZS_OBJS_INUSE] >= z->objs - z->inuse);
	class->stats[ZS_OBJS_INUSE] -= z->objs - z->inuse;
	z->lnext = z->lprev = NULL;
	if (z->inuse == 0 && z->objs == class->objs_per_zspage) {
		/* Emptied, of the class's shape: out of its counts as unlink_empty_zspage takes one,
		 * without the pass through the fullness list (a division, a link and an unlink). */
		class->stats[ZS_OBJS_ALLOCATED] -= z->objs;
		pool_pages_add(pool, -(long)class->pages_per_zspage);
		z->fullness = ZS_INUSE_RATIO_0;
		if (!(pool->park && park_zspage(pool, class, z)))
			free_zspage_pages(pool, z);
		spin_unlock(&class->lock);
		return;
	}
	z->fullness = ZS_NR_FULLNESS_GROUPS; /* on no list */
	int fg = get_fullness_group(class, z);
	insert_zspage(class, z, fg);
	if (fg == ZS_INUSE_RATIO_0) {
		unlink_empty_zspage(pool, class, z);
		if (!(pool->park && park_zspage(pool, class, z)))
			free_zspage_pages(pool, z);
	}
	spin_unlock(&class->lock);
}

/*
 * The heap's owner or its revoker: emptied zspages of their classes' shape
 * (linked through lnext, off the heap's lists) back to their classes, each
 * class copy's run parked under one class lock with one accounting step
 * (park_zspages), or freed when the park has no room.
 */
static void disown_empties(struct zs_pool *pool, struct zspage *list)
{
	while (list) {
		struct size_class *class = zspage_class(pool, list);
		struct zspage *run = NULL, *rest = NULL, *z, *next;
		unsigned n = 0;
		spin_lock(&class->lock);
		for (z = list; z; z = next) {
			next = z->lnext;
			if (zspage_class(pool, z) != class) { /* another copy's (the thread moved CPUs) */
				z->lnext = rest;
				rest = z;
				continue;
			}
			assert_internal(z->inuse == 0 && z->objs == class->objs_per_zspage);
			__atomic_store_n(&z->heap_id, 0, __ATOMIC_RELAXED);
			z->fullness = ZS_INUSE_RATIO_0;
			z->lprev = NULL;
			z->lnext = run;
			run = z;
			n++;
		}
		/* Each of the class's shape: the run's slots in one count. */
		unsigned long objs = (unsigned long)n * class->objs_per_zspage;
		assert_internal(class->stats[ZS_OBJS_INUSE] >= objs && class->stats[ZS_OBJS_ALLOCATED] >= objs);
		class->stats[ZS_OBJS_INUSE] -= objs;
		class->stats[ZS_OBJS_ALLOCATED] -= objs;
		pool_pages_add(pool, -(long)(n * class->pages_per_zspage));
		if (!(pool->park && park_zspages(pool, class, run, n))) {
			for (z = run; z; z = next) {
				next = z->lnext;
				z->lnext = NULL;
				free_zspage_pages(pool, z);
			}
		}
		spin_unlock(&class->lock);
		list = rest;
	}
}

/*
 * Spares.  An owned zspage its owner empties while the heap still holds
 * full zspages of its class and none with holes (the class's zspages
 * emptied in turn, as a free-all or a FIFO churn does) stays the heap's, as
 * a spare, up to ZS_HEAP_SPARES a class: the class's next refill takes one
 * with no lock and no accounting.  The one that finds the spares full sends
 * them all back with it in one batch (disown_empties), and refills that keep
 * taking empty zspages from the class take up to ZS_HEAP_SPARES + 1 parked
 * ones at once (heap_refill, c->streak), so such a churn pays a class lock,
 * the park's count and the clock once a batch, not once a zspage
 * (bench_layout --only app: 597.8 -> 572.7 instructions an op).  Any other
 * emptied zspage goes back at once, as before: one left by frees spread
 * over the class (the heap holds zspages with holes, which its refills take
 * first), or the class's only owned zspage (a class with few objects);
 * kept, those made zs compare's churn 0.7-3% larger.  A spare counts as any
 * owned zspage (in its class's allocated and in-use counts, its pages in
 * the pool's); revocation (compaction, trim, an allocation out of memory),
 * the self-compaction look (heaps_look), a refill that finds holes to fill
 * and the thread's exit give it back, and zs_class_stats counts it empty.
 */
static void spare_put(struct zs_pool *pool, struct zs_heap_class *c, struct zspage *z)
{
	/* Back at once: the class's only owned zspage, one whose class has holes, a fitted one. */
	if (!c->full || c->partial || z->objs != zspage_class(pool, z)->objs_per_zspage) {
		disown(pool, z);
		return;
	}
	/* As new: no slot linked, none touched; the heap id stays (untouched's neighbour). */
	z->freeobj = FREEOBJ_END;
	__atomic_store_n(&z->untouched, 0, __ATOMIC_RELAXED);
	z->fullness = ZS_OWNED_SPARE;
	z->lprev = NULL;
	z->lnext = c->spare;
	if (c->nspare < ZS_HEAP_SPARES) {
		c->spare = z;
		c->nspare++;
		return;
	}
	c->spare = NULL;
	c->nspare = 0;
	disown_empties(pool, z);
}

/* Every spare of c back to its class (revocation, the idle look). */
static void spares_give_back(struct zs_pool *pool, struct zs_heap_class *c)
{
	struct zspage *z = c->spare;
	c->spare = NULL;
	c->nspare = 0;
	disown_empties(pool, z);
}

/* The remote stack's objects back into their (owned) zspages (the heap's owner). */
static void collect_remote(struct zs_pool *pool, struct zs_heap *h)
{
	unsigned long v = atomic_exchange_explicit(&h->remote, 0, memory_order_acquire);
	while (v) {
		unsigned long obj = v >> 1;
		struct zspage *z = obj_to_zspage(pool, obj);
		v = *obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), zspage_class(pool, z)->size);
		heap_obj_free(pool, h, z, obj);
	}
}

static struct zspage *fullest_partial(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_99; fg >= ZS_INUSE_RATIO_0; fg--)
		if (class->fullness_list[fg])
			return class->fullness_list[fg];
	return NULL;
}

/* Whether z's chain goes on from its first page to the next one (the only start a run has). */
static int chain_starts_run(const struct zs_pool *pool, const struct zspage *z)
{
	return z->next == (pfn_t)z->pfn + 1 && pages_lookup_next_in_chunk(pool->pages, z->pfn);
}

/* ZS_CHAIN_RUN when z's pages are a run in number and address (one chunk), else SCATTERED. */
static unsigned chain_kind(struct zs_pool *pool, const struct zspage *z)
{
	pfn_t pfn = z->pfn;
	const struct zs_page_desc *d = zs_page_desc(pool->pages, pfn);
	for (pfn_t next; (next = d->next) != ZS_PFN_NONE; pfn = next, d++)
		if (next != pfn + 1 || !pages_lookup_next_in_chunk(pool->pages, pfn))
			return ZS_CHAIN_SCATTERED;
	return ZS_CHAIN_RUN;
}

/* Class lock held, z about to be the heap's: a chain that starts as a run looked at once, for
 * every later set_cur (a one-page zspage, or one whose second page is elsewhere, needs none). */
static void chain_note(struct zs_pool *pool, struct zspage *z)
{
	if (chain_starts_run(pool, z) && unlikely(*zspage_chain_note(z) == ZS_CHAIN_UNKNOWN))
		*zspage_chain_note(z) = chain_kind(pool, z);
}

/* What set_cur may trust without a walk: one page, or a run noted so. */
static int chain_is_run(const struct zs_pool *pool, struct zspage *z)
{
	if (z->next == ZS_PFN_NONE)
		return 1;
	return chain_starts_run(pool, z) && *zspage_chain_note(z) == ZS_CHAIN_RUN;
}

/* The cursor on z's first untouched slot, once c's page arrays say where z's pages are. */
static inline __attribute__((always_inline)) struct zspage *
cur_cursor(struct zs_heap_class *c, struct zspage *z, pfn_t pfn, char *addr, unsigned flat)
{
	if (z->untouched < z->objs) {
		unsigned long pos = (unsigned long)z->untouched * c->size;
		unsigned pi = (unsigned)(pos >> c->pshift);
		c->bpi = (uint8_t)pi;
		if (flat) {
			c->bnext = addr + pos;
			c->bbase = location_to_obj(pfn + pi, z->class_idx, 0);
		} else {
			c->bnext = c->addr[pi] + (pos & c->pmask);
			c->bbase = location_to_obj(c->pfn[pi], z->class_idx, 0);
		}
	}
	z->fullness = ZS_OWNED_CUR;
	return c->cur = z;
}

/* set_cur of a chain not known to be a run: walked, and when it is not a run after all every
 * page's number and address cached (a chain never looked at, or scattered). */
static __attribute__((noinline)) struct zspage *set_cur_walk(struct zs_pool *pool,
							     struct zs_heap_class *c,
							     struct zspage *z, pfn_t pfn,
							     char *addr)
{
	unsigned long psize = (unsigned long)c->pmask + 1;
	if (chain_kind(pool, z) == ZS_CHAIN_RUN) {
		c->flat = 1;
		return cur_cursor(c, z, pfn, addr, 1);
	}
	c->flat = 0;
	struct zs_page_desc *d = zs_page_desc(pool->pages, pfn);
	for (unsigned k = 1;; k++) {
		pfn_t next = d->next;
		if (next == ZS_PFN_NONE)
			break;
		/* Parts of the chain may still be runs: the next descriptor and page follow. */
		if (next == pfn + 1 && pages_lookup_next_in_chunk(pool->pages, pfn)) {
			d++;
			addr += psize;
		} else {
			d = pages_lookup_desc_addr(pool->pages, next, &addr);
		}
		pfn = next;
		assert_internal(k < ZS_MAX_CHAIN && ((uintptr_t)addr & c->pmask) == 0);
		c->pfn[k] = (uint32_t)pfn;
		c->addr[k] = addr;
	}
	return cur_cursor(c, z, 0, NULL, 0);
}

/*
 * z becomes the class's current zspage, the cursor on its first untouched
 * slot (internal.h, struct zs_heap_class).  Its first page's number and
 * address cached; the others only when its pages are not a run (flat: the
 * placement then finds a page from the first).  A chain noted as a run
 * (chain_note) is not walked: the common case stores a few words and
 * calls nothing.
 */
static struct zspage *set_cur(struct zs_pool *pool, struct zs_heap_class *c, struct zspage *z)
{
	pfn_t pfn = z->pfn;
	char *addr = pages_lookup_addr(pool->pages, pfn);
	assert_internal(c->size && c->pmask == pool->page_size - 1);
	assert_internal(((uintptr_t)addr & c->pmask) == 0);
	c->pfn[0] = (uint32_t)pfn;
	c->addr[0] = addr;
	if (unlikely(!chain_is_run(pool, z)))
		return set_cur_walk(pool, c, z, pfn, addr);
	c->flat = 1;
	return cur_cursor(c, z, pfn, addr, 1);
}

static int has_free(const struct zspage *z)
{
	return z->freeobj != FREEOBJ_END || z->untouched < z->objs;
}

/*
 * heap_refill's class path: the class's fullest partial zspage, else parked
 * ones (several at once after whole zspages: c->streak), else another
 * copy's parked one, else new pages.  Out of line with its stack of taken
 * zspages, so that a refill from the heap's own lists saves no register.
 */
static __attribute__((noinline)) struct zspage *refill_class(struct zs_pool *pool,
							     struct zs_heap *h, int idx)
{
	struct zs_heap_class *c = &h->cls[idx];
	struct zspage *z;
	/* A compactor revokes the heaps after it raised the flag: take nothing it must see. */
	if (atomic_load_explicit(&pool->compaction_in_progress, memory_order_acquire))
		return NULL;
	/* The CPU's copy, as the class path takes: compaction merges zspages within a copy, so
	 * threads on one CPU share one (a per-thread copy left their zspages apart). */
	struct size_class *class = alloc_class(pool, idx);
	if (class_single(class)) {
		c->off = 1;
		return NULL;
	}
	/* Every copy of the class has the same slot size: the placement's numbers are written once. */
	if (unlikely(!c->size)) {
		c->size = class->size;
		c->pshift = (uint8_t)pool->page_shift;
		c->pmask = pool->page_size - 1;
	}
	spin_lock(&class->lock);
	if (atomic_load_explicit(&pool->compaction_in_progress, memory_order_acquire)) {
		spin_unlock(&class->lock);
		return NULL;
	}
	/* Every zspage on the lists full (owned ones count so): no partial to look for, so a
	 * thread that owns all of its class's zspages skips the walk over the groups. */
	z = class->stats[ZS_OBJS_INUSE] == class->stats[ZS_OBJS_ALLOCATED] ? NULL : fullest_partial(class);
	struct zspage *got[1 + ZS_HEAP_SPARES];
	unsigned n = 0;
	if (z) {
		remove_zspage(class, z);
	} else if (pool->park && (n = unpark_zspages(pool, class, got, 1 + c->streak))) {
		/* The first becomes current, the rest spares (no spare left: c->spare was NULL). */
		pool_pages_add(pool, (long)(n * class->pages_per_zspage));
		class->stats[ZS_OBJS_ALLOCATED] += (unsigned long)n * class->objs_per_zspage;
		z = got[0];
		/* The spares owned as own() owns z, in one count: each is new (unpark_zspages),
		 * of the class's shape, and unlinked. */
		class->stats[ZS_OBJS_INUSE] += (unsigned long)(n - 1) * class->objs_per_zspage;
		for (unsigned k = 1; k < n; k++) {
			struct zspage *s = got[k];
			assert_internal(!s->inuse && s->objs == class->objs_per_zspage && !s->lprev);
			chain_note(pool, s);
			__atomic_store_n(&s->heap_id, h->zid, __ATOMIC_RELAXED);
			s->fullness = ZS_OWNED_SPARE;
			s->lnext = c->spare;
			c->spare = s;
		}
		c->nspare = (uint8_t)(n - 1);
	} else {
		spin_unlock(&class->lock);
		/* Another copy's parked zspage before new pages (a thread that moved CPUs); it
		 * comes with that copy's lock, and is that copy's to count. */
		struct size_class *held = NULL;
		if (pool->park && (z = unpark_other_copy(pool, class, &held))) {
			class = held;
		} else {
			z = alloc_zspage(pool, class, class->pages_per_zspage, class->objs_per_zspage);
			if (!z)
				return NULL;
			spin_lock(&class->lock);
		}
		pool_pages_add(pool, (long)class->pages_per_zspage);
		class->stats[ZS_OBJS_ALLOCATED] += class->objs_per_zspage;
	}
	chain_note(pool, z);
	/* Whole zspages refill after whole zspages: the next batch may be larger (spare_put). */
	if (z->inuse)
		c->streak = 0;
	else if (c->streak < ZS_HEAP_SPARES)
		c->streak++;
	own(class, h, z);
	spin_unlock(&class->lock);
	return set_cur(pool, c, z);
}


/* A partial zspage became current while spares wait: holes to fill first, so the spares go
 * back (spare_put keeps none while the class has holes). */
static __attribute__((noinline)) struct zspage *refill_partial_spares(struct zs_pool *pool,
								      struct zs_heap_class *c,
								      struct zspage *z)
{
	spares_give_back(pool, c);
	return set_cur(pool, c, z);
}

/* Past the remote frees: cur (full) onto the full list, and the next zspage: one with holes,
 * a spare, or the class's.  Only tail calls, so the common cases save no register. */
static inline __attribute__((always_inline)) struct zspage *
refill_next(struct zs_pool *pool, struct zs_heap *h, struct zs_heap_class *c, int idx)
{
	struct zspage *z = c->cur;
	if (z) {
		z->fullness = ZS_OWNED_FULL;
		hl_push(&c->full, z);
		c->cur = NULL;
	}
	if (c->partial) {
		z = c->partial;
		hl_unlink(&c->partial, z);
		c->streak = 0;
		if (unlikely(c->spare != NULL))
			return refill_partial_spares(pool, c, z);
		return set_cur(pool, c, z);
	}
	if (c->spare) {
		z = c->spare;
		c->spare = z->lnext;
		c->nspare--;
		z->lnext = NULL;
		return set_cur(pool, c, z);
	}
	return refill_class(pool, h, idx);
}

/* Objects other threads freed into this heap's zspages back first: cur may have room then. */
static __attribute__((noinline)) struct zspage *refill_remote(struct zs_pool *pool,
							      struct zs_heap *h, int idx)
{
	struct zs_heap_class *c = &h->cls[idx];
	collect_remote(pool, h);
	struct zspage *z = c->cur;
	if (z && has_free(z))
		return z;
	return refill_next(pool, h, c, idx);
}

struct zspage *heap_refill(struct zs_pool *pool, struct zs_heap *h, int idx)
{
	struct zs_heap_class *c = &h->cls[idx];
	if (unlikely(c->off))
		return NULL;
	if (unlikely(atomic_load_explicit(&h->remote, memory_order_relaxed)))
		return refill_remote(pool, h, idx);
	return refill_next(pool, h, c, idx);
}

/* heap_free_moved's rare ends, each closing the operation: an emptied zspage that goes back to
 * its class at once, and the one that finds the spares full (the batch goes back with it). */
static __attribute__((noinline)) int free_moved_disown(struct zs_pool *pool, struct zs_heap *h,
						       struct zspage *z)
{
	disown(pool, z);
	heap_exit(h);
	return 0;
}

static __attribute__((noinline)) int free_moved_spares(struct zs_pool *pool, struct zs_heap *h,
						       struct zs_heap_class *c, struct zspage *z)
{
	z->lnext = c->spare;
	c->spare = NULL;
	c->nspare = 0;
	disown_empties(pool, z);
	heap_exit(h);
	return 0;
}

/*
 * The owner, in an operation that freed an object of z that filled no
 * longer (FULL) or emptied z: z's list move, or z a spare (spare_put), and
 * heap_exit.  One step per case with no call on the common ones, so the
 * free's tail call lands here and pushes no register.
 */
int heap_free_moved(struct zs_pool *pool, struct zs_heap *h, struct zspage *z)
{
	struct size_class *class = zspage_class(pool, z);
	struct zs_heap_class *c = &h->cls[class->index];
	if (z->fullness == ZS_OWNED_FULL) {
		hl_unlink(&c->full, z);
		if (likely(z->inuse != 0)) {
			z->fullness = ZS_OWNED_PARTIAL;
			hl_push(&c->partial, z);
			heap_exit(h);
			return 0;
		}
	} else if (z->fullness == ZS_OWNED_CUR) {
		c->cur = NULL;
	} else {
		hl_unlink(&c->partial, z);
	}
	/* Emptied: a spare, as spare_put keeps one. */
	if (!c->full || c->partial || z->objs != class->objs_per_zspage)
		return free_moved_disown(pool, h, z);
	z->freeobj = FREEOBJ_END;
	__atomic_store_n(&z->untouched, 0, __ATOMIC_RELAXED);
	z->fullness = ZS_OWNED_SPARE;
	z->lprev = NULL;
	if (unlikely(c->nspare >= ZS_HEAP_SPARES))
		return free_moved_spares(pool, h, c, z);
	z->lnext = c->spare;
	c->spare = z;
	c->nspare++;
	heap_exit(h);
	return 0;
}

void heap_free_slow(struct zs_pool *pool, struct zs_heap *h, struct zspage *z)
{
	struct zs_heap_class *c = &h->cls[z->class_idx % (unsigned)pool->nr_classes];
	if (z->fullness == ZS_OWNED_CUR) { /* emptied: a spare, or back with the spares */
		c->cur = NULL;
		spare_put(pool, c, z);
		return;
	}
	if (z->fullness == ZS_OWNED_FULL) {
		hl_unlink(&c->full, z);
		z->fullness = ZS_OWNED_PARTIAL;
		hl_push(&c->partial, z);
	}
	/* Emptied: a spare (at most ZS_HEAP_SPARES a class; the idle look takes them back). */
	if (z->inuse == 0) {
		hl_unlink(&c->partial, z);
		spare_put(pool, c, z);
	}
}

void heap_remote_free(struct zs_pool *pool, struct zspage *z, unsigned long obj)
{
	struct zs_heap *h = atomic_load_explicit(&heap_table[zspage_heap_id(z)], memory_order_relaxed);
	unsigned long *hdr = obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), zspage_class(pool, z)->size);
	unsigned long old = atomic_load_explicit(&h->remote, memory_order_relaxed);
	do
		*hdr = old;
	while (!atomic_compare_exchange_weak_explicit(&h->remote, &old, (obj << 1) | 1,
						      memory_order_release, memory_order_relaxed));
}

/* ---- handle cache ---- */

int heap_handles_refill(struct zs_pool *pool, struct zs_heap *h)
{
	return (h->hn = handle_take_values(pool, h->hv)) != 0;
}

/* Every cached handle back: a full cache as a magazine, a part-full one to the shard. */
/* owner 0: a revoker's or the pool's end, which may run on the purge thread and must not take
 * a glibc arena there (a new magazine is malloc'd): a full cache goes to the shard's lists. */
void heap_handles_drain(struct zs_pool *pool, struct zs_heap *h, int owner)
{
	if (h->hn)
		handle_give_values(pool, h->hv, h->hn, owner);
	h->hn = 0;
}

/* ---- revocation ---- */

/* linux/membarrier.h's commands (not every libc's headers have it). */
#define MB_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MB_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)

/* 1: registered for the expedited barrier; 0: the heaps are HEAP_FENCED (global heap lock). */
static int heap_membarrier = -1;

static long membarrier_call(int cmd)
{
#ifdef SYS_membarrier
	return syscall(SYS_membarrier, cmd, 0, 0);
#else
	(void)cmd;
	errno = ENOSYS;
	return -1;
#endif
}

/* Global heap lock held: the mode a new heap starts in (HEAP_FENCED or 0). */
static unsigned heap_mode(void)
{
	if (heap_membarrier < 0) {
		const char *e = getenv("ZS_OWNED_FENCED");
		heap_membarrier = !(e && e[0] == '1') &&
				  membarrier_call(MB_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
	}
	return heap_membarrier ? 0 : HEAP_FENCED;
}

/* The process-wide barrier (global heap lock held): 0, or -1 when the kernel refuses it. */
static int heap_barrier(void)
{
	if (membarrier_call(MB_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	/* A forked child's registration may not have come along: register again, once. */
	if (membarrier_call(MB_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
	    membarrier_call(MB_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	return -1;
}

/* The fenced owner (HEAP_FENCED), or one that found REVOKE: 1 entered, 0 class path. */
int heap_enter_slow(struct zs_heap *h)
{
	unsigned r = atomic_load_explicit(&h->revoke, memory_order_acquire);
	if (r == HEAP_FENCED) {
		atomic_exchange_explicit(&h->busy, HEAP_BUSY, memory_order_seq_cst);
		if (!(atomic_load_explicit(&h->revoke, memory_order_seq_cst) & HEAP_REVOKE))
			return 1;
	}
	atomic_store_explicit(&h->busy, 0, memory_order_release);
	return 0;
}

/*
 * Global heap lock held, not the heap's owner in an operation: 1 once the
 * owner is out of its heap and stays out until heap_resume; 0 when the
 * barrier is refused (the heap is left to its owner).
 */
static int heap_stop(struct zs_heap *h)
{
	unsigned r = atomic_fetch_or_explicit(&h->revoke, HEAP_REVOKE, memory_order_seq_cst);
	if (!(r & HEAP_FENCED) && heap_barrier()) {
		atomic_fetch_and_explicit(&h->revoke, ~HEAP_REVOKE, memory_order_release);
		return 0;
	}
	/* An owner seen busy finishes its operation without waiting on anything this thread holds. */
	while (atomic_load_explicit(&h->busy, memory_order_seq_cst))
		sched_yield();
	return 1;
}

static void heap_resume(struct zs_heap *h)
{
	atomic_fetch_and_explicit(&h->revoke, ~HEAP_REVOKE, memory_order_release);
}

/* The heap stopped (or its owner): every owned zspage back to its class, the remote frees done,
 * the handles back. */
static void revoke_locked(struct zs_pool *pool, struct zs_heap *h)
{
	for (int i = 0; i < pool->nr_classes; i++) {
		struct zs_heap_class *c = &h->cls[i];
		struct zspage *z;
		if (c->cur) {
			z = c->cur;
			c->cur = NULL;
			disown(pool, z);
		}
		while ((z = c->partial)) {
			hl_unlink(&c->partial, z);
			disown(pool, z);
		}
		while ((z = c->full)) {
			hl_unlink(&c->full, z);
			disown(pool, z);
		}
		spares_give_back(pool, c);
	}
	/* Their zspages are the classes' now: free them as any other thread would. */
	unsigned long v = atomic_exchange_explicit(&h->remote, 0, memory_order_acquire);
	while (v) {
		unsigned long obj = v >> 1;
		struct zspage *z = obj_to_zspage(pool, obj);
		struct size_class *class = zspage_class(pool, z);
		spin_lock(&class->lock);
		unsigned long *hdr = obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), class->size);
		v = *hdr;
		*hdr |= OBJ_ALLOCATED_TAG; /* it is: still counted in its zspage */
		/* Another heap may own the zspage already (a revocation without a compaction). */
		struct zspage *empty = free_locked_any(pool, class, obj);
		if (empty && !(pool->park && park_zspage(pool, class, empty)))
			free_zspage_pages(pool, empty);
		spin_unlock(&class->lock);
	}
	heap_handles_drain(pool, h, 0);
}

void heaps_revoke_all(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		if (!heap_stop(h))
			continue;
		revoke_locked(pool, h);
		heap_resume(h);
	}
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * zs_class_stats' snapshot: every heap of the pool stopped for the whole
 * count (heaps_stats_begin .. heaps_stats_end), so the class counts it reads
 * and the owned zspages it counts are of one moment.  Stopped one class at
 * a time, after the class counts were read, an owner could empty and park a
 * zspage in between: the class still counted its objects as allocated and
 * no heap held it any more.  Each heap's remote stack is collected first,
 * as its owner's next refill would: another thread's frees are done frees,
 * and an owner that makes no further call (idle, or done) never collects
 * them, so obj_used would count them for ever.  While stopped, an owner's
 * own calls take the class path, as during any revocation.  A heap whose
 * barrier is refused stays its owner's (its zspages count as wholly in
 * use, as the class counts them).  Stopped heaps are those with HEAP_REVOKE
 * set: only the holder of the global heap lock sets it.
 */
void heaps_stats_begin(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next)
		if (heap_stop(h))
			collect_remote(pool, h);
}

void heaps_stats_end(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	for (struct zs_heap *h = pool->heaps; h; h = h->next)
		if (atomic_load_explicit(&h->revoke, memory_order_relaxed) & HEAP_REVOKE)
			heap_resume(h);
	pthread_mutex_unlock(&heaps_lock);
}

/* Between heaps_stats_begin and _end: free slots in the zspages the stopped heaps own of
 * physical class phys (every copy), each zspage counted in the group its use puts it in. */
unsigned long heaps_owned_free(struct zs_pool *pool, int phys, unsigned long *fullness)
{
	unsigned long n = 0;
	if (!pool->owned)
		return 0;
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		struct zs_heap_class *c = &h->cls[phys];
		if (!(atomic_load_explicit(&h->revoke, memory_order_relaxed) & HEAP_REVOKE))
			continue;
		if (c->cur) {
			n += c->cur->objs - c->cur->inuse;
			fullness[get_fullness_group(NULL, c->cur)]++;
		}
		for (struct zspage *z = c->partial; z; z = z->lnext) {
			n += z->objs - z->inuse;
			fullness[get_fullness_group(NULL, z)]++;
		}
		for (struct zspage *z = c->full; z; z = z->lnext)
			fullness[ZS_INUSE_RATIO_100]++;
		for (struct zspage *z = c->spare; z; z = z->lnext) {
			n += z->objs;
			fullness[ZS_INUSE_RATIO_0]++;
		}
	}
	return n;
}

/* Global heap lock held: a heap whose thread is done with it (exit, or its slot reused). */
static void heap_retire(struct zs_heap *h)
{
	struct zs_pool *pool = h->pool;
	if (pool) {
		revoke_locked(pool, h); /* by its owner, between operations */
		for (struct zs_heap **p = &pool->heaps; *p; p = &(*p)->next)
			if (*p == h) {
				*p = h->next;
				break;
			}
		atomic_store_explicit(&heap_table[h->id], NULL, memory_order_relaxed);
	}
	free(h);
}

static void tl_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&heaps_lock);
	for (int i = 0; i < ZS_TL_HEAPS; i++) {
		if (heap_tls.heap[i] && heap_tls.heap[i] != &heap_none)
			heap_retire(heap_tls.heap[i]);
		heap_tls.heap[i] = NULL;
		heap_tls.key[i] = 0;
	}
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * The thread's number is about to go back (common/thread.c), and with it
 * the pin slot its heaps' wpin names: another thread may get both next.
 * A call later in this thread's exit takes the read-lock path, or its new
 * number's slot (wpin_own), so the write path tests no thread number.
 */
static void heaps_number_gone(void)
{
	for (int i = 0; i < ZS_TL_HEAPS; i++)
		if (heap_tls.heap[i] && heap_tls.heap[i] != &heap_none)
			heap_tls.heap[i]->wpin = &wpin_none;
}

static void tl_key_create(void)
{
	if (pthread_key_create(&tl_key, tl_exit))
		tl_key = (pthread_key_t)-1;
	thread_on_give_back(heaps_number_gone);
}

/* Global heap lock held: a new heap registered in the pool, or NULL. */
static struct zs_heap *heap_new(struct zs_pool *pool)
{
	uint32_t id = 0;
	for (uint32_t k = 0; k < ZS_MAX_HEAPS - 1; k++) {
		uint32_t i = 1 + (heap_hint - 1 + k) % (ZS_MAX_HEAPS - 1);
		if (!atomic_load_explicit(&heap_table[i], memory_order_relaxed)) {
			id = i;
			break;
		}
	}
	if (!id)
		return NULL;
	/* Aligned: busy and revoke sit on lines of their own (internal.h). */
	size_t bytes = sizeof(struct zs_heap) + (size_t)pool->nr_classes * sizeof(struct zs_heap_class);
	bytes = (bytes + 63) & ~(size_t)63;
	struct zs_heap *h = aligned_alloc(64, bytes);
	if (!h)
		return NULL;
	memset(h, 0, bytes);
	heap_hint = id + 1;
	atomic_init(&h->busy, 0);
	atomic_init(&h->revoke, heap_mode());
	h->id = id;
	h->zid = id | ZSPAGE_OWNED;
	h->pool = pool;
	atomic_init(&h->remote, 0);
	/* No pin slot yet: the owner's first zs_malloc_write takes one (zsmalloc.c, wpin_own). */
	h->wpin = &wpin_none;
	h->next = pool->heaps;
	pool->heaps = h;
	atomic_store_explicit(&heap_table[id], h, memory_order_relaxed);
	return h;
}

struct zs_heap *heap_lookup(struct zs_pool *pool)
{
	if (!pool->owned)
		return NULL;
	struct heap_tls *t = &heap_tls;
	for (int i = 1; i < ZS_TL_HEAPS; i++) {
		if (t->key[i] == pool->heap_key) {
			uint64_t k = t->key[i];
			struct zs_heap *h = t->heap[i];
			t->key[i] = t->key[0];
			t->heap[i] = t->heap[0];
			t->key[0] = k;
			t->heap[0] = h;
			return h == &heap_none ? NULL : h;
		}
	}
	pthread_once(&tl_once, tl_key_create);
	if (tl_key == (pthread_key_t)-1)
		return NULL;
	pthread_mutex_lock(&heaps_lock);
	/* The least recently used slot goes: its heap gives its zspages back first. */
	if (t->heap[ZS_TL_HEAPS - 1] && t->heap[ZS_TL_HEAPS - 1] != &heap_none)
		heap_retire(t->heap[ZS_TL_HEAPS - 1]);
	for (int i = ZS_TL_HEAPS - 1; i > 0; i--) {
		t->key[i] = t->key[i - 1];
		t->heap[i] = t->heap[i - 1];
	}
	/* No heap to be had: the key still matches, so the class path is taken at once. */
	struct zs_heap *h = heap_new(pool);
	t->key[0] = pool->heap_key;
	t->heap[0] = h ? h : &heap_none;
	pthread_mutex_unlock(&heaps_lock);
	pthread_setspecific(tl_key, t);
	return h;
}

void heaps_pool_init(struct zs_pool *pool)
{
	pool->owned = ZS_OWNED_ZSPAGES && pool->cfg.free_mode != ZS_FREE_POOL_LOCK &&
		      !pool->cfg.checked && pool->cfg.fit_zspages;
	pool->small_limit = pool->owned ? 0 : pool->page_size;
	pool->free_flags = pool->cfg.checked;
	pool->free_limit = pool->owned ? 0 : (unsigned long)-4096;
	pool->heap_key = atomic_fetch_add_explicit(&heap_keys, 1, memory_order_relaxed);
	pool->heaps = NULL;
}

/* zs_destroy_pool: the heaps stay with their threads (freed at exit), marked dead. */
void heaps_pool_gone(struct zs_pool *pool)
{
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		heap_handles_drain(pool, h, 0); /* written free, so the chunks' records see them */
		atomic_store_explicit(&heap_table[h->id], NULL, memory_order_relaxed);
		h->pool = NULL;
	}
	pool->heaps = NULL;
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * Self-compaction's look (autocompact.c): free slots in the zspages the
 * pool's heaps own, added to free_slots[phys] for every physical class,
 * stopping each heap once (heaps_owned_free stops it once a class).  While
 * a heap is stopped its owner's frees take the class path, which puts an
 * object of a zspage it owns on its own remote stack; so does every free
 * another thread makes of such an object.  Either waits for the owner's
 * next refill, which an owner that is freeing everything or has gone quiet
 * never makes: the looks then stranded a fifth to a third of a free-all
 * (the pages stayed) and an idle owner's zspages forever.  So the stopped
 * heap's remote stack is collected, as its owner would, before and after
 * the count.  Returns how many heaps it stopped.
 */
unsigned heaps_look(struct zs_pool *pool, unsigned long *free_slots)
{
	unsigned stopped = 0;
	if (!pool->owned)
		return 0;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		if (!heap_stop(h))
			continue; /* its zspages count as wholly in use, as the class counts them */
		stopped++;
		collect_remote(pool, h);
		for (int i = 0; i < pool->nr_classes; i++) {
			struct zs_heap_class *c = &h->cls[i];
			spares_give_back(pool, c); /* an idle heap keeps no empty zspage */
			if (c->cur)
				free_slots[i] += c->cur->objs - c->cur->inuse;
			for (struct zspage *z = c->partial; z; z = z->lnext)
				free_slots[i] += z->objs - z->inuse;
		}
		collect_remote(pool, h);
		heap_resume(h);
	}
	pthread_mutex_unlock(&heaps_lock);
	return stopped;
}
