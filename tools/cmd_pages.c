/*
 * `zs pages`: the pages every tool and benchmark runs on, written to a file.
 * The one page loader is the harness's zs_pageset_load (files and
 * directories, each file from a page boundary, its last page zero padded,
 * symlinks not followed); report.py, which is Python and cannot link the
 * harness, asks this command for its pages instead of walking the paths
 * itself, so the report measures exactly the pages `zs zram` and the
 * benchmarks would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"
#include "zs/harness.h"
#include "zs/pages.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: zs pages -o FILE [--max BYTES] [--page-size N] FILE|DIR...\n"
		   "  -o FILE          where to write the pages (one after another, no header)\n"
		   "  --max BYTES      read at most BYTES of the inputs (default 256M; K/M/G suffix)\n"
		   "  --page-size N    4096 (default) .. 65536 (64K), a power of two\n"
		   "Prints the pages and files read.\n");
}

/* --page-size: as every command's (16K), a power of two. */
static int set_page(const char *cmd, const char *opt, const char *arg, void *page)
{
	if (opt_bytes(cmd, opt, arg, ZS_PAGE_SIZE_MIN, ZS_PAGE_SIZE_MAX, page))
		return 2;
	if (!zs_page_size_valid((size_t)*(uint64_t *)page)) {
		fprintf(stderr, "zs %s: %s %s is not a power of two\n", cmd, opt, arg);
		return 2;
	}
	return 0;
}

int cmd_pages(int argc, char **argv)
{
	uint64_t max = 256ull << 20, page = ZS_PAGE_SIZE_DEFAULT;
	const char *out = NULL;
	const struct opt_hook page_hook = { set_page, &page };
	const struct opt_flag flags[] = {
		{ "", 'o', OPTK_STR, &out, 0, 0, NULL },
		{ "max", 0, OPTK_BYTES, &max, 4096, 1ull << 40, NULL },
		{ "page-size", 0, OPTK_FN, (void *)&page_hook, 0, 0, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	int rc = opt_parse("pages", argc, argv, flags, 0, NULL, usage, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!out || optind >= argc) {
		fprintf(stderr, "zs pages: %s\n", !out ? "no -o FILE given" : "no input FILE|DIR given");
		usage(stderr);
		return 2;
	}
	/* A missing or empty input is a mistake, not "0 pages": checked before -o is made. */
	for (int i = optind; i < argc; i++)
		if (opt_path("pages", "FILE", argv[i], 1))
			return 2;
	struct zs_pageset ps;
	rc = zs_pageset_load(&ps, (size_t)page, argv + optind, argc - optind, max);
	if (rc) {
		fprintf(stderr, "zs pages: %s\n", strerror(-rc));
		return 1;
	}
	FILE *f = fopen(out, "wb");
	if (!f) {
		fprintf(stderr, "zs pages: %s: %s\n", out, strerror(errno));
		zs_pageset_free(&ps);
		return 1;
	}
	size_t bytes = ps.npages * ps.page_size;
	int bad = fwrite(ps.data, 1, bytes, f) != bytes;
	bad |= fclose(f) != 0;
	if (bad) {
		fprintf(stderr, "zs pages: %s: write failed\n", out);
		remove_partial(out);
		zs_pageset_free(&ps);
		return 1;
	}
	printf("%zu pages of %zu bytes from %zu files\n", ps.npages, ps.page_size, ps.files);
	zs_pageset_free(&ps);
	return 0;
}
