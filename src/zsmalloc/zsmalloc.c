/*
 * zsmalloc core: pools and allocation.
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
 *    off (lock.h, write_lock): a read-lock holder may be waiting for a
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
 *       producer's wake-up; nothing nests inside.  deferred_destroy
 *       drops it before it joins the worker, and joins holding no lock of
 *       rank 210 or above (checked): the worker takes those.
 *   202 deferred fork gate (src/common/fork.c)  the worker holds it across a
 *       batch; queue create/destroy and a fork's prepare handler take it;
 *       consume_lock nests inside.
 *   205 compaction flag (compaction_in_progress, compact.c)  tried: a
 *       second zs_compact or step returns at once, recorded, not checked;
 *       the blob store's steps wait for it, checked.  zs_compact must be entered holding no lock
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
 *       checks it).  handles_trim holds all 16, in array (= address)
 *       order, the one place one rank nests.
 *   241 handle_free_lock  inside a shard lock (give_batch, take_batch, trim).
 *   242 handle_chunks_lock (a mutex)  inside the shard lock (refill_shard,
 *       after its page allocation) or every handle lock (trim); inside it
 *       the handle page provider (pages_free, trim).
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
 *     checked: rw_held_by_me asks this thread's held list) and then
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
 * This file: pool creation and zs_malloc.  Object access (read, write, the
 * scatter-gather reads, the legacy map/unmap) lives in access.c, freeing
 * (and the free modes) in free.c, zspage lists and object slots in zspage.c,
 * compaction in compact.c, deferred free in deferred.c, the class table and
 * chain/delta policies in class.c, handles in handle.c, statistics and the
 * class table print in stats.c.  Calls run one way: zsmalloc.c -> deferred.c
 * -> free.c -> zspage.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/err.h"
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
	cfg->autocompact_ms = ZS_AUTOCOMPACT_DEFAULT_MS;
}

/*
 * The ranges documented in zsmalloc.h; defaults (0) already filled in.  A
 * refusal names the field and its range in err (set_err skips a NULL err),
 * so every caller (the pool, the backend, the zram store) reports the same line.
 */
