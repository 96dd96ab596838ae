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
 * Freeing.  A freed page goes to a LIFO cache of hot pages, threaded
 * through the free pages' own descriptors (so taking one out of the middle,
 * which a run allocation may need, is O(1)) and stamped with the time it
 * was freed; the list's tail is its oldest page.  A freed page that does not
 * fit under the bound goes back at once; cached pages leave from the tail
 * when the tail is older than the decay (or on a trim): they are MADV_DONTNEED'd (outside the lock: the syscall and its TLB
 * shootdown are the slow part; neighbouring pages share one call) and a
 * chunk left with no page in use and none cached is unmapped, so RSS really
 * drops.  Giving pages back at once on every free made each allocate/free
 * cycle pay a fault, a zeroed page and an madvise whose TLB flush reaches
 * every CPU running the process (ISSUE 10's measurements); the decay keeps
 * that cost off a busy pool and still returns what an idle one stops using.
 *
 * Per-CPU caches.  Single-page allocations and frees go through a small
 * stack of pages per CPU (sched_getcpu; its own lock, so a thread that
 * migrates is still correct), refilled from and drained to the shared cache
 * PCP_BATCH pages per lock round: the shared mutex is taken once per batch
 * instead of once per page, the model being the kernel's per-CPU page lists.
 * A page in a per-CPU cache keeps its bitmap bit and counts in its chunk's
 * ninuse (the chunk stays mapped) but its state says PCP, so
 * zs_pages_valid() is false for it.  Pages-in-use is a counter per cache
 * plus one for the shared path, summed on read.
 *
 * Shared bookkeeping runs under one mutex (lock order: per-CPU cache lock,
 * then the mutex); lookups use atomics only.
 */
#include "zs/pages.h"
#include "pages/lookup.h"
#include "zs/harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Per-page states; FREE must be 0 so DONTNEED'd meta reads as free. */
enum { PG_FREE = 0, PG_IN_USE = 1, PG_CACHED = 2, PG_RELEASING = 3, PG_PCP = 4 };

/*
 * Per-CPU cache geometry: up to PCP_MAX pages each, moved PCP_BATCH at a
 * time (the kernel's pcp "high" and "batch").  The caches are only used
 * when the bound leaves at least twice their total for the shared cache.
 */
#define PCP_MAX 64u
#define PCP_BATCH 32u
#define PCP_MAX_CACHES 256u
/* A per-CPU cache looks at the clock for the decay every this many operations. */
#define DECAY_CHECK_OPS 64u
/* Pages returned to the OS per lock round (bounded stack buffers). */
#define RELEASE_MAX 64u
#define NO_TIME UINT64_MAX

#define ZS_MAX_RUN 64u
/* The slot table describes ZS_PAGES_MAX_SPAN bytes; only touched entries cost RSS. */
#define ZS_MIN_SLOTS 64u
#define ZS_MAX_SLOTS (1u << 20)

/* Bookkeeping, only touched under the lock. */
struct zs_chunk {
	unsigned ninuse;   /* bits set in the bitmap (in use or being released) */
	unsigned ncached;  /* free pages of this chunk sitting in the hot cache */
};

struct zs_pcp {
	atomic_int lock;
	unsigned count;             /* pages in pfn[], under lock */
	unsigned ops;               /* operations since the last decay check, under lock */
	_Atomic unsigned nheld;     /* count, for stats readers without the lock */
	_Atomic long in_use;        /* allocations minus frees through this cache */
	_Atomic uint64_t allocs, frees;
	zs_pfn_t pfn[PCP_MAX];      /* a stack: the top is the hottest page */
} __attribute__((aligned(64)));

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

	zs_pfn_t cache_head, cache_tail;
	size_t ncached, cache_cap;  /* the shared cache and its share of the bound */
	uint64_t decay_ns;
	_Atomic uint64_t oldest_ns; /* free time of the cache's tail, NO_TIME if empty */
	uint64_t decayed;

	/* Per-CPU caches (npcp 0: off); read-only pointers after create. */
	struct zs_pcp *pcp;
	unsigned npcp;
	_Atomic int slow_only;      /* a limit or failure injection: allocate under the mutex */

	size_t max_pages;
	_Atomic long in_use;        /* through the shared path; see total_in_use() */
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
		c.cache_pages = ZS_PAGES_DEFAULT_CACHE_BYTES / c.page_size;
	if (!c.decay_ms)
		c.decay_ms = ZS_PAGES_DEFAULT_DECAY_MS;
	if (c.decay_ms > ZS_PAGES_MAX_DECAY_MS)
		goto inval;

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
	p->cache_head = p->cache_tail = ZS_PFN_NONE;
	p->cache_cap = c.cache_pages;
	p->decay_ns = (uint64_t)c.decay_ms * 1000000u;
	atomic_init(&p->oldest_ns, NO_TIME);
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	unsigned npcp = ncpu > 0 ? (unsigned)ncpu : 1;
	if (npcp > PCP_MAX_CACHES)
		npcp = PCP_MAX_CACHES;
	if (c.cache_pages >= (size_t)2 * PCP_MAX * npcp) {
		p->pcp = aligned_alloc(64, npcp * sizeof(*p->pcp));
		if (p->pcp) {
			memset(p->pcp, 0, npcp * sizeof(*p->pcp));
			p->npcp = npcp;
			p->cache_cap = c.cache_pages - (size_t)PCP_MAX * npcp;
		}
	}
	atomic_init(&p->slow_only, c.max_pages != 0);
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
	free(p->pcp);
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
	else
		p->cache_tail = prev;
	p->ncached--;
	p->chunks[pfn_slot(p, pfn)].ncached--;
}

