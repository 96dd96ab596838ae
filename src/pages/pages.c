/*
 * Page provider (owns include/zs/pages.h): the one place pool memory comes
 * from the OS and goes back to it.
 *
 * Layout.  Pool memory is mmap'd in chunks of chunk_bytes; a chunk occupies
 * a "slot" in a fixed table created with the pool, and a page's number is
 * slot * pages_per_chunk + index, so pfns stay small and dense and a freed
 * slot is reused by the next chunk.  Because the table never moves or grows,
 * pfn -> address and pfn -> descriptor are a shift, a mask and one load of
 * the slot entry, with no lock: that is the allocator's hottest path.
 *
 * Every slot that was ever used keeps a small mmap'd "meta" region for as
 * long as the pool lives: the 64-byte descriptors, one state byte per page
 * and the chunk's allocation bitmap.  Keeping it (and only dropping its
 * memory with MADV_DONTNEED when the chunk is unmapped) means that a stale
 * or garbage pfn handed to zs_pages_valid() reads zeros instead of faulting.
 *
 * Freeing.  A freed page first goes to a small LIFO cache of hot pages,
 * threaded through the free pages' own descriptors (so taking one out of the
 * middle, which a run allocation may need, is O(1)).  When the cache is
 * full the page is MADV_DONTNEED'd (outside the lock: the syscall and its
 * TLB shootdown are the slow part; neighbouring pages freed together share
 * one call) and a chunk left with no page in use and none cached is
 * unmapped, so RSS really drops.  Single, run and bulk frees share one path,
 * free_pages().
 *
 * Bookkeeping runs under one mutex; lookups use atomics only.
 */
#include "zs/pages.h"
#include "pages/lookup.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Per-page states; FREE must be 0 so DONTNEED'd meta reads as free. */
enum { PG_FREE = 0, PG_IN_USE = 1, PG_CACHED = 2, PG_RELEASING = 3 };

#define ZS_MAX_RUN 64u
/* The slot table describes ZS_PAGES_MAX_SPAN bytes; only touched entries cost RSS. */
#define ZS_MIN_SLOTS 64u
#define ZS_MAX_SLOTS (1u << 20)

/* Bookkeeping, only touched under the lock. */
struct zs_chunk {
	unsigned ninuse;   /* bits set in the bitmap (in use or being released) */
	unsigned ncached;  /* free pages of this chunk sitting in the hot cache */
};

struct zs_pages {
	struct zs_pages_lookup lk;  /* first: see pages/lookup.h */
	/* Read-only after create. */
	zs_pfn_t pfn_limit;     /* nslots << ppc_shift */
	size_t state_off;       /* byte offset of the state array in a meta region */
	size_t page_size;
	size_t ppc;
	size_t nslots;
	size_t chunk_bytes;
	size_t map_bytes;       /* what we mmap per chunk (over-sized for alignment) */
	size_t bits_off;        /* byte offset of the bitmap in a meta region */
	size_t meta_bytes;
	size_t os_page;
	void *tables;           /* one mapping holding every per-slot array */
	size_t tables_bytes;

	pthread_mutex_t lock;
	struct zs_chunk *chunks;
	uint64_t *mapped_bm;    /* slot has a chunk mapped */
	uint64_t *partial_bm;   /* mapped chunk has a page not in use */
	size_t slot_words;      /* words of the two bitmaps worth scanning (high-water) */
	size_t partial_lo;      /* no partial bit below this word */

	zs_pfn_t cache_head;
	size_t ncached, cache_cap;

	size_t max_pages;
	_Atomic size_t in_use;
	size_t peak, chunks_mapped;
	uint64_t allocs, frees, failed;

	bool fi_on, fi_forever;
	uint64_t fi_after, fi_count;

	/*
	 * Address -> chunk for zs_pages_pfn_of: chunk bases sorted, read under
	 * a seqlock so the lookup takes no lock either.
	 */
	_Atomic unsigned seq;
	_Atomic size_t nsorted;
	_Atomic(uintptr_t) *sorted_base;
	_Atomic(uint32_t) *sorted_slot;
};

