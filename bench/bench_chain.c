/*
 * bench_chain: the chain-length policy trade-off (seed 002, patch 2).
 *
 * Longer zspages waste less tail space but make more objects span two
 * pages, and a spanning object costs a copy on every read.  The exhaustive
 * policy (kernel today) minimises waste; the heuristic grows the chain only
 * for substantial savings.  For each page size (4K, 16K), max chain 4, 8,
 * 10, 16 and both policies (class delta 16 everywhere, as in the seed), we
 * report pool pages, spanning objects and read cost on two workloads:
 *
 *   testmod  the zsmalloc_test module's: sizes 32, 48, ..., 4080, 1337 of
 *            each, ascending (4K; at 16K sizes 32..16352 step 64, 334 each,
 *            about the same bytes).  Pages / spanning / memcpy bytes use the
 *            module's definitions (spanning = zs_obj_read_begin returned the
 *            local copy; memcpy = sum of those objects' sizes), so 4K chain 10
 *            must print the seed's 175111/110377 and 175920/103256.
 *            Read cost: ns per zs_obj_read_begin + touch first/last byte +
 *            zs_obj_read_end, on a scaled-down copy (64 per size at 4K, 16
 *            at 16K) of the same workload so all configs stay resident and
 *            can be timed interleaved.
 *   real     pages of real files (default: the shared libraries in /usr/lib/x86_64-linux-gnu,
 *            first 256 MiB) compressed with lz4 per page, stored as zram
 *            would: same-filled pages skipped, pages compressing to >=
 *            zs_huge_class_size stored raw.  Read cost: ns per page for
 *            read_begin + LZ4_decompress_safe + read_end.
 *
 * Timings: all configs of one page size are alive at once, measured round
 * by round in rotating order, median per config; ratios are vs exhaustive at
 * the same chain.  Page and spanning counts are exact (deterministic).
 *
 * Usage: bench_chain [--quick] [--json] [--rounds N] [--input-mib M] [--glob PATTERN]
 */
#include <glob.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_common.h"
#include "zs/harness.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

#define NCHAIN 4
#define NCFG (NCHAIN * 2)
static const unsigned chains[NCHAIN] = {4, 8, 10, 16};
static const char *pol_name[2] = {"exhaustive", "heuristic"};

static struct zs_pool *make_pool(unsigned page, unsigned chain, int policy)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.name = "bench_chain";
	cfg.page_size = page;
	cfg.max_chain = chain;
	cfg.class_delta = 16;
	cfg.chain_policy = policy ? ZS_CHAIN_HEURISTIC : ZS_CHAIN_EXHAUSTIVE;
	struct zs_pool *p = bench_pool_create(&cfg);
	return p;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

static unsigned long xzs_malloc(struct zs_pool *pool, size_t sz)
{
	unsigned long h = zs_malloc(pool, sz);
	if (ZS_IS_ERR(h)) {
		fprintf(stderr, "zs_malloc(%zu) failed: %d\n", sz, ZS_ERR(h));
		exit(1);
	}
	return h;
}

static volatile unsigned sink;

/* ---- testmod ---- */

struct tm_params {
	unsigned step, count, max;
};

static struct tm_params tm_params(unsigned page, unsigned count4k)
{
	struct tm_params t;
	t.step = page == 4096 ? 16 : 64 * (page / 16384 ? page / 16384 : 1);
	t.count = count4k * 4096 / page;
	if (t.count < 1)
		t.count = 1;
	t.max = page - 16;
	return t;
}

struct tm_metrics {
	unsigned long pages, objects, spanning;
	unsigned long long bytes, memcpy_bytes;
};

/* Full-size run: the module's metrics (no timing). */
static struct tm_metrics testmod_metrics(unsigned page, unsigned chain, int policy,
					  struct tm_params tp, void *local)
{
	struct zs_pool *pool = make_pool(page, chain, policy);
	size_t n = (size_t)((tp.max - 32) / tp.step + 1) * tp.count;
	unsigned long *h = xmalloc(n * sizeof(*h));
	unsigned *sz = xmalloc(n * sizeof(*sz));
	struct tm_metrics m = {0};
	size_t k = 0;
	for (unsigned s = 32; s <= tp.max; s += tp.step)
		for (unsigned c = 0; c < tp.count; c++) {
			sz[k] = s;
			h[k++] = xzs_malloc(pool, s);
			m.bytes += s;
		}
	m.objects = k;
	m.pages = zs_get_total_pages(pool);
	for (size_t i = 0; i < k; i++) {
		void *p = zs_obj_read_begin(pool, h[i], sz[i], local);
		if (p == local) {
			m.spanning++;
			m.memcpy_bytes += sz[i];
		}
		zs_obj_read_end(pool, h[i], sz[i], p);
	}
	zs_destroy_pool(pool);
	free(h);
	free(sz);
	return m;
}

