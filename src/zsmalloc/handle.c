/*
 * Handles: 8-byte slots that hold an object's current obj value, the
 * kernel's "zs_handle" kmem_cache.  A handle is the slot's address, so
 * resolving it is one load, and compaction moves an object by rewriting
 * the slot alone.
 *
 * Slots are carved from 64 KiB pages of a private page provider, which gives
 * checked mode a cheap, crash-free test for "is this one of our handles".
 *
 * Free slots are cached per thread shard, the way the kernel's per-CPU slab
 * caches keep kmem_cache_free off shared locks, so threads freeing at once
 * (the seed-000 munmap case) do not meet on one lock.  A shard's cache is
 * bounded (2 * ZS_HANDLE_BATCH slots); past that a whole batch moves to the
 * pool's shared free list in O(1), and a shard with nothing cached takes a
 * batch from there before it carves never-used slots.  So when one thread
 * allocates and another frees (every deferred-free pool: the worker frees;
 * every producer/consumer program) the freed slots come back to the
 * allocator instead of the allocator carving new chunks forever: handle
 * memory stays bounded by the peak number of live handles plus 16 shards'
 * caches.  Chunks whose slots are all free go back to the OS on
 * zs_pool_trim (and from compaction when much is free), every chunk once the
 * pool holds no object.
 *
 * Generations (internal.h, "A handle is its slot's address plus a
 * generation"): a free slot keeps the generation its next handle gets; a
 * free moves it on by one, so the freed handle and the slot's next one
 * differ.  A live slot holds only the obj: the handle's generation is in
 * the handle and in the object's header.  Free lists link slot addresses.
 * A slot in a thread heap's cache or a magazine ("Magazines" below) keeps
 * its last obj outside ZS_DEBUG: the cached value carries its next
 * generation, and is written into the slot when it joins a list.
 * A chunk given back (trim, compaction, a drained or destroyed pool) leaves
 * its slots' next generations in a process-wide record by address, and a
 * chunk carved again at that address, by any pool, continues them ("Across a
 * chunk's lives" below): a generation repeats at an address only after 2^14
 * handles there.  An address never carved before starts at a generation
 * drawn from a process-wide count of carved chunks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fork.h"
#include "zsmalloc/internal.h"

#define HANDLE_CHUNK (64 * 1024)

/*
 * Magazines.  A thread heap of an owned pool caches ready handles in an
 * array (internal.h, struct zs_heap), so its allocation is a load and its
 * free a store, neither touching the slot.  A full or empty array moves as
 * a whole: to or from a magazine, a malloc'd copy of a full array kept on
 * the pool's stack under handle_free_lock, so a thread that frees what
 * another allocated (or a free-all followed by an allocate-all) moves
 * ZS_HEAP_HANDLES (256) handles with one lock round and one copy.  Writing the slots into the
 * shards' list shape at each move instead cost as much as the list cache
 * it replaced (bench_layout's churn passes every handle through it).  At
 * most HANDLE_MAGS_MAX magazines, full and empty (8 bytes a cached handle,
 * 257 KiB at most); past that, or without memory, a full array is written
 * into lists for its shard, a batch (ZS_HANDLE_BATCH) at a time.  A magazine's slots count live in
 * the shards (the slots a heap holds do too); a trim that acts, and the
 * pool's destruction, first write them onto the pool's free list
 * (mags_flatten), where the counts and the generation records see them.
 */
#define HANDLE_MAGS_MAX 128
struct handle_mag {
	struct handle_mag *next;
	unsigned long v[ZS_HEAP_HANDLES];
};

static atomic_ulong chunks_carved; /* every pool's: a new chunk's generation */

#define SLOTS_PER_CHUNK (HANDLE_CHUNK / sizeof(unsigned long) - 1) /* slot 0 is never used */
#define GEN_NUM_MASK ((1u << HANDLE_GEN_BITS) - 1)

/* The generation number (0 .. 2^14 - 1) in a handle's or free slot's generation bits. */
static inline unsigned gen_num(unsigned long bits)
{
	return (unsigned)(((bits >> 1) & 3) | (((bits >> 48) & 0xfff) << 2));
}

/* ---- across a chunk's lives ---- */

