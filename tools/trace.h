/*
 * zram-trace reader for `zs replay`.  Kept apart from the replay so that the
 * trace format (plain or .xz, '#' header, w/d/c/= records, their limits and
 * their line-numbered errors) is defined in one place, and the replay only
 * ever sees records that are already valid.
 */
#ifndef ZS_TOOLS_TRACE_H
#define ZS_TOOLS_TRACE_H

#include <stdint.h>

#define TRACE_NF 6 /* fields of an '=' record (mm_stat order, see cmd_replay.c) */

struct trace_header {
	long page_size;  /* 4096 unless the header says otherwise */
	long chain;      /* -1: '?' or absent */
	int seen_magic;  /* '# zram-trace 1' was present */
	char comp[32], kernel[64], data[160];
};

struct trace_rec {
	char op;         /* '=', 'w', 'd' or 'c' */
	uint64_t slot, size;
	char flag;       /* 'w': n, s or h */
	uint64_t exp[TRACE_NF];
};

struct trace;

struct trace *trace_new(void);
/* Open path ("-": stdin); -errno on failure. */
int trace_open(struct trace *t, const char *path);
void trace_free(struct trace *t);

/*
 * Next operation or '=' line (leading blanks skipped) into *s: 1, 0 at end,
 * -1 on a read or header error (reported).  '#' lines before the first
 * operation fill the header; later ones are ignored.
 */
int trace_next(struct trace *t, const char **s);
/* Parse and range-check a line from trace_next: 0, or -1 (reported). */
int trace_parse(struct trace *t, const char *s, struct trace_rec *r);
long trace_lineno(const struct trace *t);
const struct trace_header *trace_hdr(const struct trace *t);

/* --store prepass: the largest slot a 'w' or 'd' names, -1 on error. */
long trace_max_slot(const char *path);

/* Print "zs replay: [line N: ]" fmt with arg (trace text, made printable); returns 2. */
int trace_fail(long line, const char *fmt, const char *arg);
int trace_parse_long(const char *s, long lo, long hi, long *out);

#endif
