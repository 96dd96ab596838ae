/*
 * Objects larger than a page (zs_pool_config.max_object_size): sizes of 1 to
 * 16 pages (and small ones beside them; a partial last page packed into a
 * small class or not) against a shadow copy, under churn
 * and compaction, read back every way the API offers (read_begin with a local
 * copy, the multi-piece zs_obj_read_sgv_begin, the legacy map RO and RW,
 * zs_obj_write over the pages), then the same with threads: writers replace
 * objects of their slots while readers check any slot and a compactor runs.
 * Also the rules around it: each multi-page object costs exactly its
 * ceil(size / page) pages, classes up to a page are those of the kernel
 * profile, a kernel-profile pool still refuses size > page, the config
 * range, and the two-piece zs_obj_read_sg_begin refuses an object that
 * needs more pieces, leaving nothing locked.
 * Seeded (printed; ZS_SEED reruns it).  ZS_MT_SECONDS sets the threaded run.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "must.h"

#define MAXP ZS_MAX_OBJECT_PAGES

static void fill(unsigned char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		b[i] = (unsigned char)(seed >> (8 * (i % 8)));
	}
}

/* A size that is multi-page most of the time, with edges (k pages exactly, one byte over). */
static size_t pick_size(uint64_t *s, size_t P)
{
	uint64_t r = tu_rand(s);
	size_t k = 1 + (size_t)(r % MAXP);
	switch ((r >> 8) % 6) {
	case 0:
		return k * P;
	case 1:
		return k < MAXP ? k * P + 1 : k * P - 1;
	case 2:
		return 1 + (size_t)((r >> 16) % P); /* a small object beside the big ones */
	default:
		return (k - 1) * P + 1 + (size_t)((r >> 16) % P);
	}
}

static size_t pages_of(size_t len, size_t P)
{
	return (len + P - 1) / P;
}

/* Every read path gives back want[0..len). */
static void check_object(struct zs_pool *p, unsigned long h, const unsigned char *want, size_t len,
			 unsigned char *tmp)
{
	size_t P = zs_pool_page_size(p);
	void *m = zs_obj_read_begin(p, h, len, tmp);
	CHECK(m && !memcmp(m, want, len));
	zs_obj_read_end(p, h, len, m);

	struct zs_obj_piece sg[MAXP + 1];
	int n = zs_obj_read_sgv_begin(p, h, len, sg, MAXP + 1);
	CHECK(n >= 1);
	if (n >= 1) {
		size_t at = 0;
		for (int i = 0; i < n; i++) {
			CHECK(at + sg[i].len <= len && !memcmp(sg[i].addr, want + at, sg[i].len));
			at += sg[i].len;
		}
		CHECK_EQ(at, len);
		/* A multi-page object starts its zspage: one piece per page it touches, and
		 * a packed tail (its partial last page in a small class) may cross a page. */
		if (len > P)
			CHECK((size_t)n == pages_of(len, P) || (size_t)n == pages_of(len, P) + 1);
		zs_obj_read_sg_end(p, h);
	}
	unsigned char *mo = zs_map_object(p, h, ZS_MM_RO);
	CHECK(mo && !memcmp(mo, want, len));
	zs_unmap_object(p, h);
}

static unsigned long class_pages(struct zs_pool *p)
{
	unsigned long pages = 0;
	for (int i = 0; i < zs_class_count(p); i++) {
		struct zs_class_stats st;
		if (!zs_class_stats(p, i, &st, sizeof(st)))
			pages += st.pages_used;
	}
	return pages;
}

/*
 * Packed tails: objects of 3 pages and 100 bytes keep their last 100 bytes
 * in a small class once it pays (after a zspage's worth of tails were
 * declined), so 300 of them take far fewer than 4 pages each; they survive
 * compaction of the tails' class (half freed, by zs_free or deferred free, in
 * each free mode), and freeing all leaves 0.
 */
