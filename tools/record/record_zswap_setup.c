/*
 * `zs record --zswap`: the system settings a run changes, and their return.
 * This file owns every write outside the trace itself: the flock all users
 * of the kernel's zswap/swap in this project take, the state file in /run
 * that lets the next run restore after a SIGKILL, our swap file, debugfs,
 * vm.page-cluster and zswap's parameters, and the restore that checks each
 * one reads back as it was.  Kept in one place so that "every change is
 * undone" can be checked by reading one file.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "record.h"
#include "record_zswap.h"
#include "util.h"
#include "zs/harness.h"

#define LOCK_PATH "/run/libzs-kernel-zswap.lock"
#define PAGE_CLUSTER "/proc/sys/vm/page-cluster"

#define TMPFS_MAGIC_ 0x01021994
#define RAMFS_MAGIC_ 0x858458f6

/* ---- The settings a run changes, and their restoration ---- */

static const struct {
	const char *key, *path;
	size_t off, len;
} knobs[] = {
	{ "compressor", PARAM "compressor", offsetof(struct settings, compressor), 64 },
	{ "max_pool_percent", PARAM "max_pool_percent", offsetof(struct settings, max_pool), 16 },
	{ "shrinker_enabled", PARAM "shrinker_enabled", offsetof(struct settings, shrinker), 8 },
	{ "page_cluster", PAGE_CLUSTER, offsetof(struct settings, page_cluster), 16 },
	{ "enabled", PARAM "enabled", offsetof(struct settings, enabled), 8 }, /* last: see restore */
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

static char *knob(struct settings *s, size_t k)
{
	return (char *)s + knobs[k].off;
}

static int debugfs_mounted(void)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char line[512];
	int found = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char dev[128], dir[256], type[64];
		if (sscanf(line, "%127s %255s %63s", dev, dir, type) == 3 && !strcmp(dir, DEBUGFS) &&
		    !strcmp(type, "debugfs"))
			found = 1;
	}
	if (f)
		fclose(f);
	return found;
}

/* 1 if path is an active swap area (/proc/swaps escapes blanks as \040). */
static int swap_active(const char *path)
{
	FILE *f = fopen("/proc/swaps", "re");
	char line[PATH_MAX + 128], name[PATH_MAX];
	int found = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		size_t j = 0;
		for (const char *p = line; *p && *p != ' ' && *p != '\t' && j + 1 < sizeof(name); p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				name[j++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				name[j++] = *p;
			}
		}
		name[j] = 0;
		found |= !strcmp(name, path);
	}
	fclose(f);
	return found;
}

static int save_settings(struct settings *s)
{
	memset(s, 0, sizeof(*s));
	s->pid = (long)getpid();
	for (size_t k = 0; k < NKNOBS; k++) {
		int err = zs_sysfs_read(knobs[k].path, knob(s, k), knobs[k].len);
		if (err) {
			fprintf(stderr, "zs record: %s: %s\n", knobs[k].path, strerror(-err));
			return err;
		}
	}
	s->debugfs_ours = !debugfs_mounted();
	return 0;
}

/* The state file: what to restore if this process dies without restoring. */
int write_state(const struct settings *s)
{
	char tmp[] = STATE_PATH ".tmp";
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "pid=%ld\n", s->pid);
	for (size_t k = 0; k < NKNOBS; k++)
		fprintf(f, "%s=%s\n", knobs[k].key, knob((struct settings *)s, k));
	fprintf(f, "debugfs_ours=%d\nswap_file=%s\nmemcg=%s\n", s->debugfs_ours, s->swap_file,
		s->memcg);
	int err = ferror(f) ? -EIO : 0;
	if (fflush(f) || fsync(fileno(f)))
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, STATE_PATH))
		err = -errno;
	return err;
}

