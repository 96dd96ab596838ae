/*
 * bench_threads: how the allocators scale with threads on one shared pool,
 * and what memory they hold afterwards.
 *
 * Workloads (every thread runs its own copy, all threads on one store unless
 * the row says "private"):
 *  - churn: R rounds of N x (allocate 200..3600 B uniform + write it), then
 *    free all N; allocate + write is zs_backend_malloc_write, the one call a
 *    store makes (zs_malloc_write for zsmalloc, malloc + memcpy for the
 *    malloc rows).  One op = allocate + write + free (--no-write: allocate +
 *    free, what the allocator alone costs).
 *  - zram: a zram-like steady state.  Sizes are the lz4-compressed sizes of
 *    real 4 KiB pages (files under /usr/lib by default; same-filled pages,
 *    which zram does not store, left out; sizes >= the page stored whole).
 *    Each thread owns S slots, fills them, then does M ops on random slots:
 *    80% overwrite (free the old object, allocate + write the new one), 20%
 *    discard (free).  One op = one overwrite or discard.
 *
 * Rows: zsmalloc in each free mode with the default page provider, the
 * class-unlocked mode with every page cached (a cache bound above the peak,
 * decay 1 h), with the previous provider's settings (256 KiB cache: no
 * per-CPU caches, everything else back to the OS at once), and with one
 * private pool per thread; the two named profiles as a caller gets them
 * ("kernel": zs_pool_config_init, "app": zs_pool_config_init_app, printed
 * side by side as app / kernel ratios with the pool pages each held); zblock;
 * glibc, jemalloc and mimalloc doing
 * malloc + memcpy + free of the same sizes.  All through the backend
 * interface (include/zs/backend.h).
 *
 * Method: every (row, thread count, round) runs in a fresh forked process
 * (so allocator state and RSS do not leak from one row into the next), rows
 * in rotating order, median over rounds.  Printed: Mops/s, scaling (T / T=1
 * of the same row), ratio to mimalloc at the same T, and the process RSS
 * above its value before the store was created: at the end of the run (all
 * threads joined, store alive) and after one idle second (no call made), in
 * MiB, beside the live data (pool pages for zsmalloc/zblock, object bytes for
 * the malloc kinds).  RSS is from round 1 only.
 *
 * usage: bench_threads [--quick] [--json] [--rounds N] [--threads 1,2,...]
 *                      [--workload churn|zram|both] [--rows a,b,...]
 *                      [--n N] [--r R] [--no-write] [--no-autocompact]
 *                      [--slots S] [--ops M] [PATH...]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/pages.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

#define MAXT 64
#define MAXROWS 20
#define PAGE 4096

struct row {
	const char *name;
	const char *kind;
	int free_mode;
	size_t cache_pages;   /* 0: default */
	unsigned decay_ms;    /* 0: default */
	int private_pool;
	const char *what;
	int shards;           /* class_shards; -1: one per online CPU */
	int profile;          /* 0: the fields above; 1: zs_pool_config_init as is (the kernel
	                         profile), 2: zs_pool_config_init_app as is, 3: the app
	                         profile with free_mode above (the free modes compared on
	                         the app layout: what chose the profile's free mode) */
};

