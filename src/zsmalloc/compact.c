/*
 * Compaction (statistics and the class table print are in stats.c).
 *
 * Compaction follows the kernel's choices exactly, because they decide which
 * zspages empty out later and so the page counts a trace records: classes
 * from the largest index down; per class, while at least one zspage worth of
 * slots is free, the destination is the head of the fullest partly used
 * group (kept until full), the source the head of the emptiest; the source's
 * objects move in ascending index order into the destination's free-list
 * head; an emptied source is freed at once.  One compactor at a time.
 *
 * Fitted zspages (cfg.fit_zspages, the application profile; off in the
 * kernel profile, whose every step above stays the kernel's).  After the
 * kernel's loop a class still keeps up to a zspage's worth of free slots,
 * spread over its partly used zspages: up to a chain of 8 pages per class
 * and copy, most of a small pool's waste (docs/compare.md).  With the knob
 * on, the same loop goes on while two partly used zspages are left (so
 * one is), and then the last one's k objects move into a new zspage of
 * ceil(k x slot size / page size) pages, the fewest that hold them, when
 * that is shorter than the one they are in.  That leaves under a page of
 * free slots and tail per class and copy, and it is the least any one
 * class can keep: fewer pages cannot hold k slots.  Only compaction makes
 * such a zspage; zs_malloc still allocates the class's chain, so a class
 * that grows again gets its long zspages (and their small tails) back, and
 * the next compaction moves a fitted zspage it grew past into chains
 * (drain_fitted): after every zs_compact a class is chains plus at most
 * one fitted zspage.  With the knob on, the loop also picks its zspages by
 * address (compact_by_address), so that what survives sits in the pool's
 * lowest chunks and the others unmap.
 *
 * Why compaction's scratch (the copy buffer, the by-address array) is mapped
 * for the call (pages_table_map) and never malloc'd: self-compaction runs on
 * the page provider's purge thread, and a first malloc there takes a glibc
 * arena of its own, which stays resident; the thread comes and goes (it ends
 * when nothing is cached), and each end puts that arena on glibc's free list,
 * where the host program's next new thread picks it up.  A library thread
 * should leave the host's arenas as it found them (db_bench with the RocksDB
 * plugin ended with 11 arenas when compaction malloc'd its scratch, 7 now).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "zsmalloc/internal.h"
#include "zsmalloc/compact.h"
#include "common/sigblock.h"

/* Write pins (lock.h): the slots, and compaction's look at them. */
struct zs_wpin wpins[ZS_WPIN_SLOTS];
atomic_uint wpins_hi;

void wpin_raise(unsigned slot)
{
	unsigned hi = atomic_load_explicit(&wpins_hi, memory_order_relaxed);
	while (hi <= slot && !atomic_compare_exchange_weak_explicit(&wpins_hi, &hi, slot + 1,
								    memory_order_relaxed,
								    memory_order_relaxed))
		;
}

/* Class lock of z held: is a zs_malloc_write copying into z? */
int wpin_held(const void *z)
{
	unsigned hi = atomic_load_explicit(&wpins_hi, memory_order_relaxed);
	for (unsigned i = 0; i < hi && i < ZS_WPIN_SLOTS; i++)
		if (atomic_load_explicit(&wpins[i].z, memory_order_acquire) == z)
			return 1;
	return 0;
}

/*
 * Class lock held: write-lock a zspage that objects are to move out of, or
 * 0 when a reader holds it or a zs_malloc_write is still copying into it
 * (then, as the kernel does with a locked zspage, compaction does not wait).
 */
static int isolate_trylock(struct zspage *z)
{
	if (!zspage_write_trylock(&z->lock))
		return 0;
	if (unlikely(wpin_held(z))) {
		zspage_write_unlock(&z->lock);
		return 0;
	}
	return 1;
}

unsigned long can_compact(const struct size_class *class)
{
	unsigned long allocated = class->stats[ZS_OBJS_ALLOCATED];
	unsigned long used = class->stats[ZS_OBJS_INUSE];
	assert_internal(spin_held((spinlock_t *)&class->lock));
	assert_internal(used <= allocated);
	if (allocated <= used)
		return 0;
	return (allocated - used) / class->objs_per_zspage * class->pages_per_zspage;
}

