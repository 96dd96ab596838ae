/*
 * `zs`: the libzs command-line tool.  This file only dispatches; each
 * subcommand lives in tools/cmd_NAME.c so that it can grow on its own.
 */
#include <stdio.h>
#include <string.h>
#include "cmds.h"
#include "zs/backend.h"
#include "zs/common.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "record", cmd_record, "record a zram-trace on the running kernel (root, zram)" },
	{ "replay", cmd_replay, "replay a zram-trace against the allocator, compare with the kernel" },
	{ "classes", cmd_classes, "print the size-class table (simulate_zsmalloc's view)" },
	{ "testmod", cmd_testmod, "run the zsmalloc_test module's workload on the allocator" },
	{ "zram", cmd_zram, "load files into a user-space zram store, print mm_stat and throughput" },
	{ "zswap", cmd_zswap, "run pages (or a kernel capture's sizes) through user-space zswap per backend" },
	{ "compare", cmd_compare, "compare zsmalloc, zblock and malloc baselines on one workload" },
	{ "report", cmd_report, "run the seed experiments and write a report with plots" },
	{ "dict", cmd_dict, "train a zstd/lz4 dictionary on 4 KiB samples of your files (dict train)" },
	{ "pages", cmd_pages, "write the pages the tools load from your files (the report's input)" },
	{ "soak", cmd_soak, "threads on one pool and one zram store for a time: nothing lost, RSS drift" },
	{ "region", cmd_region, "compressed memory through userfaultfd: pageout, touch, release" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: zs COMMAND [options]   (zs help COMMAND for a command's options)\n"
		   "       zs --version\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nThe commands that build a pool take --profile kernel|app (zs/zsmalloc.h),\n"
		   "default kernel: compare, zram, zswap, region, soak take both; classes,\n"
		   "testmod, replay (and zram --vs-kernel) compare with the kernel and take\n"
		   "kernel only.  The profile sets the defaults; --class-shards, --free-mode,\n"
		   "--fit-zspages change single fields.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("zs (libzs) %s\n", zs_version_string());
		/* This tool's backend kinds (the malloc baselines are the harness's, not
		 * libzs.so's): `zs report` reads them here. */
		printf("backends:");
		for (const char *const *k = zs_backend_kinds(); *k; k++)
			printf(" %s", *k);
		printf("\n");
		return 0;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (!strcmp(argv[2], commands[i].name)) {
				char *hargv[] = { argv[2], "--help", NULL };
				return commands[i].fn(2, hargv);
			}
		fprintf(stderr, "zs help: unknown command '%s'\n", argv[2]);
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "zs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