/* 1 and *s from the state file, 0 when there is none, -1 when it is unreadable. */
static int read_state(struct settings *s)
{
	FILE *f = fopen(STATE_PATH, "re");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	memset(s, 0, sizeof(*s));
	char line[PATH_MAX + 64];
	int nk = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		const char *v = eq + 1;
		for (size_t k = 0; k < NKNOBS; k++)
			if (!strcmp(line, knobs[k].key)) {
				snprintf(knob(s, k), knobs[k].len, "%s", v);
				nk++;
			}
		if (!strcmp(line, "pid"))
			s->pid = atol(v);
		else if (!strcmp(line, "debugfs_ours"))
			s->debugfs_ours = atoi(v);
		else if (!strcmp(line, "swap_file"))
			snprintf(s->swap_file, sizeof(s->swap_file), "%s", v);
		else if (!strcmp(line, "memcg"))
			snprintf(s->memcg, sizeof(s->memcg), "%s", v);
	}
	fclose(f);
	return nk == (int)NKNOBS ? 1 : -1;
}

/*
 * Undo a run: swap file off and removed, memcg removed, zswap's parameters
 * and page-cluster as saved, debugfs unmounted if we mounted it; then check
 * every setting reads back as saved.  Each step is tried even when an
 * earlier one failed.  0, or the number of settings not restored (each
 * reported); the state file is removed only when all are.
 */
int settings_restore(const struct settings *s)
{
	int bad = 0, err;
	if (s->swap_file[0]) {
		if (swap_active(s->swap_file) && swapoff(s->swap_file)) {
			fprintf(stderr, "zs record: restore: swapoff %s: %s\n", s->swap_file,
				strerror(errno));
			bad++;
		}
		if (unlink(s->swap_file) && errno != ENOENT) {
			fprintf(stderr, "zs record: restore: rm %s: %s\n", s->swap_file, strerror(errno));
			bad++;
		}
	}
	if (s->memcg[0]) {
		/* A killed child's cgroup membership goes with its last reference: retry briefly. */
		int tries = 0;
		while (rmdir(s->memcg) && errno == EBUSY && tries++ < 50)
			usleep(20000);
		if (access(s->memcg, F_OK) == 0) {
			fprintf(stderr, "zs record: restore: rmdir %s: %s\n", s->memcg, strerror(errno));
			bad++;
		}
	}
	/* zswap off while its parameters go back, then enabled as it was (knobs[] ends with it). */
	zs_sysfs_write(PARAM "enabled", "N");
	for (size_t k = 0; k < NKNOBS; k++) {
		const char *v = knob((struct settings *)s, k);
		if ((err = zs_sysfs_write(knobs[k].path, v)))
			fprintf(stderr, "zs record: restore: %s <- %s: %s\n", knobs[k].path, v,
				strerror(-err));
	}
	if (s->debugfs_ours && debugfs_mounted() && umount(DEBUGFS)) {
		fprintf(stderr, "zs record: restore: umount %s: %s\n", DEBUGFS, strerror(errno));
		bad++;
	}
	/* Read everything back. */
	for (size_t k = 0; k < NKNOBS; k++) {
		char now[64];
		const char *want = knob((struct settings *)s, k);
		if (zs_sysfs_read(knobs[k].path, now, sizeof(now)) || strcmp(now, want)) {
			fprintf(stderr, "zs record: restore: %s is '%s', was '%s'\n", knobs[k].path, now,
				want);
			bad++;
		}
	}
	if (s->swap_file[0] && swap_active(s->swap_file)) {
		fprintf(stderr, "zs record: restore: %s still in /proc/swaps\n", s->swap_file);
		bad++;
	}
	if (bad)
		fprintf(stderr, "zs record: %d setting(s) not restored; %s keeps what they were\n", bad,
			STATE_PATH);
	else
		unlink(STATE_PATH);
	return bad;
}

/* ---- Setting the kernel up ---- */

