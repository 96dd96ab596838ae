/*
 * Checked parsing of command-line values, shared by the `zs` commands
 * (through opts.h, which adds the messages) and the benchmarks
 * (bench_common.h): one definition of "a number", "a size" and "a free
 * mode", so `8x`, `-1`, ` 5` or `nan` are refused the same way everywhere.
 * Every parser takes the whole string or nothing: 0, or -1 with *out unchanged.
 */
#ifndef ZS_TOOLS_PARSE_H
#define ZS_TOOLS_PARSE_H

#include <stdint.h>

#include "zs/zsmalloc.h"

/* A decimal integer: no sign, no space, no trailing text, no overflow. */
int parse_u64(const char *s, uint64_t *out);
/* A decimal int in lo..hi: an optional '-', then parse_u64's rules (no '+', no space). */
int parse_int(const char *s, int lo, int hi, int *out);
/* parse_u64 with an optional K/M/G/T suffix (binary units, optional "iB"/"B"). */
int parse_bytes(const char *s, uint64_t *out);
/* A finite decimal number (strtod syntax; no nan, no inf, no trailing text). */
int parse_double(const char *s, double *out);
/*
 * A zs_free lock mode (pool | class | class-unlocked) or a chain policy
 * (exhaustive | heuristic): the library's names (zs_free_mode_parse,
 * zs_chain_policy_parse in zs/zsmalloc.h), which every tool, bench, the
 * report and Python print and accept.  0, or -1 for any other string.
 */
int parse_free_mode(const char *s, enum zs_free_mode *out);
int parse_chain_policy(const char *s, enum zs_chain_policy *out);
/* "a, b, c": a NULL-terminated name list (zs_free_mode_names()) for messages; a static
 * buffer, so one call per message. */
const char *names_list(const char *const *names);
/* zs_pool_config.class_shards: 0..ZS_MAX_CLASS_SHARDS, or "auto" (ZS_CLASS_SHARDS_AUTO). */
int parse_class_shards(const char *s, unsigned *out);

#endif
