/*
 * bench_region: the seeds' swap experiment end to end, libzs's zs_region
 * side by side with the kernel's anonymous memory on a zram swap device, in
 * one run on the same pages.
 *
 * Method (seed 000/001): P processes each fill M MiB of anonymous
 * memory with pages of files under /usr/lib, then at the same moment
 *   pageout   kernel: MADV_PAGEOUT into zram swap   region: zs_region_pageout
 *   seq       touch every page in address order (a read of one byte)
 *   pageout   again
 *   random    touch every page in a seeded random order (per-touch latency)
 *   pageout   again
 *   release   kernel: munmap   region: zs_region_release of the whole range
 * all P processes behind one barrier per phase.  Throughputs are summed over
 * the processes; release times are the slowest process.  With --threads the
 * P workers are threads of one process; the kernel side is unchanged (one
 * mapping per thread, one zram device for all, as with processes) and the
 * region side is ONE region of P x M MiB (one store, one pool) in which
 * each thread fills, pages out, touches and releases only its own M MiB
 * slice: the kernel's situation, where all processes swap into one device.
 * Processes mode keeps a region (store, pool) per process.  The region side runs
 * once per free mode (pool lock, class index, class index unlocked, and
 * deferred free = caller-side release) so its pageout/touch rows are medians
 * over those runs.  Memory: after the first pageout, the kernel device's
 * mm_stat mem_used_total against the sum of the region stores' pool pages,
 * with compr_data_size on both sides to show whether the compressors agree.
 *
 * The floor: one userfaultfd round trip (a spinning handler answers a
 * missing fault with UFFDIO_COPY of a ready page, no decompression, p50 of
 * random touches) plus one decompression of a corpus page (mean), measured
 * in this run.  Random swap-in through any user-space handler cannot beat it.
 * At P > 1 the round trip is measured with P processes at once (each its own
 * userfaultfd and handler) and, with --threads, also in the shared region's
 * topology (one userfaultfd, P spinning handlers, P touching threads), which
 * is then the floor the threads-mode target uses.
 *
 * Kernel rows need root and /sys/class/zram-control: the bench hot_adds a
 * free zram device, mkswap + swapon (top priority), and swapoff + hot_remove
 * at the end of each P, also on error, SIGINT and SIGTERM.  Without them the
 * kernel rows are skipped with a message.
 *
 * Usage: bench_region [--quick] [--json] [--mib M] [--procs 1,2] [--comp lz4]
 *                     [--fault-around N] [--spin US (0: poll only)]
 *                     [--handlers N (fault handlers per region; default 1 per
 *                      process's region, P for the threads' shared region)]
 *                     [--page-cache PAGES (pool's freed-page cache; default the region size;
 *                      0: none, every freed page back to the OS at once)]
 *                     [--threads (P threads of one process; default P processes)]
 *                     [--no-kernel]
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "region/region.h"
#include <sys/swap.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#include "zs/compress.h"
#include "zs/region.h"
#include "zs/harness.h"

#define NMODES 5
/*
 * deferred: zs_free_deferred with the pool's background worker (seed 001);
 * deferred-later: no worker, the queue is drained by the flush after the
 * release (the caller picks when the freeing happens).  On 2 cores with P=2
 * the workers compete with the releasing processes for the CPUs.
 */
static const char *mode_name(int mode)
{
	/* the free modes by the library's own names (zs_free_mode_name); the deferred ones are this bench's */
	return mode == 3 ? "deferred" : mode == 4 ? "deferred-later" :
	       zs_free_mode_name((enum zs_free_mode)mode);
}

struct zs_pageset corpus;
size_t npages;        /* per process */
const char *comp = "lz4";
static unsigned fault_around = 32, spin_us = 50;
static unsigned handlers;      /* --handlers; 0: not given (region_handlers) */
static long page_cache = -1;   /* pool's freed-page cache; -1: the region's size */
static int use_threads;   /* --threads: P threads of one process instead of P processes */

/*
 * Fault handlers of a region: --handlers when given; otherwise 1 for each
 * process's own region, and one per worker for the threads' shared region
 * (the processes mode has P regions with one handler each, so P in all).
 */
