/*
 * Concurrency test of the zram store (built to run under TSan as well):
 * writers, readers, free-notify/discard, compaction, idle marking and
 * recompression all at once on one store, on every backend kind, and on
 * zsmalloc with the application profile's pool too.
 *
 * Every page written is self-describing (slot, version, checksum), so a
 * reader can tell a torn or foreign page from a valid one without knowing
 * which version is current.  Each writer owns a stripe of slots and knows
 * exactly what each should hold, so after the threads join every slot is
 * compared with its owner's record: 0 bytes lost.  A small shared region is
 * written by every writer at once to contend on the same slot locks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>

#include "testutil.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define PS 4096

#include "sanitizer.h"
#define NSLOTS 768
#define NSHARED 32           /* slots [0, NSHARED) are written by every writer */
#define WRITERS 3
#define READERS 2

static struct zs_pageset src;
static _Atomic int stop;
static _Atomic long bad_reads, bad_writes;

static uint64_t page_sum(const unsigned char *p)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < PS - 8; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ULL;
	}
	return h;
}

/* Content for (slot, version): a real page (or, every 9th version, a same-filled one) with a stamp. */
static void make_page(unsigned char *p, uint32_t slot, uint32_t ver)
{
	uint64_t stamp = ((uint64_t)slot << 32) | ver, sum;

	if (ver % 9 == 4) {
		for (size_t i = 0; i < PS; i += 8)
			memcpy(p + i, &stamp, 8);
		return;
	}
	memcpy(p, src.data + ((size_t)(slot * 31u + ver) % src.npages) * PS, PS);
	memcpy(p, &stamp, 8);
	sum = page_sum(p);
	memcpy(p + PS - 8, &sum, 8);
}

/* A page read from `slot` must be zeros, a same-filled stamp, or a stamped page with its checksum. */
static int page_valid(const unsigned char *p, uint32_t slot)
{
	uint64_t stamp, sum;

	memcpy(&stamp, p, 8);
	if (!memcmp(p, p + 8, PS - 8))
		return stamp == 0 || (uint32_t)(stamp >> 32) == slot;
	if ((uint32_t)(stamp >> 32) != slot)
		return 0;
	memcpy(&sum, p + PS - 8, 8);
	return sum == page_sum(p);
}

struct wctx {
	struct zs_zram *z;
	int id;
	uint64_t seed;
	uint32_t ver[NSLOTS];  /* what each owned slot holds; 0 = empty */
	long ops;
};

static int owns(int id, uint32_t slot)
{
	return slot >= NSHARED && (int)(slot % WRITERS) == id;
}

static void *writer(void *arg)
{
	struct wctx *w = arg;
	unsigned char page[PS];

	for (long n = 0; n < w->ops; n++) {
		uint64_t r = tu_rand(&w->seed);
		uint32_t slot = (uint32_t)(r % NSLOTS), op = (uint32_t)(r >> 32) % 16;

		if (slot < NSHARED) {
			make_page(page, slot, (uint32_t)n + 1);
			if (zs_zram_write(w->z, slot, page))
				atomic_fetch_add(&bad_writes, 1);
			continue;
		}
		if (!owns(w->id, slot))
			slot = slot - slot % WRITERS + (uint32_t)w->id;
		if (slot >= NSLOTS || slot < NSHARED)
			continue;
		if (op == 0) {
			zs_zram_discard(w->z, slot);
			w->ver[slot] = 0;
		} else if (op == 1) {
			/* May miss when a reader holds the slot: then it keeps its page. */
			if (zs_zram_free_notify(w->z, slot) == 0)
				w->ver[slot] = 0;
		} else {
			uint32_t v = (uint32_t)n + 1;

			make_page(page, slot, v);
			if (zs_zram_write(w->z, slot, page) == 0)
				w->ver[slot] = v;
			else
				atomic_fetch_add(&bad_writes, 1);
		}
	}
	return NULL;
}

struct rctx {
	struct zs_zram *z;
	uint64_t seed;
	long ops;
};

static void *reader(void *arg)
{
	struct rctx *r = arg;
	unsigned char page[PS];

	for (long n = 0; n < r->ops; n++) {
		uint32_t slot = (uint32_t)(tu_rand(&r->seed) % NSLOTS);

		if (zs_zram_read(r->z, slot, page, PS) || !page_valid(page, slot))
			atomic_fetch_add(&bad_reads, 1);
	}
	return NULL;
}

static void *maintainer(void *arg)
{
	struct zs_zram *z = arg;
	struct zs_zram_stats st;
	struct zs_zram_recomp_result rr;
	unsigned n = 0;

	while (!atomic_load(&stop)) {
		switch (n++ % 4) {
		case 0: zs_zram_compact(z); break;
		case 1: zs_zram_mark_idle(z, 0); break;
		case 2: zs_zram_recompress(z, ZS_ZRAM_RECOMP_IDLE, 0, 64, &rr); break;
		default: zs_zram_get_stats(z, &st, sizeof(st)); break;
		}
		sched_yield();
	}
	return NULL;
}