/*
 * A chunk's slots each count their own handles, so when the chunk goes back
 * to the OS its slots stand at different generations; restarting them all
 * at one number (what a fresh chunk does) put some slot's next handle inside
 * the range its earlier handles had used, and a stale handle kept by a
 * caller named a live object again.  So a chunk given back leaves a record
 * of each slot's next generation (2 bytes a slot, 16 KiB for a 64 KiB chunk)
 * keyed by its address, and the next chunk carved there, in any pool (a
 * handle from another pool is refused the same way), takes it: its slots are
 * carved as usual, each at the generation it stopped at.
 *
 * Past GEN_FULL_MAX bytes of such records (addresses given back and not
 * reused: 4,096 chunks, 32 M handles' worth), a chunk keeps one number, its
 * most-used slot's, and all its slots restart there: no slot goes backwards,
 * but a less-used slot skips generations, so a stale handle there can match
 * again after fewer than 2^14 later handles (docs/abi.md, handle generations).
 */
#define GEN_BUCKETS 1024
#define GEN_FULL_MAX ((size_t)64 << 20)

struct gen_record {
	struct gen_record *next;
	uintptr_t base;
	unsigned all;     /* !full: every slot's next generation */
	int full;         /* gen[] holds each slot's (index = slot number) */
	uint16_t gen[];
};

static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER; /* innermost: takes nothing else */
static struct gen_record *gen_table[GEN_BUCKETS];
static size_t gen_full_bytes;

/*
 * Fork: an application thread trimming or compacting another pool may hold
 * gen_lock at that moment; the child's next chunk carve (any pool, a new one
 * too) would wait for it for ever.  Taken last in prepare (common/fork.h):
 * its holders wait for nothing.
 */
static void gen_atfork_prepare(void)
{
	pthread_mutex_lock(&gen_lock);
}

static void gen_atfork_release(void)
{
	pthread_mutex_unlock(&gen_lock);
}

static inline size_t gen_bucket(uintptr_t base)
{
	return (base / HANDLE_CHUNK) % GEN_BUCKETS;
}

/* The record for base, taken out of the table, or NULL. */
static struct gen_record *gen_take(uintptr_t base)
{
	struct gen_record *r, **link;
	pthread_mutex_lock(&gen_lock);
	for (link = &gen_table[gen_bucket(base)]; (r = *link) && r->base != base; link = &r->next)
		;
	if (r) {
		*link = r->next;
		if (r->full)
			gen_full_bytes -= SLOTS_PER_CHUNK + 1;
	}
	pthread_mutex_unlock(&gen_lock);
	return r;
}

/* White-box tests that count carved slots start from fresh addresses (internal.h). */
void handle_gen_forget(void)
{
	pthread_mutex_lock(&gen_lock);
	for (size_t b = 0; b < GEN_BUCKETS; b++) {
		while (gen_table[b]) {
			struct gen_record *r = gen_table[b];
			gen_table[b] = r->next;
			free(r);
		}
	}
	gen_full_bytes = 0;
	pthread_mutex_unlock(&gen_lock);
}

/*
 * The next generation of a slot still live at destroy: one past its handle's,
 * which the object's header (or its huge zspage) records.
 */
static unsigned live_slot_next(const struct zs_pool *pool, unsigned long addr, unsigned long word,
			       unsigned fallback)
{
	unsigned long obj = word & HANDLE_OBJ_MASK, h;
	if (!class_enc_valid(pool, obj_to_class_idx(obj)) || !pages_valid(pool->pages, obj_to_pfn(obj)))
		return fallback;
	struct zspage *zspage = page_zspage(pool, obj_to_pfn(obj));
	if (!zspage || !class_enc_valid(pool, zspage->class_idx))
		return fallback;
	if (zspage->huge) {
		h = zspage->huge_handle;
	} else {
		struct size_class *class = zspage_class(pool, zspage);
		if (obj_to_idx(obj) >= zspage->objs)
			return fallback;
		h = *obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), class->size) & ~OBJ_ALLOCATED_TAG;
	}
	return (h & HANDLE_ADDR_MASK) == addr ? gen_num(handle_gen_next(h)) : fallback;
}

/*
 * Before the chunk at pfn goes back: record where each slot's generations
 * stand.  Slots a shard has not carved yet stand where the chunk started
 * them (its descriptor's word[3], or the shard's record of the address's
 * earlier life); a slot that is neither free nor uncarved is live (a pool
 * destroyed with objects).  Memory failure leaves no record: the chunk's
 * address then restarts like a new one.
 */
