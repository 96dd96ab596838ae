/*
 * bench_layout: how fast can zsmalloc's *layout* be on one thread, if the
 * per-op path had mimalloc's *structure*?  The application profile's goal
 * is >= 0.8x mimalloc on bench_threads' churn; probes on the library
 * (thread caches, no atomics, no fullness moves) found no single path
 * that gets there.  This probe answers
 * the question before anyone rebuilds the allocator for it: it keeps what
 * makes zsmalloc zsmalloc - objects packed back to back across the pages of
 * a zspage (an object may span two pages that need not be adjacent, so the
 * write is two copies), an 8-byte header naming the handle in front of each
 * object, handles that are slots holding the object's location, and a page
 * descriptor per page through which an object finds its zspage - and drops
 * what a thread-owned design would not have: locks, atomics, fullness
 * lists, class shards, per-CPU lookups and statistics.  Every zspage belongs
 * to the one thread; a zspage with a free slot sits on its class's partial
 * list; an empty one gives its pages back to a LIFO page stack.
 *
 * One process runs, in rotating order, the same churn as bench_threads
 * (rounds of N x (allocate 200..3600 B uniform + write it), then free all
 * N) on: this probe ("bound"), libzs's application profile through its
 * public API ("app": zs_malloc_write, zs_free; "pair": zs_malloc,
 * zs_obj_write, zs_free, the two-call store), and mimalloc
 * (malloc + memcpy + free, dlopen'ed as the harness does).  It prints Mops
 * per CPU-second, best and median over the repetitions (--rounds), and the
 * ratios to mimalloc.  Correct for one thread only; not a library component.
 *
 * --locks, --pin and --getcpu add back to the bound row, one at a time, what
 * the library's path pays per op besides its data structures: a class lock
 * and a handle lock (an exchange and a release store each), the write's pin
 * (two atomic adds), and the per-CPU lookup.
 *
 * --only ROW runs one row, for counting its instructions: the difference
 * between two callgrind runs of different --r, over (difference in r) x n,
 * is the instructions per op with the setup cancelled out
 * (docs/benchmarks.md, "Where the instructions go").
 *
 * usage: bench_layout [--quick] [--json] [--rounds K] [--n N] [--r R] [--seed S]
 *                     [--locks] [--pin] [--getcpu] [--chain] [--only ROW]
 */
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_common.h"
#include "zs/zsmalloc.h"

#define PG 4096u
#define HDR 8u
#define DELTA 16u
#define MAX_CHAIN 8
#define NCLASS (PG / DELTA + 1)
#define END 0xffffffffu
#define ARENA (4ull << 30)

/* ---- the probe ---- */

struct zsp {
	uint32_t freeobj, untouched; /* free list head (index) and first never-used slot */
	uint16_t inuse, objs;
	uint16_t cls, npages;
	struct zsp *next, *prev; /* the class's partial list */
	uint32_t pfn[MAX_CHAIN];
	atomic_int pins; /* --pin: the write's pin, as zs_obj_write takes one */
};

struct pdesc {
	struct zsp *owner;
	uint32_t next;   /* --chain: the zspage's next page */
	uint32_t pad[13]; /* the library's descriptor size: one per cache line */
};

struct cls {
	uint32_t size, objs, npages;
	struct zsp *partial;
	atomic_int lock; /* --locks: taken around each slot's pop and push */
};

static struct {
	unsigned char *base;
	struct pdesc *desc;
	uint32_t npfn, *pstack, ptop; /* fresh-page bump and the stack of freed pages */
	struct cls cls[NCLASS];
	uint8_t lut[PG / DELTA + 2];
	uint64_t *slots; /* handle table: a live slot holds obj, a free one the next free index */
	uint64_t hfree, hnext;
	struct zsp *zfree; /* recycled descriptors */
	atomic_int hlock;  /* --locks: the handle list's */
	int locks, pin, getcpu, chain; /* what of the library's per-op costs to add back (options) */
	volatile int cpu_sink;
} B;

