/*
 * zs replay --sweep: "which CONFIG_ZSMALLOC_CHAIN_SIZE for my workload".
 * Replays one trace once per pool configuration (zsmalloc chain 1..16 x
 * every registered chain policy x class delta 16/32/64, and zblock) and sets each one's pool
 * pages against its spanning objects, the two costs a chain size trades:
 * longer chains waste less tail space per zspage but split more objects over
 * two pages, and every read of a split object is a copy.  Each point is a
 * whole ordinary replay (replay_file), so any row can be rerun on its own
 * with the options it names.  The runs go one after another: the machine
 * the sweep runs on is usually also the one being sized, and a point takes
 * well under a second on the committed traces.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "replay.h"
#include "util.h"

struct point {
	int zblock;
	unsigned chain, delta;
	enum zs_chain_policy policy;
	int kernel, pareto;
	long records, mismatches;
	long shadow_diff; /* zswap-traces: records where the spanning count's shadow was off */
	uint64_t pages_peak, pages_end, span_peak, span_end;
	double pages_mean, span_mean, span_bytes_mean, secs;
	uint64_t kpages_peak, kpages_end; /* the trace's own (the kernel's) */
	double kpages_mean;
	int slack_known;          /* the replay could name the classes it used */
	unsigned slack_classes;   /* physical classes used */
	uint64_t slack_pages;     /* their pages per zspage, summed (replay_class_slack) */
};

/*
 * The small-trace rule.  Every class in use keeps up to one partly used
 * zspage, so a pool can hold up to the sum of its used classes' pages per
 * zspage as tail slack, whatever the workload.  On a small trace that sum is
 * a sizeable share of the pool and shorter chains win by shrinking it; on a
 * large one it is noise and the per-object tail waste decides.  When the
 * kernel configuration's bound exceeds SMALL_SLACK_PCT of its mean pool
 * pages, the ranking says more about the trace's size than about the
 * workload and the sweep says so.  Calibrated on lz4 recordings of /usr
 * files: 8,000 pages, 10.5-15.1% (chain 5 ranked first at 0.965x the
 * kernel's mean pages); 200,000 pages, 0.7% (chains 5-16 within 1% of each
 * other, the kernel's chain 8 among them); the committed zram traces, all
 * under 7,000 pool pages, 15-109%.
 */
#define SMALL_SLACK_PCT 2.0

static double slack_pct(const struct point *k)
{
	return k->kpages_mean > 0 ? 100.0 * (double)k->slack_pages / k->kpages_mean : 100.0;
}

static int too_small(const struct point *k)
{
	return k->slack_known && slack_pct(k) > SMALL_SLACK_PCT;
}

/* The options of one point: a quiet plain replay, nothing kept for a report. */
static struct opts point_opts(const struct opts *base, int zblock, long chain,
			      enum zs_chain_policy policy, unsigned delta, int quiet)
{
	struct opts o = *base;
	o.sweep = 0;
	o.json = o.verbose = o.fail_fast = o.strict = o.store = o.verify = 0;
	o.context = 0;
	o.max_report = 0;
	o.max_report_set = 1;
	o.quiet = quiet;
	o.zblock = zblock;
	o.po.backend = zblock ? "zblock" : "zsmalloc";
	o.chain = chain;
	o.po.cfg.chain_policy = policy;
	o.po.cfg.class_delta = delta;
	return o;
}

static int run_point(const struct opts *o, struct point *p)
{
	struct replay *R;
	if (replay_file(o, &R))
		return 2;
	double n = (double)R->records;
	p->zblock = o->zblock;
	p->chain = replay_chain(R);
	p->delta = replay_delta(R);
	p->policy = o->po.cfg.chain_policy;
	p->kernel = R->o.kernel_policy;
	p->records = R->records;
	p->mismatches = R->mismatches;
	p->pages_peak = R->zmem_peak;
	p->pages_mean = (double)R->zmem_sum / n;
	p->pages_end = R->zmem_end;
	p->span_peak = R->span_peak;
	p->span_mean = (double)R->span_sum / n;
	p->span_end = R->span_end;
	p->span_bytes_mean = (double)R->span_bytes_sum / n;
	p->secs = R->secs;
	p->shadow_diff = R->shadow_diff;
	p->kpages_peak = R->kmem_peak;
	p->kpages_mean = (double)R->kmem_sum / n;
	p->kpages_end = R->kmem_end;
	p->slack_known = !replay_class_slack(R, &p->slack_classes, &p->slack_pages);
	replay_free(R);
	return 0;
}

