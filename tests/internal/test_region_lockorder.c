/*
 * The region's lock order (top of src/region/region.c, "Lock order": the
 * reclaim hand, then ulock, then the store's locks; the staging-buffer,
 * kick and live-list locks are leaves) is enforced in a -DZS_DEBUG=ON build.
 * Each case runs in a forked child that takes a region lock against the
 * order and must die of SIGABRT with the report naming both locks, their
 * ranks and src/region/region.c.  A control child faults, pages out,
 * releases and reclaims the legal way and must exit cleanly in both builds;
 * without ZS_DEBUG the cases cannot deadlock on one thread and must exit
 * cleanly too.  Needs userfaultfd (exit 77 without it).
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "forkcase.h"
#include "common/debug.h"
#include "region/internal.h"

#define NPAGES 64

static struct zs_region *region_new(size_t resident_limit)
{
	struct zs_region_config cfg;
	struct zs_region *r = NULL;
	char err[256];

	zs_region_config_init(&cfg);
	cfg.size = NPAGES * 4096;
	cfg.resident_limit = resident_limit;
	if (zs_region_create(&cfg, &r, err, sizeof(err))) {
		fprintf(stderr, "zs_region_create: %s\n", err);
		_exit(3);
	}
	return r;
}

static void case_control(void)
{
	/* A resident limit: the reclaimer thread runs its kick and passes too. */
	struct zs_region *r = region_new(16 * 4096);
	unsigned char *a = zs_region_addr(r);
	size_t pg = r->page;

	memset(a, 5, NPAGES * pg);
	if (zs_region_pageout(r, a, 16 * pg) < 0 || a[3 * pg] != 5)
		_exit(4);
	if (zs_region_release(r, a + 32 * pg, 8 * pg) || zs_region_reclaim(r, 0) < 0)
		_exit(4);
	if (a[35 * pg] != 0 || a[50 * pg] != 5)
		_exit(4);
	zs_region_destroy(r);
}

/* A reclaim pass under ulock: the CLOCK hand's lock is the outermost. */
static void case_reclaim_under_ulock(void)
{
	struct zs_region *r = region_new(0);

	mutex_lock_ranked(&r->ulock, ZS_LOCK_REGION_ULOCK);
	zs_region_reclaim(r, 0);
	mutex_unlock_ranked(&r->ulock);
	zs_region_destroy(r);
}

/* A range call under the staging-buffer lock: a leaf, and the call takes ulock. */
static void case_range_under_bufs(void)
{
	struct zs_region *r = region_new(0);

	mutex_lock_ranked(&r->block, ZS_LOCK_REGION_BUFS);
	zs_region_release(r, zs_region_addr(r), r->page);
	mutex_unlock_ranked(&r->block);
	zs_region_destroy(r);
}

struct lcase {
	const char *name;
	void (*fn)(void);
	const char *expect; /* in the debug build's report; NULL: must exit 0 */
	const char *held;   /* the held lock the report must name */
};

static const struct lcase cases[] = {
	{ "control: every lock in order", case_control, NULL, NULL },
	{ "reclaim under ulock", case_reclaim_under_ulock,
	  "lock order violated: taking region reclaim hand lock (rank 20",
	  "while holding region ulock (rank 50" },
	{ "range call under the staging-buffer lock", case_range_under_bufs,
	  "lock order violated: taking region ulock (rank 50",
	  "while holding region staging-buffer lock (rank 60" },
};

int main(void)
{
	char err[4096];

	fc_skip_without_uffd();
	printf("ZS_DEBUG %s\n",
	       ZS_DEBUG_ON ? "on: every order violation must abort" : "off: checks compiled out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lcase *c = &cases[i];
		int aborts = ZS_DEBUG_ON && c->expect;
		int st = fc_capture(c->fn, err, sizeof(err), 60);
		int ok;
		if (aborts)
			ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(err, c->expect) &&
			     strstr(err, c->held) && strstr(err, "src/region/region.c") &&
			     strstr(err, "test_region_lockorder.c:");
		else
			ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strstr(err, "lock order") &&
			     !strstr(err, "internal check");
		printf("%-45s %s\n", c->name, ok ? "ok" : "FAILED");
		if (!ok)
			fprintf(stderr, "  %s: status %#x, child stderr: %s\n", c->name, st, err);
		CHECK(ok);
	}
	return tu_done();
}
