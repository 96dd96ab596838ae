/*
 * zs replay's options: the help text, the parser and the checks of which
 * options go together.  Apart from the driver (cmd_replay.c) because they
 * are the command's interface, one long table that changes with every new
 * option, while the driver changes with the replay's semantics; nothing here
 * touches a pool or a trace.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"
#include "replay.h"
#include "zs/zsmalloc.h"

#define REPLAY_OPTS (OPT_CHAIN | OPT_CHAIN_POLICY | OPT_DELTA | OPT_FREE_MODE | OPT_DEFERRED | \
		     OPT_BACKEND | OPT_PROFILE)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs replay TRACE [options]\n"
		"Replay a zram-trace (plain or .xz; `zs record` makes one, docs/trace-format.md)\n"
		"on a libzs zsmalloc pool and compare the kernel's numbers with libzs's after\n"
		"every operation.  A zswap-trace (its header says so; `zs record --zswap`) is\n"
		"replayed through libzs's zswap (zs/zswap.h) the same way.  The trace fixes the\n"
		"page size.\n\n");
	opt_pool_help(f, REPLAY_OPTS & ~OPT_BACKEND);
	fprintf(f,
		"                       (--chain default: the trace's # chain_size, else 8)\n"
		"  --backend KIND       zsmalloc (default) or zblock: replay the trace on zblock and\n"
		"                       compare its pool pages with the kernel's (an experiment)\n"
		"  --sweep              replay once per pool configuration: zsmalloc chain 1..16 x\n"
		"                       every chain policy above x delta 16/32/64, and\n"
		"                       zblock; print each one's pool pages (peak, mean, end) and\n"
		"                       spanning objects (split over two pool pages: a copy per\n"
		"                       read), marking the kernel's configuration (K) and the\n"
		"                       Pareto-optimal ones (*); --json: one row per configuration.\n"
		"                       --chain, --chain-policy, --delta or --backend narrow the\n"
		"                       sweep to that value\n"
		"  --deferred-held N    free through zs_free_deferred with no worker, keeping up to\n"
		"                       N frees queued (drained when N are, and before a\n"
		"                       compaction), and check the pool at every record against\n"
		"                       a synchronous model pool that frees the same objects when\n"
		"                       the pool drains them: a model check (the kernel ran no\n"
		"                       deferral), its counts compared with the kernel's only at\n"
		"                       records with nothing queued; 1..16777216\n"
		"  --classes-out FILE   write the trace to FILE with libzs's class table after every\n"
		"                       100th record as 'k' lines (what a kernel with\n"
		"                       CONFIG_ZSMALLOC_STAT records when it agrees with libzs)\n"
		"  --plot FILE          with --sweep: write the points (mean pool pages against\n"
		"                       mean spanning objects) and the Pareto front as an SVG\n"
		"                       picture to FILE; --json gives the same rows as data\n"
		"  --progress           with --sweep: a line per configuration on stderr (default:\n"
		"                       when stderr is a terminal, else one every 10 s)\n"
		"  --events FILE        write every decision of the pool to FILE (- for stdout): size\n"
		"                       class chosen, zspages allocated and freed per class, objects\n"
		"                       spanning two pages, compaction moves, pool pages per record\n"
		"                       (docs/trace-format.md, \"Events\"); plain zsmalloc replays\n"
		"  --checked            checked pool mode (every handle validated)\n"
		"  --store              replay through the zram store (zs/zram.h): real pages made\n"
		"                       to compress (lz4) to the recorded sizes\n"
		"  --verify             with --store: read every slot back after each compaction\n"
		"                       and at the end\n"
		"  --context N          preceding operations shown per mismatch, 0..64 (default 8)\n"
		"  --max-report N       mismatches shown in detail, 0..1000 (default 3; 0 when the\n"
		"                       policy is not the kernel's and --strict is not given)\n"
		"  --fail-fast          stop at the first mismatch\n"
		"  --strict             count differences as mismatches (exit 1) even when the\n"
		"                       pool is not configured as the recording kernel\n"
		"  --verbose            print the trace header, pool geometry and every mismatch\n"
		"  --json               print a JSON summary instead of text\n\n"
		"With the kernel's own policy (exhaustive chain search, the trace's chain size,\n"
		"the kernel's class delta) every record must match: exit 0, or 1 on a mismatch.\n"
		"With another policy (--chain-policy heuristic, another --chain or --delta, or\n"
		"--backend zblock) the records are expected to differ: the replay reports how\n"
		"many differ, the memory each side used (kernel vs this policy) and how many\n"
		"objects a read finds split over two pool pages, and exits 0 unless --strict.\n"
		"--profile app is refused: every record is checked against the kernel's page\n"
		"count, which only the kernel profile reproduces page for page.\n"
		"Exit status: 0 no mismatch (or a policy experiment), 1 mismatches, 2 error.\n");
}

/* The trace's '# page_size' header fixes it: a --page-size would be ignored. */
static int refuse_page_size(const char *cmd, const char *opt, const char *arg, void *unused)
{
	(void)arg;
	(void)unused;
	fprintf(stderr, "zs %s: %s: the trace fixes the page size (its '# page_size' header)\n",
		cmd, opt);
	return 2;
}

