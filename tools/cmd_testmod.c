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

#define TESTMOD_OPTS (OPT_PAGE_SIZE | OPT_POLICY | OPT_FREE_MODE)

static void usage(FILE *f)
{
	fprintf(f, "usage: zs testmod [options]\n");
	opt_pool_help(f, TESTMOD_OPTS);
	fprintf(f, "  --count N            objects per size, 1..100000000 (default 1337)\n"
		   "  --step N             size step, 1..65536 (default 16)\n"
		   "  --min N / --max N    size range, 1..page size (default 32 .. page_size-16)\n"
		   "  --force              run even when the estimate exceeds MemAvailable\n"
		   "  --progress           progress on stderr even when it is not a terminal\n"
		   "  --json               machine-readable output\n"
		   "The workload needs about count x (sum of the sizes) bytes; it is estimated\n"
		   "first and refused (without --force) when larger than MemAvailable.\n");
}

static double gib(uint64_t b)
{
	return (double)b / (1024.0 * 1024 * 1024);
}

int cmd_testmod(int argc, char **argv)
{
	enum { O_COUNT = 1, O_STEP, O_MIN, O_MAX, O_FORCE, O_PROGRESS, O_JSON };
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "count", required_argument, NULL, O_COUNT },
		{ "step", required_argument, NULL, O_STEP },
		{ "min", required_argument, NULL, O_MIN },
		{ "max", required_argument, NULL, O_MAX },
		{ "force", no_argument, NULL, O_FORCE },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct pool_opts po;
	uint64_t count = 1337, step = 16, min = 32, max = 0;
	int json = 0, force = 0, progress = opt_progress_default(), opt;
	pool_opts_init(&po);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt_pool_arg("testmod", TESTMOD_OPTS, opt, optarg, &po))
				return 2;
			continue;
		}
		switch (opt) {
		case O_COUNT:
			if (opt_u64("testmod", "--count", optarg, 1, 100000000, &count))
				return 2;
			break;
		case O_STEP:
			if (opt_u64("testmod", "--step", optarg, 1, 65536, &step))
				return 2;
			break;
		case O_MIN:
		case O_MAX:
			if (opt_u64("testmod", opt == O_MIN ? "--min" : "--max", optarg, 1, 65536,
				    opt == O_MIN ? &min : &max))
				return 2;
			break;
		case O_FORCE: force = 1; break;
		case O_PROGRESS: progress = 1; break;
		case O_JSON: json = 1; break;
		case 'h': usage(stdout); return 0;
		default: return opt_bad("testmod", argc, argv);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zs testmod: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	struct zs_pool_config cfg = po.cfg;
	cfg.deferred_worker = -1;
	struct zs_pool *pool = zs_create_pool(&cfg);
	if (!pool) {
		fprintf(stderr, "zs testmod: cannot create the pool: %s\n", strerror(errno));
		return 2;
	}
	size_t P = zs_pool_page_size(pool);
	if (!max)
		max = P - 16;
	if (max > P || min > max) {
		fprintf(stderr, "zs testmod: size range %llu..%llu outside 1..%zu (--min/--max)\n",
			(unsigned long long)min, (unsigned long long)max, P);
		zs_destroy_pool(pool);
		return 2;
	}
	/* Objects (count per size, sizes min..max by step) and their bytes, plus the
	 * tool's own handle/size arrays; the pool's packing adds a little on top. */
	uint64_t nsizes = (max - min) / step + 1;
	uint64_t sum_sizes = nsizes * min + step * nsizes * (nsizes - 1) / 2;
	uint64_t need = count * sum_sizes / 100 * 105 + count * nsizes * 12;
	uint64_t avail = mem_available();
	if (avail && need > avail && !force) {
		fprintf(stderr, "zs testmod: this workload needs about %.1f GiB (%llu objects, %llu "
				"sizes x --count %llu) but MemAvailable is %.1f GiB; lower --count or "
				"--max, or pass --force\n",
			gib(need), (unsigned long long)(count * nsizes), (unsigned long long)nsizes,
			(unsigned long long)count, gib(avail));
		zs_destroy_pool(pool);
		return 2;
	}
	if (progress)
		fprintf(stderr, "zs testmod: %llu objects, about %.2f GiB\n",
			(unsigned long long)(count * nsizes), gib(need));
	size_t nobj = (size_t)((max - min) / step + 1) * (size_t)count;
	unsigned long *handles = malloc(nobj * sizeof(*handles));
	uint32_t *sizes = malloc(nobj * sizeof(*sizes));
	unsigned char *buf = malloc(P), *local_copy = malloc(P);
	if (!handles || !sizes || !buf || !local_copy) {
		fprintf(stderr, "zs testmod: out of memory\n");
		return 2;
	}
	size_t n = 0;
	unsigned long long total = 0;
	int rc = 0;
	for (uint64_t sz = min; sz <= max; sz += step) {
		if (progress && nsizes > 1)
			progress_line("  size %llu/%llu", (unsigned long long)sz,
				(unsigned long long)max);
		for (uint64_t k = 0; k < count; k++) {
			unsigned long h = zs_malloc(pool, (size_t)sz);
			if (ZS_IS_ERR(h)) {
				fprintf(stderr, "zs testmod: zs_malloc(%llu): %s\n", (unsigned long long)sz,
					strerror(-ZS_ERR(h)));
				rc = 2;
				goto out;
			}
			handles[n] = h;
			sizes[n++] = (uint32_t)sz;
			total += (unsigned long long)sz;
		}
	}
	if (progress)
		progress_done();
	for (size_t i = 0; i < n; i++) {
		memset(buf, (int)(i & 0xff), sizes[i]);
		zs_obj_write(pool, handles[i], buf, sizes[i]);
	}
	unsigned long pages = zs_get_total_pages(pool);
	unsigned long long ratio = total * 1000 / ((unsigned long long)pages * P);
	size_t nread = 0, spanning = 0, bad = 0;
	unsigned long long memcpy_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = zs_obj_read_begin(pool, handles[i], sizes[i], local_copy);
		if (!p) {
			bad++;
			continue;
		}
		if (p == local_copy) {
			spanning++;
			memcpy_bytes += sizes[i];
		}
		for (uint32_t b = 0; b < sizes[i]; b++)
			if (p[b] != (unsigned char)(i & 0xff)) {
				bad++;
				break;
			}
		zs_obj_read_end(pool, handles[i], sizes[i], p);
		nread++;
	}
	if (json) {
		const struct zs_pool_config *pc = zs_pool_get_config(pool);
		struct json js;
		json_init(&js, stdout, 0);
		json_obj(&js);
		json_kuint(&js, "page_size", P);
		json_kuint(&js, "max_chain", pc->max_chain);
		json_kstr(&js, "chain_policy", chain_policy_name(pc->chain_policy));
		json_kuint(&js, "write_objects", n);
		json_kuint(&js, "pool_pages", pages);
		json_kuint(&js, "total_allocated", total);
		json_kuint(&js, "utilization_permille", ratio);
		json_kuint(&js, "read_objects", nread);
		json_kuint(&js, "spanning", spanning);
		json_kuint(&js, "memcpy_bytes", memcpy_bytes);
		json_kuint(&js, "verify_errors", bad);
		json_obj_end(&js);
		json_done(&js);
	} else {
		printf("zsmalloc_test: num write objects: %zu\n", n);
		printf("zsmalloc_test: pool pages used %lu, total allocated size %llu\n", pages, total);
		printf("zsmalloc_test: pool memory utilization: %llu.%llu\n", ratio / 10, ratio % 10);
		printf("zsmalloc_test: num read objects: %zu\n", nread);
		printf("zsmalloc_test: spanning objects: %zu, total memcpy size: %llu\n", spanning,
		       memcpy_bytes);
		if (bad)
			printf("zsmalloc_test: %zu objects failed verification\n", bad);
	}
	if (bad)
		rc = 1;
out:
	for (size_t i = 0; i < n; i++)
		zs_free(pool, handles[i]);
	free(handles);
	free(sizes);
	free(buf);
	free(local_copy);
	zs_destroy_pool(pool);
	return rc;
}