static void gen_keep(const struct zs_pool *pool, pfn_t pfn)
{
	uintptr_t carved_end = (uintptr_t)pages_addr(pool->handle_pages, pfn) + HANDLE_CHUNK;
	const struct gen_record *prev = NULL;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		const struct handle_shard *sh = &pool->shards[i];
		if (sh->bump_end && (uintptr_t)sh->bump_end == carved_end) {
			carved_end = (uintptr_t)sh->bump;
			prev = sh->bump_rec;
		}
	}
	char *base = pages_addr(pool->handle_pages, pfn);
	unsigned first = (unsigned)pages_desc(pool->handle_pages, pfn)->word[3];
	int full;
	pthread_mutex_lock(&gen_lock);
	full = gen_full_bytes + SLOTS_PER_CHUNK + 1 <= GEN_FULL_MAX / sizeof(uint16_t);
	if (full)
		gen_full_bytes += SLOTS_PER_CHUNK + 1; /* reserved; given back below on failure */
	pthread_mutex_unlock(&gen_lock);
	struct gen_record *r =
		malloc(sizeof(*r) + (full ? (SLOTS_PER_CHUNK + 1) * sizeof(uint16_t) : 0));
	if (!r) {
		if (full) {
			pthread_mutex_lock(&gen_lock);
			gen_full_bytes -= SLOTS_PER_CHUNK + 1;
			pthread_mutex_unlock(&gen_lock);
		}
		return;
	}
	unsigned most = 0; /* the furthest any slot got from the first generation */
	for (size_t i = 1; i <= SLOTS_PER_CHUNK; i++) {
		uintptr_t a = (uintptr_t)base + i * sizeof(unsigned long);
		unsigned g = prev ? prev->gen[i] : first;
		if (a < carved_end) {
			unsigned long w = atomic_load_explicit((atomic_ulong *)a, memory_order_relaxed);
			g = (w & HANDLE_FREE_BIT) ? gen_num(w)
						  : live_slot_next(pool, a, w, (first + most + 1) & GEN_NUM_MASK);
		}
		if (full)
			r->gen[i] = (uint16_t)g;
		unsigned d = (g - first) & GEN_NUM_MASK;
		if (d > most)
			most = d;
	}
	r->base = (uintptr_t)base;
	r->full = full;
	r->all = (first + most) & GEN_NUM_MASK;
	pthread_mutex_lock(&gen_lock);
	r->next = gen_table[gen_bucket(r->base)];
	gen_table[gen_bucket(r->base)] = r;
	pthread_mutex_unlock(&gen_lock);
}

static void list_init(struct handle_list *l)
{
	l->head = l->tail = 0;
	l->n = 0;
}

static inline unsigned long slot_next(unsigned long h)
{
	return atomic_load_explicit(handle_slot(h), memory_order_relaxed) & HANDLE_ADDR_MASK;
}

/*
 * A free slot holds HANDLE_FREE_BIT (checked mode reads it), the generation
 * its next handle gets, and the next free slot's address.  Relinking keeps
 * the generation.
 */
static inline void slot_set_next(unsigned long h, unsigned long next)
{
	atomic_ulong *w = handle_slot(h);
	unsigned long gen = atomic_load_explicit(w, memory_order_relaxed) & HANDLE_GEN_MASK;
	atomic_store_explicit(w, HANDLE_FREE_BIT | gen | next, memory_order_relaxed);
}

/* The shard's bump chunk is done with: its record, if any, is no longer needed. */
static void shard_drop_rec(struct handle_shard *s)
{
	free(s->bump_rec);
	s->bump_rec = NULL;
}

/*
 * handle_free_lock held (every shard lock too, or none needed): every full
 * magazine's slots written free onto the pool's list and no longer counted
 * live, and every magazine taken off; returns them, linked, for mags_free
 * once the locks are dropped.
 */
static struct handle_mag *mags_flatten(struct zs_pool *pool)
{
	struct handle_mag *all = pool->mag_empty, *m;
	while ((m = pool->mag_full)) {
		pool->mag_full = m->next;
		for (unsigned k = 0; k < ZS_HEAP_HANDLES; k++) {
			unsigned long slot = m->v[k] & HANDLE_ADDR_MASK;
			atomic_store_explicit(handle_slot(slot),
					      HANDLE_FREE_BIT | (m->v[k] & HANDLE_GEN_MASK) |
						      (pool->handle_free.n ? pool->handle_free.head : 0),
					      memory_order_relaxed);
			pool->handle_free.head = slot;
			pool->handle_free.n++;
		}
		pool->shards[0].live -= ZS_HEAP_HANDLES; /* only the shards' sum means anything */
		m->next = all;
		all = m;
	}
	pool->mag_empty = NULL;
	pool->nmag_full = pool->nmags = 0;
	return all;
}

static void mags_free(struct handle_mag *m)
{
	while (m) {
		struct handle_mag *next = m->next;
		free(m);
		m = next;
	}
}