static void packed_tails(size_t P, int checked, enum zs_free_mode mode, int deferred,
			 uint64_t *seed)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.page_size = P;
	cfg.checked = checked;
	cfg.free_mode = mode;
	cfg.max_object_size = 4 * P;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	enum { N = 300 };
	static unsigned long h[N];
	static uint64_t cs[N];
	size_t len = 3 * P + 100;
	unsigned char *want = malloc(4 * P), *tmp = malloc(4 * P);
	REQUIRE(want && tmp);
	for (int i = 0; i < N; i++) {
		cs[i] = tu_rand(seed);
		h[i] = zs_malloc(p, len);
		REQUIRE(!ZS_IS_ERR(h[i]));
		fill(want, len, cs[i]);
		CHECK_EQ(zs_obj_write(p, h[i], want, len), 0);
	}
	unsigned long full = zs_get_total_pages(p);
	printf("page %zu: %d objects of 3 pages + 100 bytes in %lu pages (unpacked: %d)\n", P, N,
	       full, 4 * N);
	CHECK(full < 3 * N + N / 4);
	CHECK_EQ(zs_pool_objects(p), (unsigned long)N);
	/* Free every other one: the tails' zspages go half empty; compaction moves tails. */
	for (int i = 0; i < N; i += 2)
		CHECK_EQ(deferred ? zs_free_deferred(p, h[i]) : zs_free(p, h[i]), 0);
	if (deferred)
		zs_free_deferred_flush(p);
	CHECK_EQ(zs_pool_objects(p), (unsigned long)N / 2);
	unsigned long before = zs_get_total_pages(p);
	unsigned long freed = zs_compact(p);
	if (P == 4096) /* 36 tails a page: 8 half-empty zspages to merge (at 16K they share one) */
		CHECK(freed > 0);
	CHECK_EQ(zs_get_total_pages(p), before - freed);
	CHECK_EQ(zs_get_total_pages(p), class_pages(p));
	for (int i = 1; i < N; i += 2) {
		fill(want, len, cs[i]);
		check_object(p, h[i], want, len, tmp);
	}
	/* The legacy RW map writes through the tail as well. */
	unsigned char *m = zs_map_object(p, h[1], ZS_MM_RW);
	REQUIRE(m);
	m[len - 1] ^= 0x3c;
	zs_unmap_object(p, h[1]);
	fill(want, len, cs[1]);
	want[len - 1] ^= 0x3c;
	check_object(p, h[1], want, len, tmp);
	for (int i = 1; i < N; i += 2)
		CHECK_EQ(zs_free(p, h[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0UL);
	CHECK_EQ(zs_pool_objects(p), 0UL);
	free(want);
	free(tmp);
	zs_destroy_pool(p);
}

/*
 * Chain 1 makes the classes past half a page one object each: a tail that
 * would land there costs its page either way, so it is not split off (the
 * object keeps its last page whole, and the legacy map writes it back where
 * it reads it); a small tail still packs.
 */
static void chain1_tails(size_t P)
{
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.page_size = P;
	cfg.max_chain = 1;
	cfg.max_object_size = 4 * P;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	unsigned char *want = malloc(4 * P), *tmp = malloc(4 * P);
	REQUIRE(want && tmp);
	enum { N = 40 };
	unsigned long h[N];
	for (int i = 0; i < N; i++) {
		h[i] = zs_malloc(p, 2 * P + P - 100);
		REQUIRE(!ZS_IS_ERR(h[i]));
		CHECK_EQ(zs_get_total_pages(p), 3UL * (unsigned long)(i + 1));
	}
	size_t len = 2 * P + P - 100;
	fill(want, len, 77);
	CHECK_EQ(zs_obj_write(p, h[0], want, len), 0);
	unsigned char *m = zs_map_object(p, h[0], ZS_MM_RW);
	REQUIRE(m);
	CHECK(!memcmp(m, want, len));
	m[len - 1] ^= 0x11;
	zs_unmap_object(p, h[0]);
	want[len - 1] ^= 0x11;
	check_object(p, h[0], want, len, tmp);
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_free(p, h[i]), 0);
	/* 100-byte tails pack (36 to a one-page zspage) once the class opens */
	for (int i = 0; i < N; i++)
		h[i] = zs_malloc(p, 2 * P + 100);
	CHECK(zs_get_total_pages(p) < 3UL * N);
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_free(p, h[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0UL);
	free(want);
	free(tmp);
	zs_destroy_pool(p);
}

static void single_thread(size_t P, int checked, uint64_t *seed)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	cfg.page_size = P;
	cfg.checked = checked;
	cfg.max_object_size = MAXP * P;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);

	/* The classes up to a page are the kernel profile's; one class per page count after. */
	struct zs_pool_config kc;
	zs_pool_config_init(&kc);
	kc.page_size = P;
	struct zs_pool *k = must_pool_create(&kc);
	REQUIRE(k);
	int small = zs_class_count(k);
	CHECK_EQ(zs_class_count(p), small + MAXP - 1);
	for (int i = 0; i < small; i++) {
		struct zs_class_info a, b;
		CHECK_EQ(zs_class_info(p, i, &a), 0);
		CHECK_EQ(zs_class_info(k, i, &b), 0);
		CHECK(a.size == b.size && a.pages_per_zspage == b.pages_per_zspage &&
		      a.objs_per_zspage == b.objs_per_zspage && a.phys_index == b.phys_index);
	}
	for (int kk = 2; kk <= MAXP; kk++) {
		struct zs_class_info a;
		CHECK_EQ(zs_class_info(p, small - 2 + kk, &a), 0);
		CHECK(a.pages_per_zspage == (unsigned)kk && a.objs_per_zspage == 1 &&
		      a.size == kk * P && !a.huge && a.tail_waste == 0);
		CHECK_EQ(zs_lookup_class_index(p, (size_t)kk * P), small - 2 + kk);
		CHECK_EQ(zs_lookup_class_index(p, (size_t)(kk - 1) * P + 1), small - 2 + kk);
	}
	CHECK_EQ(zs_huge_class_size(p), zs_huge_class_size(k));
	/* The kernel profile keeps the kernel's limit. */
	unsigned long e = zs_malloc(k, P + 1);
	CHECK(ZS_IS_ERR(e) && (long)e == -ENOSPC);
	zs_destroy_pool(k);

	/* Bad sizes: 0 and past the limit; nothing allocated. */
	e = zs_malloc(p, 0);
	CHECK(ZS_IS_ERR(e) && (long)e == -EINVAL);
	e = zs_malloc(p, MAXP * P + 1);
	CHECK(ZS_IS_ERR(e) && (long)e == -ENOSPC);
	CHECK_EQ(zs_get_total_pages(p), 0UL);

	/* Pages: one multi-page object costs exactly its pages. */
	for (size_t kk = 2; kk <= MAXP; kk += 7) {
		unsigned long before = zs_get_total_pages(p);
		unsigned long h = zs_malloc(p, kk * P - 3);
		REQUIRE(!ZS_IS_ERR(h));
		CHECK_EQ(zs_get_total_pages(p) - before, kk);
		CHECK_EQ(zs_free(p, h), 0);
		CHECK_EQ(zs_get_total_pages(p), before);
	}

	enum { N = 160 };
	static unsigned long h[N];
	static size_t len[N];
	static uint64_t cs[N];
	unsigned char *want = malloc(MAXP * P), *tmp = malloc(MAXP * P);
	REQUIRE(want && tmp);
	for (int i = 0; i < N; i++)
		h[i] = 0;
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < N; i++) {
			if (h[i] && tu_rand(seed) % 2)
				continue;
			if (h[i])
				CHECK_EQ(zs_free(p, h[i]), 0);
			len[i] = pick_size(seed, P);
			cs[i] = tu_rand(seed);
			h[i] = zs_malloc(p, len[i]);
			REQUIRE(!ZS_IS_ERR(h[i]));
			fill(want, len[i], cs[i]);
			CHECK_EQ(zs_obj_write(p, h[i], want, len[i]), 0);
		}
		/* Free a third so the small classes have something to compact. */
		for (int i = 0; i < N; i += 3) {
			CHECK_EQ(zs_free(p, h[i]), 0);
			h[i] = 0;
		}
		zs_compact(p);
		unsigned long live = 0;
		for (int i = 0; i < N; i++) {
			if (!h[i])
				continue;
			fill(want, len[i], cs[i]);
			check_object(p, h[i], want, len[i], tmp);
			live++;
		}
		/* Every page is some class's; a packed tail is not an object of its own. */
		CHECK_EQ(zs_get_total_pages(p), class_pages(p));
		CHECK_EQ(zs_pool_objects(p), live);
	}
	/* The legacy RW map writes a multi-page object back through every page. */
	for (int i = 0; i < N; i++) {
		if (!h[i] || len[i] <= 2 * P)
			continue;
		unsigned char *m = zs_map_object(p, h[i], ZS_MM_RW);
		REQUIRE(m);
		m[len[i] - 1] ^= 0x5a;
		m[P + 7] ^= 0xa5;
		zs_unmap_object(p, h[i]);
		fill(want, len[i], cs[i]);
		want[len[i] - 1] ^= 0x5a;
		want[P + 7] ^= 0xa5;
		check_object(p, h[i], want, len[i], tmp);
		/* Two pieces are too few for it: refused, and nothing stays locked. */
		struct zs_obj_piece sg2[2];
		CHECK_EQ(zs_obj_read_sg_begin(p, h[i], len[i], sg2), -EINVAL);
		CHECK(zs_obj_read_sg_begin(p, h[i], 100, sg2) == 1);
		zs_obj_read_sg_end(p, h[i]);
		/* Reading past the object is refused. */
		CHECK(zs_obj_read_begin(p, h[i], pages_of(len[i], P) * P + 1, tmp) == NULL);
		CHECK_EQ(zs_free(p, h[i]), 0);
		h[i] = 0;
		break;
	}
	if (checked) {
		/* A freed multi-page handle is refused by every call. */
		unsigned long x = zs_malloc(p, 5 * P);
		REQUIRE(!ZS_IS_ERR(x));
		CHECK_EQ(zs_free(p, x), 0);
		CHECK_EQ(zs_free(p, x), -EINVAL);
		CHECK(zs_obj_read_begin(p, x, 10, tmp) == NULL);
		CHECK_EQ(zs_obj_write(p, x, want, 10), -EINVAL);
	}
	for (int i = 0; i < N; i++)
		if (h[i])
			CHECK_EQ(zs_free(p, h[i]), 0);
	CHECK_EQ(zs_get_total_pages(p), 0UL);
	free(want);
	free(tmp);
	zs_destroy_pool(p);
}

