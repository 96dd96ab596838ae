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

static void usage(FILE *f)
{
	fprintf(f, "usage: zs testmod [options]\n" OPT_POOL_HELP
		   "  --count N            objects per size (default 1337)\n"
		   "  --step N             size step (default 16)\n"
		   "  --min N / --max N    size range (default 32 .. page_size-16)\n"
		   "  --json               machine-readable output\n");
}

int cmd_testmod(int argc, char **argv)
{
	struct zs_pool_config cfg;
	long count = 1337, step = 16, min = 32, max = -1;
	int json = 0;
	zs_pool_config_init(&cfg);
	for (int i = 1; i < argc; i++) {
		int r = opt_pool(argc, argv, &i, &cfg);
		if (r < 0)
			return 2;
		if (r)
			continue;
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = 1;
		} else if ((!strcmp(a, "--count") || !strcmp(a, "--step") || !strcmp(a, "--min") ||
			    !strcmp(a, "--max")) && i + 1 < argc) {
			long v = atol(argv[++i]);
			if (v <= 0) {
				fprintf(stderr, "zs testmod: %s must be positive\n", a);
				return 2;
			}
			*(!strcmp(a, "--count") ? &count : !strcmp(a, "--step") ? &step
							 : !strcmp(a, "--min") ? &min : &max) = v;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	cfg.deferred_worker = -1;
	struct zs_pool *pool = zs_create_pool(&cfg);
	if (!pool) {
		fprintf(stderr, "zs testmod: cannot create the pool: %s\n", strerror(errno));
		return 2;
	}
	size_t P = zs_pool_page_size(pool);
	if (max < 0)
		max = (long)P - 16;
	if (max > (long)P || min > max) {
		fprintf(stderr, "zs testmod: size range %ld..%ld outside 1..%zu\n", min, max, P);
		zs_destroy_pool(pool);
		return 2;
	}
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
	for (long sz = min; sz <= max; sz += step) {
		for (long k = 0; k < count; k++) {
			unsigned long h = zs_malloc(pool, (size_t)sz);
			if (ZS_IS_ERR(h)) {
				fprintf(stderr, "zs testmod: zs_malloc(%ld): %s\n", sz, strerror(-ZS_ERR(h)));
				rc = 2;
				goto out;
			}
			handles[n] = h;
			sizes[n++] = (uint32_t)sz;
			total += (unsigned long long)sz;
		}
	}
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
		printf("{\"page_size\": %zu, \"max_chain\": %u, \"chain_policy\": \"%s\", "
		       "\"write_objects\": %zu, \"pool_pages\": %lu, \"total_allocated\": %llu, "
		       "\"utilization_permille\": %llu, \"read_objects\": %zu, \"spanning\": %zu, "
		       "\"memcpy_bytes\": %llu, \"verify_errors\": %zu}\n",
		       P, zs_pool_get_config(pool)->max_chain,
		       chain_policy_name(zs_pool_get_config(pool)->chain_policy), n, pages, total,
		       ratio, nread, spanning, memcpy_bytes, bad);
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
