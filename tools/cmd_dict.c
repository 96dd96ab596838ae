/*
 * `zs dict train`: build a compression dictionary from a sample of the
 * user's own pages (files or directories), with libzstd's trainer
 * (ZDICT_trainFromBuffer) on 4 KiB samples, as zram's dictionaries are
 * trained on page-size data.  The file it writes is what `zs zram --dict`
 * and zs_zram_config.comp_dict_path take, for zstd and lz4 alike (lz4 uses
 * the last 64 KiB as history).  Public headers + libzstd only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>

#include "cmds.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define SAMPLE 4096

static void usage(FILE *f)
{
	fprintf(f, "usage: zs dict train -o FILE [--size BYTES] [--samples N] [--max BYTES] "
		   "FILE|DIR...\n"
		   "  -o FILE        where to write the dictionary\n"
		   "  --size BYTES   dictionary size (default 65536; 256..%zu)\n"
		   "  --samples N    at most N 4 KiB pages, spread evenly (default 8192; 8..1048576)\n"
		   "  --max BYTES    read at most BYTES of the inputs (default 268435456)\n",
		   ZS_COMP_MAX_DICT);
}

/* Decimal only, whole string, within [lo, hi]. */
static int num(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || *v < lo || *v > hi ? -1 : 0;
}

int cmd_dict(int argc, char **argv)
{
	unsigned long long size = 65536, samples = 8192, max = 256ull << 20;
	const char *out = NULL;
	char **paths;
	int npaths = 0;

	if (argc < 2 || strcmp(argv[1], "train")) {
		usage(argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout
											   : stderr);
		return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 2;
	}
	paths = calloc((size_t)argc, sizeof(*paths));
	if (!paths)
		return 2;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		int bad = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(paths);
			return 0;
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(a, "--size") && i + 1 < argc) {
			bad = num(argv[++i], 256, ZS_COMP_MAX_DICT, &size);
		} else if (!strcmp(a, "--samples") && i + 1 < argc) {
			bad = num(argv[++i], 8, 1u << 20, &samples);
		} else if (!strcmp(a, "--max") && i + 1 < argc) {
			bad = num(argv[++i], SAMPLE, 1ull << 40, &max);
		} else if (a[0] == '-') {
			bad = 1;
		} else {
			paths[npaths++] = argv[i];
		}
		if (bad) {
			fprintf(stderr, "zs dict: bad option or value at '%s'\n", a);
			usage(stderr);
			free(paths);
			return 2;
		}
	}
	if (!out || !npaths) {
		usage(stderr);
		free(paths);
		return 2;
	}

	struct zs_pageset ps;
	int rc = zs_pageset_load(&ps, SAMPLE, paths, npaths, max);
	free(paths);
	if (rc || !ps.npages) {
		fprintf(stderr, "zs dict: no pages loaded (%s)\n", rc ? strerror(-rc) : "empty");
		return 2;
	}
	/* Same-filled pages never reach a compressor in zram: leave them out. */
	size_t useful = 0;
	for (size_t i = 0; i < ps.npages; i++)
		useful += !zs_zram_page_same_filled(ps.data + i * SAMPLE, SAMPLE, NULL);
	size_t n = useful < samples ? useful : (size_t)samples;
	unsigned char *buf = malloc(n * SAMPLE + 1);
	size_t *sizes = malloc((n + 1) * sizeof(*sizes));
	void *dict = malloc(size);
	if (!buf || !sizes || !dict || n < 8) {
		fprintf(stderr, "zs dict: %s\n", n < 8 ? "fewer than 8 non-same-filled pages"
						      : "out of memory");
		zs_pageset_free(&ps);
		free(buf);
		free(sizes);
		free(dict);
		return 2;
	}
	/* Spread the samples evenly over the useful pages. */
	size_t taken = 0, seen = 0;
	for (size_t i = 0; i < ps.npages && taken < n; i++) {
		const unsigned char *pg = ps.data + i * SAMPLE;

		if (zs_zram_page_same_filled(pg, SAMPLE, NULL))
			continue;
		if (seen++ * n / useful == taken || useful - seen < n - taken) {
			memcpy(buf + taken * SAMPLE, pg, SAMPLE);
			sizes[taken++] = SAMPLE;
		}
	}
	size_t dl = ZDICT_trainFromBuffer(dict, size, buf, sizes, (unsigned)taken);
	int ret = 0;
	if (ZDICT_isError(dl)) {
		fprintf(stderr, "zs dict: training failed: %s\n", ZDICT_getErrorName(dl));
		ret = 1;
	} else {
		FILE *f = fopen(out, "wb");

		if (!f || fwrite(dict, 1, dl, f) != dl || fclose(f)) {
			fprintf(stderr, "zs dict: %s: %s\n", out, strerror(errno));
			ret = 1;
		} else {
			printf("zs dict: %zu-byte dictionary from %zu of %zu pages (%zu files) -> %s\n",
			       dl, taken, ps.npages, ps.files, out);
		}
	}
	zs_pageset_free(&ps);
	free(buf);
	free(sizes);
	free(dict);
	return ret;
}
