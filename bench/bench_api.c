/*
 * bench_api: the seed-004 object access API vs the legacy map/unmap API.
 *
 * Seed 004 replaced zs_map_object/zs_unmap_object (a per-CPU bounce buffer
 * for objects that span two pages, copied in on map and back on unmap) with
 * zs_obj_read_begin/end (spanning objects copied into the caller's buffer)
 * and zs_obj_write (one or two memcpys straight into the pool pages), and
 * reported -28% instructions on a synthetic test that allocates a fixed set
 * of objects of fixed sizes and iterates over them, mapping each read-only
 * then read-write.  Same workload here, one pool:
 *   objects  sizes 32, 48, ..., 4080 (every 4K size class, spanning and huge
 *            ones included), 16 of each, allocated round-robin over sizes
 *   legacy   per object: map RO, read first+last byte, unmap;
 *            map RW, memcpy size bytes, unmap
 *   new      per object: read_begin (local copy), read first+last byte,
 *            read_end; zs_obj_write size bytes
 * Timing: both loops alternate round by round (order rotating), median ns
 * per object (one read + one write).  Instructions: scripts/
 * bench-api-callgrind.sh runs `--variant legacy|new --iterations N` under
 * callgrind with --toggle-collect on the loop functions below, so setup
 * (pool creation, allocation) is not counted.
 *
 * Usage: bench_api [--quick] [--json] [--rounds N] [--iterations N]
 *                  [--variant legacy|new|both] [--per-size N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "zs/zsmalloc.h"

struct ctx {
	struct zs_pool *pool;
	unsigned long *h;
	unsigned *size;
	size_t n;
	unsigned char *src;       /* write source, 4096 bytes */
	unsigned char *local_copy; /* read_begin buffer */
};

static volatile unsigned sink;

/* Not static, never inlined: callgrind's --toggle-collect names these. */
void bench_api_loop_legacy(struct ctx *c, long iters);
void bench_api_loop_new(struct ctx *c, long iters);

__attribute__((noinline)) void bench_api_loop_legacy(struct ctx *c, long iters)
{
	unsigned acc = 0;
	for (long it = 0; it < iters; it++) {
		for (size_t i = 0; i < c->n; i++) {
			unsigned sz = c->size[i];
			const unsigned char *p = zs_map_object(c->pool, c->h[i], ZS_MM_RO);
			acc += p[0] + p[sz - 1];
			zs_unmap_object(c->pool, c->h[i]);
			unsigned char *w = zs_map_object(c->pool, c->h[i], ZS_MM_RW);
			memcpy(w, c->src, sz);
			zs_unmap_object(c->pool, c->h[i]);
		}
	}
	sink += acc;
}

__attribute__((noinline)) void bench_api_loop_new(struct ctx *c, long iters)
{
	unsigned acc = 0;
	for (long it = 0; it < iters; it++) {
		for (size_t i = 0; i < c->n; i++) {
			unsigned sz = c->size[i];
			const unsigned char *p =
				zs_obj_read_begin(c->pool, c->h[i], sz, c->local_copy);
			acc += p[0] + p[sz - 1];
			zs_obj_read_end(c->pool, c->h[i], sz, (void *)p);
			zs_obj_write(c->pool, c->h[i], c->src, sz);
		}
	}
	sink += acc;
}

/* Both APIs must see the same bytes: write with one, read with the other. */
static int self_check(struct ctx *c)
{
	unsigned char buf[4096];
	for (size_t i = 0; i < c->n; i++) {
		unsigned sz = c->size[i];
		for (unsigned k = 0; k < sz; k++)
			buf[k] = (unsigned char)(i * 31 + k);
		if (zs_obj_write(c->pool, c->h[i], buf, sz))
			return -1;
		const unsigned char *p = zs_map_object(c->pool, c->h[i], ZS_MM_RO);
		int bad = !p || memcmp(p, buf, sz);
		zs_unmap_object(c->pool, c->h[i]);
		if (bad)
			return -1;
		unsigned char *w = zs_map_object(c->pool, c->h[i], ZS_MM_RW);
		for (unsigned k = 0; k < sz; k++)
			w[k] = (unsigned char)~buf[k];
		zs_unmap_object(c->pool, c->h[i]);
		const unsigned char *q = zs_obj_read_begin(c->pool, c->h[i], sz, c->local_copy);
		for (unsigned k = 0; k < sz && !bad; k++)
			bad = q[k] != (unsigned char)~buf[k];
		zs_obj_read_end(c->pool, c->h[i], sz, (void *)q);
		if (bad)
			return -1;
	}
	return 0;
}