int handles_init(struct zs_pool *pool)
{
	fork_handlers(ZS_FORK_HANDLES, gen_atfork_prepare, gen_atfork_release, gen_atfork_release);
	struct zs_pages_config pc = { .page_size = HANDLE_CHUNK, .chunk_bytes = 16 * HANDLE_CHUNK,
				      .cache_pages = ZS_PAGES_NO_CACHE };
	pool->handle_pages = pages_create(&pc);
	if (!pool->handle_pages)
		return -ENOMEM;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		spin_init_rank(&pool->shards[i].lock, ZS_LOCK_ZS_HANDLE_SHARD);
		list_init(&pool->shards[i].cur);
		list_init(&pool->shards[i].spare);
		pool->shards[i].bump = pool->shards[i].bump_end = NULL;
		pool->shards[i].bump_rec = NULL;
		pool->shards[i].live = 0;
	}
	spin_init_rank(&pool->handle_free_lock, ZS_LOCK_ZS_HANDLE_FREE);
	list_init(&pool->handle_free);
	pool->mag_full = pool->mag_empty = NULL;
	pool->nmag_full = pool->nmags = 0;
	pool->handle_stash = NULL;
	pool->stash_n = pool->stash_cap = 0;
	pthread_mutex_init(&pool->handle_chunks_lock, NULL);
	pool->handle_chunks = NULL;
	pool->nr_handle_chunks = pool->cap_handle_chunks = 0;
	return 0;
}

void handles_destroy(struct zs_pool *pool)
{
	mags_free(mags_flatten(pool));
	/* Handles of a destroyed pool must not name objects of the next one carved here. */
	for (size_t i = 0; i < pool->nr_handle_chunks; i++)
		gen_keep(pool, pool->handle_chunks[i]);
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++)
		shard_drop_rec(&pool->shards[i]);
	if (pool->handle_pages)
		pages_destroy(pool->handle_pages);
	free(pool->handle_chunks);
	free(pool->handle_stash);
	pthread_mutex_destroy(&pool->handle_chunks_lock);
}

/*
 * The shared free slots are a stack of whole batches (the stash), so a shard
 * takes one with a pop under the lock.  Before, the shared side was one list
 * and taking a batch walked 64 slots under the lock to find where it ended:
 * slots last written by the CPU that freed them, so 64 cache misses with
 * every shard waiting behind them.  16 threads of bench_threads' churn (free
 * 20,000, allocate 20,000) spent most of their time there (docs/benchmarks.md
 * "Sixteen cores").  The walk now happens in list_pop, one slot per
 * allocation, on the thread that uses it.  Past STASH_MAX batches (a pool
 * with millions of freed handles) batches chain onto the old list.
 */
#define STASH_MAX ((size_t)1 << 16)

/* Shard lock held: room for more batches in the stash (memory failure: they chain instead). */
static void stash_grow(struct zs_pool *pool, size_t cap)
{
	struct handle_list *n = malloc(cap * sizeof(*n)), *old = NULL;
	if (!n)
		return;
	spin_lock(&pool->handle_free_lock);
	if (pool->stash_cap < cap) {
		if (pool->stash_n)
			memcpy(n, pool->handle_stash, pool->stash_n * sizeof(*n));
		old = pool->handle_stash;
		pool->handle_stash = n;
		pool->stash_cap = cap;
		n = NULL;
	}
	spin_unlock(&pool->handle_free_lock);
	free(n);
	free(old);
}

/* handle_free_lock held: every stashed batch onto the linked list (a trim walks that). */
static void stash_flatten(struct zs_pool *pool)
{
	while (pool->stash_n) {
		const struct handle_list *b = &pool->handle_stash[--pool->stash_n];
		slot_set_next(b->tail, pool->handle_free.n ? pool->handle_free.head : 0);
		pool->handle_free.head = b->head;
		pool->handle_free.n += b->n;
	}
}

/* handle_free_lock held: batch b onto the pool's linked list. */
static inline void free_list_push(struct zs_pool *pool, const struct handle_list *b)
{
	slot_set_next(b->tail, pool->handle_free.n ? pool->handle_free.head : 0);
	pool->handle_free.head = b->head;
	pool->handle_free.n += b->n;
}

/* Shard lock held: hand a full batch to the shared side (O(1)). */
static void give_batch(struct zs_pool *pool, struct handle_list *b)
{
	size_t grow = 0;
	spin_lock(&pool->handle_free_lock);
	if (likely(pool->stash_n < pool->stash_cap)) {
		pool->handle_stash[pool->stash_n++] = *b;
	} else {
		free_list_push(pool, b);
		if (pool->stash_cap < STASH_MAX)
			grow = pool->stash_cap ? 2 * pool->stash_cap : 64;
	}
	spin_unlock(&pool->handle_free_lock);
	list_init(b);
	if (grow)
		stash_grow(pool, grow);
}

