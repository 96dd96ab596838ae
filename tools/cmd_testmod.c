/*
 * zs testmod: the zsmalloc_test kernel module's workload, run on the real
 * allocator instead of a model: `count` objects of each size from 32 to
 * page_size-16 in steps of 16, allocated in ascending size order, each
 * filled with its sequence number's low byte, then read back with
 * zs_obj_read_begin into a local copy.  The printed lines and their
 * definitions are the module's: an object "spans" when the read had to be
 * stitched into the local copy, and counts its user size as memcpy bytes;
 * utilization is total*1000/(pages*page_size), integer, printed as x.y.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"
#include "zs/zsmalloc.h"

#define TESTMOD_OPTS (OPT_PAGE_SIZE | OPT_POLICY | OPT_FREE_MODE | OPT_PROFILE)

struct tm_opts {
	struct pool_opts po;
	uint64_t count, step, min, max;   /* max 0: page_size - 16 */
	int json, force, progress;
};

/* The flags of `zs testmod`, stored into *o (usage passes a scratch one for the help). */
#define TESTMOD_FLAGS(o)                                                                        \
	{                                                                                        \
		{ "count", 0, OPTK_U64, &(o)->count, 1, 100000000,                               \
		  "  --count N            objects per size, 1..100000000 (default 1337)\n" },       \
		{ "step", 0, OPTK_U64, &(o)->step, 1, 65536,                                     \
		  "  --step N             size step, 1..65536 (default 16)\n" },                    \
		{ "min", 0, OPTK_U64, &(o)->min, 1, 65536,                                       \
		  "  --min N / --max N    size range, 1..page size (default 32 .. page_size-16)\n" }, \
		{ "max", 0, OPTK_U64, &(o)->max, 1, 65536, NULL },                               \
		{ "force", 0, OPTK_FLAG, &(o)->force, 0, 0,                                      \
		  "  --force              run even when the estimate exceeds MemAvailable\n" },     \
		{ "progress", 0, OPTK_FLAG, &(o)->progress, 0, 0,                                \
		  "  --progress           progress on stderr even when it is not a terminal\n" },   \
		{ "json", 0, OPTK_FLAG, &(o)->json, 0, 0,                                        \
		  "  --json               machine-readable output\n" },                             \
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },                                        \
	}

static void usage(FILE *f)
{
	struct tm_opts scratch;
	const struct opt_flag flags[] = TESTMOD_FLAGS(&scratch);
	fprintf(f, "usage: zs testmod [options]\n");
	opt_pool_help(f, TESTMOD_OPTS);
	opt_flags_help(f, flags);
	fprintf(f, "The workload needs about count x (sum of the sizes) bytes; it is estimated\n"
		   "first and refused (without --force) when larger than MemAvailable.\n"
		   "--profile app is refused: the page counts are zsmalloc_test.ko's, which\n"
		   "only the kernel profile reproduces.\n");
}

static double gib(uint64_t b)
{
	return (double)b / (1024.0 * 1024 * 1024);
}

/* The pool, the objects and what the run measured. */
struct tm {
	struct zs_pool *pool;
	size_t P, n;                     /* page size; objects allocated */
	unsigned long *handles;
	uint32_t *sizes;
	unsigned char *buf, *local_copy;
	unsigned long pages;
	unsigned long long total, ratio, memcpy_bytes;
	size_t nread, spanning, bad;
};

