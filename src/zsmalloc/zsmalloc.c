/*
 * zsmalloc core: pools, allocation and object access.
 *
 * Design (after the kernel's mm/zsmalloc.c, written anew):
 *  - A size class owns zspages: chains of pages_per_zspage pool pages from
 *    the page provider.  Objects are laid out back to back across the chain,
 *    so the last object of a page may continue in the next page.
 *  - Each zspage sits on one of 12 fullness lists of its class (empty,
 *    0-9%, ..., 90-99%, full); lists are LIFO (insert at head).  zs_malloc
 *    takes the head of the fullest non-full list; a zspage's freed objects
 *    form a LIFO list threaded through the objects' first words, and the
 *    never-used ones are an index (handed out after the list, in order:
 *    the kernel's order, without writing every slot of a new zspage).
 *  - A live non-huge object starts with an 8-byte header holding its handle
 *    (tagged), which is how compaction finds the handle to rewrite.  A huge
 *    object fills a one-page zspage and its handle sits in the zspage.
 *  - Resolving a handle to its zspage needs the pool lock (read) because
 *    compaction (write) moves objects; zs_free can instead use the class
 *    index encoded in obj (free_mode), taking only the class lock and
 *    re-reading obj.  Readers hold the zspage lock across their access, so
 *    compaction (trylock) never moves an object out from under them.  A
 *    writer that cannot drain the readers while others wait behind it backs
 *    off (lock.h, zs_write_lock): a read-lock holder may be waiting for a
 *    page fault whose handler reads this pool (src/region/region.c).
 *
 * Lock order.  Every lock zsmalloc takes or runs under, outermost first;
 * a thread blocks only on a lock further down the list than every lock it
 * holds.  The numbers are the ranks a -DZS_DEBUG=ON build checks on every
 * acquire (common/debug.h, enum zs_lock_rank): an acquire out of this
 * order aborts with both locks and the lines that took them, whether or
 * not another thread was there to deadlock with.
 *   200 deferred_init_lock (deferred.c)  the first zs_free_deferred builds
 *       the queue and starts the worker under it; nothing nests inside.
 *   201 deferred wake_lock (deferred.c)  the worker's sleep and a
 *       producer's wake-up; nothing nests inside.  zs_deferred_destroy
 *       drops it before it joins the worker, and joins holding no lock of
 *       rank 210 or above (checked): the worker takes those.
 *   205 compaction flag (compaction_in_progress, compact.c)  a try-only
 *       flag: a second compactor returns at once, so it never waits and is
 *       recorded, not checked.  zs_compact must be entered holding no lock
 *       of rank 205 or above (checked): it goes on to take the pool lock
 *       for writing.
 *   210 deferred consume_lock (deferred.c)  one drainer at a time (worker,
 *       flush, destroy); inside it: class locks one after another, then the
 *       page provider, then handle shards.  Never the pool lock.
 *   220 pool rwlock (pool->lock)  read: handle -> zspage lookups (pin,
 *       pool-lock free mode, checked deferred free); write: compaction.
 *       Inside it: a class lock (free_pool_locked, compaction) or a zspage
 *       lock (pin_object).
 *   225 class_init_lock (class.c)  builds a class's copy on its first
 *       allocation, taken with no other lock held; nothing nests inside.
 *   230 class lock (size_class.lock, any shard)  one at a time: nothing
 *       takes two (stats.c and the deferred batch take them in turn, so
 *       class shards need no order among themselves).  Inside it: the
 *       page provider, when a zs_free or compaction frees an emptied
 *       zspage's pages (pcp lock, then the provider mutex, then, after both
 *       are dropped, the purge registry for a kick).  zs_malloc allocates
 *       its pages with no lock held, like the kernel.
 *   240 handle shard locks (handle.c)  taken with no class or pool lock
 *       held (zs_malloc takes its handle before the class lock, zs_free and
 *       the deferred batch give it back after: short class-lock holds, a
 *       rule of cost, not of deadlock, so the ranks allow it and nothing
 *       checks it).  zs_handles_trim holds all 16, in array (= address)
 *       order, the one place one rank nests.
 *   241 handle_free_lock  inside a shard lock (give_batch, take_batch, trim).
 *   242 handle_chunks_lock (a mutex)  inside the shard lock (refill_shard,
 *       after its page allocation) or every handle lock (trim); inside it
 *       the handle page provider (zs_pages_free, trim).
 *   300 page provider registry lock (src/pages/purge.c)  kicks of the purge
 *       thread, provider create/destroy, the thread's pass, fork's prepare
 *       handler.  May be reached under a class lock, never under a
 *       provider's own locks (kicks wait until those are dropped).
 *   310 page provider per-CPU cache lock (src/pages/cache.c)
 *   320 page provider mutex (src/pages/pages.c)  inside its pcp lock or
 *       alone; the chunk-map seqlock's writers run inside it, its readers
 *       retry and never block.
 * The pool's two providers (object pages, handle chunks) share ranks 310
 * and 320 and are never held together.
 * Not ranked, and why:
 *   - zspage lock: readers take it only inside the pool lock (pin_object,
 *     checked: zs_rw_held_by_me asks this thread's held list) and then
 *     hold it, after the pool lock is gone, across the caller's
 *     own work (read_begin..read_end, map..unmap), which may call back into
 *     any zs_* function or fault into a region that reads this pool.  Its
 *     only writer, compaction, never waits for it (trylock under the pool
 *     write lock and the class lock), so a reader can never be part of a
 *     wait cycle and ranking it would only forbid legal callers.
 *   - the deferred queue itself (lock-free array) and the per-thread map
 *     area: no locks.
 * Signals stay blocked wherever the pool write lock (compaction) or the
 * worker's class locks can be held (common/sigblock.h), so no handler runs
 * on a thread in the middle of this order.  The layers above (zram, zswap,
 * region) call in holding their own locks, which come before all of these
 * (debug.h keeps ranks 100-199 for zram's).
 *
 * This file: pool creation, zs_malloc and object access.  Freeing (and the
 * free modes) lives in free.c, zspage lists and object slots in zspage.c,
 * compaction in compact.c, deferred free in deferred.c, the class table and
 * chain/delta policies in class.c, handles in handle.c, statistics and the
 * class table print in stats.c.  Calls run one way: zsmalloc.c -> deferred.c
 * -> free.c -> zspage.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "zsmalloc/check.h"
#include "zsmalloc/internal.h"
#include "zs/harness.h"

/* ---- pool ---- */