#define REFUSE(...) do { set_err(err, err_len, __VA_ARGS__); return 0; } while (0)
static int config_valid(const struct zs_pool_config *c, char *err, size_t err_len)
{
	int bad;

	if (ZS_CONFIG_ABI_CHECK(c, &bad)) {
		config_abi_err(err, err_len, "zs_pool_config", c->struct_size, sizeof(*c), bad);
		return 0;
	}
	if (!zs_page_size_valid(c->page_size))
		REFUSE("zs_pool_config.page_size %zu: must be a power of two in 4096..65536",
		       c->page_size);
	if (c->max_chain < 1 || c->max_chain > ZS_MAX_CHAIN)
		REFUSE("zs_pool_config.max_chain %d: must be 1..%d", (int)c->max_chain,
		       (int)ZS_MAX_CHAIN);
	if (c->class_delta && (c->class_delta < 8 || c->class_delta % 8 ||
			       c->class_delta > c->page_size))
		REFUSE("zs_pool_config.class_delta %u: must be 0 or a multiple of 8 in 8..page_size",
		       (unsigned)c->class_delta);
	/* Enums are compared unsigned so a negative value cast in is caught too. */
	if ((unsigned)c->free_mode >= ZS_FREE_MODE_COUNT)
		REFUSE("zs_pool_config.free_mode %d: must be 0..%d", (int)c->free_mode,
		       ZS_FREE_MODE_COUNT - 1);
	if ((unsigned)c->chain_policy >= ZS_CHAIN_POLICY_COUNT)
		REFUSE("zs_pool_config.chain_policy %d: must be 0..%d", (int)c->chain_policy,
		       ZS_CHAIN_POLICY_COUNT - 1);
	if (c->checked != 0 && c->checked != 1)
		REFUSE("zs_pool_config.checked %d: must be 0 or 1", c->checked);
	if (c->fit_zspages != 0 && c->fit_zspages != 1)
		REFUSE("zs_pool_config.fit_zspages %d: must be 0 or 1", c->fit_zspages);
	if (c->autocompact_ms < 0 || c->autocompact_ms > 3600000)
		REFUSE("zs_pool_config.autocompact_ms %d: must be 0..3600000", (int)c->autocompact_ms);
	if (c->autocompact_pct > 1000)
		REFUSE("zs_pool_config.autocompact_pct %u: must be 0..1000", (unsigned)c->autocompact_pct);
	if (c->autocompact_min_bytes > ((size_t)1 << 40))
		REFUSE("zs_pool_config.autocompact_min_bytes %zu: must be 0..2^40", (size_t)c->autocompact_min_bytes);
	if (c->class_shards > ZS_MAX_CLASS_SHARDS && c->class_shards != ZS_CLASS_SHARDS_AUTO)
		REFUSE("zs_pool_config.class_shards %u: must be 0..%u or ZS_CLASS_SHARDS_AUTO",
		       (unsigned)c->class_shards, (unsigned)ZS_MAX_CLASS_SHARDS);
	if (c->deferred_worker < -1 || c->deferred_worker > 1)
		REFUSE("zs_pool_config.deferred_worker %d: must be -1, 0 or 1", c->deferred_worker);
	if (c->deferred_capacity > ZS_MAX_DEFERRED_CAPACITY)
		REFUSE("zs_pool_config.deferred_capacity %zu: must be 0..%zu",
		       (size_t)c->deferred_capacity, (size_t)ZS_MAX_DEFERRED_CAPACITY);
	if (c->max_object_size &&
	    (c->max_object_size < c->page_size ||
	     c->max_object_size > (size_t)ZS_MAX_OBJECT_PAGES * c->page_size))
		REFUSE("zs_pool_config.max_object_size %zu: must be 0 or page_size..%zu",
		       (size_t)c->max_object_size, (size_t)ZS_MAX_OBJECT_PAGES * c->page_size);
	if (c->max_pages > ZS_PAGES_MAX_SPAN / c->page_size)
		REFUSE("zs_pool_config.max_pages %zu: must be 0..%zu", (size_t)c->max_pages,
		       (size_t)(ZS_PAGES_MAX_SPAN / c->page_size));
	if (c->page_cache_pages != ZS_PAGES_NO_CACHE &&
	    c->page_cache_pages > ZS_PAGES_MAX_SPAN / c->page_size)
		REFUSE("zs_pool_config.page_cache_pages %zu: must be 0..%zu or ZS_PAGES_NO_CACHE",
		       (size_t)c->page_cache_pages, (size_t)(ZS_PAGES_MAX_SPAN / c->page_size));
	/* The page provider refuses it too; checked here so pool_config_check sees it. */
	if (c->page_cache_decay_ms > ZS_PAGES_MAX_DECAY_MS &&
	    c->page_cache_decay_ms != ZS_PAGES_DECAY_NEVER)
		REFUSE("zs_pool_config.page_cache_decay_ms %lu: must be 0..%lu or "
		       "ZS_PAGES_DECAY_NEVER", (unsigned long)c->page_cache_decay_ms,
		       (unsigned long)ZS_PAGES_MAX_DECAY_MS);
	return 1;
}
#undef REFUSE

/* The two fields whose 0 zs_pool_create replaces before checking the ranges. */
static void config_defaults(struct zs_pool_config *c)
{
	if (!c->page_size)
		c->page_size = ZS_PAGE_SIZE_DEFAULT;
	if (!c->max_chain)
		c->max_chain = 8;
}

int pool_config_check(const struct zs_pool_config *user_cfg, char *err, size_t err_len)
{
	struct zs_pool_config cfg = *user_cfg;
	struct zs_class_shape shape;
	config_defaults(&cfg);
	if (!config_valid(&cfg, err, err_len))
		return -EINVAL;
	int rc = classes_shape(&cfg, (unsigned)cfg.page_size, &shape);
	if (rc)
		set_err(err, err_len, "zs_pool_config: class_delta %u, class_shards %u, page_size %zu "
			"and max_object_size %zu give no class table that fits (fewer shards or a "
			"larger class_delta)", (unsigned)cfg.class_delta, (unsigned)cfg.class_shards,
			cfg.page_size, (size_t)cfg.max_object_size);
	return rc;
}

/* The one exit of a refused or failed create: *out NULL, errno and the return agree. */
static int pool_fail(struct zs_pool **out, int rc)
{
	*out = NULL;
	errno = -rc;
	return rc;
}

