/*
 * Shared helpers for the bench/ programs: monotonic clock, a small seeded
 * PRNG and the synthetic compressed-size distribution, median of repeated
 * rounds, JSON output (through the writer the CLI uses, tools/json.h) and
 * the machine description every result is printed with.  Header-only
 * (static functions); benches use the public headers and tools/json.h.
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

/* ---- JSON: one object per run, written with the shared writer (tools/json.h) ---- */

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

/* ---- options every benchmark takes ---- */

/*
 * A whole decimal number in lo..hi (no sign, no trailing text, no overflow),
 * or exit 2 with a message naming the option: a typo must not run a
 * different benchmark than the one asked for.
 */
static inline unsigned long long bench_arg_u64(const char *bench, const char *opt, const char *s,
					       unsigned long long lo, unsigned long long hi)
{
	uint64_t v = 0;
	if (parse_u64(s, &v) || v < lo || v > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a whole number in %llu..%llu\n", bench, opt,
			s ? s : "", lo, hi);
		exit(2);
	}
	return v;
}

/* A comma list of whole numbers in lo..hi into out[max]; exit 2 on a bad item. Returns the count. */
static inline int bench_arg_list(const char *bench, const char *opt, const char *s, int *out,
				 int max, int lo, int hi)
{
	char item[32];
	int n = 0;
	while (*s) {
		size_t len = strcspn(s, ",");
		if (n == max || len == 0 || len >= sizeof(item)) {
			fprintf(stderr, "%s: %s: '%s' is not a list of at most %d numbers in %d..%d\n",
				bench, opt, s, max, lo, hi);
			exit(2);
		}
		memcpy(item, s, len);
		item[len] = 0;
		out[n++] = (int)bench_arg_u64(bench, opt, item, (unsigned long long)lo,
					      (unsigned long long)hi);
		s += len + (s[len] == ',');
	}
	return n;
}

/*
 * --quick, --json and --rounds N: if argv[*i] is one of them, take it (and
 * its value) and return 1; the benchmark parses its own options otherwise.
 */
static inline int bench_common_opt(int argc, char **argv, int *i, int *quick, int *rounds,
				   struct bench_json *js)
{
	if (!strcmp(argv[*i], "--quick"))
		*quick = 1;
	else if (!strcmp(argv[*i], "--json"))
		js->enabled = 1;
	else if (!strcmp(argv[*i], "--rounds") && *i + 1 < argc)
		*rounds = (int)bench_arg_u64(argv[0], "--rounds", argv[++*i], 1, 64);
	else
		return 0;
	return 1;
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

#endif
