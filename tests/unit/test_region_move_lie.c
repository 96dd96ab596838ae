/*
 * Pageout by move when the kernel misreports the move.  Linux
 * 6.18 now and then moves a page and fails the whole UFFDIO_MOVE with EEXIST,
 * nothing counted, when the application writes a zero page being moved
 * (fuzz_region found it: a page written just then read zeros; the kernel
 * does it on its own in /tmp-sized loops, about once in 10^5 moves).
 * zs_region_move_inject makes the next moves do exactly that, so every
 * pageout here hits it: the pages must read back their bytes, the store must
 * hold each page once, and later moves (into the same slices) must work.
 * Exit 77 without userfaultfd or without pageout by move (ZS_REGION_MOVE=0,
 * kernels before 6.8).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/harness.h"
#include "zs/region.h"

#define PG 4096
#define NP 64

static void fill(unsigned char *a, size_t p, size_t n, int gen)
{
	for (size_t i = p; i < p + n; i++)
		for (size_t b = 0; b < PG; b += 8) {
			unsigned long long v = (i + 1) * 0x9e3779b97f4a7c15ULL ^ (unsigned)gen ^ b;
			memcpy(a + i * PG + b, &v, 8);
		}
}

static size_t wrong_pages(const unsigned char *a, size_t n, int gen)
{
	static unsigned char want[NP * PG];
	fill(want, 0, n, gen);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += memcmp(a + i * PG, want + i * PG, PG) != 0;
	return bad;
}

/* Counters may lag a moment behind a handler finishing a fault (region.h): wait for stored 0. */
static void settle(struct zs_region *r)
{
	struct zs_region_stats st;
	for (int k = 0; k < 2000; k++) {
		zs_region_get_stats(r, &st, sizeof(st));
		if (st.stored == 0 && st.store.pages_stored == 0)
			return;
		usleep(1000);
	}
	fprintf(stderr, "still stored after 2 s: %llu\n", (unsigned long long)st.stored);
	CHECK(0);
}

int main(void)
{
	char err[512];
	if (!zs_region_available(err, sizeof err)) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	struct zs_region_config c;
	zs_region_config_init(&c);
	c.size = NP * PG;
	struct zs_region *r = NULL;
	REQUIRE(zs_region_create(&c, &r, err, sizeof err) == 0);
	unsigned char *a = zs_region_addr(r);

	/* does this region page out by move at all?  (a plain pageout, stats after) */
	fill(a, 0, NP, 0);
	REQUIRE(zs_region_pageout(r, a, NP * PG) == NP);
	struct zs_region_stats st;
	zs_region_get_stats(r, &st, sizeof(st));
	REQUIRE(wrong_pages(a, NP, 0) == 0);
	if (getenv("ZS_REGION_MOVE") && !strcmp(getenv("ZS_REGION_MOVE"), "0")) {
		printf("SKIP: ZS_REGION_MOVE=0 (pageout copies)\n");
		zs_region_destroy(r);
		return 77;
	}

	int runs = 0;
	for (int gen = 1; gen <= 20; gen++) {
		/* runs of different lengths: 1 page, a few, a whole chunk */
		size_t n = gen % 3 == 0 ? 1 : gen % 3 == 1 ? 5 : NP;
		fill(a, 0, NP, gen);
		settle(r);
		zs_region_move_inject(r, 1 + (unsigned)(gen % 4));
		long rc = zs_region_pageout(r, a, n * PG);
		CHECK(rc == (long)n);
		zs_region_get_stats(r, &st, sizeof(st));
		if (st.stored != n || st.store.pages_stored != n)
			fprintf(stderr, "gen %d run %zu: stored %llu pages_stored %llu\n", gen, n, (unsigned long long)st.stored, (unsigned long long)st.store.pages_stored);
		CHECK(st.stored == n);
		CHECK(st.store.pages_stored == n);
		size_t bad = wrong_pages(a, NP, gen);
		if (bad)
			fprintf(stderr, "gen %d, run of %zu: %zu pages read other bytes\n", gen, n, bad);
		CHECK(bad == 0);
		runs++;
	}
	zs_region_move_inject(r, 0);
	/* the slices are clean: plain moves work again and keep every byte */
	fill(a, 0, NP, 99);
	REQUIRE(zs_region_pageout(r, a, NP * PG) == NP);
	CHECK(wrong_pages(a, NP, 99) == 0);
	zs_region_destroy(r);
	printf("test_region_move_lie: %d pageouts with a misreported move\n", runs);
	return tu_done();
}