int zs_pool_create(const struct zs_pool_config *user_cfg, struct zs_pool **out, char *err,
		   size_t err_len)
{
	struct zs_pool_config cfg;
	create_begin(err, err_len);
	if (!out) {
		set_err(err, err_len, "zs_pool_create: out is NULL");
		errno = EINVAL;
		return -EINVAL;
	}
	if (user_cfg)
		cfg = *user_cfg;
	else
		zs_pool_config_init(&cfg);
	config_defaults(&cfg);
	/* The ranges and the class table's shape, so a table that cannot be built is refused
	 * with its reason, not found later as a bare -EINVAL from classes_build. */
	if (pool_config_check(&cfg, err, err_len))
		return pool_fail(out, -EINVAL);
	struct zs_pool *pool = aligned_alloc(64, sizeof(*pool));
	if (!pool) {
		set_err(err, err_len, "zs_pool_create: out of memory for the pool");
		return pool_fail(out, -ENOMEM);
	}
	memset(pool, 0, sizeof(*pool));
	pool->cfg = cfg;
	snprintf(pool->name, sizeof(pool->name), "%s", cfg.name ? cfg.name : "zs");
	pool->cfg.name = pool->name;
	pool->page_size = (unsigned)cfg.page_size;
	pool->page_shift = (unsigned)__builtin_ctz(pool->page_size);
	pool->page_mask = pool->page_size - 1;
	pool->max_object_size = cfg.max_object_size ? cfg.max_object_size : pool->page_size;
	rw_init(&pool->lock, cfg.free_mode != ZS_FREE_POOL_LOCK);
	for (int i = 0; i < ZS_RW_SHARDS; i++)
		atomic_init(&pool->pages_allocated[i].n, 0);
	atomic_init(&pool->pages_compacted, 0);
	atomic_init(&pool->nr_tails, 0);
	atomic_init(&pool->compaction_in_progress, 0);
	deferred_init(pool); /* nothing allocated until the first zs_free_deferred */
	heaps_pool_init(pool);

	int rc = classes_build(pool);
	if (!rc)
		rc = park_init(pool);
	if (!rc) {
		autocompact_init(pool);
		struct zs_pages_config pc = { .page_size = cfg.page_size, .max_pages = cfg.max_pages,
					      .cache_pages = cfg.page_cache_pages,
					      .decay_ms = cfg.page_cache_decay_ms,
					      .park_chains = pool->nr_shards > 1,
					      .reclaim = pool->park ? park_reclaim : NULL,
					      .reclaim_ctx = pool,
					      .idle_due = cfg.autocompact_ms ? autocompact_due : NULL,
					      .idle_work = cfg.autocompact_ms ? autocompact_work : NULL,
					      .idle_ctx = pool };
		errno = 0;
		pool->pages = pages_create(&pc);
		rc = pool->pages ? handles_init(pool) : errno ? -errno : -ENOMEM;
		/* A provider that cannot return them (its own bound, no decay) gets no parked zspages. */
		if (!rc && pool->park && !pages_parks(pool->pages))
			park_destroy(pool);
		if (!rc)
			autocompact_started(pool);
	}
	if (rc) {
		deferred_destroy(pool);
		handles_destroy(pool);
		if (pool->pages)
			pages_destroy(pool->pages);
		park_destroy(pool);
		classes_free(pool);
		free(pool);
		set_err(err, err_len, "zs_pool_create: %s (class table, page provider or handle "
			"table)", strerror(-rc));
		return pool_fail(out, rc);
	}
	*out = pool;
	return 0;
}

