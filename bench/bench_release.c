/*
 * bench_release: concurrent release, the seed-000 munmap analog.
 *
 * Seed 000 measures processes that each swapped out 256 MB through one zram
 * device and then munmap at the same time: every swap entry ends in zs_free
 * on the shared pool, and the pool rwlock's reader count is one cache line
 * all CPUs bounce.  Here T threads share one pool; each allocates its own set
 * of handles (sizes from a fixed seeded "compressed page" distribution,
 * 200..3600 B), then all start freeing at once (barrier) and we time the free
 * phase: wall = last thread's end - first thread's start.  Free modes, same
 * workload, interleaved round by round:
 *   pool           ZS_FREE_POOL_LOCK (kernel today: pool read lock -> class lock)
 *   class          ZS_FREE_CLASS_INDEX (class from obj, no pool lock)
 *   class-unlocked ZS_FREE_CLASS_INDEX_UNLOCKED (+ empty zspages freed after
 *                  the class lock is dropped)
 * (the library's names, zs_free_mode_name; the JSON keys keep their
 * pool_lock / class_index / ci_unlocked spelling for existing readers).
 * Speedups are pool median / mode median.  With more threads than cores
 * the threads are time-sliced, and a preempted class-lock holder makes the
 * others spin then yield, so T > nproc measures scheduling as much as locks.
 *
 * --idle: RSS over time after a free-all instead.  Each row fills,
 * frees everything and then makes no call at all, sampling the process's RSS
 * (/proc/self/statm) at fixed times after the free-all: one pool (--mib M,
 * default 160), eight pools (M/4 each), a zram store (2M MiB of
 * half-compressible pages written, every slot discarded) and a region (the
 * same pages, paged out into its store, released), each on libzs (the kernel
 * profile, and the application profile as "libzs-app") and, for
 * comparison, on glibc, jemalloc and mimalloc through their backends (the
 * same objects in exact-size buffers; a store or region on that backend).
 * One forked child per row, so every row starts from a clean process.
 *
 * Usage: bench_release [--quick] [--json] [--rounds N] [--mib M] [--threads 1,2,4]
 *        bench_release --idle [--quick] [--json] [--mib M] [--rows pool,pools8,store,region]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "zs/backend.h"
#include "zs/region.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

#define NMODES 3
#define MAXT 16
static const char *mode_key[NMODES] = {"pool_lock", "class_index", "ci_unlocked"};
static const enum zs_free_mode mode_val[NMODES] = {ZS_FREE_POOL_LOCK, ZS_FREE_CLASS_INDEX,
						   ZS_FREE_CLASS_INDEX_UNLOCKED};

struct shared {
	struct zs_pool *pool;
	size_t bytes_per_thread;
	pthread_barrier_t alloc_done;
	int fail;
};

struct worker {
	pthread_t tid;
	int id;
	struct shared *sh;
	unsigned long *h;
	size_t n;
	double t0, t1;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(w->id + 1);
	size_t bytes = 0;
	w->n = 0;
	while (bytes < sh->bytes_per_thread) {
		unsigned sz = bench_comp_size(&seed);
		unsigned long h = zs_malloc(sh->pool, sz);
		if (ZS_IS_ERR(h)) {
			sh->fail = 1;
			break;
		}
		w->h[w->n++] = h;
		bytes += sz;
	}
	pthread_barrier_wait(&sh->alloc_done);
	w->t0 = bench_now_ns();
	for (size_t i = 0; i < w->n; i++)
		zs_free(sh->pool, w->h[i]);
	w->t1 = bench_now_ns();
	return NULL;
}

/* One run: returns the free-phase wall time in ms, or -1 on failure. */
static double run_once(enum zs_free_mode mode, int cached, int T, size_t bytes_per_thread,
		       size_t max_objs, size_t *objs_out)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.name = "bench_release";
	cfg.free_mode = mode;
	/*
	 * cached: freed pool pages stay in the page provider's cache (a mutex and
	 * a list push, closer to the kernel's cheap __free_page); os: the
	 * provider's former default (a 256 KiB cache, no per-CPU caches), which
	 * returns freed pages with MADV_DONTNEED at once (a syscall per freed
	 * zspage, far dearer than the kernel's page free).
	 */
	cfg.page_cache_pages = cached ? (T * bytes_per_thread) / 4096 + 1024 : 64;
	struct shared sh = {.bytes_per_thread = bytes_per_thread};
	sh.pool = bench_pool_create(&cfg);
	pthread_barrier_init(&sh.alloc_done, NULL, (unsigned)T);
	struct worker w[MAXT];
	for (int i = 0; i < T; i++) {
		w[i] = (struct worker){.id = i, .sh = &sh};
		w[i].h = malloc(max_objs * sizeof(unsigned long));
		if (!w[i].h || pthread_create(&w[i].tid, NULL, worker_fn, &w[i])) {
			fprintf(stderr, "thread setup failed\n");
			exit(1);
		}
	}
	double first = 0, last = 0;
	size_t objs = 0;
	for (int i = 0; i < T; i++) {
		pthread_join(w[i].tid, NULL);
		if (i == 0 || w[i].t0 < first)
			first = w[i].t0;
		if (i == 0 || w[i].t1 > last)
			last = w[i].t1;
		objs += w[i].n;
		free(w[i].h);
	}
	pthread_barrier_destroy(&sh.alloc_done);
	int leak = zs_get_total_pages(sh.pool) != 0;
	zs_destroy_pool(sh.pool);
	if (sh.fail || leak) {
		fprintf(stderr, "run failed (alloc error or pages left after free)\n");
		exit(1);
	}
	*objs_out = objs;
	return (last - first) / 1e6;
}


