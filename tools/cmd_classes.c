/*
 * zs classes: simulate_zsmalloc's "Detailed Request View", computed from the
 * allocator's own class table (a pool is created with the requested policy
 * and asked, through zs_class_info, what each request size gets), so the
 * table can never disagree with what zs_malloc does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"
#include "zs/zsmalloc.h"

#define CLASSES_OPTS (OPT_PAGE_SIZE | OPT_POLICY | OPT_MAX_OBJECT | OPT_PROFILE)

static void usage(FILE *f)
{
	fprintf(f, "usage: zs classes [options]\n"
		   "One row per request size from 32 to the page size in steps of 16:\n"
		   "Log | Phys | Chain | Objs/Page | TailWaste | MergeWaste | Span, and a summary.\n"
		   "(Objs/Page is objects per zspage, as in simulate_zsmalloc; Log is the request\n"
		   "size without the 8-byte handle header.)\n");
	opt_pool_help(f, CLASSES_OPTS);
	fprintf(f, "  --json               machine-readable output\n"
		   "--profile app is refused: the app profile has the kernel's class table (it\n"
		   "changes copies, free path and compaction, not the classes), so it would\n"
		   "print the same table.\n");
}

/* One request size's row of the table. */
struct row {
	unsigned req;
	struct zs_class_info ci;
	unsigned long merge;
};

struct table {
	struct zs_pool *pool;
	unsigned P, delta;
	int n, phys, nrows;
	struct row *rows;
	double avg_waste;             /* simulate_zsmalloc's effective waste, % */
	unsigned long span_sum;
};