static unsigned region_handlers(int P)
{
	if (handlers)
		return handlers;
	return use_threads ? (unsigned)P : 1;
}

/*
 * --threads, region side: the one region of P x M MiB the P threads share,
 * each owning the slice [i * M MiB, (i + 1) * M MiB).  One store, one pool,
 * as the kernel has one zram device for every process swapping into it, so
 * partly filled zspages are shared and the memory rows compare like with
 * like.  NULL in processes mode (each process has its own region).
 */
static struct zs_region *shared_reg;

/* ---- helpers ---- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

void pct(uint32_t *lat, size_t n, double *p50, double *p99)
{
	qsort(lat, n, sizeof(*lat), cmp_u32);
	*p50 = lat[n / 2];
	*p99 = lat[n * 99 / 100];
}

static void fill(unsigned char *base, int proc)
{
	for (size_t i = 0; i < npages; i++)
		memcpy(base + i * PG, corpus.data + ((size_t)proc * npages + i) % corpus.npages * PG,
		       PG);
}

volatile unsigned long sink;

/* Touch every page in `order` (NULL: address order); per-touch latency into lat. */
double touch(unsigned char *base, const uint32_t *order, uint32_t *lat)
{
	unsigned long s = 0;
	double t0 = bench_now_ns();
	for (size_t i = 0; i < npages; i++) {
		size_t p = order ? order[i] : i;
		double a = bench_now_ns();
		s += *(volatile unsigned char *)(base + p * PG);
		double b = bench_now_ns();
		lat[i] = (uint32_t)(b - a);
	}
	sink += s;
	return (bench_now_ns() - t0) / 1e9;
}

uint32_t *make_order(uint64_t seed)
{
	uint32_t *o = malloc(npages * sizeof(*o));
	for (size_t i = 0; i < npages; i++)
		o[i] = (uint32_t)i;
	for (size_t i = npages - 1; i > 0; i--) {
		size_t j = bench_rand(&seed) % (i + 1);
		uint32_t t = o[i];
		o[i] = o[j];
		o[j] = t;
	}
	return o;
}

#define TIMED(dst, stmt)                                 \
	do {                                             \
		double _t = bench_now_ns();              \
		stmt;                                    \
		dst = (bench_now_ns() - _t) / 1e9;       \
	} while (0)

/* ---- the two sides, one child each ---- */

static void kernel_child(struct shared *sh, int i, int P)
{
	struct child_res *r = &sh->r[i];
	uint32_t *lat = malloc(npages * sizeof(*lat)), *order = make_order(0x5eed + (uint64_t)i);
	size_t bytes = npages * PG;
	unsigned char *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	(void)P;
	/* Every worker must reach every barrier, even on error. */
	if (b == MAP_FAILED) {
		b = NULL;
		snprintf(r->err, sizeof(r->err), "mmap: %s", strerror(errno));
	} else {
		madvise(b, bytes, MADV_NOHUGEPAGE);
		fill(b, i);
	}
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout_s, madvise(b, bytes, MADV_PAGEOUT));
	pthread_barrier_wait(&sh->bar);   /* parent reads mm_stat */
	pthread_barrier_wait(&sh->bar);
	if (b) {
		r->seq_s = touch(b, NULL, lat);
		pct(lat, npages, &r->seq_p50, &r->seq_p99);
	}
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout2_s, madvise(b, bytes, MADV_PAGEOUT));
	pthread_barrier_wait(&sh->bar);
	if (b) {
		r->rand_s = touch(b, order, lat);
		pct(lat, npages, &r->rand_p50, &r->rand_p99);
	}
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout3_s, madvise(b, bytes, MADV_PAGEOUT));
	pthread_barrier_wait(&sh->bar);
	if (b) {
		TIMED(r->release_s, munmap(b, bytes));
		r->ok = 1;
	}
	free(lat);
	free(order);
}