/*
 * Shard lock held: take a batch from the stash, else up to a batch from the
 * linked list into *b (that walk touches the slots the allocations are about
 * to touch anyway).
 */
static int take_batch(struct zs_pool *pool, struct handle_list *b)
{
	spin_lock(&pool->handle_free_lock);
	if (likely(pool->stash_n)) {
		*b = pool->handle_stash[--pool->stash_n];
		spin_unlock(&pool->handle_free_lock);
		return 1;
	}
	if (!pool->handle_free.n) {
		spin_unlock(&pool->handle_free_lock);
		return 0;
	}
	unsigned long head = pool->handle_free.head, tail = head, n = 1;
	while (n < ZS_HANDLE_BATCH && n < pool->handle_free.n) {
		tail = slot_next(tail);
		n++;
	}
	pool->handle_free.head = slot_next(tail);
	pool->handle_free.n -= n;
	spin_unlock(&pool->handle_free_lock);
	slot_set_next(tail, 0);
	b->head = head;
	b->tail = tail;
	b->n = n;
	return 1;
}

/* Slow path: give the shard a fresh chunk of never-used slots. */
static int refill_shard(struct zs_pool *pool, struct handle_shard *s)
{
	pfn_t pfn;
	if (pages_alloc(pool->handle_pages, &pfn))
		return -ENOMEM;
	char *base = pages_addr(pool->handle_pages, pfn);
	if (unlikely(((uintptr_t)base + HANDLE_CHUNK - 1) & ~(HANDLE_ADDR_MASK | 7))) {
		/* Mapped above 2^48 (only an mmap hint does that): addresses would overlap the generation. */
		pages_free(pool->handle_pages, pfn);
		return -ENOMEM;
	}
	mutex_lock_ranked(&pool->handle_chunks_lock, ZS_LOCK_ZS_HANDLE_CHUNKS);
	if (pool->nr_handle_chunks == pool->cap_handle_chunks) {
		size_t cap = pool->cap_handle_chunks ? pool->cap_handle_chunks * 2 : 16;
		pfn_t *n = realloc(pool->handle_chunks, cap * sizeof(*n));
		if (!n) {
			mutex_unlock_ranked(&pool->handle_chunks_lock);
			pages_free(pool->handle_pages, pfn);
			return -ENOMEM;
		}
		pool->handle_chunks = n;
		pool->cap_handle_chunks = cap;
	}
	pool->handle_chunks[pool->nr_handle_chunks++] = pfn;
	mutex_unlock_ranked(&pool->handle_chunks_lock);
	shard_drop_rec(s);
	/* An address with a record continues its slots' generations (lazily, as they are carved). */
	struct gen_record *r = gen_take((uintptr_t)base);
	unsigned first = r ? r->all
			   : (unsigned)atomic_fetch_add_explicit(&chunks_carved, 1, memory_order_relaxed) &
				     GEN_NUM_MASK;
	if (r && !r->full) {
		free(r);
		r = NULL;
	}
	s->bump_rec = r;
	pages_desc(pool->handle_pages, pfn)->word[3] = first;
	s->bump = base;
	s->bump_end = s->bump + HANDLE_CHUNK;
	s->bump_gen = handle_gen_of(first);
	/* Slot 0 of each chunk is never handed out, so no handle value is the chunk base. */
	s->bump += sizeof(unsigned long);
	return 0;
}

/* Shard lock held, its cur list empty: spare batch, then the shared list, then fresh slots. */
unsigned long handle_alloc_slow(struct zs_pool *pool, struct handle_shard *s)
{
	assert_internal(spin_held(&s->lock) && s->cur.n == 0);
	if (s->spare.n) {
		s->cur = s->spare;
		list_init(&s->spare);
		return list_pop(&s->cur);
	}
	if (take_batch(pool, &s->cur))
		return list_pop(&s->cur);
	if (s->bump == s->bump_end && refill_shard(pool, s))
		return 0;
	unsigned long h = (unsigned long)s->bump | s->bump_gen;
	if (unlikely(s->bump_rec)) /* the address's earlier life: this slot's own next generation */
		h = (unsigned long)s->bump |
		    handle_gen_of(s->bump_rec->gen[((uintptr_t)s->bump & (HANDLE_CHUNK - 1)) / sizeof(unsigned long)]);
	s->bump += sizeof(unsigned long);
	return h;
}

