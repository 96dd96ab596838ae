/*
 * Where a zsmalloc pool's memory goes beyond its live bytes, by cause.
 * Shared by `zs compare` and its test, so the column and the test that its
 * parts add up are one computation.
 */
#ifndef ZS_TOOLS_WASTE_H
#define ZS_TOOLS_WASTE_H

#include <stddef.h>
#include "zs/zsmalloc.h"

struct zs_waste {
	size_t pool_bytes;  /* zs_get_total_pages x page size */
	size_t live_bytes;  /* the caller's payload bytes (what it asked zs_malloc for) */
	size_t rounding;    /* slot size - payload - header, over live objects */
	size_t tails;       /* per zspage: its pages x page size - its slots x slot size */
	size_t free_slots;  /* unused slots in allocated zspages */
	size_t handles;     /* ZS_HANDLE_SIZE in-object headers of live non-huge objects */
	long long other;    /* pool_bytes - live - the four above: pages no class counts */
	size_t partial_zspages; /* zspages with at least one free slot (they hold free_slots) */
};

/* Fill *w from the pool's class stats; live_bytes is the caller's payload total. */
void zs_waste_measure(struct zs_pool *pool, size_t live_bytes, struct zs_waste *w);

#endif
