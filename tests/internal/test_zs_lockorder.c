/*
 * The lock order of src/zsmalloc/zsmalloc.c ("Lock order") is enforced in a
 * -DZS_DEBUG=ON build.  Each case runs in a forked child that takes locks
 * against the order through the internal lock calls (or a public call made
 * while holding an internal lock) and must die of SIGABRT with the
 * "lock order violated" report that names both locks.  A control child that
 * walks every lock the order lists the legal way (all 16 handle shards in
 * address order, pool -> class -> provider, the deferred drain, compaction,
 * trims) must exit cleanly in both builds.  Without ZS_DEBUG the checks
 * compile away: the cases that cannot deadlock single-threaded must then run
 * to a clean exit, proving nothing else changed.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "forkcase.h"
#include "zsmalloc/internal.h"
#include "pages/internal.h"
#include "must.h"

/* A pool with one live object of `size` bytes; *class is its class. */
static struct zs_pool *pool_with(size_t size, int deferred_worker, unsigned long *h,
				 struct size_class **class)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.deferred_worker = deferred_worker;
	struct zs_pool *pool = must_pool_create(&cfg);
	if (!pool)
		_exit(3);
	*h = zs_malloc(pool, size);
	if (ZS_IS_ERR(*h))
		_exit(3);
	*class = zspage_class(pool, obj_to_zspage(pool, handle_to_obj(*h)));
	return pool;
}

static void case_control(void)
{
	unsigned long h, h2;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	char buf[100] = { 1 };
	/* Pool -> class -> provider pcp -> provider mutex: the legal nesting. */
	read_lock(&pool->lock);
	spin_lock(&class->lock);
	mutex_lock_ranked(&pool->pages->lock, ZS_LOCK_PAGES_PROVIDER);
	mutex_unlock_ranked(&pool->pages->lock);
	spin_unlock(&class->lock);
	read_unlock(&pool->lock);
	/* Every handle shard in address order, as handles_trim does. */
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++)
		spin_lock(&pool->shards[i].lock);
	spin_lock(&pool->handle_free_lock);
	spin_unlock(&pool->handle_free_lock);
	for (int i = ZS_HANDLE_SHARDS - 1; i >= 0; i--)
		spin_unlock(&pool->shards[i].lock);
	/* The public paths through every lock of the list. */
	if (zs_obj_write(pool, h, buf, sizeof(buf)))
		_exit(4);
	void *p = zs_obj_read_begin(pool, h, sizeof(buf), buf);
	if (!p)
		_exit(4);
	/* A zspage read lock is unranked: the caller may allocate while it holds one. */
	h2 = zs_malloc(pool, 3000);
	zs_obj_read_end(pool, h, sizeof(buf), p);
	if (ZS_IS_ERR(h2) || zs_free_deferred(pool, h2) || zs_free_deferred(pool, h))
		_exit(4);
	zs_free_deferred_flush(pool);
	zs_compact(pool);
	zs_pool_trim(pool);
	zs_destroy_pool(pool);
}

/* The class lock, then the pool lock: an inversion of compaction's order. */
static void case_pool_under_class(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	spin_lock(&class->lock);
	read_lock(&pool->lock);
	read_unlock(&pool->lock);
	spin_unlock(&class->lock);
	zs_destroy_pool(pool);
}

/* Two class locks at once: the order allows one at a time. */
static void case_two_classes(void)
{
	unsigned long h1, h2;
	struct size_class *c1, *c2;
	struct zs_pool *pool = pool_with(100, -1, &h1, &c1);
	h2 = zs_malloc(pool, 2000);
	if (ZS_IS_ERR(h2))
		_exit(3);
	c2 = zspage_class(pool, obj_to_zspage(pool, handle_to_obj(h2)));
	if (c1 == c2)
		_exit(3);
	spin_lock(&c1->lock);
	spin_lock(&c2->lock);
	spin_unlock(&c2->lock);
	spin_unlock(&c1->lock);
	zs_destroy_pool(pool);
}

/* Handle shards nest only in address order (handles_trim's). */
static void case_shards_backwards(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	spin_lock(&pool->shards[1].lock);
	spin_lock(&pool->shards[0].lock);
	spin_unlock(&pool->shards[0].lock);
	spin_unlock(&pool->shards[1].lock);
	zs_destroy_pool(pool);
}

