/*
 * zs_region under the application's own changes to the range, and under
 * signals and read errors: MADV_DONTNEED of resident and
 * stored pages, munmap of a tail and of a middle part, mremap shrink and
 * move, a signal handler reading region memory while its thread is inside
 * zs_region_release/pageout of that memory, and a stored page whose backing
 * file lost it (SIGBUS, never other bytes).  The stress case runs twice,
 * the second time at a store mem_limit, so failed pageouts race the zaps.
 * Each case checks the bytes, the return codes and the region's counters.
 * Exit 77 (ctest skip) without userfaultfd; a watchdog (alarm) turns a hang
 * into a failure (the stress case times its own waits: region calls block
 * SIGALRM).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/harness.h"
#include "zs/region.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PG 4096
#define NP 64

static struct zs_region *mk(size_t pages, const char *backing)
{
	struct zs_region_config c;
	struct zs_region *r = NULL;
	char err[512];

	zs_region_config_init(&c);
	c.size = pages * PG;
	c.store.backing_path = backing;
	int rc = zs_region_create(&c, &r, err, sizeof err);
	if (rc)
		fprintf(stderr, "zs_region_create: %d %s\n", rc, err);
	REQUIRE(rc == 0);
	return r;
}

static void fill(unsigned char *a, size_t p, size_t n)
{
	for (size_t i = p; i < p + n; i++)
		memset(a + i * PG, (int)(i + 1), PG);
}

/* 1 if page p holds byte v throughout */
static int page_is(const unsigned char *a, size_t p, unsigned char v)
{
	for (size_t i = 0; i < PG; i++)
		if (a[p * PG + i] != v)
			return 0;
	return 1;
}

static struct zs_region_stats stats(struct zs_region *r)
{
	struct zs_region_stats st;
	zs_region_get_stats(r, &st, sizeof(st));
	return st;
}

/* Counters trail the access that caused them by a moment (region.h): wait up to 2 s. */
static uint64_t wait_stored(struct zs_region *r, uint64_t want)
{
	struct zs_region_stats st;
	for (int i = 0; i < 2000; i++) {
		zs_region_get_stats(r, &st, sizeof(st));
		if (st.stored == want)
			break;
		usleep(1000);
	}
	return st.stored;
}

static int gone(long rc)
{
	return rc == -EFAULT || rc == -EINVAL;
}

/* MADV_DONTNEED of resident and of stored pages: zeros, slots freed, the rest intact. */
static void t_dontneed(void)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);

	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a + 32 * PG, 16 * PG), 16);
	struct zs_region_stats s0 = stats(r);
	for (int i = 0; i < 2000 && s0.resident + s0.stored != NP; i++) {
		usleep(1000);   /* the fill's last faults are counted a moment later */
		s0 = stats(r);
	}
	CHECK_EQ(s0.stored, 16);
	/* resident pages 0-3, stored pages 32-35, and a range across both kinds (44-51) */
	CHECK_EQ(madvise(a, 4 * PG, MADV_DONTNEED), 0);
	CHECK_EQ(madvise(a + 32 * PG, 4 * PG, MADV_DONTNEED), 0);
	CHECK_EQ(madvise(a + 44 * PG, 8 * PG, MADV_DONTNEED), 0);
	struct zs_region_stats s1 = stats(r);
	CHECK_EQ(s1.stored, 8);                  /* 36-43 still stored */
	CHECK_EQ(s1.store.pages_stored, 8);
	CHECK_EQ(s1.removed, 4 + 4 + 8);
	CHECK_EQ(s1.resident, s0.resident - 8);  /* 0-3 and 48-51 */
	CHECK_EQ(s1.broken, 0);
	int bad = 0;
	for (size_t p = 0; p < NP; p++) {
		int dropped = p < 4 || (p >= 32 && p < 36) || (p >= 44 && p < 52);
		bad += !page_is(a, p, dropped ? 0 : (unsigned char)(p + 1));
	}
	CHECK_EQ(bad, 0);
	/* the dropped pages work as ordinary pages again */
	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a, NP * PG), NP);
	bad = 0;
	for (size_t p = 0; p < NP; p++)
		bad += !page_is(a, p, (unsigned char)(p + 1));
	CHECK_EQ(bad, 0);
	/* and a page dropped while the application writes it again right away */
	for (int k = 0; k < 200; k++) {
		madvise(a + 5 * PG, PG, MADV_DONTNEED);
		CHECK(page_is(a, 5, 0));
		memset(a + 5 * PG, 0x77, PG);
		if (k % 3 == 0)
			zs_region_pageout(r, a + 5 * PG, PG);
		if (!page_is(a, 5, 0x77)) {
			CHECK(0);
			break;
		}
	}
	zs_region_destroy(r);
}

