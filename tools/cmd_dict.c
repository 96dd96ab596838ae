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
#include "opts.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define SAMPLE 4096
/* --size's help line spells the limit out. */
_Static_assert(ZS_COMP_MAX_DICT == 1048576, "update --size's help line");

/* The flags of `zs dict train`, stored into the pointers (usage passes scratch ones). */
#define DICT_FLAGS(out, size, samples, max)                                                     \
	{                                                                                        \
		{ "", 'o', OPTK_STR, (out), 0, 0,                                                \
		  "  -o FILE        where to write the dictionary\n" },                             \
		{ "size", 0, OPTK_BYTES, (size), 256, ZS_COMP_MAX_DICT,                          \
		  "  --size BYTES   dictionary size (default 65536; 256..1048576; K/M suffix)\n" },  \
		{ "samples", 0, OPTK_U64, (samples), 8, 1u << 20,                                \
		  "  --samples N    at most N 4 KiB pages, spread evenly (default 8192; 8..1048576)\n" }, \
		{ "max", 0, OPTK_BYTES, (max), SAMPLE, 1ull << 40,                               \
		  "  --max BYTES    read at most BYTES of the inputs (default 256M; K/M/G suffix)\n" }, \
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },                                        \
	}

static void usage(FILE *f)
{
	const char *out;
	uint64_t size, samples, max;
	const struct opt_flag flags[] = DICT_FLAGS(&out, &size, &samples, &max);
	fprintf(f, "usage: zs dict train -o FILE [--size BYTES] [--samples N] [--max BYTES] "
		   "FILE|DIR...\n");
	opt_flags_help(f, flags);
}

/* Options of `zs dict train`; the paths stay in argv[optind..].  0, 1 after --help, or 2. */
static int parse(int argc, char **argv, const char **out, uint64_t *size, uint64_t *samples,
		 uint64_t *max)
{
	const struct opt_flag flags[] = DICT_FLAGS(out, size, samples, max);
	int rc = opt_parse("dict", argc, argv, flags, 0, NULL, usage, NULL);
	if (rc)
		return rc;
	if (!*out || optind >= argc) {
		fprintf(stderr, "zs dict: %s\n", !*out ? "no -o FILE given" : "no input FILE|DIR given");
		usage(stderr);
		return 2;
	}
	return 0;
}

int cmd_dict(int argc, char **argv)
{
	uint64_t size = 65536, samples = 8192, max = 256ull << 20;
	const char *out = NULL;

	if (argc < 2 || strcmp(argv[1], "train")) {
		int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
		usage(help ? stdout : stderr);
		return help ? 0 : 2;
	}
	/* getopt_long sees "train" as argv[0]. */
	int pr = parse(argc - 1, argv + 1, &out, &size, &samples, &max);
	if (pr)
		return pr == 1 ? 0 : 2;
	char **paths = argv + 1 + optind;
	int npaths = argc - 1 - optind;

	for (int i = 0; i < npaths; i++)
		if (opt_path("dict", "FILE", paths[i], 1))
			return 2;
	struct zs_pageset ps;
	int rc = zs_pageset_load(&ps, SAMPLE, paths, npaths, max);
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

		int bad = !f || fwrite(dict, 1, dl, f) != dl;

		if (f && fclose(f))
			bad = 1;
		if (bad) {
			fprintf(stderr, "zs dict: %s: %s\n", out, strerror(errno));
			if (f)
				remove_partial(out);
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
