/*
 * What bench_region.c shares with its kernel-device (kzram.c) and floor
 * (floor.c) halves: the page and worker limits, the per-worker results and
 * the corpus the workers touch.  Private to bench_region.
 */
#ifndef ZS_BENCH_REGION_H
#define ZS_BENCH_REGION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zs/harness.h"

#define PG 4096
#define MAXP 16

struct child_res {
	double pageout_s, seq_s, pageout2_s, rand_s, pageout3_s, release_s, flush_s;
	double seq_p50, seq_p99, rand_p50, rand_p99;   /* ns per touch */
	uint64_t mem_used, compr, stored, same, huge, faults;
	int ok;
	char err[160];
};

struct shared {
	pthread_barrier_t bar;
	struct child_res r[MAXP];
};

/* bench_region.c */
extern struct zs_pageset corpus;
extern size_t npages;        /* per process */
extern const char *comp;
extern volatile unsigned long sink;
void pct(uint32_t *lat, size_t n, double *p50, double *p99);
double touch(unsigned char *base, const uint32_t *order, uint32_t *lat);
uint32_t *make_order(uint64_t seed);

/* kzram.c: the kernel's zram swap device */
extern int kdev;
extern pid_t live_pids[MAXP];   /* workers running now (processes mode) */
extern volatile int nlive;
int kzram_up(uint64_t bytes, char *msg, size_t len);
void kzram_down(void);
void kzram_mm_stat(uint64_t *v);
void on_signal(int sig);

/* floor.c */
double floor_roundtrip(size_t n);
double floor_at(struct shared *sh, int P, size_t n);
double floor_shared(int P, size_t n);
double floor_decompress(void);

#endif
