/*
 * Reads of objects whose handles the library itself holds, not a caller: the
 * blob cache's index.  Checked mode (zs_pool_config.checked) validates every
 * handle a caller passes, at zs_obj_read_begin and again at _end (the handle
 * chunk lookup, the page, the zspage, the object's header), which is there to
 * refuse a stale or forged handle with -EINVAL instead of reading freed
 * memory.  A handle that the cache's index names under its shard lock is
 * live by construction (an entry leaves the index before its object is
 * freed), so that work buys nothing there, and it was a fifth of the
 * instructions of a CompressedDict get (callgrind: 1,717 of 9,139).  These
 * calls pin and read as the unchecked mode does, whatever the pool's mode.
 * Objects with a packed tail take the ordinary (checked) path: they are rare
 * and their pinning is access.c's.
 */
#include <errno.h>

#include "zsmalloc/internal.h"

void *obj_read_begin_own(struct zs_pool *pool, unsigned long handle, size_t mem_len,
			 void *local_copy)
{
	read_lock(&pool->lock);
	unsigned long obj = handle_to_obj(handle);
	/*
	 * The object's address follows from obj alone (its class is encoded in
	 * it): start fetching its first lines now, so that miss overlaps the page
	 * descriptor's and the zspage's below instead of following them.  Only a
	 * hint: the pin below is what makes the address valid.
	 */
	unsigned enc = obj_to_class_idx(obj);
	if (likely(class_enc_valid(pool, enc))) {
		char *a = page_addr(pool, obj_to_pfn(obj)) +
			  obj_page_offset(pool, pool->classes[enc].size, obj_to_idx(obj));
		__builtin_prefetch(a);
		if (mem_len > 64 - ((uintptr_t)a & 63))
			__builtin_prefetch(a + 64);
	}
	struct zspage *zspage = obj_to_zspage(pool, obj);
	zspage_read_lock(&zspage->lock);
	read_unlock(&pool->lock);
	if (unlikely(zspage_tail(zspage))) {
		zspage_read_unlock(&zspage->lock);
		return zs_obj_read_begin(pool, handle, mem_len, local_copy);
	}
	struct size_class *class = zspage_class(pool, zspage);
	unsigned cap, off = payload_offset(pool, class, obj, &cap);
	if (unlikely(mem_len > cap || !local_copy)) {
		zspage_read_unlock(&zspage->lock);
		errno = EINVAL;
		return NULL;
	}
	pfn_t pfn = obj_to_pfn(obj);
	if (likely(off + mem_len <= pool->page_size))
		return page_addr(pool, pfn) + off;
	span_read(pool, pfn, off, local_copy, mem_len);
	return local_copy;
}

void obj_read_end_own(struct zs_pool *pool, unsigned long handle, size_t mem_len, void *mem)
{
	/* Pinned, so the object cannot have moved: obj is stable without the pool lock. */
	struct zspage *zspage = obj_to_zspage(pool, handle_to_obj(handle));
	if (unlikely(zspage_tail(zspage))) {
		zs_obj_read_end(pool, handle, mem_len, mem);
		return;
	}
	zspage_read_unlock(&zspage->lock);
}
