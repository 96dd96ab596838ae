/*
 * Directed stress for the window pageout-by-move leaves least protected: the
 * application's FIRST MADV_DONTNEED (or munmap) on a region, racing a
 * zs_region_pageout of the same pages.  reclaim.c uses the move only while
 * the region has never seen an application drop or unmap, so every
 * iteration makes a FRESH small region (the gate open), fills its pages with
 * bytes recomputable from (seed, iteration, page), and starts two threads
 * together: one pages out the whole range, the other, after a random short
 * spin, drops (and in the munmap variant also unmaps) random pages.  After
 * both are done every dropped page must read zeros, every kept page its
 * bytes, and nothing of an unmapped page is read.  The rule checked is the
 * project's hard one: never wrong bytes.
 *
 * Modes (each a forked case under a watchdog; ZS_RACE_MODE=NAME[,NAME]
 * runs only those):
 *   dontneed   random single pages and short runs dropped with MADV_DONTNEED
 *   munmap     the same, plus a random run unmapped (never page 0), before
 *              the drops or after the first
 *   touch      dontneed, while a third thread reads the pages in order (faults
 *              with fault-around claim the neighbours), pageout goes over the
 *              range 4 times and every other region has a resident limit
 *              (the reclaim thread pages out as well)
 * Bounded: ZS_RACE_SECONDS per mode (default 6 s, 10 s under sanitizers) or
 * ZS_RACE_ITERS iterations, whichever ends first.  Seeded (ZS_SEED).  Run it
 * with ZS_REGION_MOVE=0 to put the copy path through the same race.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"
#include "zs/region.h"

#define PG 4096
#define NP 32

static uint64_t seed;
static double secs;
static long max_iters;

struct race {
	struct zs_region *r;
	unsigned char *a;
	atomic_int go;
	uint64_t rs;              /* the dropper's random state */
	int munmap_mode;
	int touch_mode;              /* a reader faults pages back (fault-around) meanwhile */
	unsigned char dropped[NP];   /* 1: MADV_DONTNEED'd, 2: unmapped */
	long po;
	unsigned spin_po;
	double po_t0, po_t1, d_t0, d_t1;   /* when each side ran: overlap is the race */
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The byte page p of iteration it holds at offset off: recomputable, differs per page. */
static unsigned char want_byte(uint64_t it, size_t p, size_t off)
{
	uint64_t x = (seed ^ (it * 0x9e3779b97f4a7c15ULL)) + p * 0x100000001b3ULL;
	return (unsigned char)(1 + ((x >> 8) + off / 64) % 251);   /* never 0 */
}

static void fill(unsigned char *a, uint64_t it)
{
	for (size_t p = 0; p < NP; p++)
		for (size_t off = 0; off < PG; off += 64)
			memset(a + p * PG + off, want_byte(it, p, off), 64);
}

static void spin(unsigned n)
{
	for (volatile unsigned i = 0; i < n; i++)
		;
}

static void *pageout_thread(void *arg)
{
	struct race *x = arg;
	while (!atomic_load(&x->go))
		;
	spin(x->spin_po);
	x->po_t0 = now_s();
	x->po = zs_region_pageout(x->r, x->a, NP * PG);
	/* touch mode: what the reader faulted back goes out again */
	for (int k = 0; x->touch_mode && k < 3 && x->po >= 0; k++) {
		long m = zs_region_pageout(x->r, x->a, NP * PG);
		if (m < 0)
			x->po = m;
	}
	x->po_t1 = now_s();
	return NULL;
}

/* Reads (only) sequentially, so faults come with fault-around claiming the neighbours. */
static void *touch_thread(void *arg)
{
	struct race *x = arg;
	unsigned sum = 0;
	while (!atomic_load(&x->go))
		;
	for (int pass = 0; pass < 3; pass++)
		for (size_t p = 0; p < NP; p++)
			sum += ((volatile unsigned char *)x->a)[p * PG + (p * 64) % PG];
	return (void *)(uintptr_t)sum;
}

static void *drop_thread(void *arg)
{
	struct race *x = arg;
	uint64_t v = tu_rand(&x->rs);
	unsigned first_spin = (unsigned)(v % 20000);
	int ndrops = 1 + (int)((v >> 16) % 4);
	while (!atomic_load(&x->go))
		;
	spin(first_spin);
	x->d_t0 = now_s();
	/* the unmap comes first (the first event the region sees) or after one drop */
	int unmap_at = x->munmap_mode ? (int)((v >> 24) & 1) : -1;
	for (int d = 0; d < ndrops; d++) {
		if (d == unmap_at || (unmap_at == 1 && ndrops == 1)) {
			uint64_t u = tu_rand(&x->rs);
			size_t p = 1 + u % (NP - 1), n = 1 + (u >> 8) % 4;
			if (p + n > NP)
				n = NP - p;
			if (munmap(x->a + p * PG, n * PG) == 0)
				memset(x->dropped + p, 2, n);
		}
		uint64_t u = tu_rand(&x->rs);
		size_t p = u % NP, n = (u >> 8) % 3 ? 1 : 1 + (u >> 12) % 3;
		if (p + n > NP)
			n = NP - p;
		int skip = 0;
		for (size_t i = p; i < p + n; i++)
			skip |= x->dropped[i] == 2;
		if (skip)
			continue;
		if (madvise(x->a + p * PG, n * PG, MADV_DONTNEED) == 0)
			memset(x->dropped + p, 1, n);
		spin((unsigned)((u >> 20) % 3000));
	}
	x->d_t1 = now_s();
	return NULL;
}

