/*
 * The owned fast paths' entry (src/zsmalloc/internal.h, heap_enter_word):
 * one load of busy, the store of HEAP_BUSY, and one test of the old busy
 * or'ed with revoke.  A word that is not 0 is sorted out of line, and this
 * test holds each way it can go, for zs_malloc_write, zs_malloc and zs_free:
 *  - busy already set (a call nested in one of this thread's operations, a
 *    signal handler's): the class path, the heap untouched (its handle
 *    cache keeps its count) and busy left set for the interrupted call;
 *  - REVOKE set (a revoker holds the heap): the class path, busy back to 0
 *    so the revoker's wait ends;
 *  - HEAP_FENCED (no membarrier): the heap, entered the fenced way, busy
 *    back to 0 after;
 *  - neither: the heap, busy 0 after.
 * And the free's one ownership test: an owned zspage's word is its heap's
 * zid, and a huge zspage's (its handle's upper half) is no heap's.
 * Every object reads back as written and frees, and the pool empties.
 * White box (internal.h) to set the heap's words; the rest is the API.
 */
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"
#include "objpat.h"

#define NOBJ 64

static unsigned char src[OBJPAT_MAX];

enum mode { PLAIN, NESTED, REVOKED, FENCED };
static const char *const names[] = { "plain", "nested", "revoked", "fenced" };

/* Objects made with the heap's words set as mode says; returns how many the heap's cache gave. */
static unsigned long run(struct zs_pool *p, struct zs_heap *hp, enum mode m, unsigned long *h,
			 size_t *len, uint64_t *x, unsigned base)
{
	unsigned busy0 = m == NESTED ? HEAP_BUSY : 0;
	unsigned rev0 = m == REVOKED ? HEAP_REVOKE : m == FENCED ? HEAP_FENCED : 0;
	unsigned saved_rev = atomic_load(&hp->revoke);
	unsigned long taken = 0;
	for (int i = 0; i < NOBJ; i++) {
		len[i] = 16 + tu_rand(x) % 4000;
		objpat_fill(src, len[i], base + (unsigned)i);
		atomic_store(&hp->busy, busy0);
		atomic_store(&hp->revoke, rev0);
		unsigned long hn = hp->hn;
		if (i % 2) {
			h[i] = zs_malloc_write(p, src, len[i]);
		} else {
			h[i] = zs_malloc(p, len[i]);
			if (!ZS_IS_ERR(h[i]))
				CHECK_EQ(zs_obj_write(p, h[i], src, len[i]), 0);
		}
		REQUIRE(!ZS_IS_ERR(h[i]));
		/* A refill may run (the cache was empty): count the pops only when it did not grow. */
		if (hp->hn < hn)
			taken += hn - hp->hn;
		CHECK_EQ(atomic_load(&hp->busy), busy0);
		CHECK_EQ(atomic_load(&hp->revoke), rev0);
	}
	/* Frees the same way, of every other object. */
	for (int i = 0; i < NOBJ; i += 2) {
		CHECK(objpat_stored(p, h[i], len[i], base + (unsigned)i));
		atomic_store(&hp->busy, busy0);
		atomic_store(&hp->revoke, rev0);
		unsigned long hn = hp->hn;
		CHECK_EQ(zs_free(p, h[i]), 0);
		if (m == NESTED || m == REVOKED)
			CHECK_EQ(hp->hn, hn); /* the class path: no handle into the heap's cache */
		CHECK_EQ(atomic_load(&hp->busy), busy0);
		h[i] = 0;
	}
	atomic_store(&hp->busy, 0);
	atomic_store(&hp->revoke, saved_rev);
	printf("%-8s %lu of %d handles from the heap's cache\n", names[m], taken, NOBJ);
	return taken;
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_owned_enter");
	uint64_t x = seed | 1;
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	/* The heap, made by a first object. */
	objpat_fill(src, 100, 1);
	unsigned long first = zs_malloc_write(p, src, 100);
	REQUIRE(!ZS_IS_ERR(first));
	if (!p->owned) {
		printf("test_zs_owned_enter: built without owned zspages, nothing to check\n");
		zs_free(p, first);
		zs_destroy_pool(p);
		return tu_done();
	}
	struct zs_heap *hp = heap_tls.heap[0];
	REQUIRE(hp && hp != &heap_none && heap_tls.key[0] == p->heap_key);

	static unsigned long h[4][NOBJ];
	static size_t len[4][NOBJ];
	unsigned long from_heap[4];
	for (int m = PLAIN; m <= FENCED; m++)
		from_heap[m] = run(p, hp, (enum mode)m, h[m], len[m], &x, 1000u * (unsigned)m);
	CHECK(from_heap[PLAIN] > NOBJ / 2);
	CHECK_EQ(from_heap[NESTED], 0);
	CHECK_EQ(from_heap[REVOKED], 0);
	CHECK(from_heap[FENCED] > NOBJ / 2);

	/* Owned or not by the zspage's word: an owned zspage holds the heap's zid; a huge one (its
	 * word the upper half of its handle) reads as no heap's, and frees by the class path. */
	unsigned long big[8];
	for (int i = 0; i < 8; i++) {
		objpat_fill(src, 4000, 7u + (unsigned)i);
		big[i] = zs_malloc_write(p, src, 4000);
		REQUIRE(!ZS_IS_ERR(big[i]));
		struct zspage *z = obj_to_zspage(p, handle_to_obj(big[i]));
		CHECK(z->huge);
		CHECK_EQ(zspage_heap_id(z), 0);
		CHECK(__atomic_load_n(&z->heap_id, __ATOMIC_RELAXED) != hp->zid);
	}
	for (int i = 0; i < 8; i++) {
		CHECK(objpat_stored(p, big[i], 4000, 7u + (unsigned)i));
		CHECK_EQ(zs_free(p, big[i]), 0);
	}
	objpat_fill(src, 100, 3);
	unsigned long small = zs_malloc_write(p, src, 100);
	REQUIRE(!ZS_IS_ERR(small));
	struct zspage *zs = obj_to_zspage(p, handle_to_obj(small));
	CHECK_EQ(__atomic_load_n(&zs->heap_id, __ATOMIC_RELAXED), hp->zid);
	CHECK_EQ(zspage_heap_id(zs), hp->id);
	CHECK_EQ(zs_free(p, small), 0);

	/* Everything reads back, through a compaction too (it revokes the heap). */
	zs_compact(p);
	for (int m = PLAIN; m <= FENCED; m++)
		for (int i = 1; i < NOBJ; i += 2) {
			CHECK(objpat_stored(p, h[m][i], len[m][i], 1000u * (unsigned)m + (unsigned)i));
			CHECK_EQ(zs_free(p, h[m][i]), 0);
		}
	CHECK_EQ(zs_free(p, first), 0);
	CHECK_EQ(atomic_load(&hp->busy), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
