/*
 * The zram backing-file reproducer as a test: zram
 * writeback under backing-file errors, the writeback limit and groups, and
 * backing "files" that are not files.  Nothing stored may read back wrong:
 * a slot reads its bytes or fails with an error.
 *
 *   enospc        256 huge slots written back to a 64 KiB tmpfs: -ENOSPC,
 *                 every slot still reads right, bd_count = pages written
 *                 (root only: mounts a tmpfs; SKIP line otherwise)
 *   truncated     file truncated after writeback: every read fails (-EIO),
 *                 none wrong; overwrite, discard and re-read still work
 *   truncated_g4  the same with group_pages 4: a write or discard of one
 *                 slot does not depend on reading its stale group
 *   deleted       file unlinked after create: writeback works
 *   limit         writeback_limit 3, 0, off
 *   inject_write  injected write EIO after 40 pages: -EIO, nothing lost
 *   read_errors   one injected read failure is retried (every slot right);
 *                 permanent read failures give -EIO, then clearing them
 *                 gives every slot back (an I/O error destroys nothing)
 *   checksum      one byte of every written-back block changed in the file:
 *                 reads fail, none returns the changed bytes (both
 *                 writeback_compressed 0 and 1)
 *   not_a_file    /dev/null, /dev/zero, a directory, a FIFO, a missing path
 *                 and a read-only file (a read-only tmpfs as root) are
 *                 refused at create (the defect: /dev/null and /dev/zero
 *                 were accepted and slots then read wrong data)
 *
 * Each case runs in a forked child under a watchdog (HANG after the
 * timeout).  The tmpfs mounts live in a private mount namespace when one
 * can be made (unshare), and are unmounted at the end in any case.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"
#include "zs/harness.h"
#include "zs/zram.h"

#define PS 4096

#ifdef SAN_SLOW
#define TIMEOUT_S 30
#else
#define TIMEOUT_S 10
#endif

static int fails;
#define EXPECT(c, ...)                                                               \
	do {                                                                         \
		if (c) {                                                             \
			printf("  ok   ");                                           \
		} else {                                                             \
			printf("  FAIL ");                                           \
			fails++;                                                     \
		}                                                                    \
		printf(__VA_ARGS__);                                                 \
		printf("\n");                                                        \
		fflush(stdout);                                                      \
	} while (0)

static char tmpdir[64] = "/tmp/zs_test_wberrXXXXXX";
static char tiny[128], rodir[128], rofile[160];
static int tiny_mounted, ro_mounted;

static void page(unsigned char *b, unsigned seed)   /* incompressible: stored huge */
{
	fc_xorshift_fill(b, PS, seed * 0x9E3779B97F4A7C15ULL + 1);
}

static struct zs_zram *mk(const char *path, uint64_t slots, unsigned group, int compressed,
			  int *rcp)
{
	struct zs_zram_config c;
	struct zs_zram *z = NULL;
	zs_zram_config_init(&c);
	c.disksize = slots * PS;
	c.backing_path = path;
	c.group_pages = group;
	c.writeback_compressed = compressed;
	int rc = zs_zram_create(&c, &z, NULL, 0);
	if (rcp)
		*rcp = rc;
	return rc ? NULL : z;
}

static struct zs_zram *mk_ok(const char *path, uint64_t slots, unsigned group, int compressed)
{
	int rc;
	struct zs_zram *z = mk(path, slots, group, compressed, &rc);
	if (!z) {
		printf("  FAIL create(%s, group %u) -> %d (%s)\n", path, group, rc, strerror(-rc));
		fails++;
	}
	return z;
}

static void fill(struct zs_zram *z, uint64_t n, unsigned *seeds)
{
	unsigned char b[PS];
	for (unsigned i = 0; i < n; i++) {
		seeds[i] = i + 1;
		page(b, seeds[i]);
		int rc = zs_zram_write(z, i, b);
		if (rc) {
			printf("  FAIL write slot %u -> %d\n", i, rc);
			fails++;
		}
	}
}

