/*
 * Stale handles in checked mode: a handle freed and its
 * slot handed out again must be refused with -EINVAL by every call that
 * takes a handle, not resolve to the new object.  Before handles carried a
 * generation the reused slot gave the very same handle value, so checked
 * mode could not tell them apart (docs/reliability.md said so); this test
 * commits exactly that misuse and fails on that code.
 *
 * White box only in one place: handle_slot() (src/zsmalloc/internal.h) names
 * the slot a handle lives in, so the test knows the slot really was reused
 * rather than trusting the allocator's LIFO order.  The rest is the public
 * API.  Covered: every handle-taking call, each free mode, huge objects,
 * deferred free, class shards, compaction moving the new object, slots that
 * went through another thread's free list and a trim, a chunk given back and
 * carved again, a destroyed pool's handle, and the generation's period,
 * also across trims, compactions and pools destroyed between the uses of an
 * address (a re-carved chunk once restarted its generations inside the
 * range its old slots had reached); and the handles of packed tails, which
 * no caller was given.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"
#include "must.h"
#include "objpat.h"

#define PERIOD (1UL << 14) /* documented: 14 generation bits */

static unsigned long slot_of(unsigned long h)
{
	return (unsigned long)handle_slot(h);
}

static struct zs_pool *new_pool(int checked, int free_mode, unsigned shards)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = checked;
	c.free_mode = (enum zs_free_mode)free_mode;
	c.class_shards = shards;
	c.deferred_worker = -1; /* deferred frees happen at flush: the test decides when */
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

static void put(struct zs_pool *p, unsigned long h, size_t len, unsigned seed)
{
	static unsigned char b[65536];
	objpat_fill(b, len, seed);
	CHECK_EQ(zs_obj_write(p, h, b, len), 0);
}

/* Allocate until a handle lands in `slot` (the others stay allocated, listed in keep). */
static unsigned long alloc_into_slot(struct zs_pool *p, size_t len, unsigned long slot,
				     unsigned long *keep, int *nkeep, int max)
{
	while (*nkeep < max) {
		unsigned long h = zs_malloc(p, len);
		REQUIRE(!ZS_IS_ERR(h));
		if (slot_of(h) == slot)
			return h;
		keep[(*nkeep)++] = h;
	}
	return 0;
}

/*
 * Every call with the stale handle `old`, while `cur` (same slot) holds the
 * object written with seed 2: refused or ignored, and `cur` is untouched.
 */
static void every_call_refuses(struct zs_pool *p, unsigned long old, unsigned long cur, size_t len)
{
	unsigned char buf[65536];
	unsigned long objs = zs_pool_objects(p);

	CHECK(old != cur);
	errno = 0;
	CHECK(zs_obj_read_begin(p, old, len, buf) == NULL);
	CHECK_EQ(errno, EINVAL);
	zs_obj_read_end(p, old, len, buf); /* ignored: no pin to drop */

	struct zs_obj_piece sg[2];
	CHECK_EQ(zs_obj_read_sg_begin(p, old, len, sg), -EINVAL);
	zs_obj_read_sg_end(p, old);
	/* the multi-page form too (reliability.md: every call that takes a handle) */
	struct zs_obj_piece sgv[ZS_MAX_OBJECT_PAGES + 1];
	CHECK_EQ(zs_obj_read_sgv_begin(p, old, len, sgv, ZS_MAX_OBJECT_PAGES + 1), -EINVAL);
	zs_obj_read_sg_end(p, old);

	objpat_fill(buf, len, 1);
	CHECK_EQ(zs_obj_write(p, old, buf, len), -EINVAL);

	errno = 0;
	CHECK(zs_map_object(p, old, ZS_MM_RW) == NULL);
	CHECK_EQ(errno, EINVAL);
	zs_unmap_object(p, old);

	CHECK_EQ(zs_free(p, old), -EINVAL);
	CHECK_EQ(zs_free_deferred(p, old), -EINVAL);
	zs_free_deferred_flush(p);

	CHECK_EQ(zs_pool_objects(p), objs);
	CHECK(objpat_stored(p, cur, len, 2));
	/* The ignored ends dropped no reader: a compaction (write locks) completes. */
	zs_compact(p);
	CHECK(objpat_stored(p, cur, len, 2));
	/* And a map of the live handle still works (the refused map left no mapping behind). */
	void *m = zs_map_object(p, cur, ZS_MM_RO);
	CHECK(m != NULL);
	if (m)
		zs_unmap_object(p, cur);
}