/* Options -> o.  0, 1 after --help, or 2 after a message. */
static int parse(int argc, char **argv, struct tm_opts *o)
{
	*o = (struct tm_opts){ .count = 1337, .step = 16, .min = 32,
			       .progress = opt_progress_default() };
	pool_opts_init(&o->po); /* kernel profile: zsmalloc_test.ko's page counts */
	const struct opt_flag flags[] = TESTMOD_FLAGS(o);
	int rc = opt_parse("testmod", argc, argv, flags, TESTMOD_OPTS, &o->po, usage, NULL);
	if (rc)
		return rc;
	if (optind < argc) {
		fprintf(stderr, "zs testmod: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return 0;
}

/* The pool, the size range checked against its page size, the memory estimate
 * checked against MemAvailable, the arrays.  0, or 2 after a message. */
static int setup(struct tm_opts *o, struct tm *t)
{
	struct zs_pool_config cfg = o->po.cfg;
	cfg.deferred_worker = -1;
	char why[256];
	if (zs_pool_create(&cfg, &t->pool, why, sizeof(why))) {
		fprintf(stderr, "zs testmod: cannot create the pool: %s\n", why);
		return 2;
	}
	size_t P = t->P = zs_pool_page_size(t->pool);
	if (!o->max)
		o->max = P - 16;
	if (o->max > P || o->min > o->max) {
		/* min > max (e.g. --min 4096 against the default max 4080) is its own case */
		fprintf(stderr, "zs testmod: size range %llu..%llu %s 1..%zu (--min/--max)\n",
			(unsigned long long)o->min, (unsigned long long)o->max,
			o->min > o->max ? "is empty (--min above --max), sizes are in" : "outside",
			P);
		return 2;
	}
	/* Objects (count per size, sizes min..max by step) and their bytes, plus the
	 * tool's own handle/size arrays; the pool's packing adds a little on top. */
	uint64_t nsizes = (o->max - o->min) / o->step + 1;
	uint64_t sum_sizes = nsizes * o->min + o->step * nsizes * (nsizes - 1) / 2;
	uint64_t need = o->count * sum_sizes / 100 * 105 + o->count * nsizes * 12;
	uint64_t avail = mem_available();
	if (avail && need > avail && !o->force) {
		fprintf(stderr, "zs testmod: this workload needs about %.1f GiB (%llu objects, %llu "
				"sizes x --count %llu) but MemAvailable is %.1f GiB; lower --count or "
				"--max, or pass --force\n",
			gib(need), (unsigned long long)(o->count * nsizes), (unsigned long long)nsizes,
			(unsigned long long)o->count, gib(avail));
		return 2;
	}
	if (o->progress)
		fprintf(stderr, "zs testmod: %llu objects, about %.2f GiB\n",
			(unsigned long long)(o->count * nsizes), gib(need));
	size_t nobj = (size_t)nsizes * (size_t)o->count;
	t->handles = malloc(nobj * sizeof(*t->handles));
	t->sizes = malloc(nobj * sizeof(*t->sizes));
	t->buf = malloc(P);
	t->local_copy = malloc(P);
	if (!t->handles || !t->sizes || !t->buf || !t->local_copy) {
		fprintf(stderr, "zs testmod: out of memory\n");
		return 2;
	}
	return 0;
}

/* The module's workload: allocate in ascending size order, fill, read back.
 * 0, or 2 when an allocation fails. */
static int run(const struct tm_opts *o, struct tm *t)
{
	uint64_t nsizes = (o->max - o->min) / o->step + 1;
	for (uint64_t sz = o->min; sz <= o->max; sz += o->step) {
		if (o->progress && nsizes > 1)
			progress_line("  size %llu/%llu", (unsigned long long)sz,
				      (unsigned long long)o->max);
		for (uint64_t k = 0; k < o->count; k++) {
			unsigned long h = zs_malloc(t->pool, (size_t)sz);
			if (ZS_IS_ERR(h)) {
				fprintf(stderr, "zs testmod: zs_malloc(%llu): %s\n", (unsigned long long)sz,
					strerror(-ZS_ERR(h)));
				return 2;
			}
			t->handles[t->n] = h;
			t->sizes[t->n++] = (uint32_t)sz;
			t->total += (unsigned long long)sz;
		}
	}
	if (o->progress)
		progress_done();
	for (size_t i = 0; i < t->n; i++) {
		memset(t->buf, (int)(i & 0xff), t->sizes[i]);
		zs_obj_write(t->pool, t->handles[i], t->buf, t->sizes[i]);
	}
	t->pages = zs_get_total_pages(t->pool);
	t->ratio = t->total * 1000 / ((unsigned long long)t->pages * t->P);
	for (size_t i = 0; i < t->n; i++) {
		unsigned char *p = zs_obj_read_begin(t->pool, t->handles[i], t->sizes[i], t->local_copy);
		if (!p) {
			t->bad++;
			continue;
		}
		if (p == t->local_copy) {
			t->spanning++;
			t->memcpy_bytes += t->sizes[i];
		}
		for (uint32_t b = 0; b < t->sizes[i]; b++)
			if (p[b] != (unsigned char)(i & 0xff)) {
				t->bad++;
				break;
			}
		zs_obj_read_end(t->pool, t->handles[i], t->sizes[i], p);
		t->nread++;
	}
	return 0;
}

static void print_json(const struct tm *t)
{
	const struct zs_pool_config *pc = zs_pool_get_config(t->pool);
	struct json js;
	json_init(&js, stdout, 0);
	json_obj(&js);
	json_kuint(&js, "page_size", t->P);
	json_kuint(&js, "max_chain", pc->max_chain);
	json_kstr(&js, "chain_policy", zs_chain_policy_name(pc->chain_policy));
	json_kuint(&js, "write_objects", t->n);
	json_kuint(&js, "pool_pages", t->pages);
	json_kuint(&js, "total_allocated", t->total);
	json_kuint(&js, "utilization_permille", t->ratio);
	json_kuint(&js, "read_objects", t->nread);
	json_kuint(&js, "spanning", t->spanning);
	json_kuint(&js, "memcpy_bytes", t->memcpy_bytes);
	json_kuint(&js, "verify_errors", t->bad);
	json_obj_end(&js);
	json_done(&js);
}

/* The module's own lines. */
static void print_text(const struct tm *t)
{
	printf("zsmalloc_test: num write objects: %zu\n", t->n);
	printf("zsmalloc_test: pool pages used %lu, total allocated size %llu\n", t->pages, t->total);
	printf("zsmalloc_test: pool memory utilization: %llu.%llu\n", t->ratio / 10, t->ratio % 10);
	printf("zsmalloc_test: num read objects: %zu\n", t->nread);
	printf("zsmalloc_test: spanning objects: %zu, total memcpy size: %llu\n", t->spanning,
	       t->memcpy_bytes);
	if (t->bad)
		printf("zsmalloc_test: %zu objects failed verification\n", t->bad);
}

static void teardown(struct tm *t)
{
	for (size_t i = 0; i < t->n; i++)
		zs_free(t->pool, t->handles[i]);
	free(t->handles);
	free(t->sizes);
	free(t->buf);
	free(t->local_copy);
	if (t->pool)
		zs_destroy_pool(t->pool);
}

int cmd_testmod(int argc, char **argv)
{
	struct tm_opts o;
	struct tm t = { 0 };
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	rc = setup(&o, &t);
	if (!rc)
		rc = run(&o, &t);
	if (!rc) {
		if (o.json)
			print_json(&t);
		else
			print_text(&t);
		rc = t.bad ? 1 : 0;
	}
	teardown(&t);
	return rc;
}
