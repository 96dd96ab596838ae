/*
 * Writeback to a backing file: idle / huge / huge_idle / incompressible
 * slots move to the file in batches and read back byte for byte; discard
 * and overwrite after writeback free the blocks (bd_count, holes punched)
 * and never let a slot see another's data; the writeback limit stops at its
 * budget with -EIO; compressed writeback stores fewer bytes; injected and
 * real file errors (/dev/full) are reported and lose nothing; bad configs
 * and calls are -EINVAL.  Seeded (ZS_SEED).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define PS 4096
#define N 512

static unsigned char want[N][PS], back[PS];
static char path[64];

/* Page kinds by index: every 7th same-filled, every 5th random (huge), else text-like. */
static void fill(uint64_t *seed, int i, unsigned gen)
{
	if (i % 7 == 0) {
		memset(want[i], (int)(i + gen) & 0xff, PS);
	} else if (i % 5 == 0) {
		for (int k = 0; k < PS; k++)
			want[i][k] = (unsigned char)tu_rand(seed);
	} else {
		for (int k = 0; k < PS; k += 64)
			snprintf((char *)want[i] + k, 64, "slot %d gen %u value %llu ..................",
				 i, gen, (unsigned long long)(tu_rand(seed) % 1000));
	}
}

static void verify_all(struct zs_zram *z, const char *when)
{
	int bad = 0;
	for (int i = 0; i < N; i++) {
		memset(back, 0xee, PS);
		if (zs_zram_read(z, (uint64_t)i, back, PS) || memcmp(back, want[i], PS))
			bad++;
	}
	if (bad)
		fprintf(stderr, "verify %s: %d bad slots\n", when, bad);
	CHECK_EQ(bad, 0);
}

static struct zs_zram *mk(int compressed, unsigned batch, const char *recomp)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.backing_path = path;
	cfg.writeback_compressed = compressed;
	cfg.writeback_batch_size = batch;
	cfg.recomp = recomp;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	return z;
}

static unsigned long count_flag(struct zs_zram *z, unsigned flag)
{
	unsigned long n = 0;
	for (int i = 0; i < N; i++) {
		unsigned f;
		zs_zram_slot_info(z, (uint64_t)i, NULL, &f, NULL);
		n += !!(f & flag);
	}
	return n;
}

static uint64_t file_blocks(void)
{
	struct stat st;
	return stat(path, &st) ? 0 : (uint64_t)st.st_blocks;
}

