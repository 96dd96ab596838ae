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

/* The device itself is the harness's (zs_kzram_dev_*); this file adds the swap. */
static struct zs_kzram_dev kz = { .dev = -1, .fd = -1 };
int kdev = -1;
static int kswap_on;

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

/* kdev, not kz.dev: a forked worker sets kdev = -1 so that only the parent tears down. */
void kzram_down(void)
{
	if (kdev < 0 || kz.dev < 0)
		return;
	if (kswap_on)
		swapoff(kz.node);
	kswap_on = 0;
	zs_kzram_dev_remove(&kz);
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
	char why[192];
	if (!zs_kzram_available()) {
		snprintf(msg, len, "kernel rows skipped: need root and /sys/class/zram-control "
			 "(modprobe zram)");
		return -1;
	}
	if (zs_kzram_dev_add(&kz, comp, bytes, 0, why, sizeof(why))) {
		snprintf(msg, len, "kernel rows skipped: %s", why);
		return -1;
	}
	kdev = kz.dev;
	char *mk[] = { "mkswap", kz.node, NULL };
	if (run_cmd(mk) != 0) {
		snprintf(msg, len, "kernel rows skipped: mkswap %s failed", kz.node);
		kzram_down();
		return -1;
	}
	if (swapon(kz.node, SWAP_FLAG_PREFER | (32767 & SWAP_FLAG_PRIO_MASK))) {
		snprintf(msg, len, "kernel rows skipped: swapon %s: %s", kz.node, strerror(errno));
		kzram_down();
		return -1;
	}
	kswap_on = 1;
	return 0;
}

void kzram_mm_stat(uint64_t *v)
{
	zs_kzram_dev_mm_stat(&kz, v);
}
