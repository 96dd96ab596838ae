/*
 * Freeing: an object back onto its zspage's free list (obj_free), the
 * class accounting (free_locked), and zs_free in its lock modes.  An
 * emptied zspage leaves its list and gives its pages back through
 * zspage.c's primitives, which the owned-zspage heaps (heaps.c, owned.c),
 * the deferred worker and compaction use too, so the chain of calls runs
 * one way: zsmalloc.c -> deferred.c -> free.c -> heaps.c -> owned.c ->
 * zspage.c, with nothing calling back up.
 */
#include <errno.h>

#include "zsmalloc/internal.h"

/* ---- primitives (class lock held) ---- */


/* ---- zs_free ---- */

/* Free with the class found through the page, under the pool lock (kernel today). */
static int free_pool_locked(struct zs_pool *pool, unsigned long handle, int checked)
{
	read_lock(&pool->lock);
	unsigned long obj = handle_to_obj(handle);
	if (checked && validate_obj(pool, handle, obj)) {
		read_unlock(&pool->lock);
		return -EINVAL;
	}
	struct zspage *zspage = obj_to_zspage(pool, obj);
	struct size_class *class = zspage_class(pool, zspage);
	spin_lock(&class->lock);
	read_unlock(&pool->lock);
	assert_internal(handle_is_live(handle));
	struct zspage *empty = free_locked(pool, class, obj);
	unsigned long tail = zspage_take_tail(empty);
	if (empty && !(pool->park && park_zspage(pool, class, empty)))
		free_zspage_pages(pool, empty);
	spin_unlock(&class->lock);
	if (unlikely(tail))
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
	spin_lock(&class->lock);
	obj = handle_to_obj(handle);
	if (checked && validate_obj(pool, handle, obj)) {
		spin_unlock(&class->lock);
		return -EINVAL;
	}
	assert_internal(handle_is_live(handle));
	struct zspage *empty = free_locked_any(pool, class, obj);
	unsigned long tail = zspage_take_tail(empty);
	if (empty && pool->park && park_zspage(pool, class, empty))
		empty = NULL; /* kept whole in the class for its next zspage (park.c) */
	if (empty && !unlocked)
		free_zspage_pages(pool, empty);
	spin_unlock(&class->lock);
	if (empty && unlocked == 1)
		free_zspage_pages(pool, empty);
	else if (empty && unlocked == 2)
		pool->defer_release(pool, empty); /* page-deferred: the worker releases it */
	if (unlikely(tail))
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
	cache_free_handle(pool, tail);
	atomic_fetch_sub_explicit(&pool->nr_tails, 1, memory_order_relaxed);
}

/* An owned pool's object that is not this thread's: the class-index free, as zs_free's dispatch. */
static __attribute__((noinline)) int free_owned_slow(struct zs_pool *pool, unsigned long handle)
{
	int err = free_class_index(pool, handle, 0,
				   pool->cfg.free_mode == ZS_FREE_CLASS_INDEX_UNLOCKED);
	if (!err)
		cache_free_handle(pool, handle);
	return err;
}

/* The owned free's rare ends (in an operation): a full handle cache (to a magazine, then z's
 * list moves or release, if any), and z's list moves or release alone (the handle is in the
 * cache already: a call that saves no register for it). */
static __attribute__((noinline)) int free_owned_finish(struct zs_pool *pool, struct zs_heap *h,
							struct zspage *z, unsigned long handle)
{
	heap_handles_drain(pool, h, 1);
	heap_handle_put(h, handle);
	if (z->fullness == ZS_OWNED_FULL || !z->inuse)
		return heap_free_moved(pool, h, z);
	heap_exit(h);
	return 0;
}

/*
 * Owned pools (owned.c; never checked mode): an object in a zspage this
 * thread's heap owns goes back onto that zspage's free list and its handle
 * into the heap's cache, in an operation (heap_enter .. heap_exit: no
 * locked instruction).  Not ours (another thread's or a class's zspage), or
 * a compaction running: the class path frees it.  Every call out of here
 * is a tail call, so the path saves no register.
 *
 * Only compaction moves objects (and writes the descriptors of the zspages
 * it makes), and it revokes this heap after raising its flag and before it
 * moves any: with the flag down inside the operation, the obj and the page
 * descriptor read here are current and stay so until heap_exit (the
 * revoker waits for it; the flag is read after revoke, so a compactor that
 * raised it before the barrier is seen).  With one running, the class path
 * re-reads the obj under the class lock.
 */
