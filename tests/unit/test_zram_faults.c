/*
 * The zram store under faults (backing-file errors and discards at the
 * memory limit, store side):
 *   - backing paths the store cannot write and read back are refused at
 *     create, with a message naming the path and the reason: /dev/null,
 *     /dev/zero, a symlink to /dev/null, a directory, a FIFO, a missing
 *     path, a read-only file and (when this process may mount) a file on a
 *     read-only mount.  "Read-only file" here is a regular file with no
 *     write permission bit (mode 0400): root could open it read-write, so
 *     the store refuses it by its mode, which is what this test checks;
 *     the read-only mount checks the open(O_RDWR) refusal (-EROFS).  When a
 *     loop device can be set up, a block device backs a store (pages read
 *     back right) and one claimed exclusively elsewhere is refused (-EBUSY).
 *   - written-back blocks are checksummed: bytes changed in the file under
 *     the store read -EIO (buffer zeroed), counted in bd_csum_errors,
 *     bd_read_retries, bd_read_errors and failed_reads; pages never written
 *     back are untouched by any backing fault;
 *   - a transient injected read error is retried and returns the right
 *     bytes; a persistent one is -EIO until it clears;
 *   - a grouped store keeps working when a group cannot be read back: a
 *     write or discard of one slot succeeds, the group's other slots read
 *     -EIO (never zeros or other bytes) until written or discarded;
 *   - a discard of part of a group never fails for lack of memory (at
 *     mem_limit, and with the pool's page allocations failing);
 *   - range calls report a failed part instead of returning 0;
 *   - threads: a writer/discarder, a reader and a maintainer (writeback, read
 *     failures switched on and off) on a grouped store: every read is the
 *     slot's own page, zeros or -EIO, never other bytes.
 * Seeded (ZS_SEED).  Uses /tmp for its files.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/loop.h>

#include "testutil.h"
#include "zs/harness.h"
#include "zs/zram.h"

#define PS 4096
#define N 64

static unsigned char want[N][PS], back[N * PS];
static char dir[64], path[128];
static uint64_t seed;

static void rnd_page(unsigned char *p)   /* incompressible: stored huge */
{
	for (int k = 0; k < PS; k += 8) {
		uint64_t x = tu_rand(&seed);
		memcpy(p + k, &x, 8);
	}
}

static void text_page(unsigned char *p, int i)   /* compresses well: never huge */
{
	for (int k = 0; k < PS; k += 64)
		snprintf((char *)p + k, 64, "slot %d value %llu ..............................", i,
			 (unsigned long long)(tu_rand(&seed) % 1000));
}

static void new_file(void)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	close(fd);
}

static struct zs_zram *mk(const char *backing, unsigned group, int compressed, uint64_t limit)
{
	struct zs_zram_config cfg;
	struct zs_zram *z = NULL;
	char err[256];
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.backing_path = backing;
	cfg.group_pages = group;
	cfg.writeback_compressed = compressed;
	cfg.mem_limit = limit;
	int rc = zs_zram_create(&cfg, &z, err, sizeof err);
	if (rc)
		fprintf(stderr, "create: %d %s\n", rc, err);
	REQUIRE(rc == 0 && z);
	CHECK(err[0] == 0);
	return z;
}

static struct zs_zram_stats stats(struct zs_zram *z)
{
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	return st;
}

/* ---- refusal at create ---- */

static void refused(const char *p, unsigned group, int want_rc, const char *reason)
{
	struct zs_zram_config cfg;
	struct zs_zram *z = (struct zs_zram *)&cfg;   /* must come back NULL */
	char err[512];
	zs_zram_config_init(&cfg);
	cfg.disksize = 16 * PS;
	cfg.backing_path = p;
	cfg.group_pages = group;
	int rc = zs_zram_create(&cfg, &z, err, sizeof err);
	CHECK_EQ(rc, want_rc);
	CHECK(z == NULL);
	if (!strstr(err, p) || !strstr(err, reason)) {
		fprintf(stderr, "refusal of %s: message \"%s\" lacks the path or \"%s\"\n", p, err,
			reason);
		CHECK(0);
	}
	z = (struct zs_zram *)&cfg;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), want_rc);   /* same code without the message */
	CHECK(z == NULL);
}