/* ---- threads: writers replace objects in their slots, readers check any slot ---- */

#define NSLOTS 96
#define NWRITERS 2
#define NREADERS 2

struct slot {
	pthread_rwlock_t lock; /* readers read the object under it; the writer replaces it under it */
	unsigned long h;
	size_t len;
	uint64_t cs;
};

static struct zs_pool *mt_pool;
static struct slot slots[NSLOTS];
static atomic_int stop;
static atomic_long errors, reads;
static uint64_t base_seed;

static void *writer(void *arg)
{
	long id = (long)arg;
	size_t P = zs_pool_page_size(mt_pool);
	uint64_t s = base_seed ^ (0x1000u * (uint64_t)(id + 1));
	unsigned char *buf = malloc(MAXP * P);
	if (!buf)
		return NULL;
	while (!atomic_load(&stop)) {
		int i = (int)(id + NWRITERS * (long)(tu_rand(&s) % (NSLOTS / NWRITERS)));
		size_t len = pick_size(&s, P);
		uint64_t cs = tu_rand(&s);
		unsigned long h = zs_malloc(mt_pool, len);
		if (ZS_IS_ERR(h)) {
			atomic_fetch_add(&errors, 1);
			break;
		}
		fill(buf, len, cs);
		if (zs_obj_write(mt_pool, h, buf, len))
			atomic_fetch_add(&errors, 1);
		pthread_rwlock_wrlock(&slots[i].lock);
		unsigned long old = slots[i].h;
		slots[i].h = h;
		slots[i].len = len;
		slots[i].cs = cs;
		pthread_rwlock_unlock(&slots[i].lock);
		if (old && zs_free(mt_pool, old))
			atomic_fetch_add(&errors, 1);
	}
	free(buf);
	return NULL;
}