struct objset {
	struct zs_pool *pool;
	unsigned long *h;
	unsigned *len;     /* stored length */
	unsigned *src;     /* real: index of the compressed page, or -1u for raw */
	size_t n;
	unsigned long spanning;
};

static void testmod_small(struct objset *o, unsigned page, unsigned chain, int policy,
			  struct tm_params tp, const unsigned char *fill)
{
	o->pool = make_pool(page, chain, policy);
	o->n = (size_t)((tp.max - 32) / tp.step + 1) * tp.count;
	o->h = xmalloc(o->n * sizeof(*o->h));
	o->len = xmalloc(o->n * sizeof(*o->len));
	o->src = NULL;
	size_t k = 0;
	for (unsigned s = 32; s <= tp.max; s += tp.step)
		for (unsigned c = 0; c < tp.count; c++) {
			o->len[k] = s;
			o->h[k] = xzs_malloc(o->pool, s);
			zs_obj_write(o->pool, o->h[k], fill, s);
			k++;
		}
}

/* ns per object of one pass: read_begin, touch first + last byte, read_end. */
static double pass_touch(struct objset *o, void *local)
{
	unsigned acc = 0;
	double t0 = bench_now_ns();
	for (size_t i = 0; i < o->n; i++) {
		const unsigned char *p = zs_obj_read_begin(o->pool, o->h[i], o->len[i], local);
		acc += p[0] + p[o->len[i] - 1];
		zs_obj_read_end(o->pool, o->h[i], o->len[i], (void *)p);
	}
	double t = bench_now_ns() - t0;
	sink += acc;
	return t / (double)o->n;
}

/* ---- real pages ---- */

struct corpus {
	unsigned page;
	size_t pages_in, same_filled;
	size_t n;             /* compressed pages kept */
	unsigned char *data;  /* compressed bytes, concatenated */
	size_t *off;
	unsigned *clen;
	unsigned char *raw;   /* the original pages (for raw stores and checks) */
};

static void corpus_load(struct corpus *c, unsigned page, size_t max_bytes, const char *pattern)
{
	memset(c, 0, sizeof(*c));
	c->page = page;
	size_t maxp = max_bytes / page;
	c->raw = xmalloc(maxp * page);
	c->data = xmalloc(maxp * (size_t)LZ4_compressBound((int)page));
	c->off = xmalloc(maxp * sizeof(*c->off));
	c->clen = xmalloc(maxp * sizeof(*c->clen));
	glob_t g;
	if (glob(pattern, 0, NULL, &g)) {
		fprintf(stderr, "no files match %s\n", pattern);
		exit(1);
	}
	size_t used = 0;
	/* Each file through the harness's loader (page padded, as before); one at a
	 * time, since how many files fill maxp kept pages is known only after
	 * same-filled pages are skipped. */
	for (size_t f = 0; f < g.gl_pathc && c->n < maxp; f++) {
		struct zs_pageset ps;
		struct stat st;
		if (stat(g.gl_pathv[f], &st) || !S_ISREG(st.st_mode) ||
		    zs_pageset_load(&ps, page, &g.gl_pathv[f], 1, 0))
			continue;
		for (size_t i = 0; i < ps.npages && c->n < maxp; i++) {
			const unsigned char *buf = ps.data + i * page;
			c->pages_in++;
			if (zs_zram_page_same_filled(buf, page, NULL)) {
				c->same_filled++;
				continue;
			}
			memcpy(c->raw + c->n * page, buf, page);
			int cl = LZ4_compress_default((const char *)buf, (char *)c->data + used,
						      (int)page, LZ4_compressBound((int)page));
			if (cl <= 0) {
				fprintf(stderr, "lz4 failed\n");
				exit(1);
			}
			c->off[c->n] = used;
			c->clen[c->n] = (unsigned)cl;
			used += (size_t)cl;
			c->n++;
		}
		zs_pageset_free(&ps);
	}
	globfree(&g);
}