void zs_pool_config_init(struct zs_pool_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->page_size = ZS_PAGE_SIZE_DEFAULT;
	cfg->max_chain = 8;
}

/* The application profile (zsmalloc.h): the kernel's class table and chain,
 * with the two knobs that buy threads and the one that gives a sparse
 * class's free slots back at compaction.  Kept as "kernel profile +
 * overrides" so the two can only differ where documented. */
void zs_pool_config_init_app(struct zs_pool_config *cfg)
{
	zs_pool_config_init(cfg);
	cfg->class_shards = ZS_CLASS_SHARDS_AUTO;
	cfg->free_mode = ZS_FREE_CLASS_INDEX;
	cfg->fit_zspages = 1;
}

/* The ranges documented in zsmalloc.h; defaults (0) already filled in. */
static int config_valid(const struct zs_pool_config *c)
{
	int bad;

	if (ZS_CONFIG_ABI_CHECK(c, &bad))
		return 0;
	if (!zs_page_size_valid(c->page_size))
		return 0;
	if (c->max_chain < 1 || c->max_chain > ZS_MAX_CHAIN)
		return 0;
	if (c->class_delta && (c->class_delta < 8 || c->class_delta % 8 ||
			       c->class_delta > c->page_size))
		return 0;
	/* Enums are compared unsigned so a negative value cast in is caught too. */
	if ((unsigned)c->free_mode > ZS_FREE_CLASS_INDEX_UNLOCKED ||
	    (unsigned)c->chain_policy > ZS_CHAIN_HEURISTIC)
		return 0;
	if (c->checked != 0 && c->checked != 1)
		return 0;
	if (c->fit_zspages != 0 && c->fit_zspages != 1)
		return 0;
	if (c->class_shards > ZS_MAX_CLASS_SHARDS && c->class_shards != ZS_CLASS_SHARDS_AUTO)
		return 0;
	if (c->deferred_worker < -1 || c->deferred_worker > 1)
		return 0;
	if (c->deferred_capacity > ZS_MAX_DEFERRED_CAPACITY)
		return 0;
	if (c->max_object_size &&
	    (c->max_object_size < c->page_size ||
	     c->max_object_size > (size_t)ZS_MAX_OBJECT_PAGES * c->page_size))
		return 0;
	if (c->max_pages > ZS_PAGES_MAX_SPAN / c->page_size)
		return 0;
	if (c->page_cache_pages != ZS_PAGES_NO_CACHE &&
	    c->page_cache_pages > ZS_PAGES_MAX_SPAN / c->page_size)
		return 0;
	/* The page provider refuses it too; checked here so zs_pool_config_check sees it. */
	if (c->page_cache_decay_ms > ZS_PAGES_MAX_DECAY_MS &&
	    c->page_cache_decay_ms != ZS_PAGES_DECAY_NEVER)
		return 0;
	return 1;
}

/* The two fields whose 0 zs_create_pool replaces before checking the ranges. */
static void config_defaults(struct zs_pool_config *c)
{
	if (!c->page_size)
		c->page_size = ZS_PAGE_SIZE_DEFAULT;
	if (!c->max_chain)
		c->max_chain = 8;
}

