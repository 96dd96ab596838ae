/*
 * zs_region stress (keeps the region's fixed defects fixed): everything at
 * once on one region, bounded in time, every byte checked.
 *
 *   - NT application threads, each owning a disjoint block of pages, write
 *     pages whose contents they can recompute (per-page generation numbers:
 *     same-filled, compressible and incompressible pages), verify them, page
 *     out, release, advise and MADV_DONTNEED their own ranges; once per
 *     thread, a partial munmap of its own pages (the block's tail or a hole
 *     in the middle) with its own anonymous mapping placed there
 *     (MAP_FIXED_NOREPLACE), which must survive zs_region_destroy; region
 *     calls on unmapped pages must fail with -EINVAL or -EFAULT;
 *   - a pager paging out, releasing (under the owners' page locks),
 *     advising and reclaiming random ranges across all blocks;
 *   - a signaller sending SIGUSR1 to random application threads, whose
 *     handler reads (and checks) a random page of that thread's block;
 *   - automatic reclaim under a resident limit, a store mem_limit, deferred
 *     free, a compactor, and a writeback thread with injected write errors,
 *     transient read errors (retried: no SIGBUS) and short windows where
 *     every backing read fails (SIGBUS allowed: caught with sigsetjmp,
 *     counted, the page released and the thread goes on);
 *   - O_DIRECT reads into region memory: an application thread writes a
 *     run's next generation to its own part of a file and reads it back
 *     with O_DIRECT straight into the (locked) region pages, so the kernel
 *     pins them and the device writes them while the pager and reclaim
 *     page the block out; a pinned page must stay (what the device wrote
 *     is what the next verify reads).  Left out, and said so, where the
 *     file system refuses O_DIRECT.
 * Passes with 0 wrong bytes, no unexplained SIGBUS and no hang: a watchdog
 * checks every thread's progress counter each second and, when one has not
 * moved for HANG_S seconds, prints every thread's state (operation, page)
 * and aborts.
 *
 *   test_mt_region_stress [SECONDS [SEED]]
 *   env: ZS_STRESS_SECONDS (default 20; 12 under sanitizers), ZS_SEED, ZS_STRESS_OFF
 *        (parts to leave out when narrowing a failure down: "madvise munmap signals
 *        inject pager direct")
 * Exit 77 (ctest skip) without userfaultfd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"
#include "zs/harness.h"
#include "zs/region.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#ifdef SAN_SLOW
#define DEFAULT_SECONDS 12
#define HANG_S 20
#else
#define DEFAULT_SECONDS 20
#define HANG_S 10
#endif

#define PG 4096
#define NT 4                      /* application threads */
#define BLOCK 512                 /* pages per application thread */
#define NPAGES (NT * BLOCK)       /* 8 MiB region */

/* per-page word: gen << 2 | GONE | BUSY */
#define BUSY 1u
#define GONE 2u
static _Atomic uint64_t *meta;
static struct zs_region *reg;
static unsigned char *base;
static struct zs_zram *store;
static atomic_int stop;
static uint64_t g_seed;
static double run_seconds;
/* ZS_STRESS_OFF: words naming parts to leave out, to narrow a failure down: madvise, munmap,
   signals, inject, pager */
static int off_madvise, off_munmap, off_signals, off_inject, off_pager, off_direct;
static int dio_fd = -1;   /* O_DIRECT file: thread i owns pages [i*32, i*32+32) of it */

/* ---- counters ---- */
static atomic_ullong c_ops, c_writes, c_verified, c_wrong_pages, c_wrong_bytes, c_sig_sent,
	c_sig_handled, c_sig_verified, c_sig_skipped, c_sigbus, c_sigbus_unexplained,
	c_pageout_pages, c_enomem, c_releases, c_madvise, c_munmaps, c_gone_checks, c_wb_written,
	c_wb_runs, c_inj_w, c_inj_r, c_inj_perm, c_compactions, c_reclaims, c_errors,
	c_anon_checks, c_anon_window, c_dio_pages, c_dio_failed;
static atomic_int read_perm_ever;   /* a window where every backing read failed has opened */
static atomic_int munmap_busy;
static atomic_uint munmap_epoch;

#define ERR(...)                                                                     \
	do {                                                                         \
		if (atomic_fetch_add(&c_errors, 1) < 20) {                          \
			fprintf(stderr, "ERROR: " __VA_ARGS__);                      \
			fputc('\n', stderr);                                         \
		}                                                                    \
	} while (0)

/* ---- thread states for the watchdog ---- */
enum op { OP_IDLE, OP_WRITE, OP_VERIFY, OP_PAGEOUT, OP_MADVISE, OP_RELEASE, OP_ADVISE,
	  OP_MUNMAP, OP_ANON, OP_SIGREAD, OP_LOCKWAIT, OP_RECLAIM, OP_WRITEBACK, OP_COMPACT,
	  OP_FLUSH, OP_INJECT, OP_SIGNAL, OP_FINAL, OP_DONE, OP_DIRECT };
static const char *op_name[] = { "idle", "write", "verify", "pageout", "madvise", "release",
				  "advise", "munmap", "anon-check", "signal-handler read",
				  "page-lock wait", "reclaim", "writeback", "compact", "flush",
				  "inject", "signal", "final verify", "done",
				  "O_DIRECT read" };