static inline unsigned ilog2(size_t v)
{
	return (unsigned)(63 - __builtin_clzll((unsigned long long)v));
}

static inline bool is_pow2(size_t v)
{
	return v && !(v & (v - 1));
}

static inline struct zs_page_desc *meta_desc(const struct zs_pages *p, size_t slot)
{
	return atomic_load_explicit(&p->lk.slots[slot].meta, memory_order_acquire);
}

static inline _Atomic uint8_t *meta_state(const struct zs_pages *p, struct zs_page_desc *m)
{
	return (_Atomic uint8_t *)((char *)m + p->state_off);
}

static inline uint64_t *meta_bits(const struct zs_pages *p, struct zs_page_desc *m)
{
	return (uint64_t *)((char *)m + p->bits_off);
}

static inline void bm_set(uint64_t *bm, size_t i) { bm[i >> 6] |= 1ull << (i & 63); }
static inline void bm_clr(uint64_t *bm, size_t i) { bm[i >> 6] &= ~(1ull << (i & 63)); }

static inline size_t pfn_slot(const struct zs_pages *p, zs_pfn_t pfn)
{
	return (size_t)(pfn >> p->lk.ppc_shift);
}

static inline size_t pfn_idx(const struct zs_pages *p, zs_pfn_t pfn)
{
	return (size_t)(pfn & p->lk.ppc_mask);
}

static inline _Atomic uint8_t *pfn_state(const struct zs_pages *p, zs_pfn_t pfn)
{
	return meta_state(p, meta_desc(p, pfn_slot(p, pfn))) + pfn_idx(p, pfn);
}

static inline void set_state(const struct zs_pages *p, zs_pfn_t pfn, uint8_t st)
{
	atomic_store_explicit(pfn_state(p, pfn), st, memory_order_relaxed);
}

static inline uint8_t get_state(const struct zs_pages *p, zs_pfn_t pfn)
{
	return atomic_load_explicit(pfn_state(p, pfn), memory_order_relaxed);
}

/* ---- configuration -------------------------------------------------- */

size_t zs_pages_page_size(const struct zs_pages *p)
{
	return p ? p->page_size : 0;
}

struct zs_pages *zs_pages_create(const struct zs_pages_config *cfg)
{
	struct zs_pages_config c = { 0 };
	long osp = sysconf(_SC_PAGESIZE);
	size_t os_page = osp > 0 ? (size_t)osp : 4096;

	if (cfg)
		c = *cfg;
	if (!c.page_size)
		c.page_size = 4096;
	if (!is_pow2(c.page_size) || c.page_size < 4096 || c.page_size > 65536 ||
	    c.page_size < os_page)
		goto inval;
	if (!c.chunk_bytes) {
		c.chunk_bytes = (size_t)2 << 20;
		if (c.chunk_bytes < 16 * c.page_size)
			c.chunk_bytes = 16 * c.page_size;
	}
	/* Power-of-two pages per chunk keeps pfn -> slot a shift. */
	if (!is_pow2(c.chunk_bytes) || c.chunk_bytes < c.page_size ||
	    c.chunk_bytes > ZS_PAGES_MAX_CHUNK)
		goto inval;
	/* Counts past the span are nonsense and would overflow page -> byte arithmetic. */
	if (c.max_pages > ZS_PAGES_MAX_SPAN / c.page_size)
		goto inval;
	if (c.cache_pages != ZS_PAGES_NO_CACHE && c.cache_pages > ZS_PAGES_MAX_SPAN / c.page_size)
		goto inval;
	if (c.cache_pages == ZS_PAGES_NO_CACHE)
		c.cache_pages = 0;
	else if (!c.cache_pages)
		c.cache_pages = (256u << 10) / c.page_size;

	struct zs_pages *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->page_size = c.page_size;
	p->lk.page_shift = ilog2(c.page_size);
	p->chunk_bytes = c.chunk_bytes;
	p->ppc = c.chunk_bytes / c.page_size;
	p->lk.ppc_shift = ilog2(p->ppc);
	p->lk.ppc_mask = p->ppc - 1;
	p->os_page = os_page;
	/* mmap only promises OS-page alignment; over-map so we can align. */
	p->map_bytes = c.chunk_bytes + (c.page_size > os_page ? c.page_size - os_page : 0);