/* Options -> po and *json.  0, 1 after --help, or 2 after a message. */
static int parse(int argc, char **argv, struct pool_opts *po, int *json)
{
	const struct opt_flag flags[] = {
		{ "json", 0, OPTK_FLAG, json, 0, 0, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	*json = 0;
	pool_opts_init(po); /* kernel profile: the table must be the kernel's */
	int rc = opt_parse("classes", argc, argv, flags, CLASSES_OPTS, po, usage, NULL);
	if (rc)
		return rc;
	if (optind < argc) {
		fprintf(stderr, "zs classes: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return 0;
}

/* A pool with the requested policy: the table is read from it.  0 or 2. */
static int setup(const struct pool_opts *po, struct table *t)
{
	struct zs_pool_config cfg = po->cfg;
	cfg.deferred_worker = -1;
	char why[256];
	if (zs_pool_create(&cfg, &t->pool, why, sizeof(why))) {
		fprintf(stderr, "zs classes: cannot create a pool with this configuration: %s\n",
			why);
		return 2;
	}
	t->P = (unsigned)zs_pool_page_size(t->pool);
	t->n = zs_class_count(t->pool);
	struct zs_class_info ci, first;
	zs_class_info(t->pool, 1 < t->n ? 1 : 0, &first);
	t->delta = t->n > 1 ? first.size - ZS_MIN_ALLOC_SIZE : 0;
	for (int i = 0; i < t->n; i++) {
		zs_class_info(t->pool, i, &ci);
		t->phys += ci.phys_index == i;
	}
	t->rows = calloc(t->P / 16 + 1, sizeof(*t->rows));
	if (!t->rows) {
		fprintf(stderr, "zs classes: out of memory\n");
		return 2;
	}
	return 0;
}

/* Each request size from 32 to the page size in steps of 16: what zs_malloc gives it. */
static void run(struct table *t)
{
	double waste_sum = 0;
	for (unsigned req = ZS_MIN_ALLOC_SIZE; req <= t->P; req += 16) {
		int idx = (int)((req - ZS_MIN_ALLOC_SIZE + t->delta - 1) / t->delta);
		if (idx >= t->n)
			idx = t->n - 1;
		struct row *r = &t->rows[t->nrows++];
		struct zs_class_info *ci = &r->ci;
		zs_class_info(t->pool, idx, ci);
		r->req = req;
		r->merge = (unsigned long)(ci->phys_size - req) * ci->objs_per_zspage;
		/* simulate_zsmalloc's effective waste: padding plus the tail's share, per slot. */
		double slot = (double)ci->pages_per_zspage * t->P / ci->objs_per_zspage;
		waste_sum += ((ci->phys_size - req) + (double)ci->tail_waste / ci->objs_per_zspage) / slot;
		t->span_sum += ci->spanning;
	}
	t->avg_waste = t->nrows ? 100.0 * waste_sum / t->nrows : 0;
}

/*
 * The waste of a k-page class over requests spread evenly over its range
 * ((k-1)P, kP]: half a page of an average (k - 1/2)-page zspage.
 */
static double multi_page_waste(unsigned P, unsigned k)
{
	return 100.0 * ((double)P / 2) / ((double)k * P);
}

static void print_json(const struct table *t)
{
	const struct zs_pool_config *c = zs_pool_get_config(t->pool);
	struct json js;
	json_init(&js, stdout, 0);
	json_obj(&js);
	json_kuint(&js, "page_size", t->P);
	json_kuint(&js, "max_chain", c->max_chain);
	json_kuint(&js, "delta", t->delta);
	json_kstr(&js, "chain_policy", zs_chain_policy_name(c->chain_policy));
	json_karr(&js, "rows");
	for (int i = 0; i < t->nrows; i++) {
		const struct row *r = &t->rows[i];
		json_obj(&js);
		json_kuint(&js, "log", r->req);
		json_kuint(&js, "phys", r->ci.phys_size);
		json_kuint(&js, "chain", r->ci.pages_per_zspage);
		json_kuint(&js, "objs", r->ci.objs_per_zspage);
		json_kuint(&js, "tail_waste", r->ci.tail_waste);
		json_kuint(&js, "merge_waste", r->merge);
		json_kuint(&js, "span", r->ci.spanning);
		json_kint(&js, "class", r->ci.index);
		json_kint(&js, "phys_class", r->ci.phys_index);
		json_obj_end(&js);
	}
	json_arr_end(&js);
	/* Past a page (--max-object): one class per page count, one object per zspage. */
	json_karr(&js, "multi_page");
	for (int i = 0; i < t->n; i++) {
		struct zs_class_info ci;
		zs_class_info(t->pool, i, &ci);
		if (ci.phys_size <= t->P)
			continue;
		json_obj(&js);
		json_kint(&js, "class", ci.index);
		json_kuint(&js, "pages", ci.pages_per_zspage);
		json_kuint(&js, "min_request", ci.phys_size - t->P + 1);
		json_kuint(&js, "max_request", ci.phys_size);
		json_kfixed(&js, "avg_waste_pct", multi_page_waste(t->P, ci.pages_per_zspage), 2);
		json_obj_end(&js);
	}
	json_arr_end(&js);
	json_kint(&js, "logical_classes", t->n);
	json_kint(&js, "physical_classes", t->phys);
	json_kuint(&js, "huge_class_size", zs_huge_class_size(t->pool));
	json_kfixed(&js, "avg_effective_waste_pct", t->avg_waste, 3);
	json_kuint(&js, "total_span", t->span_sum);
	json_obj_end(&js);
	json_done(&js);
}

static void print_text(const struct table *t)
{
	const struct zs_pool_config *c = zs_pool_get_config(t->pool);
	printf("page size %u, chain %u, delta %u, chain policy %s\n\n"
	       "%5s | %5s | %5s | %9s | %9s | %10s | %4s\n",
	       t->P, c->max_chain, t->delta, zs_chain_policy_name(c->chain_policy), "Log", "Phys",
	       "Chain", "Objs/Page", "TailWaste", "MergeWaste", "Span");
	for (int i = 0; i < t->nrows; i++) {
		const struct row *r = &t->rows[i];
		printf("%5u | %5u | %5u | %9u | %9u | %10lu | %4u\n", r->req, r->ci.phys_size,
		       r->ci.pages_per_zspage, r->ci.objs_per_zspage, r->ci.tail_waste, r->merge,
		       r->ci.spanning);
	}
	int multi = 0;
	for (int i = 0; i < t->n; i++) {
		struct zs_class_info ci;
		zs_class_info(t->pool, i, &ci);
		if (ci.phys_size <= t->P)
			continue;
		if (!multi++)
			printf("\nobjects larger than a page (--max-object): one per zspage of k pages\n"
			       "%5s | %5s | %13s | %s\n", "Class", "Pages", "Requests",
			       "AvgWaste (sizes uniform in the range)");
		printf("%5d | %5u | %6u..%-6u | %.2f%%\n", ci.index, ci.pages_per_zspage,
		       ci.phys_size - t->P + 1, ci.phys_size,
		       multi_page_waste(t->P, ci.pages_per_zspage));
	}
	printf("\nlogical classes %d, physical classes %d, huge_class_size %zu\n"
	       "average effective waste %.2f%% over %d request sizes, spanning slots summed %lu\n",
	       t->n, t->phys, zs_huge_class_size(t->pool), t->avg_waste, t->nrows, t->span_sum);
}

int cmd_classes(int argc, char **argv)
{
	struct pool_opts po;
	struct table t = { 0 };
	int json, rc = parse(argc, argv, &po, &json);
	if (rc)
		return rc == 1 ? 0 : 2;
	rc = setup(&po, &t);
	if (!rc) {
		run(&t);
		if (json)
			print_json(&t);
		else
			print_text(&t);
	}
	free(t.rows);
	if (t.pool)
		zs_destroy_pool(t.pool);
	return rc;
}