/* munmap of a tail and of a middle part; a foreign mapping there survives destroy. */
static void t_munmap(int middle, int shrink)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);
	size_t from = middle ? 20 : 48, n = middle ? 8 : 16;

	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a + (from - 4) * PG, (n + 8 < NP - from + 4 ? n + 8 : n + 4) * PG) > 0, 1);
	if (shrink)
		CHECK(mremap(a, NP * PG, from * PG, 0) == a);
	else
		CHECK_EQ(munmap(a + from * PG, n * PG), 0);
	struct zs_region_stats st = stats(r);
	CHECK_EQ(st.unmapped, n);
	unsigned char *o = mmap(a + from * PG, n * PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(o == a + from * PG);
	memset(o, 7, n * PG);
	/* calls on the unmapped part fail; the rest keeps working */
	CHECK(gone(zs_region_pageout(r, a, NP * PG)));
	CHECK(gone(zs_region_pageout(r, a + from * PG, PG)));
	CHECK(gone(zs_region_release(r, a + (from + n - 1) * PG, PG)));
	CHECK(gone(zs_region_advise(r, a + from * PG, n * PG, ZS_REGION_PAGEOUT)));
	CHECK(zs_region_pageout(r, a, from * PG) >= 0);
	if (from + n < NP)
		CHECK(zs_region_pageout(r, a + (from + n) * PG, (NP - from - n) * PG) >= 0);
	int bad = 0;
	for (size_t p = 0; p < NP; p++)
		if (p < from || p >= from + n)
			bad += !page_is(a, p, (unsigned char)(p + 1));
	CHECK_EQ(bad, 0);
	CHECK_EQ(zs_region_release(r, a, from * PG), 0);
	CHECK(page_is(a, 0, 0));
	st = stats(r);
	CHECK_EQ(st.store.pages_stored, st.stored);
	zs_region_destroy(r);
	/* destroy left the foreign mapping alone */
	bad = 0;
	for (size_t i = 0; i < n * PG; i++)
		bad += o[i] != 7;
	CHECK_EQ(bad, 0);
	munmap(o, n * PG);
}

/* mremap moving part of the range: the moved bytes follow (stored ones included). */
static void t_move(void)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);
	size_t from = 16, n = 16;

	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a + from * PG, 8 * PG), 8);   /* 16-23 stored, 24-31 resident */
	unsigned char *dst = mmap(NULL, n * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(dst != MAP_FAILED);
	unsigned char *m = mremap(a + from * PG, n * PG, n * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	REQUIRE(m == dst);
	struct zs_region_stats st = stats(r);
	CHECK_EQ(st.broken, 1);
	CHECK_EQ(st.unmapped, n);
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += !page_is(m, i, (unsigned char)(from + i + 1));
	CHECK_EQ(bad, 0);
	CHECK_EQ(wait_stored(r, 0), 0);         /* the moved slots were freed on first touch */
	memset(m, 9, n * PG);                   /* the moved pages are ordinary memory now */
	CHECK(gone(zs_region_pageout(r, a + from * PG, PG)));
	CHECK(gone(zs_region_release(r, a, NP * PG)));
	CHECK_EQ(zs_region_pageout(r, a, from * PG), (long)from);
	CHECK_EQ(zs_region_pageout(r, a + (from + n) * PG, (NP - from - n) * PG),
		 (long)(NP - from - n));
	bad = 0;
	for (size_t p = 0; p < NP; p++)
		if (p < from || p >= from + n)
			bad += !page_is(a, p, (unsigned char)(p + 1));
	CHECK_EQ(bad, 0);
	zs_region_destroy(r);
	bad = 0;
	for (size_t i = 0; i < n * PG; i++)
		bad += m[i] != 9;
	CHECK_EQ(bad, 0);
	munmap(m, n * PG);
}

/* A signal handler reading the very pages its thread is releasing / paging out. */
static struct zs_region *sr;
static unsigned char *sa;
static atomic_int sstop;
static atomic_ulong srounds, shandled;

static void on_usr1(int sig)
{
	(void)sig;
	volatile unsigned char x = sa[(size_t)(rand() % 32) * PG];
	(void)x;
	shandled++;
}

static void *sig_worker(void *arg)
{
	(void)arg;
	while (!sstop) {
		for (size_t p = 0; p < 32; p++)
			memset(sa + p * PG, (int)(p + 3), 128);
		zs_region_pageout(sr, sa, 32 * PG);
		zs_region_release(sr, sa, 32 * PG);
		srounds++;
	}
	return NULL;
}

static void t_signal(void)
{
	sr = mk(NP, NULL);
	sa = zs_region_addr(sr);
	struct sigaction act = { .sa_handler = on_usr1 };
	sigemptyset(&act.sa_mask);
	sigaction(SIGUSR1, &act, NULL);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, sig_worker, NULL) == 0);
	unsigned long last = 0;
	int stuck = 0;
	for (int ms = 0; ms < 1500; ms++) {
		pthread_kill(t, SIGUSR1);
		usleep(1000);
		if (ms % 500 == 499) {
			if (srounds == last)
				stuck = 1;
			last = srounds;
		}
	}
	CHECK_EQ(stuck, 0);
	sstop = 1;
	pthread_join(t, NULL);
	CHECK(shandled > 0);
	signal(SIGUSR1, SIG_DFL);
	zs_region_destroy(sr);
}