static void run_kind(const char *kind, int deferred, int app, uint64_t *seed, long ops)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	pthread_t wt[WRITERS], rt[READERS], mt;
	static struct wctx w[WRITERS];
	struct rctx r[READERS];
	struct zs_zram_stats st;
	unsigned char page[PS], want[PS];
	long lost = 0, invalid = 0, stored = 0, same = 0;

	if (app)
		zs_zram_config_init_app(&cfg); /* class copies per CPU, fitted zspages */
	else
		zs_zram_config_init(&cfg);
	cfg.backend.kind = kind;
	cfg.disksize = (uint64_t)NSLOTS * PS;
	cfg.recomp = "zstd:1";
	cfg.deferred_free = deferred;
	cfg.streams = 3;   /* fewer streams than threads: exercises stream contention */
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);

	atomic_store(&stop, 0);
	atomic_store(&bad_reads, 0);
	atomic_store(&bad_writes, 0);
	for (int i = 0; i < WRITERS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i] = (struct wctx){ .z = z, .id = i, .seed = tu_rand(seed), .ops = ops };
		pthread_create(&wt[i], NULL, writer, &w[i]);
	}
	for (int i = 0; i < READERS; i++) {
		r[i] = (struct rctx){ z, tu_rand(seed), ops };
		pthread_create(&rt[i], NULL, reader, &r[i]);
	}
	pthread_create(&mt, NULL, maintainer, z);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(wt[i], NULL);
	for (int i = 0; i < READERS; i++)
		pthread_join(rt[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(mt, NULL);
	zs_zram_flush(z);

	CHECK_EQ(atomic_load(&bad_reads), 0);
	CHECK_EQ(atomic_load(&bad_writes), 0);
	for (uint32_t s = 0; s < NSLOTS; s++) {
		CHECK(zs_zram_read(z, s, page, PS) == 0);
		if (!page_valid(page, s)) {
			invalid++;
			continue;
		}
		if (s < NSHARED) {
			size_t size;
			unsigned flags;

			zs_zram_slot_info(z, s, &size, &flags, NULL);
			stored += size || (flags & ZS_ZRAM_F_SAME);
			same += !!(flags & ZS_ZRAM_F_SAME);
			continue;
		}
		{
			uint32_t v = w[s % WRITERS].ver[s];

			if (v) {
				make_page(want, s, v);
				stored++;
				same += v % 9 == 4;
			} else {
				memset(want, 0, PS);
			}
			lost += memcmp(page, want, PS) != 0;
		}
	}
	CHECK_EQ(invalid, 0);
	CHECK_EQ(lost, 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, stored);
	CHECK_EQ(st.same_pages, same);
	CHECK_EQ(st.failed_reads + st.failed_writes, 0);
	printf("  %-9s%s deferred=%d: %ld ops/thread, stored %llu, same %llu, miss_free %llu, "
	       "compacted %llu pages\n",
	       kind, app ? " (app)" : "", deferred, ops, (unsigned long long)st.pages_stored,
	       (unsigned long long)st.same_pages, (unsigned long long)st.miss_free,
	       (unsigned long long)st.pages_compacted);
	zs_zram_destroy(z);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_zram");
	char *paths[] = { "/usr/bin" };
	const char *const *kinds = zs_backend_kinds();
	const char *e = getenv("ZS_MT_OPS");
	long ops = e ? atol(e) : 20000;

	REQUIRE(zs_pageset_load(&src, PS, paths, 1, 2u << 20) == 0 && src.npages > 16);
	for (int k = 0; kinds[k]; k++) {
#if TU_TSAN
		/*
		 * The malloc kinds hand out memory from allocators TSan cannot see
		 * into (__libc_malloc is not intercepted; jemalloc and mimalloc are
		 * uninstrumented libraries), so a block freed by one thread and
		 * reused by another looks unordered and is reported as a race: a
		 * false positive of the tool.  Only our own allocators are checked.
		 */
		if (strcmp(kinds[k], "zsmalloc") && strcmp(kinds[k], "zblock")) {
			printf("  %-9s skipped under TSan (uninstrumented allocator)\n", kinds[k]);
			continue;
		}
#endif
		run_kind(kinds[k], 0, 0, &seed, ops);
		run_kind(kinds[k], 1, 0, &seed, ops / 2);
	}
	/* The application profile's store, what Python's ZramStore and zs_region default to. */
	run_kind("zsmalloc", 0, 1, &seed, ops / 2);
	run_kind("zsmalloc", 1, 1, &seed, ops / 2);
	zs_pageset_free(&src);
	return tu_done();
}
