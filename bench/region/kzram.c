/*
 * bench_region's kernel side: a zram swap device made for the run (hot_add,
 * comp, disksize, mkswap, swapon) and taken down at the end, on error and on
 * SIGINT/SIGTERM.  Split from bench_region.c: root-only plumbing, apart from
 * the measurements.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include "region.h"

/* ---- kernel zram swap device ---- */

int kdev = -1;
static int kswap_on;
static char kdevpath[64];

static int write_sys(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int e = n < 0 ? -errno : 0;
	close(fd);
	return e;
}

static int run_cmd(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (nul >= 0) {
			dup2(nul, 1);
			dup2(nul, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void kzram_down(void)
{
	char buf[32];
	if (kdev < 0)
		return;
	if (kswap_on)
		swapoff(kdevpath);
	kswap_on = 0;
	snprintf(buf, sizeof(buf), "/sys/block/zram%d/reset", kdev);
	write_sys(buf, "1");
	snprintf(buf, sizeof(buf), "%d", kdev);
	write_sys("/sys/class/zram-control/hot_remove", buf);
	kdev = -1;
}

pid_t live_pids[MAXP];   /* workers running now (processes mode) */
volatile int nlive;

void on_signal(int sig)
{
	/* Workers first (they hold swapped pages and would wait at a barrier forever). */
	for (int i = 0; i < nlive; i++)
		if (live_pids[i] > 0)
			kill(live_pids[i], SIGKILL);
	for (int i = 0; i < nlive; i++)
		if (live_pids[i] > 0)
			waitpid(live_pids[i], NULL, 0);
	kzram_down();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* hot_add, comp, disksize, mkswap, swapon.  0 or -1 with msg. */
int kzram_up(uint64_t bytes, char *msg, size_t len)
{
	char path[96], buf[32];
	if (geteuid() != 0 || access("/sys/class/zram-control/hot_add", R_OK)) {
		snprintf(msg, len, "kernel rows skipped: need root and /sys/class/zram-control "
			 "(modprobe zram)");
		return -1;
	}
	int fd = open("/sys/class/zram-control/hot_add", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(msg, len, "kernel rows skipped: hot_add failed");
		return -1;
	}
	buf[n] = 0;
	kdev = atoi(buf);
	snprintf(kdevpath, sizeof(kdevpath), "/dev/zram%d", kdev);
	snprintf(path, sizeof(path), "/sys/block/zram%d/comp_algorithm", kdev);
	if (write_sys(path, comp)) {
		snprintf(msg, len, "kernel rows skipped: zram has no %s", comp);
		kzram_down();
		return -1;
	}
	snprintf(path, sizeof(path), "/sys/block/zram%d/disksize", kdev);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bytes);
	if (write_sys(path, buf)) {
		snprintf(msg, len, "kernel rows skipped: disksize failed");
		kzram_down();
		return -1;
	}
	char *mk[] = { "mkswap", kdevpath, NULL };
	if (run_cmd(mk) != 0) {
		snprintf(msg, len, "kernel rows skipped: mkswap %s failed", kdevpath);
		kzram_down();
		return -1;
	}
	if (swapon(kdevpath, SWAP_FLAG_PREFER | (32767 & SWAP_FLAG_PRIO_MASK))) {
		snprintf(msg, len, "kernel rows skipped: swapon %s: %s", kdevpath, strerror(errno));
		kzram_down();
		return -1;
	}
	kswap_on = 1;
	return 0;
}

void kzram_mm_stat(uint64_t *v)
{
	char path[96];
	memset(v, 0, 9 * sizeof(*v));
	snprintf(path, sizeof(path), "/sys/block/zram%d/mm_stat", kdev);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	for (int i = 0; i < 9; i++)
		if (fscanf(f, "%lu", (unsigned long *)&v[i]) != 1)
			break;
	fclose(f);
}