/*
 * The application's MADV_DONTNEED, release, writes and reads (each page under
 * its own lock, so the expected bytes are known) against unlocked pageout and
 * automatic reclaim, with two handler threads: every read sees the last
 * write or zeros after the last drop, nothing else.
 */
#define SP 128
static struct zs_region *xr;
static unsigned char *xa, xexp[SP];
static pthread_mutex_t xlock[SP];
static atomic_int xstop;
static atomic_long xwrong, xops;

static atomic_int xexited;
static int xrand;   /* pages of incompressible bytes (seeded by the expected value), not memset */

/* Page p's bytes for value v (0: zeros). */
static void x_gen(unsigned char *b, size_t p, unsigned char v)
{
	uint64_t x = ((uint64_t)v << 32 | p) * 0x9e3779b97f4a7c15ull | 1;
	for (size_t i = 0; i < PG; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
}

static void x_write(size_t p, unsigned char v)
{
	unsigned char b[PG];
	if (!xrand) {
		memset(xa + p * PG, v, PG);
		return;
	}
	x_gen(b, p, v);
	memcpy(xa + p * PG, b, PG);
}

static int x_is(size_t p, unsigned char v)
{
	unsigned char b[PG];
	if (!xrand || !v)
		return page_is(xa, p, v);
	x_gen(b, p, v);
	return memcmp(xa + p * PG, b, PG) == 0;
}

static void *x_app(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg;
	while (!xstop) {
		size_t p = tu_rand(&seed) % SP;
		unsigned op = (unsigned)(tu_rand(&seed) % 4);
		pthread_mutex_lock(&xlock[p]);
		if (!x_is(p, xexp[p]))
			xwrong++;
		if (op == 0) {
			madvise(xa + p * PG, PG, MADV_DONTNEED);
			xexp[p] = 0;
		} else if (op == 1) {
			xexp[p] = (unsigned char)(tu_rand(&seed) | 1);
			x_write(p, xexp[p]);
		} else if (op == 2) {
			if (zs_region_release(xr, xa + p * PG, PG))
				xwrong++;
			xexp[p] = 0;
		}
		pthread_mutex_unlock(&xlock[p]);
		xops++;
	}
	xexited++;
	return NULL;
}

static void *x_pager(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg;
	while (!xstop) {
		size_t p = tu_rand(&seed) % SP, n = 1 + tu_rand(&seed) % 16;
		if (p + n > SP)
			n = SP - p;
		zs_region_pageout(xr, xa + p * PG, n * PG);
	}
	xexited++;
	return NULL;
}

/*
 * Wait up to 10 s for the workers, then for a release of the whole range.
 * Not alarm(): a region call blocks SIGALRM, so a release spinning on a
 * page left owned would never be interrupted.
 */
static void *x_release(void *arg)
{
	(void)arg;
	if (zs_region_release(xr, xa, SP * PG))
		xwrong++;
	xexited++;
	return NULL;
}

static void x_wait(int n, const char *what)
{
	for (int ms = 0; xexited < n; ms++) {
		if (ms == 10000) {
			printf("FAIL stress: %s not finished after 10 s (a page left owned)\n", what);
			fflush(stdout);
			_exit(1);
		}
		usleep(1000);
	}
}

/*
 * limited: incompressible pages and a store mem_limit of 8 pages, so most
 * pageouts fail with -ENOMEM and give their run back while the application zaps and touches
 * those pages (a handler fills a zapped OUT page with zeros).  A failed
 * pageout once finished such a page under the handler, which then marked it
 * OUT again: owned by nobody, and the next release spun forever.
 */
static void t_stress(int limited)
{
	struct zs_region_config c;
	char err[512];
	zs_region_config_init(&c);
	c.size = SP * PG;
	c.handler_threads = 2;
	c.resident_limit = SP / 2 * PG;
	if (limited) {
		c.store.mem_limit = 8 * PG;
		c.store.deferred_free = 1;
	}
	xstop = 0;
	xrand = limited;
	xexited = 0;
	xwrong = 0;
	xops = 0;
	REQUIRE(zs_region_create(&c, &xr, err, sizeof err) == 0);
	xa = zs_region_addr(xr);
	for (size_t p = 0; p < SP; p++) {
		pthread_mutex_init(&xlock[p], NULL);
		xexp[p] = (unsigned char)(p | 1);
		x_write(p, xexp[p]);
	}
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, i < 2 ? x_app : x_pager,
				       (void *)(uintptr_t)(i + 1)) == 0);
	usleep(1500 * 1000);
	xstop = 1;
	x_wait(4, "the workers");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	int bad = 0;
	for (size_t p = 0; p < SP; p++)
		bad += !x_is(p, xexp[p]);
	CHECK_EQ(xwrong, 0);
	CHECK_EQ(bad, 0);
	CHECK(xops > 100);
	struct zs_region_stats st = stats(xr);
	printf("stress%s: %ld operations, %llu pages removed, %llu paged out, %llu reclaimed\n",
	       limited ? " (store limit)" : "", (long)xops, (unsigned long long)st.removed,
	       (unsigned long long)st.pageouts, (unsigned long long)st.reclaimed);
	pthread_t rt;
	REQUIRE(pthread_create(&rt, NULL, x_release, NULL) == 0);
	x_wait(5, "zs_region_release of the whole range");
	pthread_join(rt, NULL);
	CHECK_EQ(xwrong, 0);
	for (size_t p = 0; p < SP; p++)
		pthread_mutex_destroy(&xlock[p]);
	zs_region_destroy(xr);
}

