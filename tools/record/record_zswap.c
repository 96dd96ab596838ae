/*
 * `zs record --zswap`: records a zswap-trace of the running kernel's zswap
 * (format: docs/trace-format.md), so that libzs's zsmalloc can be checked
 * against the kernel's zswap pool operation by operation the way zram traces
 * check it against zram.  Options and page loading are cmd_record.c's
 * (record.h); the kernel side is these files: this one owns a run (the
 * attempts, the signals that stop it, the trace's header and summary, and
 * that the settings are restored on every way out), record_zswap_setup.c
 * what a run changes and its restore, record_zswap_ops.c how it measures
 * (the counters and the op-by-op recorder), record_zswap_fill.c the memcg
 * fill; record_zswap.h joins them.
 *
 * Why this way (docs/trace-format.md, "How `zs record --zswap` measures"):
 * zswap has no per-allocation tracing here, but with vm.page-cluster=0 a
 * single-page MADV_PAGEOUT is exactly one zswap store (or one zero page in
 * the swap layer's zeromap), a write fault on a swapped page exactly one
 * load and MADV_DONTNEED exactly one invalidate.  After each operation the
 * debugfs and vmstat counters must have moved by exactly that operation;
 * the store's size is liblzo2's lzo1x_1_15 (libzs's "lzo"), which is the
 * kernel's lzo byte for byte, and its swap offset comes from pagemap.
 *
 * Settings changed for the run (and restored at the end, on errors and on
 * SIGINT/SIGTERM/SIGHUP; a state file in /run lets the next run restore
 * them after a SIGKILL): a swap file of our own (swapon, swapoff, removed),
 * debugfs (mounted if it was not), vm.page-cluster, zswap's enabled,
 * compressor, max_pool_percent and shrinker_enabled.  The whole run holds an
 * exclusive flock on /run/libzs-kernel-zswap.lock, the lock every user of the
 * kernel's zswap/swap in this project takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "opts.h"
#include "record.h"
#include "record_zswap.h"
#include "zs/harness.h"

/* ---- Signals: a request to stop, acted on between operations ---- */

volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	if (!g_stop)
		g_stop = sig;
}

void stop_signals(int install)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = install ? on_signal : SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: a blocking wait returns EINTR */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

int stop_requested(void)
{
	static int said;
	if (g_stop && !said++)
		fprintf(stderr, "zs record: %s: stopping and restoring the settings\n",
			strsignal(g_stop));
	return g_stop != 0;
}

/* ---- The trace ---- */

void trace_header(struct zrec *r, const char *mode)
{
	struct utsname u;
	char chain[16];
	uname(&u);
	record_kernel_chain(chain, sizeof(chain));
	fprintf(r->out,
		"# zswap-trace 1\n# page_size %zu\n# comp %s\n# kernel %s\n# chain_size %s\n"
		"# max_pool_percent %s\n# totalram_pages %llu\n# mode %s\n",
		r->P, r->o->comp, u.release, chain, r->max_pool, (unsigned long long)r->totalram, mode);
	/* The files, as many as fit a line a reader keeps whole (160 bytes), then "...". */
	fprintf(r->out, "# data");
	size_t used = 0;
	for (int k = 0; k < r->o->npaths; k++) {
		size_t len = strlen(r->o->paths[k]) + 1;
		if (k && used + len > 100) {
			fprintf(r->out, " ...");
			break;
		}
		fprintf(r->out, " %s", r->o->paths[k]);
		used += len;
	}
	fprintf(r->out, " pages %zu", r->n);
	if (!strcmp(mode, "ops"))
		fprintf(r->out, " seed %llu ops %llu p_load %g p_invalidate %g",
			(unsigned long long)r->o->seed, (unsigned long long)r->o->nops, r->o->p_load,
			r->o->p_inval);
	else
		fprintf(r->out, " memcg_limit %llu", (unsigned long long)r->o->memcg_limit);
	fprintf(r->out, " sizes lzo1x_1_15 (zs record --zswap)\n");
}