/* The page provider's mutex is innermost: a class lock under it inverts free's order. */
static void case_class_under_provider(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	mutex_lock_ranked(&pool->pages->lock, ZS_LOCK_PAGES_PROVIDER);
	spin_lock(&class->lock);
	spin_unlock(&class->lock);
	mutex_unlock_ranked(&pool->pages->lock);
	zs_destroy_pool(pool);
}

/* A handle shard lock and then the shared free list's, backwards. */
static void case_shard_under_free_list(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	spin_lock(&pool->handle_free_lock);
	spin_lock(&pool->shards[0].lock);
	spin_unlock(&pool->shards[0].lock);
	spin_unlock(&pool->handle_free_lock);
	zs_destroy_pool(pool);
}

/* A deferred drain (consume lock) under the pool lock, through the public flush. */
static void case_flush_under_pool(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	if (zs_free_deferred(pool, h))
		_exit(3);
	read_lock(&pool->lock);
	zs_free_deferred_flush(pool);
	read_unlock(&pool->lock);
	zs_destroy_pool(pool);
}

/* zs_compact with a class lock held: unchecked, it would spin on that lock forever. */
static void case_compact_under_class(void)
{
	unsigned long h;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	spin_lock(&class->lock);
	zs_compact(pool);
}

/* The bounded step enters compaction through the same gate, so the same misuse is caught. */
static void case_compact_step_under_class(void)
{
	unsigned long h;
	unsigned cursor = 0;
	struct size_class *class;
	struct zs_pool *pool = pool_with(100, -1, &h, &class);
	spin_lock(&class->lock);
	zs_compact_step(pool, &cursor, 4);
}

struct lcase {
	const char *name;
	void (*fn)(void);
	const char *expect; /* in the debug build's report; NULL: must exit 0 */
	int harmless;       /* runs to a clean exit when the checks are compiled out */
};

static const struct lcase cases[] = {
	{ "control: every lock in order", case_control, NULL, 1 },
	{ "pool lock under a class lock", case_pool_under_class,
	  "lock order violated: taking zsmalloc pool lock (rank 220", 1 },
	{ "two class locks", case_two_classes,
	  "lock order violated: taking a second zsmalloc class lock (rank 230", 1 },
	{ "handle shards against address order", case_shards_backwards,
	  "lock order violated: taking a second zsmalloc handle shard lock (rank 240", 1 },
	{ "class lock under the provider mutex", case_class_under_provider,
	  "lock order violated: taking zsmalloc class lock (rank 230", 1 },
	{ "handle shard under the free-list lock", case_shard_under_free_list,
	  "lock order violated: taking zsmalloc handle shard lock (rank 240", 1 },
	{ "deferred flush under the pool lock", case_flush_under_pool,
	  "lock order violated: taking zsmalloc deferred consume lock (rank 210", 1 },
	{ "zs_compact under a class lock", case_compact_under_class,
	  "zs_compact: lock order violated: called holding zsmalloc class lock (rank 230", 0 },
	{ "zs_compact_step under a class lock", case_compact_step_under_class,
	  "zs_compact_step: lock order violated: called holding zsmalloc class lock (rank 230", 0 },
};

/* The lock each case must name as the one held (the second half of the report). */
static const char *const held_names[] = {
	NULL,
	"while holding zsmalloc class lock (rank 230",
	"while holding zsmalloc class lock (rank 230",
	"while holding zsmalloc handle shard lock (rank 240",
	"while holding page provider mutex (rank 320",
	"while holding zsmalloc handle free-list lock (rank 241",
	"while holding zsmalloc pool lock (rank 220",
	"taken at ",
	"taken at ",
};


int main(void)
{
	char err[4096];
	_Static_assert(sizeof(held_names) / sizeof(held_names[0]) == sizeof(cases) / sizeof(cases[0]),
		       "one held-lock name per case");
	printf("ZS_DEBUG %s\n",
	       ZS_DEBUG_ON ? "on: every order violation must abort" : "off: checks compiled out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lcase *c = &cases[i];
		int aborts = ZS_DEBUG_ON && c->expect;
		if (!aborts && !c->harmless)
			continue;
		int st = fc_capture(c->fn, err, sizeof(err), 60);
		int ok;
		if (aborts)
			ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(err, c->expect) &&
			     strstr(err, held_names[i]) && strstr(err, "test_zs_lockorder.c:");
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