static struct zspage *isolate_dst_zspage(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_99; fg >= ZS_INUSE_RATIO_10; fg--) {
		struct zspage *z = class->fullness_list[fg];
		if (z) {
			remove_zspage(class, z);
			return z;
		}
	}
	return NULL;
}

static struct zspage *isolate_src_zspage(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_99; fg++) {
		struct zspage *z = class->fullness_list[fg];
		if (z) {
			remove_zspage(class, z);
			return z;
		}
	}
	return NULL;
}

static int putback_zspage(struct size_class *class, struct zspage *zspage)
{
	int fg = get_fullness_group(class, zspage);
	insert_zspage(class, zspage, fg);
	return fg;
}

/* Move src's live objects, lowest index first, until dst is full or src empty. */
static void migrate_zspage(struct zs_pool *pool, struct size_class *class, struct zspage *src,
			   struct zspage *dst, char *buf)
{
	unsigned size = class->size;
	pfn_t pfn = src->pfn;
	unsigned page = 0;
	/* Pool lock for writing (no reader resolves a handle meanwhile), both zspages isolated. */
	assert_internal(rw_write_held(&pool->lock) && spin_held(&class->lock));
	assert_internal(atomic_load_explicit(&src->lock, memory_order_relaxed) == -1);
	assert_internal(!src->lnext && !src->lprev && !dst->lnext && !dst->lprev);
	assert_internal(src != dst && dst->inuse < dst->objs);
	/* Slots past `untouched` were never used: their words are not headers. */
	for (unsigned idx = 0; idx < src->untouched; idx++) {
		while (obj_page_index(pool, size, idx) > page) {
			pfn = page_desc(pool, pfn)->next;
			page++;
		}
		unsigned off = obj_page_offset(pool, size, idx);
		unsigned long hdr = *obj_header(pool, pfn, idx, size);
		if (!(hdr & OBJ_ALLOCATED_TAG))
			continue;
		unsigned long handle = hdr & ~OBJ_ALLOCATED_TAG;
		/* A moved object's handle is live or queued, and names this very object. */
		assert_internal(!handle_is_free(handle) &&
				   handle_to_obj(handle) == location_to_obj(pfn, class->enc, idx));
		unsigned long used_obj = location_to_obj(pfn, class->enc, idx);
		unsigned long free_obj = obj_malloc(pool, dst, handle);
		span_read(pool, pfn, off, buf, size);
		span_write(pool, obj_to_pfn(free_obj),
			   obj_page_offset(pool, size, obj_to_idx(free_obj)), buf, size);
		/* Keep a checked-mode "queued for deferred free" mark across the move. */
		unsigned long old = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
		record_obj(handle, free_obj | (old & HANDLE_PENDING_BIT));
		obj_free(pool, class, used_obj);
		if (dst->inuse == dst->objs || src->inuse == 0)
			break;
	}
}

/*
 * Fitted zspages: move the objects of the class's one partly used zspage
 * into a new one of the fewest pages that hold them, if that is shorter.
 * Pool write lock and class lock held, no zspage isolated.  The new pages
 * come from the provider under both locks (the order allows it, and
 * compaction frees pages under them anyway); without pages, nothing moves.
 */
static unsigned long fit_last_zspage(struct zs_pool *pool, struct size_class *class, char *buf)
{
	struct zspage *src = NULL;
	for (int fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_99 && !src; fg++)
		src = class->fullness_list[fg];
	if (!src)
		return 0;
	unsigned long bytes = (unsigned long)src->inuse * class->size;
	unsigned pages = (unsigned)((bytes + pool->page_size - 1) >> pool->page_shift);
	unsigned src_pages = zspage_pages(class, src);
	if (pages >= src_pages)
		return 0;
	unsigned objs = (unsigned)(((unsigned long)pages << pool->page_shift) / class->size);
	assert_internal(objs >= src->inuse && objs < class->objs_per_zspage);
	if (!isolate_trylock(src))
		return 0; /* a reader holds it: as in the loop, do not wait */
	struct zspage *dst = alloc_zspage(pool, class, pages, objs);
	if (!dst) {
		zspage_write_unlock(&src->lock);
		return 0;
	}
	pool_pages_add(pool, (long)pages);
	class->fitted_nr++;
	class->fitted_pages += pages;
	class->fitted_objs += objs;
	class->stats[ZS_OBJS_ALLOCATED] += objs;
	remove_zspage(class, src);
	migrate_zspage(pool, class, src, dst, buf);
	zspage_write_unlock(&src->lock);
	assert_internal(src->inuse == 0);
	putback_zspage(class, src);
	unlink_empty_zspage(pool, class, src);
	free_zspage_pages(pool, src);
	putback_zspage(class, dst);
	return src_pages - pages;
}