static inline __attribute__((always_inline)) int free_owned_entered(struct zs_pool *pool,
								    struct zs_heap *h,
								    unsigned long handle)
{
	if (unlikely(atomic_load_explicit(&pool->compaction_in_progress, memory_order_acquire))) {
		heap_exit(h);
		return free_owned_slow(pool, handle);
	}
	/* The slot's word as it is, not masked with HANDLE_OBJ_MASK: an owned pool is never
	 * checked, so no handle is pending, and a live one's slot is not free (two instructions). */
	unsigned long obj = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
	assert_internal(handle_is_live(handle));
	char *page;
	struct zspage *z = pages_lookup_owner_addr(pool->pages, obj >> OBJ_PFN_SHIFT, &page);
	/* Ours: its word is this heap's zid (never a huge zspage's: zspage_heap_id). */
	if (unlikely(__atomic_load_n(&z->heap_id, __ATOMIC_RELAXED) != h->zid)) {
		heap_exit(h);
		return free_owned_slow(pool, handle);
	}
	unsigned idx = obj_to_idx(obj);
	/* obj_page_offset with the zspage's own copy of the slot size (no read of the class, a line
	 * of its own) and the stored mask: one and from memory, not a load, a sub and an and (the
	 * class paths keep obj_page_offset as it is). */
	unsigned off = (unsigned)((unsigned long)idx * z->size) & pool->page_mask;
	unsigned long *hdr = (unsigned long *)(page + off);
	assert_internal(z->inuse > 0 && idx < z->objs);
	*hdr = (unsigned long)z->freeobj << 1;
	z->freeobj = idx;
	z->inuse--;
	if (unlikely(h->hn == ZS_HEAP_HANDLES))
		return free_owned_finish(pool, h, z, handle);
	heap_handle_put(h, handle);
	/* Current or partial and not emptied: nothing moves (no fullness is kept for owned zspages). */
	/* z's list move or release and heap_exit (owned.c), a tail call straight there. */
	if (unlikely(z->fullness == ZS_OWNED_FULL || !z->inuse))
		return heap_free_moved(pool, h, z);
	heap_exit(h);
	return 0;
}

/* Revoke or HEAP_FENCED seen (busy set): the fenced entry, or the class path. */
static __attribute__((noinline)) int free_owned_revoked(struct zs_pool *pool, struct zs_heap *h,
							 unsigned long handle)
{
	if (heap_enter_slow(h))
		return free_owned_entered(pool, h, handle);
	return free_owned_slow(pool, handle);
}

/* No heap yet for this pool in slot 0 (a first call, or several pools in turn). */
static __attribute__((noinline)) int free_owned_lookup(struct zs_pool *pool, unsigned long handle)
{
	struct zs_heap *h = heap_lookup(pool);
	if (h && heap_enter(h))
		return free_owned_entered(pool, h, handle);
	return free_owned_slow(pool, handle);
}

static __attribute__((noinline)) int free_owned_pool(struct zs_pool *pool, unsigned long handle)
{
	if (unlikely(heap_tls.key[0] != pool->heap_key))
		return free_owned_lookup(pool, handle);
	struct zs_heap *h = heap_tls.heap[0];
	unsigned w = heap_enter_word(h);
	if (unlikely(w)) /* nested, or heap_none: the class path; a revoker or fenced: entered */
		return w & HEAP_BUSY ? free_owned_slow(pool, handle)
				     : free_owned_revoked(pool, h, handle);
	return free_owned_entered(pool, h, handle);
}

/* zs_free's kernel path (every pool that is not owned), out of line so that zs_free saves no
 * register before it knows which path it takes. */
static __attribute__((noinline)) int free_kernel(struct zs_pool *pool, unsigned long handle)
{
	int checked = pool->free_flags;
	if (checked) {
		unsigned long obj;
		if (handle_precheck(pool, handle, &obj))
			return -EINVAL;
	}
	int err, mode = pool->cfg.free_mode;
	if (unlikely(mode == ZS_FREE_PERCPU_DEFERRED)) {
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
		cache_free_handle(pool, handle);
	return err;
}

int zs_free(struct zs_pool *pool, unsigned long handle)
{
	/*
	 * One test: a null or error handle, or any handle of an owned pool
	 * (free_limit 0, owned.c), so the kernel path pays nothing for the
	 * owned one, and neither saves a register before it is chosen.
	 */
	if (unlikely(handle - 1 >= pool->free_limit)) {
		if (!handle || ZS_IS_ERR(handle))
			return 0;
		return free_owned_pool(pool, handle);
	}
	return free_kernel(pool, handle);
}