/* A point is Pareto-optimal when no other has at most its mean pages and at
 * most its mean spanning objects, and less of one of them. */
static void mark_pareto(struct point *pt, int n)
{
	for (int i = 0; i < n; i++) {
		pt[i].pareto = 1;
		for (int j = 0; j < n && pt[i].pareto; j++)
			if (pt[j].pages_mean <= pt[i].pages_mean && pt[j].span_mean <= pt[i].span_mean &&
			    (pt[j].pages_mean < pt[i].pages_mean || pt[j].span_mean < pt[i].span_mean))
				pt[i].pareto = 0;
	}
}

static int by_pages(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	if (x->pages_mean != y->pages_mean)
		return x->pages_mean < y->pages_mean ? -1 : 1;
	if (x->span_mean != y->span_mean)
		return x->span_mean < y->span_mean ? -1 : 1;
	if (x->zblock != y->zblock)
		return x->zblock - y->zblock;
	if (x->chain != y->chain)
		return x->chain < y->chain ? -1 : 1;
	if (x->policy != y->policy)
		return (int)x->policy - (int)y->policy;
	return x->delta < y->delta ? -1 : x->delta > y->delta;
}

static void print_json_rows(const struct opts *o, const struct point *pt, int n,
			    const struct point *k)
{
	struct json js;
	json_init(&js, stdout, 1);
	json_arr(&js);
	for (int i = 0; i < n; i++) {
		const struct point *p = &pt[i];
		json_obj(&js);
		json_kstr(&js, "trace", o->path);
		json_kstr(&js, "backend", p->zblock ? "zblock" : "zsmalloc");
		if (p->zblock) {
			json_key(&js, "chain");
			json_null(&js);
			json_key(&js, "chain_policy");
			json_null(&js);
			json_key(&js, "delta");
			json_null(&js);
		} else {
			json_kuint(&js, "chain", p->chain);
			json_kstr(&js, "chain_policy", zs_chain_policy_name(p->policy));
			json_kuint(&js, "delta", p->delta);
		}
		json_kbool(&js, "kernel_config", p->kernel);
		json_kbool(&js, "pareto", p->pareto);
		json_kint(&js, "records", p->records);
		json_kint(&js, "differing_records", p->mismatches);
		json_kuint(&js, "pages_peak", p->pages_peak);
		json_kfixed(&js, "pages_mean", p->pages_mean, 1);
		json_kuint(&js, "pages_end", p->pages_end);
		json_kfixed(&js, "pages_mean_vs_kernel",
			    k->pages_mean > 0 ? p->pages_mean / k->pages_mean : 0.0, 4);
		json_kuint(&js, "spanning_peak", p->span_peak);
		json_kfixed(&js, "spanning_mean", p->span_mean, 1);
		json_kuint(&js, "spanning_end", p->span_end);
		json_kfixed(&js, "spanning_bytes_mean", p->span_bytes_mean, 1);
		json_kfixed(&js, "seconds", p->secs, 3);
		json_kint(&js, "spanning_inexact_records", p->shadow_diff);
		/* The trace's, the same on every row: whether its ranking carries. */
		json_kbool(&js, "trace_too_small", too_small(k));
		json_obj_end(&js);
	}
	json_arr_end(&js);
	json_done(&js);
}