static void corpus_free(struct corpus *c)
{
	free(c->raw);
	free(c->data);
	free(c->off);
	free(c->clen);
}

/* Store the corpus as zram would (raw when the compressed size reaches the huge class). */
static void real_store(struct objset *o, const struct corpus *c, unsigned chain, int policy,
		       void *local, unsigned long long *stored_bytes)
{
	o->pool = make_pool(c->page, chain, policy);
	size_t huge = zs_huge_class_size(o->pool);
	o->n = c->n;
	o->h = xmalloc(o->n * sizeof(*o->h));
	o->len = xmalloc(o->n * sizeof(*o->len));
	o->src = xmalloc(o->n * sizeof(*o->src));
	o->spanning = 0;
	*stored_bytes = 0;
	for (size_t i = 0; i < c->n; i++) {
		int raw = zs_zram_store_kind((long)c->clen[i], huge) == ZS_ZRAM_STORE_RAW;
		o->len[i] = raw ? c->page : c->clen[i];
		o->src[i] = raw ? ~0u : (unsigned)i;
		o->h[i] = xzs_malloc(o->pool, o->len[i]);
		zs_obj_write(o->pool, o->h[i], raw ? c->raw + i * c->page : c->data + c->off[i],
			     o->len[i]);
		*stored_bytes += o->len[i];
		void *p = zs_obj_read_begin(o->pool, o->h[i], o->len[i], local);
		o->spanning += p == local;
		zs_obj_read_end(o->pool, o->h[i], o->len[i], p);
	}
}

/* ns per page: read_begin + decompress (or copy a raw page) + read_end. */
static double pass_decompress(struct objset *o, const struct corpus *c, void *local,
			      unsigned char *out, int verify)
{
	double t0 = bench_now_ns();
	for (size_t i = 0; i < o->n; i++) {
		const char *p = zs_obj_read_begin(o->pool, o->h[i], o->len[i], local);
		if (o->src[i] == ~0u) {
			memcpy(out, p, c->page);
		} else if (LZ4_decompress_safe(p, (char *)out, (int)o->len[i], (int)c->page) !=
			   (int)c->page) {
			fprintf(stderr, "decompress failed\n");
			exit(1);
		}
		zs_obj_read_end(o->pool, o->h[i], o->len[i], (void *)p);
		if (verify && memcmp(out, c->raw + i * c->page, c->page)) {
			fprintf(stderr, "data mismatch after read\n");
			exit(1);
		}
	}
	double t = bench_now_ns() - t0;
	sink += out[0];
	return t / (double)o->n;
}

static void objset_free(struct objset *o)
{
	zs_destroy_pool(o->pool);
	free(o->h);
	free(o->len);
	free(o->src);
}

/* Time every config: `passes` passes per measurement, rounds rotating, median. */
static void time_configs(struct objset *os, const struct corpus *c, int rounds, void *local,
			 unsigned char *out, double *med)
{
	double ns[NCFG][64] = {{0}};
	/* Warm-up, and size a measurement to about 20 ms. */
	double one = 0;
	for (int k = 0; k < NCFG; k++) {
		double t = c ? pass_decompress(&os[k], c, local, out, 1) : pass_touch(&os[k], local);
		one = t * (double)os[k].n > one ? t * (double)os[k].n : one;
	}
	int passes = (int)(20e6 / (one > 1 ? one : 1));
	if (passes < 1)
		passes = 1;
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NCFG; k++) {
			int i = (k + r) % NCFG;
			double sum = 0;
			for (int p = 0; p < passes; p++)
				sum += c ? pass_decompress(&os[i], c, local, out, 0)
					 : pass_touch(&os[i], local);
			ns[i][r] = sum / passes;
		}
	for (int k = 0; k < NCFG; k++)
		med[k] = bench_median(ns[k], rounds);
}

/* One configuration's result, kept for --json's rows (emitted in run order). */
struct chain_row {
	const char *workload, *policy;
	unsigned page, chain;
	unsigned long pages, util_permille, spanning;
	double read_ns;
};
static struct chain_row rows[64];
static int nrows;

static void add_row(const char *wl, unsigned page, unsigned chain, const char *policy,
		    unsigned long pages, unsigned long util, unsigned long spanning, double read_ns)
{
	if (nrows < (int)(sizeof(rows) / sizeof(rows[0])))
		rows[nrows++] = (struct chain_row){ wl, policy, page, chain, pages, util, spanning,
						    read_ns };
}

