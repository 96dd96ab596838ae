/*
 * The zram store's streams are built on first use (src/zram/stream.c), and
 * zswap's (src/zswap/stream.c): an empty store holds one, not 2 per CPU; threads that write at once each
 * build their own and every page reads back; a dictionary the caller gave
 * is copied at create, so streams built later compress with it after the
 * caller's buffer is gone; and when a stream cannot be built for lack of
 * memory (zs_zram_stream_inject) the write waits for stream 0 instead of
 * failing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zs/harness.h"
#include "zs/zram.h"
#include "zs/zswap.h"

#define PS 4096

/* Sanitizers' allocators add redzones and quarantine: memory bounds hold only without them. */
#include "sanitizer.h"
#if TU_SANITIZED
#define CHECK_MEM(cond) ((void)0)
#else
#define CHECK_MEM(cond) CHECK(cond)
#endif
#define NT 8
#define PER 64

static void page_of(unsigned char *p, uint64_t key)
{
	/* Compressible: words drawn from a small alphabet. */
	static const char words[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	uint64_t s = key * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i < PS; i += 8)
		memcpy(p + i, &words[(tu_rand(&s) % 16) * 3], 8);
}

static struct zs_zram *mk(const char *comp, unsigned streams, const void *dict, size_t dict_len)
{
	struct zs_zram_config c;
	struct zs_zram *z = NULL;
	zs_zram_config_init_app(&c);
	c.disksize = (uint64_t)NT * PER * PS;
	c.comp = comp;
	c.streams = streams;
	c.comp_dict = dict;
	c.comp_dict_len = dict_len;
	int rc = zs_zram_create(&c, &z, NULL, 0);
	if (rc)
		fprintf(stderr, "create %s: %d\n", comp, rc);
	REQUIRE(!rc && z);
	return z;
}

/* An empty store holds one stream: 8 stores of 32 zstd streams in well under 32 streams' memory. */
static void test_empty_store(void)
{
	struct zs_zram *z[8];
	size_t r0 = zs_process_rss();
	for (int i = 0; i < 8; i++)
		z[i] = mk("zstd", 32, NULL, 0);
	size_t per = (zs_process_rss() - r0) / 8;
	printf("empty store, 32 zstd streams: %zu KiB\n", per >> 10);
	/* Built at create, 32 zstd streams took 3.5 MiB a store here; one takes ~110 KiB. */
	CHECK_MEM(per < (1u << 20));
	for (int i = 0; i < 8; i++)
		zs_zram_destroy(z[i]);
}

struct warg {
	struct zs_zram *z;
	int id;
	long bad;
	pthread_barrier_t *bar;
};

static void *writer(void *p)
{
	struct warg *a = p;
	unsigned char page[PS], back[PS];
	if (a->bar)
		pthread_barrier_wait(a->bar);
	for (int i = 0; i < PER; i++) {
		uint64_t slot = (uint64_t)a->id * PER + (uint64_t)i;
		page_of(page, slot);
		if (zs_zram_write(a->z, slot, page))
			a->bad++;
	}
	for (int i = 0; i < PER; i++) {
		uint64_t slot = (uint64_t)a->id * PER + (uint64_t)i;
		page_of(page, slot);
		if (zs_zram_read(a->z, slot, back, PS) || memcmp(page, back, PS))
			a->bad++;
	}
	return NULL;
}

static long run_writers(struct zs_zram *z)
{
	pthread_t t[NT];
	struct warg a[NT];
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, NT);
	for (int i = 0; i < NT; i++) {
		a[i] = (struct warg){ z, i, 0, &bar };
		REQUIRE(!pthread_create(&t[i], NULL, writer, &a[i]));
	}
	long bad = 0;
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		bad += a[i].bad;
	}
	pthread_barrier_destroy(&bar);
	/* Every page again from this thread, through whichever stream it gets. */
	unsigned char page[PS], back[PS];
	for (uint64_t s = 0; s < (uint64_t)NT * PER; s++) {
		page_of(page, s);
		if (zs_zram_read(z, s, back, PS) || memcmp(page, back, PS))
			bad++;
	}
	return bad;
}

