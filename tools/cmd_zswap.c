/*
 * `zs zswap`: one workload through libzs's zswap front end (zs/zswap.h) on
 * each backend (zsmalloc, zblock, ...), side by side with the kernel's
 * counter names: stored_pages, pool_total_size, Zswap/Zswapped and their
 * ratio, store and load time per page, pool memory after a fill, after a
 * seeded store/load/invalidate churn (pool limit and writeback included) and
 * after compaction.  Two inputs:
 *   FILE|DIR...   real pages: filled, churned, drained and checked byte for
 *                 byte; --vs-kernel puts the same pages through the running
 *                 kernel's zswap (MADV_PAGEOUT of single pages, page-cluster 0,
 *                 touches) for the kernel's row;
 *   --sizes FILE  a capture of scripts/zswap_capture.sh (the exact lzo sizes
 *                 of what the kernel's zswap held for a real build, with the
 *                 kernel's counters): the sizes are stored size-only
 *                 (zs_zswap_store_compressed) fresh, and replayed under a churn
 *                 driven by the capture's samples (as many stores, loads and
 *                 frees per interval as the kernel counted) that ends with the
 *                 captured entries live, so the seed-003 table (docs/zswap.md)
 *                 has the kernel's zsmalloc, libzs's zsmalloc and zblock on the
 *                 same objects.
 *
 * This file owns the options and the two modes' order of steps; the parts
 * are zswap_capture.c (reading a capture), zswap_plan.c (the operations),
 * zswap_workload.c (running them on libzs), zswap_kernel.c (--vs-kernel, the
 * only part that changes system settings, under the same flock as every user
 * of the kernel's zswap in this project) and zswap_print.c (text and JSON),
 * joined by zswap_cmd.h.  Public headers only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/harness.h"
#include "zswap_cmd.h"

#define ZSWAP_OPTS (OPT_POLICY | OPT_FREE_MODE | OPT_DEFERRED | OPT_CLASS_SHARDS | OPT_FIT_ZSPAGES | \
		    OPT_PROFILE)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs zswap [options] FILE|DIR...\n"
		"       zs zswap [options] --sizes CAPTURE\n"
		"Runs a workload through libzs's zswap (zs/zswap.h) on each backend and prints the\n"
		"kernel's counters side by side: a fill, a seeded store/load/invalidate churn, a\n"
		"compaction, a drain (docs/zswap.md).\n"
		"  --backends LIST    comma-separated backend kinds (default zsmalloc,zblock)\n"
		"  --comp NAME        compressor (default lzo, the kernel's)\n"
		"  --max SIZE         load at most SIZE bytes of pages, 4K..1T (default 64M)\n"
		"  --max-pool-percent P  the pool limit, 0..100 (default 20; --sizes: the capture's)\n"
		"  --total-ram SIZE   RAM the limit is a share of (default: this machine's;\n"
		"                     --sizes: the capture's totalram_pages)\n"
		"  --backing FILE     swap device for writeback (existing file; without it a\n"
		"                     store rejected by the limit is only counted)\n"
		"  --shrinker         with --backing: shrinker_enabled, and the shrinker called at\n"
		"                     every churn interval for 1/8 of its own count (pressure)\n"
		"  --ops N            churn operations (default 2 x pages; --sizes with samples:\n"
		"                     the capture's own counts)\n"
		"  --seed N           churn seed (default 1)\n"
		"  --sizes FILE       a capture of scripts/zswap_capture.sh (plain or .xz)\n"
		"  --vs-kernel        also the kernel's zswap on the same pages (root; lzo)\n"
		"  --json             one row per backend (and the kernel's), the kernel's names\n"
		"  --quiet            no notes on stderr\n");
	opt_pool_help(f, ZSWAP_OPTS);
}

/* ---- Parsing ---- */

/* --backends LIST: kept whole here, split and checked after the flags. */
static int set_backends(const char *cmd, const char *opt, const char *arg, void *blist)
{
	if (strlen(arg) >= 256) {
		fprintf(stderr, "zs %s: %s: too long\n", cmd, opt);
		return 2;
	}
	snprintf(blist, 256, "%s", arg);
	return 0;
}