/* The swap file: preallocated, a v1 swap header, swapon at the highest priority. */
static int make_swap(const char *path, size_t P, uint64_t pages)
{
	struct statfs sfs;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	if (statfs(dir, &sfs) == 0 &&
	    ((unsigned long)sfs.f_type == TMPFS_MAGIC_ || (unsigned long)sfs.f_type == RAMFS_MAGIC_)) {
		fprintf(stderr, "zs record: --swap-file %s: on tmpfs/ramfs, which cannot hold swap; "
				"choose a file on a disk filesystem\n", path);
		return -EINVAL;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int err = -errno;
		fprintf(stderr, "zs record: swap file %s: %s\n", path, strerror(errno));
		return err;
	}
	off_t bytes = (off_t)(pages * P);
	int err = posix_fallocate(fd, 0, bytes);
	if (err) {
		fprintf(stderr, "zs record: swap file %s (%lld MiB): %s\n", path,
			(long long)(bytes >> 20), strerror(err));
		close(fd);
		return -err;
	}
	/* The swap header (the first page): version 1, the last usable page, no bad pages,
	 * and the magic "SWAPSPACE2" in the page's last 10 bytes. */
	unsigned char *h = calloc(1, P);
	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	uint32_t info[3] = { 1, (uint32_t)(pages - 1), 0 };
	memcpy(h + 1024, info, sizeof(info));
	memcpy(h + P - 10, "SWAPSPACE2", 10);
	if (pwrite(fd, h, P, 0) != (ssize_t)P || fsync(fd)) {
		err = -errno;
		fprintf(stderr, "zs record: swap file %s: %s\n", path, strerror(errno));
	}
	free(h);
	close(fd);
	if (err)
		return err;
	if (swapon(path, SWAP_FLAG_PREFER | (32767 & SWAP_FLAG_PRIO_MASK))) {
		err = -errno;
		fprintf(stderr, "zs record: swapon %s: %s\n", path, strerror(errno));
	}
	return err;
}

static int set_knob(const char *path, const char *val)
{
	int err = zs_sysfs_write(path, val);
	char now[64] = "";
	if (!err)
		err = zs_sysfs_read(path, now, sizeof(now));
	if (!err && strcmp(now, val))
		err = -EINVAL;
	if (err)
		fprintf(stderr, "zs record: %s <- %s: %s%s%s\n", path, val, strerror(-err),
			now[0] ? ", reads " : "", now);
	return err;
}

/* MemTotal in pages: the kernel's totalram_pages(), which max_pool_percent is of. */
static uint64_t totalram_pages(size_t P)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024 / P;
}

/*
 * Everything the run needs, each change written to the state file before it
 * is made.  need_pages: the most pages the pool may have to hold.
 */
int setup_kernel(struct zrec *r, struct settings *s, uint64_t need_pages,
			uint64_t swap_pages)
{
	int err;
	if (s->debugfs_ours && mount("debugfs", DEBUGFS, "debugfs", 0, NULL)) {
		fprintf(stderr, "zs record: mount debugfs on %s: %s\n", DEBUGFS, strerror(errno));
		s->debugfs_ours = 0;
		return -errno;
	}
	if (r->o->swap_file)
		snprintf(s->swap_file, sizeof(s->swap_file), "%s", r->o->swap_file);
	else
		snprintf(s->swap_file, sizeof(s->swap_file), "/var/tmp/libzs-zswap-record.%ld.swap",
			 (long)getpid());
	if ((err = write_state(s))) {
		fprintf(stderr, "zs record: %s: %s\n", STATE_PATH, strerror(-err));
		s->swap_file[0] = 0;
		return err;
	}
	if (access(s->swap_file, F_OK) == 0) {
		fprintf(stderr, "zs record: swap file %s exists already; not touching it\n",
			s->swap_file);
		s->swap_file[0] = 0;
		write_state(s);
		return -EEXIST;
	}
	if ((err = make_swap(s->swap_file, r->P, swap_pages)))
		return err;
	if ((err = set_knob(PAGE_CLUSTER, "0")))
		return err;
	/* The pool limit: room for every page stored raw, and some. */
	r->totalram = totalram_pages(r->P);
	uint64_t pct = strtoull(s->max_pool, NULL, 10);
	uint64_t want = r->totalram ? ((need_pages + 256) * 100 + r->totalram - 1) / r->totalram + 1 : 100;
	if (want > 100) {
		fprintf(stderr, "zs record: %llu pages need more than all of this machine's memory "
				"(%llu pages) as zswap pool; use fewer --pages\n",
			(unsigned long long)need_pages, (unsigned long long)r->totalram);
		return -E2BIG;
	}
	if (pct < want)
		pct = want;
	snprintf(r->max_pool, sizeof(r->max_pool), "%llu", (unsigned long long)pct);
	if ((err = set_knob(PARAM "compressor", r->o->comp)) ||
	    (err = set_knob(PARAM "max_pool_percent", r->max_pool)) ||
	    (err = set_knob(PARAM "shrinker_enabled", "N")) || (err = set_knob(PARAM "enabled", "Y")))
		return err;
	if (access(ZSWAP_DBG "stored_pages", R_OK)) {
		fprintf(stderr, "zs record: %sstored_pages: %s (zswap's debugfs counters)\n", ZSWAP_DBG,
			strerror(errno));
		return -ENOENT;
	}
	struct ctr c;
	if ((err = read_counters(&c))) {
		fprintf(stderr, "zs record: zswap counters: %s\n", strerror(-err));
		return err;
	}
	if (c.v[C_STORED] || c.v[C_POOL]) {
		fprintf(stderr, "zs record: zswap already holds %lld pages in %lld pool pages (another "
				"swap user on this machine?): the trace must start from an empty pool\n",
			(long long)c.v[C_STORED], (long long)(c.v[C_POOL] / (int64_t)r->P));
		return -EBUSY;
	}
	return 0;
}