static void ro_mount(void)
{
	char mnt[128], f[160];
	snprintf(mnt, sizeof mnt, "%s/ro", dir);
	snprintf(f, sizeof f, "%s/file", mnt);
	REQUIRE(mkdir(mnt, 0700) == 0);
	if (mount("none", mnt, "tmpfs", 0, "size=64k")) {
		printf("read-only mount: skipped (mount: %s)\n", strerror(errno));
		rmdir(mnt);
		return;
	}
	int fd = open(f, O_CREAT | O_RDWR, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	if (mount("none", mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0)
		refused(f, 0, -EROFS, "read-only file system");
	else
		printf("read-only remount: skipped (%s)\n", strerror(errno));
	CHECK(umount2(mnt, MNT_DETACH) == 0);
	rmdir(mnt);
}

/* A loop device over a file of `bytes`: a block device to back a store. */
static void block_device(void)
{
	char dev[32], f[160];
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		printf("block device: skipped (/dev/loop-control: %s)\n", strerror(errno));
		return;
	}
	int n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	snprintf(dev, sizeof dev, "/dev/loop%d", n);
	snprintf(f, sizeof f, "%s/loop.img", dir);
	int ff = open(f, O_CREAT | O_RDWR, 0600);
	REQUIRE(ff >= 0 && ftruncate(ff, (off_t)N * PS) == 0);
	int lfd = n >= 0 ? open(dev, O_RDWR | O_CLOEXEC) : -1;
	if (lfd < 0 || ioctl(lfd, LOOP_SET_FD, ff)) {
		printf("block device: skipped (%s: %s)\n", dev, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		close(ff);
		unlink(f);
		return;
	}
	close(ff);
	struct zs_zram *z = mk(dev, 0, 0, 0);
	struct zs_zram_wb_result r;
	int bad = 0;
	for (int i = 0; i < N; i++) {
		rnd_page(want[i]);
		REQUIRE(zs_zram_write(z, (uint64_t)i, want[i]) == 0);
	}
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &r), 0);
	CHECK_EQ(r.written, N);
	for (int i = 0; i < N; i++)
		bad += zs_zram_read(z, (uint64_t)i, back, PS) || memcmp(back, want[i], PS);
	CHECK_EQ(bad, 0);
	/* The store holds it exclusively: a second store on the same device is refused. */
	refused(dev, 0, -EBUSY, "in use");
	zs_zram_destroy(z);
	/* Claimed by someone else (here: this test's exclusive open): refused too. */
	int ex = open(dev, O_RDWR | O_EXCL | O_CLOEXEC);
	CHECK(ex >= 0);
	refused(dev, 0, -EBUSY, "in use");
	if (ex >= 0)
		close(ex);
	ioctl(lfd, LOOP_CLR_FD, 0);
	close(lfd);
	unlink(f);
}

static void refusals(void)
{
	char p[160];

	refused("/dev/null", 0, -EINVAL, "character device");
	refused("/dev/zero", 0, -EINVAL, "character device");
	refused("/dev/zero", 4, -EINVAL, "character device");   /* through the group store */
	snprintf(p, sizeof p, "%s/null-link", dir);
	REQUIRE(symlink("/dev/null", p) == 0);
	refused(p, 0, -EINVAL, "character device");
	unlink(p);
	refused(dir, 0, -EINVAL, "directory");
	snprintf(p, sizeof p, "%s/fifo", dir);
	REQUIRE(mkfifo(p, 0600) == 0);
	refused(p, 0, -EINVAL, "FIFO");   /* would hang here if the FIFO were opened */
	unlink(p);
	snprintf(p, sizeof p, "%s/missing/x", dir);
	refused(p, 0, -ENOENT, "No such file");
	snprintf(p, sizeof p, "%s/ro-file", dir);
	int fd = open(p, O_CREAT | O_RDWR, 0400);
	REQUIRE(fd >= 0);
	close(fd);
	refused(p, 0, -EACCES, "read-only");
	unlink(p);
	ro_mount();
	block_device();
	/* A regular file is accepted, with an empty message. */
	new_file();
	zs_zram_destroy(mk(path, 0, 0, 0));
	zs_zram_destroy(mk(path, 4, 0, 0));
}

/* ---- checksums, retries ---- */

/* Slots 0..N/2-1 incompressible (written back as HUGE), the rest text (stay in memory). */
static struct zs_zram *filled(unsigned group, int compressed)
{
	new_file();
	struct zs_zram *z = mk(path, group, compressed, 0);
	for (int i = 0; i < N; i++) {
		if (i < N / 2)
			rnd_page(want[i]);
		else
			text_page(want[i], i);
		REQUIRE(zs_zram_write(z, (uint64_t)i, want[i]) == 0);
	}
	return z;
}