static void print_table(const struct opts *o, const struct point *pt, int n,
			const struct point *k, double secs)
{
	printf("%s: sweep of %d configurations, %ld records each, %.1f s\n", o->path, n,
	       k->records, secs);
	printf("  kernel (the trace's records): pool pages peak %" PRIu64 ", mean %.1f, end %" PRIu64
	       "\n", k->kpages_peak, k->kpages_mean, k->kpages_end);
	printf("  spanning: live objects whose read finds them split over two pool pages (one\n"
	       "  memcpy each read), over the records as the pages are; zblock never splits one.\n"
	       "  K: the recording kernel's configuration.  *: Pareto-optimal (no other row has\n"
	       "  both fewer mean pages and fewer mean spanning objects).\n\n");
	printf("     %-8s %5s %-10s %5s | %9s %10s %9s %7s | %9s %10s %9s\n", "backend", "chain",
	       "policy", "delta", "pages peak", "mean", "end", "mean/K", "span peak", "mean", "end");
	for (int i = 0; i < n; i++) {
		const struct point *p = &pt[i];
		char chain[8] = "-", delta[8] = "-";
		if (!p->zblock) {
			snprintf(chain, sizeof(chain), "%u", p->chain);
			snprintf(delta, sizeof(delta), "%u", p->delta);
		}
		printf("  %c%c %-8s %5s %-10s %5s | %9" PRIu64 " %10.1f %9" PRIu64 " %7.4f | %9" PRIu64
		       " %10.1f %9" PRIu64 "\n",
		       p->kernel ? 'K' : ' ', p->pareto ? '*' : ' ', p->zblock ? "zblock" : "zsmalloc",
		       chain, p->zblock ? "-" : zs_chain_policy_name(p->policy), delta, p->pages_peak,
		       p->pages_mean, p->pages_end,
		       k->pages_mean > 0 ? p->pages_mean / k->pages_mean : 0.0, p->span_peak,
		       p->span_mean, p->span_end);
	}
	long inexact = 0;
	for (int i = 0; i < n; i++)
		inexact += pt[i].shadow_diff > 0;
	if (inexact)
		printf("  warning: on %ld configurations the spanning count's shadow pool held other "
		       "pages than zswap's: their spanning columns are not exact\n", inexact);
	if (too_small(k))
		printf("\n  warning: trace too small for this ranking to carry to a larger workload: its "
		       "%u size\n  classes keep up to one partly used zspage each, up to %" PRIu64
		       " pages (%.1f%% of the\n  kernel's mean pool pages; the rule is %.0f%%), which "
		       "favours short chains.\n  Record more pages (zs record --pages N) until "
		       "that share is under %.0f%%.\n",
		       k->slack_classes, k->slack_pages, slack_pct(k), SMALL_SLACK_PCT, SMALL_SLACK_PCT);
	else if (k->slack_known)
		printf("\n  trace size: %u size classes, partly used zspages up to %" PRIu64
		       " pages, %.1f%% of the\n  kernel's mean pool pages (under the %.0f%% rule: "
		       "the ranking is the workload's)\n",
		       k->slack_classes, k->slack_pages, slack_pct(k), SMALL_SLACK_PCT);
}

/* The text of one point, for the picture's labels and hover titles. */
static void point_name(const struct point *p, char *buf, size_t len)
{
	if (p->zblock)
		snprintf(buf, len, "zblock");
	else
		snprintf(buf, len, "chain %u %s delta %u", p->chain, zs_chain_policy_name(p->policy),
			 p->delta);
}

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++)
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
}

/*
 * --plot: the sweep as a picture a reviewer can read at a glance, mean pool
 * pages (x) against mean spanning objects (y), one mark per configuration
 * (a square for zblock), the Pareto front joined left to right, the
 * kernel's configuration ringed.  Plain SVG written by hand: no plotting
 * library to depend on, and every browser shows it.  Each mark's class
 * ("point", "point pareto", "point kernel") lets a test count them; its
 * <title> names the configuration.  pt is sorted by mean pages.
 */
