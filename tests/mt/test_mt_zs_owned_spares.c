/*
 * Thread heaps' spare zspages (src/zsmalloc/owned.c, "Spares") against the
 * calls that take them back from another thread: two owners fill a round of
 * 200..3600-byte objects and free it in allocation order (which leaves
 * spares) or in reverse, while a third thread runs zs_compact_step,
 * zs_class_stats and zs_pool_trim, each of which stops the owners' heaps and
 * gives their spares back.  Every object must read back as written, the
 * class counts must stay consistent (obj_used <= obj_allocated), and once
 * the owners have exited (their heaps retired) the pool holds no page.
 * Seeded; run under TSan in CI (tests/mt).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "must.h"

#define OWNERS 2
#define NOBJ 1500
#define ROUNDS 12

static struct zs_pool *pool;
static uint64_t seed;
static atomic_int owners_left = OWNERS;
static atomic_long bad_data, bad_alloc, bad_stats, revocations;

struct owner {
	int id;
	unsigned long hs[NOBJ];
	size_t lens[NOBJ];
	unsigned char src[4096], dst[4096];
};

static void pattern(unsigned char *b, size_t len, unsigned tag)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(tag * 131 + i * 7 + 3);
}

static void *owner_main(void *arg)
{
	struct owner *o = arg;
	uint64_t x = seed + (uint64_t)o->id * 0x1234567ull;
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NOBJ; i++) {
			o->lens[i] = 200 + tu_rand(&x) % 3401;
			unsigned tag = (unsigned)(o->id * 1000003 + r * 4099 + i);
			pattern(o->src, o->lens[i], tag);
			o->hs[i] = zs_malloc_write(pool, o->src, o->lens[i]);
			if (ZS_IS_ERR(o->hs[i])) {
				atomic_fetch_add(&bad_alloc, 1);
				o->hs[i] = 0;
			}
		}
		int reverse = r % 3 == 2;
		for (int k = 0; k < NOBJ; k++) {
			int i = reverse ? NOBJ - 1 - k : k;
			if (!o->hs[i])
				continue;
			unsigned tag = (unsigned)(o->id * 1000003 + r * 4099 + i);
			pattern(o->src, o->lens[i], tag);
			void *m = zs_obj_read_begin(pool, o->hs[i], o->lens[i], o->dst);
			if (!m || memcmp(m, o->src, o->lens[i]))
				atomic_fetch_add(&bad_data, 1);
			if (m)
				zs_obj_read_end(pool, o->hs[i], o->lens[i], m);
			if (zs_free(pool, o->hs[i]))
				atomic_fetch_add(&bad_data, 1);
		}
	}
	atomic_fetch_sub(&owners_left, 1);
	return NULL;
}

static void *revoker_main(void *arg)
{
	(void)arg;
	uint64_t x = seed ^ 0x5555;
	unsigned cur = 0;
	while (atomic_load(&owners_left)) {
		switch (tu_rand(&x) % 3) {
		case 0:
			zs_compact_step(pool, &cur, 1);
			break;
		case 1:
			for (int i = 0; i < zs_class_count(pool); i++) {
				struct zs_class_stats st;
				if (zs_class_stats(pool, i, &st, sizeof(st)))
					continue;
				unsigned long zspages = 0;
				for (int g = 0; g < ZS_NR_FULLNESS_GROUPS; g++)
					zspages += st.fullness[g];
				/* Spares count as empty zspages: never more objects used than slots. */
				if (st.obj_used > st.obj_allocated || (st.obj_allocated && !zspages))
					atomic_fetch_add(&bad_stats, 1);
			}
			break;
		default:
			zs_pool_trim(pool);
			break;
		}
		atomic_fetch_add(&revocations, 1);
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	seed = tu_seed("test_mt_zs_owned_spares");
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0; /* the revoker thread's calls are the only ones that take spares */
	pool = must_pool_create(&c);
	REQUIRE(pool);
	static struct owner o[OWNERS];
	pthread_t t[OWNERS], rv;
	for (int i = 0; i < OWNERS; i++) {
		o[i].id = i;
		REQUIRE(pthread_create(&t[i], NULL, owner_main, &o[i]) == 0);
	}
	REQUIRE(pthread_create(&rv, NULL, revoker_main, NULL) == 0);
	for (int i = 0; i < OWNERS; i++)
		pthread_join(t[i], NULL);
	pthread_join(rv, NULL);
	printf("test_mt_zs_owned_spares: %d owners x %d rounds of %d objects, %ld revoking calls\n",
	       OWNERS, ROUNDS, NOBJ, atomic_load(&revocations));
	CHECK_EQ(atomic_load(&bad_alloc), 0);
	CHECK_EQ(atomic_load(&bad_data), 0);
	CHECK_EQ(atomic_load(&bad_stats), 0);
	CHECK(atomic_load(&revocations) > 0);
	/* The owners' exits gave their spares back: nothing is left in the pool's pages. */
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
	return tu_done();
}