static int bad_slots(struct zs_zram *z, int from, int to, int *errs)
{
	int bad = 0;
	*errs = 0;
	for (int i = from; i < to; i++) {
		memset(back, 0xee, PS);
		int rc = zs_zram_read(z, (uint64_t)i, back, PS);
		if (rc) {
			(*errs)++;
			for (int k = 0; k < PS; k++)
				bad += back[k] != 0;   /* a failed read leaves zeros, nothing else */
		} else {
			bad += memcmp(back, want[i], PS) != 0;
		}
	}
	return bad;
}

static void corrupt(uint64_t off, size_t len)
{
	unsigned char junk[PS];
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	for (uint64_t o = off; o < off + len; o += PS) {
		rnd_page(junk);
		REQUIRE(pwrite(fd, junk, PS, (off_t)o) == PS);
	}
	close(fd);
}

static void checksums(void)
{
	struct zs_zram_wb_result r;
	int errs;

	struct zs_zram *z = filled(0, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &r), 0);
	CHECK_EQ(r.written, N / 2);
	CHECK_EQ(bad_slots(z, 0, N, &errs), 0);
	CHECK_EQ(errs, 0);
	/* One block rewritten by someone else: exactly one slot fails, -EIO, zeros. */
	corrupt(0, PS);
	CHECK_EQ(bad_slots(z, 0, N, &errs), 0);
	CHECK_EQ(errs, 1);
	struct zs_zram_stats st = stats(z);
	CHECK_EQ(st.bd_csum_errors, 3);
	CHECK_EQ(st.bd_read_retries, 2);
	CHECK_EQ(st.bd_read_errors, 1);
	CHECK_EQ(st.failed_reads, 1);
	/* The whole file: every written-back slot fails, every other slot is untouched. */
	corrupt(0, (uint64_t)N * PS);
	CHECK_EQ(bad_slots(z, 0, N / 2, &errs), 0);
	CHECK_EQ(errs, N / 2);
	CHECK_EQ(bad_slots(z, N / 2, N, &errs), 0);
	CHECK_EQ(errs, 0);
	/* Overwrite and discard of a failing slot work; the slot then reads what it holds. */
	rnd_page(want[3]);
	CHECK_EQ(zs_zram_write(z, 3, want[3]), 0);
	CHECK_EQ(zs_zram_discard(z, 4), 0);
	memset(want[4], 0, PS);
	CHECK_EQ(bad_slots(z, 3, 5, &errs), 0);
	CHECK_EQ(errs, 0);
	zs_zram_destroy(z);

	/* Compressed writeback: the checksum covers the compressed bytes. */
	z = filled(0, 1);
	CHECK(zs_zram_mark_idle(z, 0) > 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &r), 0);
	CHECK_EQ(r.written, N);
	CHECK_EQ(bad_slots(z, 0, N, &errs), 0);
	CHECK_EQ(errs, 0);
	corrupt(0, (uint64_t)N * PS);
	CHECK_EQ(bad_slots(z, 0, N, &errs), 0);
	CHECK_EQ(errs, N);
	CHECK_EQ(stats(z).bd_read_errors, N);
	zs_zram_destroy(z);
}