struct tstate {
	const char *name;
	int id;                       /* application thread index, -1 otherwise */
	pthread_t tid;
	_Atomic int op;
	_Atomic long page;
	_Atomic uint64_t progress;
	/* application threads */
	size_t first;                 /* block [first, first + BLOCK) */
	size_t hole, hole_n;          /* unmapped pages [hole, hole + hole_n) */
	unsigned char *anon;          /* own mapping placed in the hole */
	uint64_t rs, sig_rs;
	/* SIGBUS recovery */
	sigjmp_buf jb, sig_jb;
	volatile int in_guard, in_sig;
	volatile long sig_bus_page;   /* a page that raised SIGBUS in the handler, -1 none */
	unsigned char *exp, *tmp;     /* page buffers */
	unsigned char *dio;           /* 32 pages, page aligned: O_DIRECT staging */
};
#define NSTATE (NT + 5)
static struct tstate ts[NSTATE];
static __thread struct tstate *self;

static void set_op(struct tstate *t, int op, long page)
{
	atomic_store_explicit(&t->op, op, memory_order_relaxed);
	atomic_store_explicit(&t->page, page, memory_order_relaxed);
}

static void progress(struct tstate *t)
{
	atomic_fetch_add_explicit(&t->progress, 1, memory_order_relaxed);
}

/* ---- contents ---- */
static inline uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t exp_word(size_t p, uint64_t gen, size_t i)
{
	if (!gen)
		return 0;
	uint64_t h = mix(p * 0x9e3779b97f4a7c15ULL ^ gen * 0xc2b2ae3d27d4eb4fULL ^ g_seed);
	switch (h & 7) {
	case 0:
		return h | 1;                     /* same-filled */
	case 1: case 2: case 3: case 4:
		return i == 0 ? h : mix(h + i % 8) & 0x3f3f3f3f3f3f3f3fULL;   /* compressible */
	default:
		return mix(h ^ (i + 1) * 0x9e3779b97f4a7c15ULL);   /* incompressible: huge */
	}
}

static void gen_page(unsigned char *b, size_t p, uint64_t gen)
{
	uint64_t *w = (uint64_t *)(void *)b;
	for (size_t i = 0; i < PG / 8; i++)
		w[i] = exp_word(p, gen, i);
}

static unsigned char *pg(size_t p)
{
	return base + p * PG;
}

static int gone_rc(long rc)
{
	return rc == -EINVAL || rc == -EFAULT;
}

/* ---- page locks (the application's, not the region's) ---- */

/* Lock page p: returns its generation, or -1 (unlocked) if the page is gone. */
static int64_t lock_page(struct tstate *t, size_t p)
{
	unsigned spins = 0;
	int prev = atomic_load_explicit(&t->op, memory_order_relaxed);
	for (;;) {
		uint64_t v = atomic_load(&meta[p]);
		if (v & GONE)
			return -1;
		if (!(v & BUSY) && atomic_compare_exchange_weak(&meta[p], &v, v | BUSY))
			break;
		if (++spins == 64)
			set_op(t, OP_LOCKWAIT, (long)p);
		sched_yield();
	}
	if (spins >= 64)
		set_op(t, prev, (long)p);
	return (int64_t)(atomic_load(&meta[p]) >> 2);
}

static void unlock_page(size_t p, uint64_t gen)
{
	atomic_store(&meta[p], gen << 2);
}

/* ---- guarded accesses: 0 done, 1 SIGBUS ---- */

__attribute__((noinline)) static int g_write(struct tstate *t, unsigned char *dst,
					     const unsigned char *src)
{
	if (sigsetjmp(t->jb, 1)) {
		t->in_guard = 0;
		return 1;
	}
	t->in_guard = 1;
	memcpy(dst, src, PG);
	t->in_guard = 0;
	return 0;
}

/* 0 equal, 1 SIGBUS, 2 differ (*nb = bytes differing, *off = first) */
__attribute__((noinline)) static int g_cmp(struct tstate *t, const unsigned char *a,
					   const unsigned char *e, size_t *nb, size_t *off)
{
	if (sigsetjmp(t->jb, 1)) {
		t->in_guard = 0;
		return 1;
	}
	t->in_guard = 1;
	int rc = memcmp(a, e, PG) ? 2 : 0;
	if (rc) {
		*nb = 0;
		*off = PG;
		for (size_t i = 0; i < PG; i++)
			if (a[i] != e[i]) {
				if (*off == PG)
					*off = i;
				(*nb)++;
			}
	}
	t->in_guard = 0;
	return rc;
}

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	struct tstate *t = self;
	if (t && t->in_sig)
		siglongjmp(t->sig_jb, 1);
	if (t && t->in_guard)
		siglongjmp(t->jb, 1);
	char msg[160];
	int n = snprintf(msg, sizeof msg, "FATAL: SIGBUS outside a guarded access at %p (thread %s)\n",
			 si->si_addr, t ? t->name : "?");
	if (write(2, msg, (size_t)n) < 0) {
	}
	_exit(1);
}

/* SIGBUS on page p (locked by t): count it, release the page (it reads zeros after). */
static void poisoned(struct tstate *t, size_t p, const char *during)
{
	atomic_fetch_add(&c_sigbus, 1);
	if (!atomic_load(&read_perm_ever)) {
		atomic_fetch_add(&c_sigbus_unexplained, 1);
		ERR("SIGBUS on page %zu during %s (thread %s) though no backing read was made to fail "
		    "permanently", p, during, t->name);
	}
	int rc = zs_region_release(reg, pg(p), PG);
	if (rc)
		ERR("release of page %zu after SIGBUS -> %d", p, rc);
}