static int write_plot(const char *path, const struct opts *o, const struct point *pt, int n)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "zs replay: --plot %s: %s\n", path, strerror(errno));
		return 2;
	}
	const double W = 760, H = 500, L = 80, R = 230, T = 40, B = 60;
	double x0 = pt[0].pages_mean, x1 = x0, y0 = pt[0].span_mean, y1 = y0;
	for (int i = 1; i < n; i++) {
		x0 = pt[i].pages_mean < x0 ? pt[i].pages_mean : x0;
		x1 = pt[i].pages_mean > x1 ? pt[i].pages_mean : x1;
		y0 = pt[i].span_mean < y0 ? pt[i].span_mean : y0;
		y1 = pt[i].span_mean > y1 ? pt[i].span_mean : y1;
	}
	if (x1 - x0 < 1e-9)
		x1 = x0 + 1;
	if (y1 - y0 < 1e-9)
		y1 = y0 + 1;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (H - B - ((v) - y0) / (y1 - y0) * (H - T - B))
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"22\" "
		   "font-size=\"14\">zs replay --sweep: ", L);
	xml_text(f, o->path);
	fprintf(f, " (%d configurations)</text>\n", n);
	/* axes, with the extremes as ticks: the table has the exact figures */
	fprintf(f, "<g stroke=\"black\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
		L, H - B, W - R, H - B, L, H - B, L, (double)T);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", L, H - B + 16, x0);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", W - R, H - B + 16,
		x1);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">mean pool pages</text>\n",
		(L + W - R) / 2, H - 18);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", L - 6, H - B + 4, y0);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", L - 6, T + 4, y1);
	fprintf(f, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">mean "
		   "spanning objects</text>\n", (T + H - B) / 2);
	/* the front, left to right (pt is sorted by pages; a front's spans fall as pages rise) */
	fprintf(f, "<polyline class=\"front\" fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"1.5\" "
		   "points=\"");
	for (int i = 0; i < n; i++)
		if (pt[i].pareto)
			fprintf(f, "%.1f,%.1f ", PX(pt[i].pages_mean), PY(pt[i].span_mean));
	fprintf(f, "\"/>\n");
	int labels = 0;
	for (int i = 0; i < n; i++) {
		const struct point *p = &pt[i];
		char name[64];
		point_name(p, name, sizeof name);
		double x = PX(p->pages_mean), y = PY(p->span_mean);
		const char *fill = p->pareto ? "#1f5fbf" : "#9a9a9a";
		fprintf(f, "<g class=\"point%s%s\"><title>%s: pages %.1f, spanning %.1f</title>",
			p->pareto ? " pareto" : "", p->kernel ? " kernel" : "", name, p->pages_mean,
			p->span_mean);
		if (p->zblock)
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"/>",
				x - 3.5, y - 3.5, fill);
		else
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", x, y, fill);
		if (p->kernel)
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"none\" "
				   "stroke=\"#c0392b\" stroke-width=\"2\"/>", x, y);
		fprintf(f, "</g>\n");
		/* the front and the kernel are named in a legend at the right, in front order */
		if (p->pareto || p->kernel) {
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s%s</text>\n", W - R + 16,
				T + 14.0 * labels, p->kernel ? "#c0392b" : "#1f5fbf",
				p->kernel ? "K " : "", name);
			labels++;
		}
	}
	fprintf(f, "</svg>\n");
