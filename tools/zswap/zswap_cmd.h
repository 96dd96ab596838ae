/*
 * `zs zswap`'s parts, shared by its files and by nothing else: the options
 * and modes (cmd_zswap.c), the capture reader (zswap_capture.c), the plan of
 * operations (zswap_plan.c), the runs on libzs's zswap (zswap_workload.c),
 * the kernel's side for --vs-kernel (zswap_kernel.c) and the text and JSON
 * output (zswap_print.c).
 */
#ifndef ZS_TOOLS_ZSWAP_CMD_H
#define ZS_TOOLS_ZSWAP_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"
#include "zs/zswap.h"

struct zs_pageset;

#define MAX_BACKENDS 8
#define SERIES_MAX 400 /* pool-page samples kept per run (the report's plot) */

struct opts {
	const char *backends[MAX_BACKENDS];
	int nbackends;
	const char *comp, *backing, *sizes;
	uint64_t max_bytes, total_ram, ops, seed;
	unsigned max_pool_percent;
	int max_pool_set, json, vs_kernel, quiet, shrinker;
	struct pool_opts po;
};

/* ---- Capture files (scripts/zswap_capture.sh): zswap_capture.c ---- */

struct capture {
	char **hdr;          /* header lines without "# " */
	size_t nhdr;
	uint32_t *sizes;
	size_t n;
	/* '# sample T STORED POOL_PAGES ZSWPOUT ZSWPIN' lines */
	double *st;
	uint64_t (*sv)[4];
	size_t ns;
};

/* Read a capture: 0, or 2 after a message. */
int capture_read(const char *path, struct capture *c);
void capture_free(struct capture *c);
/* "# SEC KEY VALUE": 1 and *v, or 0 when absent. */
int cap_num(const struct capture *c, const char *sec, const char *key, double *v);
/* The same as a whole number; 0 when absent or not positive. */
uint64_t cap_u64(const struct capture *c, const char *sec, const char *key);
/* "# KEY TEXT": the text, or "?". */
const char *cap_str(const struct capture *c, const char *key);
/* The kernel's counters of section SEC, as libzs's zswap names them (events since "start"). */
void capture_kernel_state(const struct capture *c, const char *sec, struct zs_zswap_stats *st);

/* ---- The workload: a plan of stores, loads and invalidates: zswap_plan.c ---- */

enum { OP_STORE, OP_LOAD, OP_INVAL };

struct op {
	uint32_t type : 2;
	uint32_t id : 30; /* the store's entry */
};

struct plan {
	size_t nfill;        /* entries 0..nfill-1 are stored first (the fill) */
	struct op *ops;      /* then these (the churn) */
	size_t nops, opcap;
	uint32_t *item;      /* per entry: the page (FILE mode) or size (--sizes) it stores */
	size_t nids, idcap;
	size_t *iend;        /* the churn's intervals: op index where each ends */
	size_t nint;
	double *kt;          /* per interval: the kernel's time and pool pages (samples) */
	uint64_t *kpool;
	uint64_t stores, loads, invals;
	size_t survivors;    /* entries live at the end */
	size_t matched;      /* of them given a captured size (--sizes with samples) */
};

void plan_free(struct plan *p);
/* Fill every item, then `ops` operations in 50 intervals.  0, or -1 (out of memory). */
int plan_synthetic(struct plan *p, size_t nitems, uint64_t ops, uint64_t seed);
/* The churn of a capture's samples, ending with the captured entries live.  0 or -1. */
int plan_samples(struct plan *p, const struct capture *c, uint64_t seed);

/* ---- Running a plan on one backend: zswap_workload.c ---- */

struct phase {
	struct zs_zswap_stats st;
	double store_ns, load_ns, inval_ns; /* per operation */
	uint64_t n_store, n_load, n_inval;
};

struct run {
	const char *backend;
	struct phase fill, churn, compacted, drain;
	uint64_t rejected;     /* stores the front end refused (the page went to "disk") */
	uint64_t disk_loads;   /* loads of such pages, and of written-back ones */
	uint64_t mismatches;   /* FILE mode: pages loaded back different */
	unsigned long compacted_pages;
	double wall_s;
	size_t nseries;
	double series_t[SERIES_MAX];
	uint64_t series_pool[SERIES_MAX], series_stored[SERIES_MAX];
	int ok;
	char err[256];
};

struct input {
	const struct zs_pageset *ps;   /* FILE mode */
	const uint32_t *sizes;         /* --sizes */
	size_t nitems;
};

/* The plan through a new zswap of `backend`; drain: load every live entry back at the end.
 * 0, or -1 with r->err. */
int run_plan(const struct opts *o, const char *backend, const struct plan *p,
	     const struct input *in, uint64_t total_ram, unsigned max_pool, int drain,
	     struct run *r);

/* ---- The kernel's zswap (--vs-kernel): zswap_kernel.c ---- */

struct kside {
	uint64_t stored, incompressible, pool_bytes, zero, zswpout, zswpin;
	double store_ns, load_ns;
	uint64_t mismatches, not_swapped;
	char msg[512];
};

/* The pages through the kernel's zswap, one page at a time.  0, or -1 with k->msg. */
int kernel_run(const struct zs_pageset *ps, int quiet, struct kside *k);

/* ---- Output: zswap_print.c ---- */

/* FILE mode's report on stdout: the kernel's row first when k is not NULL. */
void print_pages(const struct opts *o, const struct zs_pageset *ps, const struct plan *p,
		 const struct run *runs, const struct kside *k);
/* --sizes's report on stdout: fr the fresh fills, cr the churns, one per backend. */
void print_sizes(const struct opts *o, const struct capture *c, const struct plan *churn,
		 const struct run *fr, const struct run *cr, int sampled, uint64_t total_ram,
		 unsigned max_pool);

#endif