static int is_fitted(const struct size_class *class, const struct zspage *z)
{
	return z->objs != class->objs_per_zspage;
}

/* The fullest partly used zspage of the class's full length, or NULL. */
static struct zspage *find_chain_partial(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_99; fg >= ZS_INUSE_RATIO_10; fg--)
		for (struct zspage *z = class->fullness_list[fg]; z; z = z->lnext)
			if (!is_fitted(class, z))
				return z;
	return NULL;
}

/* A fitted zspage, partly used ones first; the walk of the full list is O(zspages). */
static struct zspage *find_fitted(struct size_class *class)
{
	for (int fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_100; fg++)
		for (struct zspage *z = class->fullness_list[fg]; z; z = z->lnext)
			if (is_fitted(class, z))
				return z;
	return NULL;
}

/*
 * Fitted zspages go back into chains once the class has grown past them.
 * zs_malloc fills a fitted zspage like any other and then allocates a full
 * chain, so a class that grows between compactions would keep every fitted
 * zspage it was ever given, each with a worse tail than the chain's (one
 * object of 3264 bytes per page wastes 20%, the chain of 4 pages 0.4%):
 * test_zs_fit's growth case (20 objects at a time, zs_compact after each
 * step) ended at 75.6% of its pages live without this, 89.2% unfitted.
 * So while the class has a fitted zspage and a partly used chain (or two
 * fitted zspages), the fitted one's objects move into chains (partly used
 * ones first, fullest first, then a new chain) and it is freed;
 * fit_last_zspage then fits whatever chain is left partly used.  A class that did not change since
 * its last compaction has neither, so nothing moves twice.  Returns pages
 * freed minus pages allocated.
 */
static long drain_fitted(struct zs_pool *pool, struct size_class *class, char *buf)
{
	long net = 0;
	while (class->fitted_nr >= 2 || (class->fitted_nr && find_chain_partial(class))) {
		struct zspage *f = find_fitted(class);
		assert_internal(f);
		if (!f || !isolate_trylock(f))
			break; /* a reader holds it: as in the loop, do not wait */
		remove_zspage(class, f);
		while (f->inuse) {
			struct zspage *dst = find_chain_partial(class);
			if (dst) {
				remove_zspage(class, dst);
			} else {
				dst = alloc_zspage(pool, class, class->pages_per_zspage,
						      class->objs_per_zspage);
				if (!dst)
					break;
				pool_pages_add(pool, (long)class->pages_per_zspage);
				class->stats[ZS_OBJS_ALLOCATED] += class->objs_per_zspage;
				net -= (long)class->pages_per_zspage;
			}
			migrate_zspage(pool, class, f, dst, buf);
			putback_zspage(class, dst);
		}
		zspage_write_unlock(&f->lock);
		if (putback_zspage(class, f) != ZS_INUSE_RATIO_0)
			break; /* no pages for a chain: it stays as it is */
		unsigned pages = zspage_pages(class, f);
		unlink_empty_zspage(pool, class, f);
		free_zspage_pages(pool, f);
		net += (long)pages;
	}
	return net;
}

/*
 * Heapsort by first page, in place: glibc's qsort takes a temporary copy from
 * malloc, which on the purge thread (self-compaction) touches an arena of
 * its own that stays resident after the pass.
 */
static void sift(struct zspage **v, size_t i, size_t n)
{
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && v[c + 1]->pfn > v[c]->pfn)
			c++;
		if (v[i]->pfn >= v[c]->pfn)
			return;
		struct zspage *t = v[i];
		v[i] = v[c];
		v[c] = t;
		i = c;
	}
}

static void sort_by_pfn(struct zspage **v, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift(v, i, n);
	for (size_t k = n; k-- > 1;) {
		struct zspage *t = v[0];
		v[0] = v[k];
		v[k] = t;
		sift(v, 0, k);
	}
}

