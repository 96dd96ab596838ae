/*
 * For pools: memory goes back while the program is idle.
 * Fill a pool past the cache bound, free every object, make no further
 * libzs call, sleep 1.5 s (three decays of the default 500 ms): RSS must be
 * back within 8 MiB of where it was before the fill.  The same for eight
 * pools, which must also hold at most 160 MiB right after their free-all
 * (one process-wide cache budget, not eight).  Both in the kernel profile
 * and the application profile (whose emptied zspages stay parked whole in
 * their class, src/zsmalloc/park.c).  The purge thread exists
 * only while pages are cached: none after create, none after the idle.
 *
 * The environment knobs (read once per process, so each case runs in a
 * re-executed copy of this program): ZS_PAGES_DECAY_MS=-1 keeps the cache
 * (no thread), =0 returns every page at the free; ZS_PAGES_CACHE_MB bounds
 * what a free-all leaves; values outside the ranges are ignored (the
 * built-in defaults stay).  And a pool's own page_cache_decay_ms: 100 ms
 * returns sooner, ZS_PAGES_DECAY_NEVER keeps its pages until a trim.
 */
#include "testutil.h"
#include "idle.h"
#include "zs/pages.h"
#include "zs/zsmalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "must.h"

#define NPOOLS 8
#define MAXOBJ (200 * 1000)

static unsigned long handles[NPOOLS][MAXOBJ];
static size_t nobj[NPOOLS];
static unsigned char wbuf[4096];

/* Compressed-page-like sizes, 200..3600 B (bench_common.h's shape). */
static size_t comp_size(uint64_t *s)
{
	uint64_t r = tu_rand(s);
	if (r % 10 == 0)
		return 200 + (r >> 8) % 401;
	return 200 + (r >> 8) % 1701 + (r >> 32) % 1701;
}

static void fill(struct zs_pool *p, int k, size_t bytes, uint64_t seed)
{
	size_t got = 0;
	nobj[k] = 0;
	while (got < bytes && nobj[k] < MAXOBJ) {
		size_t sz = comp_size(&seed);
		unsigned long h = zs_malloc(p, sz);
		REQUIRE(!ZS_IS_ERR(h));
		wbuf[0] = (unsigned char)nobj[k];
		REQUIRE(zs_obj_write(p, h, wbuf, sz) == 0);
		handles[k][nobj[k]++] = h;
		got += sz;
	}
}

static void free_all(struct zs_pool *p, int k)
{
	for (size_t i = 0; i < nobj[k]; i++)
		REQUIRE(zs_free(p, handles[k][i]) == 0);
	nobj[k] = 0;
}

/* Everything this test touches, touched before the first RSS reading. */
static void prefault(void)
{
	memset(handles, 0, sizeof handles);
	memset(wbuf, 0xa5, sizeof wbuf);
}

/* A pool in the kernel profile (the default), or the application's (parked zspages, pages.h). */
static struct zs_pool *mk_pool(int app)
{
	struct zs_pool_config c;
	/* The application profile with its defaults, self-compaction included: its looks
	 * must not hold on to what a free-all gives back (test_zs_autocompact). */
	if (app)
		zs_pool_config_init_app(&c);
	else
		zs_pool_config_init(&c);
	return must_pool_create(&c);
}

