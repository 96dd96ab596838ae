/*
 * Concurrency test for the page provider (src/pages/pages.c): four threads
 * allocate, write, verify and free pages and runs at once, hand pages to
 * each other to free (the zram pattern: written by one CPU, freed by
 * another), and probe pages_valid / pages_pfn_of with garbage while
 * chunks are being mapped and unmapped.  Small chunks and a tiny cache keep
 * the map/unmap and cache paths busy.  The per-CPU cache runs add a
 * maintainer thread that trims, decays (1 ms) and reads stats while the
 * workers run, so per-CPU caches are drained under their owners' feet.
 * Meant to run under TSan too, so all sharing here goes through C11 atomics
 * or pthread.
 */
#include "testutil.h"
#include "pages/pages.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 4
#define SLOTS 64
#define MAILBOX 32

#ifndef OPS
#define OPS 20000
#endif

static struct zs_pages *pool;
static size_t page_size;
/* A pfn | (n << 56) published by one thread, taken and freed by another. */
static _Atomic uint64_t mailbox[MAILBOX];
static atomic_int failures;
static atomic_size_t live_pages;

#define MB_EMPTY UINT64_MAX

static void fill(pfn_t first, unsigned n, uint64_t seed)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t *w = pages_addr(pool, first + i);
		/* Head, tail and a stride through the page are enough to catch overlap. */
		for (size_t j = 0; j < page_size / 8; j += 61)
			w[j] = seed ^ (first + i) ^ (j * 0x9e3779b97f4a7c15ULL);
		w[page_size / 8 - 1] = ~seed;
		pages_desc(pool, first + i)->word[3] = seed;
		pages_desc(pool, first + i)->next = first;
	}
}

static int check(pfn_t first, unsigned n, uint64_t seed)
{
	int ok = 1;
	for (unsigned i = 0; i < n; i++) {
		const uint64_t *w = pages_addr(pool, first + i);
		for (size_t j = 0; j < page_size / 8; j += 61)
			ok &= w[j] == (seed ^ (first + i) ^ (j * 0x9e3779b97f4a7c15ULL));
		ok &= w[page_size / 8 - 1] == ~seed;
		ok &= pages_desc(pool, first + i)->word[3] == seed;
		ok &= pages_desc(pool, first + i)->next == first;
		ok &= pages_valid(pool, first + i);
		ok &= pages_pfn_of(pool, (const char *)w + page_size / 2) == first + i;
	}
	return ok;
}

/* The seed of a mailbox entry is recomputed from its pfn so no side data is shared. */
static uint64_t mb_seed(pfn_t first)
{
	return first * 0xbf58476d1ce4e5b9ULL + 12345;
}

static void *worker(void *arg)
{
	uint64_t rng = *(uint64_t *)arg;
	struct { pfn_t first; unsigned n; uint64_t seed; } mine[SLOTS];
	int ok = 1;

	for (int i = 0; i < SLOTS; i++)
		mine[i].first = ZS_PFN_NONE;
	for (int op = 0; op < OPS; op++) {
		uint64_t r = tu_rand(&rng);
		int s = (int)(r % SLOTS);
		switch ((r >> 8) % 8) {
		case 0: { /* hand a page to someone else */
			pfn_t f;
			unsigned n = 1 + (unsigned)((r >> 16) % 3);
			if (pages_alloc_run(pool, n, &f))
				break;
			fill(f, n, mb_seed(f));
			uint64_t v = f | ((uint64_t)n << 56);
			uint64_t old = atomic_exchange_explicit(&mailbox[(r >> 20) % MAILBOX], v,
								memory_order_acq_rel);
			if (old != MB_EMPTY) {
				pfn_t of = old & ((1ull << 56) - 1);
				unsigned on = (unsigned)(old >> 56);
				ok &= check(of, on, mb_seed(of));
				pages_free_run(pool, of, on);
			}
			break;
		}
		case 1: { /* take and free someone else's page */
			uint64_t old = atomic_exchange_explicit(&mailbox[(r >> 20) % MAILBOX], MB_EMPTY,
								memory_order_acq_rel);
			if (old != MB_EMPTY) {
				pfn_t of = old & ((1ull << 56) - 1);
				unsigned on = (unsigned)(old >> 56);
				ok &= check(of, on, mb_seed(of));
				pages_free_run(pool, of, on);
			}
			break;
		}
		case 2: /* garbage probes race with map/unmap; must not crash or race */
			(void)pages_valid(pool, tu_rand(&rng) % 4096);
			(void)pages_valid(pool, tu_rand(&rng));
			(void)pages_pfn_of(pool, (void *)(uintptr_t)tu_rand(&rng));
			break;
		case 3:
			if (op % 997 == 0)
				pages_trim(pool);
			break;
		default:
			if (mine[s].first == ZS_PFN_NONE) {
				unsigned n = r >> 40 & 1 ? 1 + (unsigned)((r >> 16) % 4) : 1;
				int rc = n == 1 ? pages_alloc(pool, &mine[s].first)
						: pages_alloc_run(pool, n, &mine[s].first);
				if (rc) {
					ok = 0;
					mine[s].first = ZS_PFN_NONE;
					break;
				}
				mine[s].n = n;
				mine[s].seed = tu_rand(&rng);
				for (unsigned i = 0; i < n; i++) {
					const struct zs_page_desc *d = pages_desc(pool, mine[s].first + i);
					ok &= d->head == 0 && d->next == 0 && d->word[3] == 0;
				}
				fill(mine[s].first, n, mine[s].seed);
				atomic_fetch_add(&live_pages, n);
			} else {
				ok &= check(mine[s].first, mine[s].n, mine[s].seed);
				pages_free_run(pool, mine[s].first, mine[s].n);
				atomic_fetch_sub(&live_pages, mine[s].n);
				mine[s].first = ZS_PFN_NONE;
			}
		}
	}
	for (int i = 0; i < SLOTS; i++) {
		if (mine[i].first == ZS_PFN_NONE)
			continue;
		ok &= check(mine[i].first, mine[i].n, mine[i].seed);
		pages_free_run(pool, mine[i].first, mine[i].n);
		atomic_fetch_sub(&live_pages, mine[i].n);
	}
	if (!ok)
		atomic_fetch_add(&failures, 1);
	return NULL;
}

