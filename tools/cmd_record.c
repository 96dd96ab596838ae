/*
 * zs record: records a zram-trace on the running kernel, so that the
 * kernel developer's loop (record here, `zs replay` there, change a policy,
 * replay again) needs nothing outside this repository.  The trace format is
 * docs/trace-format.md; tools/lib/trace.c is its reader.
 *
 * Method: a fresh zram device (hot_add, removed again at the end), pages of
 * the given files written one 4 KiB O_DIRECT write at a time, slots
 * discarded with BLKDISCARD and the pool compacted through sysfs; after
 * every operation the device's mm_stat is read and written as an '=' record.
 * A write's stored size and kind are the change in compr_data_size,
 * same_pages and huge_pages that the write caused (plus what the slot held
 * before, for overwrites), so the trace says what the kernel stored, not
 * what a user-space compressor would have.
 *
 * Two workloads: "fill" (write every page, discard a share, overwrite a
 * share, compact, refill a share, compact) and "mix" (fill, then random
 * writes, discards and compactions, then compact and discard everything),
 * which exercises the allocator's placement and compaction decisions.
 * Needs root and CONFIG_ZRAM.  Exit: 0 ok, 2 usage or kernel error.
 *
 * `zs record --zswap` records the kernel's zswap instead (record_zswap.c);
 * the option parser and the page loader here serve both (record.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cmds.h"
#include "compare.h"
#include "util.h"
#include "opts.h"
#include "kclasses.h"
#include "record.h"
#include "zs/zram.h"
#include "zs/harness.h"

struct rec {
	struct zs_kzram_dev k;   /* the device (the harness's driver) */
	size_t P;
	FILE *out;
	uint64_t prev[9];
	struct { uint32_t size; uint8_t kind, used; } *slot; /* kind: 'n', 's' or 'h' */
	size_t nslots, stored;
	uint64_t rng;
	long ops;
	int progress;
	/* the kernel's class table (kclasses.h), where debugfs shows it; "" off */
	char kpath[128];
	uint64_t kevery;
	long ktables;
};

/* The device a signal handler removes; NULL outside setup..teardown. */
static struct zs_kzram_dev *volatile g_k;

static double rand01(uint64_t *s)
{
	return (double)(tool_rand64(s) >> 11) / 9007199254740992.0;
}

