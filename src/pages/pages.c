/*
 * Page provider (owns src/pages/pages.h and include/zs/pages.h): the one place pool memory comes
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
 * long as the pool lives: the 64-byte descriptors, an owner word per page
 * (pages/lookup.h), one state byte per page and the chunk's allocation
 * bitmap.  Keeping it (and only dropping its
 * memory with MADV_DONTNEED when the chunk is unmapped) means that a stale
 * or garbage pfn handed to pages_valid() reads zeros instead of faulting.
 *
 * Freeing and the caches (per-CPU and shared, decay, trim) are cache.c's
 * and the files split from it (release.c, runs.c, trim.c); their design
 * note is at the top of cache.c.  The process-wide cache
 * budget and the thread that returns idle caches are purge.c's.
 *
 * Shared bookkeeping runs under one mutex (lock order: per-CPU cache lock,
 * then the mutex); lookups use atomics only.
 */
#include "pages/internal.h"

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

/* ---- configuration -------------------------------------------------- */

size_t pages_page_size(const struct zs_pages *p)
{
	return p ? p->page_size : 0;
}

int zs_page_size_valid(size_t size)
{
	return is_pow2(size) && size >= ZS_PAGE_SIZE_MIN && size <= ZS_PAGE_SIZE_MAX;
}

struct zs_pages *pages_create(const struct zs_pages_config *cfg)
{
	struct zs_pages_config c = { 0 };
	long osp = sysconf(_SC_PAGESIZE);
	size_t os_page = osp > 0 ? (size_t)osp : 4096;

	if (cfg)
		c = *cfg;
	if (!c.page_size)
		c.page_size = ZS_PAGE_SIZE_DEFAULT;
	if (!zs_page_size_valid(c.page_size) || c.page_size < os_page)
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
	if (c.decay_ms > ZS_PAGES_MAX_DECAY_MS && c.decay_ms != ZS_PAGES_DECAY_NEVER)
		goto inval;
	/* The 0 fields take the process's defaults (purge.c: ZS_PAGES_DECAY_MS, ZS_PAGES_CACHE_MB). */
	unsigned def_decay;
	size_t budget_bytes;
	purge_defaults(&def_decay, &budget_bytes);
	bool in_budget = c.cache_pages == 0;
	if (c.cache_pages == ZS_PAGES_NO_CACHE)
		c.cache_pages = 0;
	else if (!c.cache_pages)
		c.cache_pages = budget_bytes / c.page_size;
	if (!c.decay_ms) {
		c.decay_ms = def_decay;
		if (def_decay == DECAY_IMMEDIATE)
			c.cache_pages = 0;
	}

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
	p->pfn_limit = (pfn_t)nslots << p->lk.ppc_shift;

	size_t bm_words = (p->ppc + 63) / 64;
	/* meta region: descriptors, owner words right after them (lookup.h), state bytes, bitmap */
	p->state_off = p->ppc * (sizeof(struct zs_page_desc) + sizeof(void *));
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