/* A stored page the backing file lost: SIGBUS until dropped, never other bytes. */
static sigjmp_buf bus_jb;
static void on_bus(int s)
{
	(void)s;
	siglongjmp(bus_jb, 1);
}

/* 1: page p reads as v throughout, 0: other bytes, -1: SIGBUS */
static int probe(const unsigned char *a, size_t p, unsigned char v)
{
	if (sigsetjmp(bus_jb, 1))
		return -1;
	return page_is(a, p, v);
}

/* 1: page p reads as want, 0: other bytes, -1: SIGBUS */
static int probe_bytes(const unsigned char *a, size_t p, const unsigned char *want)
{
	if (sigsetjmp(bus_jb, 1))
		return -1;
	return memcmp(want, a + p * PG, PG) == 0;
}

static void rnd_page(unsigned char *b, uint64_t x)
{
	for (size_t i = 0; i < PG; i += 8) {
		x = tu_rand(&x);
		memcpy(b + i, &x, 8);
	}
}

static void t_readerr(void)
{
	char path[] = "/tmp/zs_region_misuseXXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	struct zs_region *r = mk(8, path);
	unsigned char *a = zs_region_addr(r);
	for (size_t p = 0; p < 8; p++)
		rnd_page(a + p * PG, p + 1);   /* incompressible: stored huge, written back */
	CHECK_EQ(zs_region_pageout(r, a, 8 * PG), 8);
	struct zs_zram_wb_result res;
	CHECK_EQ(zs_zram_writeback(zs_region_store(r), ZS_ZRAM_WB_HUGE, 0, &res), 0);
	CHECK_EQ(res.written, 8);
	CHECK_EQ(truncate(path, 0), 0);
	struct sigaction act = { .sa_handler = on_bus }, old;
	sigemptyset(&act.sa_mask);
	act.sa_flags = SA_NODEFER;
	sigaction(SIGBUS, &act, &old);
	unsigned char want[PG];
	int right = 0, bus = 0, wrong = 0;
	for (size_t p = 0; p < 8; p++) {
		rnd_page(want, p + 1);
		int k = probe_bytes(a, p, want);
		right += k == 1;
		bus += k == -1;
		wrong += k == 0;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(right, 0);
	CHECK_EQ(bus, 8);
	CHECK_EQ(wait_stored(r, 0), 0);
	struct zs_region_stats st = stats(r);
	CHECK_EQ(st.sigbus_pages, 8);
	CHECK(st.read_errors >= 8);
	/* still SIGBUS on the next access; pageout leaves it alone */
	CHECK_EQ(probe(a, 0, 0), -1);
	CHECK_EQ(zs_region_pageout(r, a, 8 * PG), 0);
	CHECK_EQ(probe(a, 1, 0), -1);
	/* released or dropped: zeros, and an ordinary page again */
	CHECK_EQ(zs_region_release(r, a, PG), 0);
	CHECK_EQ(probe(a, 0, 0), 1);
	CHECK_EQ(madvise(a + PG, PG, MADV_DONTNEED), 0);
	CHECK_EQ(probe(a, 1, 0), 1);
	memset(a + PG, 0x42, PG);
	CHECK_EQ(probe(a, 1, 0x42), 1);
	CHECK_EQ(probe(a, 2, 0), -1);
	sigaction(SIGBUS, &old, NULL);
	zs_region_destroy(r);
	unlink(path);

	/* one injected read error: retried by the store, the page comes back right */
	strcpy(path, "/tmp/zs_region_misuseXXXXXX");
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	r = mk(8, path);
	a = zs_region_addr(r);
	for (size_t p = 0; p < 8; p++)
		rnd_page(a + p * PG, p + 11);
	CHECK_EQ(zs_region_pageout(r, a, 8 * PG), 8);
	CHECK_EQ(zs_zram_writeback(zs_region_store(r), ZS_ZRAM_WB_HUGE, 0, &res), 0);
	zs_zram_wb_inject(zs_region_store(r), 1, 0, 1);
	sigaction(SIGBUS, &act, &old);
	wrong = 0;
	for (size_t p = 0; p < 8; p++) {
		rnd_page(want, p + 11);
		/* a SIGBUS is allowed (counted below), other bytes are not */
		wrong += probe_bytes(a, p, want) == 0;
	}
	sigaction(SIGBUS, &old, NULL);
	CHECK_EQ(wrong, 0);
	st = stats(r);
	printf("transient read error: sigbus %llu read_errors %llu\n",
	       (unsigned long long)st.sigbus_pages, (unsigned long long)st.read_errors);
	zs_region_destroy(r);
	unlink(path);
}

/* A second destroy of the same pointer is ignored (region.h), and other regions are untouched. */
static void t_double_destroy(void)
{
	struct zs_region *keep = mk(8, NULL);
	unsigned char *k = zs_region_addr(keep);
	fill(k, 0, 8);
	struct zs_region *r = mk(8, NULL);
	zs_region_destroy(r);
	zs_region_destroy(r);            /* must not unmap, close or free anything */
	zs_region_destroy(r);
	CHECK_EQ(zs_region_pageout(keep, k, 8 * PG), 8);
	int same = 1;
	for (size_t i = 0; i < 8; i++)
		same &= k[i * PG] == (unsigned char)(i + 1) && k[i * PG + PG - 1] == (unsigned char)(i + 1);
	CHECK(same);
	zs_region_destroy(keep);
}

/* zs_region_create's ranges (region.h), each end: just inside taken, just outside -EINVAL. */
static int create_rc(struct zs_region_config *c)
{
	struct zs_region *r = (struct zs_region *)&r;
	char err[512];
	int rc = zs_region_create(c, &r, err, sizeof err);
	CHECK(rc == 0 ? r != NULL : r == NULL && err[0] != 0);
	if (rc == 0)
		zs_region_destroy(r);
	return rc;
}

static void t_config(void)
{
	struct zs_region_config c;
	struct zs_region *r;
	char err[512];

	zs_region_config_init(&c);
	c.size = 1;   /* rounded up to a page */
	REQUIRE(zs_region_create(&c, &r, err, sizeof err) == 0);
	CHECK_EQ(zs_region_size(r), PG);
	zs_region_destroy(r);
	CHECK_EQ(zs_region_create(&c, NULL, err, sizeof err), -EINVAL);
	c.size = SIZE_MAX;   /* rounding it up would wrap to 0 */
	CHECK_EQ(zs_region_create(&c, &r, err, sizeof err), -EINVAL);
	CHECK(r == NULL && strstr(err, "above ZS_ZRAM_MAX_SLOTS") != NULL);
	c.size = SIZE_MAX - PG + 2;
	CHECK_EQ(create_rc(&c), -EINVAL);
	c.size = (size_t)(ZS_ZRAM_MAX_SLOTS * PG + 1);
	CHECK_EQ(zs_region_create(&c, &r, err, sizeof err), -EINVAL);
	CHECK(r == NULL && strstr(err, "above ZS_ZRAM_MAX_SLOTS") != NULL);
	c.size = 8 * PG;
	static const struct { unsigned v; int rc; } ht[] = { { 0, 0 }, { 1, 0 }, { 64, 0 },
							     { 65, -EINVAL }, { ~0u, -EINVAL } };
	for (size_t i = 0; i < sizeof ht / sizeof ht[0]; i++) {
		c.handler_threads = ht[i].v;
		CHECK_EQ(create_rc(&c), ht[i].rc);
	}
	c.handler_threads = 1;
	static const struct { unsigned v; int rc; } fa[] = { { 0, 0 }, { 1, 0 }, { 256, 0 },
							     { 257, -EINVAL }, { ~0u, -EINVAL } };
	for (size_t i = 0; i < sizeof fa / sizeof fa[0]; i++) {
		c.fault_around = fa[i].v;
		CHECK_EQ(create_rc(&c), fa[i].rc);
	}
	c.fault_around = 16;
	size_t sys = (size_t)sysconf(_SC_PAGESIZE);
	c.store.page_size = sys;
	CHECK_EQ(create_rc(&c), 0);
	c.store.page_size = sys * 2;
	CHECK_EQ(create_rc(&c), -EINVAL);
	c.store.page_size = sys / 2;
	CHECK_EQ(create_rc(&c), -EINVAL);
}

/*
 * pageout at the store's mem_limit: a call that stores nothing is -ENOMEM, one
 * that stored some pages first returns their number; either way the pages it
 * did not store stay resident and intact (the stored ones come back on touch).
 */
static void t_pageout_enomem(uint64_t seed)
{
	enum { N = 2 * NP, LIMIT = NP + NP / 4 };
	struct zs_region_config c;
	struct zs_region *r;
	char err[512];

	zs_region_config_init(&c);
	c.size = N * PG;
	c.store.mem_limit = LIMIT * PG;
	REQUIRE(zs_region_create(&c, &r, err, sizeof err) == 0);
	unsigned char *a = zs_region_addr(r), want[PG];
	for (size_t p = 0; p < N; p++)
		rnd_page(a + p * PG, seed + p);   /* incompressible: a pool page each */
	long rc = 0, sum = 0;
	for (int k = 0; k < 4 && rc != -ENOMEM; k++) {
		rc = zs_region_pageout(r, a, N * PG);
		CHECK(rc == -ENOMEM || rc > 0);
		sum += rc > 0 ? rc : 0;
	}
	CHECK_EQ(rc, -ENOMEM);
	struct zs_region_stats st = stats(r);
	for (int i = 0; i < 2000 && st.stored + st.resident != N; i++) {
		usleep(1000);   /* the fill's last faults are counted a moment later */
		st = stats(r);
	}
	printf("pageout at mem_limit: stored %llu, resident %llu\n", (unsigned long long)st.stored,
	       (unsigned long long)st.resident);
	CHECK_EQ(st.stored, sum);
	CHECK(st.stored <= LIMIT);
	CHECK_EQ(st.store.pages_stored, st.stored);
	CHECK_EQ(st.stored + st.resident, N);
	int bad = 0;
	for (size_t p = 0; p < N; p++) {
		rnd_page(want, seed + p);
		bad += memcmp(a + p * PG, want, PG) != 0;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(wait_stored(r, 0), 0);
	zs_region_destroy(r);
}

/*
 * The exact codes of region.h: a range touching a part the application
 * unmapped is -EFAULT; after mremap moved a part away, its old addresses
 * are -EFAULT and its new ones (outside the region) -EINVAL.
 */
static void t_gone_codes(void)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);
	/* mapped before the hole below exists, so it cannot land in it (that would be -EFAULT) */
	unsigned char *dst = mmap(NULL, 8 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(dst != MAP_FAILED);
	REQUIRE(dst + 8 * PG <= a || dst >= a + NP * PG);
	fill(a, 0, NP);
	CHECK_EQ(munmap(a + 48 * PG, 8 * PG), 0);
	CHECK_EQ(zs_region_pageout(r, a, NP * PG), -EFAULT);
	CHECK_EQ(zs_region_pageout(r, a + 50 * PG, PG), -EFAULT);
	CHECK_EQ(zs_region_release(r, a + 40 * PG, 9 * PG), -EFAULT);
	CHECK_EQ(zs_region_advise(r, a + 55 * PG, 2 * PG, ZS_REGION_COLD), -EFAULT);
	CHECK_EQ(zs_region_pageout(r, a + 56 * PG, 8 * PG), 8);   /* past the hole: fine */
	CHECK_EQ(zs_region_advise(r, a, PG, (enum zs_region_advice)0), -EINVAL);
	CHECK_EQ(zs_region_advise(r, a, PG, (enum zs_region_advice)4), -EINVAL);
	CHECK_EQ(zs_region_advise(r, a + 40 * PG, PG, ZS_REGION_PAGEOUT), 0);
	CHECK_EQ(stats(r).stored, 9);

	unsigned char *m = mremap(a + 8 * PG, 8 * PG, 8 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	REQUIRE(m == dst);
	CHECK_EQ(zs_region_pageout(r, a + 8 * PG, PG), -EFAULT);
	CHECK_EQ(zs_region_release(r, a, 16 * PG), -EFAULT);
	CHECK_EQ(zs_region_pageout(r, m, PG), -EINVAL);
	CHECK_EQ(zs_region_release(r, m, 8 * PG), -EINVAL);
	CHECK_EQ(zs_region_advise(r, m, PG, ZS_REGION_HOT), -EINVAL);
	CHECK_EQ(stats(r).broken, 1);
	CHECK_EQ(zs_region_pageout(r, a, 8 * PG), 8);
	zs_region_destroy(r);
	munmap(m, 8 * PG);
}

/*
 * MADV_FREE frees the stored objects of the range as MADV_DONTNEED does
 * (stats: removed) and those pages read zeros; its resident pages keep
 * their contents or read zeros, page by page, as the kernel decides.
 */
static void t_madv_free(void)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);
	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a + 16 * PG, 16 * PG), 16);
	struct zs_region_stats s0 = stats(r);
	if (madvise(a + 8 * PG, 16 * PG, MADV_FREE)) {   /* resident 8-15, stored 16-23 */
		printf("MADV_FREE: %s, skipped\n", strerror(errno));
		zs_region_destroy(r);
		return;
	}
	struct zs_region_stats s1 = stats(r);
	CHECK_EQ(s1.stored, 8);
	CHECK_EQ(s1.store.pages_stored, 8);
	CHECK_EQ(s1.removed - s0.removed, 16);
	int bad = 0;
	for (size_t p = 0; p < NP; p++) {
		if (p >= 16 && p < 24)
			bad += !page_is(a, p, 0);
		else if (p >= 8 && p < 16)
			bad += !page_is(a, p, 0) && !page_is(a, p, (unsigned char)(p + 1));
		else
			bad += !page_is(a, p, (unsigned char)(p + 1));
	}
	CHECK_EQ(bad, 0);
	zs_region_destroy(r);
}