static const struct row all_rows[] = {
	{ "zs-pool", "zsmalloc", ZS_FREE_POOL_LOCK, 0, 0, 0, "zsmalloc, pool lock", 0, 0 },
	{ "zs-class", "zsmalloc", ZS_FREE_CLASS_INDEX, 0, 0, 0, "zsmalloc, class index", 0, 0 },
	{ "zs-unlocked", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, 0, 0, 0,
	  "zsmalloc, class index + unlocked", 0, 0 },
	{ "zs-cached", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, (size_t)1 << 20,
	  ZS_PAGES_MAX_DECAY_MS, 0, "same, every page cached", 0, 0 },
	{ "zs-oldprov", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, 64, 0, 0,
	  "same, previous provider (256 KiB cache)", 0, 0 },
	{ "zs-private", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, 0, 0, 1,
	  "same, one pool per thread", 0, 0 },
	{ "zs-private-cached", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, (size_t)1 << 20,
	  ZS_PAGES_MAX_DECAY_MS, 1, "same, one pool per thread, every page cached", 0, 0 },
	{ "zs-sharded", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, 0, 0, 0,
	  "same, class shards (one copy of each class per CPU)", -1, 0 },
	{ "zs-sharded-cached", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, (size_t)1 << 20,
	  ZS_PAGES_MAX_DECAY_MS, 0, "same, class shards, every page cached", -1, 0 },
	{ "kernel", "zsmalloc", 0, 0, 0, 0, "zsmalloc, kernel profile (zs_pool_config_init)", 0,
	  1 },
	{ "app", "zsmalloc", 0, 0, 0, 0, "zsmalloc, application profile (zs_pool_config_init_app)",
	  0, 2 },
	{ "app-pool", "zsmalloc", ZS_FREE_POOL_LOCK, 0, 0, 0, "app profile, free mode pool lock",
	  0, 3 },
	{ "app-unlocked", "zsmalloc", ZS_FREE_CLASS_INDEX_UNLOCKED, 0, 0, 0,
	  "app profile, free mode class index + unlocked", 0, 3 },
	{ "zblock", "zblock", 0, 0, 0, 0, "zblock", 0, 0 },
	{ "glibc", "malloc", 0, 0, 0, 0, "glibc malloc", 0, 0 },
	{ "jemalloc", "jemalloc", 0, 0, 0, 0, "jemalloc", 0, 0 },
	{ "mimalloc", "mimalloc", 0, 0, 0, 0, "mimalloc", 0, 0 },
	{ "memcpy", "none", 0, 0, 0, 0,
	  "no allocator: the writes alone, into one per-thread buffer (the machine's ceiling)", 0,
	  0 },
};
#define NALL ((int)(sizeof(all_rows) / sizeof(all_rows[0])))

enum workload { W_CHURN, W_ZRAM };

struct params {
	enum workload w;
	unsigned n, r;          /* churn */
	int no_write;           /* churn: allocate and free only (--no-write) */
	unsigned slots, ops;    /* zram */
	const uint32_t *sizes;  /* zram: corpus sizes */
	size_t nsizes;
};

struct result {
	int ok;
	double mops;
	double mops_cpu;      /* per second of the threads' own CPU time: load-independent */
	double rss_end_mib, rss_idle_mib, live_mib;
};

struct worker {
	pthread_t tid;
	int idx;
	const struct params *P;
	struct zs_backend *b;
	pthread_barrier_t *bar;
	double t0, t1, c0, c1;
	long errors;
	uint64_t live_bytes;
	unsigned long *h;
	uint32_t *sz;
};

static unsigned char src_buf[PAGE];

static double thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
static _Thread_local unsigned char dst_buf[PAGE];

/* The "memcpy" row has no store: its handles are always this buffer. */
static inline unsigned long st_malloc(struct zs_backend *b, size_t size)
{
	return b ? zs_backend_malloc(b, size) : (unsigned long)dst_buf;
}
static inline int st_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	if (b)
		return zs_backend_write(b, h, src, len);
	memcpy((void *)h, src, len);
	__asm__ volatile("" ::"r"(h) : "memory");
	return 0;
}
/* Allocate + write, as a store does it: zs_backend_malloc_write (one call for zsmalloc). */
static inline unsigned long st_store(struct zs_backend *b, const void *src, size_t len)
{
	if (b)
		return zs_backend_malloc_write(b, src, len);
	unsigned long h = st_malloc(b, len);
	st_write(b, h, src, len);
	return h;
}
static inline void st_free(struct zs_backend *b, unsigned long h)
{
	if (b)
		zs_backend_free(b, h);
}