void zs_destroy_pool(struct zs_pool *pool)
{
	if (!pool)
		return;
	autocompact_stop(pool); /* first: it compacts from the purge thread */
	deferred_destroy(pool);
	heaps_pool_gone(pool);
	handles_destroy(pool);
	pages_destroy(pool->pages); /* first: the purge thread's hook reads the classes */
	park_destroy(pool);
	classes_free(pool);
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
static inline __attribute__((always_inline)) unsigned long place(struct zs_pool *pool,
								 struct size_class *class,
								 struct zspage *zspage,
								 unsigned long handle)
{
	unsigned long obj = obj_malloc(pool, zspage, handle);
	fix_fullness_group(class, zspage);
	record_obj(handle, obj);
	class->stats[ZS_OBJS_INUSE]++;
	return obj;
}

/*
 * zs_malloc_write, class lock held: the new object's zspage is pinned
 * (a write pin, lock.h; the zspage read lock where the thread has no pin
 * slot) before the class lock goes, so compaction (which moves objects
 * only under their class lock, and skips a pinned or read-locked zspage)
 * cannot move the object before its contents are in; the copy runs with no class lock held
 * (the source may fault, into a region whose handler allocates from this
 * class).  zs_obj_write's pin without the pool lock and the handle lookup,
 * which a handle no caller has seen yet does not need.
 */
static inline __attribute__((always_inline)) void write_new(struct zs_pool *pool,
							    struct size_class *class,
							    struct zspage *zspage,
							    unsigned long obj,
							    const void *src, size_t len)
{
	unsigned off = obj_page_offset(pool, class->size, obj_to_idx(obj));
	if (!class->huge)
		off += ZS_HANDLE_SIZE;
	assert_internal(len + (class->huge ? 0 : ZS_HANDLE_SIZE) <= class->size);
	struct zs_wpin *pin = wpin_take(zspage);
	if (unlikely(!pin))
		zspage_read_lock(&zspage->lock);
	spin_unlock(&class->lock);
	span_write(pool, obj_to_pfn(obj), off, src, len);
	if (likely(pin))
		wpin_drop(pin);
	else
		zspage_read_unlock(&zspage->lock);
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
	unsigned n = (unsigned)pool->nr_classes;
	struct size_class *first = &pool->classes[class->enc % n]; /* copy 0 of this class */
	for (unsigned s = 0; s < pool->nr_shards; s++) {
		struct size_class *c = first + (size_t)s * n;
		if (c == class || !class_live(c))
			continue;
		spin_lock(&c->lock);
		struct zspage *zspage = find_get_zspage(c);
		if (zspage) {
			place(pool, c, zspage, handle);
			spin_unlock(&c->lock);
			return 0;
		}
		spin_unlock(&c->lock);
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
	  unsigned long tail, int is_tail, const void *src, size_t len)
{
	spin_lock(&class->lock);
	struct zspage *zspage = find_get_zspage(class);
	if (unlikely(is_tail) && !zspage) {
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
			spin_unlock(&class->lock);
			return -EAGAIN;
		}
		class->tails_declined = 0;
	}
	if (likely(zspage)) {
		unsigned long obj = place(pool, class, zspage, handle);
		if (src)
			write_new(pool, class, zspage, obj, src, len);
		else
			spin_unlock(&class->lock);
		return 0;
	}
	if (pool->park && (zspage = unpark_zspage(pool, class)))
		goto fresh; /* its pages, chain and owners stayed: no provider call (park.c) */
	spin_unlock(&class->lock);

	/* Like the kernel, allocate the pages with no lock held. */
	zspage = alloc_zspage(pool, class, class->pages_per_zspage, class->objs_per_zspage);
	if (!zspage) {
		if (pool->nr_shards == 1 || tail || alloc_other_copy(pool, class, handle))
			return -ENOMEM;
		/* Placed in another copy: written through zs_obj_write, which cannot refuse
		 * a handle just recorded and a length its class was picked for. */
		if (src) {
			int rc = zs_obj_write(pool, handle, src, len);
			assert_internal(!rc);
			(void)rc;
		}
		return 0;
	}
	spin_lock(&class->lock);
fresh:;
	unsigned long obj = obj_malloc(pool, zspage, handle);
	zspage->tail = tail; /* one-object zspages only: class_single, so never a list link */
	insert_zspage(class, zspage, get_fullness_group(class, zspage));
	record_obj(handle, obj);
	pool_pages_add(pool, (long)class->pages_per_zspage);
	class->stats[ZS_OBJS_ALLOCATED] += class->objs_per_zspage;
	class->stats[ZS_OBJS_INUSE]++;
	if (src)
		write_new(pool, class, zspage, obj, src, len);
	else
		spin_unlock(&class->lock);
	return 0;
}

/* A multi-page object: allocated and written as zs_malloc + zs_obj_write do it. */
static __attribute__((noinline)) unsigned long malloc_write_large(struct zs_pool *pool,
								  const void *src, size_t len);

/* zs_malloc out of memory (below): free the deferred queue and try once more. */
static __attribute__((noinline)) unsigned long malloc_failed(struct zs_pool *pool, size_t size,
							     int retried, const void *src);

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
		tc = alloc_class(pool, size_to_class(pool, rest + ZS_HANDLE_SIZE));
	/* A one-object class (chain 1 makes those of sizes past half a page) would
	 * spend a page on the tail anyway: keep the last page whole then. */
	if (tc && !class_single(tc)) {
		tail = cache_alloc_handle(pool);
		if (unlikely(!tail))
			return malloc_failed(pool, size, retried, NULL);
		tail |= HANDLE_INTERNAL_BIT; /* checked mode refuses it from a caller */
		int rc = alloc_obj(pool, tc, tail, 0, 1, NULL, 0);
		if (rc) {
			cache_free_handle(pool, tail);
			if (rc != -EAGAIN)
				return malloc_failed(pool, size, retried, NULL);
			tail = 0; /* declined: the object takes its last page whole */
		} else {
			slot -= rest;
			/* counted while it exists: free_tail uncounts it, on failure below too */
			atomic_fetch_add_explicit(&pool->nr_tails, 1, memory_order_relaxed);
		}
	}
	unsigned long handle = cache_alloc_handle(pool);
	if (likely(handle) &&
	    likely(!alloc_obj(pool, alloc_class(pool, size_to_class(pool, slot)), handle,
				 tail, 0, NULL, 0)))
		return handle;
	if (handle)
		cache_free_handle(pool, handle);
	if (tail)
		free_tail(pool, tail);
	return malloc_failed(pool, size, retried, NULL);
}