/* The pool option --backend would pick one: this command runs a list. */
static int refuse_backend(const char *cmd, const char *opt, const char *arg, void *unused)
{
	(void)opt;
	(void)arg;
	(void)unused;
	fprintf(stderr, "zs %s: use --backends LIST\n", cmd);
	return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static char blist[256];
	static const struct opt_hook backends = { set_backends, blist },
				     no_backend = { refuse_backend, NULL };
	uint64_t max_pool_percent = 20;

	memset(o, 0, sizeof(*o));
	o->comp = "lzo";
	o->max_bytes = 64ull << 20;
	o->seed = 1;
	o->ops = UINT64_MAX;
	pool_opts_init(&o->po);
	snprintf(blist, sizeof(blist), "zsmalloc,zblock");
	const struct opt_flag flags[] = {
		{ "backends", 0, OPTK_FN, (void *)&backends, 0, 0, NULL },
		{ "backend", 0, OPTK_FN, (void *)&no_backend, 0, 0, NULL },
		{ "comp", 0, OPTK_STR, &o->comp, 0, 0, NULL },
		{ "max", 0, OPTK_BYTES, &o->max_bytes, 4096, 1ull << 40, NULL },
		{ "max-pool-percent", 0, OPTK_U64, &max_pool_percent, 0, 100, NULL },
		{ "total-ram", 0, OPTK_BYTES, &o->total_ram, 4096, 1ull << 60, NULL },
		{ "backing", 0, OPTK_STR, &o->backing, 0, 0, NULL },
		{ "ops", 0, OPTK_U64, &o->ops, 0, 1ull << 29, NULL },
		{ "seed", 0, OPTK_U64, &o->seed, 0, UINT64_MAX, NULL },
		{ "sizes", 0, OPTK_STR, &o->sizes, 0, 0, NULL },
		{ "vs-kernel", 0, OPTK_FLAG, &o->vs_kernel, 0, 0, NULL },
		{ "shrinker", 0, OPTK_FLAG, &o->shrinker, 0, 0, NULL },
		{ "json", 0, OPTK_FLAG, &o->json, 0, 0, NULL },
		{ "quiet", 0, OPTK_FLAG, &o->quiet, 0, 0, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	unsigned char given[sizeof(flags) / sizeof(flags[0])] = { 0 };
	int rc = opt_parse("zswap", argc, argv, flags, ZSWAP_OPTS, &o->po, usage, given);
	if (rc)
		return rc;
	o->max_pool_percent = (unsigned)max_pool_percent;
	o->max_pool_set = opt_given(flags, given, &max_pool_percent);
	for (char *save = NULL, *t = strtok_r(blist, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const char *const *kinds = zs_backend_kinds();
		int known = 0;
		for (size_t i = 0; kinds[i]; i++)
			known |= !strcmp(kinds[i], t);
		if (!known) {
			fprintf(stderr, "zs zswap: --backends: unknown backend '%s' (", t);
			for (size_t i = 0; kinds[i]; i++)
				fprintf(stderr, "%s%s", i ? ", " : "", kinds[i]);
			fprintf(stderr, ")\n");
			return 2;
		}
		if (o->nbackends == MAX_BACKENDS) {
			fprintf(stderr, "zs zswap: --backends: at most %d\n", MAX_BACKENDS);
			return 2;
		}
		o->backends[o->nbackends++] = t;
	}
	if (!o->nbackends) {
		fprintf(stderr, "zs zswap: --backends: empty\n");
		return 2;
	}
	if ((rc = zs_comp_check(o->comp))) {
		fprintf(stderr, "zs zswap: compressor '%s': %s\n", o->comp, strerror(-rc));
		return 2;
	}
	if (o->sizes && optind < argc) {
		fprintf(stderr, "zs zswap: --sizes takes no FILE or DIR\n");
		return 2;
	}
	if (!o->sizes && optind >= argc) {
		fprintf(stderr, "zs zswap: no FILE or DIR given (or --sizes CAPTURE)\n");
		usage(stderr);
		return 2;
	}
	if (o->vs_kernel && o->sizes) {
		fprintf(stderr, "zs zswap: --vs-kernel needs pages (FILE|DIR), not --sizes: the "
				"capture already has the kernel's counters\n");
		return 2;
	}
	if (o->vs_kernel && strcmp(o->comp, "lzo")) {
		fprintf(stderr, "zs zswap: --vs-kernel compares lzo (this kernel's zswap has lzo "
				"and deflate only)\n");
		return 2;
	}
	if (o->sizes && strcmp(o->comp, "lzo")) {
		fprintf(stderr, "zs zswap: --sizes: a capture holds lzo sizes; --comp must be lzo\n");
		return 2;
	}
	/* The library's rule (one home: common/fileio.c), asked once before the pages are
	 * loaded and the header printed, not per backend after them. */
	if (o->backing) {
		struct zs_zswap_config cfg;
		struct zs_zswap *z;
		char err[256];
		int rc;

		zs_zswap_config_init(&cfg);
		cfg.backing_path = o->backing;
		rc = zs_zswap_create(&cfg, &z, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "zs zswap: --backing %s: %s\n", o->backing,
				rc == -EINVAL ? "not a regular file or a block device"
				: rc == -EACCES ? "read-only (no write permission bit)" : strerror(-rc));
			return 2;
		}
		zs_zswap_destroy(z);
	}
	if (o->shrinker && !o->backing) {
		fprintf(stderr, "zs zswap: --shrinker needs --backing FILE (it writes back)\n");
		return 2;
	}
	o->quiet |= o->json;
	return 0;
}

/* ---- The two modes ---- */

static int mode_pages(const struct opts *o, char **paths, int npaths)
{
	struct zs_pageset ps;
	struct plan p;
	struct run *runs = calloc((size_t)o->nbackends, sizeof(*runs));
	struct kside k;
	int have_k = 0, ret = 0;

	if (!runs)
		return 2;
	for (int i = 0; i < npaths; i++)
		if (opt_path("zswap", "FILE", paths[i], 1)) {
			free(runs);
			return 2;
		}
	int lrc = zs_pageset_load(&ps, 4096, paths, npaths, o->max_bytes);
	if (lrc || !ps.npages) {
		fprintf(stderr, "zs zswap: no pages loaded (%s)\n", lrc ? strerror(-lrc) : "empty");
		if (!lrc)
			zs_pageset_free(&ps);
		free(runs);
		return 2;
	}
	uint64_t ops = o->ops == UINT64_MAX ? 2 * (uint64_t)ps.npages : o->ops;
	if (plan_synthetic(&p, ps.npages, ops, o->seed)) {
		fprintf(stderr, "zs zswap: out of memory\n");
		zs_pageset_free(&ps);
		free(runs);
		return 2;
	}
	struct input in = { &ps, NULL, ps.npages };
	for (int b = 0; b < o->nbackends; b++) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: %s...\n", o->backends[b]);
		if (run_plan(o, o->backends[b], &p, &in, o->total_ram, o->max_pool_percent, 1,
			     &runs[b])) {
			fprintf(stderr, "zs zswap: backend %s: %s\n", o->backends[b], runs[b].err);
			ret = 2;
		} else if (runs[b].mismatches) {
			ret = 1;
		}
	}
	if (o->vs_kernel) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: the kernel's zswap (lzo), one page at a time...\n");
		if (kernel_run(&ps, o->quiet, &k)) {
			fprintf(stderr, "zs zswap: --vs-kernel: %s\n", k.msg);
			ret = 2;
		} else {
			have_k = 1;
			if (k.mismatches)
				ret = 1;
		}
	}
	print_pages(o, &ps, &p, runs, have_k ? &k : NULL);
	plan_free(&p);
	zs_pageset_free(&ps);
	free(runs);
	return ret;
}