/* A region of `pages` pages with free mode `mode` and `nhandlers` fault handlers. */
static int region_make(size_t pages, int mode, unsigned nhandlers, struct zs_region **reg,
		       char *err, size_t err_len)
{
	struct zs_region_config cfg;
	zs_region_config_init(&cfg);
	cfg.size = pages * PG;
	cfg.store.comp = comp;
	cfg.store.backend.zs.free_mode = mode >= 3 ? ZS_FREE_CLASS_INDEX_UNLOCKED :
				       (enum zs_free_mode)mode;
	cfg.store.deferred_free = mode >= 3;
	if (mode == 4)
		cfg.store.backend.zs.deferred_worker = -1;
	if (mode >= 3)   /* room for every object: no fallback to zs_free when full */
		cfg.store.backend.zs.deferred_capacity = pages;
	/*
	 * Freed zspage pages stay with the pool's page provider (as the kernel's
	 * zs_free hands them to the buddy allocator) instead of going back to
	 * the OS with one madvise each; --page-cache 0 measures the latter (0 in
	 * the config would mean the provider's default cache, hence NO_CACHE).
	 */
	cfg.store.backend.zs.page_cache_pages = page_cache < 0   ? pages
						: page_cache == 0 ? ZS_PAGES_NO_CACHE
								  : (size_t)page_cache;
	cfg.handler_threads = nhandlers;
	cfg.fault_around = fault_around;
	cfg.spin_us = spin_us ? spin_us : ZS_REGION_NO_SPIN;
	return zs_region_create(&cfg, reg, err, err_len);
}

/* The store's memory counters after the first pageout, into r. */
static void region_mem(struct zs_region *reg, struct child_res *r)
{
	struct zs_region_stats st;
	zs_region_get_stats(reg, &st, sizeof(st));
	r->mem_used = st.store.mem_used_total;
	r->compr = st.store.compr_data_size;
	r->stored = st.store.pages_stored;
	r->same = st.store.same_pages;
	r->huge = st.store.huge_pages;
}

/*
 * One worker of the region side: its own region (processes mode), or its
 * slice of shared_reg (threads mode; the parent creates, measures and
 * destroys it).  Either way the worker touches only its own M MiB.
 */
static void region_child(struct shared *sh, int i, int mode)
{
	struct child_res *r = &sh->r[i];
	uint32_t *lat = malloc(npages * sizeof(*lat)), *order = make_order(0x5eed + (uint64_t)i);
	size_t bytes = npages * PG;
	struct zs_region *reg = shared_reg;
	unsigned char *b = NULL;

	if (reg)
		b = (unsigned char *)zs_region_addr(reg) + (size_t)i * bytes;
	else if (region_make(npages, mode, region_handlers(1), &reg, r->err, sizeof(r->err)) == 0)
		b = zs_region_addr(reg);
	/* Every child must reach every barrier, even on error. */
	if (b)
		fill(b, i);
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout_s, zs_region_pageout(reg, b, bytes));
	if (b && !shared_reg)
		region_mem(reg, r);
	pthread_barrier_wait(&sh->bar);   /* threads mode: the parent reads the shared store */
	pthread_barrier_wait(&sh->bar);
	if (b) {
		r->seq_s = touch(b, NULL, lat);
		pct(lat, npages, &r->seq_p50, &r->seq_p99);
	}
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout2_s, zs_region_pageout(reg, b, bytes));
	pthread_barrier_wait(&sh->bar);
	if (b) {
		r->rand_s = touch(b, order, lat);
		pct(lat, npages, &r->rand_p50, &r->rand_p99);
	}
	pthread_barrier_wait(&sh->bar);
	if (b)
		TIMED(r->pageout3_s, zs_region_pageout(reg, b, bytes));
	pthread_barrier_wait(&sh->bar);
	if (b && shared_reg) {
		/*
		 * Each thread waits for the deferred frees queued so far, its own
		 * and possibly its neighbours' (one queue per pool, as one zram
		 * device's): the flush row is the slowest thread's wait.  The
		 * parent checks the store is empty after every thread is done.
		 */
		TIMED(r->release_s, zs_region_release(reg, b, bytes));
		TIMED(r->flush_s, zs_zram_flush(zs_region_store(reg)));
		r->ok = 1;
	} else if (b) {
		TIMED(r->release_s, zs_region_release(reg, b, bytes));
		TIMED(r->flush_s, zs_zram_flush(zs_region_store(reg)));
		struct zs_region_stats st;
		zs_region_get_stats(reg, &st, sizeof(st));
		r->faults = st.faults;
		r->ok = st.store.pages_stored == 0;
		if (!r->ok)
			snprintf(r->err, sizeof(r->err), "store not empty after release");
		zs_region_destroy(reg);
	}
	free(lat);
	free(order);
}

