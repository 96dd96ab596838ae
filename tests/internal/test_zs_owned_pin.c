/*
 * The write pin of an owned pool's zs_malloc_write (src/zsmalloc/zsmalloc.c,
 * wpin_own and owned_place): the heap keeps its thread's pin slot, taken by
 * the thread's first write, and the write uses it while the thread keeps
 * the number it had then.  This test holds the three ways the write can go:
 *  - the slot: the heap names the thread's slot, counted in wpins_hi, and
 *    every write leaves it clear again with the object's bytes in place;
 *  - a thread that writes late in its exit (a pthread key's destructor that
 *    runs after its number went back, before its heaps are retired): the
 *    number's slot is no longer the heap's, so the write takes the zspage
 *    read lock and the heap takes the new number's slot; the objects are
 *    stored;
 *  - a pin already set (a call nested in this thread's copy): the write
 *    leaves that pin as it found it.
 * White box (internal.h) to reach the heap and the slots; the rest is the API.
 */
#include <pthread.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"
#include "objpat.h"

#define NOBJ 300

static unsigned char src[OBJPAT_MAX];

/* The object holds objpat_fill(len, seed)'s bytes, and its zspage is not read-locked. */
static int stored(struct zs_pool *p, unsigned long h, size_t len, unsigned seed)
{
	struct zspage *z = obj_to_zspage(p, handle_to_obj(h));
	return atomic_load(&z->lock) == 0 && objpat_stored(p, h, len, seed);
}

/* The late writer: a thread whose key destructor (made after libzs's number key, before its
 * heap key, so it runs between the two) writes once more. */
static pthread_key_t late_key;
static struct zs_pool *late_pool;
static unsigned late_old, late_new;     /* the numbers before and after */
static int late_slot_ok, late_stored, late_ran;
static unsigned long late_h;

static void late_exit(void *arg)
{
	(void)arg;
	struct zs_heap *hp = heap_tls.heap[0];
	/* The number went back before this destructor: the heap no longer names its slot. */
	int reset = hp && hp->wpin != &wpins[late_old];
	unsigned ti = thread_index(); /* a fresh number (the lowest free: maybe the same one) */
	objpat_fill(src, 777, 77);
	late_h = zs_malloc_write(late_pool, src, 777);
	late_new = ti;
	late_slot_ok = reset && hp == heap_tls.heap[0] &&
		       (ti >= ZS_WPIN_SLOTS || hp->wpin == &wpins[ti]);
	late_stored = !ZS_IS_ERR(late_h);
	late_ran = 1;
}

static void *late_writer(void *arg)
{
	(void)arg;
	objpat_fill(src, 500, 5);
	unsigned long h = zs_malloc_write(late_pool, src, 500);
	late_old = thread_index();
	if (!ZS_IS_ERR(h))
		zs_free(late_pool, h);
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

int main(void)
{
	uint64_t seed = tu_seed("test_zs_owned_pin");
	uint64_t x = seed | 1;
	/* The key order the late writer needs: libzs's number key (made by the first number),
	 * this test's, then the heap key (made by the first heap lookup, below). */
	(void)thread_index();
	REQUIRE(pthread_key_create(&late_key, late_exit) == 0);
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	static unsigned long h[3][NOBJ];
	static size_t len[3][NOBJ];

	/* The slot: taken when the first write made the heap. */
	for (int i = 0; i < NOBJ; i++) {
		len[0][i] = 100 + tu_rand(&x) % 3900;
		objpat_fill(src, len[0][i], (unsigned)i);
		h[0][i] = zs_malloc_write(p, src, len[0][i]);
		REQUIRE(!ZS_IS_ERR(h[0][i]));
	}
	if (!p->owned) {
		printf("test_zs_owned_pin: built without owned zspages, nothing to check\n");
		zs_destroy_pool(p);
		return tu_done();
	}
	struct zs_heap *hp = heap_tls.heap[0];
	unsigned ti = thread_index();
	REQUIRE(hp && heap_tls.key[0] == p->heap_key && ti < ZS_WPIN_SLOTS);
	CHECK(hp->wpin == &wpins[ti]);
	CHECK(atomic_load(&wpins_hi) > ti);
	CHECK(atomic_load(&wpins[ti].z) == NULL);
	for (int i = 0; i < NOBJ; i++)
		CHECK(stored(p, h[0][i], len[0][i], (unsigned)i));

	/* A write after the thread's number went back, in its exit. */
	late_pool = p;
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, late_writer, NULL) == 0);
	pthread_join(t, NULL);
	CHECK(late_ran);
	CHECK(late_slot_ok);
	CHECK(late_stored);
	CHECK(atomic_load(&wpins[late_old].z) == NULL);
	if (late_new < ZS_WPIN_SLOTS)
		CHECK(atomic_load(&wpins[late_new].z) == NULL);
	CHECK(stored(p, late_h, 777, 77));
	printf("late write: numbers %u -> %u\n", late_old, late_new);
	for (int i = 0; i < NOBJ; i++) {
		len[1][i] = 100 + tu_rand(&x) % 3900;
		objpat_fill(src, len[1][i], 1000u + (unsigned)i);
		h[1][i] = zs_malloc_write(p, src, len[1][i]);
		REQUIRE(!ZS_IS_ERR(h[1][i]));
	}
	for (int i = 0; i < NOBJ; i++)
		CHECK(stored(p, h[1][i], len[1][i], 1000u + (unsigned)i));

	/* A pin already set: the write must not clear it. */
	static char marker;
	atomic_store(&wpins[ti].z, &marker);
	for (int i = 0; i < NOBJ; i++) {
		len[2][i] = 100 + tu_rand(&x) % 3900;
		objpat_fill(src, len[2][i], 2000u + (unsigned)i);
		h[2][i] = zs_malloc_write(p, src, len[2][i]);
		REQUIRE(!ZS_IS_ERR(h[2][i]));
		CHECK(atomic_load(&wpins[ti].z) == (const void *)&marker);
	}
	atomic_store(&wpins[ti].z, NULL);
	CHECK(hp->wpin == &wpins[ti]); /* its own number's slot again */
	for (int i = 0; i < NOBJ; i++)
		CHECK(stored(p, h[2][i], len[2][i], 2000u + (unsigned)i));

	/* Everything after a compaction too (it revokes the heap and may move objects). */
	zs_compact(p);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < NOBJ; i++) {
			CHECK(stored(p, h[k][i], len[k][i], (unsigned)(k * 1000 + i)));
			CHECK_EQ(zs_free(p, h[k][i]), 0);
		}
	CHECK_EQ(zs_free(p, late_h), 0);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