static int mode_sizes(const struct opts *o)
{
	struct capture c;
	struct plan fresh, churn;
	struct run *fr = calloc((size_t)o->nbackends, sizeof(*fr));
	struct run *cr = calloc((size_t)o->nbackends, sizeof(*cr));
	int ret = 0, sampled;

	if (!fr || !cr || capture_read(o->sizes, &c)) {
		free(fr);
		free(cr);
		return 2;
	}
	uint64_t tr_pages = strtoull(cap_str(&c, "totalram_pages"), NULL, 10);
	uint64_t total_ram = o->total_ram ? o->total_ram : tr_pages * 4096;
	unsigned max_pool = o->max_pool_percent;
	if (!o->max_pool_set && strcmp(cap_str(&c, "max_pool_percent"), "?"))
		max_pool = (unsigned)strtoul(cap_str(&c, "max_pool_percent"), NULL, 10);
	/* Fresh: every captured size once, in swap-offset order. */
	memset(&fresh, 0, sizeof(fresh));
	sampled = c.ns >= 2 && o->ops == UINT64_MAX;
	int prc = plan_synthetic(&fresh, c.n, 0, o->seed);
	if (!prc)
		prc = sampled ? plan_samples(&churn, &c, o->seed)
			      : plan_synthetic(&churn, c.n, o->ops == UINT64_MAX ? 2 * c.n : o->ops,
					       o->seed);
	if (prc) {
		fprintf(stderr, "zs zswap: out of memory\n");
		capture_free(&c);
		free(fr);
		free(cr);
		return 2;
	}
	struct input in = { NULL, c.sizes, c.n };
	for (int b = 0; b < o->nbackends; b++) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: %s: fresh fill, then the churn (%zu ops)...\n",
				o->backends[b], churn.nops + churn.nfill);
		if (run_plan(o, o->backends[b], &fresh, &in, total_ram, max_pool, 1, &fr[b]) ||
		    run_plan(o, o->backends[b], &churn, &in, total_ram, max_pool, 0, &cr[b])) {
			fprintf(stderr, "zs zswap: backend %s: %s%s\n", o->backends[b], fr[b].err,
				cr[b].err);
			ret = 2;
		}
	}
	print_sizes(o, &c, &churn, fr, cr, sampled, total_ram, max_pool);
	plan_free(&fresh);
	plan_free(&churn);
	capture_free(&c);
	free(fr);
	free(cr);
	return ret;
}

int cmd_zswap(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	return o.sizes ? mode_sizes(&o) : mode_pages(&o, argv + optind, argc - optind);
}