	/*
	 * Adaptive: a contended lock spins a little before sleeping.  It is held
	 * for one batch of pages (microseconds), so a futex sleep and wake-up
	 * per collision (bench_threads: 4% of the time, with context switches)
	 * costs more than waiting out the holder.
	 */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	int mrc = pthread_mutex_init(&p->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (!mrc && (mrc = pthread_cond_init(&p->released, NULL)))
		pthread_mutex_destroy(&p->lock);
	if (mrc) {
		munmap(t, total);
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	p->cache_head = p->cache_tail = ZS_PFN_NONE;
	p->releasing_gen = purge_fork_gen();
	p->cache_cap = c.cache_pages;
	p->decay_ns = c.decay_ms == ZS_PAGES_DECAY_NEVER ? DECAY_NEVER_NS
							  : (uint64_t)c.decay_ms * 1000000u;
	p->budget = in_budget && c.cache_pages;
	atomic_init(&p->oldest_ns, NO_TIME);
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	unsigned npcp = ncpu > 0 ? (unsigned)ncpu : 1;
	if (npcp > PCP_MAX_CACHES)
		npcp = PCP_MAX_CACHES;
	if (c.cache_pages >= (size_t)2 * PCP_MAX * npcp) {
		p->pcp = aligned_alloc(64, npcp * sizeof(*p->pcp));
		if (p->pcp) {
			memset(p->pcp, 0, npcp * sizeof(*p->pcp));
			for (unsigned i = 0; i < npcp; i++)
				for (unsigned n = 0; n <= PARK_MAX_LEN; n++)
					p->pcp[i].park[n] = ZS_PFN_NONE;
			p->npcp = npcp;
			p->cache_cap = c.cache_pages - (size_t)PCP_MAX * npcp;
		}
	}
	atomic_init(&p->slow_only, c.max_pages != 0);
	atomic_init(&p->park_rekick, false);
	p->max_pages = c.max_pages;
	atomic_init(&p->in_use, 0);
	atomic_init(&p->seq, 0);
	atomic_init(&p->nsorted, 0);
	/* Only what can hold cached pages and lets them decay needs the purge thread's eye. */
	bool watched = (p->cache_cap || p->npcp) && p->decay_ns != DECAY_NEVER_NS;
	/*
	 * Parked chains need what returns them: per-CPU caches, the budget, the
	 * purge thread.  Set before registering: the thread reads it from then on.
	 */
	p->park = c.park_chains && p->npcp && p->budget && watched;
	if (p->park && c.reclaim) {
		p->reclaim = c.reclaim;
		p->reclaim_ctx = c.reclaim_ctx;
	}
	if (watched && c.idle_due && c.idle_work) {
		p->idle_due = c.idle_due;
		p->idle_work = c.idle_work;
		p->idle_ctx = c.idle_ctx;
	}
	if (watched)
		purge_register(p);
	return p;
inval:
	errno = EINVAL;
	return NULL;
}

bool pages_idle_on(const struct zs_pages *p)
{
	return p && p->registered && p->idle_work;
}

void pages_idle_stop(struct zs_pages *p)
{
	if (p && p->registered)
		purge_idle_stop(p);
}

void pages_destroy(struct zs_pages *p)
{
	if (!p)
		return;
	if (p->registered)
		purge_unregister(p); /* waits out a running idle_work too */
	if (p->budget_pages)
		purge_budget_add(-(long)(p->budget_pages * p->page_size), NULL);
	for (unsigned i = 0; i < p->npcp; i++)
		if (p->pcp[i].park_synced)
			purge_budget_add(-(long)((size_t)p->pcp[i].park_synced * p->page_size), NULL);
	/* The owner's parked pages go with the chunks: what they added to the budget goes too. */
	long owner = atomic_load_explicit(&p->owner_in_budget, memory_order_relaxed);
	if (owner)
		purge_budget_add(-owner * (long)p->page_size, NULL);
	for (size_t s = 0; s < p->slot_words * 64 && s < p->nslots; s++) {
		char *base = atomic_load_explicit(&p->lk.slots[s].base, memory_order_relaxed);
		struct zs_page_desc *m = atomic_load_explicit(&p->lk.slots[s].meta, memory_order_relaxed);
		if (base)
			munmap(base, p->chunk_bytes);
		if (m)
			munmap(m, p->meta_bytes);
	}
	pthread_cond_destroy(&p->released);
	pthread_mutex_destroy(&p->lock);
	munmap(p->tables, p->tables_bytes);
	free(p->pcp);
	free(p);
}

/* ---- lookups (no lock) ----------------------------------------------- */

void *pages_addr(const struct zs_pages *p, pfn_t pfn)
{
	return pages_lookup_addr(p, pfn);
}

struct zs_page_desc *pages_desc(const struct zs_pages *p, pfn_t pfn)
{
	return zs_page_desc(p, pfn);
}

int pages_valid(const struct zs_pages *p, pfn_t pfn)
{
	if (!p || pfn >= p->pfn_limit)
		return 0;
	struct zs_page_desc *m = meta_desc(p, pfn_slot(p, pfn));
	if (!m)
		return 0;
	return atomic_load_explicit(meta_state(p, m) + pfn_idx(p, pfn), memory_order_relaxed) ==
	       PG_IN_USE;
}

pfn_t pages_pfn_of(const struct zs_pages *p, const void *addr)
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
	pfn_t pfn = ((pfn_t)slot << p->lk.ppc_shift) + ((a - base) >> p->lk.page_shift);
	return pages_valid(p, pfn) ? pfn : ZS_PFN_NONE;
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

void pages_partial_set(struct zs_pages *p, size_t slot)
{
	bm_set(p->partial_bm, slot);
	if ((slot >> 6) < p->partial_lo)
		p->partial_lo = slot >> 6;
}

/* Map a chunk into the lowest free slot (keeps pfns dense). Returns slot or -1. */
long pages_chunk_map(struct zs_pages *p)
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
		atomic_store_explicit(&p->lk.slots[slot].owners, (void **)(void *)(m + p->ppc),
				      memory_order_release);
		atomic_store_explicit(&p->lk.slots[slot].meta, m, memory_order_release);
		/* destroy() walks slot_words; count the slot as soon as it owns a mapping. */
		if ((slot >> 6) + 1 > p->slot_words)
			p->slot_words = (slot >> 6) + 1;
	}

	char *raw = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (raw == MAP_FAILED)
		return -1;
	/* The owner's idle hooks stop looking while it holds nothing: a new chunk starts them
	 * again (a pass of the purge thread; the caller kicks after unlock). */
	if (p->idle_work)
		p->kick = true;
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
	pages_partial_set(p, slot);
	atomic_store_explicit(&p->lk.slots[slot].base, base, memory_order_relaxed);
	sorted_insert(p, (uintptr_t)base, (uint32_t)slot);
	p->chunks_mapped++;
	return (long)slot;
}

/* Detach an empty chunk; returns its base for the caller to munmap unlocked. */
char *pages_chunk_unmap(struct zs_pages *p, size_t slot)
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

/* ---- stats & limits --------------------------------------------------- */

void pages_get_stats(const struct zs_pages *p, struct zs_pages_stats *st)
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
	mutex_lock_ranked(&w->lock, ZS_LOCK_PAGES_PROVIDER);
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
	mutex_unlock_ranked(&w->lock);
}

size_t pages_in_use(const struct zs_pages *p)
{
	return p ? total_in_use(p) : 0;
}

void pages_set_limit(struct zs_pages *p, size_t max_pages)
{
	if (!p)
		return;
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	p->max_pages = max_pages;
	set_slow_only(p);
	mutex_unlock_ranked(&p->lock);
}

void pages_fail_after(struct zs_pages *p, uint64_t after, uint64_t count)
{
	if (!p)
		return;
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	p->fi_on = true;
	p->fi_after = after;
	p->fi_count = count;
	p->fi_forever = count == 0;
	set_slow_only(p);
	mutex_unlock_ranked(&p->lock);
}

void pages_fail_reset(struct zs_pages *p)
{
	if (!p)
		return;
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	p->fi_on = false;
	set_slow_only(p);
	mutex_unlock_ranked(&p->lock);
}