static const char *const variant_names[] = { "legacy", "new", "both", NULL };

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, per_size = 16;
	long iterations = -1;
	int variant = 2; /* variant_names[]: both */
	struct bench_json js = {0};
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--iterations", iterations, 0, 1ull << 40, "N",
			      "fixed work for callgrind: N passes, no timing"),
		BENCH_OPT_CHOICE("--variant", variant, variant_names, "which API to time"),
		BENCH_OPT_U64("--per-size", per_size, 1, 1 << 24, "N", "objects of each size"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	int do_legacy = variant != 1, do_new = variant != 0;
	bench_quiet = js.enabled;

	struct ctx c = {0};
	c.pool = bench_pool_create(NULL);
	size_t nsizes = (4080 - 32) / 16 + 1;
	c.n = nsizes * (size_t)per_size;
	c.h = malloc(c.n * sizeof(*c.h));
	c.size = malloc(c.n * sizeof(*c.size));
	c.src = malloc(4096);
	c.local_copy = malloc(4096);
	if (!c.pool || !c.h || !c.size || !c.src || !c.local_copy) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	memset(c.src, 0x5a, 4096);
	for (size_t i = 0; i < c.n; i++) {
		c.size[i] = 32 + 16 * (unsigned)(i % nsizes);
		c.h[i] = zs_malloc(c.pool, c.size[i]);
		if (ZS_IS_ERR(c.h[i])) {
			fprintf(stderr, "zs_malloc failed\n");
			return 1;
		}
	}
	size_t spanning = 0;
	for (size_t i = 0; i < c.n; i++) {
		void *p = zs_obj_read_begin(c.pool, c.h[i], c.size[i], c.local_copy);
		spanning += p == c.local_copy;
		zs_obj_read_end(c.pool, c.h[i], c.size[i], p);
	}

	if (iterations >= 0) {
		/* Fixed-work mode for callgrind: no timing output beyond one line. */
		if (do_legacy)
			bench_api_loop_legacy(&c, iterations);
		if (do_new)
			bench_api_loop_new(&c, iterations);
		if (!js.enabled)
			printf("bench_api: variant %s, %zu objects, %ld iterations done\n",
			       variant_names[variant], c.n,
			       iterations);
		else {
			struct json w;
			json_init(&w, stdout, 0);
			json_obj(&w);
			json_kstr(&w, "bench", "api");
			json_kstr(&w, "variant", variant_names[variant]);
			json_kuint(&w, "objects", c.n);
			json_kint(&w, "iterations", iterations);
			json_obj_end(&w);
			json_done(&w);
		}
		zs_destroy_pool(c.pool);
		return 0;
	}

	if (self_check(&c)) {
		fprintf(stderr, "self-check failed: legacy and new API disagree\n");
		return 1;
	}
	rounds = bench_rounds(rounds, quick, 5, 15);
	/* Size a round to about 30 ms (quick) / 200 ms of work per variant. */
	bench_api_loop_legacy(&c, 1); /* warm-up */
	bench_api_loop_new(&c, 1);
	double t0 = bench_now_ns();
	bench_api_loop_new(&c, 4);
	double one = (bench_now_ns() - t0) / 4;
	long iters = (long)((quick ? 30e6 : 200e6) / (one > 1 ? one : 1));
	if (iters < 1)
		iters = 1;

	bench_print_machine();
	bench_say("bench_api: %zu objects (sizes 32..4080 step 16, %d each; %zu spanning), "
		  "%ld iterations per round,\nmedian of %d interleaved rounds; one op = one object "
		  "read (first+last byte) + one full write\n\n",
		  c.n, per_size, spanning, iters, rounds);
	double ns[2][64] = {{0}};
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < 2; k++) {
			int v = (k + r) % 2;
			double a = bench_now_ns();
			if (v == 0)
				bench_api_loop_legacy(&c, iters);
			else
				bench_api_loop_new(&c, iters);
			ns[v][r] = (bench_now_ns() - a) / ((double)iters * (double)c.n);
		}
	double legacy = bench_median(ns[0], rounds), nw = bench_median(ns[1], rounds);
	bench_say("%-8s %12s %14s\n", "variant", "ns/object", "min..max");
	bench_say("%-8s %12.1f %6.1f..%-6.1f\n", "legacy", legacy, bench_min(ns[0], rounds),
		  bench_max(ns[0], rounds));
	bench_say("%-8s %12.1f %6.1f..%-6.1f\n", "new", nw, bench_min(ns[1], rounds),
		  bench_max(ns[1], rounds));
	bench_say("\nnew/legacy time: %.3f (%+.1f%%), legacy/new speedup %.2fx\n", nw / legacy,
		  100.0 * (nw - legacy) / legacy, legacy / nw);
	bench_say("best-of-rounds (min) ratio new/legacy: %.3f (less sensitive to other load)\n",
		  bench_min(ns[1], rounds) / bench_min(ns[0], rounds));
	bench_say("instructions: scripts/bench-api-callgrind.sh (seed 004: -28%% instructions)\n");
	bench_json_begin(&js, "api");
	bench_json_num(&js, "objects", (double)c.n);
	bench_json_num(&js, "spanning_objects", (double)spanning);
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "iterations_per_round", (double)iters);
	bench_json_num(&js, "legacy_ns_per_object", legacy);
	bench_json_num(&js, "new_ns_per_object", nw);
	bench_json_num(&js, "new_vs_legacy_time_pct", 100.0 * (nw - legacy) / legacy);
	bench_json_num(&js, "speedup", legacy / nw);
	bench_json_num(&js, "legacy_ns_per_object_min", bench_min(ns[0], rounds));
	bench_json_num(&js, "new_ns_per_object_min", bench_min(ns[1], rounds));
	bench_json_end(&js);
	zs_destroy_pool(c.pool);
	free(c.h);
	free(c.size);
	free(c.src);
	free(c.local_copy);
	return 0;
}
