/*
 * The zram lock order (top of src/zram/zram.c) is enforced in ZS_DEBUG
 * builds, and the store's own paths keep it.
 *
 * Broken orders: each case runs in a forked child that takes two zram locks
 * in an order the block forbids, through the internal entry points (a
 * stream under a slot lock, two slot locks, two streams, a slot lock inside
 * another thread-level slot walk).  With -DZS_DEBUG=ON the child must die of
 * SIGABRT with the lock-order check's "lock order violated" line naming
 * src/zram/zram.c (common/debug.c; zram's ranks are ZS_LOCK_ZRAM_*); without it
 * the checks compile to nothing and each case (harmless alone in a child)
 * exits cleanly.
 *
 * Kept orders: every public call that takes zram locks (slot calls and
 * ranges, on a core store and on a group view; free_notify; writeback with a
 * backing file; idle marking; recompression; stats; reset) runs in this
 * process, in the debug build under the checks, and must leave no lock
 * held by the thread afterwards.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "forkcase.h"
#include "zs/zram.h"
#include "zram/internal.h"

#define PS 4096
#define N 64

static struct zs_zram *mk(unsigned group, const char *backing)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;

	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.streams = 2;
	cfg.group_pages = group;
	cfg.backing_path = backing;
	cfg.recomp = group ? NULL : "zstd";
	cfg.track_actime = 1;
	if (zs_zram_create(&cfg, &z, NULL, 0))
		_exit(3);
	return z;
}

static void case_stream_under_slot(void)
{
	struct zs_zram *z = mk(0, NULL);

	slot_lock(&z->slots[0]);
	zram_stream_get(z); /* rank ZRAM_STREAM under ZRAM_SLOT */
}

static void case_two_slots(void)
{
	struct zs_zram *z = mk(0, NULL);

	slot_lock(&z->slots[0]);
	slot_lock(&z->slots[1]); /* never two slot locks */
}

static void case_two_streams(void)
{
	struct zs_zram *z = mk(0, NULL);

	zram_stream_get(z);
	zram_stream_get(z); /* never two streams (the second may be the only free one) */
}

static void case_core_call_under_slot(void)
{
	struct zs_zram *z = mk(0, NULL);
	char page[PS];

	memset(page, 7, sizeof(page));
	slot_lock(&z->slots[5]);
	zram_core_write(z, 6, page); /* a slot path takes a stream: out of order */
}

struct dcase {
	const char *name;
	void (*fn)(void);
};

static const struct dcase cases[] = {
	{ "stream taken under a slot lock", case_stream_under_slot },
	{ "slot lock taken under a slot lock", case_two_slots },
	{ "stream taken under a stream", case_two_streams },
	{ "core write under a slot lock", case_core_call_under_slot },
};


/* Every public locking path once; no zram lock may be left held. */
static void kept_orders(unsigned group, const char *backing)
{
	static unsigned char buf[N * PS], back[N * PS];
	struct zs_zram *z = mk(group, backing);
	struct zs_zram_stats st;
	struct zs_zram_wb_result wr;
	struct zs_zram_recomp_result rr;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)((i / 64) * 31 + i % 7);
	CHECK_EQ(zs_zram_write_range(z, 0, N, buf), 0);
	CHECK_EQ(zs_zram_write(z, 3, buf + 5 * PS), 0);
	CHECK_EQ(zs_zram_read(z, 3, back, PS), 0);
	CHECK_EQ(zs_zram_discard(z, 4), 0);
	CHECK(zs_zram_free_notify(z, 7) == 0);
	CHECK_EQ(zs_zram_discard_range(z, 8, 9), 0);
	CHECK_EQ(zs_zram_read_range(z, 0, N, back, sizeof(back)), 0);
	CHECK(zs_zram_mark_idle(z, 0) >= 0);
	if (backing)
		CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &wr), 0);
	if (!group)
		CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_IDLE, 0, 0, &rr), 0);
	CHECK_EQ(zs_zram_read_range(z, 0, N, back, sizeof(back)), 0);
	if (backing)
		CHECK(zs_zram_set_writeback_limit(z, 1, 4) == 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	zs_zram_compact(z);
	zs_zram_reset(z);
	zs_zram_destroy(z);
	CHECK_EQ(lockdep_depth(), 0);
}

int main(void)
{
	char err[4096], path[] = "/tmp/zs-lockorder-XXXXXX";
	int fd;

	printf("ZS_DEBUG %s\n", ZS_DEBUG_ON ? "on: every broken order must abort"
					    : "off: checks compiled out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct dcase *c = &cases[i];
		int st = fc_capture(c->fn, err, sizeof(err), 0);
		int ok;

		if (ZS_DEBUG_ON)
			ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
			     strstr(err, "lock order violated") && strstr(err, "src/zram/zram.c");
		else
			ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		printf("%-40s %s\n", c->name, ok ? "ok" : "FAILED");
		if (!ok)
			fprintf(stderr, "  %s: status %#x, child stderr: %s\n", c->name, st, err);
		CHECK(ok);
	}
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	kept_orders(0, NULL);
	kept_orders(0, path);
	kept_orders(4, NULL);
	kept_orders(4, path);
	unlink(path);
	printf("kept orders: core and group view, with and without a backing file\n");
	return tu_done();
}