static void on_usr1(int sig)
{
	(void)sig;
	struct tstate *t = self;
	if (!t || t->id < 0)
		return;
	int e = errno;
	int prev = atomic_load_explicit(&t->op, memory_order_relaxed);
	long prevp = atomic_load_explicit(&t->page, memory_order_relaxed);
	atomic_fetch_add_explicit(&c_sig_handled, 1, memory_order_relaxed);
	t->sig_rs = t->sig_rs * 6364136223846793005ULL + 1442695040888963407ULL;
	size_t p = t->first + (t->sig_rs >> 33) % BLOCK;
	size_t w = (t->sig_rs >> 20) % (PG / 8 - 8);
	uint64_t v1 = atomic_load(&meta[p]);
	if (v1 & (BUSY | GONE) || t->sig_bus_page >= 0) {
		atomic_fetch_add_explicit(&c_sig_skipped, 1, memory_order_relaxed);
		errno = e;
		return;
	}
	set_op(t, OP_SIGREAD, (long)p);
	/*
	 * A SIGBUS while SIGBUS is blocked kills the process: TSan runs deferred
	 * handlers with every signal blocked.  Unblock it (saved by sigsetjmp, so
	 * the siglongjmp below keeps it so; the handler's return restores the mask).
	 */
	sigset_t bus_set;
	sigemptyset(&bus_set);
	sigaddset(&bus_set, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &bus_set, NULL);
	uint64_t got[8];
	if (sigsetjmp(t->sig_jb, 1) == 0) {
		t->in_sig = 1;
		const volatile uint64_t *src = (const volatile uint64_t *)(void *)pg(p);
		for (int i = 0; i < 8; i++)
			got[i] = src[w + (size_t)i];
		t->in_sig = 0;
		if (atomic_load(&meta[p]) == v1) {
			int bad = 0;
			for (int i = 0; i < 8; i++)
				bad += got[i] != exp_word(p, v1 >> 2, w + (size_t)i);
			if (bad) {
				atomic_fetch_add(&c_wrong_pages, 1);
				atomic_fetch_add(&c_wrong_bytes, (unsigned long long)bad * 8);
				ERR("signal handler on %s read wrong bytes in page %zu (gen %llu, word %zu)",
				    t->name, p, (unsigned long long)(v1 >> 2), w);
			} else {
				atomic_fetch_add_explicit(&c_sig_verified, 1, memory_order_relaxed);
			}
		}
	} else {
		t->in_sig = 0;
		t->sig_bus_page = (long)p;   /* the thread releases it (it is not ours to lock here) */
	}
	set_op(t, prev, prevp);
	progress(t);
	errno = e;
}

/* ---- application threads ---- */

/* Write generation gen+1 to locked page p; returns the new generation. */
static uint64_t write_locked(struct tstate *t, size_t p, uint64_t gen)
{
	uint64_t ng = gen + 1;
	gen_page(t->exp, p, ng);
	if (g_write(t, pg(p), t->exp)) {
		poisoned(t, p, "write");
		if (g_write(t, pg(p), t->exp)) {
			ERR("SIGBUS again writing page %zu after its release", p);
			return 0;
		}
	}
	atomic_fetch_add_explicit(&c_writes, 1, memory_order_relaxed);
	return ng;
}

/* Verify locked page p holds generation gen; returns the generation it holds now. */
static uint64_t verify_locked(struct tstate *t, size_t p, uint64_t gen)
{
	size_t nb = 0, off = 0;
	gen_page(t->exp, p, gen);
	int rc = g_cmp(t, pg(p), t->exp, &nb, &off);
	if (rc == 1) {
		poisoned(t, p, "verify");
		gen = 0;
		memset(t->exp, 0, PG);
		rc = g_cmp(t, pg(p), t->exp, &nb, &off);
		if (rc == 1) {
			ERR("SIGBUS again reading page %zu after its release", p);
			return 0;
		}
	}
	if (rc == 2) {
		atomic_fetch_add(&c_wrong_pages, 1);
		atomic_fetch_add(&c_wrong_bytes, nb);
		ERR("page %zu (thread %s, gen %llu): %zu wrong bytes from offset %zu (got 0x%02x, "
		    "want 0x%02x)", p, t->name, (unsigned long long)gen, nb, off, pg(p)[off],
		    t->exp[off]);
	}
	atomic_fetch_add_explicit(&c_verified, 1, memory_order_relaxed);
	return gen;
}

/* A run [*p, *p + *n) of t's pages, clear of its hole; 0 if none. */
static int pick_run(struct tstate *t, size_t maxn, size_t *p, size_t *n)
{
	uint64_t r = tu_rand(&t->rs);
	*n = 1 + (r >> 8) % maxn;
	*p = t->first + (r >> 24) % BLOCK;
	if (*p + *n > t->first + BLOCK)
		*n = t->first + BLOCK - *p;
	if (t->hole_n) {
		if (*p >= t->hole && *p < t->hole + t->hole_n)
			return 0;
		if (*p < t->hole && *p + *n > t->hole)
			*n = t->hole - *p;
	}
	return 1;
}