static void *reader(void *arg)
{
	size_t P = zs_pool_page_size(mt_pool);
	uint64_t s = base_seed ^ (0x77u * (uint64_t)((long)arg + 1));
	unsigned char *want = malloc(MAXP * P), *tmp = malloc(MAXP * P);
	if (!want || !tmp) {
		free(want);
		free(tmp);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		struct slot *sl = &slots[tu_rand(&s) % NSLOTS];
		pthread_rwlock_rdlock(&sl->lock);
		if (sl->h) {
			fill(want, sl->len, sl->cs);
			int bad = 0;
			if (tu_rand(&s) % 2) {
				void *m = zs_obj_read_begin(mt_pool, sl->h, sl->len, tmp);
				bad = !m || memcmp(m, want, sl->len);
				zs_obj_read_end(mt_pool, sl->h, sl->len, m);
			} else {
				struct zs_obj_piece sg[MAXP + 1];
				int n = zs_obj_read_sgv_begin(mt_pool, sl->h, sl->len, sg, MAXP + 1);
				size_t at = 0;
				bad = n < 1;
				for (int j = 0; j < n && !bad; j++) {
					bad = at + sg[j].len > sl->len || memcmp(sg[j].addr, want + at, sg[j].len);
					at += sg[j].len;
				}
				if (n >= 1) {
					bad |= at != sl->len;
					zs_obj_read_sg_end(mt_pool, sl->h);
				}
			}
			if (bad)
				atomic_fetch_add(&errors, 1);
			atomic_fetch_add(&reads, 1);
		}
		pthread_rwlock_unlock(&sl->lock);
	}
	free(want);
	free(tmp);
	return NULL;
}

