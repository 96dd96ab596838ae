/*
 * The handle cache of an owned pool's thread heap (src/zsmalloc/internal.h,
 * heap_handle_put and heap_handle_pop: an array of ready handles; owned.c,
 * heap_handles_refill and heap_handles_drain; handle.c, the magazines that
 * full caches move to and from).  Through a seeded churn of allocations and
 * frees that fills and spills the cache many times, a compaction (a
 * revocation) that gives a part-full cache back, and free-alls that pass
 * thousands of handles through the magazines:
 *  - the cache's values are distinct, never a live object's slot, and (in
 *    a ZS_DEBUG build) each slot reads free at the value's generation;
 *  - a slot handed out again carries the next generation (a stale handle
 *    never equals a live one), through a magazine too;
 *  - a trim gives back the handle chunks whose slots are all in
 *    magazines (they count free there), and every chunk once the pool is
 *    empty;
 *  - a revocation gives a full cache back to the shard's lists without
 *    making a magazine (it may run on the purge thread, which must not
 *    malloc);
 *  - every object reads back as written, and the pool empties.
 * White box (internal.h) to read the heap's cache and the chunk count; the
 * rest is the API.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"
#include "objpat.h"

#define NOBJ 2000
#define STEPS 40000

static unsigned char src[OBJPAT_MAX];

static unsigned long live[NOBJ];
static size_t len_of[NOBJ];
static unsigned tag_of[NOBJ];

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return (x > y) - (x < y);
}

/* The heap's cache: hn distinct values, none a live object's slot, free at their generation. */
static int list_sane(const struct zs_heap *hp)
{
	if (hp->hn > ZS_HEAP_HANDLES)
		return 0;
	for (unsigned long k = 0; k < hp->hn; k++) {
		unsigned long v = hp->hv[k], slot = v & HANDLE_ADDR_MASK;
		if (!slot || (v & ~(HANDLE_ADDR_MASK | HANDLE_GEN_MASK)))
			return 0;
		if (ZS_DEBUG_ON) {
			unsigned long w = atomic_load(handle_slot(slot));
			if (!(w & HANDLE_FREE_BIT) || ((w ^ v) & HANDLE_GEN_MASK))
				return 0;
		}
		for (unsigned long j = 0; j < k; j++)
			if ((hp->hv[j] & HANDLE_ADDR_MASK) == slot)
				return 0;
		for (int i = 0; i < NOBJ; i++)
			if (live[i] && (live[i] & HANDLE_ADDR_MASK) == slot)
				return 0;
	}
	return 1;
}

/* The pages of this thread's heap's spare zspages, each checked empty and the count bounded. */
static unsigned long spare_pages(struct zs_pool *p)
{
	struct zs_heap *hp = heap_tls.heap[0];
	unsigned long pages = 0;
	for (int i = 0; hp && i < p->nr_classes; i++) {
		unsigned n = 0;
		for (struct zspage *z = hp->cls[i].spare; z; z = z->lnext, n++) {
			CHECK_EQ(z->inuse, 0);
			pages += zspage_pages(zspage_class(p, z), z);
		}
		CHECK_EQ(n, hp->cls[i].nspare);
		CHECK(n <= ZS_HEAP_SPARES);
	}
	return pages;
}

/*
 * Magazines: MANY small objects (over four handle chunks), three quarters
 * freed in order (their handles go to magazines), allocated again, freed
 * again and trimmed; then the rest.
 */
#define MANY 40000
static unsigned long many[MANY], stale[MANY];

static int by_slot(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a & HANDLE_ADDR_MASK;
	unsigned long y = *(const unsigned long *)b & HANDLE_ADDR_MASK;
	return (x > y) - (x < y);
}