struct worker_arg {
	struct shared *sh;
	int i, P, kernel, mode;
};

static void *worker_thread(void *p)
{
	struct worker_arg *a = p;
	if (a->kernel)
		kernel_child(a->sh, a->i, a->P);
	else
		region_child(a->sh, a->i, a->mode);
	return NULL;
}

/*
 * Run P workers of one side (processes, or threads with --threads); the
 * parent joins every barrier.  kmem: the kernel device's mm_stat after the
 * first pageout.
 */
static int run_side(struct shared *sh, int P, int kernel, int mode, uint64_t *kmem)
{
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->bar, &ba, (unsigned)P + 1);
	memset(sh->r, 0, sizeof(sh->r));
	pid_t pids[MAXP];
	pthread_t tids[MAXP];
	struct worker_arg args[MAXP];
	if (use_threads && !kernel) {
		char err[256];
		if (region_make((size_t)P * npages, mode, region_handlers(P), &shared_reg, err,
				sizeof(err))) {
			fprintf(stderr, "bench_region: %s: shared region: %s\n", mode_name(mode),
				err);
			pthread_barrier_destroy(&sh->bar);
			return -1;
		}
	}
	for (int i = 0; i < P; i++) {
		args[i] = (struct worker_arg){ sh, i, P, kernel, mode };
		if (use_threads) {
			if (pthread_create(&tids[i], NULL, worker_thread, &args[i])) {
				fprintf(stderr, "bench_region: pthread_create failed\n");
				exit(2);
			}
			continue;
		}
		pids[i] = fork();
		if (pids[i] == 0) {
			/* the device belongs to the parent: children never tear it down */
			kdev = -1;
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			worker_thread(&args[i]);
			_exit(0);
		}
		live_pids[i] = pids[i];
		nlive = i + 1;
	}
	for (int b = 0; b < 7; b++) {   /* the workers' seven barriers */
		pthread_barrier_wait(&sh->bar);
		if (b == 1 && kernel && kmem)
			kzram_mm_stat(kmem);
		if (b == 1 && shared_reg)   /* every slice paged out, nothing touched yet */
			region_mem(shared_reg, &sh->r[0]);
	}
	int ok = 1;
	for (int i = 0; i < P; i++) {
		int st = 0;
		if (use_threads)
			pthread_join(tids[i], NULL);
		else
			waitpid(pids[i], &st, 0);
		live_pids[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) || !sh->r[i].ok) {
			ok = 0;
			fprintf(stderr, "bench_region: %s worker %d failed: %s\n",
				kernel ? "kernel" : mode_name(mode), i, sh->r[i].err);
		}
	}
	if (shared_reg) {
		struct zs_region_stats st;
		zs_region_get_stats(shared_reg, &st, sizeof(st));
		sh->r[0].faults = st.faults;
		if (st.store.pages_stored) {
			ok = 0;
			fprintf(stderr, "bench_region: %s: shared store not empty after release "
				"(%llu pages)\n", mode_name(mode),
				(unsigned long long)st.store.pages_stored);
		}
		zs_region_destroy(shared_reg);
		shared_reg = NULL;
	}
	pthread_barrier_destroy(&sh->bar);
	return ok ? 0 : -1;
}

struct side {
	double pageout2_mbs;
	double pageout_mbs, seq_mbs, rand_mbs, seq_p50, seq_p99, rand_p50, rand_p99;
	double release_ms, flush_ms, rand_us_page;
	uint64_t mem_used, compr;
};

