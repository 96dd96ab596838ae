/*
 * zswap under threads: workers store, load and invalidate their own offsets
 * (each knows exactly what its offsets hold, so every loaded byte is
 * checked) and a set of shared offsets (a loaded page must be one whole
 * page some thread stored there: its header and pattern agree), while a
 * maintenance thread writes back, shrinks, compacts, flips a group's
 * writeback and reads stats, and a small pool limit keeps the shrink worker
 * busy.  At the end every offset is drained and the counters must add up:
 * zswpout / zswpin / swpout_zero / swpin_zero / pswpin equal the workers'
 * own tallies and the pool is empty.  Runs on zsmalloc (with and without
 * deferred free) and zblock.  Named test_mt_* so the TSan build runs it.
 * Seeded: ZS_SEED=N.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zswap.h"
#include "zs/harness.h"

#define PS 4096
#define NT 4
#define OWN 160
#define SHARED 24
#define SHARED_BASE 1000000u

static char path[64];
static long iters = 4000;

struct hdr {
	uint64_t offset, version;
	uint32_t tid, kind;
};

/* A page from its header: the pattern after it is a function of the header only. */
static void make_page(unsigned char *p, uint64_t offset, uint64_t version, uint32_t tid)
{
	struct hdr h = { offset, version, tid, (uint32_t)(version % 5) };
	uint64_t x = offset * 0x9e3779b97f4a7c15ULL ^ version ^ ((uint64_t)tid << 40);

	if (h.kind == 0) { /* zero page: bypassed */
		memset(p, 0, PS);
		return;
	}
	memcpy(p, &h, sizeof(h));
	for (size_t k = sizeof(h); k < PS; k++) {
		if (h.kind == 4 || (h.kind == 3 && k > PS / 2)) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[k] = (unsigned char)x;
		} else {
			p[k] = (unsigned char)('a' + (k / 16 + offset + version) % 26);
		}
	}
}

static int page_consistent(const unsigned char *p, uint64_t offset)
{
	static _Thread_local unsigned char want[PS];
	struct hdr h;

	memcpy(&h, p, sizeof(h));
	if (h.offset != offset)
		return 0;
	make_page(want, h.offset, h.version, h.tid);
	return !memcmp(want, p, PS);
}

struct tally {
	uint64_t out, out_zero, in, in_zero, in_disk, eio, wrong, errors;
};

struct worker {
	struct zs_zswap *z;
	uint32_t tid;
	uint64_t seed;
	struct tally t;
};

static atomic_int stop;

static void count_load(struct tally *t, int rc)
{
	if (rc == 0)
		t->in++;
	else if (rc == ZS_ZSWAP_ZERO)
		t->in_zero++;
	else if (rc == ZS_ZSWAP_DISK)
		t->in_disk++;
	else if (rc == -EIO)
		t->eio++; /* an injected backing-file read failure: the page stays */
	else if (rc != -ENOENT)
		t->errors++;
}

