/*
 * bench_deferred: release latency with deferred free vs synchronous free.
 *
 * Seed 001 moves zs_free off the munmap/exit path: the caller only enqueues
 * the handle (zs_free_deferred, O(1), no allocation) and a background worker
 * frees in class-grouped batches; the RFC reports munmap of a 256 MB
 * swapped-out VMA 3.4x faster.  The memory is not free any sooner, though,
 * so we time both sides of the trade-off for N handles (one caller thread,
 * sizes from the fixed seeded 200..3600 B distribution):
 *   release  the caller's loop (zs_free, or zs_free_deferred)
 *   total    release + zs_free_deferred_flush(): until every object is freed
 *   held     pool pages still allocated when the caller's loop returns (%)
 * Variants, interleaved round by round, median over rounds:
 *   sync        zs_free
 *   def-cap     zs_free_deferred, default capacity (the RFC's 128 MiB worth of
 *               page-size slots; beyond it the enqueue falls back to zs_free)
 *   def-big     zs_free_deferred, capacity >= N (no fallback)
 *   def-noworker  capacity >= N, no worker thread: flush does all the work in
 *               the caller, showing the cost of the batched drain itself
 * The worker needs a CPU of its own to make the caller faster without making
 * the total slower; this machine has 2 (and other jobs may be using them).
 *
 * Usage: bench_deferred [--quick] [--json] [--rounds N] [--mib M]
 *                       [--free-mode pool|class|class-unlocked]
 *   (the library's names, as in `zs`)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "zs/zsmalloc.h"

#define NVAR 4
static const char *var_name[NVAR] = {"sync", "def-cap", "def-big", "def-noworker"};
static const char *var_key[NVAR] = {"sync", "deferred_default_cap", "deferred_big_cap",
				    "deferred_no_worker"};

struct result {
	double release_ms, total_ms, held_pct;
};

static struct result run_once(int var, int cached, enum zs_free_mode mode, size_t bytes,
			      unsigned long *h, size_t max_objs, size_t *n_out)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.name = "bench_deferred";
	cfg.free_mode = mode;
	/* os: 64 pages (the provider's former default, no per-CPU caches): pages go back at once. */
	cfg.page_cache_pages = cached ? bytes / 4096 + 1024 : 64;
	if (var >= 2)
		cfg.deferred_capacity = max_objs;
	if (var == 3)
		cfg.deferred_worker = -1;
	struct zs_pool *pool = bench_pool_create(&cfg);
	size_t n = bench_fill_pool(pool, h, bytes, max_objs);
	if (var) {
		/*
		 * The queue (and worker) are created by the first zs_free_deferred of a
		 * pool, which initialises every cell: ~1 ms for the big
		 * queues here, paid once per pool.  A running system has made that call
		 * long before a release, as the RFC's queue exists from pool creation:
		 * make it before the clock starts, on an object of its own.
		 */
		unsigned long warm = zs_malloc(pool, 64);
		if (ZS_IS_ERR(warm) || zs_free_deferred(pool, warm)) {
			fprintf(stderr, "warm-up deferred free failed\n");
			exit(1);
		}
		zs_free_deferred_flush(pool);
	}
	double pages0 = (double)zs_get_total_pages(pool);
	struct result r = {0};
	double t0 = bench_now_ns();
	if (var == 0) {
		for (size_t i = 0; i < n; i++)
			zs_free(pool, h[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			zs_free_deferred(pool, h[i]);
	}
	double t1 = bench_now_ns();
	double held = (double)zs_get_total_pages(pool);
	if (var)
		zs_free_deferred_flush(pool);
	double t2 = bench_now_ns();
	if (zs_get_total_pages(pool) != 0) {
		fprintf(stderr, "pages left after flush\n");
		exit(1);
	}
	zs_destroy_pool(pool);
	r.release_ms = (t1 - t0) / 1e6;
	r.total_ms = (t2 - t0) / 1e6;
	r.held_pct = 100.0 * held / pages0;
	*n_out = n;
	return r;
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0;
	size_t mib = 0;
	enum zs_free_mode mode = ZS_FREE_POOL_LOCK;
	struct bench_json js = {0};
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--mib", mib, 1, 1 << 20, "M",
			      "MiB of objects to release; default 32 quick, else 128"),
		BENCH_OPT_FREE_MODE("--free-mode", mode, "the pool's lock mode for zs_free"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	const char *mode_s = zs_free_mode_name(mode);
	rounds = bench_rounds(rounds, quick, 3, 9);
	if (!mib)
		mib = quick ? 32 : 128;
	bench_quiet = js.enabled;
	size_t bytes = mib << 20, max_objs = bytes / 200 + 16;
	unsigned long *h = malloc(max_objs * sizeof(*h));
	if (!h)
		return 1;

	bench_print_machine();
	bench_say("bench_deferred: one thread releases %zu MiB of objects (200..3600 B); free mode "
		  "%s;\nmedian of %d interleaved rounds\n\n",
		  mib, mode_s, rounds);
	bench_json_begin(&js, "deferred");
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "mib", (double)mib);
	bench_json_str(&js, "free_mode", mode_s);

	static const char *page_mode[2] = {"cached", "os"};
	static double rows_ms[2][NVAR][3];   /* release, total, held %: for --json's rows */
	for (int pm = 0; pm < 2; pm++) {
		struct result res[NVAR][64];
		size_t n = 0;
		run_once(0, pm == 0, mode, bytes, h, max_objs, &n); /* warm-up */
		for (int r = 0; r < rounds; r++)
			for (int k = 0; k < NVAR; k++) {
				int v = (k + r) % NVAR;
				res[v][r] = run_once(v, pm == 0, mode, bytes, h, max_objs, &n);
			}
		double rel[NVAR], tot[NVAR], held[NVAR];
		for (int v = 0; v < NVAR; v++) {
			double a[64], b[64], c[64];
			for (int r = 0; r < rounds; r++) {
				a[r] = res[v][r].release_ms;
				b[r] = res[v][r].total_ms;
				c[r] = res[v][r].held_pct;
			}
			rel[v] = bench_median(a, rounds);
			tot[v] = bench_median(b, rounds);
			held[v] = bench_median(c, rounds);
		}
		bench_say("page release: %s (%s); %zu handles\n", page_mode[pm],
			  pm == 0 ? "freed pages cached, cheap like the kernel's page free"
				  : "freed pages returned with MADV_DONTNEED",
			  n);
		bench_say("%-13s | %10s %9s | %10s %9s | %s\n", "variant", "release ms", "speedup",
			  "total ms", "vs sync", "pages still held at release end");
		for (int v = 0; v < NVAR; v++)
			bench_say("%-13s | %10.2f %8.2fx | %10.2f %8.2fx | %5.1f%%\n", var_name[v],
				  rel[v], rel[0] / rel[v], tot[v], tot[0] / tot[v], held[v]);
		bench_say("\n");
		for (int v = 0; v < NVAR; v++) {
			rows_ms[pm][v][0] = rel[v];
			rows_ms[pm][v][1] = tot[v];
			rows_ms[pm][v][2] = held[v];
		}
		if (pm == 0)
			bench_json_num(&js, "handles", (double)n);
		for (int v = 0; v < NVAR; v++) {
			char key[128];
			snprintf(key, sizeof(key), "%s_%s_release_ms", page_mode[pm], var_key[v]);
			bench_json_num(&js, key, rel[v]);
			snprintf(key, sizeof(key), "%s_%s_total_ms", page_mode[pm], var_key[v]);
			bench_json_num(&js, key, tot[v]);
			snprintf(key, sizeof(key), "%s_%s_held_pct", page_mode[pm], var_key[v]);
			bench_json_num(&js, key, held[v]);
			if (v) {
				snprintf(key, sizeof(key), "%s_%s_release_speedup", page_mode[pm],
					 var_key[v]);
				bench_json_num(&js, key, rel[0] / rel[v]);
				snprintf(key, sizeof(key), "%s_%s_total_speedup", page_mode[pm],
					 var_key[v]);
				bench_json_num(&js, key, tot[0] / tot[v]);
			}
		}
	}
	bench_say("speedup = sync median / variant median (>1: faster than zs_free).\n"
		  "seed 001: munmap of a 256 MB swapped-out VMA 3.4x faster (RK3588, caller pinned), "
		  "caller side only.\n"
		  "def-cap: beyond the default capacity (%zu handles at 4K pages) zs_free_deferred "
		  "frees synchronously\nunless the worker has made room.\n",
		  (size_t)(128UL << 20) / 4096);
	free(h);
	struct json *w = bench_json_w(&js);
	if (w) {
		json_karr(w, "rows");
		for (int pm = 0; pm < 2; pm++)
			for (int v = 0; v < NVAR; v++) {
				const double *r = rows_ms[pm][v];
				json_obj(w);
				json_kstr(w, "pages", page_mode[pm]);
				json_kstr(w, "variant", var_key[v]);
				json_knum(w, "release_ms", r[0]);
				json_knum(w, "total_ms", r[1]);
				json_knum(w, "held_pct", r[2]);
				json_knum(w, "release_speedup", rows_ms[pm][0][0] / r[0]);
				json_knum(w, "total_speedup", rows_ms[pm][0][1] / r[1]);
				json_obj_end(w);
			}
		json_arr_end(w);
	}
	bench_json_end(&js);
	return 0;
}