static void basic(uint64_t *seed, int compressed)
{
	struct zs_zram *z = mk(compressed, compressed ? 7 : 0, NULL);
	struct zs_zram_stats st;
	struct zs_zram_wb_result r;
	unsigned long same = 0, huge = 0;

	for (int i = 0; i < N; i++) {
		fill(seed, i, 0);
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, want[i]), 0);
		same += i % 7 == 0;
		huge += i % 7 && i % 5 == 0;
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	uint64_t mem_before = st.mem_used_total;
	CHECK_EQ(st.huge_pages, huge);

	/* Nothing idle yet: nothing moves.  Huge moves only the huge ones. */
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	CHECK_EQ(r.written, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 10, &r), 0);
	CHECK_EQ(r.written, 10);
	CHECK_EQ(count_flag(z, ZS_ZRAM_F_WB), 10);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_count, 10);
	CHECK_EQ(st.bd_writes, 10);
	CHECK_EQ(st.huge_pages, huge - 10);
	verify_all(z, "after huge writeback");
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_reads, 10);

	/* huge_idle: idle only the first half, then only huge+idle move. */
	CHECK(zs_zram_mark_idle(z, 0) > 0);
	for (int i = N / 2; i < N; i++)
		CHECK_EQ(zs_zram_read(z, (uint64_t)i, back, PS), 0); /* access clears idle */
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE_IDLE, 0, &r), 0);
	for (int i = 0; i < N; i++) {
		unsigned f;
		zs_zram_slot_info(z, (uint64_t)i, NULL, &f, NULL);
		if (f & ZS_ZRAM_F_WB)
			CHECK(i % 5 == 0 && i % 7);
	}
	/* Everything idle: every non-same slot moves; compr_data_size drops to 0. */
	zs_zram_mark_idle(z, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_count, N - same);
	CHECK_EQ(st.compr_data_size, 0);
	CHECK_EQ(st.pages_stored, N);
	CHECK_EQ(st.same_pages, same);
	CHECK(st.mem_used_total < mem_before);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0); /* idle cleared: none left */
	CHECK_EQ(r.written, 0);
	verify_all(z, "after idle writeback");
	uint64_t blocks_full = file_blocks();
	printf("compressed %d: %llu pages on file, %llu KiB allocated, mem %llu -> %llu\n",
	       compressed, (unsigned long long)st.bd_count,
	       (unsigned long long)blocks_full / 2, (unsigned long long)mem_before,
	       (unsigned long long)st.mem_used_total);

	/* Discard and overwrite after writeback: blocks freed, new data read, no mix-up. */
	int discarded = 0;
	for (int i = 1; i < N; i += 3) {
		if (i % 7 == 0)
			continue;
		CHECK_EQ(zs_zram_discard(z, (uint64_t)i), 0);
		memset(want[i], 0, PS);
		discarded++;
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_count, N - same - (unsigned long)discarded);
	CHECK(file_blocks() < blocks_full); /* holes punched */
	for (int i = 2; i < N; i += 3) {
		fill(seed, i, 1);
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, want[i]), 0);
	}
	verify_all(z, "after discard/overwrite");
	/* Write the new versions back into the freed blocks; everything still matches. */
	zs_zram_mark_idle(z, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	CHECK(r.written > 0);
	verify_all(z, "after second writeback");
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK(st.bd_count <= N);
	zs_zram_reset(z);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_count, 0);
	CHECK_EQ(st.pages_stored, 0);
	zs_zram_destroy(z);
}

static void incompressible_and_limit(uint64_t *seed)
{
	/* lz4 -> lz4 recompression never gains: every tried slot becomes incompressible. */
	struct zs_zram *z = mk(1, 16, "lz4");
	struct zs_zram_wb_result r;
	struct zs_zram_stats st;
	for (int i = 0; i < N; i++) {
		fill(seed, i, 2);
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, want[i]), 0);
	}
	struct zs_zram_recomp_result rr;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 100, &rr), 0);
	CHECK(rr.incompressible > 0);
	unsigned long inc = count_flag(z, ZS_ZRAM_F_INCOMPRESSIBLE);
	CHECK_EQ(inc, rr.incompressible);

	int en;
	uint64_t left;
	CHECK_EQ(zs_zram_set_writeback_limit(z, 1, 5), 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_INCOMPRESSIBLE, 0, &r), -EIO);
	CHECK_EQ(r.written, 5);
	CHECK_EQ(zs_zram_get_writeback_limit(z, &en, &left), 0);
	CHECK_EQ(en, 1);
	CHECK_EQ(left, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_INCOMPRESSIBLE, 0, &r), -EIO);
	CHECK_EQ(r.written, 0);
	CHECK_EQ(zs_zram_set_writeback_limit(z, 0, 0), 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_INCOMPRESSIBLE, 0, &r), 0);
	CHECK_EQ(count_flag(z, ZS_ZRAM_F_WB), inc);
	CHECK_EQ(count_flag(z, ZS_ZRAM_F_INCOMPRESSIBLE), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.incompressible_pages, 0);
	CHECK_EQ(st.bd_count, inc);
	verify_all(z, "incompressible");
	zs_zram_destroy(z);
}