int main(int argc, char **argv)
{
	int quick = 0, rounds = 0;
	size_t input_mib = 0;
	const char *pattern = "/usr/lib/x86_64-linux-gnu/*.so*";
	struct bench_json js = {0};
	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, rounds, js),
		BENCH_OPT_U64("--input-mib", input_mib, 1, 1 << 20, "M",
			      "MiB of real pages; default 32 quick, else 256"),
		BENCH_OPT_STR("--glob", pattern, "PATTERN", "the files to load the pages from"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	rounds = bench_rounds(rounds, quick, 3, 7);
	if (!input_mib)
		input_mib = quick ? 32 : 256;
	unsigned count4k = quick ? 167 : 1337;
	bench_quiet = js.enabled;
	void *local = xmalloc(65536);
	unsigned char *out = xmalloc(65536), *fill = xmalloc(65536);
	memset(fill, 0xa5, 65536);

	bench_print_machine();
	bench_say("bench_chain: class delta 16; ratios vs exhaustive at the same max chain; "
		  "timings median of %d interleaved rounds\n",
		  rounds);
	bench_json_begin(&js, "chain");
	bench_json_num(&js, "rounds", rounds);
	bench_json_num(&js, "testmod_count_4k", count4k);
	bench_json_num(&js, "real_input_mib", (double)input_mib);
	bench_json_str(&js, "real_glob", pattern);

	static const unsigned pages_sz[2] = {4096, 16384};
	for (int ps = 0; ps < 2; ps++) {
		unsigned page = pages_sz[ps];
		struct tm_params tp = tm_params(page, count4k);
		struct tm_params small = tm_params(page, 64);
		struct tm_metrics tm[NCFG];
		struct objset os[NCFG];
		double med[NCFG];
		char key[128];

		/* testmod: exact metrics at full size, then read cost on the small copy. */
		for (int k = 0; k < NCFG; k++)
			tm[k] = testmod_metrics(page, chains[k / 2], k % 2, tp, local);
		for (int k = 0; k < NCFG; k++)
			testmod_small(&os[k], page, chains[k / 2], k % 2, small, fill);
		time_configs(os, NULL, rounds, local, out, med);
		for (int k = 0; k < NCFG; k++)
			objset_free(&os[k]);

		bench_say("\n== testmod, %uK pages: sizes 32..%u step %u, %u each (%lu objects, %.1f "
			  "MiB); read cost on %u each ==\n",
			  page / 1024, tp.max, tp.step, tp.count, tm[0].objects,
			  (double)tm[0].bytes / 1048576.0, small.count);
		bench_say("%5s %-10s | %8s %5s %9s | %8s %8s | %8s %8s %8s\n", "chain", "policy",
			  "pages", "util", "pages x", "spanning", "span x", "memcpyMB", "ns/read",
			  "read x");
		for (int k = 0; k < NCFG; k++) {
			int base = k & ~1;
			unsigned long util =
				(unsigned long)(tm[k].bytes * 1000ULL / ((unsigned long long)tm[k].pages * page));
			bench_say("%5u %-10s | %8lu %3lu.%lu %8.4fx | %8lu %7.3fx | %8.1f %8.1f %7.3fx\n",
				  chains[k / 2], pol_name[k % 2], tm[k].pages, util / 10, util % 10,
				  (double)tm[k].pages / (double)tm[base].pages, tm[k].spanning,
				  tm[base].spanning ? (double)tm[k].spanning / (double)tm[base].spanning
						    : 0.0,
				  (double)tm[k].memcpy_bytes / 1048576.0, med[k], med[k] / med[base]);
			const char *pre = "testmod";
			snprintf(key, sizeof(key), "%s_p%u_c%u_%s_pages", pre, page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, (double)tm[k].pages);
			snprintf(key, sizeof(key), "%s_p%u_c%u_%s_util_permille", pre, page,
				 chains[k / 2], pol_name[k % 2]);
			bench_json_num(&js, key, (double)util);
			snprintf(key, sizeof(key), "%s_p%u_c%u_%s_spanning", pre, page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, (double)tm[k].spanning);
			snprintf(key, sizeof(key), "%s_p%u_c%u_%s_memcpy_bytes", pre, page,
				 chains[k / 2], pol_name[k % 2]);
			bench_json_num(&js, key, (double)tm[k].memcpy_bytes);
			snprintf(key, sizeof(key), "%s_p%u_c%u_%s_read_ns", pre, page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, med[k]);
			add_row("testmod", page, chains[k / 2], pol_name[k % 2], tm[k].pages, util,
				tm[k].spanning, med[k]);
		}
		snprintf(key, sizeof(key), "testmod_p%u_objects", page);
		bench_json_num(&js, key, (double)tm[0].objects);

		/* real pages */
		struct corpus c;
		corpus_load(&c, page, input_mib << 20, pattern);
		unsigned long long stored[NCFG];
		for (int k = 0; k < NCFG; k++)
			real_store(&os[k], &c, chains[k / 2], k % 2, local, &stored[k]);
		time_configs(os, &c, rounds, local, out, med);
		unsigned long long clen_sum = 0;
		for (size_t i = 0; i < c.n; i++)
			clen_sum += c.clen[i];
		bench_say("\n== real pages, %uK: %zu input pages (%zu same-filled, skipped), %zu "
			  "stored, lz4 ratio %.2f ==\n",
			  page / 1024, c.pages_in, c.same_filled, c.n,
			  (double)c.n * page / (double)(clen_sum ? clen_sum : 1));
		bench_say("%5s %-10s | %8s %5s %9s | %8s %8s | %12s %8s\n", "chain", "policy",
			  "pages", "util", "pages x", "spanning", "span x", "ns/page read",
			  "read x");
		for (int k = 0; k < NCFG; k++) {
			int base = k & ~1;
			unsigned long pages = zs_get_total_pages(os[k].pool);
			unsigned long bpages = zs_get_total_pages(os[base].pool);
			unsigned long util =
				(unsigned long)(stored[k] * 1000ULL / ((unsigned long long)pages * page));
			bench_say("%5u %-10s | %8lu %3lu.%lu %8.4fx | %8lu %7.3fx | %12.1f %7.3fx\n",
				  chains[k / 2], pol_name[k % 2], pages, util / 10, util % 10,
				  (double)pages / (double)bpages, os[k].spanning,
				  os[base].spanning ? (double)os[k].spanning / (double)os[base].spanning
						    : 0.0,
				  med[k], med[k] / med[base]);
			snprintf(key, sizeof(key), "real_p%u_c%u_%s_pages", page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, (double)pages);
			snprintf(key, sizeof(key), "real_p%u_c%u_%s_util_permille", page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, (double)util);
			snprintf(key, sizeof(key), "real_p%u_c%u_%s_spanning", page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, (double)os[k].spanning);
			snprintf(key, sizeof(key), "real_p%u_c%u_%s_read_ns", page, chains[k / 2],
				 pol_name[k % 2]);
			bench_json_num(&js, key, med[k]);
			add_row("real", page, chains[k / 2], pol_name[k % 2], pages, util,
				os[k].spanning, med[k]);
		}
		snprintf(key, sizeof(key), "real_p%u_input_pages", page);
		bench_json_num(&js, key, (double)c.pages_in);
		snprintf(key, sizeof(key), "real_p%u_stored_pages", page);
		bench_json_num(&js, key, (double)c.n);
		for (int k = 0; k < NCFG; k++)
			objset_free(&os[k]);
		corpus_free(&c);
	}
	bench_say("\npages x / span x / read x: ratio to exhaustive at the same chain (heuristic "
		  "rows; <1 = fewer/faster).\nseed 002 (4K, chain 10, testmod): pages 175111 -> "
		  "175920 (+0.5%%), spanning 110377 -> 103256 (-6.5%%), memcpy -4.6%%.\n");
	free(local);
	free(out);
	free(fill);
	struct json *w = bench_json_w(&js);
	if (w) {
		json_karr(w, "rows");
		for (int r = 0; r < nrows; r++) {
			json_obj(w);
			json_kstr(w, "workload", rows[r].workload);
			json_kuint(w, "page_size", rows[r].page);
			json_kuint(w, "chain", rows[r].chain);
			json_kstr(w, "policy", rows[r].policy);
			json_kuint(w, "pages", rows[r].pages);
			json_kuint(w, "util_permille", rows[r].util_permille);
			json_kuint(w, "spanning", rows[r].spanning);
			json_knum(w, "read_ns", rows[r].read_ns);
			json_obj_end(w);
		}
		json_arr_end(w);
	}
	bench_json_end(&js);
	return 0;
}
