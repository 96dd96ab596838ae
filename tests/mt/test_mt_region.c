/*
 * zs_region integrity under concurrency: several threads write (random,
 * corpus, same-filled and partial pages), verify, page out and release
 * random ranges of one region; every byte is checked against a shadow copy.
 * Pageout takes no lock, so it races the writers and readers on purpose:
 * that is the "writes to pages being paged out are never lost" property.
 * A second phase has one thread rewriting a few pages in a tight loop while
 * another pages them out continuously.  Also: RSS of the region falls after
 * pageout (mincore), fork children do not get the range, and an
 * unprivileged process gets -EPERM with a message naming the fixes.
 * Exit 77 (ctest skip) when userfaultfd is not available here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/region.h"
#include "zs/harness.h"

#define PG 4096
#define NPAGES 4096            /* 16 MiB region */
#define BLOCK 16               /* pages per lock */
#define NTHREADS 4

static struct zs_region *reg;
static unsigned char *base, *shadow;
static pthread_rwlock_t locks[NPAGES / BLOCK];
static struct zs_pageset corpus;
static uint64_t g_seed;
static long g_ops;
static atomic_long mismatches, pageout_errors;
static int synthetic;

static void lock_range(size_t p, size_t n, int write)
{
	for (size_t b = p / BLOCK; b <= (p + n - 1) / BLOCK; b++)
		write ? pthread_rwlock_wrlock(&locks[b]) : pthread_rwlock_rdlock(&locks[b]);
}

static void unlock_range(size_t p, size_t n)
{
	for (size_t b = p / BLOCK; b <= (p + n - 1) / BLOCK; b++)
		pthread_rwlock_unlock(&locks[b]);
}

static void fill_page(unsigned char *dst, uint64_t *rs)
{
	uint64_t r = tu_rand(rs);
	switch (r % 5) {
	case 0: /* random bytes: incompressible, stored huge */
		for (int i = 0; i < PG; i += 8) {
			uint64_t v = tu_rand(rs);
			memcpy(dst + i, &v, 8);
		}
		break;
	case 1: /* corpus page */
	case 2:
		memcpy(dst, corpus.data + (r >> 8) % corpus.npages * PG, PG);
		break;
	case 3: { /* same-filled (zero included) */
		uint64_t v = (r >> 8) % 3 ? tu_rand(rs) : 0;
		for (int i = 0; i < PG; i += 8)
			memcpy(dst + i, &v, 8);
		break;
	}
	default: { /* partial write into the current contents */
		size_t off = (r >> 8) % (PG - 64);
		for (size_t i = 0; i < 64; i++)
			dst[off + i] = (unsigned char)tu_rand(rs);
	}
	}
}

static void *worker(void *arg)
{
	uint64_t rs = g_seed * 7919 + (uintptr_t)arg;
	unsigned char tmp[PG];

	for (long op = 0; op < g_ops; op++) {
		uint64_t r = tu_rand(&rs);
		size_t n = 1 + (r >> 8) % 40;
		size_t p = (r >> 20) % (NPAGES - n);
		unsigned kind = r % 100;
		if (kind < 35) {
			lock_range(p, n, 1);
			for (size_t i = 0; i < n; i++) {
				memcpy(tmp, shadow + (p + i) * PG, PG);
				fill_page(tmp, &rs);
				memcpy(base + (p + i) * PG, tmp, PG);
				memcpy(shadow + (p + i) * PG, tmp, PG);
			}
			unlock_range(p, n);
		} else if (kind < 65) {
			lock_range(p, n, 0);
			for (size_t i = 0; i < n; i++)
				if (memcmp(base + (p + i) * PG, shadow + (p + i) * PG, PG)) {
					if (atomic_fetch_add(&mismatches, 1) < 5)
						fprintf(stderr, "mismatch at page %zu\n", p + i);
				}
			unlock_range(p, n);
		} else if (kind < 92) {
			long k = zs_region_pageout(reg, base + p * PG, n * PG);
			if (k < 0)
				atomic_fetch_add(&pageout_errors, 1);
		} else {
			lock_range(p, n, 1);
			if (zs_region_release(reg, base + p * PG, n * PG))
				atomic_fetch_add(&pageout_errors, 1);
			memset(shadow + p * PG, 0, n * PG);
			unlock_range(p, n);
		}
	}
	return NULL;
}