int zs_pool_config_check(const struct zs_pool_config *user_cfg)
{
	struct zs_pool_config cfg = *user_cfg;
	struct zs_class_shape shape;
	config_defaults(&cfg);
	if (!config_valid(&cfg))
		return -EINVAL;
	return zs_classes_shape(&cfg, (unsigned)cfg.page_size, &shape);
}

struct zs_pool *zs_create_pool(const struct zs_pool_config *user_cfg)
{
	struct zs_pool_config cfg;
	if (user_cfg)
		cfg = *user_cfg;
	else
		zs_pool_config_init(&cfg);
	config_defaults(&cfg);
	if (!config_valid(&cfg)) {
		errno = EINVAL;
		return NULL;
	}
	struct zs_pool *pool = aligned_alloc(64, sizeof(*pool));
	if (!pool) {
		errno = ENOMEM;
		return NULL;
	}
	memset(pool, 0, sizeof(*pool));
	pool->cfg = cfg;
	snprintf(pool->name, sizeof(pool->name), "%s", cfg.name ? cfg.name : "zs");
	pool->cfg.name = pool->name;
	pool->page_size = (unsigned)cfg.page_size;
	pool->page_shift = (unsigned)__builtin_ctz(pool->page_size);
	pool->max_object_size = cfg.max_object_size ? cfg.max_object_size : pool->page_size;
	zs_rw_init(&pool->lock, cfg.free_mode != ZS_FREE_POOL_LOCK);
	for (int i = 0; i < ZS_RW_SHARDS; i++)
		atomic_init(&pool->pages_allocated[i].n, 0);
	atomic_init(&pool->pages_compacted, 0);
	atomic_init(&pool->nr_tails, 0);
	atomic_init(&pool->compaction_in_progress, 0);
	zs_deferred_init(pool); /* nothing allocated until the first zs_free_deferred */

	int err = zs_classes_build(pool);
	if (!err) {
		struct zs_pages_config pc = { .page_size = cfg.page_size, .max_pages = cfg.max_pages,
					      .cache_pages = cfg.page_cache_pages,
					      .decay_ms = cfg.page_cache_decay_ms };
		errno = 0;
		pool->pages = zs_pages_create(&pc);
		err = pool->pages ? zs_handles_init(pool) : errno ? -errno : -ENOMEM;
	}
	if (err) {
		zs_deferred_destroy(pool);
		zs_handles_destroy(pool);
		if (pool->pages)
			zs_pages_destroy(pool->pages);
		zs_classes_free(pool);
		free(pool);
		errno = -err;
		return NULL;
	}
	return pool;
}

void zs_destroy_pool(struct zs_pool *pool)
{
	if (!pool)
		return;
	zs_deferred_destroy(pool);
	zs_handles_destroy(pool);
	zs_pages_destroy(pool->pages);
	zs_classes_free(pool);
	free(pool);
}

/* ---- malloc / free ---- */

static struct zspage *find_get_zspage(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_99; fg >= ZS_INUSE_RATIO_0; fg--)
		if (class->fullness_list[fg])
			return class->fullness_list[fg];
	return NULL;
}

/* Class lock held: the object takes a free slot of `zspage` (which has one) and is recorded. */
static inline __attribute__((always_inline)) void place(struct zs_pool *pool,
							struct size_class *class,
							struct zspage *zspage, unsigned long handle)
{
	unsigned long obj = zs_obj_malloc(pool, zspage, handle);
	zs_fix_fullness_group(class, zspage);
	record_obj(handle, obj);
	class->stats[ZS_OBJS_INUSE]++;
}

/*
 * No pages for a new zspage in this CPU's copy of the class: a free slot in
 * another copy serves instead, so a pool at its max_pages (or a provider out
 * of memory) refuses an object only when no copy of its class has room - as
 * an unsharded pool refuses only a full class.  Only this failure path looks;
 * copies never built hold nothing.  0 when placed there, else -ENOMEM.
 */
static __attribute__((noinline)) int alloc_other_copy(struct zs_pool *pool,
						       struct size_class *class, unsigned long handle)
{
	unsigned n = (unsigned)pool->nr_classes, self = class->enc / n;
	for (unsigned s = 0; s < pool->nr_shards; s++) {
		struct size_class *c = class + ((long)s - (long)self) * (long)n;
		if (s == self || !class_live(c))
			continue;
		zs_spin_lock(&c->lock);
		struct zspage *zspage = find_get_zspage(c);
		if (zspage) {
			place(pool, c, zspage, handle);
			zs_spin_unlock(&c->lock);
			return 0;
		}
		zs_spin_unlock(&c->lock);
	}
	return -ENOMEM;
}