static void own_munmap(struct tstate *t)
{
	/* even threads: the block's tail; odd threads: a hole in the middle */
	size_t n = 2 + tu_rand(&t->rs) % 7;
	size_t p = t->id % 2 ? t->first + BLOCK / 2 + tu_rand(&t->rs) % (BLOCK / 4)
			     : t->first + BLOCK - n;
	set_op(t, OP_MUNMAP, (long)p);
	atomic_fetch_add(&munmap_busy, 1);
	atomic_fetch_add(&munmap_epoch, 1);
	for (size_t i = 0; i < n; i++)
		lock_page(t, p + i);
	if (munmap(pg(p), n * PG)) {
		ERR("munmap: %s", strerror(errno));
		for (size_t i = 0; i < n; i++)
			unlock_page(p + i, 0);
		atomic_fetch_sub(&munmap_busy, 1);
		return;
	}
	t->hole = p;
	t->hole_n = n;
	for (size_t i = 0; i < n; i++)
		atomic_store(&meta[p + i], GONE);
	atomic_fetch_add(&munmap_epoch, 1);
	atomic_fetch_sub(&munmap_busy, 1);
	atomic_fetch_add(&c_munmaps, 1);
	unsigned char *o = mmap(pg(p), n * PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (o != pg(p)) {
		ERR("own mapping at the unmapped pages %zu..%zu: got %p (%s)", p, p + n - 1, (void *)o,
		    o == MAP_FAILED ? strerror(errno) : "elsewhere");
		if (o != MAP_FAILED)
			munmap(o, n * PG);
		return;
	}
	for (size_t i = 0; i < n * PG; i++)
		o[i] = (unsigned char)(0xa0 + t->id + i / PG);
	t->anon = o;
}

/*
 * Does pageout copy here (ZS_REGION_MOVE=0, or a kernel before 6.8 without
 * UFFDIO_MOVE)?  Then include/zs/region.h promises less for the
 * application's own mapping: one that is placed at just-unmapped pages while
 * a pageout is dropping them can lose a page - the copy path's zap, an
 * madvise no user-space lock can order with the application's mmap.
 */
static int copy_path(void)
{
	const char *m = getenv("ZS_REGION_MOVE");
	if (m && !strcmp(m, "0"))
		return 1;
	struct utsname u;
	int major = 0, minor = 0;
	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return 1;
	return major < 6 || (major == 6 && minor < 8);
}

static int page_zero(const unsigned char *p)
{
	for (size_t i = 0; i < PG; i++)
		if (p[i])
			return 0;
	return 1;
}

/*
 * The thread's own mapping in its unmapped pages still holds what it wrote.
 * On the copy path a page that reads all zeros is that documented window
 * (the zap's mark: anything else, such as region bytes landing there, still
 * fails): counted, printed, and written again so later checks go on.
 */
static int anon_ok(struct tstate *t)
{
	if (!t->anon)
		return 1;
	int ok = 1;
	for (size_t pgi = 0; pgi < t->hole_n; pgi++) {
		unsigned char want = (unsigned char)(0xa0 + t->id + pgi);
		unsigned char *p = t->anon + pgi * PG;
		int good = 1;
		for (size_t i = 0; i < PG; i += 509)
			if (p[i] != want)
				good = 0;
		if (good)
			continue;
		if (copy_path() && page_zero(p)) {
			atomic_fetch_add(&c_anon_window, 1);
			printf("thread %s: its own mapping's page %zu read zeros: the copy path's "
			       "documented munmap window (include/zs/region.h), not counted as an error\n",
			       t->name, t->hole + pgi);
			memset(p, want, PG);
			continue;
		}
		ok = 0;
	}
	return ok;
}

static void check_gone_calls(struct tstate *t)
{
	if (!t->hole_n)
		return;
	long a = zs_region_pageout(reg, pg(t->hole), PG);
	long b = zs_region_release(reg, pg(t->hole + t->hole_n - 1), PG);
	long c = zs_region_advise(reg, pg(t->hole), t->hole_n * PG, ZS_REGION_HOT);
	long d = zs_region_pageout(reg, pg(t->first), BLOCK * PG);   /* spans the hole */
	if (!gone_rc(a) || !gone_rc(b) || !gone_rc(c) || !gone_rc(d))
		ERR("region calls on unmapped pages %zu..%zu (thread %s): pageout %ld, release %ld, "
		    "advise %ld, pageout of the block %ld (want -EINVAL or -EFAULT)", t->hole,
		    t->hole + t->hole_n - 1, t->name, a, b, c, d);
	atomic_fetch_add(&c_gone_checks, 1);
}

/*
 * Locked pages [p, p+n) (generations g) get their next generation through
 * the file: written from private memory, then read with O_DIRECT into the
 * region.  A read that fails (a poisoned page: the kernel's copy gets
 * EFAULT, not SIGBUS) leaves the run undefined, so it is released (zeros).
 */
static void direct_locked(struct tstate *t, size_t p, size_t n, int64_t *g)
{
	off_t off = (off_t)t->id * 32 * PG;
	for (size_t i = 0; i < n; i++)
		gen_page(t->dio + i * PG, p + i, g[i] < 0 ? 0 : (uint64_t)g[i] + 1);
	if (pwrite(dio_fd, t->dio, n * PG, off) != (ssize_t)(n * PG)) {
		ERR("O_DIRECT pwrite of %zu pages: %s", n, strerror(errno));
		return;
	}
	ssize_t got = pread(dio_fd, pg(p), n * PG, off);
	if (got == (ssize_t)(n * PG)) {
		for (size_t i = 0; i < n; i++)
			if (g[i] >= 0)
				g[i]++;
		atomic_fetch_add(&c_dio_pages, n);
		return;
	}
	atomic_fetch_add(&c_dio_failed, 1);
	int rc = zs_region_release(reg, pg(p), n * PG);
	if (rc)
		ERR("release of own pages %zu+%zu after a failed O_DIRECT read -> %d", p, n, rc);
	for (size_t i = 0; i < n; i++)
		if (g[i] >= 0)
			g[i] = 0;
}

static void *app_main(void *arg)
{
	struct tstate *t = arg;
	self = t;
	double t_munmap = (double)(tu_rand(&t->rs) % 1000) / 1000.0;   /* fraction of the run */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!atomic_load(&stop)) {
		if (t->sig_bus_page >= 0) {
			/* the signal handler met SIGBUS on this page: recover it now */
			size_t p = (size_t)t->sig_bus_page;
			int64_t g = lock_page(t, p);
			if (g >= 0) {
				unlock_page(p, verify_locked(t, p, (uint64_t)g));
			}
			t->sig_bus_page = -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (!off_munmap && !t->hole_n && el > t_munmap * run_seconds * 0.8) {
			own_munmap(t);
			check_gone_calls(t);
			continue;
		}
		uint64_t r = tu_rand(&t->rs) % 100;
		size_t p, n;
		if (!pick_run(t, r < 35 ? 8 : 32, &p, &n))
			continue;
		if (r < 35) {
			set_op(t, OP_WRITE, (long)p);
			for (size_t i = 0; i < n; i++) {
				int64_t g = lock_page(t, p + i);
				if (g >= 0)
					unlock_page(p + i, write_locked(t, p + i, (uint64_t)g));
			}
		} else if (r < 65) {
			set_op(t, OP_VERIFY, (long)p);
			for (size_t i = 0; i < n; i++) {
				int64_t g = lock_page(t, p + i);
				if (g >= 0)
					unlock_page(p + i, verify_locked(t, p + i, (uint64_t)g));
			}
		} else if (r < 75) {
			set_op(t, OP_PAGEOUT, (long)p);
			long k = zs_region_pageout(reg, pg(p), n * PG);
			if (k >= 0)
				atomic_fetch_add(&c_pageout_pages, (unsigned long long)k);
			else if (k == -ENOMEM)
				atomic_fetch_add(&c_enomem, 1);
			else
				ERR("pageout of own pages %zu+%zu -> %ld", p, n, k);
		} else if (r < 82) {
			/* MADV_DONTNEED or release: the pages read zeros afterwards */
			int dn = r < 78 && !off_madvise;
			set_op(t, dn ? OP_MADVISE : OP_RELEASE, (long)p);
			int64_t g[32];
			for (size_t i = 0; i < n; i++)
				g[i] = lock_page(t, p + i);
			if (dn) {
				if (madvise(pg(p), n * PG, MADV_DONTNEED))
					ERR("madvise(DONTNEED) %zu+%zu: %s", p, n, strerror(errno));
				atomic_fetch_add(&c_madvise, 1);
			} else {
				int rc = zs_region_release(reg, pg(p), n * PG);
				if (rc)
					ERR("release of own pages %zu+%zu -> %d", p, n, rc);
				atomic_fetch_add(&c_releases, 1);
			}
			for (size_t i = 0; i < n; i++)
				if (g[i] >= 0)
					unlock_page(p + i, 0);
		} else if (r < 86) {
			set_op(t, OP_ADVISE, (long)p);
			int rc = zs_region_advise(reg, pg(p), n * PG, r & 1 ? ZS_REGION_COLD : ZS_REGION_HOT);
			if (rc)
				ERR("advise own pages %zu+%zu -> %d", p, n, rc);
		} else if (r < 88) {
			set_op(t, OP_ANON, -1);
			if (!anon_ok(t))
				ERR("thread %s: its own mapping in the unmapped pages changed", t->name);
			atomic_fetch_add(&c_anon_checks, 1);
			if (r & 1)
				check_gone_calls(t);
		} else if (r < 93 && dio_fd >= 0) {
			set_op(t, OP_DIRECT, (long)p);
			int64_t g[32];
			for (size_t i = 0; i < n; i++)
				g[i] = lock_page(t, p + i);
			direct_locked(t, p, n, g);
			for (size_t i = 0; i < n; i++)
				if (g[i] >= 0)
					unlock_page(p + i, (uint64_t)g[i]);
		} else {
			/* verify a few random single pages (faults all over the block) */
			set_op(t, OP_VERIFY, (long)p);
			for (int k = 0; k < 4; k++) {
				size_t q, m;
				if (!pick_run(t, 1, &q, &m))
					continue;
				int64_t g = lock_page(t, q);
				if (g >= 0)
					unlock_page(q, verify_locked(t, q, (uint64_t)g));
			}
		}
		atomic_fetch_add_explicit(&c_ops, 1, memory_order_relaxed);
		set_op(t, OP_IDLE, -1);
		progress(t);
	}
	/*
	 * Its munmap time came after the run ended (one long operation under a
	 * loaded machine: "munmaps 3 of 4" at load 29): do it now, so every
	 * run unmaps and checks as many holes as it promises.
	 */
	if (!off_munmap && !t->hole_n) {
		own_munmap(t);
		check_gone_calls(t);
	}
	set_op(t, OP_DONE, -1);
	return NULL;
}

/* ---- pager: random ranges across every block ---- */

static void *pager_main(void *arg)
{
	struct tstate *t = arg;
	self = t;
	while (!atomic_load(&stop)) {
		uint64_t r = tu_rand(&t->rs);
		if (off_pager) {
			progress(t);
			usleep(10000);
			continue;
		}
		size_t n = 1 + (r >> 8) % 64, p = (r >> 20) % NPAGES;
		if (p + n > NPAGES)
			n = NPAGES - p;
		unsigned kind = r % 100;
		unsigned e1 = atomic_load(&munmap_epoch);
		int busy = atomic_load(&munmap_busy);
		int gone = 0;
		for (size_t i = 0; i < n; i++)
			gone |= (atomic_load(&meta[p + i]) & GONE) != 0;
		long rc;
		if (kind < 55) {
			set_op(t, OP_PAGEOUT, (long)p);
			rc = zs_region_pageout(reg, pg(p), n * PG);
			if (rc > 0)
				atomic_fetch_add(&c_pageout_pages, (unsigned long long)rc);
			if (rc == -ENOMEM)
				atomic_fetch_add(&c_enomem, 1);
		} else if (kind < 70) {
			set_op(t, OP_ADVISE, (long)p);
			rc = zs_region_advise(reg, pg(p), n * PG,
					      kind < 62 ? ZS_REGION_COLD : kind < 66 ? ZS_REGION_HOT
										 : ZS_REGION_PAGEOUT);
		} else if (kind < 85) {
			/* release under the owners' page locks; skip ranges with unmapped pages */
			set_op(t, OP_RELEASE, (long)p);
			size_t got = 0;
			while (got < n && lock_page(t, p + got) >= 0)
				got++;
			if (got == n) {
				rc = zs_region_release(reg, pg(p), n * PG);
				if (rc)
					ERR("pager: release %zu+%zu -> %ld", p, n, rc);
				atomic_fetch_add(&c_releases, 1);
				for (size_t i = 0; i < n; i++)
					unlock_page(p + i, 0);
			} else {
				for (size_t i = 0; i < got; i++)
					unlock_page(p + i, atomic_load(&meta[p + i]) >> 2);
			}
			set_op(t, OP_IDLE, -1);
			progress(t);
			continue;
		} else {
			set_op(t, OP_RECLAIM, -1);
			struct zs_region_stats st;
			zs_region_get_stats(reg, &st, sizeof(st));
			long k = zs_region_reclaim(reg, (size_t)(st.resident / 2) * PG);
			if (k > 0)
				atomic_fetch_add(&c_pageout_pages, (unsigned long long)k);
			atomic_fetch_add(&c_reclaims, 1);
			set_op(t, OP_IDLE, -1);
			progress(t);
			continue;
		}
		int stable = !busy && !atomic_load(&munmap_busy) && e1 == atomic_load(&munmap_epoch);
		if (stable && gone && !gone_rc(rc))
			ERR("pager: a call on %zu+%zu (with unmapped pages) -> %ld, want -EINVAL or -EFAULT",
			    p, n, rc);
		if (stable && !gone && rc < 0 && rc != -ENOMEM)
			ERR("pager: a call on %zu+%zu (kind %u) -> %ld", p, n, kind, rc);
		set_op(t, OP_IDLE, -1);
		progress(t);
		if (kind & 1)
			sched_yield();
	}
	set_op(t, OP_DONE, -1);
	return NULL;
}

/* ---- compactor, writeback + injection, signaller ---- */

static void *compact_main(void *arg)
{
	struct tstate *t = arg;
	self = t;
	while (!atomic_load(&stop)) {
		set_op(t, OP_COMPACT, -1);
		zs_zram_compact(store);
		atomic_fetch_add(&c_compactions, 1);
		if (tu_rand(&t->rs) % 4 == 0) {
			set_op(t, OP_FLUSH, -1);
			zs_zram_flush(store);
		}
		set_op(t, OP_IDLE, -1);
		progress(t);
		usleep(2000);
	}
	set_op(t, OP_DONE, -1);
	return NULL;
}

static void *writeback_main(void *arg)
{
	struct tstate *t = arg;
	self = t;
	while (!atomic_load(&stop)) {
		uint64_t r = tu_rand(&t->rs);
		set_op(t, OP_INJECT, -1);
		unsigned k = off_inject ? 100 : r % 100;
		int perm = 0;
		if (k < 30) {
			zs_zram_wb_inject(store, 0, (r >> 8) % 32, 1 + (r >> 16) % 4);
			atomic_fetch_add(&c_inj_w, 1);
		} else if (k < 50) {
			zs_zram_wb_inject(store, 1, (r >> 8) % 16, 1);   /* transient: retried */
			atomic_fetch_add(&c_inj_r, 1);
		} else if (k < 56) {
			atomic_store(&read_perm_ever, 1);
			zs_zram_wb_inject(store, 1, 0, 0);               /* every read fails */
			atomic_fetch_add(&c_inj_perm, 1);
			perm = 1;
		}
		set_op(t, OP_WRITEBACK, -1);
		if ((r >> 30) % 3 == 0)
			zs_zram_mark_idle(store, 0);
		struct zs_zram_wb_result res = { 0, 0 };
		int rc = zs_zram_writeback(store, (r >> 34) % 2 ? ZS_ZRAM_WB_HUGE : ZS_ZRAM_WB_IDLE,
					   (r >> 40) % 128, &res);
		if (rc && rc != -EIO)
			ERR("writeback -> %d", rc);
		atomic_fetch_add(&c_wb_written, res.written);
		atomic_fetch_add(&c_wb_runs, 1);
		usleep(perm ? 5000 + (r >> 48) % 15000 : 10000);
		set_op(t, OP_INJECT, -1);
		zs_zram_wb_inject(store, 0, UINT64_MAX, 0);
		zs_zram_wb_inject(store, 1, UINT64_MAX, 0);
		set_op(t, OP_IDLE, -1);
		progress(t);
		usleep(10000);
	}
	set_op(t, OP_DONE, -1);
	return NULL;
}

static void *signal_main(void *arg)
{
	struct tstate *t = arg;
	self = t;
	while (!atomic_load(&stop)) {
		uint64_t r = tu_rand(&t->rs);
		set_op(t, OP_SIGNAL, (long)(r % NT));
		if (!off_signals)
			pthread_kill(ts[r % NT].tid, SIGUSR1);
		atomic_fetch_add_explicit(&c_sig_sent, 1, memory_order_relaxed);
		set_op(t, OP_IDLE, -1);
		progress(t);
		usleep(200 + (r >> 8) % 400);
	}
	set_op(t, OP_DONE, -1);
	return NULL;
}

/* ---- watchdog ---- */

static atomic_int wd_stop;

static void dump_states(const char *why)
{
	fprintf(stderr, "%s\n", why);
	for (int i = 0; i < NSTATE; i++) {
		struct tstate *t = &ts[i];
		if (!t->name)
			continue;
		fprintf(stderr, "  %-10s op %-20s page %6ld progress %llu\n", t->name,
			op_name[atomic_load(&t->op)], atomic_load(&t->page),
			(unsigned long long)atomic_load(&t->progress));
	}
	struct zs_region_stats st;
	zs_region_get_stats(reg, &st, sizeof(st));
	fprintf(stderr, "  region: resident %llu stored %llu faults %llu broken %d; store "
		"pages_stored %llu mem_used %llu\n", (unsigned long long)st.resident,
		(unsigned long long)st.stored, (unsigned long long)st.faults, st.broken,
		(unsigned long long)st.store.pages_stored, (unsigned long long)st.store.mem_used_total);
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	uint64_t last[NSTATE];
	int still[NSTATE];
	for (int i = 0; i < NSTATE; i++) {
		last[i] = atomic_load(&ts[i].progress);
		still[i] = 0;
	}
	while (!atomic_load(&wd_stop)) {
		sleep(1);
		for (int i = 0; i < NSTATE; i++) {
			if (!ts[i].name || atomic_load(&ts[i].op) == OP_DONE)
				continue;
			uint64_t p = atomic_load(&ts[i].progress);
			still[i] = p == last[i] ? still[i] + 1 : 0;
			last[i] = p;
			if (still[i] >= HANG_S) {
				char why[128];
				snprintf(why, sizeof why, "HANG: thread %s made no progress for %d s; "
					 "every thread's state:", ts[i].name, HANG_S);
				dump_states(why);
				fflush(stdout);
				abort();
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char err[512];
	fc_skip_without_uffd();
	const char *e = getenv("ZS_STRESS_SECONDS");
	run_seconds = argc > 1 ? atof(argv[1]) : e ? atof(e) : DEFAULT_SECONDS;
	if (argc > 2)
		setenv("ZS_SEED", argv[2], 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	g_seed = tu_seed("test_mt_region_stress");
	const char *off = getenv("ZS_STRESS_OFF");
	if (off) {
		off_madvise = !!strstr(off, "madvise");
		off_munmap = !!strstr(off, "munmap");
		off_signals = !!strstr(off, "signals");
		off_inject = !!strstr(off, "inject");
		off_pager = !!strstr(off, "pager");
		off_direct = !!strstr(off, "direct");
		printf("left out (ZS_STRESS_OFF): %s\n", off);
	}
	printf("test_mt_region_stress: %.0f s, %d application threads x %d pages (ZS_STRESS_SECONDS "
	       "or argv[1] for the duration)\n", run_seconds, NT, BLOCK);

	char path[] = "/tmp/zs_stress_wbXXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	/* /var/tmp: /tmp may be a tmpfs, which refuses O_DIRECT on older kernels */
	char dpath[] = "/var/tmp/zs_stress_dioXXXXXX";
	if (!off_direct && (fd = mkstemp(dpath)) >= 0) {
		close(fd);
		dio_fd = open(dpath, O_RDWR | O_DIRECT);
		if (dio_fd < 0)
			printf("O_DIRECT reads left out: %s refuses O_DIRECT (%s)\n", dpath,
			       strerror(errno));
		unlink(dpath);
	}
	struct zs_region_config c;
	/* The seed picks the store's profile, so runs cover the kernel's pool and the
	 * application's (class copies, fitted zspages: what Python's Region takes). */
	int app = (int)((g_seed >> 7) & 1);
	if (app)
		zs_region_config_init_app(&c);
	else
		zs_region_config_init(&c);
	printf("store profile: %s (from the seed)\n", app ? "application" : "kernel");
	c.size = (size_t)NPAGES * PG;
	c.handler_threads = 2;
	c.fault_around = 8;
	c.resident_limit = (size_t)NPAGES / 2 * PG;
	c.store.mem_limit = 1u << 20;   /* 1/8 of the region: pageouts get -ENOMEM now and then */
	c.store.deferred_free = 1;
	c.store.backing_path = path;
	int rc = zs_region_create(&c, &reg, err, sizeof err);
	if (rc) {
		unlink(path);
		printf("SKIP: %s\n", err);
		return 77;
	}
	base = zs_region_addr(reg);
	store = zs_region_store(reg);
	struct zs_region_stats st0;
	const char *mvz = getenv("ZS_REGION_MOVE");
	zs_region_get_stats(reg, &st0, sizeof(st0));
	if (dio_fd >= 0 && (!st0.uffd_move || (mvz && !strcmp(mvz, "zap")))) {
		/* region.h: without UFFDIO_MOVE pageout cannot tell a pinned page */
		printf("O_DIRECT reads left out: no UFFDIO_MOVE (kernel before 6.8 or "
		       "ZS_REGION_MOVE=zap)\n");
		close(dio_fd);
		dio_fd = -1;
	}
	meta = calloc(NPAGES, sizeof *meta);
	REQUIRE(meta);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	fc_sigaction(SIGUSR1, on_usr1, SA_RESTART);

	static const char *names[NT] = { "app0", "app1", "app2", "app3" };
	for (int i = 0; i < NSTATE; i++) {
		struct tstate *t = &ts[i];
		t->id = i < NT ? i : -1;
		t->name = i < NT ? names[i] : (const char *[]){ "pager", "compactor", "writeback",
								 "signaller", "main" }[i - NT];
		t->rs = g_seed * 1000003 + (uint64_t)i * 7919;
		t->sig_rs = g_seed + (uint64_t)i;
		t->sig_bus_page = -1;
		t->first = i < NT ? (size_t)i * BLOCK : 0;
		t->exp = aligned_alloc(PG, PG);
		t->tmp = aligned_alloc(PG, PG);
		t->dio = aligned_alloc(PG, 32 * PG);
		REQUIRE(t->exp && t->tmp && t->dio);
	}
	struct tstate *mainst = &ts[NSTATE - 1];
	self = mainst;
	pthread_t wd;
	REQUIRE(pthread_create(&wd, NULL, watchdog_main, NULL) == 0);
	/* the signaller signals only the application threads */
	for (int i = 0; i < NT; i++)
		REQUIRE(pthread_create(&ts[i].tid, NULL, app_main, &ts[i]) == 0);
	void *(*helpers[4])(void *) = { pager_main, compact_main, writeback_main, signal_main };
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&ts[NT + i].tid, NULL, helpers[i], &ts[NT + i]) == 0);

	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		usleep(100000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		set_op(mainst, OP_IDLE, -1);
		progress(mainst);
		if (el >= run_seconds)
			break;
	}
	atomic_store(&stop, 1);
	/* the signaller first (it signals the application threads); the watchdog still runs */
	for (int i = NT + 4; i-- > 0;)
		pthread_join(ts[i].tid, NULL);
	zs_zram_wb_inject(store, 0, UINT64_MAX, 0);
	zs_zram_wb_inject(store, 1, UINT64_MAX, 0);

	/* final check of every page still mapped */
	set_op(mainst, OP_FINAL, 0);
	unsigned long long before = atomic_load(&c_verified);
	for (size_t p = 0; p < NPAGES; p++) {
		int64_t g = lock_page(mainst, p);
		if (g < 0)
			continue;
		set_op(mainst, OP_FINAL, (long)p);
		unlock_page(p, verify_locked(mainst, p, (uint64_t)g));
		progress(mainst);
	}
	printf("final check: %llu pages\n", atomic_load(&c_verified) - before);
	struct zs_region_stats st;
	zs_region_get_stats(reg, &st, sizeof(st));
	zs_region_destroy(reg);
	atomic_store(&wd_stop, 1);
	pthread_join(wd, NULL);
	/* the application's own mappings in the unmapped pages survive destroy */
	int anon_bad = 0;
	for (int i = 0; i < NT; i++) {
		if (!anon_ok(&ts[i])) {
			anon_bad++;
			printf("thread %s: its own mapping at pages %zu..%zu changed by zs_region_destroy\n",
			       ts[i].name, ts[i].hole, ts[i].hole + ts[i].hole_n - 1);
		}
		if (ts[i].anon)
			munmap(ts[i].anon, ts[i].hole_n * PG);
	}
	unlink(path);

	printf("operations %llu (writes %llu, pages verified %llu), signals sent %llu handled %llu "
	       "(handler reads verified %llu, skipped %llu)\n", atomic_load(&c_ops),
	       atomic_load(&c_writes), atomic_load(&c_verified), atomic_load(&c_sig_sent),
	       atomic_load(&c_sig_handled), atomic_load(&c_sig_verified), atomic_load(&c_sig_skipped));
	printf("faults %llu (wp %llu, pages in %llu), pageouts %llu (reclaimed %llu, by calls %llu, "
	       "ENOMEM %llu), releases %llu pages (%llu calls), MADV_DONTNEED %llu, munmaps %llu "
	       "(checks %llu, own mappings checked %llu, own pages zeroed in the copy path's "
	       "window %llu), reclaim calls %llu\n",
	       (unsigned long long)st.faults, (unsigned long long)st.faults_wp,
	       (unsigned long long)st.pages_in, (unsigned long long)st.pageouts,
	       (unsigned long long)st.reclaimed, atomic_load(&c_pageout_pages),
	       atomic_load(&c_enomem), (unsigned long long)st.releases, atomic_load(&c_releases),
	       atomic_load(&c_madvise), atomic_load(&c_munmaps), atomic_load(&c_gone_checks),
	       atomic_load(&c_anon_checks), atomic_load(&c_anon_window),
	       atomic_load(&c_reclaims));
	printf("writeback: %llu runs, %llu pages written, injected %llu write / %llu transient read / "
	       "%llu every-read failures; store failed_reads %llu failed_writes %llu bd_reads %llu; "
	       "compactions %llu\n", atomic_load(&c_wb_runs), atomic_load(&c_wb_written),
	       atomic_load(&c_inj_w), atomic_load(&c_inj_r), atomic_load(&c_inj_perm),
	       (unsigned long long)st.store.failed_reads, (unsigned long long)st.store.failed_writes,
	       (unsigned long long)st.store.bd_reads, atomic_load(&c_compactions));
	if (dio_fd >= 0)
		close(dio_fd);
	printf("O_DIRECT reads into the region: %llu pages (%llu reads failed: a poisoned page)\n",
	       atomic_load(&c_dio_pages), atomic_load(&c_dio_failed));
	printf("SIGBUS %llu (unexplained %llu), wrong pages %llu, wrong bytes %llu, errors %llu, "
	       "broken %d\n", atomic_load(&c_sigbus), atomic_load(&c_sigbus_unexplained),
	       atomic_load(&c_wrong_pages), atomic_load(&c_wrong_bytes), atomic_load(&c_errors),
	       st.broken);
	CHECK_EQ(atomic_load(&c_wrong_bytes), 0);
	CHECK_EQ(atomic_load(&c_wrong_pages), 0);
	CHECK_EQ(atomic_load(&c_sigbus_unexplained), 0);
	CHECK_EQ(atomic_load(&c_errors), 0);
	CHECK_EQ(anon_bad, 0);
	CHECK_EQ(st.broken, 0);
	CHECK(atomic_load(&c_verified) > 0 && st.faults > 0);
	CHECK(off_signals || atomic_load(&c_sig_handled) > 0);
	CHECK(atomic_load(&c_munmaps) == (off_munmap ? 0 : NT));
	return tu_done();
}