static void errors(uint64_t *seed)
{
	struct zs_zram *z = mk(0, 8, NULL);
	struct zs_zram_wb_result r;
	struct zs_zram_stats st;
	for (int i = 0; i < N; i++) {
		fill(seed, i, 3);
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, want[i]), 0);
	}
	zs_zram_mark_idle(z, 0);
	/* Write 11 pages fine, then the file fails: 11 committed, the rest keep their objects. */
	zs_zram_wb_inject(z, 0, 11, 1);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), -EIO);
	CHECK_EQ(r.written, 11);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_count, 11);
	CHECK_EQ(st.bd_writes, 11);
	verify_all(z, "after failed writeback");
	/* Read errors that outlast the retries (3 tries) surface as -EIO and failed_reads; the
	 * data is still there afterwards.  test_zram_faults.c covers retries and checksums. */
	int wbslot = -1;
	for (int i = 0; i < N && wbslot < 0; i++) {
		unsigned f;
		zs_zram_slot_info(z, (uint64_t)i, NULL, &f, NULL);
		if (f & ZS_ZRAM_F_WB)
			wbslot = i;
	}
	REQUIRE(wbslot >= 0);
	zs_zram_wb_inject(z, 1, 0, 3);
	CHECK_EQ(zs_zram_read(z, (uint64_t)wbslot, back, PS), -EIO);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.failed_reads, 1);
	CHECK_EQ(zs_zram_read(z, (uint64_t)wbslot, back, PS), 0);
	CHECK(!memcmp(back, want[wbslot], PS));
	zs_zram_wb_inject(z, 0, UINT64_MAX, 0);
	zs_zram_mark_idle(z, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	verify_all(z, "after retry");
	zs_zram_destroy(z);

	/* /dev/full (every write ENOSPC) is a character device: refused at create. */
	if (access("/dev/full", R_OK | W_OK) == 0) {
		struct zs_zram_config cfg;
		zs_zram_config_init(&cfg);
		cfg.disksize = (uint64_t)N * PS;
		cfg.backing_path = "/dev/full";
		CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
		CHECK(z == NULL);
	}
}

static void bad_config(void)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.writeback_batch_size = 4;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL); /* no backing file */
	cfg.writeback_batch_size = 0;
	cfg.writeback_compressed = 1;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.backing_path = path;
	cfg.writeback_compressed = 2;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.writeback_compressed = 0;
	cfg.writeback_batch_size = ZS_ZRAM_MAX_WB_BATCH + 1;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.writeback_batch_size = ZS_ZRAM_MAX_WB_BATCH;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	CHECK_EQ(zs_zram_writeback(z, (enum zs_zram_wb_type)0, 0, NULL), -EINVAL);
	CHECK_EQ(zs_zram_writeback(z, (enum zs_zram_wb_type)5, 0, NULL), -EINVAL);
	CHECK_EQ(zs_zram_set_writeback_limit(z, 2, 1), -EINVAL);
	CHECK_EQ(zs_zram_set_writeback_limit(z, -1, 1), -EINVAL);
	/* pages takes the whole of 0..UINT64_MAX, and get returns it as set. */
	int en = -1;
	uint64_t left = 0;
	CHECK_EQ(zs_zram_set_writeback_limit(z, 1, UINT64_MAX), 0);
	CHECK_EQ(zs_zram_get_writeback_limit(z, &en, &left), 0);
	CHECK(en == 1 && left == UINT64_MAX);
	zs_zram_destroy(z);
	/* A socket is refused like a FIFO (-EINVAL), never connected to. */
	char sp[sizeof(path) + 8];
	snprintf(sp, sizeof(sp), "%s.sock", path);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	REQUIRE(s >= 0 && strlen(sp) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, sp, strlen(sp) + 1);
	unlink(sp);
	REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cfg.backing_path = sp;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	CHECK(z == NULL);
	close(s);
	unlink(sp);
	cfg.backing_path = path;
	cfg.backing_path = "/nonexistent/zs-backing";
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -ENOENT);
	cfg.backing_path = "/tmp";
	CHECK(zs_zram_create(&cfg, &z, NULL, 0) < 0);
	cfg.backing_path = NULL;
	cfg.writeback_batch_size = 0;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, NULL), -EINVAL);
	CHECK_EQ(zs_zram_set_writeback_limit(z, 1, 1), -EINVAL);
	CHECK_EQ(zs_zram_get_writeback_limit(z, &en, &left), -EINVAL);
	zs_zram_destroy(z);
}