static void summarize(struct shared *sh, int P, struct side *s)
{
	double mb = (double)npages * PG / 1048576.0;
	double po = 0, po2 = 0, sq = 0, rn = 0, rel = 0, fl = 0;
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < P; i++) {
		struct child_res *r = &sh->r[i];
		po += mb / r->pageout_s;
		po2 += mb / r->pageout2_s;
		sq += mb / r->seq_s;
		rn += mb / r->rand_s;
		rel = r->release_s > rel ? r->release_s : rel;
		fl = r->flush_s > fl ? r->flush_s : fl;
		s->seq_p50 += r->seq_p50 / P;
		s->seq_p99 += r->seq_p99 / P;
		s->rand_p50 += r->rand_p50 / P;
		s->rand_p99 += r->rand_p99 / P;
		s->rand_us_page += r->rand_s * 1e6 / (double)npages / P;
		s->mem_used += r->mem_used;
		s->compr += r->compr;
	}
	s->pageout_mbs = po;
	s->pageout2_mbs = po2;
	s->seq_mbs = sq;
	s->rand_mbs = rn;
	s->release_ms = rel * 1e3;
	s->flush_ms = fl * 1e3;
}

/* Field-wise median of n runs (memory counters: the first run's). */
static void side_median(const struct side *v, int n, struct side *out)
{
	double t[64];
	memset(out, 0, sizeof(*out));
	if (n <= 0)
		return;
	*out = v[0];
#define SMED(f)                                 \
	do {                                    \
		for (int i = 0; i < n; i++)     \
			t[i] = v[i].f;          \
		out->f = bench_median(t, n);    \
	} while (0)
	SMED(pageout_mbs);
	SMED(pageout2_mbs);
	SMED(seq_mbs);
	SMED(rand_mbs);
	SMED(seq_p50);
	SMED(seq_p99);
	SMED(rand_p50);
	SMED(rand_p99);
	SMED(release_ms);
	SMED(flush_ms);
	SMED(rand_us_page);
#undef SMED
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, nokernel = 0;
	struct bench_json js = { 0 };
	size_t mib = 0;   /* 0: not given (the range is 1..) */
	int procs[MAXP] = { 1, 2 }, nprocs = 2;

	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--mib", mib, 1, 1 << 20, "M", "MiB per region; default 64, 16 with --quick"),
		BENCH_OPT_LIST("--procs", procs, nprocs, 1, MAXP, MAXP, "1,2",
			       "the process (or thread) counts P"),
		BENCH_OPT_STR("--comp", comp, "lz4", "the store's compressor"),
		BENCH_OPT_U64("--fault-around", fault_around, 0, 1 << 20, "N",
			      "pages filled per fault"),
		BENCH_OPT_U64("--handlers", handlers, 1, 64, "N",
			      "fault handlers per region; default 1 per process, P for --threads"),
		BENCH_OPT_U64("--spin", spin_us, 0, 10000000, "US", "handler spin before poll; 0: poll only"),
		BENCH_OPT_U64("--page-cache", page_cache, 0, 1ull << 40, "PAGES",
			      "pool's freed-page cache; default the region size, 0: none"),
		BENCH_OPT_FLAG("--threads", use_threads, "P threads of one process, not P processes"),
		BENCH_OPT_FLAG("--no-kernel", nokernel, "skip the kernel zram rows"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	if (!mib)
		mib = quick ? 16 : 64;   /* an explicit --mib 64 stays 64 with --quick */
	for (int i = 0; i < nprocs; i++)
		if (procs[i] < 1 || procs[i] > MAXP) {
			fprintf(stderr, "bench_region: --procs values must be 1..%d\n", MAXP);
			return 2;
		}
	bench_quiet = js.enabled;
	npages = mib * 1048576 / PG;

	char err[512];
	if (!zs_region_available(err, sizeof(err))) {
		fprintf(stderr, "bench_region: %s\n", err);
		return 2;
	}
	int maxp = 0;
	for (int i = 0; i < nprocs; i++)
		maxp = procs[i] > maxp ? procs[i] : maxp;
	char *paths[] = { "/usr/lib" };
	if (zs_pageset_load(&corpus, PG, paths, 1, (uint64_t)maxp * npages * PG) ||
	    corpus.npages < 64) {
		fprintf(stderr, "bench_region: cannot load a corpus from /usr/lib\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	atexit(kzram_down);

	bench_print_machine();
	bench_json_begin(&js, "bench_region");
	bench_say("corpus: %zu pages from /usr/lib; %zu MiB per worker; %s; fault-around %u, "
		  "spin %u us, pool page cache %s pages\n", corpus.npages, mib, comp,
		  fault_around, spin_us,
		  page_cache < 0 ? "the region's" : (snprintf(err, sizeof(err), "%ld", page_cache), err));
	bench_json_num(&js, "mib", (double)mib);
	bench_json_str(&js, "comp", comp);
	bench_json_num(&js, "fault_around", fault_around);

	int nrounds = bench_rounds(rounds, quick, 1, 3);
	double rts[64];
	for (int i = 0; i < nrounds; i++)
		rts[i] = floor_roundtrip(quick ? 2048 : 8192);
	double rt = bench_median(rts, nrounds), dc = floor_decompress();
	double fl = rt + dc;
	bench_say("floor: userfaultfd round trip %.2f us (p50, spinning handler, UFFDIO_COPY, median "
		  "of %d) + "
		  "%s decompression %.2f us (median page of this corpus) = %.2f us per random page\n", rt / 1e3, nrounds, comp, dc / 1e3,
		  fl / 1e3);
	bench_json_num(&js, "floor_roundtrip_us", rt / 1e3);
	bench_json_num(&js, "floor_decompress_us", dc / 1e3);
	bench_json_num(&js, "floor_us", fl / 1e3);

	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int rc = 0;
	for (int pi = 0; pi < nprocs; pi++) {
		int P = procs[pi];
		struct side k = { 0 }, rg[NMODES], kr[64], rr[NMODES][64], all[NMODES * 64];
		uint64_t kmem[9] = { 0 }, km[9];
		int have_k = 0, nk = 0, nr[NMODES] = { 0 }, nall = 0;
		char msg[256] = "";
		if (use_threads)
			bench_say("\n== P=%d threads x %zu MiB, %d round(s); region side: one shared "
				  "region of %zu MiB (one store, one pool), a %zu MiB slice per thread, "
				  "%u handler(s) ==\n", P, mib, nrounds, (size_t)P * mib, mib,
				  region_handlers(P));
		else
			bench_say("\n== P=%d processes x %zu MiB, %d round(s); region side: a region "
				  "per process, %u handler(s) each ==\n", P, mib, nrounds,
				  region_handlers(P));
		/* Rounds interleave the kernel and every region mode; rows are medians. */
		for (int rd = 0; rd < nrounds; rd++) {
			if (!nokernel && kzram_up((uint64_t)P * npages * PG * 2 + (64u << 20), msg,
						  sizeof(msg)) == 0) {
				if (run_side(sh, P, 1, 0, km) == 0) {
					summarize(sh, P, &kr[nk++]);
					if (!have_k)
						memcpy(kmem, km, sizeof(kmem));
					have_k = 1;
				}
				kzram_down();
			} else if (!nokernel && rd == 0) {
				bench_say("%s\n", msg);
			}
			for (int m = 0; m < NMODES; m++) {
				if (run_side(sh, P, 0, m, NULL)) {
					rc = 1;
					continue;
				}
				summarize(sh, P, &rr[m][nr[m]]);
				all[nall++] = rr[m][nr[m]++];
			}
		}
		/* the floor with P at once (P=1: the one printed above) */
		double flp = fl, flproc = fl;
		if (P > 1) {
			for (int i = 0; i < nrounds; i++)
				rts[i] = floor_at(sh, P, quick ? 2048 : 8192);
			flp = flproc = bench_median(rts, nrounds) + dc;
			bench_say("floor with %d processes at once: round trip %.2f us + %.2f us = "
				  "%.2f us\n", P, (flp - dc) / 1e3, dc / 1e3, flp / 1e3);
		}
		if (P > 1 && use_threads) {
			/*
			 * The shared region has one userfaultfd for all threads: its
			 * floor is the round trip in that topology (the target's
			 * floor in threads mode); the per-process one is printed too.
			 */
			int ok = 1;
			for (int i = 0; i < nrounds; i++)
				if ((rts[i] = floor_shared(P, quick ? 2048 : 8192)) < 0)
					ok = 0;
			if (ok) {
				flp = bench_median(rts, nrounds) + dc;
				bench_say("floor with %d threads on one userfaultfd (%d spinning "
					  "handlers): round trip %.2f us + %.2f us = %.2f us\n", P, P,
					  (flp - dc) / 1e3, dc / 1e3, flp / 1e3);
			}
		}
		/* pageout and touch rows: median over every region run (all modes, rounds) */
		struct side r;
		side_median(all, nall, &r);
		side_median(kr, nk, &k);
		for (int m = 0; m < NMODES; m++)
			side_median(rr[m], nr[m], &rg[m]);
		bench_say("%-34s %12s %12s %8s\n", "", "zs_region", "kernel", "ratio");
#define ROW(name, a, b, hib)                                                                 \
	bench_say("%-34s %12.2f %12s %8s\n", name, (a),                                       \
		  have_k ? (snprintf(kb, sizeof(kb), "%.2f", (b)), kb) : "-",                  \
		  have_k && (a) > 0 && (b) > 0 ? (snprintf(rb, sizeof(rb), "%.2fx", hib ? (a) / (b) : (b) / (a)), rb) \
					   : "-")
		char kb[32], rb[32];
		ROW("pageout MB/s (all procs)", r.pageout_mbs, k.pageout_mbs, 1);
		ROW("  again, after swap-in MB/s", r.pageout2_mbs, k.pageout2_mbs, 1);
		ROW("sequential swap-in MB/s", r.seq_mbs, k.seq_mbs, 1);
		ROW("  touch p50 us", r.seq_p50 / 1e3, k.seq_p50 / 1e3, 0);
		ROW("  touch p99 us", r.seq_p99 / 1e3, k.seq_p99 / 1e3, 0);
		ROW("random swap-in MB/s", r.rand_mbs, k.rand_mbs, 1);
		ROW("  us per page (mean)", r.rand_us_page, k.rand_us_page, 0);
		ROW("  touch p50 us", r.rand_p50 / 1e3, k.rand_p50 / 1e3, 0);
		ROW("  touch p99 us", r.rand_p99 / 1e3, k.rand_p99 / 1e3, 0);
		bench_say("random swap-in vs floor: p50 %.2fx, mean %.2fx of %.2f us\n",
			  r.rand_p50 / flp, r.rand_us_page * 1e3 / flp, flp / 1e3);
		if (flp != flproc)
			bench_say("  vs the %d-process floor: p50 %.2fx, mean %.2fx of %.2f us\n", P,
				  r.rand_p50 / flproc, r.rand_us_page * 1e3 / flproc, flproc / 1e3);
		/* the row above is the median over every mode; a mode's own cost shows here */
		bench_say("  random touch p50 us by free mode:");
		for (int m = 0; m < NMODES; m++)
			bench_say(" %s %.2f", mode_name(m), rg[m].rand_p50 / 1e3);
		bench_say("\n");
		for (int m = 0; m < NMODES; m++) {
			char name[64];
			snprintf(name, sizeof(name), "release ms (%s)", mode_name(m));
			ROW(name, rg[m].release_ms, k.release_ms, 0);
		}
		bench_say("deferred: caller-side release %.2f ms, then flush %.2f ms; deferred-later: "
			  "%.2f ms, then flush %.2f ms\n", rg[3].release_ms, rg[3].flush_ms,
			  rg[4].release_ms, rg[4].flush_ms);
		if (rg[3].release_ms > 0 && rg[4].release_ms > 0)
			bench_say("speedup vs pool lock (seed 000): class %.2fx, class-unlocked "
				  "%.2fx\ncaller-side release vs synchronous class-unlocked (seed 001): "
				  "deferred %.2fx, deferred-later %.2fx\n",
				  rg[0].release_ms / rg[1].release_ms, rg[0].release_ms / rg[2].release_ms,
				  rg[2].release_ms / rg[3].release_ms, rg[2].release_ms / rg[4].release_ms);
		bench_say("memory after pageout: region pool %.2f MiB (compr %.2f MiB), kernel "
			  "mem_used_total %s MiB (compr %s MiB)\n",
			  (double)r.mem_used / 1048576.0, (double)r.compr / 1048576.0,
			  have_k ? (snprintf(kb, sizeof(kb), "%.2f", (double)kmem[2] / 1048576.0), kb)
				 : "-",
			  have_k ? (snprintf(rb, sizeof(rb), "%.2f", (double)kmem[1] / 1048576.0), rb)
				 : "-");
		if (have_k && kmem[2])
			bench_say("  pool pages / kernel mem_used_total = %.4f; compressed sizes "
				  "region/kernel = %.4f\n", (double)r.mem_used / (double)kmem[2],
				  (double)r.compr / (double)kmem[1]);
		if (have_k) {
			/* the region's targets against the kernel, as measured in this run */
			double mem = kmem[2] ? (double)r.mem_used / (double)kmem[2] : 0;
			double best_sync = rg[0].release_ms;
			for (int m = 1; m < 3; m++)
				if (rg[m].release_ms > 0 && rg[m].release_ms < best_sync)
					best_sync = rg[m].release_ms;
#define YN(c) ((c) ? "holds" : "MISSED")
			bench_say("targets: pageout >= 1.0x kernel %s (%.2fx); sequential swap-in >= "
				  "1.0x %s (%.2fx); random p50 <= 1.3x floor %s (%.2fx); release >= "
				  "1.4x faster than munmap %s (%.2fx, fastest free mode); deferred "
				  "caller-side >= 3x faster than munmap %s (%.2fx); pool pages within "
				  "1%% of mem_used_total %s (%.4f)\n",
				  YN(r.pageout_mbs >= k.pageout_mbs), r.pageout_mbs / k.pageout_mbs,
				  YN(r.seq_mbs >= k.seq_mbs), r.seq_mbs / k.seq_mbs,
				  YN(r.rand_p50 <= 1.3 * flp), r.rand_p50 / flp,
				  YN(k.release_ms >= 1.4 * best_sync), k.release_ms / best_sync,
				  YN(k.release_ms >= 3 * rg[3].release_ms), k.release_ms / rg[3].release_ms,
				  YN(mem > 0.99 && mem < 1.01), mem);
#undef YN
		}
		char key[96];
#define JS(name, val)                                                \
	do {                                                         \
		snprintf(key, sizeof(key), "p%d_%s", P, name);       \
		bench_json_num(&js, key, val);                       \
	} while (0)
		JS("region_pageout_mbs", r.pageout_mbs);
		JS("region_pageout2_mbs", r.pageout2_mbs);
		JS("region_seq_mbs", r.seq_mbs);
		JS("region_rand_mbs", r.rand_mbs);
		JS("region_rand_p50_us", r.rand_p50 / 1e3);
		JS("region_rand_p99_us", r.rand_p99 / 1e3);
		JS("region_seq_p50_us", r.seq_p50 / 1e3);
		JS("region_rand_us_page", r.rand_us_page);
		JS("floor_us", flp / 1e3);
		JS("floor_processes_us", flproc / 1e3);
		for (int m = 0; m < NMODES; m++) {
			char nm[64];
			snprintf(nm, sizeof(nm), "region_release_ms_%s", mode_name(m));
			JS(nm, rg[m].release_ms);
		}
		JS("region_deferred_flush_ms", rg[3].flush_ms);
		JS("region_deferred_later_flush_ms", rg[4].flush_ms);
		JS("region_mem_used", (double)r.mem_used);
		JS("region_compr", (double)r.compr);
		if (have_k) {
			JS("kernel_pageout_mbs", k.pageout_mbs);
			JS("kernel_pageout2_mbs", k.pageout2_mbs);
			JS("kernel_seq_mbs", k.seq_mbs);
			JS("kernel_rand_mbs", k.rand_mbs);
			JS("kernel_rand_p50_us", k.rand_p50 / 1e3);
			JS("kernel_rand_us_page", k.rand_us_page);
			JS("kernel_munmap_ms", k.release_ms);
			JS("kernel_mem_used_total", (double)kmem[2]);
			JS("kernel_compr", (double)kmem[1]);
		}
	}
	bench_json_end(&js);
	zs_pageset_free(&corpus);
	return rc;
}