static void one_pool(int app)
{
	CHECK_EQ(idle_purge_threads(), 0);
	struct zs_pool *p = mk_pool(app);
	REQUIRE(p);
	CHECK_EQ(idle_purge_threads(), 0); /* no thread at pool creation */
	size_t rss0 = idle_rss();
	fill(p, 0, 160 * IDLE_MIB, 1);
	size_t rss_full = idle_rss();
	free_all(p, 0);
	size_t rss_freed = idle_rss();
	/* Pages are cached (the budget's 128 MiB), so the thread is there to return them. */
	CHECK_EQ(idle_purge_threads(), 1);
	unsigned waited = idle_wait(rss0 + 8 * IDLE_MIB, 1500, 20000);
	size_t rss_idle = idle_rss();
	printf("one pool (%s profile): full %+.1f MiB, after free-all %+.1f, after %.1f s idle %+.1f "
	       "(MiB above the start)\n",
	       app ? "application" : "kernel", idle_mib(rss_full, rss0), idle_mib(rss_freed, rss0), waited / 1000.0,
	       idle_mib(rss_idle, rss0));
	if (IDLE_RSS_MEANINGFUL) {
		CHECK(rss_full > rss0 + 150 * IDLE_MIB); /* a stuck reading cannot pass */
		CHECK(rss_freed <= rss0 + 140 * IDLE_MIB);
		CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
	}
	CHECK_EQ(idle_purge_threads(), 0); /* nothing cached: the thread ended */
	zs_destroy_pool(p);
}

static void eight_pools(int app)
{
	struct zs_pool *p[NPOOLS];
	for (int k = 0; k < NPOOLS; k++) {
		p[k] = mk_pool(app);
		REQUIRE(p[k]);
	}
	CHECK_EQ(idle_purge_threads(), 0);
	size_t rss0 = idle_rss();
	for (int k = 0; k < NPOOLS; k++)
		fill(p[k], k, 40 * IDLE_MIB, (uint64_t)k + 100);
	size_t rss_full = idle_rss();
	for (int k = 0; k < NPOOLS; k++)
		free_all(p[k], k);
	size_t rss_freed = idle_rss();
	CHECK_EQ(idle_purge_threads(), 1); /* one for the process, not one per pool */
	unsigned waited = idle_wait(rss0 + 8 * IDLE_MIB, 1500, 20000);
	size_t rss_idle = idle_rss();
	printf("eight pools (%s profile): full %+.1f MiB, after free-all %+.1f, after %.1f s idle %+.1f\n",
	       app ? "application" : "kernel", idle_mib(rss_full, rss0), idle_mib(rss_freed, rss0), waited / 1000.0,
	       idle_mib(rss_idle, rss0));
	if (IDLE_RSS_MEANINGFUL) {
		CHECK(rss_full > rss0 + 300 * IDLE_MIB);
		CHECK(rss_freed <= rss0 + 160 * IDLE_MIB);
		CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
	}
	CHECK_EQ(idle_purge_threads(), 0);
	for (int k = 0; k < NPOOLS; k++)
		zs_destroy_pool(p[k]);
}

/* A pool's own decay: 100 ms returns its pages well before the default would. */
static void short_decay(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_cache_decay_ms = 100;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	size_t rss0 = idle_rss();
	fill(p, 0, 64 * IDLE_MIB, 7);
	free_all(p, 0);
	/* 0.4 s is enough on an idle machine (printed); a loaded one (CI's -j2 beside
	 * other builds) may not run the purge thread that soon, so the bound waits
	 * up to 4 s, as the other cases' waits do. */
	idle_sleep_ms(400);
	size_t rss_04 = idle_rss();
	unsigned waited = idle_wait(rss0 + 8 * IDLE_MIB, 0, 3600) + 400;
	size_t rss_idle = idle_rss();
	printf("decay 100 ms: after 0.4 s idle %+.1f MiB, after %.2f s %+.1f\n",
	       idle_mib(rss_04, rss0), waited / 1000.0, idle_mib(rss_idle, rss0));
	if (IDLE_RSS_MEANINGFUL)
		CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
	zs_destroy_pool(p);
}

/* ZS_PAGES_DECAY_NEVER: the cache stays through the idle (no thread) until a trim. */
static void never_decay(void)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.page_cache_decay_ms = ZS_PAGES_DECAY_NEVER;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	size_t rss0 = idle_rss();
	fill(p, 0, 64 * IDLE_MIB, 9);
	free_all(p, 0);
	CHECK_EQ(idle_purge_threads(), 0);
	idle_sleep_ms(800);
	size_t rss_idle = idle_rss();
	zs_pool_trim(p);
	size_t rss_trim = idle_rss();
	printf("decay never: after 0.8 s idle %+.1f MiB, after zs_pool_trim %+.1f\n",
	       idle_mib(rss_idle, rss0), idle_mib(rss_trim, rss0));
	if (IDLE_RSS_MEANINGFUL) {
		CHECK(rss_idle >= rss0 + 50 * IDLE_MIB);
		CHECK(rss_trim <= rss0 + 8 * IDLE_MIB);
	}
	zs_destroy_pool(p);
}