/* word[0]: previous (hotter) page, next: the colder one, word[1]: when it was freed. */
static void cache_push(struct zs_pages *p, zs_pfn_t pfn, uint64_t now)
{
	struct zs_page_desc *d = zs_page_desc(p, pfn);

	d->word[0] = (uintptr_t)ZS_PFN_NONE;
	d->word[1] = (uintptr_t)now;
	d->next = p->cache_head;
	if (p->cache_head != ZS_PFN_NONE)
		zs_page_desc(p, p->cache_head)->word[0] = (uintptr_t)pfn;
	else
		p->cache_tail = pfn;
	p->cache_head = pfn;
	p->ncached++;
	p->chunks[pfn_slot(p, pfn)].ncached++;
}

/* ---- time, counters, decay (lock held unless said) -------------------- */

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	/* The coarse clock is a vDSO read; a tick (a few ms) is plenty for a decay. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline bool expired(const struct zs_pages *p, uint64_t stamp, uint64_t now)
{
	return stamp != NO_TIME && now > stamp && now - stamp >= p->decay_ns;
}

/* Pages handed out: the shared path's count plus every per-CPU cache's (no lock). */
static size_t total_in_use(const struct zs_pages *p)
{
	long n = atomic_load_explicit(&((struct zs_pages *)p)->in_use, memory_order_relaxed);
	for (unsigned i = 0; i < p->npcp; i++)
		n += atomic_load_explicit(&p->pcp[i].in_use, memory_order_relaxed);
	return n > 0 ? (size_t)n : 0;
}

static void note_peak(struct zs_pages *p)
{
	size_t used = total_in_use(p);
	if (used > p->peak)
		p->peak = used;
}

static void note_oldest(struct zs_pages *p)
{
	uint64_t t = p->cache_tail == ZS_PFN_NONE ? NO_TIME
						   : (uint64_t)zs_page_desc(p, p->cache_tail)->word[1];
	atomic_store_explicit(&p->oldest_ns, t, memory_order_relaxed);
}

static inline void set_slow_only(struct zs_pages *p)
{
	atomic_store_explicit(&p->slow_only, p->max_pages != 0 || p->fi_on, memory_order_relaxed);
}

/*
 * Take pages off the cache's cold end for release: all of them (force), or
 * while the cache is over its bound or its tail has outlived the decay.  They
 * become RELEASING with their bitmap bit set, so their chunk can be neither
 * reused nor unmapped until release_pages() is done.  At most max pages.
 */