#undef PX
#undef PY
	if (fclose(f)) {
		fprintf(stderr, "zs replay: --plot %s: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}

int replay_sweep(const struct opts *o)
{
	static const unsigned deltas[] = { 16, 32, 64 };
	enum { NDELTA = sizeof(deltas) / sizeof(deltas[0]) };
	int only_zblock = o->zblock && (o->po.set & OPT_BACKEND);
	int no_zblock = !o->zblock && (o->po.set & OPT_BACKEND);
	double t0 = tool_now(), last = t0;
	int show = o->progress || opt_progress_default(), shown = 0;

	/* The kernel's configuration first: the header it reads fixes the rest. */
	struct opts ko = point_opts(o, 0, -1, ZS_CHAIN_EXHAUSTIVE, 0, 0);
	struct point kp;
	memset(&kp, 0, sizeof(kp));
	if (run_point(&ko, &kp))
		return 2;

	/* Sized from the registry: every chain policy is a column of the grid. */
	int ngrid = ZS_MAX_CHAIN * ZS_CHAIN_POLICY_COUNT * NDELTA + 1, n = 0;
	struct point *pt = calloc((size_t)ngrid + 1, sizeof(*pt));
	struct opts *grid = calloc((size_t)ngrid, sizeof(*grid));
	if (!pt || !grid) {
		fprintf(stderr, "zs replay: out of memory\n");
		free(pt);
		free(grid);
		return 2;
	}
	pt[n++] = kp;
	/* The grid, narrowed by the options given with --sweep. */
	int ng = 0;
	if (!only_zblock)
		for (unsigned c = 1; c <= ZS_MAX_CHAIN; c++) {
			if ((o->po.set & OPT_CHAIN) && c != o->po.cfg.max_chain)
				continue;
			for (int pi = 0; pi < ZS_CHAIN_POLICY_COUNT; pi++) {
				enum zs_chain_policy pol = (enum zs_chain_policy)pi;
				if ((o->po.set & OPT_CHAIN_POLICY) && pol != o->po.cfg.chain_policy)
					continue;
				for (int di = 0; di < NDELTA; di++) {
					unsigned d = (o->po.set & OPT_DELTA) ? o->po.cfg.class_delta
									     : deltas[di];
					if ((o->po.set & OPT_DELTA) && di > 0)
						break;
					if (c == kp.chain && pol == ZS_CHAIN_EXHAUSTIVE && d == kp.delta)
						continue; /* the kernel's point, already run */
					grid[ng++] = point_opts(o, 0, (long)c, pol, d, 1);
				}
			}
		}
	if (!no_zblock)
		grid[ng++] = point_opts(o, 1, -1, ZS_CHAIN_EXHAUSTIVE, 0, 1);

	for (int i = 0; i < ng; i++) {
		double now = tool_now();
		/* Quiet on short runs; on a terminal (or --progress) every point, else
		 * a line every 10 s so a long sweep in a log is not taken for a hang. */
		if (show || now - last >= 10.0) {
			if (grid[i].zblock)
				progress_line("zs replay --sweep: %d/%d zblock, %.1f s", i + 2, ng + 1,
					      now - t0);
			else
				progress_line("zs replay --sweep: %d/%d chain %ld %s delta %u, %.1f s",
					      i + 2, ng + 1, grid[i].chain,
					      zs_chain_policy_name(grid[i].po.cfg.chain_policy),
					      grid[i].po.cfg.class_delta, now - t0);
			last = now;
			shown = 1;
		}
		if (run_point(&grid[i], &pt[n])) {
			if (shown)
				progress_done();
			free(pt);
			free(grid);
			return 2;
		}
		n++;
	}
	if (shown)
		progress_done();
	double secs = tool_now() - t0;

	mark_pareto(pt, n);
	qsort(pt, (size_t)n, sizeof(*pt), by_pages);
	if (o->json)
		print_json_rows(o, pt, n, &kp);
	else
		print_table(o, pt, n, &kp, secs);
	int rc = o->plot ? write_plot(o->plot, o, pt, n) : 0;
	if (too_small(&kp))
		fprintf(stderr, "zs replay: warning: %s is too small for the sweep's ranking to carry: "
				"partly used zspages can hold %.1f%% of its mean pool pages (over %.0f%%)\n",
			o->path, slack_pct(&kp), SMALL_SLACK_PCT);
	if (kp.mismatches) {
		/* The sweep's pages are libzs's; they stand for the kernel's only if the
		 * kernel's own configuration replays exactly. */
		fprintf(stderr, "zs replay: the kernel's configuration (chain %u, exhaustive, delta %u) "
				"differs from the trace on %ld of %ld records: run `zs replay %s` for "
				"the mismatches\n",
			kp.chain, kp.delta, kp.mismatches, kp.records, o->path);
		rc = rc ? rc : 1;
	}
	free(pt);
	free(grid);
	return rc;
}