/* Read every slot: returns slots with wrong bytes; *nerr = slots whose read failed. */
static int verify_all(struct zs_zram *z, uint64_t n, const unsigned *seeds, int *nerr)
{
	unsigned char b[PS], e[PS];
	int bad = 0;
	*nerr = 0;
	for (uint64_t i = 0; i < n; i++) {
		int rc = zs_zram_read(z, i, b, PS);
		if (rc) {
			(*nerr)++;
			continue;
		}
		if (seeds[i])
			page(e, seeds[i]);
		else
			memset(e, 0, PS);
		if (memcmp(b, e, PS))
			bad++;
	}
	return bad;
}

static void new_file(const char *path)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd >= 0)
		close(fd);
}

/* One case's store: a fresh backing file at path, n slots written (seeds[i] = i + 1). */
struct wbs {
	const char *path;
	uint64_t n;
	unsigned group;
	int compressed;
	int unlink_before_fill;   /* the file unlinked between create and the writes */
	struct zs_zram *z;
	unsigned seeds[256];
	struct zs_zram_wb_result res;
	int nerr;                 /* reads that failed at the last wb_verify() */
};

/* 0 and w->z filled, or -1 with the failed create reported. */
static int wb_open(struct wbs *w)
{
	w->res = (struct zs_zram_wb_result){ 0, 0 };
	new_file(w->path);
	w->z = mk_ok(w->path, w->n, w->group, w->compressed);
	if (!w->z)
		return -1;
	if (w->unlink_before_fill)
		unlink(w->path);
	fill(w->z, w->n, w->seeds);
	return 0;
}

static int wb_writeback(struct wbs *w)
{
	return zs_zram_writeback(w->z, ZS_ZRAM_WB_HUGE, 0, &w->res);
}

/* slots read back wrong; w->nerr slots failed to read */
static int wb_verify(struct wbs *w)
{
	return verify_all(w->z, w->n, w->seeds, &w->nerr);
}

static void case_enospc(void)
{
	char path[256];
	snprintf(path, sizeof path, "%s/wb", tiny);
	struct wbs w = { .path = path, .n = 256 };
	if (wb_open(&w))
		return;
	int rc = wb_writeback(&w);
	struct zs_zram_stats st;
	zs_zram_get_stats(w.z, &st, sizeof(st));
	int bad = wb_verify(&w);
	EXPECT(rc == -ENOSPC && bad == 0 && w.nerr == 0 && st.bd_count == w.res.written,
	       "ENOSPC: rc %d (want %d) written %lu scanned %lu, mismatches %d read errors %d "
	       "bd_count %llu (want = written)", rc, -ENOSPC, w.res.written, w.res.scanned, bad,
	       w.nerr, (unsigned long long)st.bd_count);
	zs_zram_destroy(w.z);
	unlink(path);
}

static void case_truncated(const char *path)
{
	unsigned char b[PS], r[PS];
	struct wbs w = { .path = path, .n = 64 };
	if (wb_open(&w))
		return;
	struct zs_zram *z = w.z;
	int rc = wb_writeback(&w);
	if (truncate(path, 0))
		perror("truncate");
	int bad = wb_verify(&w);
	EXPECT(w.nerr == 64 && bad == 0, "truncated: writeback %d written %lu; reads failing %d "
	       "(want 64), wrong data %d (want 0)", rc, w.res.written, w.nerr, bad);
	page(b, 999);
	rc = zs_zram_write(z, 3, b);
	int rc2 = zs_zram_discard(z, 4);
	unsigned char r4[PS];
	int z4 = zs_zram_read(z, 4, r4, PS) == 0;
	for (int i = 0; i < PS && z4; i++)
		z4 = r4[i] == 0;
	int rr = zs_zram_read(z, 3, r, PS);
	EXPECT(rc == 0 && rc2 == 0 && rr == 0 && !memcmp(r, b, PS) && z4,
	       "truncated: overwrite slot 3 -> %d, discard slot 4 -> %d (reads zeros: %d), "
	       "reread slot 3 -> %d", rc, rc2, z4, rr);
	zs_zram_destroy(z);
}