/*
 * docs/zram.md, Writeback: a regular backing file is grown sparse to the disk
 * size (taking space only for blocks in use); idle marking skips written-back
 * slots and recompression skips them (their bytes stay on the file, as they
 * were).  Half the slots are written back, then every slot is marked idle and
 * recompressed: only the slots still in memory are counted or touched.
 */
static void wb_slots_skipped(uint64_t *seed)
{
	struct zs_zram_wb_result r;
	struct zs_zram_recomp_result rr;
	struct zs_zram_stats st;
	struct stat fs;
	unsigned long same = 0, inmem = 0;

	REQUIRE(truncate(path, 0) == 0);
	struct zs_zram *z = mk(0, 0, "zstd");
	REQUIRE(stat(path, &fs) == 0);
	CHECK_EQ((uint64_t)fs.st_size, (uint64_t)N * PS);
	CHECK((uint64_t)fs.st_blocks * 512 < (uint64_t)N * PS / 8); /* sparse */
	for (int i = 0; i < N; i++) {
		fill(seed, i, 3);
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, want[i]), 0);
		same += i % 7 == 0;
	}
	/* Mark the first half idle (every second slot read back: access clears idle), then
	 * write back what is idle. */
	CHECK(zs_zram_mark_idle(z, 0) > 0);
	for (int i = N / 2; i < N; i++)
		CHECK_EQ(zs_zram_read(z, (uint64_t)i, back, PS), 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	unsigned long wb = count_flag(z, ZS_ZRAM_F_WB);
	CHECK(wb > 0 && wb == r.written);
	for (int i = 0; i < N; i++)
		inmem += i % 7 != 0;
	inmem -= wb;
	/* Idle marking: neither written-back nor same-filled slots are marked. */
	CHECK_EQ(zs_zram_mark_idle(z, 0), (long)inmem);
	for (int i = 0; i < N; i++) {
		unsigned f;
		zs_zram_slot_info(z, (uint64_t)i, NULL, &f, NULL);
		if (f & ZS_ZRAM_F_WB)
			CHECK(!(f & ZS_ZRAM_F_IDLE));
	}
	/* Recompression: only slots in memory are scanned; written-back ones keep their
	 * flags, priority 0 and their block. */
	zs_zram_get_stats(z, &st, sizeof(st));
	uint64_t reads0 = st.bd_reads, count0 = st.bd_count;
	CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &rr), 0);
	CHECK_EQ(rr.scanned, inmem);
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK_EQ(st.bd_reads, reads0);
	CHECK_EQ(st.bd_count, count0);
	CHECK_EQ(count_flag(z, ZS_ZRAM_F_WB), wb);
	for (int i = 0; i < N; i++) {
		unsigned f, prio = 9;
		zs_zram_slot_info(z, (uint64_t)i, NULL, &f, &prio);
		if (f & ZS_ZRAM_F_WB)
			CHECK(prio == 0 && !(f & ZS_ZRAM_F_INCOMPRESSIBLE));
	}
	verify_all(z, "after idle marking and recompression over written-back slots");
	printf("written back %lu of %d (%lu same-filled), %lu in memory recompression-scanned\n",
	       wb, N, same, rr.scanned);
	zs_zram_destroy(z);
}

int main(void)
{
	uint64_t seed = tu_seed("test_zram_wb");
	snprintf(path, sizeof(path), "/tmp/zs_wb_XXXXXX");
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	basic(&seed, 0);
	basic(&seed, 1);
	incompressible_and_limit(&seed);
	errors(&seed);
	bad_config();
	wb_slots_skipped(&seed);
	unlink(path);
	return tu_done();
}