static const char *const names[] = { "dontneed", "munmap", "touch" };

static int run_mode(void *arg)
{
	int mode = *(int *)arg, munmap_mode = mode == 1, touch_mode = mode == 2;
	uint64_t rs = seed ^ (uint64_t)(mode * 0x5555);
	double t0 = now_s();
	long it, wrong_pages = 0, wrong_bytes = 0, moved_regions = 0, po_fail = 0, overlap = 0;

	for (it = 0; it < max_iters && now_s() - t0 < secs; it++) {
		struct zs_region_config c;
		struct zs_region *r = NULL;
		char err[256];
		zs_region_config_init(&c);
		c.size = NP * PG;
		c.handler_threads = 1 + (unsigned)(it & 1);
		if (touch_mode && (it & 2))
			c.resident_limit = 8 * PG;   /* the reclaim thread pages out too */
		int rc = zs_region_create(&c, &r, err, sizeof err);
		if (rc) {
			printf("  FAIL create: %d %s\n", rc, err);
			return 1;
		}
		struct race x = { .r = r, .a = zs_region_addr(r), .munmap_mode = munmap_mode,
				  .touch_mode = touch_mode };
		x.rs = tu_rand(&rs);
		x.spin_po = (unsigned)(tu_rand(&rs) % 4000);
		fill(x.a, (uint64_t)it);
		struct zs_region_stats st;
		zs_region_get_stats(r, &st, sizeof(st));
		if (st.removed || st.unmapped) {
			printf("  FAIL iteration %ld: fresh region has removed %llu unmapped %llu\n", it,
			       (unsigned long long)st.removed, (unsigned long long)st.unmapped);
			return 1;
		}
		moved_regions += st.uffd_move;
		pthread_t tp, td, tt;
		pthread_create(&tp, NULL, pageout_thread, &x);
		pthread_create(&td, NULL, drop_thread, &x);
		if (touch_mode)
			pthread_create(&tt, NULL, touch_thread, &x);
		atomic_store(&x.go, 1);
		pthread_join(tp, NULL);
		pthread_join(td, NULL);
		if (touch_mode)
			pthread_join(tt, NULL);
		overlap += x.d_t0 < x.po_t1 && x.po_t0 < x.d_t1;
		if (x.po < 0 && x.po != -EFAULT) {
			printf("  iteration %ld: pageout -> %ld\n", it, x.po);
			po_fail++;
		}
		for (size_t p = 0; p < NP; p++) {
			if (x.dropped[p] == 2)
				continue;
			long bad = 0;
			for (size_t off = 0; off < PG; off++) {
				unsigned char w = x.dropped[p] ? 0 : want_byte((uint64_t)it, p, off);
				bad += x.a[p * PG + off] != w;
			}
			if (bad) {
				if (wrong_pages < 8)
					printf("  iteration %ld page %zu (%s): %ld wrong bytes, byte 0 is "
					       "0x%02x want 0x%02x (old 0x%02x)\n", it, p,
					       x.dropped[p] ? "dropped" : "kept", bad, x.a[p * PG],
					       x.dropped[p] ? 0 : want_byte((uint64_t)it, p, 0),
					       want_byte((uint64_t)it, p, 0));
				if (wrong_pages < 8) {
					printf("    pages (. kept, d dropped, u unmapped): ");
					for (size_t q = 0; q < NP; q++)
						putchar(".du"[x.dropped[q]]);
					printf(", pageout -> %ld\n", x.po);
				}
				wrong_pages++;
				wrong_bytes += bad;
			}
		}
		zs_region_destroy(r);
	}
	printf("  %s: %ld iterations in %.1f s (kernel has UFFDIO_MOVE in %ld, %ld with the "
	       "drops overlapping the pageout), %ld wrong pages, %ld wrong bytes, %ld failed "
	       "pageouts\n", names[mode], it, now_s() - t0, moved_regions,
	       overlap, wrong_pages, wrong_bytes, po_fail);
	fflush(stdout);
	return wrong_pages || po_fail ? 1 : 0;
}

int main(void)
{
	fc_skip_without_uffd();
	seed = tu_seed("test_mt_region_move_race");
	const char *e = getenv("ZS_RACE_SECONDS");
#ifdef SAN_SLOW
	secs = e ? atof(e) : 10;
#else
	secs = e ? atof(e) : 6;
#endif
	e = getenv("ZS_RACE_ITERS");
	max_iters = e ? atol(e) : 1000000000L;
	e = getenv("ZS_REGION_MOVE");
	printf("ZS_REGION_MOVE=%s, %.0f s per mode\n", e ? e : "(unset)", secs);
	int timeout = (int)secs + 60;
	const char *only = getenv("ZS_RACE_MODE");
	for (int m = 0; m < 3; m++) {
		if (only && !strstr(only, names[m]))
			continue;
		if (fc_run(names[m], timeout, run_mode, &m))
			tu_fail++;
		else
			tu_pass++;
	}
	return tu_done();
}