static void case_truncated_g4(const char *path)
{
	unsigned char b[PS];
	struct wbs w = { .path = path, .n = 64, .group = 4 };
	if (wb_open(&w))
		return;
	struct zs_zram *z = w.z;
	int rc = wb_writeback(&w);
	if (truncate(path, 0))
		perror("truncate");
	page(b, 999);
	int wr = zs_zram_write(z, 5, b);
	int d = zs_zram_discard(z, 6);
	int dr = zs_zram_discard_range(z, 8, 4);
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	EXPECT(wr == 0 && d == 0, "group 4, file truncated: writeback %d written %lu; write slot 5 "
	       "-> %d, discard slot 6 -> %d (want 0, 0: a write/discard of a slot must not depend "
	       "on reading its stale group); discard_range(8,4) -> %d; pages_stored %llu", rc,
	       w.res.written, wr, d, dr, (unsigned long long)st.pages_stored);
	/* nothing reads wrong: slot 5 its new bytes, 6 zeros or an error, the others an error */
	unsigned char r[PS];
	int bad = 0;
	for (uint64_t i = 0; i < 64; i++) {
		if (zs_zram_read(z, i, r, PS))
			continue;
		unsigned char e[PS];
		if (i == 5)
			page(e, 999);
		else if (i == 6 || (i >= 8 && i < 12 && dr == 0))
			memset(e, 0, PS);
		else
			page(e, w.seeds[i]);
		bad += memcmp(r, e, PS) != 0;
	}
	EXPECT(bad == 0, "group 4, file truncated: %d slots read wrong bytes (want 0)", bad);
	zs_zram_destroy(z);
}

static void case_deleted(const char *path)
{
	struct wbs w = { .path = path, .n = 64, .unlink_before_fill = 1 };
	if (wb_open(&w))
		return;
	int rc = wb_writeback(&w);
	int bad = wb_verify(&w);
	EXPECT(rc == 0 && w.res.written == 64 && bad == 0 && w.nerr == 0,
	       "deleted: rc %d written %lu, wrong %d err %d", rc, w.res.written, bad, w.nerr);
	zs_zram_destroy(w.z);
}

static void case_limit(const char *path)
{
	struct wbs w = { .path = path, .n = 64 };
	if (wb_open(&w))
		return;
	struct zs_zram *z = w.z;
	zs_zram_set_writeback_limit(z, 1, 3);
	int rc = wb_writeback(&w);
	int en;
	uint64_t left = 99;
	zs_zram_get_writeback_limit(z, &en, &left);
	EXPECT(rc == -EIO && w.res.written == 3 && left == 0, "limit 3: rc %d written %lu left %llu",
	       rc, w.res.written, (unsigned long long)left);
	rc = wb_writeback(&w);
	EXPECT(rc == -EIO && w.res.written == 0, "limit 0: rc %d written %lu", rc, w.res.written);
	zs_zram_set_writeback_limit(z, 0, 0);
	rc = wb_writeback(&w);
	int bad = wb_verify(&w);
	EXPECT(rc == 0 && w.res.written == 61 && !bad && !w.nerr,
	       "limit off: rc %d written %lu (want 61) wrong %d err %d", rc, w.res.written, bad,
	       w.nerr);
	EXPECT(zs_zram_set_writeback_limit(z, 2, 0) == -EINVAL, "limit enable=2 refused");
	zs_zram_destroy(z);
}

static void case_inject_write(const char *path)
{
	struct wbs w = { .path = path, .n = 64 };
	if (wb_open(&w))
		return;
	zs_zram_wb_inject(w.z, 0, 40, 1);
	int rc = wb_writeback(&w);
	int bad = wb_verify(&w);
	EXPECT(rc == -EIO && !bad && !w.nerr, "inject write EIO after 40: rc %d written %lu wrong %d "
	       "err %d", rc, w.res.written, bad, w.nerr);
	zs_zram_destroy(w.z);
}

