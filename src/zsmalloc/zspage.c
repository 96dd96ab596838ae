/*
 * Zspages and the objects in them, below every path that changes them:
 * the fullness lists a zspage moves between, the walk of its page chain,
 * taking an object off a zspage's free list (obj_malloc, for zs_malloc
 * and compaction alike) and checked mode's test that an obj names a live
 * object.  Everything here runs with the class lock (or the pool lock)
 * held by the caller and calls nothing above it, so allocation
 * (zsmalloc.c), freeing (free.c), deferred free and compaction all build
 * on it and never on each other the wrong way round.
 */
#include <errno.h>

#include "zsmalloc/internal.h"

/* ---- fullness lists ---- */


/*
 * A zspage's own length and slots are the class's, or a fitted zspage's:
 * fewer pages, holding every slot that fits in them.
 */
static int zspage_shape_ok(const struct size_class *class, const struct zspage *z)
{
	if (z->objs == class->objs_per_zspage)
		return 1;
	unsigned pages = zspage_pages(class, z);
	return z->objs >= 1 && pages < class->pages_per_zspage && !class->huge &&
	       z->objs == (unsigned long)pages * class->page_size / class->size;
}

/*
 * ZS_DEBUG, class lock held, no zspage isolated: the whole class agrees with
 * itself.  Every zspage on list fg says fullness fg and its inuse puts it in
 * group fg (within 0..its own slot count, which is the class's or, for a
 * fitted zspage, fewer slots in fewer pages), the lists' back links hold,
 * each list's length is its stats[fg], and the zspages' inuse, slots and
 * pages add up to the class's counts.  O(zspages): called where a whole class is
 * looked at anyway (zs_class_stats, the start of a class's compaction).
 */
int class_lists_sane(const struct size_class *class)
{
	unsigned long objs = 0, inuse = 0, fitted_nr = 0, fitted_objs = 0, fitted_pages = 0;
	if (class_single(class)) { /* unlinked: only full zspages are counted, one object each */
		for (int fg = 0; fg < ZS_INUSE_RATIO_100; fg++)
			if (class->stats[fg] || class->fullness_list[fg])
				return 0;
		return !class->fullness_list[ZS_INUSE_RATIO_100] &&
		       class->stats[ZS_INUSE_RATIO_100] == class->stats[ZS_OBJS_INUSE] &&
		       class->stats[ZS_OBJS_INUSE] == class->stats[ZS_OBJS_ALLOCATED] &&
		       !class->fitted_nr;
	}
	for (int fg = 0; fg < ZS_NR_FULLNESS_GROUPS; fg++) {
		unsigned long n = 0;
		const struct zspage *prev = NULL;
		for (const struct zspage *z = class->fullness_list[fg]; z; prev = z, z = z->lnext) {
			if (z->lprev != prev || z->fullness != fg || z->class_idx != class->enc ||
			    !zspage_shape_ok(class, z) || z->inuse > z->objs ||
			    get_fullness_group(class, z) != fg)
				return 0;
			inuse += z->inuse;
			objs += z->objs;
			if (z->objs != class->objs_per_zspage) {
				fitted_nr++;
				fitted_objs += z->objs;
				fitted_pages += zspage_pages(class, z);
			}
			n++;
		}
		if (n != class->stats[fg])
			return 0;
	}
	/* Owned zspages (owned.c) are on no list and count all their slots in use. */
	unsigned long owned = class->stats[ZS_OBJS_ALLOCATED] - objs;
	if (objs > class->stats[ZS_OBJS_ALLOCATED] || inuse + owned != class->stats[ZS_OBJS_INUSE])
		return 0;
	if (owned)
		return fitted_nr <= class->fitted_nr && fitted_objs <= class->fitted_objs &&
		       fitted_pages <= class->fitted_pages;
	return fitted_nr == class->fitted_nr && fitted_objs == class->fitted_objs &&
	       fitted_pages == class->fitted_pages;
}