/*
 * Place one object for `handle` in `class` (this CPU's copy) and record it;
 * a head zspage also records its tail.  0, or -ENOMEM without pages (and,
 * in a sharded pool, without a free slot in any copy of the class).
 */
static inline __attribute__((always_inline)) int
alloc_obj(struct zs_pool *pool, struct size_class *class, unsigned long handle,
	  unsigned long tail, int is_tail)
{
	zs_spin_lock(&class->lock);
	struct zspage *zspage = find_get_zspage(class);
	if (zs_unlikely(is_tail) && !zspage) {
		/*
		 * A tail only opens a class when that pays: a new zspage of L
		 * pages costs L pages until it fills, a tail stored unpacked
		 * costs under a page, so an empty class grows for the tail that
		 * comes after L were declined; a class already holding L objects
		 * is in use and grows as for any object (docs/policies.md,
		 * "When the tail packs", measures the rules).
		 */
		if (class->tails_declined < class->pages_per_zspage &&
		    class->stats[ZS_OBJS_INUSE] < class->pages_per_zspage) {
			class->tails_declined++;
			zs_spin_unlock(&class->lock);
			return -EAGAIN;
		}
		class->tails_declined = 0;
	}
	if (zs_likely(zspage)) {
		place(pool, class, zspage, handle);
		zs_spin_unlock(&class->lock);
		return 0;
	}
	zs_spin_unlock(&class->lock);

	/* Like the kernel, allocate the pages with no lock held. */
	zspage = zs_alloc_zspage(pool, class, class->pages_per_zspage, class->objs_per_zspage);
	if (!zspage)
		return pool->nr_shards > 1 && !tail ? alloc_other_copy(pool, class, handle) : -ENOMEM;
	zs_spin_lock(&class->lock);
	unsigned long obj = zs_obj_malloc(pool, zspage, handle);
	zspage->tail = tail; /* one-object zspages only: class_single, so never a list link */
	zs_insert_zspage(class, zspage, zs_get_fullness_group(class, zspage));
	record_obj(handle, obj);
	pool_pages_add(pool, (long)class->pages_per_zspage);
	class->stats[ZS_OBJS_ALLOCATED] += class->objs_per_zspage;
	class->stats[ZS_OBJS_INUSE]++;
	zs_spin_unlock(&class->lock);
	return 0;
}

/* zs_malloc out of memory (below): free the deferred queue and try once more. */
static __attribute__((noinline)) unsigned long malloc_failed(struct zs_pool *pool, size_t size,
							     int retried);

/*
 * Multi-page: whole pages in the head, the partial last page packed as a
 * small object (the tail) when a small class takes it and grows for it
 * (alloc_obj; class.c, "Objects larger than a page").
 */
static __attribute__((noinline)) unsigned long malloc_large(struct zs_pool *pool, size_t size,
							    int retried)
{
	if (size > pool->max_object_size)
		return (unsigned long)-ENOSPC;
	size_t slot = size + ZS_HANDLE_SIZE, rest = size & (pool->page_size - 1);
	unsigned long tail = 0;
	struct size_class *tc = NULL;
	if (rest && rest < pool->huge_class_size)
		tc = zs_alloc_class(pool, size_to_class_index(pool, rest + ZS_HANDLE_SIZE));
	/* A one-object class (chain 1 makes those of sizes past half a page) would
	 * spend a page on the tail anyway: keep the last page whole then. */
	if (tc && !class_single(tc)) {
		tail = zs_handle_alloc(pool);
		if (zs_unlikely(!tail))
			return malloc_failed(pool, size, retried);
		int rc = alloc_obj(pool, tc, tail, 0, 1);
		if (rc) {
			zs_handle_free(pool, tail);
			if (rc != -EAGAIN)
				return malloc_failed(pool, size, retried);
			tail = 0; /* declined: the object takes its last page whole */
		} else {
			slot -= rest;
			/* counted while it exists: zs_free_tail uncounts it, on failure below too */
			atomic_fetch_add_explicit(&pool->nr_tails, 1, memory_order_relaxed);
		}
	}
	unsigned long handle = zs_handle_alloc(pool);
	if (zs_likely(handle) &&
	    zs_likely(!alloc_obj(pool, zs_alloc_class(pool, size_to_class_index(pool, slot)), handle,
				 tail, 0)))
		return handle;
	if (handle)
		zs_handle_free(pool, handle);
	if (tail)
		zs_free_tail(pool, tail);
	return malloc_failed(pool, size, retried);
}