static void case_read_errors(const char *path)
{
	struct wbs w = { .path = path, .n = 64 };
	if (wb_open(&w))
		return;
	struct zs_zram *z = w.z;
	int rc = wb_writeback(&w);
	EXPECT(rc == 0 && w.res.written == 64, "writeback rc %d written %lu", rc, w.res.written);
	zs_zram_wb_inject(z, 1, 10, 1);   /* the 11th read fails once */
	int bad = wb_verify(&w);
	EXPECT(bad == 0 && w.nerr == 0, "one transient read error: wrong %d, failed reads %d (want "
	       "0, 0: retried)", bad, w.nerr);
	zs_zram_wb_inject(z, 1, 0, 0);    /* every read fails */
	bad = wb_verify(&w);
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	EXPECT(bad == 0 && w.nerr == 64, "permanent read errors: wrong %d (want 0), failed reads %d "
	       "(want 64), failed_reads counter %llu", bad, w.nerr,
	       (unsigned long long)st.failed_reads);
	EXPECT(st.failed_reads >= 64, "failed_reads counts them: %llu",
	       (unsigned long long)st.failed_reads);
	zs_zram_wb_inject(z, 1, UINT64_MAX, 0);
	bad = wb_verify(&w);
	EXPECT(bad == 0 && w.nerr == 0, "errors cleared: wrong %d, failed %d (want 0, 0: a failed "
	       "read destroys nothing)", bad, w.nerr);
	zs_zram_destroy(z);
}

static void case_checksum(const char *path, int compressed)
{
	struct wbs w = { .path = path, .n = 64, .compressed = compressed };
	if (wb_open(&w))
		return;
	int rc = wb_writeback(&w);
	int fd = open(path, O_RDWR);
	struct stat sb;
	size_t flipped = 0;
	if (fd >= 0 && fstat(fd, &sb) == 0) {
		/* one byte of every block in use (any block: the file's layout is not ours) */
		for (off_t off = 0; off + PS <= sb.st_size; off += PS) {
			unsigned char blk[PS];
			if (pread(fd, blk, PS, off) != PS)
				break;
			int any = 0;
			for (int i = 0; i < PS && !any; i++)
				any = blk[i] != 0;
			if (!any)
				continue;   /* a hole: no block there */
			unsigned char x = (unsigned char)(blk[777] ^ 0x40);
			if (pwrite(fd, &x, 1, off + 777) == 1)
				flipped++;
		}
	}
	if (fd >= 0)
		close(fd);
	int bad = wb_verify(&w);
	EXPECT(bad == 0 && w.nerr == (int)w.res.written,
	       "checksum (writeback_compressed %d): writeback rc %d written %lu, %zu blocks "
	       "changed in the file: wrong data %d (want 0), failed reads %d (want %lu)", compressed,
	       rc, w.res.written, flipped, bad, w.nerr, w.res.written);
	zs_zram_destroy(w.z);
}

static void case_not_a_file(void)
{
	char fifo[160], missing[160];
	snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
	snprintf(missing, sizeof missing, "%s/nonexistent/x", tmpdir);
	unlink(fifo);
	if (mkfifo(fifo, 0600))
		perror("mkfifo");
	const char *odd[] = { "/dev/null", "/dev/zero", tmpdir, fifo, missing, rofile };
	for (int k = 0; k < 6; k++) {
		if (!odd[k][0]) {
			printf("  SKIP a read-only backing file: no read-only mount here and root "
			       "ignores file modes\n");
			continue;
		}
		int rc;
		struct zs_zram *z = mk(odd[k], 16, 0, 0, &rc);
		if (!z) {
			EXPECT(1, "backing %s refused at create (%d %s)", odd[k], rc, strerror(-rc));
			continue;
		}
		unsigned seeds[16];
		struct zs_zram_wb_result res = { 0, 0 };
		int nerr;
		fill(z, 16, seeds);
		int wr = zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 0, &res);
		int bad = verify_all(z, 16, seeds, &nerr);
		EXPECT(0, "backing %s accepted at create (want refused): writeback rc %d written %lu; "
		       "afterwards %d slots read WRONG DATA, %d read errors", odd[k], wr, res.written,
		       bad, nerr);
		zs_zram_destroy(z);
	}
	unlink(fifo);
}