static void retries(void)
{
	struct zs_zram_wb_result r;
	int errs;
	struct zs_zram *z = filled(0, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &r), 0);

	/* One failure, then two: retried, right bytes, nothing counted as failed. */
	zs_zram_wb_inject(z, 1, 0, 1);
	CHECK_EQ(bad_slots(z, 0, 1, &errs), 0);
	CHECK_EQ(errs, 0);
	zs_zram_wb_inject(z, 1, 0, 2);
	CHECK_EQ(bad_slots(z, 1, 2, &errs), 0);
	CHECK_EQ(errs, 0);
	struct zs_zram_stats st = stats(z);
	CHECK_EQ(st.bd_read_retries, 3);
	CHECK_EQ(st.bd_read_errors, 0);
	CHECK_EQ(st.failed_reads, 0);
	CHECK_EQ(st.bd_csum_errors, 0);
	/* Three in a row outlast the tries: -EIO once, then the page reads right again. */
	zs_zram_wb_inject(z, 1, 0, 3);
	CHECK_EQ(bad_slots(z, 2, 3, &errs), 0);
	CHECK_EQ(errs, 1);
	CHECK_EQ(bad_slots(z, 2, 3, &errs), 0);
	CHECK_EQ(errs, 0);
	/* Persistent (count 0: until cleared): every written-back read fails, others do not. */
	zs_zram_wb_inject(z, 1, 0, 0);
	CHECK_EQ(bad_slots(z, 0, N / 2, &errs), 0);
	CHECK_EQ(errs, N / 2);
	CHECK_EQ(bad_slots(z, N / 2, N, &errs), 0);
	CHECK_EQ(errs, 0);
	/* read_range over a failing page reports it. */
	CHECK_EQ(zs_zram_read_range(z, 0, 4, back, sizeof back), -EIO);
	zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
	CHECK_EQ(bad_slots(z, 0, N, &errs), 0);
	CHECK_EQ(errs, 0);
	CHECK_EQ(zs_zram_read_range(z, 0, N, back, sizeof back), 0);
	for (int i = 0; i < N; i++)
		CHECK(!memcmp(back + (size_t)i * PS, want[i], PS));
	st = stats(z);
	CHECK_EQ(st.bd_read_errors, 1 + N / 2 + 1);
	zs_zram_destroy(z);
}

/* ---- groups ---- */

static void expect(struct zs_zram *z, int i, int rc_want, const unsigned char *page)
{
	memset(back, 0xee, PS);
	int rc = zs_zram_read(z, (uint64_t)i, back, PS);
	if (rc != rc_want || (page && !rc && memcmp(back, page, PS))) {
		fprintf(stderr, "slot %d: read %d (want %d)%s\n", i, rc, rc_want,
			page && !rc && memcmp(back, page, PS) ? ", wrong bytes" : "");
		CHECK(0);
	} else {
		CHECK(1);
	}
}

static void group_unreadable(void)
{
	static const unsigned char zero[PS];
	struct zs_zram_wb_result r;
	struct zs_zram *z = filled(4, 0);

	/* Slots 0..31 random: 8 huge groups written back; 32..63 text groups stay in memory. */
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &r), 0);
	CHECK_EQ(r.written, N / 2 / 4);
	REQUIRE(truncate(path, 0) == 0);
	for (int i = 0; i < N / 2; i++)
		expect(z, i, -EIO, NULL);
	for (int i = N / 2; i < N; i++)
		expect(z, i, 0, want[i]);

	/* Group 1 (slots 4..7): write 5, discard 6; 4 and 7 are lost, never zeros. */
	rnd_page(want[5]);
	CHECK_EQ(zs_zram_write(z, 5, want[5]), 0);
	expect(z, 5, 0, want[5]);
	CHECK_EQ(zs_zram_discard(z, 6), 0);
	expect(z, 6, 0, zero);
	expect(z, 4, -EIO, NULL);
	expect(z, 7, -EIO, NULL);
	CHECK_EQ(zs_zram_read_range(z, 4, 4, back, sizeof back), -EIO);
	/* Group 2 (8..11) as a whole range: dropped without reading; group 3: one discard. */
	CHECK_EQ(zs_zram_discard_range(z, 8, 4), 0);
	for (int i = 8; i < 12; i++)
		expect(z, i, 0, zero);
	CHECK_EQ(zs_zram_discard(z, 13), 0);
	expect(z, 13, 0, zero);
	expect(z, 12, -EIO, NULL);
	expect(z, 14, -EIO, NULL);
	/* A lost slot written again holds its data; the group reads whole once all are back. */
	rnd_page(want[4]);
	rnd_page(want[7]);
	CHECK_EQ(zs_zram_write(z, 4, want[4]), 0);
	expect(z, 7, -EIO, NULL);
	CHECK_EQ(zs_zram_write(z, 7, want[7]), 0);
	memcpy(want[6], zero, PS);
	CHECK_EQ(zs_zram_read_range(z, 4, 4, back, sizeof back), 0);
	for (int i = 4; i < 8; i++)
		CHECK(!memcmp(back + (size_t)(i - 4) * PS, want[i], PS));
	/* Untouched unreadable groups still fail (their reference is kept, nothing marked). */
	expect(z, 0, -EIO, NULL);
	expect(z, 16, -EIO, NULL);
	/* A whole-group write replaces a lost group entirely. */
	for (int i = 12; i < 16; i++)
		rnd_page(want[i]);
	unsigned char grp[4 * PS];
	for (int i = 0; i < 4; i++)
		memcpy(grp + (size_t)i * PS, want[12 + i], PS);
	CHECK_EQ(zs_zram_write_range(z, 12, 4, grp), 0);
	for (int i = 12; i < 16; i++)
		expect(z, i, 0, want[i]);
	/* The in-memory groups were never touched by the file's loss. */
	for (int i = N / 2; i < N; i++)
		expect(z, i, 0, want[i]);
	/* Reset forgets the marks with the data. */
	zs_zram_reset(z);
	for (int i = 0; i < N; i++)
		expect(z, i, 0, zero);
	zs_zram_destroy(z);
}