static atomic_int workers_done;

static void *maintainer(void *arg)
{
	(void)arg;
	unsigned i = 0;
	struct zs_pages_stats st;
	while (!atomic_load(&workers_done)) {
		if (i % 3 == 0)
			pages_trim(pool);
		else
			pages_decay(pool);
		pages_get_stats(pool, &st);
		if (st.pages_cached > st.pages_in_use + 1000000)
			atomic_fetch_add(&failures, 1); /* nonsense counters */
		i++;
		sched_yield();
	}
	return NULL;
}

static void run(uint64_t seed, size_t ps, size_t chunk, size_t cache, unsigned decay_ms, int maint)
{
	struct zs_pages_config c = { .page_size = ps, .chunk_bytes = chunk, .cache_pages = cache,
				     .decay_ms = decay_ms };
	pthread_t th[NTHREADS], mt;
	uint64_t seeds[NTHREADS];

	pool = pages_create(&c);
	REQUIRE(pool);
	page_size = ps;
	for (int i = 0; i < MAILBOX; i++)
		atomic_store(&mailbox[i], MB_EMPTY);
	atomic_store(&failures, 0);
	atomic_store(&workers_done, 0);
	for (int i = 0; i < NTHREADS; i++) {
		seeds[i] = seed + (uint64_t)i * 7919;
		REQUIRE(pthread_create(&th[i], NULL, worker, &seeds[i]) == 0);
	}
	if (maint)
		REQUIRE(pthread_create(&mt, NULL, maintainer, NULL) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&workers_done, 1);
	if (maint)
		pthread_join(mt, NULL);
	CHECK_EQ(atomic_load(&failures), 0);

	for (int i = 0; i < MAILBOX; i++) {
		uint64_t v = atomic_load(&mailbox[i]);
		if (v != MB_EMPTY)
			pages_free_run(pool, v & ((1ull << 56) - 1), (unsigned)(v >> 56));
	}
	CHECK_EQ(atomic_load(&live_pages), 0);
	CHECK_EQ(pages_in_use(pool), 0);
	pages_trim(pool);
	struct zs_pages_stats st;
	pages_get_stats(pool, &st);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	CHECK_EQ(st.pages_cached, 0);
	CHECK_EQ(st.allocs, st.frees);
	CHECK_EQ(st.failed_allocs, 0);
	pages_destroy(pool);
}

/*
 * pages_trim waits for the pages other threads took for release and have
 * not given back yet (pages RELEASING), so what it reports when it returns
 * is exact: a churner frees pages one at a time with no cache (each free is
 * its own release) while the main thread trims and reads the stats.  Before
 * the wait, test_pages saw chunks still mapped after a trim under load (the
 * purge thread's release in flight).
 */
static atomic_int churn_stop;

static void *churner(void *arg)
{
	struct zs_pages *p = arg;
	pfn_t v[16];

	while (!atomic_load(&churn_stop)) {
		unsigned n = 0;
		while (n < 16 && pages_alloc(p, &v[n]) == 0)
			n++;
		for (unsigned i = 0; i < n; i++)
			pages_free(p, v[i]);
	}
	return NULL;
}

static void test_trim_inflight(void)
{
	struct zs_pages_config c = { .page_size = 4096, .chunk_bytes = 64 * 1024,
				     .cache_pages = ZS_PAGES_NO_CACHE };
	struct zs_pages *p = pages_create(&c);
	pthread_t t;
	int trims_ok = 0;

	REQUIRE(p != NULL);
	REQUIRE(pthread_create(&t, NULL, churner, p) == 0);
	for (int i = 0; i < 200; i++) {
		struct zs_pages_stats st;

		pages_trim(p);
		pages_get_stats(p, &st);
		/* at most the churner's 16 live pages, in at most 16 chunks */
		trims_ok += st.pages_in_use <= 16 && st.chunks_mapped <= 16;
	}
	atomic_store(&churn_stop, 1);
	pthread_join(t, NULL);
	pages_trim(p);
	struct zs_pages_stats st;
	pages_get_stats(p, &st);
	CHECK_EQ(trims_ok, 200);
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.chunks_mapped, 0);
	pages_destroy(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_pages");

	test_trim_inflight();

	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	size_t pcp_min = 2 * 64 * (size_t)(ncpu > 0 ? (ncpu > 256 ? 256 : ncpu) : 1);

	run(seed, 4096, 64 * 1024, 4, 0, 0);  /* 16-page chunks: constant map/unmap */
	run(seed + 1, 4096, 0, 0, 0, 0);      /* defaults: per-CPU caches */
	run(seed + 2, 16384, 16384 * 4, ZS_PAGES_NO_CACHE, 0, 0);
	run(seed + 3, 65536, 0, 0, 0, 0);
	/* Per-CPU caches over a small shared cache, 1 ms decay, trims and decays meanwhile. */
	run(seed + 4, 4096, 64 * 1024, pcp_min + 8, 1, 1);
	run(seed + 5, 4096, 0, 0, 1, 1);
	return tu_done();
}