/* Threads at once: each builds a stream on its first write; nothing is lost. */
static void test_threads(void)
{
	const char *comps[] = { "lz4", "zstd", "lzo" };
	for (int c = 0; c < 3; c++) {
		struct zs_zram *z = mk(comps[c], NT, NULL, 0);
		CHECK_EQ(run_writers(z), 0);
		zs_zram_destroy(z);
	}
}

/*
 * The dictionary is copied at create: the caller's buffer is scribbled on
 * and freed before any thread writes, and streams built afterwards still
 * compress and decompress with the dictionary the store was made with (a
 * stream built from the scribbled bytes would write pages that another
 * stream, or this check, cannot read back; ASan sees a use after free).
 */
static void test_dict_copied(void)
{
	size_t len = 4096;
	unsigned char *dict = malloc(len);
	REQUIRE(dict);
	page_of(dict, 12345);
	struct zs_zram *z = mk("zstd", NT, dict, len);
	memset(dict, 0x5a, len);
	free(dict);
	CHECK_EQ(run_writers(z), 0);
	zs_zram_destroy(z);
}

/*
 * No memory for another stream (zs_zram_stream_inject: every build after
 * the first fails as malloc failing would): each write waits for stream 0
 * instead, and all of them succeed, from every thread at once.
 */
static void test_build_fails(void)
{
	struct zs_zram *z = mk("zstd", NT, NULL, 0);
	CHECK_EQ(zs_zram_stream_inject(z, ~0u), 0);
	CHECK_EQ(run_writers(z), 0);
	unsigned failed = zs_zram_stream_inject(z, 0);
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.failed_writes, 0);
	CHECK_EQ(st.failed_reads, 0);
	/* Every thread but the one that got stream 0 tried to build its own. */
	CHECK(failed >= NT - 1);
	printf("stream builds failed: %u, every write and read served by stream 0\n", failed);
	/* Cleared: the next threads build their streams and still read everything back. */
	CHECK_EQ(run_writers(z), 0);
	CHECK_EQ(zs_zram_stream_inject(z, 0), failed);
	zs_zram_destroy(z);
}

/* zswap builds its streams on first use too: an empty one holds one zstd stream, not 2 per CPU. */
static void test_empty_zswap(void)
{
	struct zs_zswap *z[8];
	size_t r0 = zs_process_rss();
	for (int i = 0; i < 8; i++) {
		struct zs_zswap_config c;
		zs_zswap_config_init(&c);
		c.comp = "zstd";
		REQUIRE(!zs_zswap_create(&c, &z[i], NULL, 0));
	}
	size_t per = (zs_process_rss() - r0) / 8;
	printf("empty zswap, zstd: %zu KiB\n", per >> 10);
	/* Built at create, its 4 streams (2 CPUs) took 866 KiB here, 32 would take ~3.5 MiB;
	 * with one, 536 KiB, most of it the zswap's own tables. */
	CHECK_MEM(per < 700u * 1024);
	for (int i = 0; i < 8; i++)
		zs_zswap_destroy(z[i]);
}

/*
 * A store that serves fault handlers (zs_zram_block_signals on, as a
 * region's store is) builds every stream when that is turned on: with every
 * later build made to fail, no thread needs one.
 */
static void test_block_signals_builds_all(void)
{
	struct zs_zram *z = mk("lz4", NT, NULL, 0);
	CHECK_EQ(zs_zram_block_signals(z, 1), 0);
	CHECK_EQ(zs_zram_stream_inject(z, ~0u), 0);
	CHECK_EQ(run_writers(z), 0);
	CHECK_EQ(zs_zram_stream_inject(z, 0), 0);
	zs_zram_destroy(z);
}

int main(void)
{
	test_empty_store();
	test_empty_zswap();
	test_threads();
	test_dict_copied();
	test_build_fails();
	test_block_signals_builds_all();
	return tu_done();
}