/* A discard while the group's reads fail keeps the group for its other slots. */
static void group_transient(void)
{
	static const unsigned char zero[PS];
	struct zs_zram_wb_result r;
	struct zs_zram *z = filled(4, 0);
	CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &r), 0);
	uint64_t blocks = stats(z).bd_count;

	zs_zram_wb_inject(z, 1, 0, 0);   /* every read fails until cleared */
	CHECK_EQ(zs_zram_discard(z, 1), 0);
	expect(z, 1, 0, zero);
	expect(z, 0, -EIO, NULL);
	zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
	expect(z, 0, 0, want[0]);
	expect(z, 1, 0, zero);
	expect(z, 2, 0, want[2]);
	expect(z, 3, 0, want[3]);
	/* Every slot discarded while unreadable: the group and its block go. */
	zs_zram_wb_inject(z, 1, 0, 0);
	for (int i = 4; i < 8; i++)
		CHECK_EQ(zs_zram_discard(z, (uint64_t)i), 0);
	zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
	CHECK_EQ(stats(z).bd_count, blocks - 1);
	for (int i = 4; i < 8; i++)
		expect(z, i, 0, zero);
	/* A later write of a slot of the empty group holds its page; the rest read zeros. */
	CHECK_EQ(zs_zram_write(z, 6, want[6]), 0);
	expect(z, 6, 0, want[6]);
	expect(z, 7, 0, zero);
	zs_zram_destroy(z);
}

static void group_discard_at_limit(void)
{
	static const unsigned char zero[PS];
	static unsigned char g[4 * PS];
	struct zs_zram *z = mk(NULL, 4, 0, 16 * 4 * PS);   /* room for 16 raw groups */
	for (int i = 0; i < N; i++)
		rnd_page(want[i]);
	for (int i = 0; i < N; i += 4) {
		memcpy(g, want[i], 4 * PS);   /* want rows are contiguous */
		REQUIRE(zs_zram_write_range(z, (uint64_t)i, 4, g) == 0);
	}
	struct zs_zram_stats st = stats(z);
	CHECK_EQ(st.mem_used_total, st.mem_limit);
	/* At the limit a write of a new group fails, but discards never do. */
	unsigned char extra[PS];
	rnd_page(extra);
	CHECK_EQ(zs_zram_discard(z, 1), 0);
	memset(want[1], 0, PS);
	CHECK_EQ(zs_zram_discard_range(z, 5, 1), 0);
	memset(want[5], 0, PS);
	for (int i = 0; i < 8; i++)
		expect(z, i, 0, want[i]);
	CHECK(stats(z).mem_used_total <= st.mem_limit);

	/* The pool cannot get a single page: partial discards still succeed (marks only). */
	struct zs_pool *pool = zs_backend_zspool(zs_zram_backend(z));
	REQUIRE(pool);
	zs_pool_fail_pages(pool, 0, 0);
	for (int i = 8; i < 16; i += 2) {
		CHECK_EQ(zs_zram_discard(z, (uint64_t)i), 0);
		memset(want[i], 0, PS);
	}
	CHECK_EQ(zs_zram_discard_range(z, 17, 2), 0);
	memset(want[17], 0, PS);
	memset(want[18], 0, PS);
	for (int i = 8; i < 20; i++)
		expect(z, i, 0, want[i]);
	/* Dropping every slot of a group frees it, still without a page to spare. */
	uint64_t before = stats(z).pages_stored;
	for (int i = 20; i < 24; i++) {
		CHECK_EQ(zs_zram_discard(z, (uint64_t)i), 0);
		memset(want[i], 0, PS);
	}
	CHECK_EQ(stats(z).pages_stored, before - 1);
	zs_pool_fail_pages(pool, UINT64_MAX, 0);
	/* Whole groups dropped make room; a later rewrite of a marked group then drops the
	 * discarded slots' stale bytes for good. */
	CHECK_EQ(zs_zram_discard_range(z, 24, N - 24), 0);
	memset(want[24], 0, (size_t)(N - 24) * PS);
	CHECK(stats(z).mem_used_total < st.mem_limit);
	CHECK_EQ(zs_zram_write(z, 9, want[9]), 0);
	for (int i = 0; i < N; i++)
		expect(z, i, 0, want[i]);
	(void)zero;
	zs_zram_destroy(z);
}