/* ---- zspage pages ---- */


/* ---- objects ---- */


/*
 * Checked mode: does `obj` name a live object whose header names `handle`?
 * Runs with the pool lock (read) or the object's class lock held.
 */
int validate_obj(struct zs_pool *pool, unsigned long handle, unsigned long obj)
{
	assert_internal(rw_held_by_me(&pool->lock) ||
			   !class_enc_valid(pool, obj_to_class_idx(obj)) ||
			   spin_held(&pool->classes[obj_to_class_idx(obj)].lock));
	pfn_t pfn = obj_to_pfn(obj);
	if (!pages_valid(pool->pages, pfn))
		return -EINVAL;
	struct zspage *zspage = page_zspage(pool, pfn);
	if (!zspage || !class_enc_valid(pool, zspage->class_idx))
		return -EINVAL;
	struct size_class *class = zspage_class(pool, zspage);
	unsigned idx = obj_to_idx(obj);
	if (class->size == 0 || obj_to_class_idx(obj) != class->enc || idx >= zspage->objs)
		return -EINVAL;
	if (zspage->huge)
		return zspage->huge_handle == handle ? 0 : -EINVAL;
	/* A slot never handed out holds whatever the page held before: no header to trust. */
	if (idx >= __atomic_load_n(&zspage->untouched, __ATOMIC_RELAXED))
		return -EINVAL;
	/* The object must start in the page obj names. */
	if (zspage_page(pool, zspage, obj_page_index(pool, class->size, idx)) != pfn)
		return -EINVAL;
	return *obj_header(pool, pfn, idx, class->size) == (handle | OBJ_ALLOCATED_TAG) ? 0
											: -EINVAL;
}

/* ---- an emptied zspage leaves its class and gives its pages back ---- */

/* A fitted zspage leaves its class's fitted counts; returns its pages. */
static __attribute__((noinline, cold)) unsigned unlink_fitted(struct size_class *class,
								const struct zspage *zspage)
{
	unsigned pages = zspage_pages(class, zspage);
	assert_internal(class->fitted_nr > 0 && class->fitted_objs >= zspage->objs &&
			   class->fitted_pages >= pages);
	class->fitted_nr--;
	class->fitted_objs -= zspage->objs;
	class->fitted_pages -= pages;
	return pages;
}

/* Take an empty zspage off its list and out of the accounting (class lock held). */
void unlink_empty_zspage(struct zs_pool *pool, struct size_class *class, struct zspage *zspage)
{
	assert_internal(zspage->inuse == 0 && zspage->fullness == ZS_INUSE_RATIO_0);
	assert_internal(class->stats[ZS_OBJS_ALLOCATED] >= zspage->objs);
	remove_zspage(class, zspage);
	unsigned pages = class->pages_per_zspage;
	if (unlikely(zspage->objs != class->objs_per_zspage))
		pages = unlink_fitted(class, zspage);
	class->stats[ZS_OBJS_ALLOCATED] -= zspage->objs;
	pool_pages_add(pool, -(long)pages);
}


/*
 * Give an unlinked zspage's pages back to the provider (no lock needed:
 * nobody can reach it).  The chain's end says how many: the class's chain
 * or a fitted zspage's fewer.
 */
void free_zspage_pages(struct zs_pool *pool, struct zspage *zspage)
{
	pfn_t pfns[ZS_MAX_CHAIN];
	pfn_t pfn = zspage->pfn;
	unsigned pages = 0;
	assert_internal(!zspage_tail(zspage)); /* taken (zspage_take_tail) before the pages go */
	do {
		assert_internal(pages < ZS_MAX_CHAIN);
		pfns[pages++] = pfn;
		pfn = page_desc(pool, pfn)->next;
	} while (pfn != ZS_PFN_NONE);
	pages_free_bulk(pool->pages, pfns, pages);
}
