/*
 * The ZS_DEBUG checks (src/common/debug.h) fire, and only where they should.
 * Each case runs in a forked child that breaks one internal rule through an
 * internal entry point (a list update without the class lock, a zspage whose
 * fullness names the wrong list, a double free in unchecked mode, a zram
 * slot freed unlocked, ...).  In a -DZS_DEBUG=ON build the child must die of
 * SIGABRT with the matching "internal check failed: <condition>" line; a
 * missing or misplaced check fails the case.  Without ZS_DEBUG the checks
 * must cost nothing and change nothing: the cases that are harmless when
 * unchecked run to a clean exit.  A control child that follows every rule
 * must exit cleanly in both builds.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "forkcase.h"
#include "zs/zblock.h"
#include "zs/zram.h"
#include "zsmalloc/internal.h"
#include "zram/internal.h"
#include "must.h"

/* A pool with one live object; *zspage and *class are its. */
static struct zs_pool *pool_with_object(unsigned long *h, struct zspage **zspage,
					struct size_class **class)
{
	struct zs_pool *pool = must_pool_create(NULL);
	if (!pool)
		_exit(3);
	*h = zs_malloc(pool, 100);
	if (ZS_IS_ERR(*h))
		_exit(3);
	*zspage = obj_to_zspage(pool, handle_to_obj(*h));
	*class = zspage_class(pool, *zspage);
	return pool;
}

static void case_control(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	struct zs_pool *pool = pool_with_object(&h, &zspage, &class);
	spin_lock(&class->lock);
	fix_fullness_group(class, zspage);
	spin_unlock(&class->lock);
	if (zs_free(pool, h) || zs_compact(pool) != 0)
		_exit(4);
	zs_destroy_pool(pool);
}

static void case_list_unlocked(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	struct zs_pool *pool = pool_with_object(&h, &zspage, &class);
	remove_zspage(class, zspage); /* class lock not held */
	insert_zspage(class, zspage, get_fullness_group(class, zspage));
	zs_destroy_pool(pool);
}

static void case_wrong_list(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	(void)pool_with_object(&h, &zspage, &class);
	spin_lock(&class->lock);
	zspage->fullness = ZS_INUSE_RATIO_100; /* it is on a partly used list */
	remove_zspage(class, zspage);
}

static void case_inuse_bound(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	struct zs_pool *pool = pool_with_object(&h, &zspage, &class);
	spin_lock(&class->lock);
	zspage->inuse = class->objs_per_zspage + 1;
	int fg = get_fullness_group(class, zspage);
	zspage->inuse = 1;
	spin_unlock(&class->lock);
	(void)fg;
	zs_destroy_pool(pool);
}

static void case_class_counts(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	struct zs_pool *pool = pool_with_object(&h, &zspage, &class);
	struct zs_class_stats st;
	spin_lock(&class->lock);
	class->stats[ZS_OBJS_INUSE]++; /* one object more than the zspages hold */
	spin_unlock(&class->lock);
	zs_class_stats(pool, (int)class->index, &st, sizeof(st));
	spin_lock(&class->lock);
	class->stats[ZS_OBJS_INUSE]--;
	spin_unlock(&class->lock);
	zs_destroy_pool(pool);
}

static void case_double_free(void)
{
	unsigned long h;
	struct zspage *zspage;
	struct size_class *class;
	struct zs_pool *pool = pool_with_object(&h, &zspage, &class);
	zs_free(pool, h);
	zs_free(pool, h); /* unchecked pool: nothing but the debug check stops it */
}

static void case_spin_unlock_unheld(void)
{
	spinlock_t l;
	spin_init(&l);
	spin_unlock(&l);
}

static void case_zspage_unlock_unheld(void)
{
	atomic_int cnt;
	atomic_init(&cnt, 0);
	zspage_read_unlock(&cnt);
}

static void case_zblock_double_free(void)
{
	struct zblock_pool *pool = must_zblock_create(NULL);
	if (!pool)
		_exit(3);
	unsigned long a = zblock_malloc(pool, 100), b = zblock_malloc(pool, 100);
	if (ZS_IS_ERR(a) || ZS_IS_ERR(b))
		_exit(3);
	zblock_free(pool, a);
	zblock_free(pool, a); /* unchecked: b keeps the block alive, the bit is already clear */
}

static void case_zram_slot_unlocked(void)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = 64 * 4096;
	if (zs_zram_create(&cfg, &z, NULL, 0))
		_exit(3);
	struct stream *s = zram_stream_get(z);
	zram_slot_free_locked(z, s, &z->slots[0], 0); /* slot lock not taken */
	stream_put(s);
	zs_zram_destroy(z);
}

struct dcase {
	const char *name;
	void (*fn)(void);
	const char *expect; /* in the debug build's report; NULL: must exit 0 */
	int harmless;       /* runs to a clean exit when the checks are compiled out */
};

static const struct dcase cases[] = {
	{ "control", case_control, NULL, 1 },
	{ "fullness list without class lock", case_list_unlocked,
	  "remove_zspage: internal check failed: spin_held(&class->lock)", 1 },
	{ "zspage not on the list its fullness names", case_wrong_list,
	  "internal check failed: zspage_on_its_list(class, zspage)", 0 },
	{ "inuse above objs_per_zspage", case_inuse_bound, "internal check failed: inuse <= objs", 1 },
	{ "class counts disagree with its lists", case_class_counts,
	  "internal check failed: class_lists_sane(c)", 1 },
	{ "double free (handle state)", case_double_free,
	  "internal check failed: handle_is_live(handle)", 0 },
	{ "class lock released by a non-holder", case_spin_unlock_unheld,
	  "internal check failed: spin_held(l)", 1 },
	{ "zspage read unlock without a reader", case_zspage_unlock_unheld,
	  "internal check failed: was > 0", 1 },
	{ "zblock double free (block invariants)", case_zblock_double_free,
	  "internal check failed: test_slot(b, slot)", 0 },
	{ "zram slot freed without its lock", case_zram_slot_unlocked,
	  "zram_slot_free_locked: internal check failed: slot_is_locked(sl)", 0 },
};


int main(void)
{
	char err[4096];
	printf("ZS_DEBUG %s\n", ZS_DEBUG_ON ? "on: every violation must abort" : "off: checks compiled out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct dcase *c = &cases[i];
		int aborts = ZS_DEBUG_ON && c->expect;
		if (!aborts && !c->harmless)
			continue;
		int st = fc_capture(c->fn, err, sizeof(err), 0);
		int ok;
		if (aborts)
			ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(err, c->expect);
		else
			ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strstr(err, "internal check");
		printf("%-45s %s\n", c->name, ok ? "ok" : "FAILED");
		if (!ok)
			fprintf(stderr, "  %s: status %#x, child stderr: %s\n", c->name, st, err);
		CHECK(ok);
	}
	return tu_done();
}
