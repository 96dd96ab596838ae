/*
 * The lock orders of zswap (top of src/zswap/zswap.c) and zblock
 * (src/zblock/zblock.c, "Locking") are enforced in a -DZS_DEBUG=ON build, as
 * zsmalloc's and zram's are (test_zs_lockorder, test_zram_lockorder; the
 * region's: test_region_lockorder).  Each case runs in a forked child that
 * takes one of these locks against its order through the layer's own
 * structures and calls (a store, or an invalidate of another shard, under a
 * zswap shard lock; a zblock allocation under a page provider's mutex) and
 * must die of SIGABRT with the report naming both locks, their ranks and
 * the file that documents the order.  A control child runs every path the legal way (zswap on zblock
 * with a backing file and a small pool limit: store, load, writeback, the
 * shrink worker, flush, invalidate; zblock on its own) and must exit cleanly
 * in both builds.  Without ZS_DEBUG the checks compile away and the cases,
 * none of which can deadlock on one thread, must run to a clean exit.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "forkcase.h"
#include "zs/zblock.h"
#include "zs/zswap.h"
#include "zswap/internal.h"
#include "pages/internal.h"
#include "must.h"

#define PAGE 4096

static char backing[64];

/* zswap on zblock with a backing file (writeback and the shrink worker run). */
static struct zs_zswap *zswap_new(void)
{
	struct zs_zswap_config cfg;
	struct zs_zswap *z = NULL;
	char err[256];

	zs_zswap_config_init(&cfg);
	cfg.backend.kind = "zblock";
	cfg.backing_path = backing;
	cfg.total_ram = 64 * PAGE; /* a small pool limit: the worker gets queued */
	if (zs_zswap_create(&cfg, &z, err, sizeof(err))) {
		fprintf(stderr, "zs_zswap_create: %s\n", err);
		_exit(3);
	}
	return z;
}

static void fill(unsigned char *p, unsigned seed)
{
	for (size_t i = 0; i < PAGE; i++)
		p[i] = (unsigned char)((i / 64) * 7 + seed);
}

/* Two offsets whose shards differ (the shard is a hash of the offset). */
static void two_shards(struct zs_zswap *z, struct zw_shard **a, struct zw_shard **b)
{
	*a = zw_shard_of(z, 0);
	for (uint64_t off = 1;; off++) {
		*b = zw_shard_of(z, off);
		if (*b != *a)
			return;
	}
}

static void case_control(void)
{
	unsigned char page[PAGE], out[PAGE];
	struct zs_zswap *z = zswap_new();

	for (unsigned i = 0; i < 200; i++) {
		fill(page, i);
		int rc = zs_zswap_store(z, i, page, 0);
		if (rc < 0 && rc != -ENOSPC && rc != -ENOMEM)
			_exit(4);
	}
	fill(page, 0);
	if (zs_zswap_load(z, 0, out) == 0 && memcmp(page, out, PAGE))
		_exit(4);
	if (zs_zswap_writeback(z, 8) < 0)
		_exit(4);
	zs_zswap_flush(z);
	for (unsigned i = 0; i < 200; i++)
		zs_zswap_invalidate(z, i);
	zs_zswap_destroy(z);

	struct zblock_config zc;
	zblock_config_init(&zc);
	struct zblock_pool *zp = must_zblock_create(&zc);
	if (!zp)
		_exit(3);
	unsigned long h = zblock_malloc(zp, 700);
	if (!h || zblock_free(zp, h))
		_exit(4);
	zblock_destroy_pool(zp);
}

/*
 * A store under a shard lock: it takes a stream, which comes before any
 * shard.  Stored at an offset of another shard, so that without the check
 * it runs through (one thread, two different shards) instead of hanging.
 */
