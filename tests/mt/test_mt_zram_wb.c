/*
 * Writeback under concurrency (built to run under TSan too): owner threads
 * write, read back, overwrite and discard their own stripes of slots while
 * a maintenance thread keeps marking idle and writing back (idle and huge,
 * plain and compressed stores, with small batches so slots change between
 * a batch's copy, write and commit), and a foreign reader reads any slot.
 *
 * Every page names its slot and version and carries a checksum, so any
 * reader can tell a page of another slot or a torn one; owners know exactly
 * what each of their slots holds, so every owner read and the final sweep
 * compare byte for byte: nothing lost, nothing mixed up.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zram.h"

#define PS 4096
#define NSLOTS 512
#define OWNERS 2

#include "sanitizer.h"
#define ITERS (TU_TSAN ? 1500 : 6000)

static struct zs_zram *z;
static _Atomic int stop;
static _Atomic long foreign_bad, owner_bad, wb_written;
static uint32_t version[NSLOTS]; /* owner-private: 0 = discarded (zeros) */
static uint64_t base_seed;

/* Deterministic page for (slot, version): random (huge) or text-like, with a checksum. */
static void make(unsigned char *p, uint32_t slot, uint32_t ver)
{
	uint64_t s = base_seed ^ ((uint64_t)slot << 32) ^ ver;
	memset(p, 0, PS);
	if (!ver)
		return;
	if (ver % 4 == 0) {
		for (int k = 16; k < PS; k++)
			p[k] = (unsigned char)tu_rand(&s);
	} else {
		for (int k = 16; k + 48 <= PS; k += 48)
			snprintf((char *)p + k, 48, "s%u v%u %llu .........................", slot, ver,
				 (unsigned long long)(tu_rand(&s) % 100));
	}
	uint32_t sum = 0;
	for (int k = 16; k < PS; k++)
		sum = sum * 31 + p[k];
	memcpy(p, &slot, 4);
	memcpy(p + 4, &ver, 4);
	memcpy(p + 8, &sum, 4);
}

/* A page is either all zeros or a valid page of `slot`. */
static int plausible(const unsigned char *p, uint32_t slot)
{
	uint32_t s, v, sum, calc = 0;
	memcpy(&s, p, 4);
	memcpy(&v, p + 4, 4);
	memcpy(&sum, p + 8, 4);
	if (!s && !v && !sum) {
		for (int k = 0; k < PS; k++)
			if (p[k])
				return 0;
		return 1;
	}
	for (int k = 16; k < PS; k++)
		calc = calc * 31 + p[k];
	return s == slot && calc == sum;
}

static void *owner(void *arg)
{
	int id = (int)(long)arg;
	uint64_t s = base_seed + (uint64_t)id;
	unsigned char page[PS], back[PS];

	for (int it = 0; it < ITERS; it++) {
		uint32_t slot = (uint32_t)(id + OWNERS * (tu_rand(&s) % (NSLOTS / OWNERS)));
		unsigned op = (unsigned)(tu_rand(&s) % 10);
		if (op < 4) {
			make(page, slot, version[slot] + 1);
			if (zs_zram_write(z, slot, page) == 0)
				version[slot]++;
			else
				atomic_fetch_add(&owner_bad, 1);
		} else if (op == 4) {
			zs_zram_discard(z, slot);
			version[slot] = 0;
		} else {
			make(page, slot, version[slot]);
			if (zs_zram_read(z, slot, back, PS) || memcmp(back, page, PS))
				atomic_fetch_add(&owner_bad, 1);
		}
	}
	return NULL;
}

static void *foreign(void *arg)
{
	(void)arg;
	uint64_t s = base_seed ^ 0xf00;
	unsigned char back[PS];
	while (!atomic_load(&stop)) {
		uint32_t slot = (uint32_t)(tu_rand(&s) % NSLOTS);
		if (zs_zram_read(z, slot, back, PS) || !plausible(back, slot))
			atomic_fetch_add(&foreign_bad, 1);
	}
	return NULL;
}

static void *maintenance(void *arg)
{
	(void)arg;
	unsigned round = 0;
	while (!atomic_load(&stop)) {
		struct zs_zram_wb_result r;
		zs_zram_mark_idle(z, 0);
		int rc = zs_zram_writeback(z, round % 3 == 2 ? ZS_ZRAM_WB_HUGE : ZS_ZRAM_WB_IDLE,
					   round % 2 ? 64 : 0, &r);
		if (rc)
			atomic_fetch_add(&owner_bad, 1000000);
		atomic_fetch_add(&wb_written, (long)r.written);
		round++;
	}
	return NULL;
}

static void run(int compressed, const char *path)
{
	struct zs_zram_config cfg;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)NSLOTS * PS;
	cfg.backing_path = path;
	cfg.writeback_batch_size = 4;
	cfg.writeback_compressed = compressed;
	cfg.comp = compressed ? "zstd" : "lz4";
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	memset(version, 0, sizeof(version));
	atomic_store(&stop, 0);
	atomic_store(&wb_written, 0);

	pthread_t ow[OWNERS], fr, mt;
	for (long i = 0; i < OWNERS; i++)
		pthread_create(&ow[i], NULL, owner, (void *)i);
	pthread_create(&fr, NULL, foreign, NULL);
	pthread_create(&mt, NULL, maintenance, NULL);
	for (int i = 0; i < OWNERS; i++)
		pthread_join(ow[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(fr, NULL);
	pthread_join(mt, NULL);

	/* Final sweep, and one more full writeback then sweep again. */
	unsigned char page[PS], back[PS];
	long bad = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < NSLOTS; i++) {
			make(page, i, version[i]);
			if (zs_zram_read(z, i, back, PS) || memcmp(back, page, PS))
				bad++;
		}
		zs_zram_mark_idle(z, 0);
		CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, NULL), 0);
	}
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	printf("compressed %d: %ld pages written back during the run, bd_count %llu bd_reads %llu "
	       "bd_writes %llu\n", compressed, atomic_load(&wb_written),
	       (unsigned long long)st.bd_count, (unsigned long long)st.bd_reads,
	       (unsigned long long)st.bd_writes);
	CHECK(atomic_load(&wb_written) > 0);
	CHECK(st.bd_reads > 0);
	CHECK_EQ(bad, 0);
	CHECK_EQ(atomic_load(&owner_bad), 0);
	CHECK_EQ(atomic_load(&foreign_bad), 0);
	CHECK_EQ(st.failed_reads, 0);
	zs_zram_destroy(z);
}

int main(void)
{
	base_seed = tu_seed("test_mt_zram_wb");
	char path[] = "/tmp/zs_mt_wb_XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	run(0, path);
	run(1, path);
	unlink(path);
	return tu_done();
}