/* size 1..page: one slot of the class the size table names. */
static inline __attribute__((always_inline)) unsigned long malloc_small(struct zs_pool *pool,
									size_t size, int retried)
{
	unsigned long handle = zs_handle_alloc(pool);
	if (zs_unlikely(!handle))
		return malloc_failed(pool, size, retried);
	/* size <= page: the table alone (size_to_class_index without its multi-page test). */
	int index = pool->size_lut[(size + ZS_HANDLE_SIZE + 7) >> 3];
	if (zs_unlikely(alloc_obj(pool, zs_alloc_class(pool, index), handle, 0, 0))) {
		zs_handle_free(pool, handle);
		return malloc_failed(pool, size, retried);
	}
	return handle;
}

/*
 * Out of memory with deferred frees queued: the pool is closer to max_pages
 * (or the provider to its memory) than the queue makes it look.  Free what
 * is queued and ask once more (`retried`), so a zs_free_deferred followed by
 * a zs_malloc at the limit behaves as a zs_free would have; without queued
 * frees, or when the second try fails too, -ENOMEM stands.  Only the failure
 * paths call it: the allocation itself pays nothing.
 */
static unsigned long malloc_failed(struct zs_pool *pool, size_t size, int retried)
{
	if (retried || !zs_deferred_pending(pool))
		return (unsigned long)-ENOMEM;
	zs_free_deferred_flush(pool);
	return size > pool->page_size ? malloc_large(pool, size, 1) : malloc_small(pool, size, 1);
}

unsigned long zs_malloc(struct zs_pool *pool, size_t size)
{
	if (zs_unlikely(!size))
		return (unsigned long)-EINVAL;
	if (zs_unlikely(size > pool->page_size))
		return malloc_large(pool, size, 0);
	return malloc_small(pool, size, 0);
}

/* ---- object access ---- */

/*
 * Resolve a handle and read-lock its zspage so it cannot move; the pool lock
 * is held only for the lookup.  Returns the zspage or NULL (checked mode).
 */
static struct zspage *pin_object(struct zs_pool *pool, unsigned long handle, unsigned long *objp)
{
	unsigned long obj;
	if (pool->cfg.checked && zs_handle_precheck(pool, handle, &obj))
		return NULL;
	zs_read_lock(&pool->lock);
	obj = handle_to_obj(handle);
	if (pool->cfg.checked && zs_validate_obj(pool, handle, obj)) {
		zs_read_unlock(&pool->lock);
		return NULL;
	}
	struct zspage *zspage = obj_to_zspage(pool, obj);
	/* The one way in to a zspage read lock ("Lock order": why it needs no rank). */
	zs_assert_internal(zs_rw_held_by_me(&pool->lock));
	zs_zspage_read_lock(&zspage->lock);
	zs_read_unlock(&pool->lock);
	*objp = obj;
	return zspage;
}

/*
 * Checked mode, for the end/unmap calls: the zspage a begin/map of `handle`
 * read-locked, or NULL when `handle` is garbage, foreign or freed, or its
 * zspage holds no read lock (an end without a successful begin).  Without
 * this an end after a failed begin drops the lock of whatever zspage the
 * stale slot happens to name, and a later reader or compaction spins forever.
 * A queued (deferred) handle is still live, so it may be unpinned.
 */
static struct zspage *pinned_zspage_checked(struct zs_pool *pool, unsigned long handle,
					    unsigned long *objp)
{
	if (!zs_handle_in_pool(pool, handle))
		return NULL;
	unsigned long v = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
	if (v & HANDLE_FREE_BIT)
		return NULL;
	struct zspage *zspage = NULL;
	zs_read_lock(&pool->lock);
	unsigned long obj = handle_to_obj(handle);
	if (class_enc_valid(pool, obj_to_class_idx(obj)) && !zs_validate_obj(pool, handle, obj)) {
		zspage = obj_to_zspage(pool, obj);
		if (atomic_load_explicit(&zspage->lock, memory_order_relaxed) <= 0)
			zspage = NULL;
	}
	zs_read_unlock(&pool->lock);
	*objp = obj;
	return zspage;
}

/* Drop one reader unless there is none (checked mode: never wrap into the writer state). */
static void zspage_read_unlock_checked(atomic_int *cnt)
{
	int c = atomic_load_explicit(cnt, memory_order_relaxed);
	while (c > 0 && !atomic_compare_exchange_weak_explicit(cnt, &c, c - 1, memory_order_release,
							       memory_order_relaxed))
		;
}

/*
 * Where an object's payload lies: seg[0] from (pfn, off) along its zspage's
 * chain, and for a multi-page object with a packed tail seg[1], the tail.
 */
struct obj_segs {
	struct {
		zs_pfn_t pfn;
		unsigned off;
		size_t cap;
	} seg[2];
	struct zspage *tail_zspage; /* read-locked with the head, or NULL */
	size_t cap;                 /* payload capacity: the segments' together */
};

/* Payload offset within the object's first page, and the payload capacity. */
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

