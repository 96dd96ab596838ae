/*
 * The checked value parsers of parse.h, in the library the CLI and the
 * benchmarks both link (zs_cli), so neither keeps its own atoi.
 */
#include "parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9') /* strtoull would take "-1" as 2^64-1 and " 5" as 5 */
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int parse_int(const char *s, int lo, int hi, int *out)
{
	uint64_t v;
	int neg = s && *s == '-';

	if (parse_u64(s ? s + neg : s, &v) || v > (uint64_t)INT32_MAX + 1)
		return -1;
	long long x = neg ? -(long long)v : (long long)v;
	if (x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int parse_double(const char *s, double *out)
{
	char *end;
	/* A digit, a sign or a point first: strtod would skip spaces and take "nan"/"inf". */
	if (!s || !(*s == '-' || *s == '+' || *s == '.' || (*s >= '0' && *s <= '9')))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int parse_class_shards(const char *s, unsigned *out)
{
	uint64_t v;
	if (s && !strcmp(s, "auto")) {
		*out = ZS_CLASS_SHARDS_AUTO;
		return 0;
	}
	if (parse_u64(s, &v) || v > ZS_MAX_CLASS_SHARDS)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int parse_free_mode(const char *s, enum zs_free_mode *out)
{
	return zs_free_mode_parse(s, out) ? -1 : 0;
}

int parse_chain_policy(const char *s, enum zs_chain_policy *out)
{
	return zs_chain_policy_parse(s, out) ? -1 : 0;
}

const char *names_list(const char *const *names)
{
	static char buf[256];
	size_t n = 0;

	buf[0] = 0;
	for (; *names && n < sizeof(buf); names++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? ", " : "", *names);
	return buf;
}
