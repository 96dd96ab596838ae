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
 *   pool-lock      ZS_FREE_POOL_LOCK (kernel today: pool read lock -> class lock)
 *   class-index    ZS_FREE_CLASS_INDEX (class from obj, no pool lock)
 *   ci-unlocked    ZS_FREE_CLASS_INDEX_UNLOCKED (+ empty zspages freed after
 *                  the class lock is dropped)
 * Speedups are pool-lock median / mode median.  With more threads than cores
 * the threads are time-sliced, and a preempted class-lock holder makes the
 * others spin then yield, so T > nproc measures scheduling as much as locks.
 *
 * Usage: bench_release [--quick] [--json] [--rounds N] [--mib M] [--threads 1,2,4]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "zs/zsmalloc.h"

#define NMODES 3
#define MAXT 16
static const char *mode_name[NMODES] = {"pool-lock", "class-index", "ci-unlocked"};
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
	sh.pool = zs_create_pool(&cfg);
	if (!sh.pool) {
		perror("zs_create_pool");
		exit(1);
	}
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

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, nt = 0, threads[MAXT];
	size_t mib = 0;
	struct bench_json js = {0};
	for (int i = 1; i < argc; i++) {
		if (bench_common_opt(argc, argv, &i, &quick, &rounds, &js))
			continue;
		if (!strcmp(argv[i], "--mib") && i + 1 < argc)
			mib = bench_arg_u64(argv[0], "--mib", argv[++i], 1, 1 << 20);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nt = bench_arg_list(argv[0], "--threads", argv[++i], threads, MAXT, 1, MAXT);
		else {
			fprintf(stderr,
				"usage: %s [--quick] [--json] [--rounds N] [--mib M per thread] "
				"[--threads 1,2,4]\n",
				argv[0]);
			return 2;
		}
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
		bench_say("%3s %9s | %12s %12s %12s | %11s %11s | %s\n", "T", "objs", "pool-lock ms",
			  "class-idx ms", "ci-unlck ms", "class-idx x", "ci-unlck x", "note");
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
			bench_say("%3d %9zu | %12.2f %12.2f %12.2f | %10.2fx %10.2fx | %s\n", T, objs,
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
	bench_say("speedup = pool-lock median / mode median (>1: faster than pool-lock).\n"
		  "seed 000 (real munmap via zram, 4-core x86): 1.19x at 1, 1.40x at 2, 1.39x at 4 "
		  "processes; RPi4: 1.05x/1.42x/1.83x.\n");
	if (ncpu < 4)
		bench_say("note: nproc=%ld; runs with T > nproc are time-sliced, not parallel.\n",
			  ncpu);
	(void)mode_name;
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
