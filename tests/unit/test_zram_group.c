/*
 * Large-folio groups: with group_pages 4 and 16 every slot reads back what
 * was last written to it through single-slot writes (read-modify-write of
 * the group), aligned and unaligned ranges, discards and partial
 * overwrites, checked against a shadow copy after a seeded random run; two
 * threads writing different slots of the same groups lose nothing (the
 * stripe lock); groups compress better than single pages on text-like data;
 * bad group sizes are -EINVAL.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zram.h"

#define PS 4096
#define N 256

static unsigned char shadow[N][PS], buf[16 * PS];

static void page(uint64_t *seed, unsigned char *p, unsigned slot)
{
	unsigned kind = (unsigned)(tu_rand(seed) % 4);
	if (kind == 0) {
		memset(p, (int)(tu_rand(seed) & 0xff), PS);
	} else if (kind == 1) {
		for (int k = 0; k < PS; k++)
			p[k] = (unsigned char)tu_rand(seed);
	} else {
		for (int k = 0; k < PS; k += 64)
			snprintf((char *)p + k, 64, "slot %u line %d %llu ..............................",
				 slot, k / 64, (unsigned long long)(tu_rand(seed) % 50));
	}
}

static void verify(struct zs_zram *z, const char *when)
{
	int bad = 0;
	unsigned char back[PS];
	for (unsigned i = 0; i < N; i++)
		if (zs_zram_read(z, i, back, PS) || memcmp(back, shadow[i], PS))
			bad++;
	/* Ranges too, aligned and not. */
	static unsigned char all[N * PS];
	if (zs_zram_read_range(z, 0, N, all, sizeof(all)) || memcmp(all, shadow, sizeof(all)))
		bad += 1000;
	if (zs_zram_read_range(z, 3, N - 5, all, sizeof(all)) ||
	    memcmp(all, shadow[3], (size_t)(N - 5) * PS))
		bad += 10000;
	if (bad)
		fprintf(stderr, "%s: bad %d\n", when, bad);
	CHECK_EQ(bad, 0);
}

static struct zs_zram *mk(unsigned g, const char *comp)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.group_pages = g;
	cfg.comp = comp;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	CHECK_EQ(zs_zram_slots(z), N);
	CHECK_EQ(zs_zram_page_size(z), PS);
	return z;
}

static void random_run(unsigned g, uint64_t *seed)
{
	struct zs_zram *z = mk(g, "lz4");
	memset(shadow, 0, sizeof(shadow));
	for (int op = 0; op < 3000; op++) {
		unsigned i = (unsigned)(tu_rand(seed) % N), r = (unsigned)(tu_rand(seed) % 10);
		if (r < 5) {
			page(seed, shadow[i], i);
			CHECK_EQ(zs_zram_write(z, i, shadow[i]), 0);
		} else if (r < 7) {
			CHECK_EQ(zs_zram_discard(z, i), 0);
			memset(shadow[i], 0, PS);
		} else if (r < 9) {
			unsigned n = 1 + (unsigned)(tu_rand(seed) % (2 * g + 3));
			if (i + n > N)
				n = N - i;
			for (unsigned k = 0; k < n; k++)
				page(seed, shadow[i + k], i + k);
			CHECK_EQ(zs_zram_write_range(z, i, n, shadow[i]), 0);
		} else {
			unsigned char back[PS];
			CHECK_EQ(zs_zram_read(z, i, back, PS), 0);
			CHECK(!memcmp(back, shadow[i], PS));
		}
	}
	verify(z, "random run");
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK(st.pages_stored <= N / g);
	/* Discard everything slot by slot: the groups go away. */
	for (unsigned i = 0; i < N; i++)
		CHECK_EQ(zs_zram_discard(z, i), 0);
	memset(shadow, 0, sizeof(shadow));
	verify(z, "all discarded");
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.pages_stored, 0);
	CHECK_EQ(st.compr_data_size, 0);
	CHECK_EQ(zs_zram_read(z, N, buf, PS), -EINVAL);
	CHECK_EQ(zs_zram_write(z, N, buf), -EINVAL);
	zs_zram_destroy(z);
}