/* Free `old` (now or deferred), reuse its slot, then misuse `old` with every call. */
static void stale_case(int free_mode, unsigned shards, size_t len, int deferred)
{
	struct zs_pool *p = new_pool(1, free_mode, shards);
	if (len == 0)
		len = zs_huge_class_size(p); /* a huge object: its handle sits in the zspage */
	unsigned long keep[64];
	int nkeep = 0;
	unsigned long neighbour = zs_malloc(p, len); /* keeps the zspage alive across the free */
	REQUIRE(!ZS_IS_ERR(neighbour));
	unsigned long old = zs_malloc(p, len);
	REQUIRE(!ZS_IS_ERR(old));
	put(p, old, len, 1);
	if (deferred) {
		CHECK_EQ(zs_free_deferred(p, old), 0);
		zs_free_deferred_flush(p);
	} else {
		CHECK_EQ(zs_free(p, old), 0);
	}
	unsigned long cur = alloc_into_slot(p, len, slot_of(old), keep, &nkeep, 64);
	REQUIRE(cur);
	put(p, cur, len, 2);
	every_call_refuses(p, old, cur, len);

	/* Freed again: the old handle and the freed new one are both refused. */
	CHECK_EQ(zs_free(p, cur), 0);
	CHECK_EQ(zs_free(p, cur), -EINVAL);
	CHECK_EQ(zs_free(p, old), -EINVAL);
	for (int i = 0; i < nkeep; i++)
		CHECK_EQ(zs_free(p, keep[i]), 0);
	CHECK_EQ(zs_free(p, neighbour), 0);
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

/* Compaction moves the new object (rewriting its slot): the old handle stays refused. */
static void stale_after_compaction(void)
{
	enum { N = 4000 };
	static unsigned long h[N];
	struct zs_pool *p = new_pool(1, ZS_FREE_POOL_LOCK, 1);
	for (int i = 0; i < N; i++) {
		h[i] = zs_malloc(p, 600);
		REQUIRE(!ZS_IS_ERR(h[i]));
		put(p, h[i], 600, (unsigned)i);
	}
	unsigned long old = h[N - 1];
	CHECK_EQ(zs_free(p, old), 0);
	unsigned long cur = zs_malloc(p, 600);
	REQUIRE(!ZS_IS_ERR(cur) && slot_of(cur) == slot_of(old));
	h[N - 1] = cur;
	put(p, cur, 600, 2);
	for (int i = 0; i < N - 1; i += 3) { /* sparse zspages to move objects out of */
		CHECK_EQ(zs_free(p, h[i]), 0);
		h[i] = 0;
	}
	unsigned long before = zs_get_total_pages(p);
	CHECK(zs_compact(p) > 0);
	CHECK(zs_get_total_pages(p) < before);
	every_call_refuses(p, old, cur, 600);
	for (int i = 0; i < N - 1; i++)
		if (h[i] && !objpat_stored(p, h[i], 600, (unsigned)i))
			CHECK(!"a live object changed");
	for (int i = 0; i < N; i++)
		if (h[i])
			CHECK_EQ(zs_free(p, h[i]), 0);
	zs_destroy_pool(p);
}

/*
 * One slot handed out again and again: each handle differs from the last
 * PERIOD - 1 (so any of them, kept stale, is refused), the value comes back
 * after exactly PERIOD reuses, and every handle keeps the documented shape.
 */
static void generation_period(int checked)
{
	struct zs_pool *p = new_pool(checked, ZS_FREE_POOL_LOCK, 1);
	unsigned long pin = zs_malloc(p, 100); /* the zspage stays: only the handle slot cycles */
	unsigned long h0 = zs_malloc(p, 100), h = h0;
	REQUIRE(!ZS_IS_ERR(pin) && !ZS_IS_ERR(h0));
	int same_slot = 1, early_repeat = 0, shape = 1;
	for (unsigned long k = 1; k <= PERIOD; k++) {
		unsigned long prev = h;
		CHECK_EQ(zs_free(p, h), 0);
		h = zs_malloc(p, 100);
		REQUIRE(!ZS_IS_ERR(h));
		same_slot &= slot_of(h) == slot_of(h0);
		if (k < PERIOD && h == h0)
			early_repeat = 1;
		shape &= h < (1UL << 60) && !(h & 1) && h != prev;
		if (checked && k == 1) {
			put(p, h, 100, 2);
			every_call_refuses(p, prev, h, 100);
		}
	}
	CHECK(same_slot);
	CHECK(!early_repeat);
	CHECK(shape);
	CHECK(h == h0); /* the wrap the docs state: 1 in 2^14 reuse counts */
	CHECK_EQ(zs_free(p, h), 0);
	CHECK_EQ(zs_free(p, pin), 0);
	zs_destroy_pool(p);
}

/* ---- slots that went through other threads' caches, the shared list and a trim ---- */

enum { MANY = 20000, KEEP = 10 };

struct job {
	struct zs_pool *p;
	unsigned long *h;
	int from, to;
	int alloc; /* 1: allocate into h[from..to), 0: free them */
};

static void *run_job(void *arg)
{
	struct job *j = arg;
	for (int i = j->from; i < j->to; i++) {
		if (j->alloc) {
			j->h[i] = zs_malloc(j->p, 64);
			if (ZS_IS_ERR(j->h[i]))
				j->h[i] = 0;
		} else if (zs_free(j->p, j->h[i])) {
			j->h[i] = 1; /* marks a failed free */
		}
	}
	return NULL;
}

static void on_thread(struct job *j)
{
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, run_job, j) == 0);
	pthread_join(t, NULL);
}

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

