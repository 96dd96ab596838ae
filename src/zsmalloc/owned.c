/*
 * Thread-owned zspages (application profile): how a thread's heap takes a
 * zspage from its class and gives it back, its zspage lists and spares,
 * the remote-free stack's collection and the heap's handle cache; the heaps
 * themselves (registry, thread exit) and revocation are heaps.c's.  Why: a zs_malloc or
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
 */
#include "zsmalloc/internal.h"

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
void heap_spares_give_back(struct zs_pool *pool, struct zs_heap_class *c)
{
	struct zspage *z = c->spare;
	c->spare = NULL;
	c->nspare = 0;
	disown_empties(pool, z);
}

/* The remote stack's objects back into their (owned) zspages (the heap's owner). */
void heap_collect_remote(struct zs_pool *pool, struct zs_heap *h)
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

/* Class lock held, z about to be the heap's: its chain looked at once, for every later set_cur
 * (a scattered one stops at its first gap). */
static void chain_note(struct zs_pool *pool, struct zspage *z)
{
	if (unlikely(z->chain == ZS_CHAIN_UNKNOWN))
		z->chain = (uint8_t)chain_kind(pool, z);
}

/* What set_cur may trust without a walk: one page, or a run noted so. */
static int chain_is_run(const struct zspage *z)
{
	return z->next == ZS_PFN_NONE || z->chain == ZS_CHAIN_RUN;
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
	if (unlikely(!chain_is_run(z)))
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
	heap_spares_give_back(pool, c);
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
	heap_collect_remote(pool, h);
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

/* Revocation (heaps.c), the heap stopped or its owner: every zspage of c back to its class. */
void heap_class_give_back(struct zs_pool *pool, struct zs_heap_class *c)
{
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
	heap_spares_give_back(pool, c);
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
