/*
 * The handle cache of an owned pool's thread heap (src/zsmalloc/internal.h,
 * heap_handle_put and list_pop; owned.c, heap_handles_refill and
 * heap_handles_drain).  A freed slot is linked to the list's head whatever
 * the list's length: the last slot's link may be a stale address, because
 * every walk of a handle list counts its n slots and never follows the last
 * link.  This test holds what that rests on, through a seeded churn of
 * allocations and frees that fills and spills the cache many times, and a
 * compaction (a revocation) that gives a part-full cache back one slot at a
 * time:
 *  - the n slots reached from head are distinct, free, and never the ones
 *    a live object holds;
 *  - a slot handed out again carries the next generation (a stale handle
 *    never equals a live one);
 *  - every object reads back as written, and the pool empties.
 * White box (internal.h) to walk the heap's list; the rest is the API.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"

#define NOBJ 2000
#define STEPS 40000

static unsigned char src[4096], dst[4096];

static void fill(size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(seed * 37 + i * 11 + 1);
}

static int stored(struct zs_pool *p, unsigned long h, size_t len, unsigned seed)
{
	fill(len, seed);
	void *m = zs_obj_read_begin(p, h, len, dst);
	if (!m)
		return 0;
	int ok = memcmp(src, m, len) == 0;
	zs_obj_read_end(p, h, len, m);
	return ok;
}

static unsigned long live[NOBJ];
static size_t len_of[NOBJ];
static unsigned tag_of[NOBJ];

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return (x > y) - (x < y);
}

/* The heap's list: n distinct free slots from head, none a live object's. */
static int list_sane(const struct zs_heap *hp)
{
	unsigned long slot = hp->hl.head, seen[ZS_HANDLE_BATCH];
	if (hp->hl.n > ZS_HANDLE_BATCH)
		return 0;
	for (unsigned long k = 0; k < hp->hl.n; k++) {
		unsigned long w = atomic_load(handle_slot(slot));
		if (!(w & HANDLE_FREE_BIT))
			return 0;
		for (unsigned long j = 0; j < k; j++)
			if (seen[j] == slot)
				return 0;
		for (int i = 0; i < NOBJ; i++)
			if (live[i] && (live[i] & HANDLE_ADDR_MASK) == slot)
				return 0;
		seen[k] = slot;
		slot = w & HANDLE_ADDR_MASK;
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
			CHECK(stored(p, old, len_of[i], tag_of[i]));
			CHECK_EQ(zs_free(p, old), 0);
			live[i] = 0;
			/* The slot just freed is the next handed out, a generation on. */
			len_of[i] = 100 + tu_rand(&x) % 3900;
			tag_of[i] = ++tag;
			fill(len_of[i], tag_of[i]);
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
			fill(len_of[i], tag_of[i]);
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
	while (hp->hl.n == 0 || hp->hl.n == ZS_HANDLE_BATCH) {
		int i = 0;
		while (i < NOBJ && !live[i])
			i++;
		REQUIRE(i < NOBJ);
		CHECK_EQ(zs_free(p, live[i]), 0);
		live[i] = 0;
	}
	zs_compact(p);
	CHECK_EQ(hp->hl.n, 0);
	for (int i = 0; i < NOBJ; i++)
		if (!live[i]) {
			len_of[i] = 100 + tu_rand(&x) % 3900;
			tag_of[i] = ++tag;
			fill(len_of[i], tag_of[i]);
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
		CHECK(stored(p, live[i], len_of[i], tag_of[i]));
		CHECK_EQ(zs_free(p, live[i]), 0);
	}
	/* Emptied, the heap keeps only spares (owned.c, "Spares"), all its pages; a trim takes them. */
	CHECK_EQ(zs_get_total_pages(p), spare_pages(p));
	zs_pool_trim(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