static void *run_worker(void *arg)
{
	struct worker *w = arg;
	const struct params *P = w->P;
	struct zs_backend *b = w->b;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->idx + 1);
	long err = 0;

	if (P->w == W_CHURN) {
		for (unsigned i = 0; i < P->n; i++)
			w->sz[i] = 200 + (uint32_t)(bench_rand(&rng) % 3401);
		pthread_barrier_wait(w->bar);
		w->t0 = bench_now_ns();
		w->c0 = thread_cpu_ns();
		for (unsigned r = 0; r < P->r; r++) {
			for (unsigned i = 0; i < P->n; i++) {
				unsigned long h = P->no_write ? st_malloc(b, w->sz[i])
							       : st_store(b, src_buf, w->sz[i]);
				if (ZS_IS_ERR(h)) {
					err++;
					h = 0;
				}
				w->h[i] = h;
			}
			for (unsigned i = 0; i < P->n; i++)
				if (w->h[i])
					st_free(b, w->h[i]);
		}
		w->t1 = bench_now_ns();
		w->c1 = thread_cpu_ns();
		w->live_bytes = 0;
	} else {
		/* Fill every slot, then the timed steady state. */
		for (unsigned i = 0; i < P->slots; i++) {
			uint32_t s = P->sizes[bench_rand(&rng) % P->nsizes];
			unsigned long h = st_store(b, src_buf, s);
			if (ZS_IS_ERR(h)) {
				err++;
				h = 0;
				s = 0;
			}
			w->h[i] = h;
			w->sz[i] = s;
		}
		pthread_barrier_wait(w->bar);
		w->t0 = bench_now_ns();
		w->c0 = thread_cpu_ns();
		for (unsigned k = 0; k < P->ops; k++) {
			uint64_t r = bench_rand(&rng);
			unsigned i = (unsigned)(r % P->slots);
			if (w->h[i])
				st_free(b, w->h[i]);
			w->h[i] = 0;
			w->sz[i] = 0;
			if ((r >> 40) % 10 < 8) {
				uint32_t s = P->sizes[(r >> 20) % P->nsizes];
				unsigned long h = st_store(b, src_buf, s);
				if (ZS_IS_ERR(h)) {
					err++;
					continue;
				}
				w->h[i] = h;
				w->sz[i] = s;
			}
		}
		w->t1 = bench_now_ns();
		w->c1 = thread_cpu_ns();
		uint64_t live = 0;
		for (unsigned i = 0; i < P->slots; i++)
			live += w->sz[i];
		w->live_bytes = live;
	}
	w->errors = err;
	return NULL;
}

/* --no-autocompact: the profile rows with self-compaction off, so that a callgrind count is the
 * row's own work and not also the purge thread's looks, which stop each thread's heap once per
 * class and send its operations down the class path meanwhile (more looks, the longer a run). */
static int no_autocompact;

static struct zs_backend *make_backend(const struct row *rw)
{
	struct zs_backend_config bc;
	if (!strcmp(rw->kind, "none"))
		return NULL;
	zs_backend_config_init(&bc);
	bc.kind = rw->kind;
	bc.page_size = PAGE;
	if (rw->profile) {
		/* The profile untouched, so the row measures what a caller gets. */
		if (rw->profile >= 2)
			zs_pool_config_init_app(&bc.zs);
		if (rw->profile == 3)
			bc.zs.free_mode = (enum zs_free_mode)rw->free_mode;
		if (no_autocompact)
			bc.zs.autocompact_ms = 0;
		return bench_backend_create(&bc, NULL, 0);
	}
	bc.zs.free_mode = (enum zs_free_mode)rw->free_mode;
	bc.zs.deferred_worker = -1;
	bc.zs.page_cache_pages = rw->cache_pages;
	if (rw->shards)
		bc.zs.class_shards = rw->shards > 0 ? (unsigned)rw->shards : ZS_CLASS_SHARDS_AUTO;
	bc.zs.page_cache_decay_ms = rw->decay_ms;
	return bench_backend_create(&bc, NULL, 0);
}

static double live_mib(struct zs_backend **bs, int nb, const struct worker *w, int T)
{
	uint64_t bytes = 0;
	struct zs_backend_stats st;
	if (!bs[0])
		return 0;
	int pages = !!(zs_backend_caps(bs[0]) & ZS_BACKEND_CAP_PAGES);
	if (pages) {
		for (int i = 0; i < nb; i++) {
			zs_backend_stats(bs[i], &st, sizeof(st));
			bytes += (uint64_t)st.pages * PAGE;
		}
	} else {
		for (int i = 0; i < T; i++)
			bytes += w[i].live_bytes;
	}
	return (double)bytes / 1048576.0;
}