static void count_store(struct tally *t, int rc)
{
	if (rc == 0)
		t->out++;
	else if (rc == ZS_ZSWAP_ZERO)
		t->out_zero++;
	else if (rc == -EINVAL)
		t->errors++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct zs_zswap *z = w->z;
	uint64_t ver[OWN] = { 0 };
	int held[OWN] = { 0 }; /* 1: the offset holds version ver[i] */
	unsigned char *page = malloc(PS), *back = malloc(PS);

	for (long it = 0; it < iters; it++) {
		unsigned r = (unsigned)(tu_rand(&w->seed) % 100);
		int i = (int)(tu_rand(&w->seed) % OWN);
		uint64_t off = (uint64_t)w->tid * 10000 + (uint64_t)i;
		unsigned grp = w->tid % 3;
		int rc;

		if (r < 40) {
			ver[i]++;
			make_page(page, off, ver[i], w->tid);
			rc = zs_zswap_store(z, off, page, grp);
			count_store(&w->t, rc);
			held[i] = rc >= 0;
		} else if (r < 70) {
			memset(back, 0xee, PS);
			rc = zs_zswap_load(z, off, back);
			count_load(&w->t, rc);
			if (rc == -EIO && held[i])
				continue;
			if (held[i] && rc >= 0) {
				make_page(page, off, ver[i], w->tid);
				w->t.wrong += memcmp(page, back, PS) != 0;
			} else if (held[i] != (rc >= 0)) {
				w->t.wrong++;
			}
			held[i] = 0;
		} else if (r < 80) {
			rc = zs_zswap_invalidate(z, off);
			w->t.wrong += (rc == 0) != held[i];
			held[i] = 0;
		} else {
			/* Shared offsets: any thread's page, whole. */
			uint64_t soff = SHARED_BASE + tu_rand(&w->seed) % SHARED;

			if (r < 90) {
				make_page(page, soff, tu_rand(&w->seed) % 1000 + 1, w->tid);
				count_store(&w->t, zs_zswap_store(z, soff, page, 0));
			} else if (r < 98) {
				rc = zs_zswap_load(z, soff, back);
				count_load(&w->t, rc);
				if (rc == 0 || rc == ZS_ZSWAP_DISK)
					w->t.wrong += !page_consistent(back, soff);
				else if (rc == ZS_ZSWAP_ZERO)
					w->t.wrong += back[0] != 0 || memcmp(back, back + 1, PS - 1);
			} else {
				zs_zswap_invalidate(z, soff);
			}
		}
	}
	/* Drain what this thread holds. */
	for (int i = 0; i < OWN; i++) {
		uint64_t off = (uint64_t)w->tid * 10000 + (uint64_t)i;
		int rc, tries = 0;

		do {
			rc = zs_zswap_load(z, off, back);
			count_load(&w->t, rc);
		} while (rc == -EIO && held[i] && ++tries < 1000);
		if (held[i]) {
			make_page(page, off, ver[i], w->tid);
			w->t.wrong += rc < 0 || memcmp(page, back, PS) != 0;
		} else {
			w->t.wrong += rc != -ENOENT;
		}
	}
	free(page);
	free(back);
	return NULL;
}

static void *maint_main(void *arg)
{
	struct zs_zswap *z = arg;
	uint64_t seed = 42;
	struct zs_zswap_stats st;

	while (!atomic_load(&stop)) {
		unsigned r = (unsigned)(tu_rand(&seed) % 10);

		if (r < 4)
			zs_zswap_writeback(z, 8);
		else if (r < 6)
			zs_zswap_shrink(z, 16);
		else if (r == 6)
			zs_zswap_compact(z);
		else if (r == 7)
			zs_zswap_group_set(z, 2, ZS_ZSWAP_NO_LIMIT, (int)(tu_rand(&seed) % 2));
		else if (r == 8)
			zs_zswap_get_stats(z, &st, sizeof(st)), (void)zs_zswap_shrink_count(z);
		else
			zs_zswap_wb_inject(z, (int)(tu_rand(&seed) % 2), tu_rand(&seed) % 4, 1);
		usleep(200);
	}
	return NULL;
}