int replay_parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .chain = -1, .context = 8, .max_report = 3 };
	uint64_t held = 0;
	static const struct opt_hook no_page_size = { refuse_page_size, NULL };
	const struct opt_flag flags[] = {
		{ "verbose", 'v', OPTK_FLAG, &o->verbose, 0, 0, NULL },
		{ "json", 0, OPTK_FLAG, &o->json, 0, 0, NULL },
		{ "checked", 0, OPTK_FLAG, &o->checked, 0, 0, NULL },
		{ "store", 0, OPTK_FLAG, &o->store, 0, 0, NULL },
		{ "verify", 0, OPTK_FLAG, &o->verify, 0, 0, NULL },
		{ "fail-fast", 0, OPTK_FLAG, &o->fail_fast, 0, 0, NULL },
		{ "strict", 0, OPTK_FLAG, &o->strict, 0, 0, NULL },
		{ "sweep", 0, OPTK_FLAG, &o->sweep, 0, 0, NULL },
		{ "context", 0, OPTK_INT, &o->context, 0, 64, NULL },
		{ "max-report", 0, OPTK_INT, &o->max_report, 0, 1000, NULL },
		{ "progress", 0, OPTK_FLAG, &o->progress, 0, 0, NULL },
		{ "events", 0, OPTK_STR, &o->events, 0, 0, NULL },
		{ "plot", 0, OPTK_STR, &o->plot, 0, 0, NULL },
		{ "deferred-held", 0, OPTK_U64, &held, 1, 1u << 24, NULL },
		{ "classes-out", 0, OPTK_STR, &o->classes_out, 0, 0, NULL },
		{ "page-size", 0, OPTK_FN, (void *)&no_page_size, 0, 0, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	unsigned char given[sizeof(flags) / sizeof(flags[0])] = { 0 };
	pool_opts_init(&o->po); /* kernel profile: a trace replays page-exact only on it */
	int rc = opt_parse("replay", argc, argv, flags, REPLAY_OPTS, &o->po, usage, given);
	if (rc)
		return rc;
	o->max_report_set = opt_given(flags, given, &o->max_report);
	o->held = (long)held;
	if (optind < argc)
		o->path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "zs replay: one trace at a time ('%s')\n", argv[optind]);
		return 2;
	}
	if (!o->path) {
		fprintf(stderr, "zs replay: no trace given\n");
		usage(stderr);
		return 2;
	}
	if (o->verify && !o->store) {
		fprintf(stderr, "zs replay: --verify reads slots back through the store: it needs "
				"--store\n");
		return 2;
	}
	if (o->po.set & OPT_CHAIN)
		o->chain = (long)o->po.cfg.max_chain;
	o->deferred = o->po.deferred || o->held;
	o->zblock = !strcmp(o->po.backend, "zblock");
	if (strcmp(o->po.backend, "zsmalloc") && !o->zblock) {
		fprintf(stderr, "zs replay: --backend %s: the replay compares pool pages: zsmalloc or "
				"zblock\n", o->po.backend);
		return 2;
	}
	if (o->zblock && !o->sweep &&
	    (o->po.set & (OPT_CHAIN | OPT_CHAIN_POLICY | OPT_DELTA | OPT_FREE_MODE | OPT_DEFERRED))) {
		fprintf(stderr, "zs replay: --backend zblock: --chain, --chain-policy, --delta, "
				"--free-mode and --deferred are zsmalloc's (zblock's classes are fixed)\n");
		return 2;
	}
	if (o->sweep && (o->store || o->verify || o->strict || o->fail_fast)) {
		fprintf(stderr, "zs replay: --sweep runs plain replays: --store, --verify, --strict and "
				"--fail-fast do not apply\n");
		return 2;
	}
	if (o->held && (o->sweep || o->store || o->zblock || o->events)) {
		fprintf(stderr, "zs replay: --deferred-held checks a plain zsmalloc replay against its "
				"model: not with --sweep, --store, --backend zblock or --events\n");
		return 2;
	}
	if (o->held && o->po.cfg.free_mode == ZS_FREE_PERCPU_DEFERRED) {
		fprintf(stderr, "zs replay: --deferred-held holds frees in the deferred queue; "
				"--free-mode percpu-deferred frees from its own per-CPU buffers\n");
		return 2;
	}
	if (o->classes_out && (o->sweep || o->store || o->zblock)) {
		fprintf(stderr, "zs replay: --classes-out writes a plain zsmalloc replay's class "
				"tables: not with --sweep, --store or --backend zblock\n");
		return 2;
	}
	if (o->plot && !o->sweep) {
		fprintf(stderr, "zs replay: --plot draws a sweep: give --sweep too\n");
		return 2;
	}
	if (o->progress && !o->sweep) {
		fprintf(stderr, "zs replay: --progress applies to --sweep only (one replay prints "
				"no progress lines)\n");
		return 2;
	}
	if (o->events && (o->sweep || o->store || o->zblock || o->deferred)) {
		fprintf(stderr, "zs replay: --events lists a plain zsmalloc replay's decisions: not "
				"with --sweep, --store, --backend zblock or --deferred\n");
		return 2;
	}
	if (o->events && !strcmp(o->events, "-") && (o->json || !strcmp(o->path, "-"))) {
		fprintf(stderr, "zs replay: --events -: stdout is taken (by --json or the trace)\n");
		return 2;
	}
	if (o->sweep && !strcmp(o->path, "-")) {
		fprintf(stderr, "zs replay: --sweep reads the trace once per configuration: give a "
				"file, not -\n");
		return 2;
	}
	return 0;
}