/* In the child: run one measurement; the store and its threads live only here. */
static struct result measure(const struct row *rw, int T, const struct params *P, int idle)
{
	struct result res = { 0 };
	struct worker w[MAXT];
	struct zs_backend *bs[MAXT];
	int nb = rw->private_pool ? T : 1;
	pthread_barrier_t bar;

	memset(src_buf, 0x5a, sizeof(src_buf));
	unsigned per = P->w == W_CHURN ? P->n : P->slots;
	for (int i = 0; i < T; i++) {
		w[i].h = calloc(per, sizeof(*w[i].h));
		w[i].sz = calloc(per, sizeof(*w[i].sz));
		if (!w[i].h || !w[i].sz)
			return res;
		memset(w[i].h, 0, per * sizeof(*w[i].h));
		memset(w[i].sz, 0, per * sizeof(*w[i].sz));
	}
	size_t rss0 = zs_process_rss();
	for (int i = 0; i < nb; i++) {
		bs[i] = make_backend(rw);
		if (!bs[i] && strcmp(rw->kind, "none"))
			return res;
	}
	pthread_barrier_init(&bar, NULL, (unsigned)T);
	for (int i = 0; i < T; i++) {
		w[i].idx = i;
		w[i].P = P;
		w[i].b = bs[rw->private_pool ? i : 0];
		w[i].bar = &bar;
		w[i].errors = 0;
		if (pthread_create(&w[i].tid, NULL, run_worker, &w[i]))
			return res;
	}
	double t0 = 1e300, t1 = 0, cpu = 0;
	long errors = 0;
	for (int i = 0; i < T; i++) {
		pthread_join(w[i].tid, NULL);
		cpu += w[i].c1 - w[i].c0;
		t0 = w[i].t0 < t0 ? w[i].t0 : t0;
		t1 = w[i].t1 > t1 ? w[i].t1 : t1;
		errors += w[i].errors;
	}
	double ops = P->w == W_CHURN ? (double)P->n * P->r : (double)P->ops;
	res.mops = ops * T / ((t1 - t0) / 1e9) / 1e6;
	res.mops_cpu = cpu > 0 ? ops * T / (cpu / 1e9) / 1e6 : 0;
	res.live_mib = live_mib(bs, nb, w, T);
	res.rss_end_mib = ((double)zs_process_rss() - (double)rss0) / 1048576.0;
	if (idle) {
		sleep(1);
		res.rss_idle_mib = ((double)zs_process_rss() - (double)rss0) / 1048576.0;
	}
	res.ok = errors == 0;
	if (errors)
		fprintf(stderr, "bench_threads: %s T=%d: %ld errors\n", rw->name, T, errors);
	/* The process exits right after: no teardown to time or to wait for. */
	return res;
}

static struct result run_forked(const struct row *rw, int T, const struct params *P, int idle)
{
	struct result res = { 0 };
	int fd[2];
	fflush(stdout);
	if (pipe(fd))
		return res;
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return res;
	}
	if (pid == 0) {
		close(fd[0]);
		struct result r = measure(rw, T, P, idle);
		ssize_t wr = write(fd[1], &r, sizeof(r));
		_exit(wr == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	ssize_t got = read(fd[0], &res, sizeof(res));
	close(fd[0]);
	int status;
	waitpid(pid, &status, 0);
	if (got != (ssize_t)sizeof(res) || !WIFEXITED(status) || WEXITSTATUS(status))
		memset(&res, 0, sizeof(res));
	return res;
}

/* lz4 sizes of the corpus pages, same-filled pages left out, whole pages capped at PAGE. */
static uint32_t *corpus_sizes(char **paths, int npaths, size_t *n, size_t *files)
{
	struct zs_pageset ps;
	struct zs_comp *c;
	unsigned char out[2 * PAGE];
	if (zs_pageset_load(&ps, PAGE, paths, npaths, (uint64_t)32 << 20) || !ps.npages)
		return NULL;
	if (zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PAGE }, &c, NULL, 0)) {
		zs_pageset_free(&ps);
		return NULL;
	}
	uint32_t *s = malloc(ps.npages * sizeof(*s));
	size_t k = 0;
	for (size_t i = 0; s && i < ps.npages; i++) {
		struct zs_zram_store_decision d;
		/* huge at PAGE: only pages that do not compress at all are whole. */
		if (zs_zram_store_decide(c, ps.data + i * PAGE, PAGE, PAGE, out, sizeof(out), &d))
			d.kind = ZS_ZRAM_STORE_RAW, d.len = PAGE;
		if (d.kind == ZS_ZRAM_STORE_SAME)
			continue;
		s[k++] = (uint32_t)d.len;
	}
	*files = ps.files;
	zs_comp_destroy(c);
	zs_pageset_free(&ps);
	*n = k;
	return s;
}