/*
 * Fitted zspages' loop, by address: the class's chain-long zspages sorted
 * by first page, objects move from the highest-placed zspage that holds
 * any into the lowest-placed one with a free slot, until the two meet.  The
 * kernel's loop (emptiest source, fullest destination) frees as many
 * zspages, but at random places: after random frees the survivors of every
 * class stay spread over every chunk the pool ever mapped, and a mapped
 * chunk keeps its page descriptors resident (bench_blob: 111 chunks for 44
 * chunks' worth of pages, 3.9 MiB of descriptors).  By address, every class
 * keeps its lowest zspages, so the pool's pages gather in its lowest chunks
 * and the top ones empty and unmap.  Costs more copies (a full zspage high
 * up moves too), at most the class's live objects once.  Pool write lock and
 * class lock held; returns pages freed, and *again when it stopped for a
 * waiting lock (the caller yields and calls again: the array goes stale once
 * the locks are dropped).  -1 without memory for the array (the caller runs
 * the kernel's loop).
 */
static long compact_by_address(struct zs_pool *pool, struct size_class *class, char *buf,
			       int *again)
{
	size_t n = 0, lo = 0, hi, moved = 0, batch;
	long freed = 0;
	*again = 0;
	for (int fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_100; fg++)
		for (struct zspage *z = class->fullness_list[fg]; z; z = z->lnext)
			n += !is_fitted(class, z);
	if (n < 2)
		return 0;
	size_t vmapped = 0;
	struct zspage **v = pages_table_map(n * sizeof(*v), &vmapped);
	if (!v)
		return -1;
	n = 0;
	for (int fg = ZS_INUSE_RATIO_10; fg <= ZS_INUSE_RATIO_100; fg++)
		for (struct zspage *z = class->fullness_list[fg]; z; z = z->lnext)
			if (!is_fitted(class, z))
				v[n++] = z;
	sort_by_pfn(v, n);
	batch = 8 + n / 8;
	hi = n - 1;
	while (lo < hi) {
		struct zspage *dst = v[lo], *src = v[hi];
		if (dst->inuse == dst->objs) {
			lo++;
			continue;
		}
		if (!src->inuse || !isolate_trylock(src)) {
			hi--; /* a reader holds it: it stays where it is */
			continue;
		}
		remove_zspage(class, src);
		remove_zspage(class, dst);
		migrate_zspage(pool, class, src, dst, buf);
		zspage_write_unlock(&src->lock);
		putback_zspage(class, dst);
		if (putback_zspage(class, src) == ZS_INUSE_RATIO_0) {
			unlink_empty_zspage(pool, class, src);
			freed += zspage_pages(class, src);
			free_zspage_pages(pool, src);
			hi--;
		}
		/*
		 * A waiting lock ends the call only after a batch: each call sorts
		 * the class again (n log n reads of zspages, cold lines), and under
		 * two threads that always want the pool lock (a cache at its limit)
		 * yielding after every zspage made the sorts most of the pass
		 * (heapsort 8% of a RocksDB run's CPU at two readers).
		 */
		if (++moved >= batch && rw_is_contended(&pool->lock)) {
			*again = lo < hi;
			break;
		}
	}
	pages_table_unmap(v, vmapped);
	return freed;
}