/* ---- --idle: RSS over time after a free-all ------------------------------ */

enum { SH_POOL, SH_POOLS8, SH_STORE, SH_REGION, NSHAPES };
static const char *const shape_key[NSHAPES + 1] = {"pool", "pools8", "store", "region", NULL};
static const char *shape_name[NSHAPES] = {"pool", "8 pools", "store", "region"};
#define NKINDS 5
/* libzs twice: the kernel profile (the "x libzs" base) and the application profile. */
static const char *kind_key[NKINDS] = {"zsmalloc", "zsmalloc", "malloc", "jemalloc", "mimalloc"};
static const char *kind_name[NKINDS] = {"libzs", "libzs-app", "glibc", "jemalloc", "mimalloc"};
static const int kind_app[NKINDS] = {0, 1, 0, 0, 0};
#define NSAMPLES 7
static const unsigned sample_ms[NSAMPLES] = {0, 250, 500, 750, 1000, 1500, 3000};
#define IDLE_PAGE 4096

/* What a row's child reports through shared memory. */
struct idle_res {
	int status;              /* 0 ok, 1 not available here, 2 failed */
	char why[96];
	double live_mib;         /* what the allocator held at the peak (pool pages or bytes) */
	double full_mib;         /* RSS above the start at the peak */
	double free_ms;          /* the free-all's wall time */
	double mib[NSAMPLES];    /* RSS above the start, sample_ms after the free-all */
};

