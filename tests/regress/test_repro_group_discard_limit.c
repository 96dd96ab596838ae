/*
 * The group-store discard reproducer as a test:
 * a group store (group_pages 4) at its mem_limit.  Discarding one slot is a
 * read-modify-write of its group; it used to allocate the new group object
 * before freeing the old one, so it failed with -ENOMEM at the limit, and
 * zs_zram_discard_range() returned 0 with the data still stored.
 *
 * Expected: a discard never fails for lack of memory (the slot reads zeros
 * afterwards, its group's other slots keep their bytes), and a range call
 * reports any part it could not do (never 0 with the data still there).
 * Checked for single discards, discard_range of one slot and of a span
 * crossing groups, and until every slot is discarded; also a partial-group
 * overwrite at the limit either works or fails leaving the old bytes.
 * Runs in a forked child under a watchdog.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "forkcase.h"
#include "testutil.h"
#include "zs/zram.h"

#define PS 4096
#define NS 64

static uint64_t seeds[NS];   /* 0: discarded (reads zeros) */

/* slots reading wrong bytes (an error counts as wrong: nothing here touches a file) */
static int wrong_slots(struct zs_zram *z, int verbose)
{
	unsigned char b[PS], e[PS];
	int bad = 0;
	for (uint64_t i = 0; i < NS; i++) {
		int rc = zs_zram_read(z, i, b, PS);
		if (seeds[i])
			fc_xorshift_fill(e, PS, seeds[i]);
		else
			memset(e, 0, PS);
		if (rc || memcmp(b, e, PS)) {
			if (verbose && bad < 4)
				printf("  slot %llu: read %d, %s\n", (unsigned long long)i, rc,
				       rc ? "error" : seeds[i] ? "wrong bytes" : "not zeros after discard");
			bad++;
		}
	}
	return bad;
}

static struct zs_zram *full_store(void)
{
	struct zs_zram_config c;
	struct zs_zram *z;
	zs_zram_config_init(&c);
	c.disksize = NS * PS;
	c.group_pages = 4;
	c.mem_limit = 16 * 4 * PS;   /* room for 16 raw groups */
	int rc = zs_zram_create(&c, &z, NULL, 0);
	if (rc) {
		printf("  FAIL create %d\n", rc);
		return NULL;
	}
	static unsigned char g[4 * PS];
	int w = 0;
	for (uint64_t i = 0; i < NS; i += 4) {   /* whole groups: no read-modify-write */
		for (int k = 0; k < 4; k++)
			fc_xorshift_fill(g + k * PS, PS, i + k + 1);
		if (zs_zram_write_range(z, i, 4, g) == 0) {
			w += 4;
			for (int k = 0; k < 4; k++)
				seeds[i + k] = i + k + 1;
		} else {
			for (int k = 0; k < 4; k++)
				seeds[i + k] = 0;
		}
	}
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	printf("  wrote %d slots; mem_used %llu / limit %llu\n", w,
	       (unsigned long long)st.mem_used_total, (unsigned long long)st.mem_limit);
	return z;
}

static int child(void *arg)
{
	(void)arg;
	int fails = 0;
	struct zs_zram *z = full_store();
	if (!z)
		return 1;
	if (wrong_slots(z, 1)) {
		printf("  FAIL the full store does not read back\n");
		fails++;
	}
	/* the reproducer's two calls */
	int d = zs_zram_discard(z, 1);
	if (d == 0)
		seeds[1] = 0;
	int dr = zs_zram_discard_range(z, 5, 1);
	unsigned char r[PS], b[PS];
	int rr = zs_zram_read(z, 5, r, PS);
	fc_xorshift_fill(b, PS, 6);
	int still = rr == 0 && !memcmp(r, b, PS);
	if (dr == 0)
		seeds[5] = 0;
	printf("  discard(slot 1) -> %d; discard_range(5,1) -> %d, slot 5 afterwards %s\n", d, dr,
	       still ? "STILL HOLDS ITS OLD DATA" : rr ? "read error" : "reads zeros");
	if (d) {
		printf("  FAIL discard of one slot at the memory limit -> %d (want 0: a discard never "
		       "fails for lack of memory)\n", d);
		fails++;
	}
	if (dr == 0 && still) {
		printf("  FAIL discard_range(5,1) returned 0 but slot 5 keeps its data\n");
		fails++;
	}
	if (dr) {
		printf("  FAIL discard_range(5,1) -> %d (want 0: a discard never fails for lack of "
		       "memory)\n", dr);
		fails++;
	}
	/* a span crossing groups, partial at both ends */
	dr = zs_zram_discard_range(z, 10, 7);   /* 10,11 | 12..15 | 16 */
	if (dr == 0)
		for (int i = 10; i < 17; i++)
			seeds[i] = 0;
	if (dr) {
		printf("  FAIL discard_range(10,7) at the limit -> %d (want 0)\n", dr);
		fails++;
	}
	int bad = wrong_slots(z, 1);
	if (bad) {
		printf("  FAIL after the discards %d slots read wrong (discarded slots must read zeros, "
		       "the others their bytes)\n", bad);
		fails++;
	}
	/* a partial-group overwrite at the limit: works or fails, never loses anything */
	unsigned char nb[PS];
	fc_xorshift_fill(nb, PS, 777);
	int w = zs_zram_write(z, 21, nb);
	if (w == 0)
		seeds[21] = 777;
	else if (w != -ENOMEM) {
		printf("  FAIL overwrite of slot 21 at the limit -> %d (want 0 or -ENOMEM)\n", w);
		fails++;
	}
	/* every remaining slot, one at a time, in an order that splits groups */
	int dfail = 0;
	for (uint64_t k = 0; k < NS; k++) {
		uint64_t i = (k * 7 + 3) % NS;
		int rc = zs_zram_discard(z, i);
		if (rc) {
			if (dfail++ < 4)
				printf("  discard(slot %llu) -> %d\n", (unsigned long long)i, rc);
		} else {
			seeds[i] = 0;
		}
	}
	if (dfail) {
		printf("  FAIL %d discards failed while discarding every slot\n", dfail);
		fails++;
	}
	bad = wrong_slots(z, 1);
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	printf("  after discarding everything: %d slots wrong, pages_stored %llu, mem_used %llu\n",
	       bad, (unsigned long long)st.pages_stored, (unsigned long long)st.mem_used_total);
	if (bad || st.pages_stored) {
		printf("  FAIL the store is not empty after every slot was discarded\n");
		fails++;
	}
	zs_zram_destroy(z);
	return fails ? 1 : 0;
}

int main(void)
{
	printf("group_discard_limit:\n");
	/* watchdog 20 s; the child's own alarm at 30 s */
	fc_run_ex("group_discard_limit", 20, 30, NULL, child, NULL) ? tu_fail++ : tu_pass++;
	return tu_done();
}
