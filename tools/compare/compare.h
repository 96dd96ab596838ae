/*
 * zs compare's inputs: raw page sources (files, a process's or a python3
 * heap) and the workloads (lists of blobs) built from them, shared by the
 * measuring driver (cmd_compare.c) and the input side (compare_input.c).
 */
#ifndef ZS_TOOLS_COMPARE_H
#define ZS_TOOLS_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "zs/harness.h"

/* Raw bytes to cut into pages: the harness's page set, packed (ps.len bytes). */
struct raw {
	struct zs_pageset ps;
	const char *what;
};

struct blob {
	const unsigned char *data;
	uint32_t len;
};

struct workload {
	const char *name;
	struct blob *b;
	size_t n;
	unsigned char *store; /* owned compressed data */
	size_t pages_in, same_filled, raw_stored;
	const char *source;
};

/* Room for cap bytes.  Files and directories (their top level, sorted) go in packed
 * through the harness's loader: zs_pageset_add(&r->ps, path, want, RAW_FILES). */
int raw_reserve(struct raw *r, size_t cap);
#define RAW_FILES (ZS_PAGESET_PACK | ZS_PAGESET_TOP_LEVEL)
/* Anonymous writable mappings of a process (heap, anon mmaps) via /proc/PID/mem. */
int raw_add_process(struct raw *r, int pid);
/* A python3 process's heap (the default heap workload). */
int raw_add_python_heap(struct raw *r);

void wl_free(struct workload *w);
/* zram's store rule on raw pages: skip same-filled, raw at >= huge, else LZ4. */
int wl_from_pages(struct workload *w, const struct raw *r, size_t ps, size_t huge);
/* zsmalloc_test's sizes: 32, 48, ... 4080 at 4K (step page/256), n of each. */
int wl_testmod(struct workload *w, size_t ps, size_t n, const unsigned char *noise);
/* A seeded mix shaped like compressed anonymous pages. */
int wl_mix(struct workload *w, size_t ps, size_t n, uint64_t seed, const unsigned char *noise);

#endif