static unsigned long compact_class(struct zs_pool *pool, struct size_class *class, char *buf)
{
	struct zspage *src = NULL, *dst = NULL;
	unsigned long freed = 0;
	/* Fitted zspages: go on past the kernel's stop while two partly used zspages are left. */
	int fit = pool->cfg.fit_zspages && class->pages_per_zspage > 1;

	write_lock(&pool->lock);
	spin_lock(&class->lock);
	assert_internal(class_lists_sane(class));
	/* By address in every class of a fitted pool, one-page zspages too (they fit nothing). */
	int by_addr = pool->cfg.fit_zspages;
	for (int again = by_addr; again;) {
		long f = compact_by_address(pool, class, buf, &again);
		if (f < 0)
			break;
		freed += (unsigned long)f;
		if (again) {
			spin_unlock(&class->lock);
			write_unlock(&pool->lock);
			sched_yield();
			write_lock(&pool->lock);
			spin_lock(&class->lock);
		} else {
			by_addr = 2; /* done: the kernel's loop below has nothing left */
		}
	}
	while (by_addr != 2 && (fit || can_compact(class))) {
		if (!dst) {
			dst = isolate_dst_zspage(class);
			if (!dst)
				break;
		}
		src = isolate_src_zspage(class);
		if (!src)
			break;
		/* A reader holds it: stop here rather than wait (the kernel's choice too). */
		if (!isolate_trylock(src))
			break;
		migrate_zspage(pool, class, src, dst, buf);
		zspage_write_unlock(&src->lock);
		if (putback_zspage(class, src) == ZS_INUSE_RATIO_0) {
			unlink_empty_zspage(pool, class, src);
			freed += zspage_pages(class, src);
			free_zspage_pages(pool, src);
		}
		src = NULL;
		if (get_fullness_group(class, dst) == ZS_INUSE_RATIO_100 ||
		    rw_is_contended(&pool->lock)) {
			putback_zspage(class, dst);
			dst = NULL;
			spin_unlock(&class->lock);
			write_unlock(&pool->lock);
			sched_yield();
			write_lock(&pool->lock);
			spin_lock(&class->lock);
		}
	}
	if (src)
		putback_zspage(class, src);
	if (dst)
		putback_zspage(class, dst);
	if (fit) {
		long net = (long)freed + drain_fitted(pool, class, buf);
		net += (long)fit_last_zspage(pool, class, buf);
		freed = net > 0 ? (unsigned long)net : 0;
	}
	assert_internal(class_lists_sane(class));
	spin_unlock(&class->lock);
	write_unlock(&pool->lock);
	return freed;
}

/*
 * The compactor's place is the pool's compaction_in_progress flag: a try
 * for zs_compact, zs_compact_step and the idle compaction, which must not
 * stall.  A caller that needs the memory now (an insert at the blob store's
 * limit) waits instead, on one process-wide condition: compactions are rare
 * and short (the idle one gives the place up after each step), so a waiter
 * of another pool woken for nothing costs a look at a flag.  No lost wake-up:
 * a waiter counts itself before it tries the flag, the giver clears the flag
 * before it reads the count (both sequentially consistent), so either the
 * giver sees the waiter and broadcasts under the mutex the waiter sleeps
 * with, or the waiter's try comes after the clear.
 */
static pthread_mutex_t place_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t place_cv = PTHREAD_COND_INITIALIZER;
static atomic_uint place_waiters;

int compact_place_take(struct zs_pool *pool, int wait)
{
	if (!atomic_exchange_explicit(&pool->compaction_in_progress, 1, memory_order_seq_cst))
		return 1;
	if (!wait)
		return 0;
	atomic_fetch_add_explicit(&place_waiters, 1, memory_order_seq_cst);
	pthread_mutex_lock(&place_mu);
	while (atomic_exchange_explicit(&pool->compaction_in_progress, 1, memory_order_seq_cst))
		pthread_cond_wait(&place_cv, &place_mu);
	pthread_mutex_unlock(&place_mu);
	atomic_fetch_sub_explicit(&place_waiters, 1, memory_order_relaxed);
	return 1;
}

void compact_place_give(struct zs_pool *pool)
{
	atomic_store_explicit(&pool->compaction_in_progress, 0, memory_order_seq_cst);
	if (atomic_load_explicit(&place_waiters, memory_order_seq_cst)) {
		pthread_mutex_lock(&place_mu);
		pthread_cond_broadcast(&place_cv);
		pthread_mutex_unlock(&place_mu);
	}
}

/*
 * Become the pool's one compactor (0: another one runs and wait is 0), with
 * signals blocked while the pool's write lock can be held: a signal handler
 * reading region memory served from this pool would wait on this very
 * thread (src/common/sigblock.h).  Every compaction entry comes here.
 */
static int compact_begin(struct zs_pool *pool, struct zs_sigguard *sigs, const char *entry,
			 int wait)
{
	/* It takes the pool lock for writing: a caller holding any pool-side lock would deadlock. */
	lock_assert_none_in(ZS_LOCK_ZS_COMPACT, entry);
	if (wait) {
		/* A blocking take: checked like a lock (the holder takes ranks 205 and up). */
		lock_take(&pool->compaction_in_progress, ZS_LOCK_ZS_COMPACT);
		compact_place_take(pool, 1);
	} else {
		if (!compact_place_take(pool, 0))
			return 0;
		lock_took_try(&pool->compaction_in_progress, ZS_LOCK_ZS_COMPACT);
	}
	signals_block(sigs);
	/* Owned zspages are on no class list: back to their classes first (no heap takes one
	 * while the flag is up), so compaction sees every zspage it would without them. */
	heaps_revoke_all(pool);
	return 1;
}