/*
 * zs_region_destroy of a pointer zs_region_create never returned: looked up,
 * never dereferenced (here a PROT_NONE page: a read would be SIGSEGV), a
 * line on stderr names it, and live regions are untouched.
 */
static void t_destroy_foreign(void)
{
	struct zs_region *keep = mk(8, NULL);
	unsigned char *k = zs_region_addr(keep);
	fill(k, 0, 8);
	void *guard = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(guard != MAP_FAILED);
	char log[] = "/tmp/zs_region_misuse_errXXXXXX";
	int lfd = mkstemp(log);
	REQUIRE(lfd >= 0);
	fflush(stderr);
	int saved = dup(2);
	REQUIRE(saved >= 0 && dup2(lfd, 2) == 2);
	zs_region_destroy(NULL);   /* a no-op, said nowhere */
	zs_region_destroy((struct zs_region *)guard);
	zs_region_destroy((struct zs_region *)((unsigned char *)k + PG));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char line[256] = "";
	ssize_t n = pread(lfd, line, sizeof line - 1, 0);
	close(lfd);
	unlink(log);
	int lines = 0;
	for (ssize_t i = 0; i < n; i++)
		lines += line[i] == '\n';
	CHECK_EQ(lines, 2);   /* one per foreign pointer, none for NULL */
	printf("destroy of a foreign pointer said: %.*s", (int)(n > 0 ? n : 0), line);
	CHECK_EQ(zs_region_pageout(keep, k, 8 * PG), 8);
	int bad = 0;
	for (size_t p = 0; p < 8; p++)
		bad += !page_is(k, p, (unsigned char)(p + 1));
	CHECK_EQ(bad, 0);
	munmap(guard, PG);
	zs_region_destroy(keep);
}

