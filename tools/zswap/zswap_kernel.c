/*
 * `zs zswap --vs-kernel`: the same pages through the running kernel's zswap
 * (single-page MADV_PAGEOUT with page-cluster 0, then touches), for the
 * kernel's row.  Its own file because it is the only part of `zs zswap` that
 * changes system settings: it takes the flock every user of the kernel's
 * zswap in this project takes, and restores every setting it changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/swap.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util.h"
#include "zs/harness.h"
#include "zswap_cmd.h"

#define KLOCK "/run/libzs-kernel-zswap.lock"
#define KPARAM "/sys/module/zswap/parameters/"
#define KDBG "/sys/kernel/debug"

static uint64_t kdbg(const char *name)
{
	char path[128], buf[64];
	snprintf(path, sizeof(path), KDBG "/zswap/%s", name);
	return zs_sysfs_read(path, buf, sizeof(buf)) ? 0 : strtoull(buf, NULL, 10);
}

static uint64_t kvmstat(const char *key)
{
	FILE *f = fopen("/proc/vmstat", "r");
	char k[64];
	unsigned long long v, out = 0;

	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", k, &v) == 2)
		if (!strcmp(k, key))
			out = v;
	fclose(f);
	return out;
}

static const char *const kparams[] = { "enabled", "compressor", "max_pool_percent",
				       "accept_threshold_percent", "shrinker_enabled" };
#define NKPARAMS (sizeof(kparams) / sizeof(kparams[0]))

struct ksaved {
	char val[NKPARAMS][64];
	char page_cluster[16];
	int debugfs_ours, swap_on;
	char swapfile[256];
};

static void krestore(struct ksaved *s)
{
	if (s->swap_on && swapoff(s->swapfile))
		fprintf(stderr, "zs zswap: --vs-kernel: swapoff %s: %s\n", s->swapfile, strerror(errno));
	s->swap_on = 0;
	if (s->swapfile[0])
		unlink(s->swapfile);
	/* enabled last, so that the other knobs change while it is still on or off as it was */
	for (size_t i = NKPARAMS; i-- > 0;) {
		char path[128];
		if (!s->val[i][0])
			continue;
		snprintf(path, sizeof(path), KPARAM "%s", kparams[i]);
		if (zs_sysfs_write(path, s->val[i]))
			fprintf(stderr, "zs zswap: --vs-kernel: %s not restored\n", kparams[i]);
	}
	if (s->page_cluster[0])
		zs_sysfs_write("/proc/sys/vm/page-cluster", s->page_cluster);
	if (s->debugfs_ours && umount(KDBG))
		fprintf(stderr, "zs zswap: --vs-kernel: debugfs busy, left mounted\n");
}

static uint64_t pagemap_entry(int fd, const void *addr)
{
	uint64_t e = 0;
	if (pread(fd, &e, 8, (off_t)((uintptr_t)addr / 4096 * 8)) != 8)
		return 0;
	return e;
}

