/*
 * bench_free_modes: where the time of a mass release goes, per free mode.
 *
 * The question it answers (docs/deferred.md): of what deferring zs_free
 * saves the caller, how much is only deferring the page release
 * (free_zspage), and how much is deferring and batching the object frees?
 * So it releases N MiB of objects (sizes from the seeded 200..3600 B
 * distribution) from 1 or 2 caller threads and separates, per run:
 *   caller  wall time of the callers' release loops (the slowest thread)
 *   ccpu    the callers' thread CPU time, summed
 *   drain   CPU time of the pool's deferred-free worker thread (0 when the
 *           mode has none)
 *   pagerel time spent inside page releases, whoever made them (the page
 *           provider's release clock: src/pages/release_cost.c), and its
 *           share of ccpu + drain
 *   done    wall time until the last page was released
 * Variants: zs_free in the modes pool, class-unlocked, page-deferred,
 * percpu-deferred ("v3"), and zs_free_deferred on a class-unlocked pool
 * ("v2", the handle queue).  Page release: "cached" (freed pages stay in the
 * provider's cache, like a cheap kernel page free), "madvise" (no cache:
 * every release is an madvise(MADV_DONTNEED)), and "cost" (cached plus
 * --cost-ns of busy work per released page, a stand-in for the kernel's
 * page-free path).  Each row is the median of --rounds runs, variants
 * interleaved round by round, with the range (min-max).  The deferred queue
 * and worker of a pool are created before the clock starts (a running
 * system made that call long ago).
 *
 * Usage: bench_free_modes [--quick] [--json] [--rounds N] [--mib M] [--cost-ns N]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "zs/harness.h"
#include "zs/zsmalloc.h"

#define NVAR 5
#define NPAGE 3
#define MAXTHR 2
#define MAXROUNDS 64

static const char *const var_name[NVAR] = {"pool", "class-unlocked", "page-deferred", "v2",
					   "v3"};
static const char *const page_name[NPAGE] = {"cached", "madvise", "cost"};

enum { M_CALLER, M_CCPU, M_DRAIN, M_PAGEREL, M_SHARE, M_DONE, M_SYNC, NMET };
static const char *const met_key[NMET] = {"caller_ms", "caller_cpu_ms", "drain_cpu_ms",
					  "page_release_ms", "page_release_share_pct", "done_ms",
					  "sync_fallback_pct"};
static size_t g_capacity; /* --capacity: the pools' deferred_capacity (0: the RFC's sizing) */

struct caller {
	pthread_t tid;
	struct zs_pool *pool;
	unsigned long *h;
	size_t n;
	int deferred;
	pthread_barrier_t *start;
	double t0, wall_ns, cpu_ns;
};

static double thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *release_loop(void *arg)
{
	struct caller *c = arg;
	pthread_barrier_wait(c->start);
	double c0 = thread_cpu_ns(), t0 = bench_now_ns();
	c->t0 = t0;
	if (c->deferred)
		for (size_t i = 0; i < c->n; i++)
			zs_free_deferred(c->pool, c->h[i]);
	else
		for (size_t i = 0; i < c->n; i++)
			zs_free(c->pool, c->h[i]);
	c->wall_ns = bench_now_ns() - t0;
	c->cpu_ns = thread_cpu_ns() - c0;
	return NULL;
}