static void cross_thread_and_trim(void)
{
	static unsigned long old[MANY], cur[MANY], sorted_old[MANY];
	struct zs_pool *p = new_pool(1, ZS_FREE_CLASS_INDEX, 1);
	struct job a = { p, old, 0, MANY, 1 };
	on_thread(&a); /* one thread allocates ... */
	for (int i = 0; i < MANY; i++)
		REQUIRE(old[i] > 1);
	struct job f1 = { p, old, KEEP, MANY / 2, 0 }, f2 = { p, old, MANY / 2, MANY, 0 };
	on_thread(&f1); /* ... two others free, through their caches into the shared list */
	on_thread(&f2);
	int failed = 0;
	for (int i = KEEP; i < MANY; i++)
		failed |= old[i] == 1;
	CHECK(!failed);
	zs_pool_trim(p); /* gives back whole free chunks, relinks the free slots of the rest */
	struct job b = { p, cur, 0, MANY, 1 };
	on_thread(&b);
	memcpy(sorted_old, old, sizeof(old));
	qsort(sorted_old, MANY, sizeof(*sorted_old), cmp_ul);
	int reused = 0, resurrected = 0, accepted = 0;
	for (int i = 0; i < MANY; i++) {
		REQUIRE(cur[i] > 1);
		if (bsearch(&cur[i], sorted_old, MANY, sizeof(*sorted_old), cmp_ul))
			resurrected++;
	}
	/* Slots reused: count them by address; every freed old handle is refused. */
	static unsigned long cur_slots[MANY];
	for (int i = 0; i < MANY; i++)
		cur_slots[i] = slot_of(cur[i]);
	qsort(cur_slots, MANY, sizeof(*cur_slots), cmp_ul);
	for (int i = KEEP; i < MANY; i++) {
		unsigned long s = slot_of(old[i]);
		if (bsearch(&s, cur_slots, MANY, sizeof(*cur_slots), cmp_ul))
			reused++;
		unsigned char x = 0;
		if (zs_obj_write(p, old[i], &x, 1) != -EINVAL)
			accepted++;
	}
	printf("cross-thread: %d of %d freed slots reused, %d old handles back, %d accepted\n",
	       reused, MANY - KEEP, resurrected, accepted);
	CHECK(reused > MANY / 2);
	CHECK_EQ(resurrected, 0);
	CHECK_EQ(accepted, 0);
	for (int i = 0; i < KEEP; i++)
		CHECK_EQ(zs_free(p, old[i]), 0);
	for (int i = 0; i < MANY; i++)
		CHECK_EQ(zs_free(p, cur[i]), 0);
	zs_destroy_pool(p);
}

/* An emptied pool gives its handle chunks back; the next chunk may sit at the same address. */
static void chunk_carved_again(void)
{
	struct zs_pool *p = new_pool(1, ZS_FREE_POOL_LOCK, 1);
	unsigned long old = zs_malloc(p, 100);
	REQUIRE(!ZS_IS_ERR(old));
	CHECK_EQ(zs_free(p, old), 0);
	zs_compact(p); /* no object left: every handle chunk goes */
	unsigned long cur = zs_malloc(p, 100);
	REQUIRE(!ZS_IS_ERR(cur));
	put(p, cur, 100, 2);
	if (slot_of(cur) == slot_of(old))
		printf("chunk carved again at the same address\n");
	every_call_refuses(p, old, cur, 100);
	CHECK_EQ(zs_free(p, cur), 0);
	zs_destroy_pool(p);

	/* A destroyed pool's handle, used on a new pool that may map the same addresses. */
	struct zs_pool *a = new_pool(1, ZS_FREE_POOL_LOCK, 1);
	old = zs_malloc(a, 100);
	REQUIRE(!ZS_IS_ERR(old));
	zs_destroy_pool(a);
	struct zs_pool *b = new_pool(1, ZS_FREE_POOL_LOCK, 1);
	cur = zs_malloc(b, 100);
	REQUIRE(!ZS_IS_ERR(cur));
	put(b, cur, 100, 2);
	every_call_refuses(b, old, cur, 100);
	CHECK_EQ(zs_free(b, cur), 0);
	zs_destroy_pool(b);
}