/*
 * The two profiles side by side: app / kernel at each T, on the median and
 * on the best round (the machine may be shared: the best round is the one
 * least disturbed), and the pool pages each held (density).
 */
static void profile_ratios(const struct row *const *rows, int nrows, const int *thr, int nthr,
			   double med[][MAXT], double mops[][MAXT][64], int rounds,
			   struct result first[][MAXT], struct bench_json *js, const char *wname)
{
	int ki = -1, ai = -1;
	for (int k = 0; k < nrows; k++) {
		if (rows[k]->profile == 1)
			ki = k;
		else if (rows[k]->profile == 2)
			ai = k;
	}
	if (ki < 0 || ai < 0)
		return;
	bench_say("\napp / kernel profile: throughput (median, best of %d) and pool pages "
		  "(round 1)\n", rounds);
	for (int ti = 0; ti < nthr; ti++) {
		double bk = bench_max(mops[ki][ti], rounds), ba = bench_max(mops[ai][ti], rounds);
		double rm = med[ki][ti] > 0 ? med[ai][ti] / med[ki][ti] : 0;
		double rb = bk > 0 ? ba / bk : 0;
		double pk = first[ki][ti].live_mib, pa = first[ai][ti].live_mib;
		bench_say("  T=%-3d kernel %6.2f best %6.2f  app %6.2f best %6.2f  "
			  "ratio %.2f best %.2f  pages MiB %.1f / %.1f\n", thr[ti], med[ki][ti], bk,
			  med[ai][ti], ba, rm, rb, pk, pa);
		char key[96];
		snprintf(key, sizeof(key), "%s_app_vs_kernel_t%d", wname, thr[ti]);
		bench_json_num(js, key, rm);
		snprintf(key, sizeof(key), "%s_app_vs_kernel_best_t%d", wname, thr[ti]);
		bench_json_num(js, key, rb);
	}
}

/*
 * The application profile's goals on the churn (best of the rounds, side by
 * side in this run): at T=1 at least 0.80x mimalloc, and its T=2 at least
 * 1.80x its T=1.  Printed only when the run has the
 * rows and thread counts they need, and not with --quick: its rounds are too
 * short (first-touch page faults of a fresh process dominate them).
 */
static void app_goals(const struct row *const *rows, int nrows, const int *thr, int nthr,
		      double mops[][MAXT][64], int rounds, struct bench_json *js)
{
	int ai = -1, mi = -1, t1 = -1, t2 = -1;
	for (int k = 0; k < nrows; k++) {
		if (rows[k]->profile == 2)
			ai = k;
		else if (!strcmp(rows[k]->kind, "mimalloc"))
			mi = k;
	}
	for (int ti = 0; ti < nthr; ti++) {
		if (thr[ti] == 1)
			t1 = ti;
		else if (thr[ti] == 2)
			t2 = ti;
	}
	if (ai < 0 || t1 < 0)
		return;
	double a1 = bench_max(mops[ai][t1], rounds);
	bench_say("\napplication profile goals (best of %d rounds):", rounds);
	if (mi >= 0) {
		double m1 = bench_max(mops[mi][t1], rounds), r = m1 > 0 ? a1 / m1 : 0;
		bench_say(" app / mimalloc at T=1 %.2f (goal >= 0.80: %s);", r,
			  r >= 0.8 ? "met" : "not met");
		bench_json_num(js, "churn_app_vs_mimalloc_best_t1", r);
	}
	if (t2 >= 0) {
		double a2 = bench_max(mops[ai][t2], rounds), r = a1 > 0 ? a2 / a1 : 0;
		bench_say(" app T=2 / T=1 %.2f (goal >= 1.80: %s)", r, r >= 1.8 ? "met" : "not met");
		bench_json_num(js, "churn_app_scaling_best_t2", r);
	}
	bench_say("\n");
}

