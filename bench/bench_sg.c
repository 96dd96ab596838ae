/*
 * bench_sg: the scatter-gather read (zs_obj_read_sg_begin/end) against the
 * copying read (zs_obj_read_begin/end) on real pages compressed per page and
 * stored as zram would (same-filled skipped, objects >= huge class size
 * stored raw), for the compressors of the store's read path.
 *
 * Per compressor, four read loops over every object:
 *   copy        read_begin (local copy when spanning) + touch first/last byte + read_end
 *   sg          sg_begin + touch first/last byte of each piece + sg_end
 *   copy+dec    read_begin + zs_decompress + read_end        (the store's read today)
 *   sg+dec      sg_begin + zs_decompress_sg + sg_end         (zstd streams over the pieces;
 *                                                              lz4/lzo copy a split input)
 * Timed interleaved per round (median ns per read) and, for instruction
 * counts, each loop is its own noinline function so callgrind can count it:
 *   valgrind --tool=callgrind --toggle-collect=loop_sg_dec build/bench_sg --only sg+dec ...
 *
 * Usage: bench_sg [--quick] [--json] [--rounds N] [--input-mib M] [--comp NAME]
 *                 [--only copy|sg|copy+dec|sg+dec] [PATH...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"
#include "zs/harness.h"

struct obj {
	unsigned long h;
	unsigned len;
	int raw;
};

struct ctx {
	struct zs_pool *pool;
	struct zs_comp *comp;
	struct obj *o;
	size_t n;
	unsigned char *local, *out;
	unsigned long spanning;
	volatile unsigned sink;
};

#define NOINLINE __attribute__((noinline))

static NOINLINE void loop_copy(struct ctx *c)
{
	unsigned s = 0;
	for (size_t i = 0; i < c->n; i++) {
		const unsigned char *p = zs_obj_read_begin(c->pool, c->o[i].h, c->o[i].len, c->local);
		s += p[0] + p[c->o[i].len - 1];
		zs_obj_read_end(c->pool, c->o[i].h, c->o[i].len, (void *)p);
	}
	c->sink = s;
}

static NOINLINE void loop_sg(struct ctx *c)
{
	unsigned s = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct zs_obj_piece sg[2];
		int n = zs_obj_read_sg_begin(c->pool, c->o[i].h, c->o[i].len, sg);
		for (int k = 0; k < n; k++)
			s += ((const unsigned char *)sg[k].addr)[0] +
			     ((const unsigned char *)sg[k].addr)[sg[k].len - 1];
		zs_obj_read_sg_end(c->pool, c->o[i].h);
	}
	c->sink = s;
}

static NOINLINE void loop_copy_dec(struct ctx *c, size_t ps)
{
	unsigned s = 0;
	for (size_t i = 0; i < c->n; i++) {
		const unsigned char *p = zs_obj_read_begin(c->pool, c->o[i].h, c->o[i].len, c->local);
		if (c->o[i].raw)
			memcpy(c->out, p, ps);
		else if (zs_decompress(c->comp, p, c->o[i].len, c->out, ps) < 0)
			abort();
		s += c->out[0];
		zs_obj_read_end(c->pool, c->o[i].h, c->o[i].len, (void *)p);
	}
	c->sink = s;
}

static NOINLINE void loop_sg_dec(struct ctx *c, size_t ps)
{
	unsigned s = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct zs_obj_piece sg[2];
		int n = zs_obj_read_sg_begin(c->pool, c->o[i].h, c->o[i].len, sg);
		if (c->o[i].raw) {
			memcpy(c->out, sg[0].addr, sg[0].len);
			if (n == 2)
				memcpy(c->out + sg[0].len, sg[1].addr, sg[1].len);
		} else {
			const void *src[2] = { sg[0].addr, n == 2 ? sg[1].addr : NULL };
			size_t len[2] = { sg[0].len, n == 2 ? sg[1].len : 0 };
			if (zs_decompress_sg(c->comp, src, len, n, c->out, ps) < 0)
				abort();
		}
		s += c->out[0];
		zs_obj_read_sg_end(c->pool, c->o[i].h);
	}
	c->sink = s;
}

static const char *const modes[] = { "copy", "sg", "copy+dec", "sg+dec", NULL };

static void run_mode(struct ctx *c, int m, size_t ps)
{
	switch (m) {
	case 0: loop_copy(c); break;
	case 1: loop_sg(c); break;
	case 2: loop_copy_dec(c, ps); break;
	case 3: loop_sg_dec(c, ps); break;
	}
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0, only = -1;
	struct bench_json js = { 0 };
	size_t mib = 0;
	const char *comps[4] = { "lz4", "zstd", NULL, NULL };
	int ncomp = 2;
	const char *comp = NULL;
	char *def_paths[] = { "/usr/lib/x86_64-linux-gnu" }, **paths = def_paths;
	int npaths = 1;

	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--input-mib", mib, 1, 1 << 20, "M", "MiB of pages; default 8 quick, else 64"),
		BENCH_OPT_STR("--comp", comp, "NAME", "one compressor; default lz4 and zstd"),
		BENCH_OPT_CHOICE("--only", only, modes, "time one read mode; default all"),
		BENCH_OPT_ARGS("PATH", paths, npaths, 16, "files or directories to load; default "
			       "/usr/lib/x86_64-linux-gnu"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	if (comp) {
		comps[0] = comp;
		ncomp = 1;
	}
	bench_quiet = js.enabled;
	rounds = bench_rounds(rounds, quick, 3, 9);
	if (!mib)
		mib = quick ? 8 : 64;

	const size_t ps = 4096;
	struct zs_pageset pset;
	if (zs_pageset_load(&pset, ps, paths, npaths, (uint64_t)mib << 20) || !pset.npages) {
		fprintf(stderr, "bench_sg: no pages\n");
		return 1;
	}
	bench_json_begin(&js, "bench_sg");
	bench_json_num(&js, "pages", (double)pset.npages);
	bench_say("bench_sg: %zu pages (%zu MiB) of %s..., %d rounds\n", pset.npages, mib, paths[0],
		  rounds);

	for (int ci = 0; ci < ncomp; ci++) {
		struct ctx c = { 0 };
		c.pool = bench_pool_create(NULL);
		if (!c.pool || zs_comp_create(&(struct zs_comp_config){ .name = comps[ci], .max_src = ps }, &c.comp, NULL, 0))
			return 1;
		size_t bound = zs_comp_bound(c.comp, ps), huge = zs_huge_class_size(c.pool);
		unsigned char *buf = malloc(bound);
		c.local = malloc(ps);
		c.out = malloc(ps);
		c.o = calloc(pset.npages, sizeof(*c.o));
		for (size_t i = 0; i < pset.npages; i++) {
			const unsigned char *pg = pset.data + i * ps;
			struct zs_zram_store_decision d;
			if (zs_zram_store_decide(c.comp, pg, ps, huge, buf, bound, &d))
				return 1;
			if (d.kind == ZS_ZRAM_STORE_SAME)
				continue; /* same-filled: zram keeps no object */
			struct obj *o = &c.o[c.n];
			o->raw = d.kind == ZS_ZRAM_STORE_RAW;
			o->len = (unsigned)d.len;
			o->h = zs_malloc(c.pool, o->len);
			if (ZS_IS_ERR(o->h))
				return 1;
			zs_obj_write(c.pool, o->h, d.data, o->len);
			c.n++;
		}
		/* Count spanning objects: two pieces. */
		for (size_t i = 0; i < c.n; i++) {
			struct zs_obj_piece sg[2];
			if (zs_obj_read_sg_begin(c.pool, c.o[i].h, c.o[i].len, sg) == 2)
				c.spanning++;
			zs_obj_read_sg_end(c.pool, c.o[i].h);
		}
		double t[4][64];
		for (int r = 0; r < rounds; r++)
			for (int k = 0; k < 4; k++) {
				int m = (k + r) % 4;
				if (only >= 0 && m != only)
					continue;
				double t0 = bench_now_ns();
				run_mode(&c, m, ps);
				t[m][r] = (bench_now_ns() - t0) / (double)c.n;
			}
		bench_say("%-8s %zu objects, %lu spanning (%.1f%%)\n", comps[ci], c.n, c.spanning,
			  100.0 * (double)c.spanning / (double)c.n);
		for (int m = 0; m < 4; m++) {
			if (only >= 0 && m != only)
				continue;
			double med = bench_median(t[m], rounds);
			char key[64];
			bench_say("  %-9s %8.1f ns/read", modes[m], med);
			if (m == 1 && only < 0)
				bench_say("   sg/copy %.3f", med / bench_median(t[0], rounds));
			if (m == 3 && only < 0)
				bench_say("   sg+dec/copy+dec %.3f", med / bench_median(t[2], rounds));
			bench_say("\n");
			snprintf(key, sizeof(key), "%s_%s_ns", comps[ci], modes[m]);
			bench_json_num(&js, key, med);
		}
		for (size_t i = 0; i < c.n; i++)
			zs_free(c.pool, c.o[i].h);
		zs_destroy_pool(c.pool);
		zs_comp_destroy(c.comp);
		free(buf);
		free(c.local);
		free(c.out);
		free(c.o);
	}
	bench_json_end(&js);
	zs_pageset_free(&pset);
	return 0;
}