/* Payload of obj (in zspage, which the caller pinned) as one segment. */
static inline void obj_segment(const struct zs_pool *pool, const struct zspage *zspage,
			       unsigned long obj, struct obj_segs *v, int i)
{
	unsigned cap;
	v->seg[i].pfn = obj_to_pfn(obj);
	v->seg[i].off = payload_offset(pool, zspage_class(pool, zspage), obj, &cap);
	v->seg[i].cap = cap;
}

/*
 * Describe a pinned object with a packed tail, read-locking the tail's
 * zspage too so compaction cannot move the tail under the reader; 0, or
 * -EINVAL with the head unlocked (cannot happen: the head holds its tail).
 */
static int pin_tail(struct zs_pool *pool, struct zspage *zspage, unsigned long obj,
		    struct obj_segs *v)
{
	unsigned long tobj;
	obj_segment(pool, zspage, obj, v, 0);
	struct zspage *tz = pin_object(pool, zspage->tail, &tobj);
	if (!tz) {
		zs_zspage_read_unlock(&zspage->lock);
		return -EINVAL;
	}
	obj_segment(pool, tz, tobj, v, 1);
	v->cap = v->seg[0].cap + v->seg[1].cap;
	v->tail_zspage = tz;
	return 0;
}

static void unpin_segments(struct zspage *zspage, const struct obj_segs *v)
{
	if (v->tail_zspage)
		zs_zspage_read_unlock(&v->tail_zspage->lock);
	zs_zspage_read_unlock(&zspage->lock);
}

static void unpin_object(struct zs_pool *pool, unsigned long handle)
{
	if (zs_unlikely(pool->cfg.checked)) {
		unsigned long obj;
		struct zspage *zspage = pinned_zspage_checked(pool, handle, &obj);
		if (zspage) {
			unsigned long tail = zspage_tail(zspage);
			if (tail)
				unpin_object(pool, tail);
			zspage_read_unlock_checked(&zspage->lock);
		}
		return;
	}
	/* No pool lock: a read-locked zspage cannot be migrated, so obj is stable. */
	struct zspage *zspage = obj_to_zspage(pool, handle_to_obj(handle));
	if (zs_unlikely(zspage_tail(zspage)))
		unpin_object(pool, zspage->tail);
	zs_zspage_read_unlock(&zspage->lock);
}

/* Copy len (<= v->cap) payload bytes out of / into the object's segments. */
static void segs_read(const struct zs_pool *pool, const struct obj_segs *v, void *buf, size_t len)
{
	size_t first = len < v->seg[0].cap ? len : v->seg[0].cap;
	span_read(pool, v->seg[0].pfn, v->seg[0].off, buf, first);
	if (first < len)
		span_read(pool, v->seg[1].pfn, v->seg[1].off, (char *)buf + first, len - first);
}

static void segs_write(const struct zs_pool *pool, const struct obj_segs *v, const void *buf,
		       size_t len)
{
	size_t first = len < v->seg[0].cap ? len : v->seg[0].cap;
	span_write(pool, v->seg[0].pfn, v->seg[0].off, buf, first);
	if (first < len)
		span_write(pool, v->seg[1].pfn, v->seg[1].off, (const char *)buf + first,
			   len - first);
}

/* zs_obj_read_begin of an object with a packed tail (the head is pinned). */
static __attribute__((noinline)) void *read_begin_packed(struct zs_pool *pool,
							 struct zspage *zspage, unsigned long obj,
							 size_t mem_len, void *local_copy)
{
	struct obj_segs v;
	if (pin_tail(pool, zspage, obj, &v)) {
		errno = EINVAL;
		return NULL;
	}
	int direct = v.seg[0].off + mem_len <= pool->page_size;
	if (mem_len > v.cap || (!local_copy && !direct)) {
		unpin_segments(zspage, &v);
		errno = EINVAL;
		return NULL;
	}
	if (direct)
		return page_addr(pool, v.seg[0].pfn) + v.seg[0].off;
	segs_read(pool, &v, local_copy, mem_len);
	return local_copy;
}

void *zs_obj_read_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			void *local_copy)
{
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (zs_unlikely(!zspage)) {
		errno = EINVAL;
		return NULL;
	}
	if (zs_unlikely(zspage_tail(zspage)))
		return read_begin_packed(pool, zspage, obj, mem_len, local_copy);
	struct size_class *class = zspage_class(pool, zspage);
	unsigned cap, off = payload_offset(pool, class, obj, &cap);
	if (zs_unlikely(mem_len > cap || (!local_copy && off + mem_len > pool->page_size))) {
		zs_zspage_read_unlock(&zspage->lock);
		errno = EINVAL;
		return NULL;
	}
	zs_pfn_t pfn = obj_to_pfn(obj);
	char *addr = page_addr(pool, pfn);
	if (zs_likely(off + mem_len <= pool->page_size))
		return addr + off;
	/* The object spans pages: stitch it together in the caller's buffer. */
	span_read(pool, pfn, off, local_copy, mem_len);
	return local_copy;
}