/* ---- ranges ---- */

/*
 * docs/zram.md, Ranges: a range write that failed stopped at its first failed page, so
 * what it left is a prefix: pages 0..k-1 hold their data, k.. (the failed page, then the
 * ones never tried) are as they were, empty.  Called after a refused write of all N
 * into an empty store of `group`-page groups (1: none).
 */
static void check_prefix(struct zs_zram *z, const unsigned char *buf, int group)
{
	static const unsigned char zero[PS];
	struct zs_zram_stats st;
	int k = 0, bad = 0;

	while (k < N && zs_zram_read(z, (uint64_t)k, back, PS) == 0 &&
	       !memcmp(back, buf + (size_t)k * PS, PS))
		k++;
	for (int i = k; i < N; i++) {
		size_t sz = 1;
		if (zs_zram_read(z, (uint64_t)i, back, PS) || memcmp(back, zero, PS) ||
		    zs_zram_slot_info(z, (uint64_t)i, &sz, NULL, NULL) || sz != 0)
			bad++;
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	CHECK(k > 0 && k < N);
	CHECK_EQ(bad, 0);
	/* a grouped store moves whole groups, and its stats count groups (zram.h) */
	CHECK_EQ(k % group, 0);
	CHECK_EQ(st.pages_stored, (uint64_t)(k / group));
}

static void ranges(void)
{
	static unsigned char buf[N * PS];
	/* write_range that hits the memory limit part way returns the error, not 0. */
	struct zs_zram *z = mk(NULL, 0, 0, 8 * PS);
	for (int i = 0; i < N; i++)
		rnd_page(buf + (size_t)i * PS);
	int rc = zs_zram_write_range(z, 0, N, buf);
	CHECK_EQ(rc, -ENOMEM);
	check_prefix(z, buf, 1);
	/* A range past the end is refused whole: nothing is discarded. */
	CHECK_EQ(zs_zram_read(z, N - 1, back, PS), 0);
	CHECK_EQ(zs_zram_discard_range(z, 0, N + 1), -EINVAL);
	CHECK_EQ(zs_zram_read(z, 0, back, PS), 0);
	CHECK(!memcmp(back, buf, PS));
	CHECK_EQ(zs_zram_discard_range(z, 0, N), 0);
	zs_zram_destroy(z);

	z = mk(NULL, 4, 0, 8 * PS);
	CHECK_EQ(zs_zram_write_range(z, 0, N, buf), -ENOMEM);
	check_prefix(z, buf, 4); /* whole groups here, the same prefix rule */
	CHECK_EQ(zs_zram_discard_range(z, 2, N), -EINVAL);
	CHECK_EQ(zs_zram_discard_range(z, 1, N - 2), 0);
	zs_zram_destroy(z);
}

/* ---- threads on a grouped store with failing reads ---- */

/* The threads count instead of CHECKing: testutil's counters are not thread safe. */
static _Atomic int mt_stop, mt_wrong, mt_badrc;
static struct zs_zram *mt_z;

/* A page that names its slot and version; the rest follows from those two. */
static void mt_page(unsigned char *p, uint64_t slot, uint64_t ver)
{
	uint64_t x = slot * 0x9E3779B97F4A7C15ULL ^ (ver + 1) * 0xBF58476D1CE4E5B9ULL;
	memcpy(p, &slot, 8);
	memcpy(p + 8, &ver, 8);
	for (int k = 16; k < PS; k += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + k, &x, 8);
	}
}

static int mt_valid(const unsigned char *p, uint64_t slot)
{
	static const unsigned char zero[PS];
	unsigned char e[PS];
	uint64_t s, v;
	if (!memcmp(p, zero, PS))
		return 1;
	memcpy(&s, p, 8);
	memcpy(&v, p + 8, 8);
	if (s != slot)
		return 0;
	mt_page(e, s, v);
	return !memcmp(p, e, PS);
}