static void *compactor(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		zs_compact(mt_pool);
	return NULL;
}

static void threaded(size_t P, double seconds)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	cfg.page_size = P;
	cfg.max_object_size = MAXP * P;
	mt_pool = must_pool_create(&cfg);
	REQUIRE(mt_pool);
	for (int i = 0; i < NSLOTS; i++) {
		pthread_rwlock_init(&slots[i].lock, NULL);
		slots[i].h = 0;
	}
	atomic_store(&stop, 0);
	pthread_t t[NWRITERS + NREADERS + 1];
	int nt = 0;
	for (long i = 0; i < NWRITERS; i++)
		REQUIRE(!pthread_create(&t[nt++], NULL, writer, (void *)i));
	for (long i = 0; i < NREADERS; i++)
		REQUIRE(!pthread_create(&t[nt++], NULL, reader, (void *)i));
	REQUIRE(!pthread_create(&t[nt++], NULL, compactor, NULL));
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&errors), 0L);
	CHECK(atomic_load(&reads) > 0);
	printf("page %zu: %ld reads checked, %ld errors\n", P, atomic_load(&reads),
	       atomic_load(&errors));
	unsigned char *want = malloc(MAXP * P), *tmp = malloc(MAXP * P);
	REQUIRE(want && tmp);
	for (int i = 0; i < NSLOTS; i++) {
		if (slots[i].h) {
			fill(want, slots[i].len, slots[i].cs);
			check_object(mt_pool, slots[i].h, want, slots[i].len, tmp);
			CHECK_EQ(zs_free(mt_pool, slots[i].h), 0);
		}
		pthread_rwlock_destroy(&slots[i].lock);
	}
	CHECK_EQ(zs_get_total_pages(mt_pool), 0UL);
	free(want);
	free(tmp);
	zs_destroy_pool(mt_pool);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_zs_multipage");
	base_seed = seed;
	const char *e = getenv("ZS_MT_SECONDS");
	double secs = e ? atof(e) : 1.5;

	/* The config's range: below a page or past 16 pages is refused. */
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	cfg.max_object_size = 4095;
	errno = 0;
	CHECK_POOL_REFUSED(&cfg, "max_object_size 4095");
	cfg.max_object_size = MAXP * 4096 + 1;
	errno = 0;
	CHECK_POOL_REFUSED(&cfg, "max_object_size");
	cfg.max_object_size = 4096; /* one page: the kernel's table */
	struct zs_pool *p = must_pool_create(&cfg);
	CHECK(p);
	if (p) {
		unsigned long h = zs_malloc(p, 4097);
		CHECK(ZS_IS_ERR(h) && (long)h == -ENOSPC);
		zs_destroy_pool(p);
	}

	packed_tails(4096, 0, ZS_FREE_POOL_LOCK, 0, &seed);
	packed_tails(4096, 1, ZS_FREE_CLASS_INDEX, 1, &seed);
	packed_tails(4096, 0, ZS_FREE_CLASS_INDEX_UNLOCKED, 1, &seed);
	packed_tails(16384, 0, ZS_FREE_POOL_LOCK, 0, &seed);
	chain1_tails(4096);
	single_thread(4096, 0, &seed);
	single_thread(4096, 1, &seed);
	single_thread(16384, 1, &seed);
	threaded(4096, secs);
	return tu_done();
}