/* The process's RSS straight from /proc: no library call runs after a free-all. */
static size_t statm_rss(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return 0;
	int got = fscanf(f, "%lu %lu", &size, &res);
	fclose(f);
	return got == 2 ? (size_t)res * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static double mib_above(size_t b, size_t a)
{
	return ((double)b - (double)a) / 1048576.0;
}

/* Half random, half a repeated pattern: lz4 keeps about half. */
static void half_page(unsigned char *b, uint64_t x)
{
	x = x * 0x9E3779B97F4A7C15ULL + 1;
	for (size_t i = 0; i < IDLE_PAGE; i++)
		b[i] = i < IDLE_PAGE / 2 ? (unsigned char)bench_rand(&x) : (unsigned char)(i * 7);
}

static void sample_after(size_t rss0, struct idle_res *r)
{
	double t0 = bench_now_ns();
	for (int i = 0; i < NSAMPLES; i++) {
		double until = t0 + sample_ms[i] * 1e6, now;
		while ((now = bench_now_ns()) < until) {
			double left = until - now;
			struct timespec ts = {(time_t)(left / 1e9), (long)((uint64_t)left % 1000000000u)};
			nanosleep(&ts, NULL);
		}
		r->mib[i] = mib_above(statm_rss(), rss0);
	}
}

static void backend_cfg(struct zs_backend_config *bc, int kind)
{
	zs_backend_config_init(bc);
	bc->kind = kind_key[kind];
	if (kind_app[kind])
		zs_pool_config_init_app(&bc->zs);
}

/* Pools (one or eight), filled with compressed-page sizes, then every object freed. */
static int idle_pools(int kind, int npools, size_t bytes_each, struct idle_res *r)
{
	struct zs_backend *b[8];
	size_t cap = bytes_each / 200 + 16, n[8] = {0};
	unsigned long *h = malloc((size_t)npools * cap * sizeof(*h));
	unsigned char *buf = malloc(IDLE_PAGE);
	if (!h || !buf)
		return 2;
	memset(h, 0, (size_t)npools * cap * sizeof(*h));
	memset(buf, 0x5a, IDLE_PAGE);
	for (int k = 0; k < npools; k++) {
		struct zs_backend_config bc;
		backend_cfg(&bc, kind);
		b[k] = bench_backend_create(&bc, r->why, sizeof(r->why));
		if (!b[k]) {
			return errno == ENOTSUP || errno == EOPNOTSUPP ? 1 : 2;
		}
	}
	size_t rss0 = statm_rss();
	double live = 0;
	for (int k = 0; k < npools; k++) {
		uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(k + 1);
		size_t got = 0;
		while (got < bytes_each && n[k] < cap) {
			unsigned sz = bench_comp_size(&seed);
			unsigned long x = zs_backend_malloc(b[k], sz);
			if (ZS_IS_ERR(x) || zs_backend_write(b[k], x, buf, sz))
				return 2;
			h[(size_t)k * cap + n[k]++] = x;
			got += sz;
		}
		struct zs_backend_stats st;
		zs_backend_stats(b[k], &st, sizeof(st));
		live += st.pages ? (double)st.pages * IDLE_PAGE : (double)got;
	}
	r->live_mib = live / 1048576.0;
	r->full_mib = mib_above(statm_rss(), rss0);
	double t0 = bench_now_ns();
	for (int k = 0; k < npools; k++)
		for (size_t i = 0; i < n[k]; i++)
			zs_backend_free(b[k], h[(size_t)k * cap + i]);
	r->free_ms = (bench_now_ns() - t0) / 1e6;
	sample_after(rss0, r);
	return 0;
}

/* A zram store on the backend: npages half-compressible pages written, then all discarded. */
static int idle_store(int kind, uint64_t npages, struct idle_res *r)
{
	struct zs_zram_config c;
	if (kind_app[kind])
		zs_zram_config_init_app(&c);
	else
		zs_zram_config_init(&c);
	c.disksize = npages * IDLE_PAGE;
	if (!kind_app[kind])
		backend_cfg(&c.backend, kind);
	struct zs_zram *z;
	char err[200] = "";
	int rc = zs_zram_create(&c, &z, err, sizeof(err));
	if (rc) {
		snprintf(r->why, sizeof(r->why), "store on %s: %s", kind_key[kind], err);
		return rc == -ENOTSUP || rc == -EOPNOTSUPP ? 1 : 2;
	}
	unsigned char *page = malloc(IDLE_PAGE);
	if (!page)
		return 2;
	memset(page, 0, IDLE_PAGE);
	size_t rss0 = statm_rss();
	for (uint64_t i = 0; i < npages; i++) {
		half_page(page, i + 1);
		if (zs_zram_write(z, i, page))
			return 2;
	}
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	r->live_mib = (double)st.mem_used_total / 1048576.0;
	r->full_mib = mib_above(statm_rss(), rss0);
	double t0 = bench_now_ns();
	if (zs_zram_discard_range(z, 0, npages))
		return 2;
	r->free_ms = (bench_now_ns() - t0) / 1e6;
	sample_after(rss0, r);
	return 0;
}

/* A region backed by a store on the backend: filled, paged out, released whole. */
static int idle_region(int kind, uint64_t npages, struct idle_res *r)
{
	char err[256] = "";
	if (!zs_region_available(err, sizeof(err))) {
		snprintf(r->why, sizeof(r->why), "no userfaultfd: %s", err);
		return 1;
	}
	struct zs_region_config c;
	if (kind_app[kind])
		zs_region_config_init_app(&c);
	else
		zs_region_config_init(&c);
	c.size = npages * IDLE_PAGE;
	if (!kind_app[kind])
		backend_cfg(&c.store.backend, kind);
	struct zs_region *rg;
	int rc = zs_region_create(&c, &rg, err, sizeof(err));
	if (rc) {
		snprintf(r->why, sizeof(r->why), "region on %s: %s", kind_key[kind], err);
		return rc == -ENOTSUP || rc == -EOPNOTSUPP ? 1 : 2;
	}
	unsigned char *a = zs_region_addr(rg);
	size_t rss0 = statm_rss();
	for (uint64_t i = 0; i < npages; i++)
		half_page(a + i * IDLE_PAGE, i + 7);
	if (zs_region_pageout(rg, a, c.size) != (long)npages)
		return 2;
	struct zs_region_stats st;
	if (zs_region_get_stats(rg, &st, sizeof(st)))
		return 2;
	r->live_mib = (double)st.store.mem_used_total / 1048576.0;
	r->full_mib = mib_above(statm_rss(), rss0);
	double t0 = bench_now_ns();
	if (zs_region_release(rg, a, c.size))
		return 2;
	r->free_ms = (bench_now_ns() - t0) / 1e6;
	sample_after(rss0, r);
	return 0;
}

/* MiB kept at 1.5 s, r's over base's; below 1 MiB counts as 1 MiB (no division by ~0). */
static double kept_ratio(const struct idle_res *r, const struct idle_res *base)
{
	double a = r->mib[5] > 1 ? r->mib[5] : 1, b = base->mib[5] > 1 ? base->mib[5] : 1;
	return a / b;
}

static void idle_row(int shape, int kind, size_t mib, struct idle_res *r)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int st = 2;
		uint64_t npages = (uint64_t)(2 * mib) << 20 >> 12;
		switch (shape) {
		case SH_POOL: st = idle_pools(kind, 1, mib << 20, r); break;
		case SH_POOLS8: st = idle_pools(kind, 8, (mib << 20) / 4, r); break;
		case SH_STORE: st = idle_store(kind, npages, r); break;
		case SH_REGION: st = idle_region(kind, npages, r); break;
		}
		r->status = st;
		_exit(0);
	}
	int wst = 0;
	if (pid < 0 || waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst)) {
		r->status = 2;
		snprintf(r->why, sizeof(r->why), "child failed (status %d)", wst);
	}
}

