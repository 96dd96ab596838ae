/*
 * The spare zspages of an owned pool's thread heap (src/zsmalloc/owned.c,
 * "Spares"): a zspage its owner empties stays the heap's, at most
 * ZS_HEAP_SPARES a class, counted in the pool's pages, and goes back to its
 * class on a compaction, a trim, the thread's exit and the idle look of
 * self-compaction.  Holds, through seeded rounds of 200..3600-byte objects:
 *  - after a free-all the pool's pages are exactly the spares' pages, each
 *    spare empty, at most ZS_HEAP_SPARES a class, and zs_class_stats counts
 *    them as empty zspages with no object in use;
 *  - the class's next allocation takes a spare (no lock, no new page);
 *  - objects read back as written across rounds that reuse spares;
 *  - zs_compact, a thread's exit and the idle look leave no page.
 * White box (internal.h) to walk the heap's spares; the rest is the API.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"

#define NOBJ 3000

static unsigned char src[4096], dst[4096];
static unsigned long hs[NOBJ];
static size_t lens[NOBJ];

static void fill(size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(seed * 37 + i * 11 + 1);
}

static void round_alloc(struct zs_pool *p, unsigned tag)
{
	for (int i = 0; i < NOBJ; i++) {
		fill(lens[i], tag + (unsigned)i);
		hs[i] = zs_malloc_write(p, src, lens[i]);
		REQUIRE(!ZS_IS_ERR(hs[i]));
	}
}

static void round_free(struct zs_pool *p, unsigned tag)
{
	for (int i = 0; i < NOBJ; i++) {
		fill(lens[i], tag + (unsigned)i);
		void *m = zs_obj_read_begin(p, hs[i], lens[i], dst);
		REQUIRE(m);
		CHECK(memcmp(m, src, lens[i]) == 0);
		zs_obj_read_end(p, hs[i], lens[i], m);
		CHECK_EQ(zs_free(p, hs[i]), 0);
	}
}

/* This thread's spares: their pages, each empty and of its class's shape, at most
 * ZS_HEAP_SPARES a class; *nr gets how many. */
static unsigned long spare_pages(struct zs_pool *p, unsigned long *nr)
{
	struct zs_heap *hp = heap_tls.heap[0];
	unsigned long pages = 0;
	*nr = 0;
	for (int i = 0; hp && i < p->nr_classes; i++) {
		unsigned n = 0;
		for (struct zspage *z = hp->cls[i].spare; z; z = z->lnext, n++) {
			struct size_class *class = zspage_class(p, z);
			CHECK_EQ(z->inuse, 0);
			CHECK_EQ(z->fullness, ZS_OWNED_SPARE);
			CHECK_EQ(z->objs, class->objs_per_zspage);
			CHECK_EQ(zspage_heap_id(z), hp->id);
			pages += class->pages_per_zspage;
		}
		CHECK_EQ(n, hp->cls[i].nspare);
		CHECK(n <= ZS_HEAP_SPARES);
		*nr += n;
	}
	return pages;
}

static void *thread_round(void *arg)
{
	struct zs_pool *p = arg;
	round_alloc(p, 7);
	round_free(p, 7);
	unsigned long nr;
	CHECK_EQ(zs_get_total_pages(p), spare_pages(p, &nr));
	CHECK(nr > 0);
	return NULL; /* its exit gives the spares back */
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_owned_spares");
	uint64_t x = seed | 1;
	for (int i = 0; i < NOBJ; i++)
		lens[i] = 200 + tu_rand(&x) % 3401;
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0; /* no idle look but the one case that wants it */
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	if (!p->owned) {
		printf("test_zs_owned_spares: built without owned zspages, nothing to check\n");
		zs_destroy_pool(p);
		return tu_done();
	}

	/* A free-all leaves the spares and nothing else, counted as empty zspages. */
	round_alloc(p, 1);
	round_free(p, 1);
	unsigned long nr, pages = spare_pages(p, &nr);
	printf("test_zs_owned_spares: %lu spares (%lu pages) after a free-all of %d objects\n", nr,
	       pages, NOBJ);
	CHECK(nr > 0);
	CHECK_EQ(zs_get_total_pages(p), pages);
	unsigned long empty = 0, allocated = 0, spare_objs = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		struct zs_class_stats st;
		if (zs_class_stats(p, i, &st, sizeof(st)))
			continue;
		CHECK_EQ(st.obj_used, 0);
		empty += st.fullness[0];
		allocated += st.obj_allocated;
	}
	struct zs_heap *hp = heap_tls.heap[0];
	for (int i = 0; i < p->nr_classes; i++)
		for (struct zspage *z = hp->cls[i].spare; z; z = z->lnext)
			spare_objs += z->objs;
	CHECK_EQ(empty, nr);
	CHECK_EQ(allocated, spare_objs);

	/* The class's next allocation takes its newest spare. */
	int k = 0;
	while (!hp->cls[k].spare)
		k++;
	struct zspage *want = hp->cls[k].spare;
	unsigned long before = zs_get_total_pages(p);
	unsigned long h = zs_malloc(p, hp->cls[k].size - ZS_HANDLE_SIZE);
	REQUIRE(!ZS_IS_ERR(h));
	CHECK(hp->cls[k].cur == want);
	CHECK_EQ(obj_to_zspage(p, handle_to_obj(h)), want);
	CHECK_EQ(zs_get_total_pages(p), before);
	CHECK_EQ(zs_free(p, h), 0);

	/* Rounds that reuse them read back; a compaction leaves no page. */
	for (unsigned r = 2; r < 5; r++) {
		round_alloc(p, r * 1000);
		round_free(p, r * 1000);
		CHECK_EQ(zs_get_total_pages(p), spare_pages(p, &nr));
	}
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	CHECK_EQ(spare_pages(p, &nr), 0);

	/* A thread's exit gives its spares back. */
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, thread_round, p) == 0);
	pthread_join(t, NULL);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);

	/* Self-compaction's idle look takes an idle thread's spares back. */
	c.autocompact_ms = 50;
	p = must_pool_create(&c);
	REQUIRE(p);
	round_alloc(p, 9);
	double t_free = now_s();
	round_free(p, 9);
	/* Not walked here: the purge thread's look may be taking them already.  It may even be
	 * done on a loaded machine, though not before the pool was idle autocompact_ms after the
	 * last free (so at least that long after the free-all began). */
	unsigned long left = zs_get_total_pages(p);
	CHECK(left > 0 || now_s() - t_free >= 0.05);
	double t0 = now_s();
	while (zs_get_total_pages(p) && now_s() - t0 < 5.0) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	printf("test_zs_owned_spares: idle look gave the spares back after %.2f s\n", now_s() - t0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