/* Count what a pass freed and let the next compactor in (signals stay blocked). */
static void compact_end(struct zs_pool *pool, unsigned long freed)
{
	atomic_fetch_add_explicit(&pool->pages_compacted, freed, memory_order_relaxed);
	lock_drop(&pool->compaction_in_progress);
	compact_place_give(pool);
}

/* Class copy e is a physical class that was ever allocated from and is not huge. */
static struct size_class *compactable(struct zs_pool *pool, unsigned e)
{
	unsigned n = (unsigned)pool->nr_classes;
	if (pool->geom[e % n].phys != (int)(e % n))
		return NULL;
	struct size_class *class = &pool->classes[e];
	return class_live(class) && !class->huge ? class : NULL; /* a copy never allocated from holds nothing */
}

static unsigned long compact_all(struct zs_pool *pool, int wait)
{
	struct zs_sigguard sigs;
	if (!compact_begin(pool, &sigs, wait ? "compact_all_wait" : "zs_compact", wait))
		return 0;
	size_t bmapped = 0;
	char *buf = pages_table_map(pool->page_size, &bmapped);
	unsigned long freed = 0;
	if (buf) {
		for (unsigned e = (unsigned)pool->nr_classes * pool->nr_shards; e-- > 0;) {
			struct size_class *class = compactable(pool, e);
			if (class)
				freed += compact_class(pool, class, buf);
		}
		pages_table_unmap(buf, bmapped);
	}
	compact_end(pool, freed);
	handles_trim(pool, 0);
	/* Compaction is how a pool gives memory back: the page cache goes too, not at its decay. */
	park_release_all(pool);
	pages_trim(pool->pages);
	signals_restore(&sigs);   /* after the trims: they take the handle and page locks */
	return freed;
}

unsigned long zs_compact(struct zs_pool *pool)
{
	return compact_all(pool, 0);
}

unsigned long compact_all_wait(struct zs_pool *pool)
{
	return pool ? compact_all(pool, 1) : 0;
}

/*
 * A bounded share of zs_compact, for callers (the blob store) that compact a
 * little on each call instead of stopping the pool for a whole pass: the same
 * per-class step, over at most max_classes class copies that have something to
 * do, resuming where the previous step stopped.  Returns pages freed, or
 * -EBUSY (compact.h); *cursor is 0 again once a pass is complete, which is
 * when handle memory is trimmed (pages freed here go to the page cache and
 * leave at its decay).
 */
long compact_step(struct zs_pool *pool, unsigned *cursor, unsigned max_classes, int wait)
{
	if (!pool || !cursor)
		return -EINVAL;
	struct zs_sigguard sigs;
	if (!compact_begin(pool, &sigs, wait ? "compact_step" : "zs_compact_step", wait))
		return -EBUSY;
	size_t bmapped = 0;
	char *buf = pages_table_map(pool->page_size, &bmapped);
	unsigned long freed = 0;
	unsigned total = (unsigned)pool->nr_classes * pool->nr_shards;
	unsigned e = *cursor < total ? *cursor : 0;
	unsigned done = 0;
	if (buf) {
		/* Same order as zs_compact (largest index first): e counts down from the top. */
		for (; e < total && done < (max_classes ? max_classes : 1); e++) {
			struct size_class *class = compactable(pool, total - 1 - e);
			if (!class)
				continue;
			spin_lock(&class->lock);
			int work = can_compact(class) > 0 ||
				   (pool->cfg.fit_zspages && class->pages_per_zspage > 1);
			spin_unlock(&class->lock);
			if (!work)
				continue;
			freed += compact_class(pool, class, buf);
			done++;
		}
		pages_table_unmap(buf, bmapped);
	}
	*cursor = e < total ? e : 0;
	compact_end(pool, freed);
	if (*cursor == 0)
		handles_trim(pool, 0);
	signals_restore(&sigs);
	return (long)freed;
}

unsigned long zs_compact_step(struct zs_pool *pool, unsigned *cursor, unsigned max_classes)
{
	long f = compact_step(pool, cursor, max_classes, 0);
	return f > 0 ? (unsigned long)f : 0;
}
