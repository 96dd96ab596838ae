/*
 * The one JSON writer of the `zs` CLI and the benchmarks (bench/ links it
 * too): objects, arrays, keys, strings with escaping, numbers that stay JSON
 * (NaN and infinities become null).  A writer tracks where it is, so callers
 * never place commas or quotes by hand -- the hand-placed ones are how a
 * heap path with a quote in it once produced JSON Python rejected.
 *
 * Not thread-safe: one writer per output stream, used by one thread.
 * Nesting deeper than JSON_MAX_DEPTH is a caller bug: extra levels are
 * written but their commas are no longer tracked.
 */
#ifndef ZS_TOOLS_JSON_H
#define ZS_TOOLS_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	int depth;
	int pretty;                             /* levels whose items start on a new line */
	int after_key;                          /* a key was written: its value is next */
	unsigned char items[JSON_MAX_DEPTH];    /* items already written at each level */
};

/*
 * A writer on f.  pretty: how many levels of nesting put each item on its
 * own line (0: everything on one line).
 */
void json_init(struct json *j, FILE *f, int pretty);

void json_obj(struct json *j);
void json_obj_end(struct json *j);
void json_arr(struct json *j);
void json_arr_end(struct json *j);
/* The key of the next value (inside an object). */
void json_key(struct json *j, const char *key);

/* Values.  json_str(NULL) writes null. */
void json_str(struct json *j, const char *s);
/* Integral values up to 2^53 exactly, others with 6 significant digits. */
void json_num(struct json *j, double v);
/* Fixed decimals ("%.*f"), for values shown at a chosen precision. */
void json_fixed(struct json *j, double v, int decimals);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
void json_bool(struct json *j, int v);
void json_null(struct json *j);

/* Key and value in one call. */
void json_kobj(struct json *j, const char *key);
void json_karr(struct json *j, const char *key);
void json_kstr(struct json *j, const char *key, const char *s);
void json_knum(struct json *j, const char *key, double v);
void json_kfixed(struct json *j, const char *key, double v, int decimals);
void json_kint(struct json *j, const char *key, int64_t v);
void json_kuint(struct json *j, const char *key, uint64_t v);
void json_kbool(struct json *j, const char *key, int v);

/* Ends the document: a newline after the outermost value; flushes. */
void json_done(struct json *j);

/* `s` as a JSON string literal (quotes, backslashes and control bytes escaped). */
void json_string(FILE *f, const char *s);

#endif