/* The library's lock shape: an exchange to take it, a release store to drop it. */
static inline void lock(atomic_int *l)
{
	while (atomic_exchange_explicit(l, 1, memory_order_acquire))
		;
}

static inline void unlock(atomic_int *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

static inline unsigned char *pg_addr(uint32_t pfn)
{
	return B.base + (size_t)pfn * PG;
}

static void bound_init(void)
{
	B.base = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		      -1, 0);
	B.desc = calloc(ARENA / PG, sizeof(*B.desc));
	B.pstack = malloc(ARENA / PG * sizeof(*B.pstack));
	B.slots = mmap(NULL, 1ull << 30, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (B.base == MAP_FAILED || !B.desc || !B.pstack || B.slots == MAP_FAILED) {
		perror("bench_layout: init");
		exit(1);
	}
	B.hfree = 0;
	B.hnext = 1; /* handle 0 is "none" */
	/* Classes as the kernel sizes them: 16-byte steps, each with the chain
	 * (1..8 pages) that wastes the least. */
	for (unsigned c = 0; c < NCLASS; c++) {
		unsigned size = c ? c * DELTA : DELTA;
		unsigned best = 1, bestwaste = PG;
		for (unsigned n = 1; n <= MAX_CHAIN; n++) {
			unsigned waste = (n * PG) % size;
			if (waste * best < bestwaste * n) {
				best = n;
				bestwaste = waste;
			}
		}
		B.cls[c] = (struct cls){ .size = size, .npages = best, .objs = best * PG / size };
	}
	for (unsigned i = 0; i < sizeof(B.lut); i++) {
		unsigned c = i; /* (len + HDR + 15) / 16 */
		B.lut[i] = (uint8_t)(c < NCLASS ? c : NCLASS - 1);
	}
}

/* Page k of a zspage: from its array, or (--chain) by walking the pages' links as the library does. */
static inline uint32_t zsp_page(const struct zsp *z, uint32_t k)
{
	if (!B.chain)
		return z->pfn[k];
	uint32_t pfn = z->pfn[0];
	while (k--)
		pfn = B.desc[pfn].next;
	return pfn;
}

static inline void *slot_addr(const struct zsp *z, const struct cls *c, uint32_t idx, uint32_t *k,
			      uint32_t *off)
{
	size_t o = (size_t)idx * c->size;
	*k = (uint32_t)(o / PG);
	*off = (uint32_t)(o % PG);
	return pg_addr(zsp_page(z, *k)) + *off;
}

static struct zsp *zsp_new(unsigned ci)
{
	struct cls *c = &B.cls[ci];
	struct zsp *z = B.zfree;
	if (z)
		B.zfree = z->next;
	else
		z = malloc(sizeof(*z));
	z->freeobj = END;
	z->untouched = 0;
	z->inuse = 0;
	z->objs = (uint16_t)c->objs;
	z->cls = (uint16_t)ci;
	z->npages = (uint16_t)c->npages;
	z->next = z->prev = NULL;
	for (unsigned i = 0; i < c->npages; i++) {
		uint32_t pfn = B.ptop ? B.pstack[--B.ptop] : B.npfn++;
		z->pfn[i] = pfn;
		B.desc[pfn].owner = z;
		if (i)
			B.desc[z->pfn[i - 1]].next = pfn;
	}
	return z;
}

static inline void partial_unlink(struct cls *c, struct zsp *z)
{
	if (z->prev)
		z->prev->next = z->next;
	else
		c->partial = z->next;
	if (z->next)
		z->next->prev = z->prev;
	z->next = z->prev = NULL;
}

static inline void partial_push(struct cls *c, struct zsp *z)
{
	z->prev = NULL;
	z->next = c->partial;
	if (c->partial)
		c->partial->prev = z;
	c->partial = z;
}

static uint64_t bound_malloc(size_t len)
{
	unsigned ci = B.lut[(len + HDR + DELTA - 1) / DELTA];
	struct cls *c = &B.cls[ci];
	if (B.getcpu)
		B.cpu_sink = sched_getcpu();
	if (B.locks)
		lock(&c->lock);
	struct zsp *z = c->partial;
	if (!z) {
		z = zsp_new(ci);
		partial_push(c, z);
	}
	uint32_t idx, k, off;
	uint64_t *hdr;
	if (z->freeobj != END) {
		idx = z->freeobj;
		hdr = slot_addr(z, c, idx, &k, &off);
		z->freeobj = (uint32_t)(*hdr >> 1);
	} else {
		idx = z->untouched++;
		hdr = slot_addr(z, c, idx, &k, &off);
	}
	if (++z->inuse == z->objs)
		partial_unlink(c, z);
	if (B.locks) {
		unlock(&c->lock);
		lock(&B.hlock);
	}
	uint64_t h = B.hfree;
	if (h)
		B.hfree = B.slots[h];
	else
		h = B.hnext++;
	if (B.locks)
		unlock(&B.hlock);
	*hdr = h << 1 | 1;
	B.slots[h] = (uint64_t)z->pfn[0] << 16 | idx;
	return h;
}

static void bound_write(uint64_t h, const void *src, size_t len)
{
	uint64_t obj = B.slots[h];
	struct zsp *z = B.desc[obj >> 16].owner;
	const struct cls *c = &B.cls[z->cls];
	uint32_t k, off;
	unsigned char *p = (unsigned char *)slot_addr(z, c, (uint32_t)(obj & 0xffff), &k, &off);
	size_t room = PG - off - HDR;
	if (B.pin)
		atomic_fetch_add_explicit(&z->pins, 1, memory_order_acquire);
	if (off + HDR >= PG) { /* the header ends the page: all of the payload is on the next */
		memcpy(pg_addr(zsp_page(z, k + 1)) + (off + HDR - PG), src, len);
	} else if (len <= room) {
		memcpy(p + HDR, src, len);
	} else {
		memcpy(p + HDR, src, room);
		memcpy(pg_addr(zsp_page(z, k + 1)), (const unsigned char *)src + room, len - room);
	}
	if (B.pin)
		atomic_fetch_sub_explicit(&z->pins, 1, memory_order_release);
}

static void bound_free(uint64_t h)
{
	uint64_t obj = B.slots[h];
	struct zsp *z = B.desc[obj >> 16].owner;
	struct cls *c = &B.cls[z->cls];
	uint32_t idx = (uint32_t)(obj & 0xffff), k, off;
	if (B.getcpu)
		B.cpu_sink = sched_getcpu();
	if (B.locks)
		lock(&c->lock);
	uint64_t *hdr = slot_addr(z, c, idx, &k, &off);
	*hdr = (uint64_t)z->freeobj << 1;
	z->freeobj = idx;
	if (z->inuse-- == z->objs)
		partial_push(c, z);
	int empty = !z->inuse;
	if (empty)
		partial_unlink(c, z);
	if (B.locks) {
		unlock(&c->lock);
		lock(&B.hlock);
	}
	B.slots[h] = B.hfree;
	B.hfree = h;
	if (B.locks)
		unlock(&B.hlock);
	if (!empty)
		return;
	for (unsigned i = 0; i < z->npages; i++)
		B.pstack[B.ptop++] = z->pfn[i];
	z->next = B.zfree;
	B.zfree = z;
}

/* The probe must store what it is given (two objects, one spanning two pages) before it is timed. */
static int bound_selftest(const unsigned char *src)
{
	uint64_t hs[2] = { bound_malloc(3600), bound_malloc(3000) };
	size_t lens[2] = { 3600, 3000 };
	int bad = 0;
	for (int j = 0; j < 2; j++)
		bound_write(hs[j], src, lens[j]);
	for (int j = 0; j < 2; j++) {
		uint64_t obj = B.slots[hs[j]];
		struct zsp *z = B.desc[obj >> 16].owner;
		uint32_t k, off;
		unsigned char *p = slot_addr(z, &B.cls[z->cls], (uint32_t)(obj & 0xffff), &k, &off);
		for (size_t i = 0; i < lens[j] && !bad; i++) {
			size_t o = off + HDR + i;
			unsigned char got = o < PG ? p[HDR + i] : pg_addr(zsp_page(z, k + 1))[o - PG];
			if (got != src[i]) {
				fprintf(stderr, "bench_layout: the probe wrote byte %zu of object %d wrong\n", i, j);
				bad = 1;
			}
		}
	}
	bound_free(hs[0]);
	bound_free(hs[1]);
	return bad;
}

/* ---- the churn ---- */

enum { BOUND, APP, PAIR, MIMALLOC, NIMPL };
static const char *const names[NIMPL + 1] = { "bound", "app", "pair", "mimalloc", NULL };
static void *(*mi_malloc_fn)(size_t);
static void (*mi_free_fn)(void *);
static struct zs_pool *pool;
/*
 * What every write copies from: static, as in bench_threads, so the rows see
 * the source at the same alignment.  A malloc'd one moved them: jemalloc (the
 * benches' process malloc) returns a page-aligned block for 3600 bytes, and a
 * source at page offset 0 slowed the zsmalloc rows by a fifth against
 * mimalloc's (4K aliasing between the copy's loads and stores).
 */
static unsigned char src_buf[4096];

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One repetition: r rounds of n allocate+write, then free all.  Returns ops per CPU-second. */
static double churn(int impl, const uint32_t *sizes, unsigned n, unsigned r, const unsigned char *src,
		    uint64_t *hs)
{
	double t0 = cpu_now();
	for (unsigned round = 0; round < r; round++) {
		const uint32_t *sz = sizes + (size_t)round * n;
		for (unsigned i = 0; i < n; i++) {
			size_t len = sz[i];
			switch (impl) {
			case BOUND:
				hs[i] = bound_malloc(len);
				bound_write(hs[i], src, len);
				break;
			case APP: {
				unsigned long h = zs_malloc_write(pool, src, len);
				if (ZS_IS_ERR(h)) {
					fprintf(stderr, "bench_layout: zs_malloc_write failed\n");
					exit(1);
				}
				hs[i] = h;
				break;
			}
			case PAIR: {
				unsigned long h = zs_malloc(pool, len);
				if (ZS_IS_ERR(h) || zs_obj_write(pool, h, src, len)) {
					fprintf(stderr, "bench_layout: zs_malloc/zs_obj_write failed\n");
					exit(1);
				}
				hs[i] = h;
				break;
			}
			default: {
				void *p = mi_malloc_fn(len);
				if (!p)
					exit(1);
				memcpy(p, src, len);
				hs[i] = (uint64_t)(uintptr_t)p;
			}
			}
		}
		for (unsigned i = 0; i < n; i++) {
			if (impl == BOUND)
				bound_free(hs[i]);
			else if (impl == APP || impl == PAIR)
				zs_free(pool, hs[i]);
			else
				mi_free_fn((void *)(uintptr_t)hs[i]);
		}
	}
	return (double)n * r / (cpu_now() - t0);
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, only = -1;
	unsigned n = 0, r = 0;
	uint64_t seed = 1;
	struct bench_json js = { 0 };
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--n", n, 1, 1u << 24, "N", "objects a round; default 2000 quick, else 20000"),
		BENCH_OPT_U64("--r", r, 1, 1u << 16, "R", "rounds a repetition; default 2 quick, else 5"),
		BENCH_OPT_U64("--seed", seed, 0, UINT64_MAX, "S", "the sizes' seed; default 1"),
		BENCH_OPT_FLAG("--locks", B.locks, "bound: a class lock and a handle lock per allocation and free"),
		BENCH_OPT_FLAG("--pin", B.pin, "bound: pin the zspage around each write (two atomics)"),
		BENCH_OPT_FLAG("--getcpu", B.getcpu, "bound: a sched_getcpu() per allocation and free"),
		BENCH_OPT_FLAG("--chain", B.chain, "bound: find a zspage's page k by walking k page links"),
		BENCH_OPT_CHOICE("--only", only, names,
				 "run one row (for callgrind: instructions per op); default all"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	bench_quiet = js.enabled;
	rounds = bench_rounds(rounds, quick, 3, 7);
	if (!n)
		n = quick ? 2000 : 20000;
	if (!r)
		r = quick ? 2 : 5;

	int nimpl = NIMPL;
	void *mi = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!mi || !(mi_malloc_fn = (void *(*)(size_t))dlsym(mi, "mi_malloc")) ||
	    !(mi_free_fn = (void (*)(void *))dlsym(mi, "mi_free"))) {
		fprintf(stderr, "bench_layout: no mimalloc (libmimalloc.so.2), its row left out\n");
		nimpl = MIMALLOC;
		if (only == MIMALLOC)
			return 1;
	}
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	pool = bench_pool_create(&cfg);
	bound_init();
	uint32_t *sizes = malloc((size_t)n * r * sizeof(*sizes));
	uint64_t *hs = malloc((size_t)n * sizeof(*hs));
	unsigned char *src = src_buf;
	if (!sizes || !hs) {
		fprintf(stderr, "bench_layout: out of memory\n");
		return 1;
	}
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
	for (size_t i = 0; i < (size_t)n * r; i++)
		sizes[i] = 200 + (uint32_t)(bench_rand(&x) % 3401);
	for (unsigned i = 0; i < 3600; i++)
		src[i] = (unsigned char)(i * 7 + 1);
	if (bound_selftest(src))
		return 1;

	bench_print_machine();
	bench_say("bench_layout: seed %llu, %d repetitions of %u rounds x %u (allocate 200..3600 B + "
		  "write), then free all; one thread, rows in rotating order\n",
		  (unsigned long long)seed, rounds, r, n);
	double v[NIMPL][64];
	for (int k = 0; k < rounds; k++)
		for (int j = 0; j < nimpl; j++) {
			int impl = (j + k) % nimpl;
			if (only < 0 || impl == only)
				v[impl][k] = churn(impl, sizes, n, r, src, hs) / 1e6;
		}
	double best[NIMPL], med[NIMPL];
	for (int j = 0; j < nimpl; j++) {
		best[j] = bench_max(v[j], rounds);
		med[j] = bench_median(v[j], rounds);
	}
	bench_json_begin(&js, "bench_layout");
	bench_json_num(&js, "n", n);
	bench_json_num(&js, "r", r);
	bench_json_num(&js, "seed", (double)seed);
	bench_say("%-10s %10s %10s %12s %12s\n", "row", "best", "median", "best / mi", "median / mi");
	for (int j = 0; j < nimpl; j++) {
		char key[64];
		int mi_ok = nimpl > MIMALLOC && only < 0;
		if (only >= 0 && j != only)
			continue;
		bench_say("%-10s %10.2f %10.2f", names[j], best[j], med[j]);
		if (mi_ok)
			bench_say(" %12.2f %12.2f", best[j] / best[MIMALLOC], med[j] / med[MIMALLOC]);
		bench_say("\n");
		snprintf(key, sizeof(key), "%s_mops_best", names[j]);
		bench_json_num(&js, key, best[j]);
		snprintf(key, sizeof(key), "%s_mops_median", names[j]);
		bench_json_num(&js, key, med[j]);
		if (mi_ok && j != MIMALLOC) {
			snprintf(key, sizeof(key), "%s_vs_mimalloc_best", names[j]);
			bench_json_num(&js, key, best[j] / best[MIMALLOC]);
		}
	}
	bench_say("(Mops per CPU-second of this thread; one op = allocate + write + free)\n");
	bench_json_end(&js);
	zs_destroy_pool(pool);
	free(sizes);
	free(hs);
	return 0;
}