/*
 * Shard lock held, its cur list full (ZS_HANDLE_BATCH): keep that batch as
 * the spare and pass an older spare on to the shared list, leaving cur empty.
 */
/* noinline: called here too (heap caches); keeps give_batch inlined in it, as before */
__attribute__((noinline)) void handle_free_full(struct zs_pool *pool, struct handle_shard *s)
{
	assert_internal(s->cur.n == ZS_HANDLE_BATCH);
	if (s->spare.n)
		give_batch(pool, &s->spare);
	s->spare = s->cur;
	list_init(&s->cur);
}

/*
 * Checked mode: a slot address inside one of this pool's handle chunks, and
 * no bit set outside the address and the generation.  Whether the
 * generation is the slot's current one is for validate_obj (the header).
 */
int handle_in_pool(const struct zs_pool *pool, unsigned long handle)
{
	unsigned long slot = handle & HANDLE_ADDR_MASK;
	if (!slot || (handle & ~(HANDLE_ADDR_MASK | HANDLE_GEN_MASK)))
		return 0;
	pfn_t pfn = pages_pfn_of(pool->handle_pages, (const void *)slot);
	if (pfn == ZS_PFN_NONE)
		return 0;
	return (slot & (HANDLE_CHUNK - 1)) != 0;
}

/* Checked mode, before any lock: the handle is ours and not free or queued. */
int handle_precheck(struct zs_pool *pool, unsigned long handle, unsigned long *obj)
{
	if (!handle_in_pool(pool, handle))
		return -EINVAL;
	unsigned long v = atomic_load_explicit(handle_slot(handle), memory_order_relaxed);
	if (v & (HANDLE_FREE_BIT | HANDLE_PENDING_BIT))
		return -EINVAL;
	*obj = v;
	if (!class_enc_valid(pool, obj_to_class_idx(v)))
		return -EINVAL;
	return 0;
}

/* ---- giving handle memory back ---- */

/*
 * The descriptor of the chunk a slot lies in (chunks are HANDLE_CHUNK
 * aligned).  Trimming keeps its per-chunk tallies there: word[0] free slots
 * seen, word[1] "keep" (a shard is still carving it), word[2] "give back".
 */
static struct zs_page_desc *slot_chunk(struct zs_pool *pool, unsigned long h)
{
	void *base = (void *)(h & ~(unsigned long)(HANDLE_CHUNK - 1));
	return pages_desc(pool->handle_pages, pages_pfn_of(pool->handle_pages, base));
}

/* Move l's slots that stay onto *out (every lock held). */
static void filter_list(struct zs_pool *pool, struct handle_list *l, struct handle_list *out)
{
	unsigned long h = l->n ? l->head : 0;
	for (unsigned long k = 0; k < l->n; k++) {
		unsigned long next = slot_next(h);
		if (!slot_chunk(pool, h)->word[2]) {
			slot_set_next(h, out->n ? out->head : 0);
			if (!out->n)
				out->tail = h;
			out->head = h;
			out->n++;
		}
		h = next;
	}
	list_init(l);
}

/*
 * Every lock held, objects still live: give back the chunks whose slots are
 * all on free lists.  Cost: a walk of the free lists, so callers only come
 * here when enough is free for a chunk to be possible.
 */
static void reclaim_free_chunks(struct zs_pool *pool)
{
	struct handle_list *lists[2 * ZS_HANDLE_SHARDS + 1];
	int nl = 0;
	assert_internal(spin_held(&pool->handle_free_lock));
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		assert_internal(spin_held(&pool->shards[i].lock));
		lists[nl++] = &pool->shards[i].cur;
		lists[nl++] = &pool->shards[i].spare;
	}
	lists[nl++] = &pool->handle_free;

	for (size_t i = 0; i < pool->nr_handle_chunks; i++) {
		struct zs_page_desc *d = pages_desc(pool->handle_pages, pool->handle_chunks[i]);
		d->word[0] = d->word[1] = d->word[2] = 0;
	}
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		struct handle_shard *s = &pool->shards[i];
		if (s->bump_end && s->bump < s->bump_end)
			slot_chunk(pool, (unsigned long)s->bump)->word[1] = 1;
	}
	for (int i = 0; i < nl; i++) {
		unsigned long h = lists[i]->n ? lists[i]->head : 0;
		for (unsigned long k = 0; k < lists[i]->n; k++, h = slot_next(h))
			slot_chunk(pool, h)->word[0]++;
	}
	size_t give = 0;
	for (size_t i = 0; i < pool->nr_handle_chunks; i++) {
		struct zs_page_desc *d = pages_desc(pool->handle_pages, pool->handle_chunks[i]);
		if (!d->word[1] && d->word[0] == SLOTS_PER_CHUNK) {
			d->word[2] = 1;
			give++;
		}
	}
	if (!give)
		return;
	/* What stays goes to the shared list; shards refill from it on their next alloc. */
	struct handle_list keep;
	list_init(&keep);
	for (int i = 0; i < nl; i++)
		filter_list(pool, lists[i], &keep);
	pool->handle_free = keep;
	mutex_lock_ranked(&pool->handle_chunks_lock, ZS_LOCK_ZS_HANDLE_CHUNKS);
	for (size_t i = 0; i < pool->nr_handle_chunks;) {
		pfn_t pfn = pool->handle_chunks[i];
		if (pages_desc(pool->handle_pages, pfn)->word[2]) {
			gen_keep(pool, pfn); /* every slot free */
			pages_free(pool->handle_pages, pfn);
			pool->handle_chunks[i] = pool->handle_chunks[--pool->nr_handle_chunks];
		} else {
			i++;
		}
	}
	mutex_unlock_ranked(&pool->handle_chunks_lock);
}