/* Phase 2: one writer owns pages [0, HOT), a pager pages them out nonstop. */
#define HOT 8
static atomic_int hot_stop;

static void *pager(void *arg)
{
	(void)arg;
	while (!atomic_load(&hot_stop))
		if (zs_region_pageout(reg, base, HOT * PG) < 0)
			atomic_fetch_add(&pageout_errors, 1);
	return NULL;
}

/* Phase 3: several readers fault the same page while it is paged out again and again. */
static atomic_long same_bad;

static void *same_reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&hot_stop))
		for (int i = 0; i < 4; i++)
			if (memcmp(base + (200 + i) * PG, shadow + (200 + i) * PG, PG))
				atomic_fetch_add(&same_bad, 1);
	return NULL;
}

static size_t resident_pages(void)
{
	static unsigned char vec[NPAGES];
	size_t n = 0;
	if (mincore(base, (size_t)NPAGES * PG, vec))
		return (size_t)-1;
	for (size_t i = 0; i < NPAGES; i++)
		n += vec[i] & 1;
	return n;
}

static void check_unprivileged(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct zs_region_config c;
		struct zs_region *x = NULL;
		char err[512];
		zs_region_config_init(&c);
		c.size = 1 << 20;
		if (setgid(65534) || setuid(65534))
			_exit(3);
		int rc = zs_region_create(&c, &x, err, sizeof(err));
		if (rc == 0) {   /* vm.unprivileged_userfaultfd=1 here: fine */
			zs_region_destroy(x);
			_exit(0);
		}
		_exit(rc == -EPERM && strstr(err, "vm.unprivileged_userfaultfd") &&
		      strstr(err, "/dev/userfaultfd") && strstr(err, "root") ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3));
}