static int kind_available(const char *kind)
{
	if (!strcmp(kind, "none"))
		return 1;
	for (const char *const *k = zs_backend_kinds(); *k; k++)
		if (!strcmp(*k, kind))
			return 1;
	return 0;
}

static const char *const workload_names[] = { "churn", "zram", "both", NULL };

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, nthr = 0, thr[MAXT], workload = 2; /* workload_names[]: both */
	int no_write = 0;
	struct bench_json js = { 0 };
	const char *rows_arg = NULL;
	unsigned n = 0, r = 0, slots = 0, ops = 0;
	char *def_paths[] = { "/usr/lib" }, **paths = def_paths;
	int npaths = 1;

	char rows_help[1024];
	size_t len = (size_t)snprintf(rows_help, sizeof(rows_help), "rows to run, of:");
	for (int k = 0; k < NALL && len < sizeof(rows_help); k++)
		len += (size_t)snprintf(rows_help + len, sizeof(rows_help) - len, " %s", all_rows[k].name);
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_LIST("--threads", thr, nthr, 1, MAXT, MAXT, "1,2,..",
			       "thread counts; default 1, 2, 4, .. up to nproc"),
		BENCH_OPT_CHOICE("--workload", workload, workload_names, "the workloads to run"),
		BENCH_OPT_STR("--rows", rows_arg, "a,b,..", rows_help),
		BENCH_OPT_U64("--n", n, 1, 1u << 30, "N",
			      "churn: objects a round; default 5000 quick, else 20000"),
		BENCH_OPT_U64("--r", r, 1, 1u << 20, "R",
			      "churn: rounds a thread; default 5 quick, else 20"),
		BENCH_OPT_FLAG("--no-write", no_write,
			       "churn: allocate and free without the write (the allocator's own cost)"),
		BENCH_OPT_FLAG("--no-autocompact", no_autocompact,
			       "profile rows: self-compaction off (autocompact_ms 0), for instruction counts"),
		BENCH_OPT_U64("--slots", slots, 1, 1u << 30, "S",
			      "zram: slots a thread; default 4096 quick, else 16384"),
		BENCH_OPT_U64("--ops", ops, 1, 1u << 31, "M",
			      "zram: ops a thread; default 100000 quick, else 400000"),
		BENCH_OPT_REST("PATH", paths, npaths, "the zram workload's pages; default /usr/lib"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	int workloads = workload + 1; /* bit 0: churn, bit 1: zram */
	bench_quiet = js.enabled;
	rounds = bench_rounds(rounds, quick, 1, 3);
	if (!n)
		n = quick ? 5000 : 20000;
	if (!r)
		r = quick ? 5 : 20;
	if (!slots)
		slots = quick ? 4096 : 16384;
	if (!ops)
		ops = quick ? 100000 : 400000;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (!nthr) {
		for (long t = 1; t <= ncpu && nthr < MAXT; t *= 2)
			thr[nthr++] = (int)t;
		if (thr[nthr - 1] != ncpu && nthr < MAXT)
			thr[nthr++] = (int)ncpu;
	}
	for (int i = 0; i < nthr; i++)
		if (thr[i] < 1 || thr[i] > MAXT) {
			fprintf(stderr, "bench_threads: thread counts are 1..%d\n", MAXT);
			return 2;
		}

	/* every name in --rows must be a row: a typo would otherwise just run fewer rows */
	for (const char *r = rows_arg; r && *r;) {
		size_t n = strcspn(r, ",");
		int known = 0;
		for (int k = 0; k < NALL && !known; k++)
			known = strlen(all_rows[k].name) == n && !strncmp(all_rows[k].name, r, n);
		if (!known) {
			fprintf(stderr, "bench_threads: --rows: \"%.*s\" is not a row (%s)\n", (int)n, r,
				rows_help + strlen("rows to run, of: "));
			return 2;
		}
		r += n + (r[n] == ',');
	}
	const struct row *rows[MAXROWS];
	int nrows = 0;
	for (int k = 0; k < NALL && nrows < MAXROWS; k++) {
		if (rows_arg) {
			char key[64];
			snprintf(key, sizeof(key), ",%s,", all_rows[k].name);
			char list[512];
			snprintf(list, sizeof(list), ",%s,", rows_arg);
			if (!strstr(list, key))
				continue;
		}
		if (!kind_available(all_rows[k].kind)) {
			bench_say("(%s: backend %s not built in, row skipped)\n", all_rows[k].name,
				  all_rows[k].kind);
			continue;
		}
		rows[nrows++] = &all_rows[k];
	}
	if (!nrows) {
		fprintf(stderr, "bench_threads: no rows\n");
		return 2;
	}

	bench_print_machine();
	bench_json_begin(&js, "bench_threads");
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "no_write", no_write);

	size_t nsizes = 0, files = 0;
	uint32_t *sizes = NULL;
	if (workloads & 2) {
		sizes = corpus_sizes(paths, npaths, &nsizes, &files);
		if (!sizes || !nsizes) {
			fprintf(stderr, "bench_threads: no corpus pages under %s\n", paths[0]);
			return 2;
		}
		double mean = 0;
		for (size_t i = 0; i < nsizes; i++)
			mean += sizes[i];
		mean /= (double)nsizes;
		bench_say("zram corpus: %zu pages from %zu files under %s%s, lz4 mean %.0f B\n",
			  nsizes, files, paths[0], npaths > 1 ? " ..." : "", mean);
		bench_json_num(&js, "corpus_pages", (double)nsizes);
		bench_json_num(&js, "corpus_mean_size", mean);
	}

	for (int wl = 0; wl < 2; wl++) {
		if (!(workloads & (1 << wl)))
			continue;
		struct params P = { .w = wl ? W_ZRAM : W_CHURN, .n = n, .r = r, .slots = slots,
				    .ops = ops, .sizes = sizes, .nsizes = nsizes, .no_write = no_write };
		const char *wname = wl ? "zram" : "churn";
		if (wl)
			bench_say("\n== zram mix: per thread %u slots, %u ops (80%% overwrite, 20%% "
				  "discard), %d round(s) ==\n", slots, ops, rounds);
		else
			bench_say("\n== churn: per thread %u rounds of %u x (alloc 200..3600 B%s), "
				  "then free all; %d round(s) ==\n", r, n, no_write ? ", no write" : " + write",
				  rounds);

		static double mops[MAXROWS][MAXT][64], mcpu[MAXROWS][MAXT][64];
		static struct result first[MAXROWS][MAXT];
		for (int rd = 0; rd < rounds; rd++) {
			for (int ti = 0; ti < nthr; ti++) {
				for (int k = 0; k < nrows; k++) {
					int ri = (k + rd + ti) % nrows;
					struct result res = run_forked(rows[ri], thr[ti], &P, rd == 0);
					mops[ri][ti][rd] = res.ok ? res.mops : 0;
					mcpu[ri][ti][rd] = res.ok ? res.mops_cpu : 0;
					if (rd == 0)
						first[ri][ti] = res;
				}
			}
		}
		int mi = -1;
		for (int k = 0; k < nrows; k++)
			if (!strcmp(rows[k]->name, "mimalloc"))
				mi = k;
		double med[MAXROWS][MAXT], medc[MAXROWS][MAXT];
		for (int k = 0; k < nrows; k++)
			for (int ti = 0; ti < nthr; ti++) {
				med[k][ti] = bench_median(mops[k][ti], rounds);
				medc[k][ti] = bench_median(mcpu[k][ti], rounds);
			}

		bench_say("\nMops/s (median of %d; min-max in brackets when more than one round)\n",
			  rounds);
		bench_say("%-20s", "row");
		for (int ti = 0; ti < nthr; ti++)
			bench_say("  T=%-14d", thr[ti]);
		bench_say("\n");
		for (int k = 0; k < nrows; k++) {
			bench_say("%-20s", rows[k]->name);
			for (int ti = 0; ti < nthr; ti++) {
				if (rounds > 1)
					bench_say("  %5.2f [%.2f-%.2f]", med[k][ti],
						  bench_min(mops[k][ti], rounds),
						  bench_max(mops[k][ti], rounds));
				else
					bench_say("  %-16.2f", med[k][ti]);
			}
			bench_say("\n");
		}
		bench_say("\nscaling (T / T=1) and ratio to mimalloc at the same T\n%-20s", "row");
		for (int ti = 0; ti < nthr; ti++)
			bench_say("  T=%-3d scal  /mi ", thr[ti]);
		bench_say("\n");
		for (int k = 0; k < nrows; k++) {
			bench_say("%-20s", rows[k]->name);
			for (int ti = 0; ti < nthr; ti++) {
				double sc = med[k][0] > 0 ? med[k][ti] / med[k][0] : 0;
				double rm = mi >= 0 && med[mi][ti] > 0 ? med[k][ti] / med[mi][ti] : 0;
				bench_say("        %5.2f %5.2f", sc, rm);
			}
			bench_say("\n");
		}
		bench_say("\nMops per CPU-second of the threads (median), and T / T=1 of that: "
			  "1.00 = no time lost to sharing,\nwhatever else runs on the machine\n%-20s",
			  "row");
		for (int ti = 0; ti < nthr; ti++)
			bench_say("  T=%-3d Mops/cpu-s eff ", thr[ti]);
		bench_say("\n");
		for (int k = 0; k < nrows; k++) {
			bench_say("%-20s", rows[k]->name);
			for (int ti = 0; ti < nthr; ti++)
				bench_say("        %6.2f  %5.2f", medc[k][ti],
					  medc[k][0] > 0 ? medc[k][ti] / medc[k][0] : 0);
			bench_say("\n");
		}
		bench_say("\nMiB above the RSS before the store was created (round 1): "
			  "live data / RSS at end / RSS after 1 s idle\n%-20s", "row");
		for (int ti = 0; ti < nthr; ti++)
			bench_say("  T=%-19d", thr[ti]);
		bench_say("\n");
		for (int k = 0; k < nrows; k++) {
			bench_say("%-20s", rows[k]->name);
			for (int ti = 0; ti < nthr; ti++) {
				struct result *f = &first[k][ti];
				bench_say("  %6.1f/%6.1f/%6.1f", f->live_mib, f->rss_end_mib,
					  f->rss_idle_mib);
			}
			bench_say("\n");
		}
		profile_ratios(rows, nrows, thr, nthr, med, mops, rounds, first, &js, wname);
		if (!wl && !quick && !no_write) /* the goals are for the op with its write */
			app_goals(rows, nrows, thr, nthr, mops, rounds, &js);
		for (int k = 0; k < nrows; k++) {
			for (int ti = 0; ti < nthr; ti++) {
				char key[160];
				struct result *f = &first[k][ti];
#define JK(suffix, val)                                                                      \
	do {                                                                                 \
		snprintf(key, sizeof(key), "%s_%s_t%d_%s", wname, rows[k]->name, thr[ti], suffix); \
		bench_json_num(&js, key, val);                                               \
	} while (0)
				JK("mops", med[k][ti]);
				JK("mops_min", bench_min(mops[k][ti], rounds));
				JK("mops_max", bench_max(mops[k][ti], rounds));
				JK("scaling", med[k][0] > 0 ? med[k][ti] / med[k][0] : 0);
				if (mi >= 0 && med[mi][ti] > 0)
					JK("vs_mimalloc", med[k][ti] / med[mi][ti]);
				JK("mops_per_cpu_s", medc[k][ti]);
				JK("cpu_efficiency", medc[k][0] > 0 ? medc[k][ti] / medc[k][0] : 0);
				JK("live_mib", f->live_mib);
				JK("rss_end_mib", f->rss_end_mib);
				JK("rss_idle_mib", f->rss_idle_mib);
#undef JK
			}
		}
	}
	bench_say("\nrows:\n");
	for (int k = 0; k < nrows; k++)
		bench_say("  %-18s %s\n", rows[k]->name, rows[k]->what);
	bench_json_end(&js);
	free(sizes);
	return 0;
}