	size_t nslots = ZS_PAGES_MAX_SPAN / c.chunk_bytes;
	if (nslots < ZS_MIN_SLOTS)
		nslots = ZS_MIN_SLOTS;
	if (nslots > ZS_MAX_SLOTS)
		nslots = ZS_MAX_SLOTS;
	p->nslots = nslots;
	p->pfn_limit = (zs_pfn_t)nslots << p->lk.ppc_shift;

	size_t bm_words = (p->ppc + 63) / 64;
	p->state_off = p->ppc * sizeof(struct zs_page_desc);
	p->bits_off = (p->state_off + p->ppc + 7) & ~(size_t)7;
	p->meta_bytes = (p->bits_off + bm_words * 8 + os_page - 1) & ~(os_page - 1);

	/* One lazily-faulted mapping for all per-slot arrays (8-byte aligned pieces). */
	size_t slot_bm_words = (nslots + 63) / 64;
	size_t off_slots = 0;
	size_t off_chunks = off_slots + nslots * sizeof(struct zs_pages_slot);
	size_t off_mapped = off_chunks + nslots * sizeof(struct zs_chunk);
	size_t off_partial = off_mapped + slot_bm_words * 8;
	size_t off_sbase = off_partial + slot_bm_words * 8;
	size_t off_sslot = off_sbase + nslots * sizeof(uintptr_t);
	size_t total = off_sslot + nslots * sizeof(uint32_t);
	total = (total + os_page - 1) & ~(os_page - 1);
	char *t = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (t == MAP_FAILED) {
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	p->tables = t;
	p->tables_bytes = total;
	p->lk.slots = (struct zs_pages_slot *)(t + off_slots);
	p->chunks = (struct zs_chunk *)(t + off_chunks);
	p->mapped_bm = (uint64_t *)(t + off_mapped);
	p->partial_bm = (uint64_t *)(t + off_partial);
	p->sorted_base = (_Atomic(uintptr_t) *)(t + off_sbase);
	p->sorted_slot = (_Atomic(uint32_t) *)(t + off_sslot);

	if (pthread_mutex_init(&p->lock, NULL)) {
		munmap(t, total);
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	p->cache_head = ZS_PFN_NONE;
	p->cache_cap = c.cache_pages;
	p->max_pages = c.max_pages;
	atomic_init(&p->in_use, 0);
	atomic_init(&p->seq, 0);
	atomic_init(&p->nsorted, 0);
	return p;
inval:
	errno = EINVAL;
	return NULL;
}

void zs_pages_destroy(struct zs_pages *p)
{
	if (!p)
		return;
	for (size_t s = 0; s < p->slot_words * 64 && s < p->nslots; s++) {
		char *base = atomic_load_explicit(&p->lk.slots[s].base, memory_order_relaxed);
		struct zs_page_desc *m = atomic_load_explicit(&p->lk.slots[s].meta, memory_order_relaxed);
		if (base)
			munmap(base, p->chunk_bytes);
		if (m)
			munmap(m, p->meta_bytes);
	}
	pthread_mutex_destroy(&p->lock);
	munmap(p->tables, p->tables_bytes);
	free(p);
}

/* ---- lookups (no lock) ----------------------------------------------- */

void *zs_pages_addr(const struct zs_pages *p, zs_pfn_t pfn)
{
	return zs_page_addr(p, pfn);
}

struct zs_page_desc *zs_pages_desc(const struct zs_pages *p, zs_pfn_t pfn)
{
	return zs_page_desc(p, pfn);
}

int zs_pages_valid(const struct zs_pages *p, zs_pfn_t pfn)
{
	if (!p || pfn >= p->pfn_limit)
		return 0;
	struct zs_page_desc *m = meta_desc(p, pfn_slot(p, pfn));
	if (!m)
		return 0;
	return atomic_load_explicit(meta_state(p, m) + pfn_idx(p, pfn), memory_order_relaxed) ==
	       PG_IN_USE;
}

zs_pfn_t zs_pages_pfn_of(const struct zs_pages *p, const void *addr)
{
	if (!p)
		return ZS_PFN_NONE;
	uintptr_t a = (uintptr_t)addr;
	uintptr_t base;
	uint32_t slot;
	bool found;
	unsigned s1, s2 = 0;

	do {
		s1 = atomic_load_explicit(&((struct zs_pages *)p)->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		size_t lo = 0, hi = atomic_load_explicit(&((struct zs_pages *)p)->nsorted,
							 memory_order_acquire);
		if (hi > p->nslots)
			hi = p->nslots;
		/* Last base <= a. */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (atomic_load_explicit(&p->sorted_base[mid], memory_order_acquire) <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		found = lo > 0;
		base = found ? atomic_load_explicit(&p->sorted_base[lo - 1], memory_order_acquire) : 0;
		slot = found ? atomic_load_explicit(&p->sorted_slot[lo - 1], memory_order_acquire) : 0;
		s2 = atomic_load_explicit(&((struct zs_pages *)p)->seq, memory_order_relaxed);
	} while ((s1 & 1) || s1 != s2);

	if (!found || a - base >= p->chunk_bytes || slot >= p->nslots)
		return ZS_PFN_NONE;
	zs_pfn_t pfn = ((zs_pfn_t)slot << p->lk.ppc_shift) + ((a - base) >> p->lk.page_shift);
	return zs_pages_valid(p, pfn) ? pfn : ZS_PFN_NONE;
}

/* ---- chunk map / unmap (lock held) ------------------------------------ */

/*
 * Seqlock without fences (gcc's TSan rejects them): the odd count is stored
 * first and every data store is a release, so a reader whose acquire loads
 * see any new data also sees the count move and retries.
 */
static void sorted_begin(struct zs_pages *p)
{
	atomic_fetch_add_explicit(&p->seq, 1, memory_order_relaxed);
}

static void sorted_end(struct zs_pages *p)
{
	atomic_fetch_add_explicit(&p->seq, 1, memory_order_release);
}

static void sorted_insert(struct zs_pages *p, uintptr_t base, uint32_t slot)
{
	size_t n = atomic_load_explicit(&p->nsorted, memory_order_relaxed), i = n;

	sorted_begin(p);
	while (i > 0 && atomic_load_explicit(&p->sorted_base[i - 1], memory_order_relaxed) > base) {
		atomic_store_explicit(&p->sorted_base[i],
				      atomic_load_explicit(&p->sorted_base[i - 1], memory_order_relaxed),
				      memory_order_release);
		atomic_store_explicit(&p->sorted_slot[i],
				      atomic_load_explicit(&p->sorted_slot[i - 1], memory_order_relaxed),
				      memory_order_release);
		i--;
	}
	atomic_store_explicit(&p->sorted_base[i], base, memory_order_release);
	atomic_store_explicit(&p->sorted_slot[i], slot, memory_order_release);
	atomic_store_explicit(&p->nsorted, n + 1, memory_order_release);
	sorted_end(p);
}

static void sorted_remove(struct zs_pages *p, uintptr_t base)
{
	size_t n = atomic_load_explicit(&p->nsorted, memory_order_relaxed), i = 0;

	while (i < n && atomic_load_explicit(&p->sorted_base[i], memory_order_relaxed) != base)
		i++;
	if (i == n)
		return;
	sorted_begin(p);
	for (; i + 1 < n; i++) {
		atomic_store_explicit(&p->sorted_base[i],
				      atomic_load_explicit(&p->sorted_base[i + 1], memory_order_relaxed),
				      memory_order_release);
		atomic_store_explicit(&p->sorted_slot[i],
				      atomic_load_explicit(&p->sorted_slot[i + 1], memory_order_relaxed),
				      memory_order_release);
	}
	atomic_store_explicit(&p->nsorted, n - 1, memory_order_release);
	sorted_end(p);
}

static void partial_set(struct zs_pages *p, size_t slot)
{
	bm_set(p->partial_bm, slot);
	if ((slot >> 6) < p->partial_lo)
		p->partial_lo = slot >> 6;
}

/* Map a chunk into the lowest free slot (keeps pfns dense). Returns slot or -1. */
static long chunk_map(struct zs_pages *p)
{
	size_t words = (p->nslots + 63) / 64, slot = p->nslots;

	for (size_t w = 0; w < words; w++) {
		if (~p->mapped_bm[w]) {
			slot = w * 64 + (size_t)__builtin_ctzll(~p->mapped_bm[w]);
			break;
		}
	}
	if (slot >= p->nslots)
		return -1;

	struct zs_page_desc *m = atomic_load_explicit(&p->lk.slots[slot].meta, memory_order_relaxed);
	if (!m) {
		void *mm = mmap(NULL, p->meta_bytes, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mm == MAP_FAILED)
			return -1;
		m = mm;
		atomic_store_explicit(&p->lk.slots[slot].meta, m, memory_order_release);
		/* destroy() walks slot_words; count the slot as soon as it owns a mapping. */
		if ((slot >> 6) + 1 > p->slot_words)
			p->slot_words = (slot >> 6) + 1;
	}

	char *raw = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (raw == MAP_FAILED)
		return -1;
	char *base = raw;
	if (p->map_bytes != p->chunk_bytes) {
		uintptr_t a = ((uintptr_t)raw + p->page_size - 1) & ~(uintptr_t)(p->page_size - 1);
		base = (char *)a;
		if (base > raw)
			munmap(raw, (size_t)(base - raw));
		size_t tail = (size_t)(raw + p->map_bytes - (base + p->chunk_bytes));
		if (tail)
			munmap(base + p->chunk_bytes, tail);
	}
	/*
	 * A huge page would make one touched page cost 2 MiB of RSS and defeat
	 * the per-page DONTNEED; pool pages are meant to be returned singly.
	 */
	madvise(base, p->chunk_bytes, MADV_NOHUGEPAGE);

	p->chunks[slot].ninuse = 0;
	p->chunks[slot].ncached = 0;
	bm_set(p->mapped_bm, slot);
	partial_set(p, slot);
	atomic_store_explicit(&p->lk.slots[slot].base, base, memory_order_relaxed);
	sorted_insert(p, (uintptr_t)base, (uint32_t)slot);
	p->chunks_mapped++;
	return (long)slot;
}

/* Detach an empty chunk; returns its base for the caller to munmap unlocked. */
static char *chunk_unmap(struct zs_pages *p, size_t slot)
{
	char *base = atomic_load_explicit(&p->lk.slots[slot].base, memory_order_relaxed);
	struct zs_page_desc *m = atomic_load_explicit(&p->lk.slots[slot].meta, memory_order_relaxed);

	sorted_remove(p, (uintptr_t)base);
	atomic_store_explicit(&p->lk.slots[slot].base, NULL, memory_order_relaxed);
	bm_clr(p->mapped_bm, slot);
	bm_clr(p->partial_bm, slot);
	/* All states are FREE and all bits clear, which is what zeroed memory says. */
	madvise(m, p->meta_bytes, MADV_DONTNEED);
	p->chunks_mapped--;
	return base;
}

/* ---- hot cache (lock held) -------------------------------------------- */

static void cache_unlink(struct zs_pages *p, zs_pfn_t pfn)
{
	struct zs_page_desc *d = zs_page_desc(p, pfn);
	zs_pfn_t prev = (zs_pfn_t)d->word[0], next = d->next;

	if (prev != ZS_PFN_NONE)
		zs_page_desc(p, prev)->next = next;
	else
		p->cache_head = next;
	if (next != ZS_PFN_NONE)
		zs_page_desc(p, next)->word[0] = (uintptr_t)prev;
	p->ncached--;
	p->chunks[pfn_slot(p, pfn)].ncached--;
}

static void cache_push(struct zs_pages *p, zs_pfn_t pfn)
{
	struct zs_page_desc *d = zs_page_desc(p, pfn);

	d->word[0] = (uintptr_t)ZS_PFN_NONE;
	d->next = p->cache_head;
	if (p->cache_head != ZS_PFN_NONE)
		zs_page_desc(p, p->cache_head)->word[0] = (uintptr_t)pfn;
	p->cache_head = pfn;
	p->ncached++;
	p->chunks[pfn_slot(p, pfn)].ncached++;
}

/* ---- allocation ------------------------------------------------------- */

/* Lock held. Decides limit / injected failure for an allocation of n pages. */
static bool alloc_allowed(struct zs_pages *p, unsigned n)
{
	size_t used = atomic_load_explicit(&p->in_use, memory_order_relaxed);

	if (p->max_pages && used + n > p->max_pages)
		return false;
	if (p->fi_on && p->fi_after == 0) {
		if (!p->fi_forever && --p->fi_count == 0)
			p->fi_on = false;
		return false;
	}
	return true;
}

/* Lock held: mark [first, first+n) of one chunk in use. */
static void take_pages(struct zs_pages *p, zs_pfn_t first, unsigned n)
{
	size_t slot = pfn_slot(p, first);
	struct zs_page_desc *m = meta_desc(p, slot);
	uint64_t *bits = meta_bits(p, m);

	for (unsigned i = 0; i < n; i++) {
		zs_pfn_t pfn = first + i;
		if (get_state(p, pfn) == PG_CACHED)
			cache_unlink(p, pfn);
		bm_set(bits, pfn_idx(p, pfn));
		set_state(p, pfn, PG_IN_USE);
	}
	p->chunks[slot].ninuse += n;
	if (p->chunks[slot].ninuse == p->ppc)
		bm_clr(p->partial_bm, slot);

	size_t used = atomic_load_explicit(&p->in_use, memory_order_relaxed) + n;
	atomic_store_explicit(&p->in_use, used, memory_order_relaxed);
	if (used > p->peak)
		p->peak = used;
	p->allocs++;
	if (p->fi_on)
		p->fi_after--;
}

/* First n clear bits in a row within nbits, or -1. */
/* First bit >= i that is clear (want 0) or set (want 1), or nbits; a word at a time. */
static size_t next_bit(const uint64_t *bits, size_t nbits, size_t i, int want)
{
	size_t w = i >> 6, nwords = (nbits + 63) >> 6;
	uint64_t flip = want ? 0 : ~0ull;

	if (i >= nbits)
		return nbits;
	uint64_t word = (bits[w] ^ flip) & (~0ull << (i & 63));
	while (!word) {
		if (++w >= nwords)
			return nbits;
		word = bits[w] ^ flip;
	}
	size_t r = (w << 6) + (size_t)__builtin_ctzll(word);
	return r < nbits ? r : nbits;
}

/* Lowest run of n clear bits, or -1: jumps from clear run to clear run. */
static long find_clear_run(const uint64_t *bits, size_t nbits, unsigned n)
{
	for (size_t i = next_bit(bits, nbits, 0, 0); i < nbits;) {
		size_t end = next_bit(bits, nbits, i, 1);
		if (end - i >= n)
			return (long)i;
		i = next_bit(bits, nbits, end, 0);
	}
	return -1;
}

/* Lock held: lowest partial chunk with at least n free pages in a row. */
static bool find_in_partial(struct zs_pages *p, unsigned n, zs_pfn_t *out)
{
	for (size_t w = p->partial_lo; w < p->slot_words; w++) {
		uint64_t word = p->partial_bm[w];
		if (!word) {
			if (w == p->partial_lo)
				p->partial_lo = w + 1;
			continue;
		}
		while (word) {
			size_t slot = w * 64 + (size_t)__builtin_ctzll(word);
			word &= word - 1;
			if (p->ppc - p->chunks[slot].ninuse < n)
				continue;
			long idx = find_clear_run(meta_bits(p, meta_desc(p, slot)), p->ppc, n);
			if (idx >= 0) {
				*out = ((zs_pfn_t)slot << p->lk.ppc_shift) + (zs_pfn_t)idx;
				return true;
			}
		}
	}
	return false;
}

static int alloc_locked(struct zs_pages *p, unsigned n, zs_pfn_t *out)
{
	zs_pfn_t pfn;

	if (!alloc_allowed(p, n))
		return -ENOMEM;
	if (n == 1 && p->cache_head != ZS_PFN_NONE) {
		pfn = p->cache_head;
	} else if (!find_in_partial(p, n, &pfn)) {
		long slot = chunk_map(p);
		if (slot < 0)
			return -ENOMEM;
		pfn = (zs_pfn_t)slot << p->lk.ppc_shift;
	}
	take_pages(p, pfn, n);
	*out = pfn;
	return 0;
}

int zs_pages_alloc_run(struct zs_pages *p, unsigned n, zs_pfn_t *first)
{
	if (!p || !first || n == 0 || n > ZS_MAX_RUN)
		return -EINVAL;
	if (n > p->ppc) {
		pthread_mutex_lock(&p->lock);
		p->failed++;
		pthread_mutex_unlock(&p->lock);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->lock);
	int rc = alloc_locked(p, n, first);
	if (rc)
		p->failed++;
	pthread_mutex_unlock(&p->lock);
	if (rc)
		return rc;
	/* The pages are ours now: nobody else writes these descriptors. */
	memset(zs_page_desc(p, *first), 0, n * sizeof(struct zs_page_desc));
	return 0;
}

int zs_pages_alloc(struct zs_pages *p, zs_pfn_t *pfn)
{
	return zs_pages_alloc_run(p, 1, pfn);
}

/* ---- freeing ---------------------------------------------------------- */

static void sort_pfns(zs_pfn_t *v, unsigned n)
{
	/* n <= ZS_FREE_BULK_MAX and usually a zspage's few pages, nearly sorted. */
	for (unsigned i = 1; i < n; i++) {
		zs_pfn_t x = v[i];
		unsigned j = i;
		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

_Static_assert(ZS_MAX_RUN <= ZS_FREE_BULK_MAX, "a run must fit one free_pages call");

/*
 * The one free path, for single pages, runs and bulk frees alike.  Pages go
 * to the hot cache while it has room.  The rest go back to the OS: marked
 * RELEASING with their bitmap bit still set, so the chunk can neither be
 * reused nor unmapped under the madvise, which runs outside the lock (the
 * syscall and its TLB shootdown are the slow part) with neighbouring pages
 * sharing one call; then they are marked free and a chunk left empty is
 * unmapped.  Two lock rounds per call, however many pages.
 *
 * whole: the pfns are one run, freed all or not at all (any invalid page
 * and the run is ignored) and counted as one free.  Otherwise each double,
 * foreign or repeated pfn is skipped and every page freed counts.
 */
static void free_pages(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n, bool whole)
{
	zs_pfn_t rel[ZS_FREE_BULK_MAX];
	char *unmap[ZS_FREE_BULK_MAX];
	unsigned nrel = 0, nfreed = 0, nunmap = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; whole && i < n; i++) {
		if (!zs_pages_valid(p, pfns[i])) {
			pthread_mutex_unlock(&p->lock);
			return;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		zs_pfn_t pfn = pfns[i];
		if (!zs_pages_valid(p, pfn))
			continue;
		nfreed++;
		if (p->ncached < p->cache_cap) {
			size_t slot = pfn_slot(p, pfn);
			bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
			set_state(p, pfn, PG_CACHED);
			cache_push(p, pfn);
			p->chunks[slot].ninuse--;
			partial_set(p, slot);
		} else {
			set_state(p, pfn, PG_RELEASING);
			rel[nrel++] = pfn;
		}
	}
	atomic_store_explicit(&p->in_use,
			      atomic_load_explicit(&p->in_use, memory_order_relaxed) - nfreed,
			      memory_order_relaxed);
	p->frees += whole ? 1 : nfreed;
	pthread_mutex_unlock(&p->lock);
	if (nrel == 0)
		return;

	sort_pfns(rel, nrel);
	for (unsigned i = 0; i < nrel;) {
		unsigned j = i + 1;
		while (j < nrel && rel[j] == rel[j - 1] + 1 && pfn_slot(p, rel[j]) == pfn_slot(p, rel[i]))
			j++;
		madvise(zs_page_addr(p, rel[i]), (size_t)(j - i) << p->lk.page_shift, MADV_DONTNEED);
		i = j;
	}

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < nrel; i++) {
		zs_pfn_t pfn = rel[i];
		size_t slot = pfn_slot(p, pfn);
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_FREE);
		p->chunks[slot].ninuse--;
		partial_set(p, slot);
		if (p->chunks[slot].ninuse == 0 && p->chunks[slot].ncached == 0)
			unmap[nunmap++] = chunk_unmap(p, slot);
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < nunmap; i++)
		munmap(unmap[i], p->chunk_bytes);
}

void zs_pages_free(struct zs_pages *p, zs_pfn_t pfn)
{
	if (p)
		free_pages(p, &pfn, 1, true);
}

void zs_pages_free_run(struct zs_pages *p, zs_pfn_t first, unsigned n)
{
	zs_pfn_t run[ZS_MAX_RUN];

	/* Only what zs_pages_alloc_run hands out: up to ZS_MAX_RUN pages of one chunk. */
	if (!p || n == 0 || n > ZS_MAX_RUN || n > p->ppc || first >= p->pfn_limit ||
	    first + n > p->pfn_limit || pfn_slot(p, first) != pfn_slot(p, first + n - 1))
		return;
	for (unsigned i = 0; i < n; i++)
		run[i] = first + i;
	free_pages(p, run, n, true);
}

void zs_pages_free_bulk(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n)
{
	if (!p || !pfns)
		return;
	/* Bounded stack use: larger batches go in pieces. */
	for (unsigned i = 0; i < n; i += ZS_FREE_BULK_MAX)
		free_pages(p, pfns + i, n - i < ZS_FREE_BULK_MAX ? n - i : ZS_FREE_BULK_MAX, false);
}

/* ---- maintenance & stats ---------------------------------------------- */

void zs_pages_trim(struct zs_pages *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	while (p->cache_head != ZS_PFN_NONE) {
		zs_pfn_t pfn = p->cache_head;
		size_t slot = pfn_slot(p, pfn);
		cache_unlink(p, pfn);
		set_state(p, pfn, PG_FREE);
		if (p->chunks[slot].ninuse == 0 && p->chunks[slot].ncached == 0) {
			char *base = chunk_unmap(p, slot);
			munmap(base, p->chunk_bytes);
		} else if (p->chunks[slot].ninuse) {
			/* An empty chunk's pages go with its munmap; skip their madvise. */
			madvise(zs_page_addr(p, pfn), p->page_size, MADV_DONTNEED);
		}
	}
	pthread_mutex_unlock(&p->lock);
}

void zs_pages_get_stats(const struct zs_pages *p, struct zs_pages_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!p)
		return;
	struct zs_pages *w = (struct zs_pages *)p;
	pthread_mutex_lock(&w->lock);
	st->page_size = p->page_size;
	st->pages_in_use = atomic_load_explicit(&w->in_use, memory_order_relaxed);
	st->pages_peak = p->peak;
	st->pages_cached = p->ncached;
	st->chunks_mapped = p->chunks_mapped;
	st->bytes_mapped = p->chunks_mapped * p->chunk_bytes;
	st->allocs = p->allocs;
	st->frees = p->frees;
	st->failed_allocs = p->failed;
	pthread_mutex_unlock(&w->lock);
}

size_t zs_pages_in_use(const struct zs_pages *p)
{
	return p ? atomic_load_explicit(&((struct zs_pages *)p)->in_use, memory_order_relaxed) : 0;
}

void zs_pages_set_limit(struct zs_pages *p, size_t max_pages)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->max_pages = max_pages;
	pthread_mutex_unlock(&p->lock);
}

void zs_pages_fail_after(struct zs_pages *p, uint64_t after, uint64_t count)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->fi_on = true;
	p->fi_after = after;
	p->fi_count = count;
	p->fi_forever = count == 0;
	pthread_mutex_unlock(&p->lock);
}

void zs_pages_fail_reset(struct zs_pages *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->fi_on = false;
	pthread_mutex_unlock(&p->lock);
}

size_t zs_process_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, resident = 0;
	long pg = sysconf(_SC_PAGESIZE);

	if (!f)
		return 0;
	int got = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	if (got != 2 || pg <= 0)
		return 0;
	return (size_t)resident * (size_t)pg;
}