static void case_store_under_shard(void)
{
	unsigned char page[PAGE];
	struct zs_zswap *z = zswap_new();
	struct zw_shard *a, *b;
	uint64_t off = 1;

	two_shards(z, &a, &b);
	while (zw_shard_of(z, off) != b)
		off++;
	fill(page, 1);
	mutex_lock_ranked(&a->lock, ZS_LOCK_ZSWAP_SHARD);
	zs_zswap_store(z, off, page, 0);
	mutex_unlock_ranked(&a->lock);
	zs_zswap_destroy(z);
}

/* An invalidate (one shard lock) under another shard's lock: walks go shard by shard. */
static void case_invalidate_under_shard(void)
{
	unsigned char page[PAGE];
	struct zs_zswap *z = zswap_new();
	struct zw_shard *a, *b;
	uint64_t off = 1;

	two_shards(z, &a, &b);
	while (zw_shard_of(z, off) != b)
		off++;
	fill(page, 2);
	if (zs_zswap_store(z, off, page, 0) < 0)
		_exit(3);
	mutex_lock_ranked(&a->lock, ZS_LOCK_ZSWAP_SHARD);
	zs_zswap_invalidate(z, off);
	mutex_unlock_ranked(&a->lock);
	zs_zswap_destroy(z);
}

/* A zblock allocation under a page provider's mutex: the class lock comes first. */
static void case_zblock_under_provider(void)
{
	struct zs_pages_config pc = { .page_size = PAGE };
	struct zs_pages *p = pages_create(&pc);
	struct zblock_config zc;

	zblock_config_init(&zc);
	struct zblock_pool *zp = must_zblock_create(&zc);
	if (!p || !zp)
		_exit(3);
	mutex_lock_ranked(&p->lock, ZS_LOCK_PAGES_PROVIDER);
	unsigned long h = zblock_malloc(zp, 700);
	mutex_unlock_ranked(&p->lock);
	if (h)
		zblock_free(zp, h);
	zblock_destroy_pool(zp);
	pages_destroy(p);
}

struct lcase {
	const char *name;
	void (*fn)(void);
	const char *expect;  /* in the debug build's report; NULL: must exit 0 */
	const char *held;    /* the held lock the report must name */
	const char *home;    /* where the report says the order is written */
};

static const struct lcase cases[] = {
	{ "control: every lock in order", case_control, NULL, NULL, NULL },
	{ "zswap store under a shard lock", case_store_under_shard,
	  "lock order violated: taking zswap stream (rank 150",
	  "while holding zswap shard lock (rank 160", "src/zswap/zswap.c" },
	{ "zswap invalidate under another shard lock", case_invalidate_under_shard,
	  "lock order violated: taking a second zswap shard lock (rank 160",
	  "while holding zswap shard lock (rank 160", "src/zswap/zswap.c" },
	{ "zblock class lock under the provider mutex", case_zblock_under_provider,
	  "lock order violated: taking zblock class lock (rank 250",
	  "while holding page provider mutex (rank 320", "src/zblock/zblock.c" },
};

int main(void)
{
	char err[4096];

	snprintf(backing, sizeof(backing), "/tmp/zs_lockorder_XXXXXX");
	int fd = mkstemp(backing);
	REQUIRE(fd >= 0);
	close(fd);
	printf("ZS_DEBUG %s\n",
	       ZS_DEBUG_ON ? "on: every order violation must abort" : "off: checks compiled out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lcase *c = &cases[i];
		int aborts = ZS_DEBUG_ON && c->expect;
		int st = fc_capture(c->fn, err, sizeof(err), 60);
		int ok;
		if (aborts)
			ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(err, c->expect) &&
			     strstr(err, c->held) && strstr(err, c->home) &&
			     strstr(err, "test_zswap_lockorder.c:");
		else
			ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strstr(err, "lock order") &&
			     !strstr(err, "internal check");
		printf("%-45s %s\n", c->name, ok ? "ok" : "FAILED");
		if (!ok)
			fprintf(stderr, "  %s: status %#x, child stderr: %s\n", c->name, st, err);
		CHECK(ok);
	}
	unlink(backing);
	return tu_done();
}