static void magazines(void)
{
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p && p->owned);
	const int part = 3 * MANY / 4;
	for (int i = 0; i < MANY; i++) {
		many[i] = zs_malloc(p, 48);
		REQUIRE(!ZS_IS_ERR(many[i]));
	}
	size_t chunks = p->nr_handle_chunks;
	for (int i = 0; i < part; i++) {
		stale[i] = many[i];
		CHECK_EQ(zs_free(p, many[i]), 0);
	}
	printf("test_zs_owned_handles: %d freed, %lu full magazines, %zu handle chunks\n", part,
	       p->nmag_full, chunks);
	CHECK(p->nmag_full > 0);
	/* Taken again from the magazines: each slot at its next generation. */
	for (int i = 0; i < part; i++) {
		many[i] = zs_malloc(p, 48);
		REQUIRE(!ZS_IS_ERR(many[i]));
	}
	qsort(stale, (size_t)part, sizeof(stale[0]), by_slot);
	long again = 0, same = 0;
	for (int i = 0; i < part; i++) {
		unsigned long *s = bsearch(&many[i], stale, (size_t)part, sizeof(stale[0]), by_slot);
		if (s) {
			again++;
			same += *s == many[i];
		}
	}
	printf("test_zs_owned_handles: %ld slots handed out again from magazines\n", again);
	CHECK(again > part / 2);
	CHECK_EQ(same, 0);
	/* Freed again, then trimmed: the chunks whose slots are all in magazines go back. */
	for (int i = 0; i < part; i++)
		CHECK_EQ(zs_free(p, many[i]), 0);
	CHECK(p->nmag_full > 0);
	zs_pool_trim(p);
	printf("test_zs_owned_handles: trim with %d live: %zu -> %zu handle chunks\n", MANY - part,
	       chunks, p->nr_handle_chunks);
	CHECK(p->nr_handle_chunks + 2 <= chunks);
	CHECK_EQ(p->nmag_full, 0);
	for (int i = part; i < MANY; i++)
		CHECK_EQ(zs_free(p, many[i]), 0);
	zs_pool_trim(p);
	CHECK_EQ(p->nr_handle_chunks, 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	/* Destroyed with handles in magazines and in the heap's cache (ASan: nothing leaks). */
	for (int i = 0; i < MANY / 4; i++) {
		many[i] = zs_malloc(p, 48);
		REQUIRE(!ZS_IS_ERR(many[i]));
	}
	for (int i = 0; i < MANY / 4; i++)
		CHECK_EQ(zs_free(p, many[i]), 0);
	CHECK(p->nmag_full > 0);
	zs_destroy_pool(p);
}

/*
 * A full cache given back by a revocation goes to the shard's lists, not to a
 * new magazine: a revoker may be the purge thread (self-compaction), which
 * must not malloc (a glibc arena of its own).  A fresh pool has no magazine,
 * so one would have to be made.
 */