static int idle_main(int quick, size_t mib, unsigned shapes, struct bench_json *js)
{
	int nsamp = quick ? NSAMPLES - 1 : NSAMPLES; /* --quick stops at 1.5 s */
	struct idle_res *res = mmap(NULL, sizeof(struct idle_res) * NSHAPES * NKINDS,
				    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(res, 0, sizeof(struct idle_res) * NSHAPES * NKINDS);
	bench_print_machine();
	bench_say("bench_release --idle: RSS over time after a free-all, no call made after it\n"
		  "(MiB above the process's RSS before the fill; pool %zu MiB of 200..3600 B "
		  "objects, 8 pools %zu MiB each,\nstore and region %zu MiB of half-compressible "
		  "4 KiB pages; one process per row)\n\n",
		  mib, mib / 4, 2 * mib);
	for (int s = 0; s < NSHAPES; s++)
		for (int k = 0; k < NKINDS; k++)
			if (shapes & (1u << s))
				idle_row(s, k, mib, &res[s * NKINDS + k]);
	bench_say("%-8s %-9s %7s %7s %8s |", "row", "allocator", "live", "peak", "free ms");
	for (int i = 0; i < nsamp; i++)
		bench_say(" %6ums", sample_ms[i]);
	bench_say(" | %s\n", "kept at 1.5 s, x libzs");
	for (int s = 0; s < NSHAPES; s++) {
		if (!(shapes & (1u << s)))
			continue;
		const struct idle_res *zs = &res[s * NKINDS];
		for (int k = 0; k < NKINDS; k++) {
			const struct idle_res *r = &res[s * NKINDS + k];
			if (r->status) {
				bench_say("%-8s %-9s %s: %s\n", shape_name[s], kind_name[k],
					  r->status == 1 ? "n/a" : "FAILED", r->why);
				continue;
			}
			bench_say("%-8s %-9s %7.1f %7.1f %8.1f |", shape_name[s], kind_name[k],
				  r->live_mib, r->full_mib, r->free_ms);
			for (int i = 0; i < nsamp; i++)
				bench_say(" %8.1f", r->mib[i]);
			if (zs->status)
				bench_say(" | -\n");
			else
				bench_say(" | %8.2f\n", kept_ratio(r, zs));
		}
	}
	bench_say("\nlive: pool pages (libzs) or object bytes (malloc kinds; a store's: the "
		  "backend's own count) at the peak;\npeak: RSS then; free ms: the free-all (or "
		  "discard, release).  Columns: RSS that many ms after it.\nx libzs: MiB kept at "
		  "1.5 s over libzs's (below 1 MiB counts as 1 MiB).  libzs: the kernel profile,\nlibzs-app: "
		  "the application profile (emptied zspages parked in their class until the decay).\n"
		  "ZS_PAGES_DECAY_MS=%s.\n",
		  getenv("ZS_PAGES_DECAY_MS") ? getenv("ZS_PAGES_DECAY_MS") : "unset (500)");

	bench_json_begin(js, "release_idle");
	bench_json_num(js, "mib", (double)mib);
	struct json *w = bench_json_w(js);
	if (w) {
		json_karr(w, "sample_ms");
		for (int i = 0; i < nsamp; i++)
			json_uint(w, sample_ms[i]);
		json_arr_end(w);
		json_karr(w, "rows");
		for (int s = 0; s < NSHAPES; s++) {
			if (!(shapes & (1u << s)))
				continue;
			for (int k = 0; k < NKINDS; k++) {
				struct idle_res *r = &res[s * NKINDS + k];
				json_obj(w);
				json_kstr(w, "row", shape_key[s]);
				json_kstr(w, "allocator", kind_name[k]);
				json_kstr(w, "status", r->status == 0 ? "ok" : r->status == 1 ? "n/a"
											: "failed");
				if (r->status) {
					json_kstr(w, "why", r->why);
				} else {
					json_knum(w, "live_mib", r->live_mib);
					json_knum(w, "peak_rss_mib", r->full_mib);
					json_knum(w, "free_ms", r->free_ms);
					if (!res[s * NKINDS].status)
						json_knum(w, "kept_vs_libzs", kept_ratio(r, &res[s * NKINDS]));
					json_karr(w, "rss_mib");
					for (int i = 0; i < nsamp; i++)
						json_num(w, r->mib[i]);
					json_arr_end(w);
				}
				json_obj_end(w);
			}
		}
		json_arr_end(w);
	}
	bench_json_end(js);
	munmap(res, sizeof(struct idle_res) * NSHAPES * NKINDS);
	return 0;
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, nt = 0, threads[MAXT], idle = 0;
	unsigned shapes = (1u << NSHAPES) - 1;
	size_t mib = 0;
	struct bench_json js = {0};
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--mib", mib, 1, 1 << 20, "M",
			      "MiB per thread, default 16 quick, else 64; --idle: the pool's, 32 or 160"),
		BENCH_OPT_LIST("--threads", threads, nt, 1, MAXT, MAXT, "1,2,4", "thread counts"),
		BENCH_OPT_FLAG("--idle", idle, "RSS over time after a free-all instead (takes --mib, --rows)"),
		BENCH_OPT_NAMESET("--rows", shapes, shape_key, "--idle: the stores to measure"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	if (idle) {
		bench_quiet = js.enabled;
		return idle_main(quick, mib ? mib : quick ? 32 : 160, shapes, &js);
	}
	rounds = bench_rounds(rounds, quick, 3, 5);
	if (!mib)
		mib = quick ? 16 : 64;
	if (!nt) {
		threads[nt++] = 1;
		threads[nt++] = 2;
		threads[nt++] = 4;
	}
	bench_quiet = js.enabled;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t bytes = mib << 20;
	size_t max_objs = bytes / 200 + 16;

	bench_print_machine();
	bench_say("bench_release: T threads free their own %zu MiB of objects (200..3600 B) at once "
		  "from one pool;\nfree-phase wall time (first start -> last end), median of %d "
		  "interleaved rounds\n\n",
		  mib, rounds);
	bench_json_begin(&js, "release");
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "mib_per_thread", (double)mib);

	static const char *page_mode[2] = {"cached", "os"};
	/* Per page mode, thread count and lock mode: median, min, max ms; for the rows. */
	static double res_ms[2][MAXT][NMODES][3];
	static size_t res_objs[2][MAXT];
	for (int pm = 0; pm < 2; pm++) {
		int cached = pm == 0;
		bench_say("page release: %s (%s)\n", page_mode[pm],
			  cached ? "freed pages kept in the provider's cache, like a cheap kernel "
				   "page free"
				 : "freed pages returned with MADV_DONTNEED, a syscall per zspage");
		char h[NMODES][32];
		for (int m = 0; m < NMODES; m++)
			snprintf(h[m], sizeof(h[m]), "%s ms", zs_free_mode_name(mode_val[m]));
		bench_say("%3s %9s | %12s %12s %17s | %10s %17s | %s\n", "T", "objs", h[0], h[1],
			  h[2], "class x", "class-unlocked x", "note");
		for (int ti = 0; ti < nt; ti++) {
			int T = threads[ti];
			double ms[NMODES][64] = {{0}};
			size_t objs = 0;
			/* Warm-up (untimed): page faults of the first mmaps, thread creation. */
			run_once(mode_val[0], cached, T, bytes, max_objs, &objs);
			for (int r = 0; r < rounds; r++)
				for (int k = 0; k < NMODES; k++) {
					int m = (k + r) % NMODES; /* rotate the order each round */
					ms[m][r] = run_once(mode_val[m], cached, T, bytes, max_objs, &objs);
				}
			double med[NMODES];
			for (int m = 0; m < NMODES; m++)
				med[m] = bench_median(ms[m], rounds);
			bench_say("%3d %9zu | %12.2f %12.2f %17.2f | %9.2fx %16.2fx | %s\n", T, objs,
				  med[0], med[1], med[2], med[0] / med[1], med[0] / med[2],
				  T > ncpu ? "oversubscribed (T > nproc)" : "");
			bench_say("    spread (min..max ms): %.2f..%.2f  %.2f..%.2f  %.2f..%.2f\n",
				  bench_min(ms[0], rounds), bench_max(ms[0], rounds),
				  bench_min(ms[1], rounds), bench_max(ms[1], rounds),
				  bench_min(ms[2], rounds), bench_max(ms[2], rounds));
			res_objs[pm][ti] = objs;
			for (int m = 0; m < NMODES; m++) {
				res_ms[pm][ti][m][0] = med[m];
				res_ms[pm][ti][m][1] = bench_min(ms[m], rounds);
				res_ms[pm][ti][m][2] = bench_max(ms[m], rounds);
			}
			char key[96];
			if (pm == 0) {
				snprintf(key, sizeof(key), "t%d_objects", T);
				bench_json_num(&js, key, (double)objs);
				snprintf(key, sizeof(key), "t%d_oversubscribed", T);
				bench_json_num(&js, key, T > ncpu);
			}
			for (int m = 0; m < NMODES; m++) {
				snprintf(key, sizeof(key), "%s_t%d_%s_ms", page_mode[pm], T, mode_key[m]);
				bench_json_num(&js, key, med[m]);
				snprintf(key, sizeof(key), "%s_t%d_%s_ns_per_free", page_mode[pm], T,
					 mode_key[m]);
				bench_json_num(&js, key, med[m] * 1e6 / (double)objs);
				if (m) {
					snprintf(key, sizeof(key), "%s_t%d_%s_speedup", page_mode[pm], T,
						 mode_key[m]);
					bench_json_num(&js, key, med[0] / med[m]);
				}
			}
		}
		bench_say("\n");
	}
	bench_say("speedup = pool median / mode median (>1: faster than the pool lock).\n"
		  "seed 000 (real munmap via zram, 4-core x86): 1.19x at 1, 1.40x at 2, 1.39x at 4 "
		  "processes; RPi4: 1.05x/1.42x/1.83x.\n");
	if (ncpu < 4)
		bench_say("note: nproc=%ld; runs with T > nproc are time-sliced, not parallel.\n",
			  ncpu);
	struct json *w = bench_json_w(&js);
	if (w) {
		/* The same numbers as rows, with each mode's min..max over the rounds. */
		json_karr(w, "rows");
		for (int pm = 0; pm < 2; pm++)
			for (int ti = 0; ti < nt; ti++) {
				json_obj(w);
				json_kstr(w, "pages", page_mode[pm]);
				json_kint(w, "threads", threads[ti]);
				json_kuint(w, "objects", res_objs[pm][ti]);
				json_kbool(w, "oversubscribed", threads[ti] > ncpu);
				json_kobj(w, "modes");
				for (int m = 0; m < NMODES; m++) {
					const double *r = res_ms[pm][ti][m];
					json_kobj(w, mode_key[m]);
					json_knum(w, "median_ms", r[0]);
					json_knum(w, "min_ms", r[1]);
					json_knum(w, "max_ms", r[2]);
					json_knum(w, "ns_per_free", r[0] * 1e6 / (double)res_objs[pm][ti]);
					json_obj_end(w);
				}
				json_obj_end(w);
				json_obj_end(w);
			}
		json_arr_end(w);
	}
	bench_json_end(&js);
	return 0;
}
