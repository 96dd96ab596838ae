/*
 * `zs zram --matrix`: "which algorithm on my data".  Runs the loaded pages
 * through a fresh store for each compressor x level (x the dictionary given
 * with --dict) at 4 KiB and 64 KiB groups, and prints one row each: ratio
 * against pool memory (mem_used_total, what the memory costs) and against
 * compressed bytes, write/read MB/s and CPU seconds, read-back check.  Text
 * table or a JSON array that tools/report/report.py can read.  With
 * --filter all, then one row per filter (zs/compress.h: shuffle, delta,
 * delta+shuffle at 2, 4 and 8 bytes) with zstd:3; with --filter SPEC, that
 * filter with every compressor.  Without --filter the table is what it was
 * (the report's run and its cost are unchanged).  Public headers only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cmds.h"
#include "json.h"
#include "util.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/harness.h"
#include "zs/pages.h"

static double cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

struct row {
	char comp[40];
	const char *filter;
	unsigned group;
	uint64_t orig, compr, mem;
	double w_s, r_s, w_cpu, r_cpu;
	double rand_read_us, rand_write_us; /* one 4 KiB slot at a time, random slots */
	uint64_t mismatches;
	int rc;
};

static void run_one(const struct zs_pageset *ps, const char *comp, const char *dict,
		    const char *filter, unsigned group, unsigned char *out, struct row *r)
{
	struct zs_zram_config cfg;
	struct zs_zram_stats st;
	struct zs_zram *z;
	size_t psz = ps->page_size, chunk = group;

	memset(r, 0, sizeof(*r));
	r->group = group;
	r->filter = filter ? filter : "none";
	zs_zram_config_init(&cfg);
	cfg.page_size = psz;
	cfg.disksize = (uint64_t)ps->npages * psz;
	cfg.comp = comp;
	cfg.comp_dict_path = dict;
	cfg.group_pages = group > 1 ? group : 0;
	cfg.filter = filter;
	r->rc = zs_zram_create(&cfg, &z, NULL, 0);
	snprintf(r->comp, sizeof(r->comp), "%s", r->rc ? comp : zs_zram_comp_name(z));
	if (r->rc)
		return;
	double t = tool_now(), c = cpu();
	for (size_t i = 0; i < ps->npages && !r->rc; i += chunk) {
		size_t n = ps->npages - i < chunk ? ps->npages - i : chunk;
		r->rc = zs_zram_write_range(z, i, n, ps->data + i * psz);
	}
	r->w_s = tool_now() - t;
	r->w_cpu = cpu() - c;
	zs_zram_get_stats(z, &st, sizeof(st));
	t = tool_now();
	c = cpu();
	for (size_t i = 0; i < ps->npages && !r->rc; i += chunk) {
		size_t n = ps->npages - i < chunk ? ps->npages - i : chunk;
		r->rc = zs_zram_read_range(z, i, n, out + i * psz, n * psz);
	}
	r->r_s = tool_now() - t;
	r->r_cpu = cpu() - c;
	for (size_t i = 0; i < ps->npages; i++)
		r->mismatches += memcmp(out + i * psz, ps->data + i * psz, psz) != 0;
	/*
	 * Random single-slot access, after the check: with groups a read
	 * decompresses the whole group and a write is a read-modify-write.
	 */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t nr = ps->npages < 20000 ? ps->npages : 20000, nw = nr / 10 ? nr / 10 : 1;
	t = tool_now();
	for (size_t k = 0; k < nr && !r->rc; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		size_t i = (size_t)(x >> 33) % ps->npages;
		r->rc = zs_zram_read(z, i, out + i * psz, psz);
	}
	r->rand_read_us = (tool_now() - t) * 1e6 / (double)nr;
	t = tool_now();
	for (size_t k = 0; k < nw && !r->rc; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		size_t i = (size_t)(x >> 33) % ps->npages;
		r->rc = zs_zram_write(z, i, ps->data + i * psz);
	}
	r->rand_write_us = (tool_now() - t) * 1e6 / (double)nw;
	r->orig = st.orig_data_size;
	r->compr = st.compr_data_size;
	r->mem = st.mem_used_total;
	zs_zram_destroy(z);
}

