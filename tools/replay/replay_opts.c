/*
 * zs replay's options: the help text, the parser and the checks of which
 * options go together.  Apart from the driver (cmd_replay.c) because they
 * are the command's interface, one long table that changes with every new
 * option, while the driver changes with the replay's semantics; nothing here
 * touches a pool or a trace.
 */
#include <getopt.h>
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

int replay_parse(int argc, char **argv, struct opts *o)
{
	enum { O_VERBOSE = 1, O_JSON, O_CHECKED, O_STORE, O_VERIFY, O_FAILFAST, O_STRICT, O_CONTEXT,
	       O_MAXREP, O_SWEEP, O_PROGRESS, O_EVENTS, O_PLOT, O_HELD, O_CLASSES_OUT };
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "json", no_argument, NULL, O_JSON },
		{ "checked", no_argument, NULL, O_CHECKED },
		{ "store", no_argument, NULL, O_STORE },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "fail-fast", no_argument, NULL, O_FAILFAST },
		{ "strict", no_argument, NULL, O_STRICT },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "max-report", required_argument, NULL, O_MAXREP },
		{ "sweep", no_argument, NULL, O_SWEEP },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "plot", required_argument, NULL, O_PLOT },
		{ "deferred-held", required_argument, NULL, O_HELD },
		{ "classes-out", required_argument, NULL, O_CLASSES_OUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct opts){ .chain = -1, .context = 8, .max_report = 3 };
	int opt;
	uint64_t v;
	pool_opts_init(&o->po); /* kernel profile: a trace replays page-exact only on it */
	optind = 1;
	while ((opt = getopt_long(argc, argv, "hv", lopts, NULL)) != -1) {
		if (opt == OPTC_PAGE_SIZE) {
			fprintf(stderr, "zs replay: --page-size: the trace fixes the page size (its "
					"'# page_size' header)\n");
			return 2;
		}
		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt_pool_arg("replay", REPLAY_OPTS, opt, optarg, &o->po))
				return 2;
			continue;
		}
		switch (opt) {
		case 'h': usage(stdout); return 1;
		case 'v':
		case O_VERBOSE: o->verbose = 1; break;
		case O_JSON: o->json = 1; break;
		case O_CHECKED: o->checked = 1; break;
		case O_STORE: o->store = 1; break;
		case O_VERIFY: o->verify = 1; break;
		case O_FAILFAST: o->fail_fast = 1; break;
		case O_STRICT: o->strict = 1; break;
		case O_SWEEP: o->sweep = 1; break;
		case O_PROGRESS: o->progress = 1; break;
		case O_EVENTS: o->events = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_CLASSES_OUT: o->classes_out = optarg; break;
		case O_HELD:
			if (opt_u64("replay", "--deferred-held", optarg, 1, 1u << 24, &v))
				return 2;
			o->held = (long)v;
			break;
		case O_CONTEXT:
			if (opt_u64("replay", "--context", optarg, 0, 64, &v))
				return 2;
			o->context = (int)v;
			break;
		case O_MAXREP:
			if (opt_u64("replay", "--max-report", optarg, 0, 1000, &v))
				return 2;
			o->max_report = (int)v;
			o->max_report_set = 1;
			break;
		default: return opt_bad("replay", argc, argv);
		}
	}
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