int main(void)
{
	char err[512];
	if (!zs_region_available(err, sizeof(err))) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	g_seed = tu_seed("test_mt_region");
	const char *e = getenv("ZS_MT_OPS");
	g_ops = e ? atol(e) : 3000;
	if (geteuid() == 0)
		check_unprivileged();

	char *paths[] = { "/usr/lib" };
	if (zs_pageset_load(&corpus, PG, paths, 1, 4u << 20) || corpus.npages < 16) {
		/* No corpus here: synthesize text-like pages instead. */
		zs_pageset_free(&corpus);
		synthetic = 1;
		corpus.npages = 256;
		corpus.data = malloc(256 * PG);
		REQUIRE(corpus.data);
		uint64_t rs = g_seed;
		for (size_t i = 0; i < 256 * PG; i++)
			corpus.data[i] = "abcdefgh \n"[tu_rand(&rs) % 10];
	}

	struct zs_region_config cfg;
	zs_region_config_init(&cfg);
	cfg.size = (size_t)NPAGES * PG;
	cfg.handler_threads = 2;
	cfg.fault_around = 8;
	cfg.spin_us = 20;
	int rc = zs_region_create(&cfg, &reg, err, sizeof(err));
	if (rc) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	base = zs_region_addr(reg);
	shadow = calloc(NPAGES, PG);
	REQUIRE(shadow);
	for (int i = 0; i < NPAGES / BLOCK; i++)
		pthread_rwlock_init(&locks[i], NULL);

	/* Never touched: reads as zeros, pageout stores nothing. */
	CHECK_EQ(zs_region_pageout(reg, base, (size_t)NPAGES * PG), 0);
	CHECK(base[12345] == 0 && base[(size_t)NPAGES * PG - 1] == 0);

	/* Phase 1: random mixed operations. */
	pthread_t t[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&mismatches), 0);
	CHECK_EQ(atomic_load(&pageout_errors), 0);
	CHECK_EQ(memcmp(base, shadow, (size_t)NPAGES * PG), 0);

	/* Fill everything (so RSS is large), page out, check RSS falls and contents survive. */
	uint64_t rs = g_seed ^ 0xabcdef;
	for (size_t i = 0; i < NPAGES; i++) {
		fill_page(shadow + i * PG, &rs);
		memcpy(base + i * PG, shadow + i * PG, PG);
	}
	size_t before = resident_pages();
	long out = zs_region_pageout(reg, base, (size_t)NPAGES * PG);
	size_t after = resident_pages();
	printf("resident pages (mincore): %zu before pageout, %zu after; %ld stored\n", before,
	       after, out);
	CHECK_EQ(before, NPAGES);
	CHECK_EQ(after, 0);
	CHECK_EQ(out, NPAGES);
	struct zs_region_stats st;
	zs_region_get_stats(reg, &st, sizeof(st));
	CHECK_EQ(st.resident, 0);
	CHECK_EQ(st.stored, NPAGES);
	CHECK_EQ(st.store.pages_stored, NPAGES);
	CHECK(st.store.same_pages > 0 && st.store.huge_pages > 0);
	CHECK(st.store.mem_used_total < (uint64_t)NPAGES * PG);
	/* Read back in random order from several threads at once (phase 1 workers reading). */
	g_ops = g_ops / 4 + 1;
	for (long i = 0; i < NTHREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(i + 100)) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&mismatches), 0);
	CHECK_EQ(memcmp(base, shadow, (size_t)NPAGES * PG), 0);

	/* Phase 2: writes into pages while they are being paged out. */
	pthread_t pg;
	REQUIRE(pthread_create(&pg, NULL, pager, NULL) == 0);
	uint64_t *hot = (uint64_t *)(void *)base;
	long lost = 0, rounds = g_ops * 4;
	for (long k = 1; k <= rounds; k++) {
		for (int i = 0; i < HOT; i++)
			hot[i * PG / 8 + (k % 500)] = (uint64_t)k * 131 + (uint64_t)i;
		for (int i = 0; i < HOT; i++)
			lost += hot[i * PG / 8 + (k % 500)] != (uint64_t)k * 131 + (uint64_t)i;
		if (k > 500)   /* the value written 500 rounds ago in this word must survive */
			for (int i = 0; i < HOT; i++)
				lost += hot[i * PG / 8 + ((k + 1) % 500)] !=
					(uint64_t)(k - 499) * 131 + (uint64_t)i;
	}
	atomic_store(&hot_stop, 1);
	pthread_join(pg, NULL);
	zs_region_get_stats(reg, &st, sizeof(st));
	printf("phase 2: %ld rounds, %llu write-protect faults, %llu faults, lost %ld\n", rounds,
	       (unsigned long long)st.faults_wp, (unsigned long long)st.faults, lost);
	CHECK_EQ(lost, 0);
	CHECK_EQ(atomic_load(&pageout_errors), 0);
	/* keep the shadow in sync for the final check */
	memcpy(shadow, base, HOT * PG);

	/* Phase 3: same pages, many faulting readers, continuous pageout. */
	atomic_store(&hot_stop, 0);
	pthread_t rd[3];
	for (int i = 0; i < 3; i++)
		REQUIRE(pthread_create(&rd[i], NULL, same_reader, NULL) == 0);
	for (long k = 0; k < g_ops; k++)
		if (zs_region_pageout(reg, base + 200 * PG, 4 * PG) < 0)
			atomic_fetch_add(&pageout_errors, 1);
	atomic_store(&hot_stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(rd[i], NULL);
	CHECK_EQ(atomic_load(&same_bad), 0);
	CHECK_EQ(atomic_load(&pageout_errors), 0);

	/* fork: the child has no mapping there (mincore: ENOMEM, unmapped). */
	pid_t pid = fork();
	if (pid == 0) {
		unsigned char v;
		_exit(mincore(base + PG * 100, PG, &v) == -1 && errno == ENOMEM ? 0 : 1);
	}
	int ws = 0;
	waitpid(pid, &ws, 0);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_EQ(memcmp(base, shadow, (size_t)NPAGES * PG), 0);

	/* Release everything: the store is empty, the range reads zeros. */
	zs_region_pageout(reg, base, (size_t)NPAGES * PG / 2);
	CHECK_EQ(zs_region_release(reg, base, (size_t)NPAGES * PG), 0);
	zs_zram_flush(zs_region_store(reg));
	zs_region_get_stats(reg, &st, sizeof(st));
	CHECK_EQ(st.store.pages_stored, 0);
	CHECK_EQ(st.stored, 0);
	CHECK_EQ(st.resident, 0);
	CHECK(base[PG * 7 + 5] == 0);
	CHECK(resident_pages() <= 8);   /* that read mapped the zero page (fault-around 8) */

	/* Bad arguments are errors, not crashes. */
	CHECK_EQ(zs_region_pageout(reg, base + 1, PG), -EINVAL);
	CHECK_EQ(zs_region_release(reg, base, (size_t)(NPAGES + 1) * PG), -EINVAL);
	CHECK_EQ(zs_region_pageout(reg, base - PG, PG), -EINVAL);

	/* Fault-around: ascending and descending streams take one fault per window. */
	{
		struct zs_region *r3;
		struct zs_region_config c3;
		zs_region_config_init(&c3);
		c3.size = 1024 * PG;
		c3.fault_around = 16;
		REQUIRE(zs_region_create(&c3, &r3, err, sizeof(err)) == 0);
		unsigned char *b3 = zs_region_addr(r3);
		for (size_t i = 0; i < 1024; i++)
			memcpy(b3 + i * PG, corpus.data + i % corpus.npages * PG, PG);
		struct zs_region_stats s0, s1, s2;
		CHECK_EQ(zs_region_pageout(r3, b3, 1024 * PG), 1024);
		zs_region_get_stats(r3, &s0, sizeof(s0));
		int bad = 0;
		for (size_t i = 0; i < 1024; i++)
			bad += memcmp(b3 + i * PG, corpus.data + i % corpus.npages * PG, PG) != 0;
		zs_region_get_stats(r3, &s1, sizeof(s1));
		CHECK_EQ(zs_region_pageout(r3, b3, 1024 * PG), 1024);
		for (size_t i = 1024; i-- > 0;)
			bad += memcmp(b3 + i * PG, corpus.data + i % corpus.npages * PG, PG) != 0;
		zs_region_get_stats(r3, &s2, sizeof(s2));
		printf("fault-around 16: %llu faults ascending, %llu descending for 1024 pages\n",
		       (unsigned long long)(s1.faults - s0.faults),
		       (unsigned long long)(s2.faults - s1.faults));
		CHECK_EQ(bad, 0);
		CHECK(s1.faults - s0.faults <= 1024 / 16 + 4);
		CHECK(s2.faults - s1.faults <= 1024 / 16 + 4);
		zs_region_destroy(r3);
	}

	/* mremap is unsupported: the region marks itself broken, nothing hangs. */
	{
		struct zs_region *r4;
		struct zs_region_config c4;
		zs_region_config_init(&c4);
		c4.size = 64 * PG;
		REQUIRE(zs_region_create(&c4, &r4, err, sizeof(err)) == 0);
		unsigned char *b4 = zs_region_addr(r4);
		memset(b4, 7, 64 * PG);
		CHECK_EQ(zs_region_pageout(r4, b4, 32 * PG), 32);
		void *dst = mmap(NULL, 64 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		REQUIRE(dst != MAP_FAILED);
		unsigned char *moved = mremap(b4, 64 * PG, 64 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
		REQUIRE(moved == dst);
		struct zs_region_stats s4 = { 0 };
		for (int i = 0; i < 1000 && !s4.broken; i++) {
			zs_region_get_stats(r4, &s4, sizeof(s4));
			if (!s4.broken)
				usleep(1000);
		}
		CHECK(s4.broken);
		CHECK_EQ(zs_region_pageout(r4, b4, PG), -EFAULT);
		CHECK(moved[40 * PG] == 7);      /* resident pages moved along */
		CHECK(moved[3 * PG] == 7);       /* stored ones follow too, decompressed on touch */
		munmap(moved, 64 * PG);
		zs_region_destroy(r4);
	}

	/* Automatic reclaim keeps resident memory near the limit. */
	{
		struct zs_region *r2;
		struct zs_region_config c2;
		zs_region_config_init(&c2);
		c2.size = 2048 * PG;
		c2.resident_limit = 256 * PG;
		REQUIRE(zs_region_create(&c2, &r2, err, sizeof(err)) == 0);
		unsigned char *b2 = zs_region_addr(r2);
		for (size_t i = 0; i < 2048; i++)
			memset(b2 + i * PG, (int)(i % 251) + 1, PG);
		usleep(100000);
		zs_region_reclaim(r2, 224 * PG);
		struct zs_region_stats s2;
		zs_region_get_stats(r2, &s2, sizeof(s2));
		printf("reclaim: resident %llu pages (limit 256), stored %llu, reclaimed %llu\n",
		       (unsigned long long)s2.resident, (unsigned long long)s2.stored,
		       (unsigned long long)s2.reclaimed);
		CHECK(s2.resident <= 256);
		CHECK(s2.reclaimed > 0);
		int bad = 0;
		for (size_t i = 0; i < 2048; i++)
			bad += b2[i * PG + 17] != (unsigned char)((i % 251) + 1);
		CHECK_EQ(bad, 0);
		zs_region_destroy(r2);
	}

	/* Reclaim honours the access signal: hot-hinted and just-faulted pages stay. */
	{
		struct zs_region *r5;
		struct zs_region_config c5;
		zs_region_config_init(&c5);
		c5.size = 1024 * PG;
		c5.fault_around = 1;
		REQUIRE(zs_region_create(&c5, &r5, err, sizeof(err)) == 0);
		unsigned char *b5 = zs_region_addr(r5);
		memset(b5, 3, 1024 * PG);
		CHECK_EQ(zs_region_advise(r5, b5, 1024 * PG, ZS_REGION_COLD), 0);
		CHECK_EQ(zs_region_advise(r5, b5 + 100 * PG, 64 * PG, ZS_REGION_HOT), 0);
		/* pages 500..531 paged out and faulted back: referenced by the fault */
		CHECK_EQ(zs_region_pageout(r5, b5 + 500 * PG, 32 * PG), 32);
		int sum = 0;
		for (int i = 500; i < 532; i++)
			sum += b5[(size_t)i * PG];
		CHECK_EQ(sum, 3 * 32);
		long out5 = zs_region_reclaim(r5, 128 * PG);
		unsigned char vec[1024];
		REQUIRE(mincore(b5, 1024 * PG, vec) == 0);
		int hot_in = 0, faulted_in = 0, cold_in = 0;
		for (int i = 0; i < 1024; i++) {
			int in = vec[i] & 1;
			if (i >= 100 && i < 164)
				hot_in += in;
			else if (i >= 500 && i < 532)
				faulted_in += in;
			else
				cold_in += in;
		}
		printf("reclaim by access: %ld paged out; resident hot %d/64, faulted %d/32, "
		       "cold %d/928\n", out5, hot_in, faulted_in, cold_in);
		CHECK_EQ(hot_in, 64);
		CHECK_EQ(faulted_in, 32);
		CHECK(cold_in <= 128 - 96);
		zs_region_destroy(r5);
	}

	zs_region_destroy(reg);
	free(shadow);
	if (synthetic)
		free(corpus.data);
	else
		zs_pageset_free(&corpus);
	return tu_done();
}