static void run(const char *kind, int deferred, uint64_t seed)
{
	struct zs_zswap_config cfg;
	struct zs_zswap *z;
	struct worker w[NT];
	pthread_t th[NT], mt;
	struct tally sum = { 0 };
	struct zs_zswap_stats st;
	char err[200];
	unsigned char back[PS];

	zs_zswap_config_init(&cfg);
	cfg.backend.kind = kind;
	cfg.deferred_free = deferred;
	cfg.backing_path = path;
	cfg.shrinker_enabled = 1;
	cfg.total_ram = 800 * PS;  /* 10% -> the pool stops at 80 pages: the worker runs */
	cfg.max_pool_percent = 10;
	if (zs_zswap_create(&cfg, &z, err, sizeof(err))) {
		fprintf(stderr, "create: %s\n", err);
		REQUIRE(0);
	}
	atomic_store(&stop, 0);
	REQUIRE(pthread_create(&mt, NULL, maint_main, z) == 0);
	for (int t = 0; t < NT; t++) {
		w[t] = (struct worker){ .z = z, .tid = (uint32_t)t, .seed = seed + (uint64_t)t };
		REQUIRE(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0);
	}
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	atomic_store(&stop, 1);
	pthread_join(mt, NULL);
	zs_zswap_wb_inject(z, 0, UINT64_MAX, 0);
	zs_zswap_wb_inject(z, 1, UINT64_MAX, 0);
	for (uint64_t s = 0; s < SHARED; s++) {
		int rc = zs_zswap_load(z, SHARED_BASE + s, back);

		if (rc == -EIO) /* the shared offsets' stragglers of the last injection */
			rc = zs_zswap_load(z, SHARED_BASE + s, back);

		count_load(&w[0].t, rc);
		if (rc == 0 || rc == ZS_ZSWAP_DISK)
			w[0].t.wrong += !page_consistent(back, SHARED_BASE + s);
	}
	zs_zswap_flush(z);
	for (int t = 0; t < NT; t++) {
		sum.out += w[t].t.out;
		sum.out_zero += w[t].t.out_zero;
		sum.in += w[t].t.in;
		sum.in_zero += w[t].t.in_zero;
		sum.in_disk += w[t].t.in_disk;
		sum.wrong += w[t].t.wrong;
		sum.eio += w[t].t.eio;
		sum.errors += w[t].t.errors;
	}
	zs_zswap_get_stats(z, &st, sizeof(st));
	printf("%s%s: %llu stored, %llu zero, %llu loaded, %llu from disk, %llu written back, "
	       "%llu limit hits, %llu worker passes, %llu reclaim fails, %llu injected read errors\n", kind,
	       deferred ? "+deferred" : "", (unsigned long long)sum.out,
	       (unsigned long long)sum.out_zero, (unsigned long long)sum.in,
	       (unsigned long long)sum.in_disk, (unsigned long long)st.written_back_pages,
	       (unsigned long long)st.pool_limit_hit, (unsigned long long)st.shrink_worker_runs,
	       (unsigned long long)st.reject_reclaim_fail, (unsigned long long)sum.eio);
	CHECK_EQ(sum.wrong, 0);
	/* Injected read failures (-EIO) are the only errors a load may give here. */
	CHECK_EQ(sum.errors, 0);
	CHECK_EQ(st.zswpout, sum.out);
	CHECK_EQ(st.swpout_zero, sum.out_zero);
	CHECK_EQ(st.zswpin, sum.in);
	CHECK_EQ(st.swpin_zero, sum.in_zero);
	CHECK_EQ(st.pswpin, sum.in_disk);
	CHECK_EQ(st.stored_pages, 0);
	CHECK_EQ(st.stored_incompressible_pages, 0);
	CHECK_EQ(st.stored_bytes, 0);
	CHECK_EQ(st.zero_pages, 0);
	CHECK_EQ(st.disk_pages, 0);
	CHECK_EQ(st.pool_pages, 0);
	CHECK_EQ(st.decompress_fail, 0);
	for (unsigned g = 0; g < 3; g++) {
		struct zs_zswap_group_stats gs;

		zs_zswap_group_stats(z, g, &gs, sizeof(gs));
		CHECK_EQ(gs.zswap, 0);
		CHECK_EQ(gs.zswapped, 0);
	}
	zs_zswap_destroy(z);
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_zswap");
	const char *e = getenv("ZS_MT_ITERS");
	int fd;

	if (e)
		iters = atol(e);
	snprintf(path, sizeof(path), "/tmp/zs-mt-zswap-XXXXXX");
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	run("zsmalloc", 0, seed);
	run("zsmalloc", 1, seed + 100);
	run("zblock", 0, seed + 200);
	unlink(path);
	return tu_done();
}
