/*
 * Freeing: an object back onto its zspage's free list (zs_obj_free), the
 * class accounting (zs_free_locked), and zs_free in its lock modes.  An
 * emptied zspage leaves its list and gives its pages back through
 * zspage.c's primitives, which the owned-zspage heaps (owned.c), the
 * deferred worker and compaction use too, so the chain of calls runs one
 * way: zsmalloc.c -> deferred.c -> free.c -> owned.c -> zspage.c, with
 * nothing calling back up.
 */
#include <errno.h>

#include "zsmalloc/internal.h"

/* ---- primitives (class lock held) ---- */


/* ---- zs_free ---- */

/* Free with the class found through the page, under the pool lock (kernel today). */
static int free_pool_locked(struct zs_pool *pool, unsigned long handle, int checked)
{
	zs_read_lock(&pool->lock);
	unsigned long obj = handle_to_obj(handle);
	if (checked && validate_obj(pool, handle, obj)) {
		zs_read_unlock(&pool->lock);
		return -EINVAL;
	}
	struct zspage *zspage = obj_to_zspage(pool, obj);
	struct size_class *class = zspage_class(pool, zspage);
	zs_spin_lock(&class->lock);
	zs_read_unlock(&pool->lock);
	zs_assert_internal(handle_is_live(handle));
	struct zspage *empty = zs_free_locked(pool, class, obj);
	unsigned long tail = zspage_take_tail(empty);
	if (empty && !(pool->park && park_zspage(pool, class, empty)))
		free_zspage_pages(pool, empty);
	zs_spin_unlock(&class->lock);
	if (zs_unlikely(tail))
		free_tail(pool, tail);
	return 0;
}

/*
 * Seeds 000/001: the class from obj without the pool lock; obj re-read under
 * the class lock.  Inlined into zs_free (the application profile's free), as
 * the per-object steps below it are.
 */
static inline __attribute__((always_inline)) int free_class_index(struct zs_pool *pool,
								  unsigned long handle,
								  int checked, int unlocked)
{
	unsigned long obj = handle_to_obj(handle);
	struct size_class *class = &pool->classes[obj_to_class_idx(obj)];
	zs_spin_lock(&class->lock);
	obj = handle_to_obj(handle);
	if (checked && validate_obj(pool, handle, obj)) {
		zs_spin_unlock(&class->lock);
		return -EINVAL;
	}
	zs_assert_internal(handle_is_live(handle));
	struct zspage *empty = zs_free_locked_any(pool, class, obj);
	unsigned long tail = zspage_take_tail(empty);
	if (empty && pool->park && park_zspage(pool, class, empty))
		empty = NULL; /* kept whole in the class for its next zspage (park.c) */
	if (empty && !unlocked)
		free_zspage_pages(pool, empty);
	zs_spin_unlock(&class->lock);
	if (empty && unlocked == 1)
		free_zspage_pages(pool, empty);
	else if (empty && unlocked == 2)
		pool->defer_release(pool, empty); /* page-deferred: the worker releases it */
	if (zs_unlikely(tail))
		free_tail(pool, tail);
	return 0;
}

/*
 * A tail is an ordinary small object under a handle of its own that only
 * its head knows, freed unchecked (the head's handle was the one checked)
 * after the head's class lock is dropped (class locks never nest).  Always
 * through the class index, as the deferred batch frees: it needs no pool
 * lock, which the deferred worker must never take ("Lock order").
 */
void free_tail(struct zs_pool *pool, unsigned long tail)
{
	free_class_index(pool, tail, 0, 0);
	zs_handle_free(pool, tail);
	atomic_fetch_sub_explicit(&pool->nr_tails, 1, memory_order_relaxed);
}

/*
 * Owned pools (owned.c; never checked mode): an object in a zspage this
 * thread's heap owns goes back onto that zspage's free list and its handle
 * into the heap's cache, between heap_enter and heap_exit (no locked
 * instruction).  0: not ours (no heap, a revoker at work, or another
 * thread's or a class's zspage): the class path frees it.
 *
 * Only compaction moves objects (and writes the descriptors of the zspages
 * it makes), and it revokes this heap after raising its flag and before it
 * moves any: with the flag down inside heap_enter's window, the obj and the
 * page descriptor read here are current and stay so until heap_exit (the
 * revoker waits for it; the flag is read after revoke, so a compactor that
 * raised it before the barrier is seen).  With one running, the class path
 * re-reads the obj under the class lock.
 */
static inline __attribute__((always_inline)) int free_owned(struct zs_pool *pool,
							    unsigned long handle)
{
	struct zs_heap *h = zs_heap_mine(pool);
	if (zs_unlikely(!h))
		return 0;
	if (zs_unlikely(!heap_enter(h)))
		return 0;
	if (zs_unlikely(atomic_load_explicit(&pool->compaction_in_progress, memory_order_acquire))) {
		heap_exit(h);
		return 0;
	}
	unsigned long obj = handle_to_obj(handle);
	struct zspage *z = obj_to_zspage(pool, obj);
	if (zs_unlikely(zspage_heap_id(z) != h->id)) {
		heap_exit(h);
		return 0;
	}
	zs_heap_obj_free(pool, h, z, obj);
	zs_heap_handle_put(pool, h, handle);
	heap_exit(h);
	return 1;
}

/* An owned pool's object that is not this thread's: the class-index free, as zs_free's dispatch. */
static __attribute__((noinline)) int free_owned_slow(struct zs_pool *pool, unsigned long handle)
{
	int err = free_class_index(pool, handle, 0,
				   pool->cfg.free_mode == ZS_FREE_CLASS_INDEX_UNLOCKED);
	if (!err)
		zs_handle_free(pool, handle);
	return err;
}

static __attribute__((noinline)) int free_owned_pool(struct zs_pool *pool, unsigned long handle)
{
	if (zs_likely(free_owned(pool, handle)))
		return 0;
	return free_owned_slow(pool, handle);
}

int zs_free(struct zs_pool *pool, unsigned long handle)
{
	if (zs_unlikely(!handle || ZS_IS_ERR(handle)))
		return 0;
	/* free_flags: cfg.checked, or 2 in an owned pool (never checked), so the kernel path's one test stays one. */
	int checked = pool->free_flags;
	if (checked) {
		if (checked > 1)
			return free_owned_pool(pool, handle);
		unsigned long obj;
		if (handle_precheck(pool, handle, &obj))
			return -EINVAL;
	}
	int err, mode = pool->cfg.free_mode;
	if (zs_unlikely(mode == ZS_FREE_PERCPU_DEFERRED)) {
		err = pool->defer_push(pool, handle);
		if (err <= 0)
			return err; /* queued (the handle is freed by the drain), or refused */
	}
	/* unlocked: 0 pages freed under the class lock, 1 after it, 2 by the deferred worker */
	if (mode == ZS_FREE_POOL_LOCK)
		err = free_pool_locked(pool, handle, checked);
	else
		err = free_class_index(pool, handle, checked,
				       mode == ZS_FREE_CLASS_INDEX ? 0
				       : mode == ZS_FREE_PAGE_DEFERRED ? 2 : 1);
	if (!err)
		zs_handle_free(pool, handle);
	return err;
}