static void run_once(int var, int pm, unsigned cost_ns, int nthr, size_t bytes, unsigned long *h,
		     size_t max_objs, double out[NMET])
{
	static const enum zs_free_mode mode[NVAR] = {ZS_FREE_POOL_LOCK, ZS_FREE_CLASS_INDEX_UNLOCKED,
						     ZS_FREE_PAGE_DEFERRED,
						     ZS_FREE_CLASS_INDEX_UNLOCKED,
						     ZS_FREE_PERCPU_DEFERRED};
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.name = "bench_free_modes";
	cfg.free_mode = mode[var];
	cfg.page_cache_pages = pm == 1 ? ZS_PAGES_NO_CACHE : bytes / 4096 + 1024;
	cfg.deferred_capacity = g_capacity;
	struct zs_pool *pool = bench_pool_create(&cfg);
	size_t n = bench_fill_pool(pool, h, bytes, max_objs);
	if (var >= 2) {
		/* Build the queue and start the worker before the clock (the top). */
		unsigned long warm = zs_malloc(pool, 64);
		if (ZS_IS_ERR(warm) || zs_free_deferred(pool, warm)) {
			fprintf(stderr, "warm-up deferred free failed\n");
			exit(1);
		}
		zs_free_deferred_flush(pool);
	}
	uint64_t pages0 = zs_get_total_pages(pool);
	uint64_t w0 = zs_pool_deferred_worker_cpu_ns(pool);
	zs_pages_set_release_cost_ns(pm == 2 ? cost_ns : 0);
	zs_pages_release_timing(1, NULL);
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)nthr + 1);
	struct caller c[MAXTHR];
	for (int t = 0; t < nthr; t++) {
		/* Contiguous halves: two processes exiting, each with its own objects. */
		size_t lo = n * (size_t)t / (size_t)nthr, hi = n * (size_t)(t + 1) / (size_t)nthr;
		c[t] = (struct caller){.pool = pool, .h = h + lo, .n = hi - lo, .deferred = var == 3,
				       .start = &start};
		if (pthread_create(&c[t].tid, NULL, release_loop, &c[t])) {
			perror("pthread_create");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	for (int t = 0; t < nthr; t++)
		pthread_join(c[t].tid, NULL);
	/* Wait for the worker rather than flush, so the drain stays on its thread. */
	struct zs_pages_release_time rt;
	double deadline = bench_now_ns() + 20e9;
	for (;;) {
		zs_pages_release_timing(-1, &rt);
		if (rt.pages >= pages0 || bench_now_ns() > deadline)
			break;
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
	double t0 = c[0].t0;
	for (int t = 1; t < nthr; t++)
		t0 = c[t].t0 < t0 ? c[t].t0 : t0;
	double done = bench_now_ns() - t0; /* from the first caller's start */
	uint64_t w1 = zs_pool_deferred_worker_cpu_ns(pool);
	out[M_SYNC] = 100.0 * (double)zs_pool_deferred_fallbacks(pool) / (double)n;
	zs_pages_release_timing(0, &rt);
	zs_pages_set_release_cost_ns(0);
	if (rt.pages < pages0) {
		fprintf(stderr, "%s: only %llu of %llu pages released after 20 s\n", var_name[var],
			(unsigned long long)rt.pages, (unsigned long long)pages0);
		exit(1);
	}
	zs_free_deferred_flush(pool);
	if (zs_get_total_pages(pool) != 0 || zs_pool_objects(pool) != 0) {
		fprintf(stderr, "pages or objects left after the release\n");
		exit(1);
	}
	zs_destroy_pool(pool);
	pthread_barrier_destroy(&start);
	double wall = 0, ccpu = 0;
	for (int t = 0; t < nthr; t++) {
		wall = c[t].wall_ns > wall ? c[t].wall_ns : wall;
		ccpu += c[t].cpu_ns;
	}
	double drain = w1 > w0 ? (double)(w1 - w0) : 0;
	out[M_CALLER] = wall / 1e6;
	out[M_CCPU] = ccpu / 1e6;
	out[M_DRAIN] = drain / 1e6;
	out[M_PAGEREL] = (double)rt.ns / 1e6;
	out[M_SHARE] = 100.0 * (double)rt.ns / (ccpu + drain);
	out[M_DONE] = done / 1e6;
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0;
	size_t mib = 0;
	unsigned cost_ns = 1000;
	struct bench_json js = {0};
	size_t capacity = 0;
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--mib", mib, 1, 1 << 16, "M",
			      "MiB of objects to release; default 16 quick, else 128"),
		BENCH_OPT_U64("--cost-ns", cost_ns, 0, ZS_PAGES_RELEASE_COST_MAX_NS, "N",
			      "busy ns per released page in the cost rows; default 1000"),
		BENCH_OPT_U64("--capacity", capacity, 0, ZS_MAX_DEFERRED_CAPACITY, "N",
			      "deferred_capacity of the pools; default 0, the RFC's (32768 at 4K)"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	rounds = bench_rounds(rounds, quick, 2, 5);
	g_capacity = capacity;
	if (!mib)
		mib = quick ? 16 : 128;
	bench_quiet = js.enabled;
	size_t bytes = mib << 20, max_objs = bytes / 200 + 16;
	unsigned long *h = malloc(max_objs * sizeof(*h));
	if (!h)
		return 1;
	bench_print_machine();
	bench_say("bench_free_modes: release %zu MiB of objects (200..3600 B) from 1 and 2 threads;\n"
		  "median of %d interleaved rounds [min-max]; cost rows: cached + %u ns per page;\n"
		  "deferred_capacity %zu (0: the RFC's sizing)\n\n",
		  mib, rounds, cost_ns, capacity);
	bench_json_begin(&js, "free_modes");
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "mib", (double)mib);
	bench_json_num(&js, "cost_ns", cost_ns);
	bench_json_num(&js, "capacity", (double)capacity);

	static double res[NPAGE][MAXTHR][NVAR][NMET][MAXROUNDS];
	static double med[NPAGE][MAXTHR][NVAR][NMET], lo[NPAGE][MAXTHR][NVAR][NMET],
		hi[NPAGE][MAXTHR][NVAR][NMET];
	for (int pm = 0; pm < NPAGE; pm++)
		for (int nt = 1; nt <= MAXTHR; nt++) {
			double warm[NMET];
			run_once(0, pm, cost_ns, nt, bytes, h, max_objs, warm);
			for (int r = 0; r < rounds; r++)
				for (int k = 0; k < NVAR; k++) {
					int v = (k + r) % NVAR;
					double m[NMET];
					run_once(v, pm, cost_ns, nt, bytes, h, max_objs, m);
					for (int i = 0; i < NMET; i++)
						res[pm][nt - 1][v][i][r] = m[i];
				}
			for (int v = 0; v < NVAR; v++)
				for (int i = 0; i < NMET; i++) {
					const double *a = res[pm][nt - 1][v][i];
					med[pm][nt - 1][v][i] = bench_median(a, rounds);
					lo[pm][nt - 1][v][i] = bench_min(a, rounds);
					hi[pm][nt - 1][v][i] = bench_max(a, rounds);
				}
		}
	bench_say("%-7s %2s %-14s | %-22s | %-22s | %-22s | %-23s | %-16s | %-22s | %s\n", "pages", "th",
		  "variant", "caller ms", "caller CPU ms", "drain CPU ms", "page release ms (wall)",
		  "pagerel % CPU", "done ms", "sync %");
	for (int pm = 0; pm < NPAGE; pm++)
		for (int nt = 0; nt < MAXTHR; nt++) {
			for (int v = 0; v < NVAR; v++) {
				char cell[NMET][40];
				for (int i = 0; i < NMET; i++)
					snprintf(cell[i], sizeof(cell[i]), "%6.1f [%.1f-%.1f]",
						 med[pm][nt][v][i], lo[pm][nt][v][i],
						 hi[pm][nt][v][i]);
				bench_say("%-7s %2d %-14s | %-22s | %-22s | %-22s | %-23s | %-16.1f | "
					  "%-22s | %.0f\n",
					  page_name[pm], nt + 1, var_name[v], cell[M_CALLER],
					  cell[M_CCPU], cell[M_DRAIN], cell[M_PAGEREL],
					  med[pm][nt][v][M_SHARE], cell[M_DONE],
					  med[pm][nt][v][M_SYNC]);
			}
			bench_say("\n");
		}
	/*
	 * The decomposition, from CPU times (wall times stretch on a busy machine,
	 * CPU times much less): page-deferred takes exactly the page release out of
	 * class-unlocked's caller, v3 takes the whole free out.
	 */
	bench_say("decomposition (medians of CPU time; cu = class-unlocked, pd = page-deferred):\n");
	bench_say("%-7s %2s | %-16s | %-16s | %-16s | %-18s | %-18s\n", "pages", "th",
		  "caller cu ms", "saved by pd ms", "saved by v3 ms", "pd share of v3 %",
		  "v3 CPU vs cu %");
	for (int pm = 0; pm < NPAGE; pm++)
		for (int nt = 0; nt < MAXTHR; nt++) {
			double cu = med[pm][nt][1][M_CCPU], pd = med[pm][nt][2][M_CCPU];
			double v3 = med[pm][nt][4][M_CCPU], v3d = med[pm][nt][4][M_DRAIN];
			bench_say("%-7s %2d | %16.1f | %16.1f | %16.1f | %18.0f | %+18.0f\n",
				  page_name[pm], nt + 1, cu, cu - pd, cu - v3,
				  100.0 * (cu - pd) / (cu - v3), 100.0 * ((v3 + v3d) / cu - 1));
			char key[64];
			snprintf(key, sizeof(key), "%s_%dt_pd_share_of_v3_saving_pct", page_name[pm],
				 nt + 1);
			bench_json_num(&js, key, 100.0 * (cu - pd) / (cu - v3));
			snprintf(key, sizeof(key), "%s_%dt_v3_cpu_vs_class_unlocked_pct",
				 page_name[pm], nt + 1);
			bench_json_num(&js, key, 100.0 * ((v3 + v3d) / cu - 1));
		}
	bench_say("\n");
	bench_say("v2: zs_free_deferred (the handle queue) on a class-unlocked pool; v3: zs_free "
		  "in percpu-deferred.\ndrain CPU is the worker thread's CPU time; page release "
		  "is wall time inside the page\nprovider's release calls, on any thread (the "
		  "clock itself adds two clock reads per call), so\na thread preempted inside "
		  "a release counts the wait too: the share can pass 100%% on a\nbusy machine.  "
		  "sync %%: deferred frees done at once, the queue or every buffer being full.\n");
	free(h);
	struct json *w = bench_json_w(&js);
	if (w) {
		json_karr(w, "rows");
		for (int pm = 0; pm < NPAGE; pm++)
			for (int nt = 0; nt < MAXTHR; nt++)
				for (int v = 0; v < NVAR; v++) {
					json_obj(w);
					json_kstr(w, "pages", page_name[pm]);
					json_knum(w, "threads", nt + 1);
					json_kstr(w, "variant", var_name[v]);
					for (int i = 0; i < NMET; i++) {
						char key[64];
						json_knum(w, met_key[i], med[pm][nt][v][i]);
						snprintf(key, sizeof(key), "%s_min", met_key[i]);
						json_knum(w, key, lo[pm][nt][v][i]);
						snprintf(key, sizeof(key), "%s_max", met_key[i]);
						json_knum(w, key, hi[pm][nt][v][i]);
					}
					json_obj_end(w);
				}
		json_arr_end(w);
	}
	bench_json_end(&js);
	return 0;
}