/* A case in the forked child: passes when no EXPECT failed. */
struct wcase {
	void (*fn)(const char *);
	const char *arg;
};

static int in_child(void *p)
{
	const struct wcase *c = p;
	fails = 0;
	c->fn(c->arg);
	return fails ? 1 : 0;
}

static int run_case(const char *name, void (*fn)(const char *), const char *arg)
{
	struct wcase c = { fn, arg };
	printf("case %s:\n", name);
	return fc_run(name, TIMEOUT_S, in_child, &c);
}

static void w_enospc(const char *a) { (void)a; case_enospc(); }
static void w_ck0(const char *a) { case_checksum(a, 0); }
static void w_ck1(const char *a) { case_checksum(a, 1); }
static void w_odd(const char *a) { (void)a; case_not_a_file(); }

static void cleanup(void)
{
	if (ro_mounted && umount2(rodir, MNT_DETACH) == 0)
		ro_mounted = 0;
	if (tiny_mounted && umount2(tiny, MNT_DETACH) == 0)
		tiny_mounted = 0;
	if (!ro_mounted)
		rmdir(rodir);
	if (!tiny_mounted)
		rmdir(tiny);
	char p[200];
	snprintf(p, sizeof p, "%s/wb", tmpdir);
	unlink(p);
	rmdir(tmpdir);
}

static void mounts(void)
{
	snprintf(tiny, sizeof tiny, "%s/tiny", tmpdir);
	snprintf(rodir, sizeof rodir, "%s/ro", tmpdir);
	mkdir(tiny, 0700);
	mkdir(rodir, 0700);
	if (geteuid() != 0) {
		printf("SKIP enospc and the read-only file: not root (no tmpfs mount)\n");
		return;
	}
	/* a private mount namespace: the mounts vanish with this process whatever happens */
	if (unshare(CLONE_NEWNS) == 0)
		mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (mount("none", tiny, "tmpfs", 0, "size=64k") == 0)
		tiny_mounted = 1;
	else
		printf("SKIP enospc: mount -t tmpfs -o size=64k none %s: %s\n", tiny, strerror(errno));
	if (mount("none", rodir, "tmpfs", 0, "size=64k") == 0) {
		ro_mounted = 1;
		snprintf(rofile, sizeof rofile, "%s/ro/file", tmpdir);
		new_file(rofile);
		if (mount(NULL, rodir, NULL, MS_REMOUNT | MS_RDONLY, NULL)) {
			printf("SKIP read-only file: remount ro: %s\n", strerror(errno));
			rofile[0] = 0;
		}
	} else {
		printf("SKIP read-only file: mount tmpfs: %s\n", strerror(errno));
	}
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(cleanup);
	mounts();
	char path[200];
	snprintf(path, sizeof path, "%s/wb", tmpdir);
	struct {
		const char *name;
		void (*fn)(const char *);
	} cases[] = {
		{ "enospc", w_enospc },
		{ "truncated", case_truncated },
		{ "truncated_g4", case_truncated_g4 },
		{ "deleted", case_deleted },
		{ "limit", case_limit },
		{ "inject_write", case_inject_write },
		{ "read_errors", case_read_errors },
		{ "checksum", w_ck0 },
		{ "checksum_compressed", w_ck1 },
		{ "not_a_file", w_odd },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (i == 0 && !tiny_mounted)
			continue;
		run_case(cases[i].name, cases[i].fn, path) ? tu_fail++ : tu_pass++;
	}
	cleanup();
	return tu_done();
}