static void revoke_full_cache(void)
{
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	enum { N = 4 * ZS_HEAP_HANDLES };
	unsigned long h[N];
	for (int i = 0; i < N; i++) {
		h[i] = zs_malloc(p, 500);
		REQUIRE(!ZS_IS_ERR(h[i]));
	}
	struct zs_heap *hp = heap_tls.heap[0];
	int k = 0;
	while (k < N && hp->hn < ZS_HEAP_HANDLES)
		CHECK_EQ(zs_free(p, h[k++]), 0);
	CHECK_EQ(hp->hn, ZS_HEAP_HANDLES);
	CHECK(!p->mag_empty && !p->nmags);
	zs_compact(p);
	CHECK_EQ(hp->hn, 0);
	CHECK_EQ(p->nmags, 0);
	printf("test_zs_owned_handles: a revocation gave a full cache back with %lu magazines made\n",
	       p->nmags);
	while (k < N)
		CHECK_EQ(zs_free(p, h[k++]), 0);
	CHECK_EQ(zs_pool_objects(p), 0);
	zs_destroy_pool(p);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_owned_handles");
	uint64_t x = seed | 1;
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0; /* no revocation but the test's own */
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	if (!p->owned) {
		printf("test_zs_owned_handles: built without owned zspages, nothing to check\n");
		zs_destroy_pool(p);
		return tu_done();
	}
	unsigned tag = 0;
	long reissued = 0, bad_gen = 0, bad_list = 0;
	for (int step = 0; step < STEPS; step++) {
		int i = (int)(tu_rand(&x) % NOBJ);
		if (live[i]) {
			unsigned long old = live[i];
			CHECK(objpat_stored(p, old, len_of[i], tag_of[i]));
			CHECK_EQ(zs_free(p, old), 0);
			live[i] = 0;
			/* The slot just freed is the next handed out, a generation on. */
			len_of[i] = 100 + tu_rand(&x) % 3900;
			tag_of[i] = ++tag;
			objpat_fill(src, len_of[i], tag_of[i]);
			live[i] = zs_malloc_write(p, src, len_of[i]);
			REQUIRE(!ZS_IS_ERR(live[i]));
			if ((live[i] & HANDLE_ADDR_MASK) == (old & HANDLE_ADDR_MASK)) {
				reissued++;
				bad_gen += live[i] == old;
			}
			/* Half the time free it again, so the cache fills and spills. */
			if (tu_rand(&x) & 1) {
				CHECK_EQ(zs_free(p, live[i]), 0);
				live[i] = 0;
			}
		} else {
			len_of[i] = 100 + tu_rand(&x) % 3900;
			tag_of[i] = ++tag;
			objpat_fill(src, len_of[i], tag_of[i]);
			live[i] = zs_malloc_write(p, src, len_of[i]);
			REQUIRE(!ZS_IS_ERR(live[i]));
		}
		if (step % 997 == 0)
			bad_list += !list_sane(heap_tls.heap[0]);
	}
	printf("test_zs_owned_handles: %ld slots handed out again at once\n", reissued);
	CHECK(reissued > STEPS / 8);
	CHECK_EQ(bad_gen, 0);
	CHECK_EQ(bad_list, 0);
	CHECK(list_sane(heap_tls.heap[0]));

	/* A part-full cache given back by a revocation (one slot at a time), then used again. */
	struct zs_heap *hp = heap_tls.heap[0];
	while (hp->hn == 0 || hp->hn == ZS_HEAP_HANDLES) {
		int i = 0;
		while (i < NOBJ && !live[i])
			i++;
		REQUIRE(i < NOBJ);
		CHECK_EQ(zs_free(p, live[i]), 0);
		live[i] = 0;
	}
	zs_compact(p);
	CHECK_EQ(hp->hn, 0);
	for (int i = 0; i < NOBJ; i++)
		if (!live[i]) {
			len_of[i] = 100 + tu_rand(&x) % 3900;
			tag_of[i] = ++tag;
			objpat_fill(src, len_of[i], tag_of[i]);
			live[i] = zs_malloc_write(p, src, len_of[i]);
			REQUIRE(!ZS_IS_ERR(live[i]));
		}
	CHECK(list_sane(hp));
	static unsigned long slots[NOBJ];
	for (int i = 0; i < NOBJ; i++)
		slots[i] = live[i] & HANDLE_ADDR_MASK;
	qsort(slots, NOBJ, sizeof(slots[0]), cmp_ul);
	int dup = 0;
	for (int i = 1; i < NOBJ; i++)
		dup += slots[i] == slots[i - 1];
	CHECK_EQ(dup, 0);

	for (int i = 0; i < NOBJ; i++) {
		CHECK(objpat_stored(p, live[i], len_of[i], tag_of[i]));
		CHECK_EQ(zs_free(p, live[i]), 0);
	}
	/* Emptied, the heap keeps only spares (owned.c, "Spares"), all its pages; a trim takes them. */
	CHECK_EQ(zs_get_total_pages(p), spare_pages(p));
	zs_pool_trim(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	revoke_full_cache();
	magazines();
	return tu_done();
}
