/*
 * Shared helpers for the bench/ programs: monotonic clock, a small seeded
 * PRNG and the synthetic compressed-size distribution, median of repeated
 * rounds, JSON output (through the writer the CLI uses, tools/lib/json.h) and
 * the machine description every result is printed with.  Header-only
 * (static functions); benches use the public headers and tools/lib/json.h.
 *
 * Method shared by all benchmarks: the competitors are measured in the same
 * process, interleaved round by round (the order rotates each round), and
 * each result is the median over the rounds.  Ratios are computed from the
 * medians.  This machine is small and shared, so single numbers are noisy;
 * the ratios measured side by side are the meaningful output.
 */
#ifndef ZS_BENCH_COMMON_H
#define ZS_BENCH_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "parse.h"
#include "zs/backend.h"
#include "zs/zsmalloc.h"

static inline double bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* xorshift64*: deterministic, seeded, good enough for size draws. */
static inline uint64_t bench_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/*
 * Synthetic "compressed 4K page" size, 200..3600 bytes.  Shape (not measured,
 * chosen to resemble what lz4 does to anonymous memory): the sum of two
 * uniform draws gives a triangle peaking near 1900 B, plus 10% of small,
 * highly compressible pages (200..600 B).  Mean about 1750 B.
 */
static inline unsigned bench_comp_size(uint64_t *s)
{
	uint64_t r = bench_rand(s);
	if (r % 10 == 0)
		return 200 + (unsigned)((r >> 8) % 401);
	unsigned a = (unsigned)((r >> 8) % 1701), b = (unsigned)((r >> 32) % 1701);
	return 200 + a + b;
}

/*
 * The release benches' pool contents: bench_comp_size objects from one fixed
 * seed, until `bytes` of them or `max_objs`, handles into h.  Returns how
 * many; exits on an allocation failure (the measurement would be void).
 */