void zs_obj_read_end(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem)
{
	(void)mem_len;
	(void)mem;
	unpin_object(pool, handle);
}

/* The pieces of len bytes from (pfn, off) along a chain, appended at sg[n]; the new n or -1. */
static int span_pieces(const struct zs_pool *pool, zs_pfn_t pfn, unsigned off, size_t len,
		       struct zs_obj_piece *sg, int n, int nr_sg)
{
	size_t P = pool->page_size;
	while (len) {
		if (n >= nr_sg)
			return -1;
		size_t piece = P - off < len ? P - off : len;
		sg[n].addr = page_addr(pool, pfn) + off;
		sg[n++].len = piece;
		len -= piece;
		off = 0;
		if (len)
			pfn = page_desc(pool, pfn)->next;
	}
	return n;
}

int zs_obj_read_sgv_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			  struct zs_obj_piece *sg, int nr_sg)
{
	if (zs_unlikely(!mem_len || nr_sg < 1))
		return -EINVAL;
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (zs_unlikely(!zspage))
		return -EINVAL;
	struct obj_segs v;
	if (zs_unlikely(zspage_tail(zspage))) {
		if (pin_tail(pool, zspage, obj, &v))
			return -EINVAL;
	} else {
		obj_segment(pool, zspage, obj, &v, 0);
		v.cap = v.seg[0].cap;
		v.tail_zspage = NULL;
	}
	if (zs_unlikely(mem_len > v.cap)) {
		unpin_segments(zspage, &v);
		return -EINVAL;
	}
	size_t first = mem_len < v.seg[0].cap ? mem_len : v.seg[0].cap;
	int n = span_pieces(pool, v.seg[0].pfn, v.seg[0].off, first, sg, 0, nr_sg);
	if (n > 0 && first < mem_len)
		n = span_pieces(pool, v.seg[1].pfn, v.seg[1].off, mem_len - first, sg, n, nr_sg);
	if (zs_unlikely(n < 0)) { /* more pieces than the caller has room for */
		unpin_segments(zspage, &v);
		return -EINVAL;
	}
	return n;
}

int zs_obj_read_sg_begin(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 struct zs_obj_piece sg[2])
{
	return zs_obj_read_sgv_begin(pool, handle, mem_len, sg, 2);
}

void zs_obj_read_sg_end(struct zs_pool *pool, unsigned long handle)
{
	unpin_object(pool, handle);
}

/* zs_obj_write of an object with a packed tail (the head is pinned). */
static __attribute__((noinline)) int write_packed(struct zs_pool *pool, struct zspage *zspage,
						  unsigned long obj, const void *src, size_t len)
{
	struct obj_segs v;
	if (pin_tail(pool, zspage, obj, &v))
		return -EINVAL;
	int rc = len > v.cap ? -EINVAL : 0;
	if (!rc)
		segs_write(pool, &v, src, len);
	unpin_segments(zspage, &v);
	return rc;
}

int zs_obj_write(struct zs_pool *pool, unsigned long handle, const void *src, size_t len)
{
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (zs_unlikely(!zspage))
		return -EINVAL;
	if (zs_unlikely(zspage_tail(zspage)))
		return write_packed(pool, zspage, obj, src, len);
	struct size_class *class = zspage_class(pool, zspage);
	unsigned cap, off = payload_offset(pool, class, obj, &cap);
	if (zs_unlikely(len > cap)) {
		zs_zspage_read_unlock(&zspage->lock);
		return -EINVAL;
	}
	span_write(pool, obj_to_pfn(obj), off, src, len);
	zs_zspage_read_unlock(&zspage->lock);
	return 0;
}

/* ---- legacy map/unmap (pre seed 004) ---- */

/* The kernel's per-CPU mapping area, per thread here; one mapping at a time. */
struct mapping_area {
	char *buf;       /* grown to the largest object mapped (a page, or a multi-page object) */
	size_t cap;
	enum zs_mapmode mode;
	int spanning;
	const struct zs_pool *pool; /* the mapping in force (checked mode matches unmap to it) */
	unsigned long handle;       /* 0: nothing mapped */
};
static pthread_key_t map_key;
static pthread_once_t map_key_once = PTHREAD_ONCE_INIT;

static void mapping_area_free(void *p)
{
	struct mapping_area *a = p;
	free(a->buf);
	free(a);
}

static void map_key_create(void)
{
	pthread_key_create(&map_key, mapping_area_free);
}