static double div0(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static void print_row(struct json *js, int json, const struct zs_pageset *ps, uint64_t bytes,
		      const struct row *r)
{
	if (json) {
		json_obj(js);
		json_kstr(js, "comp", r->comp);
		json_kstr(js, "filter", r->filter);
		json_kuint(js, "group_bytes", (size_t)r->group * ps->page_size);
		json_kint(js, "rc", r->rc);
		json_kuint(js, "orig_data_size", r->orig);
		json_kuint(js, "compr_data_size", r->compr);
		json_kuint(js, "mem_used_total", r->mem);
		json_kfixed(js, "ratio_mem", div0((double)r->orig, (double)r->mem), 4);
		json_kfixed(js, "ratio_compr", div0((double)r->orig, (double)r->compr), 4);
		json_kfixed(js, "write_MBps", div0((double)bytes / 1e6, r->w_s), 1);
		json_kfixed(js, "read_MBps", div0((double)bytes / 1e6, r->r_s), 1);
		json_kfixed(js, "write_cpu_s", r->w_cpu, 4);
		json_kfixed(js, "read_cpu_s", r->r_cpu, 4);
		json_kfixed(js, "rand_read_4k_us", r->rand_read_us, 3);
		json_kfixed(js, "rand_write_4k_us", r->rand_write_us, 3);
		json_kuint(js, "mismatches", r->mismatches);
		json_obj_end(js);
	} else {
		/* The filter is the last column: the columns before it keep their places. */
		printf("%-16s %4zuK %10.3f %10.3f %12llu %12llu %9.1f %9.1f %9.2f %9.2f "
		       "%8.2f %8.2f %-8s %s\n",
		       r->comp, (size_t)r->group * ps->page_size / 1024,
		       div0((double)r->orig, (double)r->mem), div0((double)r->orig, (double)r->compr),
		       (unsigned long long)r->compr, (unsigned long long)r->mem,
		       div0((double)bytes / 1e6, r->w_s), div0((double)bytes / 1e6, r->r_s), r->w_cpu,
		       r->r_cpu, r->rand_read_us, r->rand_write_us,
		       r->rc ? "error" : r->mismatches ? "MISMATCH" : "ok", r->filter);
	}
	fflush(stdout);
}

int zram_matrix(const struct zs_pageset *ps, const char *dict, const char *filter, int json)
{
	static const char *const comps[] = { "lz4", "lz4hc:9", "zstd:1", "zstd:3", "zstd:9",
					     "lzo" };
	static const char *const filters[] = { "shuffle:2", "shuffle:4", "shuffle:8",
					       "delta:2", "delta:4", "delta:8",
					       "delta+shuffle:2", "delta+shuffle:4",
					       "delta+shuffle:8" };
	static const unsigned groups[] = { 1, 16 };
	uint64_t bytes = (uint64_t)ps->npages * ps->page_size;
	unsigned char *out = malloc(bytes);
	int bad = 0;
	struct json js;

	if (!out) {
		fprintf(stderr, "zs zram --matrix: out of memory\n");
		return 2;
	}
	if (json) {
		json_init(&js, stdout, 2);
		json_obj(&js);
		json_kuint(&js, "pages", ps->npages);
		json_kuint(&js, "page_size", ps->page_size);
		json_kuint(&js, "files", ps->files);
		json_karr(&js, "rows");
	} else
		printf("%-16s %5s %10s %10s %12s %12s %9s %9s %9s %9s %8s %8s %-8s %s\n", "comp",
		       "group", "orig/mem", "orig/compr", "compr_bytes", "mem_bytes", "write_MBs",
		       "read_MBs", "write_cpu", "read_cpu", "rd4k_us", "wr4k_us", "check", "filter");
	for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++)
		for (int d = 0; d < (dict ? 2 : 1); d++) {
			/* Only zstd and lz4 (not lz4hc) take a dictionary. */
			if (d && strncmp(comps[c], "zstd", 4) && strcmp(comps[c], "lz4"))
				continue;
			for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
				struct row r;

				if (!zs_page_size_valid(groups[g] * ps->page_size))
					continue;
				run_one(ps, comps[c], d ? dict : NULL, NULL, groups[g], out, &r);
				bad |= r.rc || r.mismatches;
				print_row(&js, json, ps, bytes, &r);
			}
		}
	/* The filter rows: "all": each filter with zstd:3; a spec: it with every compressor. */
	int all = filter && !strcmp(filter, "all");
	size_t nf = !filter ? 0 : all ? sizeof(filters) / sizeof(filters[0]) : 1;
	for (size_t f = 0; f < nf; f++)
		for (size_t c = 0; c < sizeof(comps) / sizeof(comps[0]); c++) {
			if (all && strcmp(comps[c], "zstd:3"))
				continue;
			for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
				struct row r;

				if (!zs_page_size_valid(groups[g] * ps->page_size))
					continue;
				run_one(ps, comps[c], NULL, all ? filters[f] : filter, groups[g],
					out, &r);
				bad |= r.rc || r.mismatches;
				print_row(&js, json, ps, bytes, &r);
			}
		}
	if (json) {
		json_arr_end(&js);
		json_obj_end(&js);
		json_done(&js);
	}
	free(out);
	return bad ? 1 : 0;
}
