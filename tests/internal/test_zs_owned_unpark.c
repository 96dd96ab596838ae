/*
 * An owned pool's refill after its thread moved to another CPU
 * (src/zsmalloc/owned.c heap_refill, src/zsmalloc/park.c unpark_other_copy).
 * A thread refills from the class copy of the CPU it runs on, and the
 * zspages it empties are parked in the copy they came from.  A thread that
 * fills and empties a round of objects on one CPU, then allocates the same
 * round on a CPU of another copy, must take the zspages parked in the first
 * copy before asking the page provider for new pages: before that, every
 * refill there found its own copy's stack empty and took new pages while
 * the first copy's stack stayed full until its decay.
 * White box (internal.h) to read the parked counts; the rest is the API.
 * Skips where the pool has one class copy or the thread may run on CPUs of
 * one copy only.
 */
#include <sched.h>
#include <string.h>

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

static unsigned long parked(const struct zs_pool *p)
{
	unsigned long n = 0;
	for (size_t e = 0; e < (size_t)p->nr_classes * p->nr_shards; e++)
		n += atomic_load(&p->park[e].nr);
	return n;
}

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s) == 0 && sched_getcpu() == cpu;
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
	uint64_t seed = tu_seed("test_zs_owned_unpark");
	uint64_t x = seed | 1;
	struct zs_pool_config c;
	zs_pool_config_init_app(&c);
	c.autocompact_ms = 0; /* nothing but this thread moves the zspages */
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	cpu_set_t all;
	REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
	int a = -1, b = -1;
	for (int cpu = 0; cpu < CPU_SETSIZE && p->nr_shards > 1; cpu++) {
		if (!CPU_ISSET(cpu, &all))
			continue;
		if (a < 0)
			a = cpu;
		else if ((unsigned)cpu % p->nr_shards != (unsigned)a % p->nr_shards) {
			b = cpu;
			break;
		}
	}
	if (!p->owned || !p->park || b < 0 || !pin(a)) {
		printf("test_zs_owned_unpark: needs owned zspages, parking and CPUs of two class copies; "
		       "nothing to check\n");
		zs_destroy_pool(p);
		return tu_done();
	}
	for (int i = 0; i < NOBJ; i++)
		lens[i] = 200 + tu_rand(&x) % 3401;

	/* A round on CPU a: its zspages end up parked in a's copies. */
	round_alloc(p, 1);
	round_free(p, 1);
	unsigned long before = parked(p);
	CHECK(before > 0);
	/* The same round on CPU b: the refills take a's parked zspages. */
	if (!pin(b)) {
		printf("test_zs_owned_unpark: could not move to CPU %d; nothing more to check\n", b);
		round_alloc(p, 2);
		round_free(p, 2);
		zs_destroy_pool(p);
		return tu_done();
	}
	round_alloc(p, 2);
	unsigned long after = parked(p);
	printf("test_zs_owned_unpark: CPUs %d and %d, %u copies: %lu zspages parked after the first "
	       "round, %lu while the second round's objects live\n",
	       a, b, p->nr_shards, before, after);
	CHECK(after * 10 <= before);
	round_free(p, 2);
	/* Emptied, the heap keeps only spares (owned.c, "Spares"), all its pages; a trim takes them. */
	CHECK_EQ(zs_get_total_pages(p), spare_pages(p));
	zs_pool_trim(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	return tu_done();
}