static unsigned purge_locked(struct zs_pages *p, uint64_t now, bool force, zs_pfn_t *rel,
			     unsigned max)
{
	unsigned n = 0;

	while (n < max && p->cache_tail != ZS_PFN_NONE) {
		zs_pfn_t pfn = p->cache_tail;
		bool over = p->ncached > p->cache_cap;
		bool old = expired(p, (uint64_t)zs_page_desc(p, pfn)->word[1], now);
		if (!force && !over && !old)
			break;
		size_t slot = pfn_slot(p, pfn);
		cache_unlink(p, pfn);
		bm_set(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		p->chunks[slot].ninuse++;
		set_state(p, pfn, PG_RELEASING);
		if (!force && !over)
			p->decayed++;
		rel[n++] = pfn;
	}
	note_oldest(p);
	return n;
}

static void sort_pfns(zs_pfn_t *v, unsigned n)
{
	/* n <= RELEASE_MAX and usually nearly sorted. */
	for (unsigned i = 1; i < n; i++) {
		zs_pfn_t x = v[i];
		unsigned j = i;
		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/*
 * Lock NOT held: give RELEASING pages back to the OS (neighbours share one
 * madvise), then mark them free and unmap the chunks left empty.
 */
static void release_pages(struct zs_pages *p, zs_pfn_t *rel, unsigned nrel)
{
	char *unmap[RELEASE_MAX];
	unsigned nunmap = 0;

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

/* Lock NOT held: release what the bound and the decay (or force: everything) say must go. */
static void purge(struct zs_pages *p, bool force)
{
	zs_pfn_t rel[RELEASE_MAX];
	unsigned n;

	do {
		pthread_mutex_lock(&p->lock);
		n = purge_locked(p, now_ns(), force, rel, RELEASE_MAX);
		pthread_mutex_unlock(&p->lock);
		release_pages(p, rel, n);
	} while (n == RELEASE_MAX);
}

/* ---- allocation ------------------------------------------------------- */

/* Lock held. Decides limit / injected failure for an allocation of n pages. */
static bool alloc_allowed(struct zs_pages *p, unsigned n)
{
	if (p->max_pages && total_in_use(p) + n > p->max_pages)
		return false;
	if (p->fi_on && p->fi_after == 0) {
		if (!p->fi_forever && --p->fi_count == 0) {
			p->fi_on = false;
			set_slow_only(p);
		}
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

	atomic_store_explicit(&p->in_use,
			      atomic_load_explicit(&p->in_use, memory_order_relaxed) + (long)n,
			      memory_order_relaxed);
	if (!p->npcp)
		note_peak(p);
	p->allocs++;
	if (p->fi_on)
		p->fi_after--;
}

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

/* Lock held: the hottest cached page, else a never-used or released one, else a new chunk. */
static bool pick_pages(struct zs_pages *p, unsigned n, zs_pfn_t *out)
{
	if (n == 1 && p->cache_head != ZS_PFN_NONE) {
		*out = p->cache_head;
		return true;
	}
	if (find_in_partial(p, n, out))
		return true;
	long slot = chunk_map(p);
	if (slot < 0)
		return false;
	*out = (zs_pfn_t)slot << p->lk.ppc_shift;
	return true;
}

static int alloc_locked(struct zs_pages *p, unsigned n, zs_pfn_t *out)
{
	zs_pfn_t pfn;

	if (!alloc_allowed(p, n))
		return -ENOMEM;
	if (!pick_pages(p, n, &pfn))
		return -ENOMEM;
	take_pages(p, pfn, n);
	*out = pfn;
	return 0;
}

/* ---- per-CPU caches --------------------------------------------------- */

static inline struct zs_pcp *this_pcp(struct zs_pages *p)
{
	int cpu = sched_getcpu();
	return &p->pcp[cpu > 0 ? (unsigned)cpu % p->npcp : 0];
}

static inline void pcp_lock(struct zs_pcp *c)
{
	unsigned spins = 0;
	while (__builtin_expect(atomic_exchange_explicit(&c->lock, 1, memory_order_acquire), 0)) {
		while (atomic_load_explicit(&c->lock, memory_order_relaxed)) {
			/* Another thread on this CPU slot was preempted holding it: let it run. */
			if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
			} else {
				sched_yield();
			}
		}
	}
}

static inline void pcp_unlock(struct zs_pcp *c)
{
	atomic_store_explicit(&c->nheld, c->count, memory_order_relaxed);
	atomic_store_explicit(&c->lock, 0, memory_order_release);
}

static inline void add_relaxed(_Atomic long *v, long d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

static inline void add_relaxed_u64(_Atomic uint64_t *v, uint64_t d)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/*
 * Both locks held: move up to PCP_BATCH pages from the shared side into an
 * empty per-CPU cache, hottest on top; collect what the decay says to
 * release into rel.  Returns the pages moved.
 */
static unsigned pcp_refill_locked(struct zs_pages *p, struct zs_pcp *c, zs_pfn_t *rel,
				  unsigned *nrel)
{
	zs_pfn_t got[PCP_BATCH];
	unsigned n = 0;

	while (n < PCP_BATCH) {
		zs_pfn_t pfn;
		if (!pick_pages(p, 1, &pfn))
			break;
		size_t slot = pfn_slot(p, pfn);
		if (get_state(p, pfn) == PG_CACHED)
			cache_unlink(p, pfn);
		bm_set(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_PCP);
		if (++p->chunks[slot].ninuse == p->ppc)
			bm_clr(p->partial_bm, slot);
		got[n++] = pfn;
	}
	for (unsigned i = n; i-- > 0;)
		c->pfn[c->count++] = got[i];
	note_peak(p);
	*nrel = purge_locked(p, now_ns(), false, rel, RELEASE_MAX);
	return n;
}

/*
 * Both locks held: move the k coldest pages of a per-CPU cache to the shared
 * cache.  What does not fit under the bound is released straight away (it
 * keeps its bitmap bit and ninuse, as RELEASING pages must), rather than
 * pushed and pushed out again.  Returns the pages to release, in rel
 * (k <= RELEASE_MAX).
 */
static unsigned pcp_drain_locked(struct zs_pages *p, struct zs_pcp *c, unsigned k, zs_pfn_t *rel)
{
	uint64_t now = now_ns();
	size_t room = p->cache_cap > p->ncached ? p->cache_cap - p->ncached : 0;
	unsigned nrel = 0, ndirect = k > room ? (unsigned)(k - room) : 0;

	for (unsigned i = 0; i < k; i++) {
		zs_pfn_t pfn = c->pfn[i];
		size_t slot = pfn_slot(p, pfn);
		if (i < ndirect) {
			set_state(p, pfn, PG_RELEASING);
			rel[nrel++] = pfn;
			continue;
		}
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_CACHED);
		cache_push(p, pfn, now);
		p->chunks[slot].ninuse--;
		partial_set(p, slot);
	}
	memmove(c->pfn, c->pfn + k, (c->count - k) * sizeof(c->pfn[0]));
	c->count -= k;
	note_peak(p);
	return nrel + purge_locked(p, now, false, rel + nrel, RELEASE_MAX - nrel);
}

/* Every DECAY_CHECK_OPS operations of a per-CPU cache: is the shared cache's tail stale? */
static void maybe_decay(struct zs_pages *p)
{
	if (expired(p, atomic_load_explicit(&p->oldest_ns, memory_order_relaxed), now_ns()))
		purge(p, false);
}

static int pcp_alloc(struct zs_pages *p, zs_pfn_t *out)
{
	struct zs_pcp *c = this_pcp(p);
	zs_pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0;
	bool check;

	pcp_lock(c);
	if (__builtin_expect(c->count == 0, 0)) {
		pthread_mutex_lock(&p->lock);
		unsigned got = pcp_refill_locked(p, c, rel, &nrel);
		if (!got)
			p->failed++;
		pthread_mutex_unlock(&p->lock);
		if (!got) {
			pcp_unlock(c);
			release_pages(p, rel, nrel);
			return -ENOMEM;
		}
	}
	zs_pfn_t pfn = c->pfn[--c->count];
	set_state(p, pfn, PG_IN_USE);
	add_relaxed(&c->in_use, 1);
	add_relaxed_u64(&c->allocs, 1);
	check = ++c->ops >= DECAY_CHECK_OPS;
	if (check)
		c->ops = 0;
	pcp_unlock(c);
	release_pages(p, rel, nrel);
	if (check && !nrel)
		maybe_decay(p);
	*out = pfn;
	return 0;
}

/* Free n single pages into this CPU's cache; invalid or repeated pfns are skipped. */
static void pcp_free(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n)
{
	struct zs_pcp *c = this_pcp(p);
	zs_pfn_t rel[2 * RELEASE_MAX];
	unsigned nrel = 0, nfreed = 0;
	bool check;

	pcp_lock(c);
	for (unsigned i = 0; i < n; i++) {
		zs_pfn_t pfn = pfns[i];
		if (pfn >= p->pfn_limit)
			continue;
		struct zs_page_desc *m = meta_desc(p, pfn_slot(p, pfn));
		if (!m)
			continue;
		/* The state is the owner's proof: a double or foreign free fails here. */
		uint8_t st = PG_IN_USE;
		if (!atomic_compare_exchange_strong_explicit(meta_state(p, m) + pfn_idx(p, pfn), &st,
							     PG_PCP, memory_order_relaxed,
							     memory_order_relaxed))
			continue;
		if (c->count == PCP_MAX) {
			/* At most two drains per call (n <= 64): rel has room for both. */
			pthread_mutex_lock(&p->lock);
			nrel += pcp_drain_locked(p, c, PCP_BATCH, rel + nrel);
			pthread_mutex_unlock(&p->lock);
		}
		c->pfn[c->count++] = pfn;
		nfreed++;
	}
	add_relaxed(&c->in_use, -(long)nfreed);
	add_relaxed_u64(&c->frees, nfreed);
	c->ops += n;
	check = c->ops >= DECAY_CHECK_OPS;
	if (check)
		c->ops = 0;
	pcp_unlock(c);
	release_pages(p, rel, nrel < RELEASE_MAX ? nrel : RELEASE_MAX);
	if (nrel > RELEASE_MAX)
		release_pages(p, rel + RELEASE_MAX, nrel - RELEASE_MAX);
	if (check && !nrel)
		maybe_decay(p);
}

/* Lock NOT held: every per-CPU cache's pages back to the shared cache. */
static void pcp_drain_all(struct zs_pages *p)
{
	zs_pfn_t rel[RELEASE_MAX];

	for (unsigned i = 0; i < p->npcp; i++) {
		struct zs_pcp *c = &p->pcp[i];
		unsigned nrel = 0;
		pcp_lock(c);
		if (c->count) {
			pthread_mutex_lock(&p->lock);
			nrel = pcp_drain_locked(p, c, c->count, rel);
			pthread_mutex_unlock(&p->lock);
		}
		pcp_unlock(c);
		release_pages(p, rel, nrel);
	}
}

int zs_pages_alloc_run(struct zs_pages *p, unsigned n, zs_pfn_t *first)
{
	zs_pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0;

	if (!p || !first || n == 0 || n > ZS_MAX_RUN)
		return -EINVAL;
	if (n == 1 && p->npcp && !atomic_load_explicit(&p->slow_only, memory_order_relaxed)) {
		int rc = pcp_alloc(p, first);
		if (rc)
			return rc;
		memset(zs_page_desc(p, *first), 0, sizeof(struct zs_page_desc));
		return 0;
	}
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
	nrel = purge_locked(p, now_ns(), false, rel, RELEASE_MAX);
	pthread_mutex_unlock(&p->lock);
	release_pages(p, rel, nrel);
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

_Static_assert(ZS_MAX_RUN <= ZS_FREE_BULK_MAX, "a run must fit one free_pages call");
_Static_assert(ZS_FREE_BULK_MAX <= RELEASE_MAX, "a free's pages must fit one release");
_Static_assert(ZS_FREE_BULK_MAX <= 2 * PCP_BATCH, "pcp_free drains at most twice");

/*
 * The shared free path, for runs, and for single and bulk frees when there
 * are no per-CPU caches: the pages go to the hot cache, stamped now, while
 * it has room under the bound; the rest, and what the decay pushes out of
 * the cache's cold end, is released.
 *
 * whole: the pfns are one run, freed all or not at all (any invalid page
 * and the run is ignored) and counted as one free.  Otherwise each double,
 * foreign or repeated pfn is skipped and every page freed counts.
 */
static void free_pages(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n, bool whole)
{
	zs_pfn_t rel[RELEASE_MAX];
	unsigned nrel = 0, nfreed = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; whole && i < n; i++) {
		if (!zs_pages_valid(p, pfns[i])) {
			pthread_mutex_unlock(&p->lock);
			return;
		}
	}
	uint64_t now = now_ns();
	for (unsigned i = 0; i < n; i++) {
		zs_pfn_t pfn = pfns[i];
		if (!zs_pages_valid(p, pfn))
			continue;
		nfreed++;
		if (p->ncached >= p->cache_cap) {
			/* Bit and ninuse stay: the chunk can be neither reused nor unmapped meanwhile. */
			set_state(p, pfn, PG_RELEASING);
			rel[nrel++] = pfn;
			continue;
		}
		size_t slot = pfn_slot(p, pfn);
		bm_clr(meta_bits(p, meta_desc(p, slot)), pfn_idx(p, pfn));
		set_state(p, pfn, PG_CACHED);
		cache_push(p, pfn, now);
		p->chunks[slot].ninuse--;
		partial_set(p, slot);
	}
	add_relaxed(&p->in_use, -(long)nfreed);
	p->frees += whole ? 1 : nfreed;
	nrel += purge_locked(p, now, false, rel + nrel, RELEASE_MAX - nrel);
	pthread_mutex_unlock(&p->lock);
	release_pages(p, rel, nrel);
	if (nrel == RELEASE_MAX)
		purge(p, false);
}

void zs_pages_free(struct zs_pages *p, zs_pfn_t pfn)
{
	if (!p)
		return;
	if (p->npcp)
		pcp_free(p, &pfn, 1);
	else
		free_pages(p, &pfn, 1, true);
}

void zs_pages_free_run(struct zs_pages *p, zs_pfn_t first, unsigned n)
{
	zs_pfn_t run[ZS_MAX_RUN];

	/* Only what zs_pages_alloc_run hands out: up to ZS_MAX_RUN pages of one chunk. */
	if (!p || n == 0 || n > ZS_MAX_RUN || n > p->ppc || first >= p->pfn_limit ||
	    first + n > p->pfn_limit || pfn_slot(p, first) != pfn_slot(p, first + n - 1))
		return;
	if (n == 1 && p->npcp) {
		pcp_free(p, &first, 1);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		run[i] = first + i;
	free_pages(p, run, n, true);
}

void zs_pages_free_bulk(struct zs_pages *p, const zs_pfn_t *pfns, unsigned n)
{
	if (!p || !pfns)
		return;
	/* Bounded stack use: larger batches go in pieces. */
	for (unsigned i = 0; i < n; i += ZS_FREE_BULK_MAX) {
		unsigned k = n - i < ZS_FREE_BULK_MAX ? n - i : ZS_FREE_BULK_MAX;
		if (p->npcp)
			pcp_free(p, pfns + i, k);
		else
			free_pages(p, pfns + i, k, false);
	}
}

/* ---- maintenance & stats ---------------------------------------------- */

void zs_pages_trim(struct zs_pages *p)
{
	if (!p)
		return;
	pcp_drain_all(p);
	purge(p, true);
}

void zs_pages_decay(struct zs_pages *p)
{
	if (p)
		purge(p, false);
}

void zs_pages_get_stats(const struct zs_pages *p, struct zs_pages_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!p)
		return;
	struct zs_pages *w = (struct zs_pages *)p;
	size_t pcp_cached = 0;
	uint64_t allocs = 0, frees = 0;
	for (unsigned i = 0; i < p->npcp; i++) {
		pcp_cached += atomic_load_explicit(&p->pcp[i].nheld, memory_order_relaxed);
		allocs += atomic_load_explicit(&p->pcp[i].allocs, memory_order_relaxed);
		frees += atomic_load_explicit(&p->pcp[i].frees, memory_order_relaxed);
	}
	pthread_mutex_lock(&w->lock);
	note_peak(w);
	st->page_size = p->page_size;
	st->pages_in_use = total_in_use(p);
	st->pages_peak = p->peak;
	st->pages_cached = p->ncached + pcp_cached;
	st->pages_cpu_cached = pcp_cached;
	st->pages_decayed = p->decayed;
	st->chunks_mapped = p->chunks_mapped;
	st->bytes_mapped = p->chunks_mapped * p->chunk_bytes;
	st->allocs = p->allocs + allocs;
	st->frees = p->frees + frees;
	st->failed_allocs = p->failed;
	pthread_mutex_unlock(&w->lock);
}

size_t zs_pages_in_use(const struct zs_pages *p)
{
	return p ? total_in_use(p) : 0;
}

void zs_pages_set_limit(struct zs_pages *p, size_t max_pages)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->max_pages = max_pages;
	set_slow_only(p);
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
	set_slow_only(p);
	pthread_mutex_unlock(&p->lock);
}

void zs_pages_fail_reset(struct zs_pages *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->fi_on = false;
	set_slow_only(p);
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