/*
 * A MAP_FIXED mapping placed over part of the range: that part is no longer
 * the region's (stored objects freed, stats unmapped, calls -EFAULT) and
 * destroy leaves the new mapping alone.  And the range is MADV_DONTFORK and
 * MADV_NOHUGEPAGE (smaps VmFlags "dc" and "nh").
 */
static int vma_flags_have(const void *addr, const char *f1, const char *f2)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, found = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f) && found < 0) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && !strncmp(line, "VmFlags:", 8))
			found = strstr(line, f1) != NULL && strstr(line, f2) != NULL;
	}
	fclose(f);
	return found;
}

static void t_map_fixed(void)
{
	struct zs_region *r = mk(NP, NULL);
	unsigned char *a = zs_region_addr(r);
	CHECK_EQ(vma_flags_have(a, " dc", " nh"), 1);
	fill(a, 0, NP);
	CHECK_EQ(zs_region_pageout(r, a + 16 * PG, 4 * PG), 4);   /* 16-19 stored, 20-23 resident */
	struct zs_region_stats s0 = stats(r);
	unsigned char *o = mmap(a + 16 * PG, 8 * PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	REQUIRE(o == a + 16 * PG);
	memset(o, 5, 8 * PG);
	struct zs_region_stats s1 = stats(r);
	CHECK_EQ(s1.unmapped - s0.unmapped, 8);
	CHECK_EQ(s1.stored, s0.stored - 4);
	CHECK_EQ(s1.store.pages_stored, s1.stored);
	CHECK_EQ(zs_region_pageout(r, a + 16 * PG, PG), -EFAULT);
	CHECK_EQ(zs_region_release(r, a, 17 * PG), -EFAULT);
	CHECK_EQ(zs_region_pageout(r, a, 16 * PG), 16);
	int bad = 0;
	for (size_t p = 0; p < 16; p++)
		bad += !page_is(a, p, (unsigned char)(p + 1));
	CHECK_EQ(bad, 0);
	zs_region_destroy(r);
	bad = 0;
	for (size_t i = 0; i < 8 * PG; i++)
		bad += o[i] != 5;
	CHECK_EQ(bad, 0);
	munmap(o, 8 * PG);
}

int main(void)
{
	char why[512];
	if (!zs_region_available(why, sizeof why)) {
		printf("SKIP: userfaultfd not available: %s\n", why);
		return 77;
	}
	alarm(60);   /* a hang is a failure */
	t_dontneed();
	printf("dontneed done\n");
	t_munmap(0, 0);
	t_munmap(1, 0);
	t_munmap(0, 1);
	printf("munmap/shrink done\n");
	t_move();
	printf("mremap move done\n");
	t_stress(0);
	t_stress(1);
	t_signal();
	printf("signals done (%lu rounds, %lu handled)\n", (unsigned long)srounds,
	       (unsigned long)shandled);
	t_readerr();
	printf("read errors done\n");
	t_double_destroy();
	printf("double destroy done\n");
	t_config();
	t_pageout_enomem(tu_seed("test_region_misuse"));
	t_gone_codes();
	t_madv_free();
	t_destroy_foreign();
	t_map_fixed();
	printf("header promises done\n");
	return tu_done();
}