/*
 * Give handle memory back.  Once the pool holds no objects, every chunk goes,
 * so a drained pool returns all its memory.  Otherwise chunks whose slots
 * are all free go: always when `eager` (zs_pool_trim, an explicit request),
 * and from compaction only when free slots are at least 4 chunks' worth and
 * twice the live handles, so a steady pool does not pay for the walk.  All
 * shards and the shared list are locked so no handle is being handed out
 * or passed on meanwhile.
 */
void handles_trim(struct zs_pool *pool, int eager)
{
	long live = 0;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++)
		spin_lock(&pool->shards[i].lock);
	spin_lock(&pool->handle_free_lock);
	stash_flatten(pool);
	/* A magazine's slots are free, though the shards count them live until mags_flatten. */
	unsigned long nmag = pool->nmag_full * ZS_HEAP_HANDLES;
	unsigned long nfree = pool->handle_free.n + nmag;
	struct handle_mag *mags = NULL;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		live += pool->shards[i].live;
		nfree += pool->shards[i].cur.n + pool->shards[i].spare.n;
	}
	live -= (long)nmag;
	if (live == 0 && pool->nr_handle_chunks) {
		mags = mags_flatten(pool); /* the records read the slots */
		mutex_lock_ranked(&pool->handle_chunks_lock, ZS_LOCK_ZS_HANDLE_CHUNKS);
		for (size_t i = 0; i < pool->nr_handle_chunks; i++) {
			gen_keep(pool, pool->handle_chunks[i]);
			pages_free(pool->handle_pages, pool->handle_chunks[i]);
		}
		pool->nr_handle_chunks = 0;
		mutex_unlock_ranked(&pool->handle_chunks_lock);
		for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
			list_init(&pool->shards[i].cur);
			list_init(&pool->shards[i].spare);
			pool->shards[i].bump = pool->shards[i].bump_end = NULL;
			shard_drop_rec(&pool->shards[i]);
			pool->shards[i].live = 0;
		}
		list_init(&pool->handle_free);
		pages_trim(pool->handle_pages);
	} else if (live > 0 && (eager ? nfree >= SLOTS_PER_CHUNK
				      : nfree >= 4 * SLOTS_PER_CHUNK && nfree >= 2 * (unsigned long)live)) {
		mags = mags_flatten(pool);
		reclaim_free_chunks(pool);
	} else if (eager) {
		/* Nothing to give back: the empty magazines go at least. */
		mags = pool->mag_empty;
		pool->mag_empty = NULL;
		pool->nmags = pool->nmag_full;
	}
	spin_unlock(&pool->handle_free_lock);
	for (int i = ZS_HANDLE_SHARDS - 1; i >= 0; i--)
		spin_unlock(&pool->shards[i].lock);
	mags_free(mags);
}

/*
 * A thread heap's handle cache (owned.c) is an array of ready handles.
 * Values come from a magazine, else from the thread's shard: its cur or
 * spare list, else a pool batch or never-used slots (handle_alloc_slow;
 * stopping at the first pool batch, which the next refill takes whole, so
 * take_batch keeps its one caller).  The shard counts every slot it hands
 * a heap as live, and counts it free again only when it comes back as a
 * list, so no trim gives back a chunk whose slots a heap or a magazine
 * holds.
 */