/* The pages through the kernel's zswap, one page at a time.  0, or -1 with k->msg. */
int kernel_run(const struct zs_pageset *ps, int quiet, struct kside *k)
{
	struct ksaved s;
	sigset_t block, old;
	int lock = -1, pm = -1, ret = -1;
	unsigned char *area = MAP_FAILED;
	size_t n = ps->npages, bytes = n * 4096;
	struct statfs sf;

	memset(&s, 0, sizeof(s));
	memset(k, 0, sizeof(*k));
	if (geteuid()) {
		snprintf(k->msg, sizeof(k->msg), "needs root");
		return -1;
	}
	if (access("/sys/module/zswap/parameters/enabled", W_OK)) {
		snprintf(k->msg, sizeof(k->msg), "no zswap in this kernel");
		return -1;
	}
	/* Ctrl-C waits until every setting is back (then it takes effect). */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigprocmask(SIG_BLOCK, &block, &old);
	lock = open(KLOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock < 0) {
		snprintf(k->msg, sizeof(k->msg), "%s: %s", KLOCK, strerror(errno));
		goto out;
	}
	if (flock(lock, LOCK_EX | LOCK_NB)) {
		if (!quiet)
			fprintf(stderr, "zs zswap: --vs-kernel: waiting for %s...\n", KLOCK);
		if (flock(lock, LOCK_EX)) {
			snprintf(k->msg, sizeof(k->msg), "flock: %s", strerror(errno));
			goto out;
		}
	}
	if (access("/run/libzs-zswap-capture.state", F_OK) == 0 ||
	    access("/run/libzs-kernel-zswap.state", F_OK) == 0) {
		snprintf(k->msg, sizeof(k->msg), "a killed capture or recorder left its state file "
			 "in /run; run it again to restore its settings first");
		goto out;
	}
	for (size_t i = 0; i < NKPARAMS; i++) {
		char path[128];
		snprintf(path, sizeof(path), KPARAM "%s", kparams[i]);
		if (zs_sysfs_read(path, s.val[i], sizeof(s.val[i]))) {
			snprintf(k->msg, sizeof(k->msg), "cannot read %s", path);
			goto out;
		}
	}
	zs_sysfs_read("/proc/sys/vm/page-cluster", s.page_cluster, sizeof(s.page_cluster));
	if (access(KDBG "/zswap", F_OK) && statfs(KDBG, &sf) == 0 && sf.f_type != 0x64626720) {
		if (mount("none", KDBG, "debugfs", 0, NULL)) {
			snprintf(k->msg, sizeof(k->msg), "mount debugfs: %s", strerror(errno));
			goto out;
		}
		s.debugfs_ours = 1;
	}
	snprintf(s.swapfile, sizeof(s.swapfile), "/var/tmp/libzs-zs-zswap.%d.swap", (int)getpid());
	{
		uint64_t sz = bytes + (64u << 20);
		int fd = open(s.swapfile, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		char cmd[512];
		if (fd < 0 || posix_fallocate(fd, 0, (off_t)sz)) {
			snprintf(k->msg, sizeof(k->msg), "swap file %s: %s", s.swapfile, strerror(errno));
			if (fd >= 0)
				close(fd);
			else
				s.swapfile[0] = 0; /* not ours: do not remove */
			goto restore;
		}
		close(fd);
		snprintf(cmd, sizeof(cmd), "mkswap -q '%s' >/dev/null 2>&1", s.swapfile);
		if (system(cmd)) {
			snprintf(k->msg, sizeof(k->msg), "mkswap %s failed", s.swapfile);
			goto restore;
		}
		if (swapon(s.swapfile, SWAP_FLAG_PREFER | (32767 << SWAP_FLAG_PRIO_SHIFT))) {
			snprintf(k->msg, sizeof(k->msg), "swapon: %s", strerror(errno));
			goto restore;
		}
		s.swap_on = 1;
	}
	if (zs_sysfs_write("/proc/sys/vm/page-cluster", "0") || zs_sysfs_write(KPARAM "compressor", "lzo") ||
	    zs_sysfs_write(KPARAM "max_pool_percent", "20") || zs_sysfs_write(KPARAM "shrinker_enabled", "N") ||
	    zs_sysfs_write(KPARAM "enabled", "Y")) {
		snprintf(k->msg, sizeof(k->msg), "cannot set zswap's parameters");
		goto restore;
	}
	area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (area == MAP_FAILED || pm < 0) {
		snprintf(k->msg, sizeof(k->msg), "mmap/pagemap: %s", strerror(errno));
		goto restore;
	}
	madvise(area, bytes, MADV_NOHUGEPAGE);
	memcpy(area, ps->data, bytes);
	uint64_t st0 = kdbg("stored_pages"), inc0 = kdbg("stored_incompressible_pages");
	uint64_t pool0 = kdbg("pool_total_size"), out0 = kvmstat("zswpout"),
		 in0 = kvmstat("zswpin"), zero0 = kvmstat("swpout_zero");
	double t = tool_now();
	for (size_t i = 0; i < n; i++)
		madvise(area + i * 4096, 4096, MADV_PAGEOUT);
	k->store_ns = (tool_now() - t) * 1e9 / (double)n;
	for (size_t i = 0; i < n; i++)
		k->not_swapped += !(pagemap_entry(pm, area + i * 4096) & (1ull << 62));
	k->stored = kdbg("stored_pages") - st0;
	k->incompressible = kdbg("stored_incompressible_pages") - inc0;
	k->pool_bytes = kdbg("pool_total_size") - pool0;
	k->zswpout = kvmstat("zswpout") - out0;
	k->zero = kvmstat("swpout_zero") - zero0;
	t = tool_now();
	for (size_t i = 0; i < n; i++)
		(void)*(volatile unsigned char *)(area + i * 4096);
	k->load_ns = (tool_now() - t) * 1e9 / (double)n;
	k->zswpin = kvmstat("zswpin") - in0;
	for (size_t i = 0; i < n; i++)
		k->mismatches += memcmp(area + i * 4096, ps->data + i * 4096, 4096) != 0;
	ret = 0;
restore:
	if (area != MAP_FAILED)
		munmap(area, bytes);
	if (pm >= 0)
		close(pm);
	krestore(&s);
out:
	if (lock >= 0)
		close(lock);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}