/* ---- The run: attempts, and what is undone at the end ---- */

/* Back to an empty pool for another attempt: our buffer goes (and its entries with it),
 * a swapoff/swapon of our swap file brings back whatever else went to it, and the trace
 * starts again.  0, or -1 after a message. */
static int attempt_reset(struct zrec *r, const struct settings *s)
{
	if (r->buf)
		munmap(r->buf, r->n * r->P);
	r->buf = NULL;
	free(r->pg);
	r->pg = NULL;
	for (int k = 0; k < NST; k++) {
		free(r->set[k]);
		r->set[k] = NULL;
		r->cnt[k] = 0;
	}
	r->ops = r->nload = r->ninval = r->retries = r->skipped = 0;
	memset(r->nstore, 0, sizeof(r->nstore));
	r->why[0] = 0;
	r->retryable = 0;
	r->swap_type = -1;
	r->rng = r->o->seed;
	if (swapoff(s->swap_file) || swapon(s->swap_file, SWAP_FLAG_PREFER | (32767 & SWAP_FLAG_PRIO_MASK))) {
		fprintf(stderr, "zs record: swapoff/swapon %s: %s\n", s->swap_file, strerror(errno));
		return -1;
	}
	struct ctr c;
	if (read_counters(&c) || c.v[C_STORED] || c.v[C_POOL]) {
		/* another swap device, or a process paging out again the moment our swap was back */
		snprintf(r->why, sizeof(r->why), "zswap still holds %lld pages after swapoff and "
			 "swapon of our swap file: cannot start again from an empty pool",
			 (long long)c.v[C_STORED]);
		fprintf(stderr, "zs record: %s\n", r->why);
		return -1;
	}
	if (fflush(r->out) || ftruncate(fileno(r->out), 0) || fseek(r->out, 0, SEEK_SET)) {
		fprintf(stderr, "zs record: %s: %s\n", r->o->out_path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Record with the kernel set up: up to --attempts tries.  0, -1 (failed, reported),
 * -2 (interrupted). */
static int record_attempts(struct zrec *r, struct settings *saved)
{
	int res;
	for (int attempt = 1;; attempt++) {
		res = r->o->memcg_fill ? record_fill(r, saved) : record_ops(r);
		if (res != -1 || !r->retryable || attempt >= (int)r->o->attempts || g_stop)
			break;
		fprintf(stderr, "zs record: attempt %d of %llu: %s; starting over\n", attempt,
			(unsigned long long)r->o->attempts, r->why);
		if (attempt_reset(r, saved)) {
			/* the trace still holds the failed attempt's records: say where it ends */
			fprintf(r->out, "# ended early: %s\n",
				r->why[0] ? r->why : "could not start a new attempt");
			return -1;
		}
		r->attempts = attempt + 1;
	}
	if (res == -2)
		fprintf(r->out, "# ended early: interrupted by %s\n", strsignal(g_stop));
	if (res == -1 && r->why[0]) {
		fprintf(r->out, "# ended early: %s\n", r->why);
		fprintf(stderr, "zs record: %s; the trace ends there (%ld records)\n", r->why, r->ops);
	}
	if (r->o->progress && !r->o->memcg_fill) {
		progress_line("  %ld operations", r->ops);
		progress_done();
	}
	return res;
}

/* The pages, their sizes and the options with their defaults filled in.  0 or -1. */
static int prepare(struct zrec *r, struct rec_opts *oo, struct zs_pageset *ps)
{
	if (record_load_pages(oo, r->P, ps))
		return -1;
	r->ps = ps;
	r->n = ps->npages;
	if (lzo_page_sizes(r))
		return -1;
	if (!oo->nops_set)
		oo->nops = r->n;
	if (oo->memcg_fill && !oo->memcg_limit) {
		oo->memcg_limit = ((uint64_t)r->n * r->P / 3 + (1 << 20) - 1) & ~(uint64_t)((1 << 20) - 1);
		if (oo->memcg_limit < ((uint64_t)2 << 20))
			oo->memcg_limit = (uint64_t)2 << 20;
	}
	r->pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (r->pm_fd < 0) {
		fprintf(stderr, "zs record: /proc/self/pagemap: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void summary(const struct zrec *r)
{
	char tries[48] = "";
	if (r->attempts > 1)
		snprintf(tries, sizeof(tries), " (attempt %d)", r->attempts);
	if (r->o->memcg_fill)
		fprintf(stderr, "zs record: %s: mode fill: %ld 's' records (%ld compressed, %ld raw; "
				"%ld zero pages left out) and one '='%s\n",
			r->o->out_path, r->nstore[0] + r->nstore[1], r->nstore[0], r->nstore[1],
			r->nstore[2], tries);
	else
		fprintf(stderr, "zs record: %s: %ld records: %ld stores (%ld compressed, %ld raw, %ld "
				"zero pages), %ld loads, %ld invalidates on %zu pages%s; page-outs "
				"repeated %ld times, %ld given up\n",
			r->o->out_path, r->ops, r->nstore[0] + r->nstore[1] + r->nstore[2], r->nstore[0],
			r->nstore[1], r->nstore[2], r->nload, r->ninval, r->n, tries, r->retries,
			r->skipped);
}

int record_zswap(const struct rec_opts *o)
{
	struct rec_opts oo = *o;
	struct zrec r = { .o = &oo, .P = (size_t)sysconf(_SC_PAGESIZE), .pm_fd = -1,
			  .swap_type = -1, .rng = o->seed, .attempts = 1 };
	struct zs_pageset ps = { 0 };
	struct settings saved;
	int lock = -1, changed = 0, rc = 2;
	if (geteuid() != 0) {
		fprintf(stderr, "zs record: --zswap needs root (swap file, zswap parameters, debugfs)\n");
		return 2;
	}
	if (access(PARAM "enabled", F_OK)) {
		fprintf(stderr, "zs record: no zswap in this kernel (%s missing: CONFIG_ZSWAP)\n",
			PARAM "enabled");
		return 2;
	}
	if (prepare(&r, &oo, &ps))
		goto out;
	stop_signals(1);
	if ((lock = take_lock(oo.lock_wait, oo.lock_fd)) < 0 || stop_requested() || take_over(&saved))
		goto out;
	changed = 1;
	r.out = fopen(o->out_path, "we");
	if (!r.out) {
		fprintf(stderr, "zs record: %s: %s\n", o->out_path, strerror(errno));
		goto out;
	}
	/* Swap: every page at once plus room for the allocator's clusters. */
	uint64_t swap_pages = r.n + r.n / 8 + 2048;
	if (setup_kernel(&r, &saved, r.n, swap_pages) || stop_requested())
		goto out;
	int res = record_attempts(&r, &saved);
	if (fclose(r.out) && !res) {
		fprintf(stderr, "zs record: %s: %s\n", o->out_path, strerror(errno));
		res = -1;
	}
	r.out = NULL;
	if (!res)
		summary(&r);
	rc = res ? 2 : 0;
out:;
	int interrupted = g_stop;
	if (r.out)
		fclose(r.out);
	if (r.buf) {
		munmap(r.buf, r.n * r.P); /* frees whatever is still swapped */
		munlockall();
	}
	if (changed) {
		/* Signals during the restore are held until it is done. */
		sigset_t all, old;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &old);
		if (settings_restore(&saved))
			rc = 2;
		else if (interrupted || rc)
			fprintf(stderr, "zs record: settings restored\n");
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (lock >= 0 && lock != oo.lock_fd)
		close(lock); /* a --lock-fd stays the caller's, and so does its lock */
	if (r.pm_fd >= 0)
		close(r.pm_fd);
	free(r.pg);
	for (int k = 0; k < NST; k++)
		free(r.set[k]);
	free(r.size);
	free(r.flag);
	zs_pageset_free(&ps);
	stop_signals(0);
	if (interrupted) {
		raise(interrupted); /* the default action: die of the signal, as asked */
		return 2;
	}
	return rc;
}
