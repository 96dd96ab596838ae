/*
 * `zs region`: put files' pages into a zs_region (compressed memory through
 * userfaultfd), page them out, touch them back sequentially and at random,
 * and print what it cost: RSS before/after, mm_stat of the store, fault
 * counts, handler service-time percentiles and a byte-for-byte check.  The
 * side-by-side comparison with the kernel's zram swap is bench/bench_region.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cmds.h"
#include "util.h"
#include "opts.h"
#include "zs/compress.h"
#include "zs/region.h"
#include "zs/harness.h"

static size_t rss_pages(void *base, size_t npages)
{
	unsigned char *vec = malloc(npages);
	size_t n = 0;
	if (vec && !mincore(base, npages * 4096, vec))
		for (size_t i = 0; i < npages; i++)
			n += vec[i] & 1;
	free(vec);
	return n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: zs region [options] [PATH...]\n"
		   "  PATHs (at most 64) default to /usr/lib; --mib M (1..1048576, default 64) MiB\n"
		   "  of their pages are used.\n"
		   "  --comp NAME        lz4 (default), lz4hc[:N], zstd[:N], lzo\n"
		   "  --fault-around N   pages installed per sequential fault, 0..256 (default 32)\n"
		   "  --handlers N       fault-handler threads, 1..64 (default 1)\n");
	opt_pool_help(f, OPT_ALL & ~OPT_PAGE_SIZE);
	fprintf(f, "Exit status: 0 every page read back intact, 1 a page differs, 2 bad usage or\n"
		   "no region (no pages, or userfaultfd not permitted).\n");
}

struct region_opts {
	struct zs_region_config cfg;
	size_t mib;
	char *paths[64];
	int npaths;
};

/* Options -> o.  0, 1 after --help, or 2 after a message. */
static int parse(int argc, char **argv, struct region_opts *o)
{
	struct pool_opts po;
	uint64_t mib = 64, fault_around = 32, handlers;

	memset(o, 0, sizeof(*o));
	zs_region_config_init(&o->cfg);
	handlers = o->cfg.handler_threads;
	const struct opt_flag flags[] = {
		{ "mib", 0, OPTK_U64, &mib, 1, 1 << 20, NULL },
		{ "comp", 0, OPTK_STR, &o->cfg.store.comp, 0, 0, NULL },
		{ "fault-around", 0, OPTK_U64, &fault_around, 0, 256, NULL },
		{ "handlers", 0, OPTK_U64, &handlers, 1, 64, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	pool_opts_init(&po);
	int prc = opt_parse("region", argc, argv, flags, OPT_ALL & ~OPT_PAGE_SIZE, &po, usage, NULL);
	if (prc)
		return prc;
	o->mib = (size_t)mib;
	o->cfg.fault_around = (unsigned)fault_around;
	o->cfg.handler_threads = (unsigned)handlers;
	/* Checked here, as zs zram does, so a misspelt name is named (not "store config
	 * rejected") and before the pages are loaded. */
	if (o->cfg.store.comp) {
		int rc = zs_comp_check(o->cfg.store.comp);

		if (rc) {
			fprintf(stderr, "zs region: compressor '%s': %s\n", o->cfg.store.comp,
				strerror(-rc));
			return 2;
		}
	}
	o->cfg.store.backend.zs = po.cfg;
	o->cfg.store.backend.kind = po.backend;
	o->cfg.store.deferred_free = po.deferred;
	for (int i = optind; i < argc; i++) {
		if (opt_path("region", "PATH", argv[i], 1))
			return 2;
		if (o->npaths == 64) { /* the rest used to be dropped without a word */
			fprintf(stderr, "zs region: at most 64 PATHs (give their directory)\n");
			return 2;
		}
		o->paths[o->npaths++] = argv[i];
	}
	if (!o->npaths)
		o->paths[o->npaths++] = "/usr/lib";
	return 0;
}

/* The pages and a region of their size.  0, or 2 after a message (nothing left to free). */
static int setup(struct region_opts *o, struct zs_pageset *ps, struct zs_region **r)
{
	int rc = zs_pageset_load(ps, 4096, o->paths, o->npaths, (uint64_t)o->mib << 20);
	if (rc || !ps->npages) {
		fprintf(stderr, "zs region: no pages loaded from the paths given\n");
		if (!rc)
			zs_pageset_free(ps);
		return 2;
	}
	o->cfg.size = ps->npages * 4096;
	char err[512];
	rc = zs_region_create(&o->cfg, r, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "zs region: %s\n", err[0] ? err : strerror(-rc));
		zs_pageset_free(ps);
		return 2;
	}
	return 0;
}

/*
 * The region's life as a swap device sees it, each phase reported as it
 * ends: fill, pageout, sequential touch, pageout, random touch, release;
 * every touched page compared with its source.  Returns the pages that differ.
 */
static size_t run(const struct zs_region_config *cfg, struct zs_region *r,
		  const struct zs_pageset *ps)
{
	size_t n = ps->npages, bytes = n * 4096;
	unsigned char *b = zs_region_addr(r);
	memcpy(b, ps->data, bytes);
	printf("region: %zu pages (%.1f MiB) from %zu files, %s on %s, fault-around %u\n", n,
	       (double)bytes / 1048576.0, ps->files, zs_zram_comp_name(zs_region_store(r)),
	       cfg->store.backend.kind ? cfg->store.backend.kind : "zsmalloc", cfg->fault_around);

	size_t rss0 = rss_pages(b, n);
	double t0 = tool_now();
	long out = zs_region_pageout(r, b, bytes);
	double t1 = tool_now();
	size_t rss1 = rss_pages(b, n);
	struct zs_region_stats st;
	zs_region_get_stats(r, &st, sizeof(st));
	char mm[256];
	zs_zram_format_mm_stat(&st.store, mm, sizeof(mm));
	printf("pageout: %ld pages in %.1f ms (%.0f MB/s); resident %zu -> %zu pages\n", out,
	       (t1 - t0) * 1e3, (double)bytes / 1e6 / (t1 - t0), rss0, rss1);
	printf("mm_stat: %s", mm);
	printf("(filling the region took %llu faults)\n", (unsigned long long)st.faults);

	/* sequential touch, then pageout again and random touch; verify as we go */
	size_t bad = 0;
	uint64_t fill_faults = st.faults, hist_fill[ZS_REGION_LAT_BUCKETS];
	memcpy(hist_fill, st.lat_hist, sizeof(hist_fill));
	t0 = tool_now();
	for (size_t i = 0; i < n; i++)
		bad += memcmp(b + i * 4096, ps->data + i * 4096, 4096) != 0;
	t1 = tool_now();
	zs_region_get_stats(r, &st, sizeof(st));
	for (int i = 0; i < ZS_REGION_LAT_BUCKETS; i++)
		hist_fill[i] = st.lat_hist[i] - hist_fill[i];
	printf("sequential touch: %.0f MB/s, %llu faults for %zu pages, handler p50 %.1f us "
	       "p99 %.1f us\n", (double)bytes / 1e6 / (t1 - t0),
	       (unsigned long long)(st.faults - fill_faults), n,
	       zs_region_lat_percentile(hist_fill, 50) / 1e3,
	       zs_region_lat_percentile(hist_fill, 99) / 1e3);
	uint64_t faults0 = st.faults, hist0[ZS_REGION_LAT_BUCKETS];
	memcpy(hist0, st.lat_hist, sizeof(hist0));
	zs_region_pageout(r, b, bytes);
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	t0 = tool_now();
	for (size_t k = 0; k < n; k++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t i = (size_t)(seed >> 33) % n;
		bad += memcmp(b + i * 4096, ps->data + i * 4096, 4096) != 0;
	}
	t1 = tool_now();
	zs_region_get_stats(r, &st, sizeof(st));
	for (int i = 0; i < ZS_REGION_LAT_BUCKETS; i++)
		hist0[i] = st.lat_hist[i] - hist0[i];
	printf("random touch: %.1f us per touch, %llu faults, handler p50 %.1f us p99 %.1f us\n",
	       (t1 - t0) * 1e6 / (double)n, (unsigned long long)(st.faults - faults0),
	       zs_region_lat_percentile(hist0, 50) / 1e3, zs_region_lat_percentile(hist0, 99) / 1e3);
	t0 = tool_now();
	zs_region_release(r, b, bytes);
	t1 = tool_now();
	zs_zram_flush(zs_region_store(r));
	zs_region_get_stats(r, &st, sizeof(st));
	printf("release: %.2f ms; store pages now %llu\n", (t1 - t0) * 1e3,
	       (unsigned long long)st.store.pages_stored);
	printf("check: %zu pages differ\n", bad);
	return bad;
}

int cmd_region(int argc, char **argv)
{
	struct region_opts o;
	struct zs_pageset ps;
	struct zs_region *r;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (setup(&o, &ps, &r))
		return 2;
	size_t bad = run(&o.cfg, r, &ps);
	zs_region_destroy(r);
	zs_pageset_free(&ps);
	return bad ? 1 : 0;
}