unsigned handle_take_values(struct zs_pool *pool, unsigned long *v)
{
	struct handle_mag *m;
	spin_lock(&pool->handle_free_lock);
	if ((m = pool->mag_full)) {
		pool->mag_full = m->next;
		pool->nmag_full--;
		memcpy(v, m->v, sizeof(m->v));
		m->next = pool->mag_empty;
		pool->mag_empty = m;
		spin_unlock(&pool->handle_free_lock);
		return ZS_HEAP_HANDLES;
	}
	spin_unlock(&pool->handle_free_lock);
	struct handle_shard *s = handle_shard_pick(pool);
	unsigned n = 0;
	spin_lock(&s->lock);
	struct handle_list *l = s->cur.n ? &s->cur : s->spare.n ? &s->spare : NULL;
	if (l) {
		/* A list's slots hold their next generation and the link. */
		unsigned long slot = l->head;
		for (; n < l->n; n++) {
			unsigned long w = atomic_load_explicit(handle_slot(slot), memory_order_relaxed);
			v[n] = slot | (w & HANDLE_GEN_MASK);
			slot = w & HANDLE_ADDR_MASK;
		}
		list_init(l);
	} else {
		while (n < ZS_HANDLE_BATCH / 2) {
			unsigned long h = handle_alloc_slow(pool, s);
			if (!h)
				break;
			/* ZS_DEBUG: free at its generation, as the heap's cache keeps slots (internal.h). */
			if (ZS_DEBUG_ON)
				atomic_store_explicit(handle_slot(h), HANDLE_FREE_BIT | (h & HANDLE_GEN_MASK),
						      memory_order_relaxed);
			v[n++] = h;
			if (s->cur.n)
				break;
		}
	}
	s->live += (long)n;
	spin_unlock(&s->lock);
	return n;
}

/* Ready handles onto a list, each slot written free at its generation (the slots leave a heap). */
static void values_to_list(const unsigned long *v, unsigned n, struct handle_list *l)
{
	for (unsigned k = 0; k < n; k++) {
		unsigned long slot = v[k] & HANDLE_ADDR_MASK;
		atomic_store_explicit(handle_slot(slot),
				      HANDLE_FREE_BIT | (v[k] & HANDLE_GEN_MASK) | (l->n ? l->head : 0),
				      memory_order_relaxed);
		if (!l->n)
			l->tail = slot;
		l->head = slot;
		l->n++;
	}
}

void handle_give_values(struct zs_pool *pool, const unsigned long *v, unsigned n, int may_grow)
{
	if (n == ZS_HEAP_HANDLES) {
		struct handle_mag *m;
		int grow = 0;
		spin_lock(&pool->handle_free_lock);
		if ((m = pool->mag_empty))
			pool->mag_empty = m->next;
		else if ((grow = may_grow && pool->nmags < HANDLE_MAGS_MAX))
			pool->nmags++; /* reserved: a new one is made with no lock held */
		spin_unlock(&pool->handle_free_lock);
		if (grow && !(m = malloc(sizeof(*m)))) {
			spin_lock(&pool->handle_free_lock);
			pool->nmags--;
			spin_unlock(&pool->handle_free_lock);
		}
		if (m) {
			memcpy(m->v, v, sizeof(m->v));
			spin_lock(&pool->handle_free_lock);
			m->next = pool->mag_full;
			pool->mag_full = m;
			pool->nmag_full++;
			spin_unlock(&pool->handle_free_lock);
			return;
		}
	}
	/* No magazine (a part-full cache, the cap reached, no memory, or a caller that must not
	 * malloc: a revoker on the purge thread): the shard's lists. */
	struct handle_shard *s = handle_shard_pick(pool);
	spin_lock(&s->lock);
	s->live -= (long)n;
	for (; n >= ZS_HANDLE_BATCH; v += ZS_HANDLE_BATCH, n -= ZS_HANDLE_BATCH) {
		struct handle_list l;
		list_init(&l);
		values_to_list(v, ZS_HANDLE_BATCH, &l);
		if (!may_grow) {
			/* A caller that must not malloc (the stash may grow): the pool's list. */
			spin_lock(&pool->handle_free_lock);
			free_list_push(pool, &l);
			spin_unlock(&pool->handle_free_lock);
			continue;
		}
		/* A full batch becomes the shard's spare, its old spare going to the pool; through
		 * handle_free_full, so give_batch keeps its one caller (and its inlining). */
		struct handle_list cur = s->cur;
		s->cur = l;
		handle_free_full(pool, s);
		s->cur = cur;
	}
	for (unsigned k = 0; k < n; k++) {
		if (s->cur.n == ZS_HANDLE_BATCH)
			handle_free_full(pool, s);
		values_to_list(&v[k], 1, &s->cur);
	}
	spin_unlock(&s->lock);
}