static inline size_t bench_fill_pool(struct zs_pool *pool, unsigned long *h, size_t bytes,
				     size_t max_objs)
{
	uint64_t seed = 0x243F6A8885A308D3ULL;
	size_t n = 0, sum = 0;
	while (sum < bytes && n < max_objs) {
		unsigned sz = bench_comp_size(&seed);
		h[n] = zs_malloc(pool, sz);
		if (ZS_IS_ERR(h[n])) {
			fprintf(stderr, "zs_malloc failed\n");
			exit(1);
		}
		sum += sz;
		n++;
	}
	return n;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of n values (sorts a copy). */
static inline double bench_median(const double *v, int n)
{
	double tmp[256];
	if (n <= 0)
		return 0;
	if (n > 256)
		n = 256;
	memcpy(tmp, v, (size_t)n * sizeof(double));
	qsort(tmp, (size_t)n, sizeof(double), bench_cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static inline double bench_min(const double *v, int n)
{
	double m = n ? v[0] : 0;
	for (int i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

static inline double bench_max(const double *v, int n)
{
	double m = n ? v[0] : 0;
	for (int i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* CPU model from /proc/cpuinfo ("unknown" when absent). */
static inline void bench_cpu_model(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = 0;
				snprintf(buf, len, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}

/* ---- JSON: one object per run, written with the shared writer (tools/lib/json.h) ---- */

struct bench_json {
	int enabled;
	struct json w;   /* the writer, for nested values: bench_json_w() */
};

/* The writer for nested values (arrays of rows); NULL without --json. */
static inline struct json *bench_json_w(struct bench_json *j)
{
	return j->enabled ? &j->w : NULL;
}

static inline void bench_json_begin(struct bench_json *j, const char *bench)
{
	if (!j->enabled)
		return;
	char cpu[256];
	struct utsname u;
	bench_cpu_model(cpu, sizeof(cpu));
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");
	double la[1] = {-1};
	if (getloadavg(la, 1) < 1)
		la[0] = -1;
	json_init(&j->w, stdout, 1);
	json_obj(&j->w);
	json_kstr(&j->w, "bench", bench);
	json_kint(&j->w, "nproc", sysconf(_SC_NPROCESSORS_ONLN));
	json_kstr(&j->w, "cpu", cpu);
	json_kstr(&j->w, "kernel", u.release);
	json_kfixed(&j->w, "loadavg_start", la[0], 2);
}

static inline void bench_json_num(struct bench_json *j, const char *key, double v)
{
	if (j->enabled)
		json_knum(&j->w, key, v);
}

static inline void bench_json_str(struct bench_json *j, const char *key, const char *v)
{
	if (j->enabled)
		json_kstr(&j->w, key, v);
}

static inline void bench_json_end(struct bench_json *j)
{
	if (!j->enabled)
		return;
	json_obj_end(&j->w);
	json_done(&j->w);
}

/* ---- options: one table per benchmark, one parser for all of them ---- */

/*
 * Each benchmark describes its options in a table (struct bench_opt, built
 * with the BENCH_OPT_* macros, ended by BENCH_OPT_END) and hands it to
 * bench_parse().  The usage text is printed from the same table, so it
 * cannot disagree with what is accepted, and every value goes through the
 * checked parsers of tools/lib/parse.h: a typo must not run a different
 * benchmark than the one asked for.  The spelling is the benches' own
 * (`--opt VALUE`, no `--opt=VALUE`, no abbreviations), as before the table.
 */
enum bench_opt_kind {
	BENCH_FLAG,      /* int: set to 1 */
	BENCH_U64,       /* a whole number in lo..hi, into an integer of `size` bytes */
	BENCH_LIST,      /* a comma list of at most `max` whole numbers in lo..hi, into int[]; *n: count */
	BENCH_STR,       /* const char *: the text as given */
	BENCH_CHOICE,    /* int: the index of the value in names[] */
	BENCH_NAMESET,   /* unsigned: a comma list of names[] as a bit mask (bit i: names[i]) */
	BENCH_FREE_MODE, /* enum zs_free_mode: the library's names (parse_free_mode) */
	BENCH_ARGS,      /* char **: the non-option arguments, anywhere, at most `max`; *n: count */
	BENCH_REST,      /* char **: the first non-option argument and everything after it */
};

struct bench_opt {
	const char *name;         /* "--mib"; BENCH_ARGS/REST: the word in the usage ("PATH") */
	enum bench_opt_kind kind;
	void *dst;
	size_t size;              /* BENCH_U64: the size of *dst (4 or 8) */
	unsigned long long lo, hi;
	int max;                  /* BENCH_LIST, BENCH_ARGS: the most items */
	int *n;                   /* BENCH_LIST, BENCH_ARGS, BENCH_REST: items found */
	const char *const *names; /* BENCH_CHOICE, BENCH_NAMESET: NULL-terminated */
	const char *arg;          /* the value's name in the usage ("M", "1,2") */
	const char *help;
};

/* The pointer casts check the variable's type: a wrong one is a compile error under -Werror. */
#define BENCH_OPT_FLAG(nm, var, hlp) \
	{ .name = nm, .kind = BENCH_FLAG, .dst = (int *){ &(var) }, .help = hlp }
#define BENCH_OPT_U64(nm, var, l, h, a, hlp) \
	{ .name = nm, .kind = BENCH_U64, .dst = &(var), .size = sizeof(var), .lo = l, .hi = h, \
	  .arg = a, .help = hlp }
#define BENCH_OPT_LIST(nm, arr, count, l, h, mx, a, hlp) \
	{ .name = nm, .kind = BENCH_LIST, .dst = (int *){ arr }, .n = &(count), .lo = l, .hi = h, \
	  .max = mx, .arg = a, .help = hlp }
#define BENCH_OPT_STR(nm, var, a, hlp) \
	{ .name = nm, .kind = BENCH_STR, .dst = (const char **){ &(var) }, .arg = a, .help = hlp }
#define BENCH_OPT_CHOICE(nm, var, nms, hlp) \
	{ .name = nm, .kind = BENCH_CHOICE, .dst = (int *){ &(var) }, .names = nms, .help = hlp }
#define BENCH_OPT_NAMESET(nm, var, nms, hlp) \
	{ .name = nm, .kind = BENCH_NAMESET, .dst = (unsigned *){ &(var) }, .names = nms, .help = hlp }
#define BENCH_OPT_FREE_MODE(nm, var, hlp) \
	{ .name = nm, .kind = BENCH_FREE_MODE, .dst = (enum zs_free_mode *){ &(var) }, .help = hlp }
#define BENCH_OPT_ARGS(word, var, count, mx, hlp) \
	{ .name = word, .kind = BENCH_ARGS, .dst = (char ***){ &(var) }, .n = &(count), .max = mx, \
	  .help = hlp }
#define BENCH_OPT_REST(word, var, count, hlp) \
	{ .name = word, .kind = BENCH_REST, .dst = (char ***){ &(var) }, .n = &(count), .help = hlp }
#define BENCH_OPT_END { .name = NULL }
/* --quick, --json and --rounds N (1..64), which every benchmark takes. */
#define BENCH_OPTS_COMMON(quick, rounds, js)                                                 \
	BENCH_OPT_FLAG("--quick", quick, "the short run: fewer rounds, smaller inputs"),        \
	BENCH_OPT_FLAG("--json", (js).enabled, "one JSON document on stdout, not the tables"),  \
	BENCH_OPT_U64("--rounds", rounds, 1, 64, "N", "times to repeat each measurement")

static inline int bench_is_arg_kind(enum bench_opt_kind k)
{
	return k == BENCH_ARGS || k == BENCH_REST;
}

/* The value's name in the usage: the table's, or the names joined ('|': one of, ',': a list). */
static inline const char *bench_opt_arg(const struct bench_opt *o, char *buf, size_t len)
{
	const char *const *names = o->kind == BENCH_FREE_MODE ? zs_free_mode_names() : o->names;
	const char *sep = o->kind == BENCH_NAMESET ? "," : "|";
	size_t n = 0;

	if (!names)
		return o->arg ? o->arg : "";
	buf[0] = 0;
	for (; *names && n < len; names++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? sep : "", *names);
	return buf;
}

/* The accepted range, for the help lines ("" when the value's name says it all). */
static inline const char *bench_opt_range(const struct bench_opt *o, char *buf, size_t len)
{
	buf[0] = 0;
	if (o->kind == BENCH_U64)
		snprintf(buf, len, " (%llu..%llu)", o->lo, o->hi);
	else if (o->kind == BENCH_LIST)
		snprintf(buf, len, " (at most %d numbers, each %llu..%llu)", o->max, o->lo, o->hi);
	else if (o->kind == BENCH_ARGS)
		snprintf(buf, len, " (at most %d)", o->max);
	else if (o->kind == BENCH_REST)
		snprintf(buf, len, " (all after the first %s are %ss, options too)", o->name, o->name);
	return buf;
}

#define BENCH_HELP_INDENT "                        " /* "  " and the 22 columns of the option */

/* The usage line (wrapped), then one line per option with its help and range. */
static inline void bench_usage(const char *prog, const struct bench_opt *opts)
{
	char arg[256], range[96], item[320];
	size_t col = (size_t)fprintf(stderr, "usage: %s", prog);

	for (const struct bench_opt *o = opts; o->name; o++) {
		if (bench_is_arg_kind(o->kind))
			snprintf(item, sizeof(item), " [%s...]", o->name);
		else if (o->kind == BENCH_FLAG)
			snprintf(item, sizeof(item), " [%s]", o->name);
		else
			snprintf(item, sizeof(item), " [%s %s]", o->name, bench_opt_arg(o, arg, sizeof(arg)));
		if (col + strlen(item) > 80)
			col = (size_t)fprintf(stderr, "\n      ");
		col += (size_t)fprintf(stderr, "%s", item);
	}
	fprintf(stderr, "\n");
	for (const struct bench_opt *o = opts; o->name; o++) {
		if (bench_is_arg_kind(o->kind) || o->kind == BENCH_FLAG)
			snprintf(item, sizeof(item), "%s", o->name);
		else
			snprintf(item, sizeof(item), "%s %s", o->name, bench_opt_arg(o, arg, sizeof(arg)));
		/* a long option name gets its help on the next line, in the column */
		fprintf(stderr, "  %-22s%s %s%s\n", item, strlen(item) > 22 ? "\n" BENCH_HELP_INDENT : "",
			o->help ? o->help : "", bench_opt_range(o, range, sizeof(range)));
	}
}

/* A whole number in lo..hi (parse_u64), or 2 after one message naming the option and the range. */
static inline int bench_opt_u64(const char *prog, const char *opt, const char *s,
				unsigned long long lo, unsigned long long hi, uint64_t *out)
{
	if (parse_u64(s, out) || *out < lo || *out > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a whole number in %llu..%llu\n", prog, opt, s, lo,
			hi);
		return 2;
	}
	return 0;
}

/* The index of s[0..len) in names, or -1. */
static inline int bench_name_index(const char *const *names, const char *s, size_t len)
{
	for (int k = 0; names[k]; k++)
		if (strlen(names[k]) == len && !strncmp(names[k], s, len))
			return k;
	return -1;
}

/* Store one option's value; 0, or 2 after one message naming the option and what it accepts. */
static inline int bench_opt_value(const char *prog, const struct bench_opt *o, const char *s)
{
	uint64_t v;
	int k;

	switch (o->kind) {
	case BENCH_U64:
		if (bench_opt_u64(prog, o->name, s, o->lo, o->hi, &v))
			return 2;
		if (o->size == sizeof(uint32_t))
			*(uint32_t *)o->dst = (uint32_t)v; /* the table's hi keeps v in the type */
		else
			*(uint64_t *)o->dst = v;
		return 0;
	case BENCH_LIST: {
		int *out = o->dst, count = 0;
		char item[32];
		while (*s) {
			size_t len = strcspn(s, ",");
			if (count == o->max || len == 0 || len >= sizeof(item)) {
				fprintf(stderr, "%s: %s: '%s' is not a list of at most %d numbers in %llu..%llu\n",
					prog, o->name, s, o->max, o->lo, o->hi);
				return 2;
			}
			memcpy(item, s, len);
			item[len] = 0;
			if (bench_opt_u64(prog, o->name, item, o->lo, o->hi, &v))
				return 2;
			out[count++] = (int)v;
			s += len + (s[len] == ',');
		}
		*o->n = count;
		return 0;
	}
	case BENCH_STR:
		*(const char **)o->dst = s;
		return 0;
	case BENCH_CHOICE:
		if ((k = bench_name_index(o->names, s, strlen(s))) < 0)
			break;
		*(int *)o->dst = k;
		return 0;
	case BENCH_NAMESET: {
		unsigned mask = 0;
		size_t len;
		k = 0;
		for (const char *t = s; *t && k >= 0; t += len + (t[len] == ',')) {
			len = strcspn(t, ",");
			if (len && (k = bench_name_index(o->names, t, len)) >= 0)
				mask |= 1u << k;
		}
		if (k < 0)
			break;
		*(unsigned *)o->dst = mask;
		return 0;
	}
	case BENCH_FREE_MODE:
		if (parse_free_mode(s, o->dst))
			break;
		return 0;
	default:
		abort(); /* flags and arguments take no value */
	}
	fprintf(stderr, "%s: %s: '%s' is not %s: %s\n", prog, o->name, s,
		o->kind == BENCH_NAMESET ? "a list of" : "one of",
		names_list(o->kind == BENCH_FREE_MODE ? zs_free_mode_names() : o->names));
	return 2;
}

/*
 * Parse argv against the table.  0, or 2 after a message: an unknown option
 * or one without its value (with the usage), a bad value (one line naming
 * the option and what it accepts), and --help or -h (the usage alone).
 */
static inline int bench_parse(int argc, char **argv, const struct bench_opt *opts)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const struct bench_opt *args = NULL, *o;
	int nargs = 0;

	for (o = opts; o->name; o++) {
		if (bench_is_arg_kind(o->kind))
			args = o;
		if (o->kind == BENCH_U64 && o->size != 8 && (o->size != 4 || o->hi > UINT32_MAX))
			abort(); /* the table's mistake: a value that does not fit its variable */
	}
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] != '-' && args) {
			if (args->kind == BENCH_REST) {
				*(char ***)args->dst = argv + i;
				*args->n = argc - i;
				return 0;
			}
			if (nargs == args->max) {
				fprintf(stderr, "%s: at most %d %s arguments ('%s')\n", prog, args->max,
					args->name, argv[i]);
				return 2;
			}
			argv[1 + nargs++] = argv[i]; /* slots before i are consumed: gather them at the front */
			continue;
		}
		for (o = opts; o->name && (bench_is_arg_kind(o->kind) || strcmp(o->name, argv[i])); o++)
			;
		if (!o->name || (o->kind != BENCH_FLAG && i + 1 >= argc)) {
			if (o->name)
				fprintf(stderr, "%s: %s needs a value\n", prog, o->name);
			else if (strcmp(argv[i], "--help") && strcmp(argv[i], "-h"))
				fprintf(stderr, "%s: unknown %s '%s'\n", prog,
					argv[i][0] == '-' ? "option" : "argument", argv[i]);
			bench_usage(prog, opts);
			return 2;
		}
		if (o->kind == BENCH_FLAG)
			*(int *)o->dst = 1;
		else if (bench_opt_value(prog, o, argv[++i]))
			return 2;
	}
	if (nargs) {
		*(char ***)args->dst = argv + 1;
		*args->n = nargs;
	}
	return 0;
}

/* The rounds to run: --rounds if given, else the quick or full default; at most 64. */
static inline int bench_rounds(int rounds, int quick, int quick_default, int full_default)
{
	if (!rounds)
		rounds = quick ? quick_default : full_default;
	return rounds > 64 ? 64 : rounds;
}

/* Human-readable output goes to stdout, or nowhere with --json. */
static int bench_quiet;
static inline void bench_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void bench_say(const char *fmt, ...)
{
	if (bench_quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static inline void bench_print_machine(void)
{
	char cpu[256];
	struct utsname u;
	bench_cpu_model(cpu, sizeof(cpu));
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");
	double la[1] = {-1};
	if (getloadavg(la, 1) < 1)
		la[0] = -1;
	bench_say("machine: nproc=%ld, cpu=\"%s\", kernel=%s, loadavg(1min) at start=%.2f\n",
		  sysconf(_SC_NPROCESSORS_ONLN), cpu, u.release, la[0]);
	if (la[0] > 0.5)
		bench_say("note: the machine was busy when this started; expect noise\n");
}

/* A pool the bench cannot run without: a refusal ends the run with the library's reason. */
static inline struct zs_pool *bench_pool_create(const struct zs_pool_config *cfg)
{
	struct zs_pool *p;
	char why[256];
	if (zs_pool_create(cfg, &p, why, sizeof(why))) {
		fprintf(stderr, "bench: %s\n", why);
		exit(1);
	}
	return p;
}

/* A backend, or NULL with errno and why set (some kinds are absent from some builds). */
static inline struct zs_backend *bench_backend_create(const struct zs_backend_config *cfg,
						       char *why, size_t why_len)
{
	struct zs_backend *b;
	zs_backend_create(cfg, &b, why, why_len);
	return b;
}

#endif