static void *mt_writer(void *arg)
{
	uint64_t rs = (uint64_t)(uintptr_t)arg, ver = 0;
	unsigned char p[PS];
	while (!atomic_load(&mt_stop)) {
		uint64_t slot = tu_rand(&rs) % N;
		int rc;
		if (tu_rand(&rs) % 4 == 0) {
			rc = zs_zram_discard(mt_z, slot);
		} else {
			mt_page(p, slot, ++ver);
			rc = zs_zram_write(mt_z, slot, p);
		}
		if (rc)
			atomic_fetch_add(&mt_badrc, 1);
	}
	return NULL;
}

static void *mt_reader(void *arg)
{
	uint64_t rs = (uint64_t)(uintptr_t)arg;
	unsigned char p[4 * PS];
	while (!atomic_load(&mt_stop)) {
		uint64_t slot = tu_rand(&rs) % N;
		int rc;
		if (slot % 8 == 0 && slot + 4 <= N) {
			rc = zs_zram_read_range(mt_z, slot, 4, p, sizeof p);
			for (int k = 0; !rc && k < 4; k++)
				if (!mt_valid(p + (size_t)k * PS, slot + (uint64_t)k))
					atomic_fetch_add(&mt_wrong, 1);
			if (rc && rc != -EIO)
				atomic_fetch_add(&mt_badrc, 1);
			continue;
		}
		rc = zs_zram_read(mt_z, slot, p, PS);
		if (rc && rc != -EIO)
			atomic_fetch_add(&mt_badrc, 1);
		if (!rc && !mt_valid(p, slot))
			atomic_fetch_add(&mt_wrong, 1);
	}
	return NULL;
}

static void threads(void)
{
	pthread_t w, rd;
	struct zs_zram_wb_result r;
	unsigned char p[PS];
	new_file();
	mt_z = mk(path, 4, 0, 0);
	for (uint64_t i = 0; i < N; i++) {
		mt_page(p, i, 0);
		REQUIRE(zs_zram_write(mt_z, i, p) == 0);
	}
	atomic_store(&mt_stop, 0);
	REQUIRE(pthread_create(&w, NULL, mt_writer, (void *)(uintptr_t)(seed + 1)) == 0);
	REQUIRE(pthread_create(&rd, NULL, mt_reader, (void *)(uintptr_t)(seed + 2)) == 0);
	/* The maintainer: write back, then let reads fail for a while, then recover. */
	for (int round = 0; round < 40; round++) {
		int rc = zs_zram_writeback(mt_z, ZS_ZRAM_WB_HUGE, 0, &r);
		CHECK(rc == 0 || rc == -ENOSPC);
		zs_zram_wb_inject(mt_z, 1, 0, round % 3 ? 1 : 0);   /* transient, or until cleared */
		usleep(5000);
		zs_zram_wb_inject(mt_z, 1, UINT64_MAX, 0);
		usleep(5000);
	}
	atomic_store(&mt_stop, 1);
	pthread_join(w, NULL);
	pthread_join(rd, NULL);
	int wrong = 0;
	for (uint64_t i = 0; i < N; i++) {
		int rc = zs_zram_read(mt_z, i, p, PS);
		CHECK(rc == 0 || rc == -EIO);
		wrong += !rc && !mt_valid(p, i);
	}
	struct zs_zram_stats st = stats(mt_z);
	printf("threads: %d wrong reads during the run, %d after; bd_read_retries %llu "
	       "bd_read_errors %llu failed_reads %llu\n", atomic_load(&mt_wrong), wrong,
	       (unsigned long long)st.bd_read_retries, (unsigned long long)st.bd_read_errors,
	       (unsigned long long)st.failed_reads);
	CHECK_EQ(atomic_load(&mt_wrong), 0);
	CHECK_EQ(atomic_load(&mt_badrc), 0);
	CHECK_EQ(wrong, 0);
	zs_zram_destroy(mt_z);
}

int main(void)
{
	seed = tu_seed("test_zram_faults");
	snprintf(dir, sizeof dir, "/tmp/zs_faultsXXXXXX");
	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/backing", dir);
	refusals();
	checksums();
	retries();
	group_unreadable();
	group_transient();
	group_discard_at_limit();
	ranges();
	threads();
	unlink(path);
	rmdir(dir);
	return tu_done();
}
