/*
 * zs classes: simulate_zsmalloc's "Detailed Request View", computed from the
 * allocator's own class table (a pool is created with the requested policy
 * and asked, through zs_class_info, what each request size gets), so the
 * table can never disagree with what zs_malloc does.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"
#include "zs/zsmalloc.h"

#define CLASSES_OPTS (OPT_PAGE_SIZE | OPT_POLICY)

static void usage(FILE *f)
{
	fprintf(f, "usage: zs classes [options]\n"
		   "One row per request size from 32 to the page size in steps of 16:\n"
		   "Log | Phys | Chain | Objs/Page | TailWaste | MergeWaste | Span, and a summary.\n"
		   "(Objs/Page is objects per zspage, as in simulate_zsmalloc; Log is the request\n"
		   "size without the 8-byte handle header.)\n");
	opt_pool_help(f, CLASSES_OPTS);
	fprintf(f, "  --json               machine-readable output\n");
}

int cmd_classes(int argc, char **argv)
{
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct pool_opts po;
	int json = 0, opt;
	pool_opts_init(&po);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt_pool_arg("classes", CLASSES_OPTS, opt, optarg, &po))
				return 2;
		} else if (opt == 'j') {
			json = 1;
		} else if (opt == 'h') {
			usage(stdout);
			return 0;
		} else {
			return opt_bad("classes", argc, argv);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zs classes: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	struct zs_pool_config cfg = po.cfg;
	cfg.deferred_worker = -1;
	struct zs_pool *pool = zs_create_pool(&cfg);
	if (!pool) {
		fprintf(stderr, "zs classes: cannot create a pool with this configuration: %s\n",
			strerror(errno));
		return 2;
	}
	const struct zs_pool_config *c = zs_pool_get_config(pool);
	unsigned P = (unsigned)zs_pool_page_size(pool);
	int n = zs_class_count(pool), phys = 0;
	struct zs_class_info ci, first;
	zs_class_info(pool, 1 < n ? 1 : 0, &first);
	unsigned delta = n > 1 ? first.size - ZS_MIN_ALLOC_SIZE : 0;
	for (int i = 0; i < n; i++) {
		zs_class_info(pool, i, &ci);
		phys += ci.phys_index == i;
	}

	struct json js;
	if (json) {
		json_init(&js, stdout, 0);
		json_obj(&js);
		json_kuint(&js, "page_size", P);
		json_kuint(&js, "max_chain", c->max_chain);
		json_kuint(&js, "delta", delta);
		json_kstr(&js, "chain_policy", chain_policy_name(c->chain_policy));
		json_karr(&js, "rows");
	} else
		printf("page size %u, chain %u, delta %u, chain policy %s\n\n"
		       "%5s | %5s | %5s | %9s | %9s | %10s | %4s\n",
		       P, c->max_chain, delta, chain_policy_name(c->chain_policy), "Log", "Phys",
		       "Chain", "Objs/Page", "TailWaste", "MergeWaste", "Span");
	double waste_sum = 0;
	unsigned long span_sum = 0;
	int rows = 0;
	for (unsigned req = ZS_MIN_ALLOC_SIZE; req <= P; req += 16, rows++) {
		int idx = (int)((req - ZS_MIN_ALLOC_SIZE + delta - 1) / delta);
		if (idx >= n)
			idx = n - 1;
		zs_class_info(pool, idx, &ci);
		unsigned long merge = (unsigned long)(ci.phys_size - req) * ci.objs_per_zspage;
		/* simulate_zsmalloc's effective waste: padding plus the tail's share, per slot. */
		double slot = (double)ci.pages_per_zspage * P / ci.objs_per_zspage;
		waste_sum += ((ci.phys_size - req) + (double)ci.tail_waste / ci.objs_per_zspage) / slot;
		span_sum += ci.spanning;
		if (json) {
			json_obj(&js);
			json_kuint(&js, "log", req);
			json_kuint(&js, "phys", ci.phys_size);
			json_kuint(&js, "chain", ci.pages_per_zspage);
			json_kuint(&js, "objs", ci.objs_per_zspage);
			json_kuint(&js, "tail_waste", ci.tail_waste);
			json_kuint(&js, "merge_waste", merge);
			json_kuint(&js, "span", ci.spanning);
			json_kint(&js, "class", ci.index);
			json_kint(&js, "phys_class", ci.phys_index);
			json_obj_end(&js);
		} else
			printf("%5u | %5u | %5u | %9u | %9u | %10lu | %4u\n", req, ci.phys_size,
			       ci.pages_per_zspage, ci.objs_per_zspage, ci.tail_waste, merge,
			       ci.spanning);
	}
	double avg = rows ? 100.0 * waste_sum / rows : 0;
	if (json) {
		json_arr_end(&js);
		json_kint(&js, "logical_classes", n);
		json_kint(&js, "physical_classes", phys);
		json_kuint(&js, "huge_class_size", zs_huge_class_size(pool));
		json_kfixed(&js, "avg_effective_waste_pct", avg, 3);
		json_kuint(&js, "total_span", span_sum);
		json_obj_end(&js);
		json_done(&js);
	} else
		printf("\nlogical classes %d, physical classes %d, huge_class_size %zu\n"
		       "average effective waste %.2f%% over %d request sizes, spanning slots summed %lu\n",
		       n, phys, zs_huge_class_size(pool), avg, rows, span_sum);
	zs_destroy_pool(pool);
	return 0;
}