/* The lock every user of the kernel's zswap/swap takes, waiting at most wait_s seconds
 * (UINT64_MAX: for ever).  fd, or -1 (interrupted, timed out or error, reported). */
int take_lock(uint64_t wait_s, int given_fd)
{
	int fd = given_fd;
	if (fd >= 0) {
		/* --lock-fd: the caller opened (and normally holds) the lock file. */
		struct stat a, b;
		if (fstat(fd, &a) || stat(LOCK_PATH, &b) || a.st_dev != b.st_dev ||
		    a.st_ino != b.st_ino) {
			fprintf(stderr, "zs record: --lock-fd %d is not an open %s\n", fd, LOCK_PATH);
			return -1;
		}
	} else if ((fd = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		fprintf(stderr, "zs record: %s: %s\n", LOCK_PATH, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	fprintf(stderr, "zs record: waiting for %s (another user of the kernel's zswap/swap "
			"holds it)\n", LOCK_PATH);
	double end = tool_now() + (wait_s == UINT64_MAX ? 1e18 : (double)wait_s);
	for (;;) {
		if (wait_s == UINT64_MAX ? flock(fd, LOCK_EX) == 0 : flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (stop_requested() || (errno != EINTR && errno != EWOULDBLOCK)) {
			if (!g_stop)
				fprintf(stderr, "zs record: flock %s: %s\n", LOCK_PATH, strerror(errno));
			break;
		}
		if (tool_now() >= end) {
			fprintf(stderr, "zs record: %s still held after %llu s (--lock-wait): giving "
					"up\n", LOCK_PATH, (unsigned long long)wait_s);
			break;
		}
		usleep(100000);
	}
	if (fd != given_fd)
		close(fd);
	return -1;
}

/* Under the lock: restore what a dead earlier run left, save what we will change.  0 or -1. */
int take_over(struct settings *saved)
{
	/* Another tool's run that died leaves its own state file: its settings are not the
	 * machine's, and saving them as "before" would keep them. */
	glob_t g;
	int foreign = 0;
	if (glob("/run/libzs-*.state", 0, NULL, &g) == 0) {
		for (size_t k = 0; k < g.gl_pathc; k++)
			if (strcmp(g.gl_pathv[k], STATE_PATH)) {
				fprintf(stderr, "zs record: %s exists: another tool's run on the kernel's "
						"zswap did not restore its settings; restore them with that tool "
						"first (scripts/zswap_capture.sh --restore for its own)\n",
					g.gl_pathv[k]);
				foreign = 1;
			}
		globfree(&g);
	}
	if (foreign)
		return -1;
	struct settings stale;
	int st = read_state(&stale);
	if (st < 0) {
		fprintf(stderr, "zs record: %s is unreadable; restore by hand and remove it\n",
			STATE_PATH);
		return -1;
	}
	if (st > 0) {
		fprintf(stderr, "zs record: an earlier run (pid %ld) did not restore the settings; "
				"restoring them from %s\n", stale.pid, STATE_PATH);
		if (settings_restore(&stale))
			return -1;
	}
	if (save_settings(saved))
		return -1;
	int err = write_state(saved);
	if (err) {
		fprintf(stderr, "zs record: %s: %s\n", STATE_PATH, strerror(-err));
		return -1;
	}
	return 0;
}
