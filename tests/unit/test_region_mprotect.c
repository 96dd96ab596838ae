/*
 * mprotect on region memory (include/zs/region.h, "What a program may do
 * with region memory"): part of the range made read-only while its pages
 * are stored reads them back right; a pageout over a range with a read-only
 * part pages out at least the writable part and may leave read-only pages
 * resident; made writable again, the whole range takes writes and pages
 * out and back as before.  Both pageout paths (move and ZS_REGION_MOVE=0),
 * each in a forked child.  Exit 77 without userfaultfd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"

#define NP 64
static size_t pg;

static int page_is(const unsigned char *a, size_t p, unsigned char v, unsigned char first)
{
	if (a[p * pg] != first)
		return 0;
	for (size_t i = 1; i < pg; i++)
		if (a[p * pg + i] != v)
			return 0;
	return 1;
}

static int run(void *arg)
{
	if (arg)
		setenv("ZS_REGION_MOVE", "0", 1);
	struct zs_region_config c;
	struct zs_region *r;
	zs_region_config_init(&c);
	c.size = NP * pg;
	if (zs_region_create(&c, &r, NULL, 0))
		return 1;
	unsigned char *a = zs_region_addr(r);
	for (size_t p = 0; p < NP; p++)
		memset(a + p * pg, (int)p + 1, pg);
	CHECK_EQ(zs_region_pageout(r, a, NP * pg), NP);
	/* read-only while stored: read faults install the stored bytes */
	CHECK_EQ(mprotect(a, NP / 2 * pg, PROT_READ), 0);
	int ok = 1;
	for (size_t p = 0; p < NP / 2; p++)
		ok &= page_is(a, p, (unsigned char)(p + 1), (unsigned char)(p + 1));
	CHECK(ok);
	/* touch the writable half too, then page the whole range out */
	for (size_t p = NP / 2; p < NP; p++)
		ok &= page_is(a, p, (unsigned char)(p + 1), (unsigned char)(p + 1));
	long k = zs_region_pageout(r, a, NP * pg);
	CHECK(k >= NP / 2 && k <= NP);
	ok = 1;
	for (size_t p = 0; p < NP; p++)
		ok &= page_is(a, p, (unsigned char)(p + 1), (unsigned char)(p + 1));
	CHECK(ok);
	/* writable again: writes land, page out and come back */
	CHECK_EQ(mprotect(a, NP / 2 * pg, PROT_READ | PROT_WRITE), 0);
	for (size_t p = 0; p < NP; p++)
		a[p * pg] = 0xee;
	CHECK_EQ(zs_region_pageout(r, a, NP * pg), NP);
	ok = 1;
	for (size_t p = 0; p < NP; p++)
		ok &= page_is(a, p, (unsigned char)(p + 1), 0xee);
	CHECK(ok);
	struct zs_region_stats st;
	zs_region_get_stats(r, &st, sizeof(st));
	CHECK_EQ(st.broken, 0);
	CHECK_EQ(st.unmapped, 0);
	printf("  %s: pageout with a read-only half stored %ld of %d\n", arg ? "copy" : "move", k, NP);
	zs_region_destroy(r);
	return tu_fail != 0;
}

int main(void)
{
	fc_skip_without_uffd();
	pg = (size_t)sysconf(_SC_PAGESIZE);
	for (int copy = 0; copy < 2; copy++) {
		if (fc_run(copy ? "mprotect_copy" : "mprotect_move", 30, run, copy ? (void *)1 : NULL))
			tu_fail++;
		else
			tu_pass++;
	}
	return tu_done();
}