static struct zs_zram *shared;
static void *writer(void *arg)
{
	unsigned id = (unsigned)(long)arg;
	unsigned char p[PS];
	for (int round = 0; round < 20; round++)
		for (unsigned i = id; i < N; i += 2) {
			memset(p, (int)(i + (unsigned)round * 7) & 0xff, PS);
			p[0] ^= 0x5a; /* not same-filled */
			zs_zram_write(shared, i, p);
		}
	return NULL;
}

static void threads(void)
{
	shared = mk(16, "lz4");
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	int bad = 0;
	for (unsigned i = 0; i < N; i++) {
		unsigned char want[PS], back[PS];
		memset(want, (int)(i + 19 * 7) & 0xff, PS);
		want[0] ^= 0x5a;
		if (zs_zram_read(shared, i, back, PS) || memcmp(back, want, PS))
			bad++;
	}
	CHECK_EQ(bad, 0);
	zs_zram_destroy(shared);
}

static void ratio(uint64_t *seed)
{
	uint64_t compr[3];
	unsigned gs[3] = { 1, 4, 16 };
	for (unsigned k = 0; k < N; k++)
		for (int c = 0; c < PS; c += 64)
			snprintf((char *)shadow[k] + c, 64, "entry %u/%d value=%llu status=ok .......",
				 k, c, (unsigned long long)(tu_rand(seed) % 1000));
	for (int v = 0; v < 3; v++) {
		struct zs_zram *z = mk(gs[v], "zstd");
		CHECK_EQ(zs_zram_write_range(z, 0, N, shadow), 0);
		verify(z, "ratio");
		struct zs_zram_stats st;
		zs_zram_get_stats(z, &st, sizeof(st));
		compr[v] = st.compr_data_size;
		printf("group %2u: compr_data_size %llu mem_used_total %llu\n", gs[v],
		       (unsigned long long)st.compr_data_size, (unsigned long long)st.mem_used_total);
		zs_zram_destroy(z);
	}
	CHECK(compr[1] < compr[0]);
	CHECK(compr[2] < compr[1]);
}

/* Groups and writeback together: whole groups move to the file and read back per slot. */
static void with_writeback(uint64_t *seed)
{
	char path[] = "/tmp/zs_group_wb_XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.group_pages = 4;
	cfg.backing_path = path;
	cfg.writeback_compressed = 1;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	for (unsigned i = 0; i < N; i++) {
		page(seed, shadow[i], i);
		CHECK_EQ(zs_zram_write(z, i, shadow[i]), 0);
	}
	CHECK(zs_zram_mark_idle(z, 0) > 0);
	struct zs_zram_wb_result r;
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	CHECK(r.written > 0);
	verify(z, "groups written back");
	/* A partial overwrite of a written-back group: RMW reads it from the file. */
	page(seed, shadow[5], 5);
	CHECK_EQ(zs_zram_write(z, 5, shadow[5]), 0);
	CHECK_EQ(zs_zram_discard(z, 9), 0);
	memset(shadow[9], 0, PS);
	verify(z, "after partial overwrite of written-back groups");
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK(st.bd_reads > 0);
	zs_zram_destroy(z);
	unlink(path);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zram_group");
	random_run(4, &seed);
	random_run(16, &seed);
	threads();
	ratio(&seed);
	with_writeback(&seed);

	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	unsigned bad[] = { 3, 5, 32, 17 };
	for (int i = 0; i < 4; i++) {
		cfg.group_pages = bad[i];
		CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	}
	cfg.page_size = 8192;
	cfg.group_pages = 16; /* 128 KiB group: over 64 KiB */
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.group_pages = 8;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	zs_zram_destroy(z);
	cfg.page_size = 4096;
	cfg.group_pages = 1;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	zs_zram_destroy(z);
	return tu_done();
}