static struct mapping_area *get_mapping_area(void)
{
	pthread_once(&map_key_once, map_key_create);
	struct mapping_area *a = pthread_getspecific(map_key);
	if (!a) {
		a = malloc(sizeof(*a));
		if (a) {
			a->pool = NULL;
			a->handle = 0;
			a->cap = 65536; /* largest pool page */
			a->buf = malloc(a->cap);
			if (!a->buf) {
				free(a);
				return NULL;
			}
		}
		if (a && pthread_setspecific(map_key, a)) {
			mapping_area_free(a);
			a = NULL;
		}
	}
	return a;
}

void *zs_map_object(struct zs_pool *pool, unsigned long handle, enum zs_mapmode mm)
{
	struct mapping_area *area = get_mapping_area();
	if (!area) {
		errno = ENOMEM;
		return NULL;
	}
	if (pool->cfg.checked && area->handle) {
		errno = EBUSY; /* one mapping per thread at a time */
		return NULL;
	}
	/* Room for the largest object: whole pages, a packed tail's slot included. */
	size_t need = pool->max_object_size;
	if (zs_unlikely(need > area->cap)) {
		need = (need + pool->page_size - 1) & ~(size_t)(pool->page_size - 1);
		char *nb = realloc(area->buf, need);
		if (!nb) {
			errno = ENOMEM;
			return NULL;
		}
		area->buf = nb;
		area->cap = need;
	}
	unsigned long obj;
	struct zspage *zspage = pin_object(pool, handle, &obj);
	if (!zspage) {
		errno = EINVAL;
		return NULL;
	}
	area->mode = mm;
	area->pool = pool;
	area->handle = handle;
	if (zs_unlikely(zspage_tail(zspage))) {
		struct obj_segs v;
		if (pin_tail(pool, zspage, obj, &v)) {
			area->handle = 0;
			errno = EINVAL;
			return NULL;
		}
		area->spanning = 1;
		if (mm != ZS_MM_WO)
			segs_read(pool, &v, area->buf, v.cap);
		return area->buf;
	}
	struct size_class *class = zspage_class(pool, zspage);
	zs_pfn_t pfn = obj_to_pfn(obj);
	unsigned off = obj_page_offset(pool, class->size, obj_to_idx(obj));
	unsigned hdr = class->huge ? 0 : ZS_HANDLE_SIZE;
	char *addr = page_addr(pool, pfn);
	/* The old API decided "spans" from the whole slot (header included), as the kernel did. */
	if (off + class->size <= pool->page_size) {
		area->spanning = 0;
		return addr + off + hdr;
	}
	area->spanning = 1;
	if (mm != ZS_MM_WO)
		span_read(pool, pfn, off + hdr, area->buf, class->size - hdr);
	return area->buf;
}

void zs_unmap_object(struct zs_pool *pool, unsigned long handle)
{
	struct mapping_area *area = get_mapping_area();
	unsigned long obj;
	struct zspage *zspage;
	if (zs_unlikely(pool->cfg.checked)) {
		/* Only the mapping this thread made: a failed or foreign map leaves nothing to undo. */
		if (!area || area->handle != handle || area->pool != pool)
			return;
		zspage = pinned_zspage_checked(pool, handle, &obj);
		area->handle = 0;
		if (!zspage)
			return;
	} else {
		obj = handle_to_obj(handle);
		zspage = obj_to_zspage(pool, obj);
		if (area)
			area->handle = 0;
	}
	unsigned long tail = zspage_tail(zspage);
	if (area && area->spanning && area->mode != ZS_MM_RO) {
		/* Still pinned by the map, so the object is where the map found it. */
		struct obj_segs v;
		memset(&v, 0, sizeof(v)); /* no tail: seg[1] is never read (said for gcc -O3) */
		obj_segment(pool, zspage, obj, &v, 0);
		v.cap = v.seg[0].cap;
		if (tail) {
			unsigned long tobj = handle_to_obj(tail);
			obj_segment(pool, obj_to_zspage(pool, tobj), tobj, &v, 1);
			v.cap += v.seg[1].cap;
		}
		segs_write(pool, &v, area->buf, v.cap);
	}
	if (tail)
		unpin_object(pool, tail);
	if (pool->cfg.checked)
		zspage_read_unlock_checked(&zspage->lock);
	else
		zs_zspage_read_unlock(&zspage->lock);
}

/* ---- pool properties ---- */

size_t zs_pool_page_size(const struct zs_pool *pool)
{
	return pool->page_size;
}

const struct zs_pool_config *zs_pool_get_config(const struct zs_pool *pool)
{
	return &pool->cfg;
}

void zs_pool_trim(struct zs_pool *pool)
{
	zs_handles_trim(pool, 1);
	zs_pages_trim(pool->pages);
}

void zs_pool_fail_pages(struct zs_pool *pool, uint64_t after, uint64_t count)
{
	if (after == UINT64_MAX)
		zs_pages_fail_reset(pool->pages);
	else
		zs_pages_fail_after(pool->pages, after, count);
}