/*
 * ---- the generation's period holds across every chunk's lives ----
 * Per address, the use count at which each generation was last handed out:
 * a handle (address, generation) handed out again within PERIOD uses of
 * that address is the defect (a stale handle kept by a caller names the new
 * object).  Before chunk records, `a; free; b; free; trim; c` gave c == b.
 */
enum { ADDRS = 256 };
struct addr_gens {
	unsigned long slot;
	unsigned long uses;
	unsigned long *last; /* PERIOD entries: 1 + the use count at issue, 0 never */
};
static struct addr_gens addrs[ADDRS];
static int naddrs, addrs_full;

static unsigned gen_of_handle(unsigned long h)
{
	return (unsigned)(((h >> 1) & 3) | (((h >> 48) & 0xfff) << 2));
}

/* Record one handle; 1 if its generation repeated at its address too early. */
static int issued(unsigned long h)
{
	struct addr_gens *a = NULL;
	for (int i = 0; i < naddrs && !a; i++)
		if (addrs[i].slot == slot_of(h))
			a = &addrs[i];
	if (!a) {
		if (naddrs == ADDRS) {
			addrs_full++;
			return 0;
		}
		a = &addrs[naddrs++];
		a->slot = slot_of(h);
		a->last = calloc(PERIOD, sizeof(*a->last));
		REQUIRE(a->last);
	}
	unsigned g = gen_of_handle(h);
	int early = a->last[g] && a->uses + 1 - a->last[g] < PERIOD;
	a->uses++;
	a->last[g] = a->uses;
	return early;
}

/*
 * Seeded random churn of one to three objects per pool, with trims,
 * compactions, deferred frees, and pools destroyed and created again between
 * uses, over 2 * PERIOD rounds; every handle ever issued is checked against
 * its address's history, and the last STALE freed handles are probed each
 * round (one stale handle on every call: refused, the live objects intact).
 */
static void period_across_lives(void)
{
	enum { STALE = 32, LIVE = 3 };
	uint64_t rng = tu_seed("period_across_lives");
	struct zs_pool *pools[2] = { new_pool(1, ZS_FREE_CLASS_INDEX, 1),
				     new_pool(1, ZS_FREE_POOL_LOCK, 1) };
	unsigned long stale[STALE] = { 0 }, live[2][LIVE] = { { 0 } };
	int nstale = 0, early = 0, refused = 1, intact = 1;
	unsigned long probes = 0, lives = 0;
	for (unsigned long round = 0; round < 2 * PERIOD; round++) {
		int w = (int)(tu_rand(&rng) & 1);
		struct zs_pool *p = pools[w];
		int k = (int)(tu_rand(&rng) % LIVE);
		if (live[w][k]) {
			if (tu_rand(&rng) & 1) {
				CHECK_EQ(zs_free(p, live[w][k]), 0);
			} else {
				CHECK_EQ(zs_free_deferred(p, live[w][k]), 0);
				zs_free_deferred_flush(p);
			}
			stale[nstale++ % STALE] = live[w][k];
			live[w][k] = 0;
		} else {
			unsigned long h = zs_malloc(p, 64 + tu_rand(&rng) % 200);
			REQUIRE(!ZS_IS_ERR(h));
			early += issued(h);
			CHECK_EQ(zs_obj_write(p, h, &h, sizeof(h)), 0);
			live[w][k] = h;
		}
		switch (tu_rand(&rng) % 8) {
		case 0: zs_pool_trim(p); break;
		case 1: zs_compact(p); break;
		case 2: /* a pool destroyed with its objects, and a new one in its place */
			zs_destroy_pool(p);
			for (int i = 0; i < LIVE; i++)
				if (live[w][i])
					stale[nstale++ % STALE] = live[w][i], live[w][i] = 0;
			p = pools[w] = new_pool(1, w ? ZS_FREE_POOL_LOCK : ZS_FREE_CLASS_INDEX, 1);
			lives++;
			break;
		default: break;
		}
		/* A stale handle, on either pool: refused, and nothing live changes. */
		unsigned long old = stale[tu_rand(&rng) % STALE];
		if (old) {
			struct zs_pool *q = pools[tu_rand(&rng) & 1];
			unsigned long v = 0x5a5a;
			refused &= zs_obj_write(q, old, &v, sizeof(v)) == -EINVAL;
			refused &= zs_free(q, old) == -EINVAL;
			probes++;
		}
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < LIVE; j++) {
				unsigned long h = live[i][j], v = 0;
				if (!h)
					continue;
				unsigned long *m = zs_obj_read_begin(pools[i], h, sizeof(v), &v);
				intact &= m && *m == h;
				if (m)
					zs_obj_read_end(pools[i], h, sizeof(v), m);
			}
	}
	printf("period_across_lives: %lu rounds, %d addresses (%d uses past the table), %lu pools "
	       "destroyed, %lu stale probes\n", 2 * PERIOD, naddrs, addrs_full, lives, probes);
	CHECK_EQ(early, 0);
	CHECK(refused);
	CHECK(intact);
	for (int i = 0; i < 2; i++)
		zs_destroy_pool(pools[i]);
	for (int i = 0; i < naddrs; i++)
		free(addrs[i].last);
}