/*
 * Child of an environment case: fill 64 MiB, free it all, report what RSS
 * did at once and after 0.8 s idle, and whether a purge thread ran.
 */
static int env_child(const char *mode)
{
	prefault();
	struct zs_pool *p = must_pool_create(NULL);
	REQUIRE(p);
	size_t rss0 = idle_rss();
	fill(p, 0, 64 * IDLE_MIB, 11);
	free_all(p, 0);
	size_t rss_freed = idle_rss();
	int threads = idle_purge_threads();
	idle_sleep_ms(800);
	size_t rss_idle = idle_rss();
	printf("%s: after free-all %+.1f MiB, after 0.8 s idle %+.1f, purge threads %d\n", mode,
	       idle_mib(rss_freed, rss0), idle_mib(rss_idle, rss0), threads);
	if (!strcmp(mode, "never")) {
		/* The default pool keeps its 64 MiB cache: no decay, no thread. */
		CHECK_EQ(threads, 0);
		if (IDLE_RSS_MEANINGFUL)
			CHECK(rss_idle >= rss0 + 50 * IDLE_MIB);
	} else if (!strcmp(mode, "immediate")) {
		CHECK_EQ(threads, 0);
		if (IDLE_RSS_MEANINGFUL)
			CHECK(rss_freed <= rss0 + 8 * IDLE_MIB);
	} else if (!strcmp(mode, "ignored")) {
		/* Out-of-range / malformed values are ignored: the built-in 500 ms decay and
		 * 128 MiB budget, so the 64 MiB stay cached at once and go back idle. */
		CHECK(threads >= 1);
		if (IDLE_RSS_MEANINGFUL) {
			CHECK(rss_freed >= rss0 + 50 * IDLE_MIB);
			CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
		}
	} else { /* budget: ZS_PAGES_CACHE_MB=16 */
		if (IDLE_RSS_MEANINGFUL) {
			CHECK(rss_freed <= rss0 + 24 * IDLE_MIB);
			CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
		}
	}
	zs_destroy_pool(p);
	return tu_done();
}

static void env_case2(const char *self, const char *mode, const char *var, const char *val,
		      const char *var2, const char *val2)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setenv(var, val, 1);
		if (var2)
			setenv(var2, val2, 1);
		execl(self, self, "--env", mode, (char *)NULL);
		_exit(127);
	}
	REQUIRE(pid > 0);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void env_case(const char *self, const char *mode, const char *var, const char *val)
{
	env_case2(self, mode, var, val, NULL, NULL);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--env"))
		return env_child(argv[2]);
	prefault();
	one_pool(0);
	one_pool(1);
	eight_pools(0);
	eight_pools(1);
	short_decay();
	never_decay();
	env_case("/proc/self/exe", "never", "ZS_PAGES_DECAY_MS", "-1");
	env_case("/proc/self/exe", "immediate", "ZS_PAGES_DECAY_MS", "0");
	env_case("/proc/self/exe", "budget", "ZS_PAGES_CACHE_MB", "16");
	/* Just past each range, and a number with trailing characters: ignored (zs/pages.h). */
	env_case2("/proc/self/exe", "ignored", "ZS_PAGES_DECAY_MS", "3600001", "ZS_PAGES_CACHE_MB",
		  "16x");
	env_case2("/proc/self/exe", "ignored", "ZS_PAGES_DECAY_MS", "-2", "ZS_PAGES_CACHE_MB",
		  "1048577");
	return tu_done();
}