static void on_signal(int sig)
{
	if (g_k)
		zs_kzram_dev_remove_signal(g_k);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* CONFIG_ZSMALLOC_CHAIN_SIZE of the running kernel, or "?" (record.h). */
void record_kernel_chain(char *out, size_t len)
{
	struct utsname u;
	char cmd[256];
	snprintf(out, len, "?");
	uname(&u);
	snprintf(cmd, sizeof(cmd),
		 "(gzip -dc /proc/config.gz || cat /boot/config-%s) 2>/dev/null", u.release);
	FILE *p = popen(cmd, "r");
	if (!p)
		return;
	char line[256];
	while (fgets(line, sizeof(line), p)) {
		unsigned v;
		if (sscanf(line, "CONFIG_ZSMALLOC_CHAIN_SIZE=%u", &v) == 1)
			snprintf(out, len, "%u", v);
	}
	pclose(p);
}

/*
 * The kernel's class table as `k` lines after the record just written
 * (docs/trace-format.md).  A table that cannot be read or parsed stops the
 * capture with a warning; the trace stays a valid one without it.
 */
static void record_classes(struct rec *r)
{
	static char text[1 << 17];
	static struct kclass_row rows[1024];
	FILE *f = fopen(r->kpath, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	char err[128] = "";
	int k = n ? kclasses_parse(text, rows, 1024, err, sizeof err) : -1;
	if (k < 0) {
		fprintf(stderr, "zs record: warning: %s: %s; class tables no longer recorded\n",
			r->kpath, n ? err : "cannot read it");
		r->kpath[0] = 0;
		return;
	}
	for (int i = 0; i < k; i++)
		fprintf(r->out, "k %u %llu %llu %llu\n", rows[i].cls,
			(unsigned long long)rows[i].obj_allocated, (unsigned long long)rows[i].obj_used,
			(unsigned long long)rows[i].pages_used);
	r->ktables++;
}

static int record_state(struct rec *r)
{
	uint64_t v[9];
	int err = zs_kzram_dev_mm_stat(&r->k, v);
	if (err)
		return err;
	fprintf(r->out, "= %llu %llu %llu %llu %llu %llu\n", (unsigned long long)(v[2] / r->P),
		(unsigned long long)v[6], (unsigned long long)(v[0] / r->P),
		(unsigned long long)v[1], (unsigned long long)v[5], (unsigned long long)v[7]);
	memcpy(r->prev, v, sizeof(v));
	r->ops++;
	if (r->kpath[0] && !(r->ops % (long)r->kevery))
		record_classes(r);
	if (r->progress && !(r->ops & 1023))
		progress_line("  %ld operations", r->ops);
	return 0;
}

static int op_write(struct rec *r, size_t slot, const unsigned char *page, void *buf)
{
	uint64_t v[9];
	memcpy(buf, page, r->P);
	if (pwrite(r->k.fd, buf, r->P, (off_t)(slot * r->P)) != (ssize_t)r->P)
		return errno ? -errno : -EIO;
	int err = zs_kzram_dev_mm_stat(&r->k, v);
	if (err)
		return err;
	/* What the slot holds now = the counters' change + what it held before. */
	int64_t size = (int64_t)(v[1] - r->prev[1]);
	int64_t same = (int64_t)(v[5] - r->prev[5]);
	int64_t huge = (int64_t)(v[7] - r->prev[7]);
	if (r->slot[slot].used) {
		size += r->slot[slot].size;
		same += r->slot[slot].kind == 's';
		huge += r->slot[slot].kind == 'h';
	} else {
		r->stored++;
	}
	char kind = same > 0 ? 's' : huge > 0 ? 'h' : 'n';
	if (size < 0 || (kind == 'n' && size == 0))
		return -EIO; /* someone else wrote to our device */
	r->slot[slot].size = (uint32_t)size;
	r->slot[slot].kind = (uint8_t)kind;
	r->slot[slot].used = 1;
	fprintf(r->out, "w %zu %lld %c\n", slot, (long long)size, kind);
	return record_state(r);
}

static int op_discard(struct rec *r, size_t slot)
{
	uint64_t range[2] = { (uint64_t)slot * r->P, r->P };
	if (ioctl(r->k.fd, BLKDISCARD, range))
		return -errno;
	if (r->slot[slot].used)
		r->stored--;
	r->slot[slot].used = 0;
	fprintf(r->out, "d %zu\n", slot);
	return record_state(r);
}

static int op_compact(struct rec *r)
{
	int err = zs_kzram_dev_set(&r->k, "compact", "1");
	if (err)
		return err;
	fprintf(r->out, "c\n");
	return record_state(r);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs record -o TRACE [options] FILE|DIR...\n"
		"       zs record -o TRACE [options] --pid PID\n"
		"       zs record --zswap -o TRACE [zswap options] FILE|DIR...\n"
		"Record a trace (docs/trace-format.md) on the running kernel.  Needs root.\n"
		"Replay it with `zs replay TRACE`.\n\n"
		"zram (default): pages of the given files go through a fresh zram device, and the\n"
		"kernel's mm_stat is recorded after every write, discard and compaction.\n"
		"  -o, --out TRACE    the trace to write (plain text; xz it if you like)\n"
		"  --comp NAME        the kernel's comp_algorithm (default lz4)\n"
		"  --pages N          data pages to use, 1..4194304 (default 4000)\n"
		"  --pid PID          instead of FILEs: the anonymous memory of a running process\n"
		"                     (its [heap] and unnamed writable mappings, read through\n"
		"                     /proc/PID/mem as `zs compare --pid` does), up to --pages\n"
		"  --workload W       fill (default) or mix\n"
		"  --seed N           the workload's random seed (default 1)\n"
		"  fill: --discard F, --overwrite F, --refill F   shares of the pages, 0..1\n"
		"        (defaults 0.5, 0.3, 0.25)\n"
		"  mix:  --ops N (default 20000), --p-compact F (0.01), --p-discard F (0.5)\n"
		"  --classes-every N  where the kernel shows its zsmalloc class table\n"
		"                     (CONFIG_ZSMALLOC_STAT, debugfs), record it after every\n"
		"                     N-th record as 'k' lines for zs replay to compare per class;\n"
		"                     0 never, 1..1000000 (default 100)\n"
		"  --progress         progress on stderr even when it is not a terminal\n\n"
		"zswap (--zswap): a zswap-trace of the kernel's zswap.  Pages of the given files\n"
		"are paged out one at a time (MADV_PAGEOUT), touched back (loads) and dropped\n"
		"(MADV_DONTNEED: invalidates) in a seeded mix; after each operation the kernel's\n"
		"zswap counters are checked (they must move by exactly this operation) and\n"
		"written as a '=' record.  Sizes are liblzo2's lzo1x_1_15 (the kernel's lzo).\n"
		"For the run it makes a swap file (swapon), mounts debugfs, sets vm.page-cluster=0,\n"
		"enables zswap with the compressor, raises max_pool_percent if needed and turns\n"
		"the zswap shrinker off; every setting is restored at the end, on errors and on\n"
		"SIGINT/SIGTERM/SIGHUP.  A run killed with SIGKILL leaves its settings in\n"
		"/run/libzs-kernel-zswap.state; the next --zswap run restores them first.\n"
		"The whole run holds an exclusive flock on /run/libzs-kernel-zswap.lock: other\n"
		"users of the kernel's zswap/swap take the same lock (flock(1) works), and a\n"
		"second recorder waits for it.  zswap's pool is global: anything else swapping\n"
		"during the run spoils the attempt (on this project's VMs kdamond pages idle shmem\n"
		"out once swap exists); it starts over, and after --attempts the trace ends there\n"
		"with a message (exit 2).\n"
		"  -o, --out TRACE    the trace to write\n"
		"  --comp lzo         the zswap compressor (only lzo: its sizes are known exactly)\n"
		"  --pages N          data pages to use, 1..4194304 (default 4000)\n"
		"  --seed N           the mix's random seed (default 1)\n"
		"  --ops N            mix operations after every page was stored once\n"
		"                     (default: as many as pages); then every page left is\n"
		"                     invalidated, so the trace ends with an empty pool\n"
		"  --p-load F         share of loads in the mix (default 0.35)\n"
		"  --p-invalidate F   share of invalidates (default 0.25); the rest are stores\n"
		"  --memcg-fill       instead of the mix: write the pages once into a buffer in a\n"
		"                     memory-limited cgroup-v1 memcg, so the kernel's reclaim\n"
		"                     chooses what goes to zswap; the trace (mode fill) has one\n"
		"                     's' per page found in zswap and one final '='\n"
		"  --memcg-limit SIZE the memcg's limit (default: a third of the pages' bytes,\n"
		"                     at least 2M)\n"
		"  --swap-file PATH   the swap file to create and remove (default\n"
		"                     /var/tmp/libzs-zswap-record.PID.swap; not on tmpfs)\n"
		"  --attempts N       when something else swaps during the run, start over from\n"
		"                     an empty pool up to N times in all (default 5, 1..100)\n"
		"  --lock-wait S      wait at most S seconds for the lock (default: for ever);\n"
		"                     then exit 2 with nothing changed\n"
		"  --lock-fd N        the lock file is open on descriptor N and its caller holds\n"
		"                     the lock (`exec 9>/run/libzs-kernel-zswap.lock; flock 9`),\n"
		"                     so several runs and checks go under one hold\n"
		"  --progress         progress on stderr even when it is not a terminal\n");
}

/* --swap-file: a path, not an empty one. */
static int set_swap_file(const char *cmd, const char *opt, const char *arg, void *ptr)
{
	if (!*arg) {
		fprintf(stderr, "zs %s: %s: empty path\n", cmd, opt);
		return 2;
	}
	*(const char **)ptr = arg;
	return 0;
}

/* --workload fill|mix. */
static int set_workload(const char *cmd, const char *opt, const char *arg, void *mix)
{
	if (strcmp(arg, "fill") && strcmp(arg, "mix")) {
		fprintf(stderr, "zs %s: %s: '%s' is not one of: fill, mix\n", cmd, opt, arg);
		return 2;
	}
	*(int *)mix = arg[0] == 'm';
	return 0;
}

/* Options -> o, and what must hold before anything touches the kernel.  0, 1 after
 * --help, or 2 after a message. */
static int parse(int argc, char **argv, struct rec_opts *o)
{
	*o = (struct rec_opts){ .comp = NULL, .npages = 4000, .seed = 1, .nops = 20000,
				.discard = 0.5, .overwrite = 0.3, .refill = 0.25, .p_compact = 0.01,
				.p_discard = 0.5, .p_load = 0.35, .p_inval = 0.25, .attempts = 5,
				.lock_wait = UINT64_MAX, .lock_fd = -1, .classes_every = 100,
				.progress = opt_progress_default() };
	const struct opt_hook swap_file = { set_swap_file, &o->swap_file },
			      workload = { set_workload, &o->mix }, pid = { opt_pid, &o->pid };
	/* The help is usage()'s prose, which groups the flags by recorder.  owner:
	 * which recorder each flag belongs to (1 zram, 2 zswap, 3 both). */
	const struct opt_flag flags[] = {
		{ "out", 'o', OPTK_STR, &o->out_path, 0, 0, NULL },
		{ "comp", 0, OPTK_STR, &o->comp, 0, 0, NULL },
		{ "pages", 0, OPTK_U64, &o->npages, 1, 1u << 22, NULL },
		{ "workload", 0, OPTK_FN, (void *)&workload, 0, 0, NULL },
		{ "seed", 0, OPTK_U64, &o->seed, 0, UINT64_MAX, NULL },
		{ "discard", 0, OPTK_FRAC, &o->discard, 0, 0, NULL },
		{ "overwrite", 0, OPTK_FRAC, &o->overwrite, 0, 0, NULL },
		{ "refill", 0, OPTK_FRAC, &o->refill, 0, 0, NULL },
		{ "ops", 0, OPTK_U64, &o->nops, 0, 100000000, NULL },
		{ "p-compact", 0, OPTK_FRAC, &o->p_compact, 0, 0, NULL },
		{ "p-discard", 0, OPTK_FRAC, &o->p_discard, 0, 0, NULL },
		{ "progress", 0, OPTK_FLAG, &o->progress, 0, 0, NULL },
		{ "zswap", 0, OPTK_FLAG, &o->zswap, 0, 0, NULL },
		{ "memcg-fill", 0, OPTK_FLAG, &o->memcg_fill, 0, 0, NULL },
		{ "memcg-limit", 0, OPTK_BYTES, &o->memcg_limit, 1 << 20, (uint64_t)1 << 40, NULL },
		{ "p-load", 0, OPTK_FRAC, &o->p_load, 0, 0, NULL },
		{ "p-invalidate", 0, OPTK_FRAC, &o->p_inval, 0, 0, NULL },
		{ "swap-file", 0, OPTK_FN, (void *)&swap_file, 0, 0, NULL },
		{ "attempts", 0, OPTK_U64, &o->attempts, 1, 100, NULL },
		{ "lock-wait", 0, OPTK_U64, &o->lock_wait, 0, 86400 * 365, NULL },
		{ "lock-fd", 0, OPTK_INT, &o->lock_fd, 0, INT32_MAX, NULL },
		{ "pid", 0, OPTK_FN, (void *)&pid, 0, 0, NULL },
		{ "classes-every", 0, OPTK_U64, &o->classes_every, 0, 1000000, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	static const unsigned char owner[] = { 3, 3, 3, 1, 3, 1, 1, 1, 3, 1, 1, 3,
					       3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1 };
	_Static_assert(sizeof(owner) == sizeof(flags) / sizeof(flags[0]) - 1,
		       "an owner per flag");
	unsigned char given[sizeof(flags) / sizeof(flags[0])] = { 0 };
	int rc = opt_parse("record", argc, argv, flags, 0, NULL, usage, given);
	if (rc)
		return rc;
	o->nops_set = opt_given(flags, given, &o->nops);
	for (size_t i = 0; flags[i].name; i++)
		if (given[i] && !(owner[i] & (o->zswap ? 2 : 1))) {
			fprintf(stderr, "zs record: --%s is %s\n", flags[i].name,
				o->zswap ? "a zram option (not for --zswap)" : "a --zswap option");
			return 2;
		}
	if (!o->comp)
		o->comp = o->zswap ? "lzo" : "lz4";
	if (o->zswap && strcmp(o->comp, "lzo")) {
		fprintf(stderr, "zs record: --zswap --comp %s: only lzo (the trace's sizes are liblzo2's "
				"lzo1x_1_15, which is the kernel's lzo byte for byte; this kernel's zswap "
				"has no other compressor user space can match)\n", o->comp);
		return 2;
	}
	if (o->zswap && o->p_load + o->p_inval > 1) {
		fprintf(stderr, "zs record: --p-load + --p-invalidate is %g, more than 1\n",
			o->p_load + o->p_inval);
		return 2;
	}
	if (o->zswap && o->memcg_fill &&
	    (o->nops_set || opt_given(flags, given, &o->p_load) ||
	     opt_given(flags, given, &o->p_inval))) {
		fprintf(stderr, "zs record: --memcg-fill writes the pages once: --ops, --p-load and "
				"--p-invalidate do not apply\n");
		return 2;
	}
	if (o->zswap && !o->memcg_fill && opt_given(flags, given, &o->memcg_limit)) {
		fprintf(stderr, "zs record: --memcg-limit needs --memcg-fill\n");
		return 2;
	}
	if (!o->out_path) {
		fprintf(stderr, "zs record: -o TRACE is required\n");
		return 2;
	}
	if (o->pid && optind < argc) {
		fprintf(stderr, "zs record: --pid takes no FILE or DIR ('%s')\n", argv[optind]);
		return 2;
	}
	if (optind >= argc && !o->pid) {
		fprintf(stderr, "zs record: no FILE or DIR to take pages from (or --pid PID)\n");
		return 2;
	}
	o->paths = argv + optind;
	o->npaths = argc - optind;
	for (int i = 0; i < o->npaths; i++)
		if (opt_path("record", "FILE", o->paths[i], 1))
			return 2;
	if (o->zswap)
		return 0; /* record_zswap checks the kernel itself */
	if (access("/sys/class/zram-control/hot_add", F_OK)) {
		fprintf(stderr, "zs record: no zram on this kernel (/sys/class/zram-control missing; "
				"modprobe zram)\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "zs record: needs root (it creates a zram device)\n");
		return 2;
	}
	return 0;
}

/* The pages of the given files (record.h). */
int record_load_pages(const struct rec_opts *o, size_t page_size, struct zs_pageset *ps)
{
	if (o->pid) {
		/* A snapshot: the process keeps running, the trace holds the pages as read. */
		struct raw raw = { .what = "process" };
		int err = zs_pageset_init(&raw.ps, page_size, o->npages * page_size);
		if (!err)
			err = raw_add_process(&raw, o->pid);
		raw.ps.npages = raw.ps.len / page_size; /* whole pages only, as for files */
		raw.ps.file_bytes = raw.ps.len;
		*ps = raw.ps;
		if (err || ps->npages == 0) {
			fprintf(stderr, "zs record: --pid %d: no anonymous page read%s%s\n", o->pid,
				err ? ": " : "", err ? strerror(-err) : "");
			return -1;
		}
		return 0;
	}
	int err = zs_pageset_load(ps, page_size, o->paths, o->npaths, o->npages * page_size);
	if (err || ps->npages == 0) {
		fprintf(stderr, "zs record: no whole page in the given files%s%s\n", err ? ": " : "",
			err ? strerror(-err) : "");
		return -1;
	}
	return 0;
}

/*
 * The pages, a zram device of our own (hot_add, comp, disksize, O_DIRECT),
 * the trace file with its header and the device's first mm_stat.  0, or
 * non-zero after a message; teardown() undoes what was done either way.
 */
static int setup(const struct rec_opts *o, struct rec *r, struct zs_pageset *ps, void **buf,
		 const char *kernel, const char *chain)
{
	int err = record_load_pages(o, r->P, ps);
	if (err)
		return err;
	size_t n = ps->npages;
	r->slot = calloc(n, sizeof(*r->slot));
	if (!r->slot || posix_memalign(buf, r->P, r->P)) {
		fprintf(stderr, "zs record: out of memory\n");
		return -1;
	}

	/* A device of our own, O_DIRECT; removed on SIGINT/SIGTERM too. */
	char why[256];
	g_k = &r->k;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if ((err = zs_kzram_dev_add(&r->k, o->comp, (uint64_t)(n + 64) * r->P, 1, why, sizeof(why)))) {
		fprintf(stderr, "zs record: zram device: %s\n", why);
		return err;
	}
	r->out = fopen(o->out_path, "w");
	if (!r->out) {
		fprintf(stderr, "zs record: %s: %s\n", o->out_path, strerror(errno));
		return -errno;
	}
	fprintf(r->out, "# zram-trace 1\n# page_size %zu\n# comp %s\n# kernel %s\n# chain_size %s\n",
		r->P, o->comp, kernel, chain);
	char src[512];
	if (o->pid)
		snprintf(src, sizeof(src), "pid %d anon", o->pid);
	else
		snprintf(src, sizeof(src), "%.480s%s", o->paths[0], o->npaths > 1 ? " ..." : "");
	if (o->mix)
		fprintf(r->out, "# data %s pages %zu workload mix seed %llu ops %llu p_compact %g "
				"p_discard %g (zs record)\n",
			src, n, (unsigned long long)o->seed, (unsigned long long)o->nops, o->p_compact,
			o->p_discard);
	else
		fprintf(r->out, "# data %s pages %zu workload fill seed %llu discard %g overwrite %g "
				"refill %g (zs record)\n",
			src, n, (unsigned long long)o->seed, o->discard, o->overwrite, o->refill);
	/* The per-class table only where the kernel shows it: say which in the header. */
	kclasses_path(r->k.dev, r->kpath, sizeof(r->kpath));
	r->kevery = o->classes_every;
	if (!o->classes_every) {
		fprintf(r->out, "# classes off (--classes-every 0)\n");
		r->kpath[0] = 0;
	} else if (access(r->kpath, R_OK)) {
		fprintf(r->out, "# classes none (no %s: CONFIG_ZSMALLOC_STAT off or debugfs not "
				"mounted)\n", r->kpath);
		r->kpath[0] = 0;
	} else {
		fprintf(r->out, "# classes debugfs every %llu records\n",
			(unsigned long long)o->classes_every);
	}
	if ((err = zs_kzram_dev_mm_stat(&r->k, r->prev)))
		fprintf(stderr, "zs record: zram%d: %s\n", r->k.dev, strerror(-err));
	return err;
}

/* The workload (fill, or fill + random mix), one trace record per operation.
 * 0 or -errno. */
static int run(const struct rec_opts *o, struct rec *r, const struct zs_pageset *ps, void *buf)
{
	const unsigned char *data = ps->data;
	size_t n = ps->npages;
	int err = 0;
#define PAGE(i) (data + (size_t)(i) * r->P)
	for (size_t i = 0; i < n && !err; i++)
		err = op_write(r, i, PAGE(i), buf);
	size_t *order = malloc(n * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	if (!o->mix) {
		/* Shuffled order; the first shares of it are discarded / rewritten. */
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = tool_rand64(&r->rng) % (i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		size_t nd = (size_t)((double)n * o->discard);
		for (size_t i = 0; i < nd && !err; i++)
			err = op_discard(r, order[i]);
		size_t no = (size_t)((double)n * o->overwrite);
		for (size_t i = 0; i < no && !err; i++)
			err = op_write(r, tool_rand64(&r->rng) % n, PAGE(tool_rand64(&r->rng) % n), buf);
		if (!err)
			err = op_compact(r);
		size_t nr = (size_t)((double)n * o->refill);
		for (size_t i = 0; i < nr && !err; i++)
			err = op_write(r, tool_rand64(&r->rng) % n, PAGE(tool_rand64(&r->rng) % n), buf);
		if (!err)
			err = op_compact(r);
	} else {
		for (uint64_t k = 0; k < o->nops && !err; k++) {
			double x = rand01(&r->rng);
			if (x < o->p_compact) {
				err = op_compact(r);
			} else if (rand01(&r->rng) < o->p_discard && r->stored) {
				size_t s;
				do
					s = tool_rand64(&r->rng) % n;
				while (!r->slot[s].used);
				err = op_discard(r, s);
			} else {
				err = op_write(r, tool_rand64(&r->rng) % n, PAGE(tool_rand64(&r->rng) % n), buf);
			}
		}
		if (!err)
			err = op_compact(r);
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = tool_rand64(&r->rng) % (i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (size_t i = 0; i < n && !err; i++)
			if (r->slot[order[i]].used)
				err = op_discard(r, order[i]);
	}
#undef PAGE
	free(order);
	return err;
}

/* Close the trace; the summary line when all went well (err: the run's).  The run's
 * error, or -errno when the trace could not be written. */
static int finish(const struct rec_opts *o, struct rec *r, size_t n, const char *kernel,
		  const char *chain, int err)
{
	if (r->out && fclose(r->out) && !err) {
		err = -errno;
		fprintf(stderr, "zs record: %s: %s\n", o->out_path, strerror(errno));
	}
	r->out = NULL;
	if (!err)
		fprintf(stderr, "zs record: %s: %ld operations on %zu pages (comp %s, kernel %s, "
				"chain_size %s)\n",
			o->out_path, r->ops, n, o->comp, kernel, chain);
	return err;
}

/* The device goes away, also after an error. */
static void teardown(struct rec *r, struct zs_pageset *ps, void *buf)
{
	if (r->out)
		fclose(r->out);
	g_k = NULL;
	zs_kzram_dev_remove(&r->k);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	free(buf);
	free(r->slot);
	zs_pageset_free(ps);
}

int cmd_record(int argc, char **argv)
{
	struct rec_opts o;
	int err = parse(argc, argv, &o);
	if (err)
		return err == 1 ? 0 : 2;
	if (o.zswap)
		return record_zswap(&o);
	struct utsname u;
	char chain[16] = "?";
	uname(&u);
	record_kernel_chain(chain, sizeof(chain));
	struct rec r = { .k = { .dev = -1, .fd = -1 }, .P = (size_t)sysconf(_SC_PAGESIZE), .rng = o.seed,
			 .progress = o.progress };
	struct zs_pageset ps = { 0 };
	void *buf = NULL;
	err = setup(&o, &r, &ps, &buf, u.release, chain);
	if (!err) {
		err = run(&o, &r, &ps, buf);
		if (err)
			fprintf(stderr, "zs record: zram%d: %s\n", r.k.dev, strerror(-err));
		else if (r.progress) {
			progress_line("  %ld operations", r.ops);
			progress_done();
		}
		err = finish(&o, &r, ps.npages, u.release, chain, err);
	}
	teardown(&r, &ps, buf);
	return err ? 2 : 0;
}