/*
 * A multi-page object's packed tail lives under a handle only its head
 * knows.  Checked mode must refuse it from a caller, both as the value the
 * header records and with its slot address and generation alone (what a
 * probe of neighbouring slots finds), and change nothing.
 */
static void tail_handles_refused(void)
{
	enum { N = 16 };
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = 1;
	c.max_object_size = 4 * 4096;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	size_t len = 10240; /* two pages and a packed 2 KiB tail */
	unsigned long h[N];
	for (int i = 0; i < N; i++) {
		REQUIRE(!ZS_IS_ERR(h[i] = zs_malloc(p, len)));
		put(p, h[i], len, 10 + i);
	}
	int tails = 0;
	for (int i = 0; i < N; i++) {
		read_lock(&p->lock);
		unsigned long tail = zspage_tail(obj_to_zspage(p, handle_to_obj(h[i])));
		read_unlock(&p->lock);
		if (!tail)
			continue;
		tails++;
		unsigned long probes[2] = { tail, tail & (HANDLE_ADDR_MASK | HANDLE_GEN_MASK) };
		for (int k = 0; k < 2; k++) {
			unsigned long t = probes[k];
			unsigned char buf[4096];
			errno = 0;
			CHECK(zs_obj_read_begin(p, t, 8, buf) == NULL);
			CHECK_EQ(errno, EINVAL);
			zs_obj_read_end(p, t, 8, buf);
			CHECK_EQ(zs_obj_write(p, t, "XXXXXXXX", 8), -EINVAL);
			CHECK(zs_map_object(p, t, ZS_MM_RW) == NULL);
			zs_unmap_object(p, t);
			CHECK_EQ(zs_free(p, t), -EINVAL);
			CHECK_EQ(zs_free_deferred(p, t), -EINVAL);
			zs_free_deferred_flush(p);
		}
	}
	CHECK(tails > 0);
	CHECK_EQ(zs_pool_objects(p), N);
	zs_compact(p); /* the refused ends dropped no reader */
	for (int i = 0; i < N; i++) {
		CHECK(objpat_stored(p, h[i], len, 10 + i));
		CHECK_EQ(zs_free(p, h[i]), 0);
	}
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_handle_gen: hang (alarm)\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(1);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(120);
	static const size_t sizes[] = { 100, 3000 /* spans two pages */, 0 /* huge */ };
	for (int mode = ZS_FREE_POOL_LOCK; mode <= ZS_FREE_CLASS_INDEX_UNLOCKED; mode++)
		for (int s = 0; s < 3; s++)
			for (int deferred = 0; deferred < 2; deferred++)
				stale_case(mode, 1, sizes[s], deferred);
	stale_case(ZS_FREE_CLASS_INDEX, 4, 100, 0);
	stale_case(ZS_FREE_CLASS_INDEX_UNLOCKED, 4, 0, 1);
	stale_after_compaction();
	generation_period(1);
	generation_period(0); /* unchecked pools carry generations too (values differ on reuse) */
	cross_thread_and_trim();
	chunk_carved_again();
	tail_handles_refused();
	period_across_lives();
	return tu_done();
}