/* size 1..page: one slot of the class the size table names; src: its contents (zs_malloc_write). */
static inline __attribute__((always_inline)) unsigned long malloc_small(struct zs_pool *pool,
									size_t size, int retried,
									const void *src)
{
	unsigned long handle = cache_alloc_handle(pool);
	if (unlikely(!handle))
		return malloc_failed(pool, size, retried, src);
	/* size <= page: the table alone (size_to_class without its multi-page test). */
	int index = pool->size_lut[(size + ZS_HANDLE_SIZE + 7) >> 3];
	if (unlikely(alloc_obj(pool, alloc_class(pool, index), handle, 0, 0, src, size))) {
		cache_free_handle(pool, handle);
		return malloc_failed(pool, size, retried, src);
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
static unsigned long malloc_failed(struct zs_pool *pool, size_t size, int retried,
				   const void *src)
{
	if (retried)
		return (unsigned long)-ENOMEM;
	int again = 0;
	if (deferred_pending(pool)) {
		zs_free_deferred_flush(pool);
		again = 1;
	}
	/* Threads' owned zspages hold free slots, and other threads' frees waiting for their owner:
	 * back to their classes, those frees done (heaps.c). */
	if (pool->owned) {
		heaps_revoke_all(pool);
		again = 1;
	}
	/* Other classes' parked zspages hold pages this allocation could use (park.c). */
	if (park_release_all(pool))
		again = 1;
	if (!again)
		return (unsigned long)-ENOMEM;
	return size > pool->page_size ? malloc_large(pool, size, 1)
				      : malloc_small(pool, size, 1, src);
}

/* An owned pool's object the heap could not place: the class path, or a multi-page one. */
static __attribute__((noinline)) unsigned long malloc_off_slow(struct zs_pool *pool, size_t size,
							       const void *src)
{
	if (size > pool->page_size)
		return src ? malloc_write_large(pool, src, size) : malloc_large(pool, size, 0);
	return malloc_small(pool, size, 0, src);
}

/*
 * owned_place's copy, tail-called so that the placement saves no register:
 * only the pin lives across memcpy here (the last argument, so that memcpy's
 * are where it wants them), and the handle is read back from
 * the object's header before the pin drops (written before the copy, the
 * object pinned, so nothing else writes it until then).
 */
static __attribute__((noinline)) unsigned long owned_copy(char *dst, const void *src, size_t size,
							  struct zs_wpin *pin)
{
	unsigned long *hdr = (unsigned long *)((char *)memcpy(dst, src, size) - ZS_HANDLE_SIZE);
	/* Read while pinned: once the pin drops, compaction may move the object and reuse the slot. */
	unsigned long handle = *hdr & ~(unsigned long)OBJ_ALLOCATED_TAG;
	wpin_drop(pin);
	return handle;
}

/* The same across two pages of its zspage (a third of the objects, at sizes to a page). */
static __attribute__((noinline)) unsigned long owned_copy_split(struct zs_wpin *pin, char *dst,
								const void *src, size_t size,
								char *next, size_t first)
{
	memcpy(dst, src, first);
	memcpy(next, (const char *)src + first, size - first);
	unsigned long handle = *(unsigned long *)(dst - ZS_HANDLE_SIZE) & ~(unsigned long)OBJ_ALLOCATED_TAG;
	wpin_drop(pin);
	return handle;
}

/*
 * The owner, its heap h: h's pin is this thread's slot under the number it
 * has now, counted in wpins_hi (which only grows), or none past the table.
 * Only the owner reads or writes h->wpin, so no revoker sees it change.
 */
static void wpin_own(struct zs_heap *h)
{
	unsigned ti = thread_index();
	if (ti >= ZS_WPIN_SLOTS)
		return; /* h->wpin stays wpin_none (the thread's exit put it back with its
			   number): the read-lock path */
	if (atomic_load_explicit(&wpins_hi, memory_order_relaxed) <= ti)
		wpin_raise(ti);
	h->wpin = &wpins[ti];
}

/*
 * owned_place without a pin slot (a thread numbered past the table, a call
 * nested in this thread's copy, or a slot not yet counted in wpins_hi): the
 * zspage read lock holds the object
 * in place instead, and the copy goes through zs_obj_write's path (the
 * object is recorded and its zspage read-locked, so it cannot move).
 */
static __attribute__((noinline)) unsigned long owned_copy_locked(struct zs_heap *h, struct zspage *z,
								  unsigned long handle, const void *src,
								  size_t size)
{
	struct zs_pool *pool = h->pool;
	/* A heap first looked up by a free, or a thread numbered anew: its slot for the next ones. */
	wpin_own(h);
	zspage_read_lock(&z->lock);
	heap_exit(h);
	unsigned long obj = handle_to_obj(handle);
	span_write(pool, obj_to_pfn(obj),
		   obj_page_offset(pool, zspage_class(pool, z)->size, obj_to_idx(obj)) + ZS_HANDLE_SIZE, src,
		   size);
	zspage_read_unlock(&z->lock);
	return handle;
}

/*
 * Owned pools (owned.c), in an operation, the class's current zspage with
 * a free slot and a handle in the cache: the object takes the next free
 * slot and the handle; the copy runs after heap_exit, under a write pin
 * set before it, so that a revoker that takes the zspage back sees the pin
 * and a compactor does not move the object before its contents are in.
 * The copy must not run in the operation: the source may fault, into a
 * region whose handler compacts this pool, and the revocation would wait
 * for this thread.
 */
/*
 * owned_place's end, once the slot is chosen: the header, the handle, and
 * the copy.  first: the bytes the slot holds before its page ends
 * ((size_t)-1: the object fits in its page, known to the fresh slot's
 * common case, so that copy of this tail has no split test); pi: the
 * slot's chain page.
 */
static inline __attribute__((always_inline)) unsigned long
owned_store(struct zs_heap *h, struct zs_heap_class *c, struct zspage *z, unsigned long handle,
	    unsigned long obj, char *a, unsigned pi, size_t first, size_t size, const void *src)
{
	*(unsigned long *)a = handle | OBJ_ALLOCATED_TAG;
	z->inuse++;
	record_obj(handle, obj);
	if (!src) {
		heap_exit(h);
		return handle;
	}
	/* This thread's pin slot, taken and counted in wpins_hi by wpin_own (reset at the
	 * thread's exit before its number goes back); a pin already set is a call nested in
	 * this thread's copy (a signal handler), or none to be had (wpin_none). */
	struct zs_wpin *pin = h->wpin;
	if (unlikely(atomic_load_explicit(&pin->z, memory_order_relaxed)))
		return owned_copy_locked(h, z, handle, src, size);
	atomic_store_explicit(&pin->z, z, memory_order_relaxed);
	/* A slot of a small class ends in the chain's next page at the latest; the header never
	 * crosses (slot sizes are multiples of 8). */
	if (likely(size <= first)) {
		heap_exit(h);
		return owned_copy(a + ZS_HANDLE_SIZE, src, size, pin);
	}
	char *next = c->addr[pi + 1]; /* heap state: read before heap_exit */
	heap_exit(h);
	/* The chain's next page right after this one (pages taken as a run): one copy. */
	if (next == a + ZS_HANDLE_SIZE + first)
		return owned_copy(a + ZS_HANDLE_SIZE, src, size, pin);
	return owned_copy_split(pin, a + ZS_HANDLE_SIZE, src, size, next, first);
}

static inline __attribute__((always_inline)) unsigned long
owned_place_all(struct zs_heap *h, struct zs_heap_class *c, struct zspage *z, size_t size,
		const void *src)
{
	unsigned idx = z->untouched;
	/* The handle after the zspage's words are read: the pop's stores could alias them. */
	int fresh = idx < z->objs;
	unsigned long handle = heap_handle_pop(h);
	if (likely(fresh)) {
		/* A fresh slot, from the cursor set_cur put on it (owned.c): untouched slots are
		 * taken in index order, so the next one begins where this one ends. */
		char *a = c->bnext;
		unsigned long obj = c->bbase | idx;
		__atomic_store_n(&z->untouched, idx + 1, __ATOMIC_RELAXED);
		char *n = a + c->size;
		c->bnext = n;
		if (likely(((uintptr_t)a ^ (uintptr_t)n) <= c->pmask))
			return owned_store(h, c, z, handle, obj, a, 0, (size_t)-1, size, src);
		/* The slot ends at or past its page's end: the next one starts in a later page of
		 * the chain (pages are page-aligned, so the low bits are the offset).  Pages that
		 * are a run: n is its address already, its page's number d pages on, and the
		 * object whole in memory. */
		if (likely(c->flat)) {
			c->bbase += (((uintptr_t)n >> c->pshift) - ((uintptr_t)a >> c->pshift)) << OBJ_PFN_SHIFT;
			return owned_store(h, c, z, handle, obj, a, 0, (size_t)-1, size, src);
		}
		unsigned pi = c->bpi;
		unsigned long d = ((uintptr_t)a & c->pmask) + c->size;
		unsigned npi = pi + (unsigned)(d >> c->pshift);
		size_t first = c->pmask - ((uintptr_t)a & c->pmask) + 1 - ZS_HANDLE_SIZE;
		/* Past the chain's last page only after the zspage's last slot: nothing to put the
		 * cursor on then (the page is not cached). */
		if (idx + 1 < z->objs) {
			c->bpi = (uint8_t)npi;
			c->bnext = c->addr[npi] + (d & c->pmask);
			c->bbase = location_to_obj(c->pfn[npi], z->class_idx, 0);
		}
		return owned_store(h, c, z, handle, obj, a, pi, first, size, src);
	}
	/* A slot from the free list: where it lies, from the first page in a run (set_cur cached
	 * no other then), else from its own cached page. */
	idx = z->freeobj;
	unsigned long pos = (unsigned long)idx * c->size;
	unsigned pi = (unsigned)(pos >> c->pshift);
	unsigned off = (unsigned)pos & c->pmask;
	char *a;
	unsigned long obj;
	size_t first;
	if (c->flat) {
		a = c->addr[0] + pos;
		obj = location_to_obj(c->pfn[0] + pi, z->class_idx, idx);
		first = (size_t)-1;
	} else {
		a = c->addr[pi] + off;
		obj = location_to_obj(c->pfn[pi], z->class_idx, idx);
		first = c->pmask - off + 1 - ZS_HANDLE_SIZE;
	}
	z->freeobj = (uint32_t)(*(unsigned long *)a >> 1);
	return owned_store(h, c, z, handle, obj, a, pi, first, size, src);
}

/* owned_place's other cases, out of line so that its common one saves no register: an empty
 * handle cache too (tested beside the pop, so the count lives in a register only there). */
static __attribute__((noinline)) unsigned long owned_place_rare(struct zs_heap *h,
								struct zs_heap_class *c,
								struct zspage *z, size_t size,
								const void *src)
{
	if (unlikely(!h->hn) && !heap_handles_refill(h->pool, h)) {
		heap_exit(h);
		return malloc_off_slow(h->pool, size, src);
	}
	return owned_place_all(h, c, z, size, src);
}

/*
 * The placement's common case inline: a fresh slot whose object is whole in
 * memory (in its page, or its pages are a run).  The cursor may be stale
 * when no slot is fresh; it is not used then.
 */
static inline __attribute__((always_inline)) unsigned long
owned_place(struct zs_heap *h, struct zs_heap_class *c, struct zspage *z, size_t size, const void *src)
{
	unsigned idx = z->untouched;
	char *a = c->bnext;
	/* In integers: a stale cursor may be NULL (a current zspage never had a fresh slot). */
	uintptr_t x = (uintptr_t)a ^ ((uintptr_t)a + c->size);
	if (unlikely(idx >= z->objs || (x > c->pmask && !c->flat) || !h->hn))
		return owned_place_rare(h, c, z, size, src);
	char *n = a + c->size;
	unsigned long obj = c->bbase | idx;
	/* Read before the pop, whose store the compiler cannot tell from the cursor's words. */
	int cross = x > c->pmask;
	unsigned long handle = heap_handle_pop(h);
	__atomic_store_n(&z->untouched, idx + 1, __ATOMIC_RELAXED);
	c->bnext = n;
	if (cross) /* the next slot's page, in the run */
		c->bbase += (((uintptr_t)n >> c->pshift) - ((uintptr_t)a >> c->pshift)) << OBJ_PFN_SHIFT;
	return owned_store(h, c, z, handle, obj, a, 0, (size_t)-1, size, src);
}

/*
 * malloc_owned's rare steps: no heap in slot 0 yet, a revoker at work or
 * HEAP_FENCED, an empty handle cache, a current zspage without a free slot.
 * Each ends in owned_place or the class path.
 */
static __attribute__((noinline)) unsigned long malloc_owned_slow(struct zs_pool *pool, size_t size,
								 const void *src, int entered)
{
	struct zs_heap *h = entered ? heap_tls.heap[0] : heap_mine(pool);
	if (!entered) {
		if (!h)
			return malloc_off_slow(pool, size, src);
		/* owned_place's pin slot: this thread's, counted in wpins_hi. */
		wpin_own(h);
		if (heap_enter_word(h) & HEAP_BUSY)
			return malloc_off_slow(pool, size, src); /* nested (heap_enter_word) */
	}
	if (atomic_load_explicit(&h->revoke, memory_order_acquire) && !heap_enter_slow(h))
		return malloc_off_slow(pool, size, src);
	int index = pool->size_lut[(size + ZS_HANDLE_SIZE + 7) >> 3];
	struct zs_heap_class *c = &h->cls[index];
	struct zspage *z = c->cur;
	if ((!h->hn && !heap_handles_refill(pool, h)) ||
	    (!(z && (z->untouched < z->objs || z->freeobj != FREEOBJ_END)) &&
	     !(z = heap_refill(pool, h, index)))) {
		heap_exit(h);
		return malloc_off_slow(pool, size, src);
	}
	return owned_place(h, c, z, size, src);
}

/*
 * Past zs_malloc's one size test: a multi-page object, or any size in an
 * owned pool.  One body, two copies (malloc_off for zs_malloc,
 * malloc_off_write for zs_malloc_write, src not NULL): each copy's
 * placement knows whether it copies, so neither tests src.
 */
static inline __attribute__((always_inline)) unsigned long malloc_off_body(struct zs_pool *pool,
									   size_t size,
									   const void *src)
{
	if (unlikely(size - 1 >= pool->page_size)) {
		if (!size)
			return (unsigned long)-EINVAL; /* zs_malloc_write's (zs_malloc refuses it first) */
		return malloc_off_slow(pool, size, src);
	}
	/* Owned pools: this thread's heap (owned.c), every rare case out of line. */
	if (unlikely(heap_tls.key[0] != pool->heap_key))
		return malloc_owned_slow(pool, size, src, 0);
	struct zs_heap *h = heap_tls.heap[0];
	unsigned w = heap_enter_word(h);
	if (unlikely(w)) /* nested, or heap_none: the class path; a revoker or fenced: entered */
		return w & HEAP_BUSY ? malloc_off_slow(pool, size, src)
				     : malloc_owned_slow(pool, size, src, 1);
	struct zs_heap_class *c = &h->cls[pool->size_lut[(size + ZS_HANDLE_SIZE + 7) >> 3]];
	struct zspage *z = c->cur;
	if (unlikely(!z || (z->untouched >= z->objs && z->freeobj == FREEOBJ_END)))
		return malloc_owned_slow(pool, size, src, 1);
	return owned_place(h, c, z, size, src);
}

static __attribute__((noinline)) unsigned long malloc_off(struct zs_pool *pool, size_t size)
{
	return malloc_off_body(pool, size, NULL);
}

static __attribute__((noinline, nonnull(2))) unsigned long malloc_off_write(struct zs_pool *pool,
									    const void *src,
									    size_t size)
{
	return malloc_off_body(pool, size, src);
}

unsigned long zs_malloc(struct zs_pool *pool, size_t size)
{
	if (unlikely(!size))
		return (unsigned long)-EINVAL;
	if (unlikely(size > pool->small_limit))
		return malloc_off(pool, size);
	return malloc_small(pool, size, 0, NULL);
}


static __attribute__((noinline)) unsigned long malloc_write_large(struct zs_pool *pool,
								  const void *src, size_t len)
{
	unsigned long h = malloc_large(pool, len, 0);
	if (!ZS_IS_ERR(h) && unlikely(zs_obj_write(pool, h, src, len))) {
		zs_free(pool, h); /* cannot happen: the handle is ours and len fits */
		return (unsigned long)-EINVAL;
	}
	return h;
}

/* zs_malloc_write in a pool without owned zspages. */
static __attribute__((noinline)) unsigned long malloc_write_class(struct zs_pool *pool,
								  const void *src, size_t len)
{
	if (unlikely(!len || !src))
		return (unsigned long)-EINVAL;
	return malloc_small(pool, len, 0, src);
}

/* Only tail calls here, so neither path pays for the other's registers. */
unsigned long zs_malloc_write(struct zs_pool *pool, const void *src, size_t len)
{
	if (unlikely(!src))
		return (unsigned long)-EINVAL;
	if (len > pool->small_limit) /* owned pools (small_limit 0), or a multi-page object */
		return malloc_off_write(pool, src, len);
	return malloc_write_class(pool, src, len);
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
	heaps_revoke_all(pool);
	handles_trim(pool, 1);
	park_release_all(pool);
	pages_trim(pool->pages);
}

void zs_pool_fail_pages(struct zs_pool *pool, uint64_t after, uint64_t count)
{
	if (after == UINT64_MAX)
		pages_fail_reset(pool->pages);
	else
		pages_fail_after(pool->pages, after, count);
}
