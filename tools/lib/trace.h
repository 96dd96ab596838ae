/*
 * Trace reader for `zs replay`: zram-traces and zswap-traces.  Kept apart
 * from the replay so that the trace formats (plain or .xz, '#' header, the
 * records, their limits and their line-numbered errors;
 * docs/trace-format.md) are defined in one place, and the replay only ever
 * sees records that are already valid.  The header says which format a
 * trace is; each has its own record parser, because their records differ
 * (a zram slot write is not a zswap store: no same-filled pages, exclusive
 * loads, 5 state fields instead of 6).
 */
#ifndef ZS_TOOLS_TRACE_H
#define ZS_TOOLS_TRACE_H

#include <stdint.h>

#define TRACE_NF 6 /* fields of a zram-trace '=' record (mm_stat order, see cmd_replay.c) */
#define TRACE_ZSWAP_NF 5 /* of a zswap-trace's: pool, stored, incompressible, zswpout, zswpin */
/* zswap-trace offsets are below this (zs/zswap.h's ZS_ZSWAP_MAX_OFFSET) */
#define TRACE_ZSWAP_MAX_OFFSET ((uint64_t)1 << 40)

enum trace_kind { TRACE_ZRAM = 0, TRACE_ZSWAP = 1 };

struct trace_header {
	long page_size;  /* 4096 unless the header says otherwise */
	long chain;      /* -1: '?' or absent */
	int seen_magic;  /* '# zram-trace 1' or '# zswap-trace 1' was present */
	enum trace_kind kind; /* from the magic line; TRACE_ZRAM without one */
	char comp[32], kernel[64], data[160];
	/* zswap-trace only */
	long max_pool_percent;    /* -1: absent */
	uint64_t totalram_pages;  /* 0: absent */
	int fill_mode;            /* '# mode fill': one state record, at the end */
};

/* Class indexes a 'k' line may name (the kernel has at most 4096 / 16 + 1 at 4K pages; 64K
 * pages have more). */
#define TRACE_MAX_CLASS 4096

struct trace_rec {
	char op;         /* '=', 'w', 'd', 'c' or 'k' (slot: the class; exp[0..2]: objects
	                    allocated, objects used, pages used) */
	uint64_t slot, size;
	char flag;       /* 'w': n, s or h */
	uint64_t exp[TRACE_NF];
};

/* A zswap-trace line (trace_parse_zswap). */
struct trace_zswap_rec {
	char op;         /* '=', 's' store, 'l' load, 'i' invalidate or 'c' compaction */
	uint64_t offset, size;
	char flag;       /* 's': n (compressed), h (incompressible, raw) or z (zero page) */
	uint64_t exp[TRACE_ZSWAP_NF];
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
/* Parse and range-check a zram-trace line from trace_next: 0, or -1 (reported). */
int trace_parse(struct trace *t, const char *s, struct trace_rec *r);
/* The same for a zswap-trace line (trace_hdr(t)->kind == TRACE_ZSWAP). */
int trace_parse_zswap(struct trace *t, const char *s, struct trace_zswap_rec *r);
long trace_lineno(const struct trace *t);
const struct trace_header *trace_hdr(const struct trace *t);

/* --store prepass: the largest slot a 'w' or 'd' names, -1 on error. */
long trace_max_slot(const char *path);

/* Print "zs replay: [line N: ]" fmt with arg (trace text, made printable); returns 2. */
int trace_fail(long line, const char *fmt, const char *arg);
int trace_parse_long(const char *s, long lo, long hi, long *out);

#endif
