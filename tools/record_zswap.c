/*
 * `zs record --zswap`: records a zswap-trace of the running kernel's zswap
 * (format: docs/trace-format.md), so that libzs's zsmalloc can be checked
 * against the kernel's zswap pool operation by operation the way zram traces
 * check it against zram.  Options and page loading are cmd_record.c's
 * (record.h); this file owns the kernel side: what it changes, how it
 * measures, and that every change is undone.
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
#include <glob.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "opts.h"
#include "record.h"
#include "util.h"
#include "zs/compress.h"
#include "zs/harness.h"

#define LOCK_PATH "/run/libzs-kernel-zswap.lock"
#define STATE_PATH "/run/libzs-kernel-zswap.state"
#define PARAM "/sys/module/zswap/parameters/"
#define DEBUGFS "/sys/kernel/debug"
#define ZSWAP_DBG DEBUGFS "/zswap/"
#define PAGE_CLUSTER "/proc/sys/vm/page-cluster"
#define MEMCG_ROOT "/sys/fs/cgroup/memory"

#define TMPFS_MAGIC_ 0x01021994
#define RAMFS_MAGIC_ 0x858458f6

/* ---- Small file helpers ---- */

static int64_t read_i64(const char *path)
{
	char b[64];
	uint64_t v;
	if (zs_sysfs_read(path, b, sizeof(b)) || parse_u64(b, &v))
		return -1;
	return (int64_t)v;
}

/* ---- The settings a run changes, and their restoration ---- */

struct settings {
	char enabled[8], compressor[64], max_pool[16], shrinker[8], page_cluster[16];
	int debugfs_ours;          /* debugfs was not mounted; we mounted it */
	char swap_file[PATH_MAX];  /* the swap file we create ("" none yet) */
	char memcg[PATH_MAX];      /* the memcg we create ("" none) */
	long pid;
};

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
static int write_state(const struct settings *s)
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
static int restore(const struct settings *s)
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

/* ---- Signals: a request to stop, acted on between operations ---- */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	if (!g_stop)
		g_stop = sig;
}

static void signals(int install)
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

static int stopped(void)
{
	static int said;
	if (g_stop && !said++)
		fprintf(stderr, "zs record: %s: stopping and restoring the settings\n",
			strsignal(g_stop));
	return g_stop != 0;
}

/* ---- zswap's counters ---- */

/* Levels, then events that must not move except as an operation says. */
enum { C_STORED, C_INCOMP, C_POOL, C_LIMIT, C_WB, C_RREC, C_RALLOC, C_RKMEM, C_RCFAIL, C_RCPOOR,
       C_DFAIL, V_ZSWPOUT, V_ZSWPIN, V_ZSWPWB, V_PSWPOUT, V_PSWPIN, V_SWPOUT_ZERO, V_SWPIN_ZERO,
       NCTR };
static const char *const ctr_name[NCTR] = {
	"stored_pages", "stored_incompressible_pages", "pool_total_size", "pool_limit_hit",
	"written_back_pages", "reject_reclaim_fail", "reject_alloc_fail", "reject_kmemcache_fail",
	"reject_compress_fail", "reject_compress_poor", "decompress_fail",
	"zswpout", "zswpin", "zswpwb", "pswpout", "pswpin", "swpout_zero", "swpin_zero",
};
#define V_FIRST V_ZSWPOUT

struct ctr {
	int64_t v[NCTR]; /* -1: the kernel has no such counter */
};

static int read_counters(struct ctr *c)
{
	char path[128];
	for (int j = 0; j < V_FIRST; j++) {
		snprintf(path, sizeof(path), ZSWAP_DBG "%s", ctr_name[j]);
		c->v[j] = read_i64(path);
	}
	for (int j = V_FIRST; j < NCTR; j++)
		c->v[j] = -1;
	/* /proc/vmstat through one read (it is ~6 KiB). */
	static char vm[32768];
	int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, vm, sizeof(vm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -EIO;
	vm[n] = 0;
	for (char *line = vm; *line;) {
		char *nl = strchr(line, '\n'), *sp = strchr(line, ' ');
		if (nl)
			*nl = 0;
		if (sp) {
			*sp = 0;
			for (int j = V_FIRST; j < NCTR; j++)
				if (!strcmp(line, ctr_name[j]))
					c->v[j] = strtoll(sp + 1, NULL, 10);
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	if (c->v[C_STORED] < 0 || c->v[C_INCOMP] < 0 || c->v[C_POOL] < 0 || c->v[V_ZSWPOUT] < 0 ||
	    c->v[V_ZSWPIN] < 0)
		return -ENOENT;
	return 0;
}

/* ---- The recorder ---- */

enum { ST_EMPTY, ST_RES, ST_SWP, NST }; /* a buffer page: never written / dropped, in memory, swapped */

struct bpage {
	uint32_t src;     /* the pageset page it holds */
	uint32_t pos;     /* its index in set[state] */
	uint64_t off;     /* swap offset while ST_SWP */
	uint8_t state;
};

struct zrec {
	const struct rec_opts *o;
	size_t P, n;
	const struct zs_pageset *ps;
	uint32_t *size;      /* per pageset page: stored size (0: zero page) */
	char *flag;          /* per pageset page: 'n', 'h' or 'z' */
	unsigned char *buf;  /* the n-page buffer the kernel swaps */
	struct bpage *pg;
	uint32_t *set[NST];  /* buffer pages by state */
	size_t cnt[NST];
	FILE *out;
	struct ctr base, prev;
	int pm_fd, swap_type;
	uint64_t rng;
	long ops, nstore[3], nload, ninval; /* nstore: n, h, z */
	long retries, skipped; /* page-outs tried again; given up (the page stayed in memory) */
	char why[256];       /* why the trace ended early */
	int retryable;       /* ... because a counter moved unexpectedly: another attempt may do */
	int totalram_set;
	uint64_t totalram;
	char max_pool[16];
	pid_t parent;
	int attempts;        /* the attempt this trace comes from */
};

static void set_move(struct zrec *r, uint32_t i, int to)
{
	struct bpage *p = &r->pg[i];
	if (p->state != to) {
		uint32_t last = r->set[p->state][--r->cnt[p->state]];
		r->set[p->state][p->pos] = last;
		r->pg[last].pos = p->pos;
		p->state = (uint8_t)to;
		p->pos = (uint32_t)r->cnt[to];
		r->set[to][r->cnt[to]++] = i;
	}
}

/*
 * 0 if libzs's "lzo" is lzo1x_1_15 (the kernel's lzo): a fixed page of words, on which
 * liblzo2 2.10's lzo1x_1_15_compress gives 1642 bytes and lzo1x_1_compress 1641.
 */
static int lzo_is_1_15(struct zs_comp *c, void *dst, size_t cap)
{
	static const char *const w[16] = { "zswap", "store", "load", "pool", "page", "swap",
					   "entry", "class", "free", "alloc", "lock", "zero",
					   "size", "slot", "map", "the" };
	unsigned char pg[4096];
	uint64_t s = 1;
	for (size_t i = 0; i < sizeof(pg);) {
		for (const char *x = w[tool_rand64(&s) % 16]; *x && i < sizeof(pg); x++)
			pg[i++] = (unsigned char)*x;
		if (i < sizeof(pg))
			pg[i++] = tool_rand64(&s) % 7 ? ' ' : '\n';
	}
	int len = zs_compress(c, pg, sizeof(pg), dst, cap);
	if (len == 1642)
		return 0;
	fprintf(stderr, "zs record: libzs's \"lzo\" gives %d bytes on the self-test page where "
			"lzo1x_1_15 gives 1642: it is not the kernel's lzo (a libzs from before the switch "
			"to lzo1x_1_15?), so the trace's sizes would be wrong\n", len);
	return -EINVAL;
}

/* Each pageset page's size and flag as zswap stores it. */
static int page_sizes(struct zrec *r)
{
	struct zs_comp *c;
	int err = zs_comp_create("lzo", r->P, &c);
	if (err) {
		fprintf(stderr, "zs record: libzs lzo: %s\n", strerror(-err));
		return err;
	}
	size_t cap = zs_comp_bound(c, r->P);
	void *dst = malloc(cap);
	if (dst && cap >= 4096 && (err = lzo_is_1_15(c, dst, cap)))
		goto out;
	r->size = calloc(r->ps->npages, sizeof(*r->size));
	r->flag = calloc(r->ps->npages, 1);
	if (!dst || !r->size || !r->flag) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->ps->npages; i++) {
		const unsigned char *pg = r->ps->data + i * r->P;
		size_t k = 0;
		while (k < r->P && !pg[k])
			k++;
		if (k == r->P) {
			r->flag[i] = 'z';
			continue;
		}
		int len = zs_compress(c, pg, r->P, dst, cap);
		if (len <= 0) {
			err = len ? len : -EIO;
			fprintf(stderr, "zs record: lzo of page %zu: %s\n", i, strerror(-err));
			goto out;
		}
		/* zswap stores a page that does not shrink raw, as a PAGE_SIZE object. */
		r->flag[i] = (size_t)len >= r->P ? 'h' : 'n';
		r->size[i] = (size_t)len >= r->P ? (uint32_t)r->P : (uint32_t)len;
	}
out:
	free(dst);
	zs_comp_destroy(c);
	return err;
}

static uint64_t pagemap(struct zrec *r, const void *addr)
{
	uint64_t e = 0;
	if (pread(r->pm_fd, &e, sizeof(e), (off_t)((uintptr_t)addr / r->P * sizeof(e))) != sizeof(e))
		return 0;
	return e;
}
#define PM_PRESENT(e) (((e) >> 63) & 1)
#define PM_SWAP(e) (((e) >> 62) & 1)
#define PM_SWAP_TYPE(e) ((int)((e)&0x1f))
#define PM_SWAP_OFF(e) (((e) >> 5) & ((UINT64_C(1) << 50) - 1))

/* The expected change of each counter for one operation; everything else must not move. */
struct expect {
	int64_t d[NCTR];
	int pool_dir; /* +1: pool pages may only grow, -1: only shrink */
};

/* 0 when c - prev is exactly e, else -1 with r->why saying what moved. */
static int check(struct zrec *r, const struct ctr *c, const struct expect *e, const char *what)
{
	if (c->v[C_POOL] % (int64_t)r->P) {
		snprintf(r->why, sizeof(r->why), "after %s: pool_total_size %lld is not whole pages",
			 what, (long long)c->v[C_POOL]);
		return -1;
	}
	for (int j = 0; j < NCTR; j++) {
		if (j == C_POOL || c->v[j] < 0 || r->prev.v[j] < 0)
			continue;
		int64_t d = c->v[j] - r->prev.v[j];
		if (d != e->d[j]) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why),
				 "after %s: %s moved by %+lld, expected %+lld: something else on this "
				 "machine used zswap or swap meanwhile (zswap's pool is global), or the "
				 "kernel reclaimed on its own",
				 what, ctr_name[j], (long long)d, (long long)e->d[j]);
			return -1;
		}
	}
	int64_t dp = c->v[C_POOL] - r->prev.v[C_POOL];
	if ((e->pool_dir > 0 && dp < 0) || (e->pool_dir < 0 && dp > 0)) {
		r->retryable = 1;
		snprintf(r->why, sizeof(r->why),
			 "after %s: the pool went from %lld to %lld pages: the kernel compacted it "
			 "(memory pressure?) or someone else used zswap",
			 what, (long long)(r->prev.v[C_POOL] / (int64_t)r->P),
			 (long long)(c->v[C_POOL] / (int64_t)r->P));
		return -1;
	}
	return 0;
}

static void write_state_rec(struct zrec *r, const struct ctr *c)
{
	fprintf(r->out, "= %lld %lld %lld %lld %lld\n", (long long)(c->v[C_POOL] / (int64_t)r->P),
		(long long)c->v[C_STORED], (long long)c->v[C_INCOMP],
		(long long)(c->v[V_ZSWPOUT] - r->base.v[V_ZSWPOUT]),
		(long long)(c->v[V_ZSWPIN] - r->base.v[V_ZSWPIN]));
	r->prev = *c;
	r->ops++;
	if (r->o->progress && !(r->ops & 1023))
		progress_line("  %ld operations", r->ops);
}

static int counters(struct zrec *r, struct ctr *c)
{
	int err = read_counters(c);
	if (err)
		snprintf(r->why, sizeof(r->why), "reading zswap's counters: %s", strerror(-err));
	return err ? -1 : 0;
}

/* Page out buffer page i (ST_RES): one 's' record. 0, 1 if the kernel kept the page
 * in memory every time (no record), -1 with r->why. */
static int op_store(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	uint32_t src = r->pg[i].src;
	char f = r->flag[src];
	struct ctr c;
	uint64_t e = 0;
	for (int tries = 0;; tries++) {
		if (madvise(a, r->P, MADV_PAGEOUT)) {
			snprintf(r->why, sizeof(r->why), "MADV_PAGEOUT: %s (kernel without it?)",
				 strerror(errno));
			return -1;
		}
		if (counters(r, &c))
			return -1;
		e = pagemap(r, a);
		if (PM_SWAP(e))
			break;
		/* Not reclaimed (e.g. still in a per-CPU LRU batch): nothing may have moved. */
		struct expect none = { .pool_dir = 0 };
		if (check(r, &c, &none, "a page-out that left the page in memory"))
			return -1;
		if (c.v[C_POOL] != r->prev.v[C_POOL]) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why), "the pool changed while a page-out left the "
				 "page in memory: someone else used zswap");
			return -1;
		}
		if (tries == 50) {
			r->skipped++;
			return 1;
		}
		r->retries++;
		usleep(tries < 5 ? 0 : 1000);
	}
	uint64_t off = PM_SWAP_OFF(e);
	if (r->swap_type < 0)
		r->swap_type = PM_SWAP_TYPE(e);
	char what[96];
	snprintf(what, sizeof(what), "the store of buffer page %u (offset %llu, %c)", i,
		 (unsigned long long)off, f);
	if (PM_SWAP_TYPE(e) != r->swap_type) {
		snprintf(r->why, sizeof(r->why), "%s: swap device %d, not ours (%d)", what,
			 PM_SWAP_TYPE(e), r->swap_type);
		return -1;
	}
	struct expect x = { .pool_dir = f == 'z' ? 0 : 1 };
	if (f == 'z') {
		x.d[V_SWPOUT_ZERO] = 1;
	} else {
		x.d[C_STORED] = 1;
		x.d[C_INCOMP] = f == 'h';
		x.d[V_ZSWPOUT] = 1;
	}
	if (check(r, &c, &x, what))
		return -1;
	if (f == 'z' && c.v[C_POOL] != r->prev.v[C_POOL]) {
		r->retryable = 1;
		snprintf(r->why, sizeof(r->why), "%s: the pool changed for a zero page", what);
		return -1;
	}
	fprintf(r->out, "s %llu %u %c\n", (unsigned long long)off, r->size[src], f);
	write_state_rec(r, &c);
	r->pg[i].off = off;
	set_move(r, i, ST_SWP);
	r->nstore[f == 'n' ? 0 : f == 'h' ? 1 : 2]++;
	return 0;
}

/* Touch swapped buffer page i with a write (a write fault frees the swap slot at once;
 * a read would leave the page in the swap cache): one 'l' record. */
static int op_load(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	const unsigned char *want = r->ps->data + (size_t)r->pg[i].src * r->P;
	char f = r->flag[r->pg[i].src];
	*(volatile unsigned char *)a = want[0]; /* a store, no load first: one write fault */
	struct ctr c;
	if (counters(r, &c))
		return -1;
	char what[96];
	snprintf(what, sizeof(what), "the load of buffer page %u (offset %llu, %c)", i,
		 (unsigned long long)r->pg[i].off, f);
	if (!PM_PRESENT(pagemap(r, a)) || memcmp(a, want, r->P)) {
		snprintf(r->why, sizeof(r->why), "%s: the page came back %s", what,
			 PM_PRESENT(pagemap(r, a)) ? "with other contents" : "not present");
		return -1;
	}
	struct expect x = { .pool_dir = -1 };
	if (f == 'z') {
		x.d[V_SWPIN_ZERO] = 1;
	} else {
		x.d[C_STORED] = -1;
		x.d[C_INCOMP] = -(f == 'h');
		x.d[V_ZSWPIN] = 1;
	}
	if (check(r, &c, &x, what))
		return -1;
	fprintf(r->out, "l %llu\n", (unsigned long long)r->pg[i].off);
	write_state_rec(r, &c);
	set_move(r, i, ST_RES);
	r->nload++;
	return 0;
}

/* Drop swapped buffer page i (MADV_DONTNEED frees its swap slot): one 'i' record. */
static int op_inval(struct zrec *r, uint32_t i)
{
	unsigned char *a = r->buf + (size_t)i * r->P;
	char f = r->flag[r->pg[i].src];
	if (madvise(a, r->P, MADV_DONTNEED)) {
		snprintf(r->why, sizeof(r->why), "MADV_DONTNEED: %s", strerror(errno));
		return -1;
	}
	struct ctr c;
	if (counters(r, &c))
		return -1;
	char what[96];
	snprintf(what, sizeof(what), "the invalidate of buffer page %u (offset %llu, %c)", i,
		 (unsigned long long)r->pg[i].off, f);
	struct expect x = { .pool_dir = -1 };
	if (f != 'z') {
		x.d[C_STORED] = -1;
		x.d[C_INCOMP] = -(f == 'h');
	}
	if (check(r, &c, &x, what))
		return -1;
	fprintf(r->out, "i %llu\n", (unsigned long long)r->pg[i].off);
	write_state_rec(r, &c);
	set_move(r, i, ST_EMPTY);
	r->ninval++;
	return 0;
}

static uint32_t pick(struct zrec *r, int state)
{
	return r->set[state][tool_rand64(&r->rng) % r->cnt[state]];
}

static double rand01(uint64_t *s)
{
	return (double)(tool_rand64(s) >> 11) / 9007199254740992.0;
}

/* An empty buffer page gets a random pageset page (no kernel operation, no record). */
static uint32_t refill(struct zrec *r)
{
	uint32_t i = pick(r, ST_EMPTY);
	r->pg[i].src = (uint32_t)(tool_rand64(&r->rng) % r->ps->npages);
	memcpy(r->buf + (size_t)i * r->P, r->ps->data + (size_t)r->pg[i].src * r->P, r->P);
	set_move(r, i, ST_RES);
	return i;
}

/*
 * The ops workload: store every page once, in order; then --ops operations
 * (a load of a swapped page with p_load, an invalidate with p_invalidate,
 * else a store of a page in memory, or of an emptied page refilled with a
 * random page of the set); then invalidate every swapped page in random
 * order.  0, or -1 with r->why (the trace then ends there).
 */
static int run_ops(struct zrec *r)
{
	int rc = 0;
	for (uint32_t i = 0; i < r->n && rc >= 0; i++) {
		if (stopped())
			return -2;
		rc = op_store(r, i);
	}
	for (uint64_t k = 0; k < r->o->nops && rc >= 0; k++) {
		if (stopped())
			return -2;
		double x = rand01(&r->rng);
		if (x < r->o->p_load && r->cnt[ST_SWP]) {
			rc = op_load(r, pick(r, ST_SWP));
		} else if (x < r->o->p_load + r->o->p_inval && r->cnt[ST_SWP]) {
			rc = op_inval(r, pick(r, ST_SWP));
		} else if (r->cnt[ST_RES] && (!r->cnt[ST_EMPTY] || rand01(&r->rng) < 0.5)) {
			rc = op_store(r, pick(r, ST_RES));
		} else if (r->cnt[ST_EMPTY]) {
			rc = op_store(r, refill(r));
		}
	}
	while (r->cnt[ST_SWP] && rc >= 0) {
		if (stopped())
			return -2;
		rc = op_inval(r, pick(r, ST_SWP));
	}
	return rc < 0 ? rc : 0;
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
static int setup_kernel(struct zrec *r, struct settings *s, uint64_t need_pages,
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
static int take_lock(uint64_t wait_s, int given_fd)
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
		if (stopped() || (errno != EINTR && errno != EWOULDBLOCK)) {
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

static void header(struct zrec *r, const char *mode)
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

/* ---- The two modes ---- */

static int record_ops(struct zrec *r)
{
	int cpu = sched_getcpu();
	if (cpu >= 0) {
		/* One CPU: a page just written sits in this CPU's LRU batch, which madvise's
		 * page-out drains first; on another CPU's batch it could not be isolated. */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	size_t bytes = r->n * r->P;
	r->buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->pg = calloc(r->n, sizeof(*r->pg));
	for (int s = 0; s < NST; s++)
		r->set[s] = calloc(r->n, sizeof(uint32_t));
	if (r->buf == MAP_FAILED || !r->pg || !r->set[0] || !r->set[1] || !r->set[2]) {
		if (r->buf == MAP_FAILED)
			r->buf = NULL;
		fprintf(stderr, "zs record: out of memory for %zu pages\n", r->n);
		return -1;
	}
	/* Everything of ours stays in memory except the buffer, which only we page out. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		fprintf(stderr, "zs record: mlockall: %s (continuing)\n", strerror(errno));
	munlock(r->buf, bytes);
	madvise(r->buf, bytes, MADV_NOHUGEPAGE);
	for (uint32_t i = 0; i < r->n; i++) {
		r->pg[i] = (struct bpage){ .src = i, .pos = i, .state = ST_RES };
		r->set[ST_RES][i] = i;
	}
	r->cnt[ST_RES] = r->n;
	memcpy(r->buf, r->ps->data, bytes);
	header(r, "ops");
	if (read_counters(&r->base)) {
		fprintf(stderr, "zs record: zswap counters unreadable\n");
		return -1;
	}
	r->prev = r->base;
	return run_ops(r);
}

/* The memcg fill's child: joins the memcg, writes the pages once, reports its buffer's
 * address on wfd and waits for the parent to close rfd.  Never returns. */
static void fill_child(struct zrec *r, const char *procs, int rfd, int wfd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != r->parent)
		_exit(9);
	signals(0);
	volatile unsigned char stack[65536];
	for (size_t k = 0; k < sizeof(stack); k += 4096)
		stack[k] = 1;
	/* Our own pages are charged outside the memcg and locked; only the buffer is
	 * charged inside and evictable. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		_exit(10);
	char pid[32];
	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (zs_sysfs_write(procs, pid))
		_exit(11);
	size_t bytes = r->n * r->P;
	unsigned char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
	if (buf == MAP_FAILED)
		_exit(12);
	munlock(buf, bytes);
	madvise(buf, bytes, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < r->n; i++)
		memcpy(buf + i * r->P, r->ps->data + i * r->P, r->P);
	uintptr_t a = (uintptr_t)buf;
	if (write(wfd, &a, sizeof(a)) != (ssize_t)sizeof(a))
		_exit(13);
	char c;
	while (read(rfd, &c, 1) > 0)
		;
	_exit(0);
}

struct fillrec {
	uint64_t off;
	uint32_t size;
	char flag;
};

static int cmp_off(const void *a, const void *b)
{
	const struct fillrec *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int record_fill(struct zrec *r, struct settings *s)
{
	char procs[PATH_MAX + 32], lim[PATH_MAX + 32], val[32];
	if (access(MEMCG_ROOT "/memory.limit_in_bytes", F_OK)) {
		fprintf(stderr, "zs record: --memcg-fill needs the cgroup-v1 memory controller at %s\n",
			MEMCG_ROOT);
		return -1;
	}
	if (!s->memcg[0]) { /* made once, kept for further attempts */
		snprintf(s->memcg, sizeof(s->memcg), MEMCG_ROOT "/libzs-record-%ld", (long)getpid());
		write_state(s);
		if (mkdir(s->memcg, 0755)) {
			fprintf(stderr, "zs record: mkdir %s: %s\n", s->memcg, strerror(errno));
			if (errno == EEXIST)
				s->memcg[0] = 0; /* not ours */
			return -1;
		}
	}
	snprintf(lim, sizeof(lim), "%s/memory.limit_in_bytes", s->memcg);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)r->o->memcg_limit);
	if (zs_sysfs_write(lim, val)) {
		fprintf(stderr, "zs record: %s <- %s: %s\n", lim, val, strerror(errno));
		return -1;
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", s->memcg);
	uint64_t *pm = calloc(r->n, sizeof(*pm));
	struct fillrec *fr = calloc(r->n, sizeof(*fr));
	int p2c[2], c2p[2];
	if (!pm || !fr || pipe2(p2c, O_CLOEXEC) || pipe2(c2p, O_CLOEXEC)) {
		fprintf(stderr, "zs record: %s\n", strerror(errno ? errno : ENOMEM));
		free(pm);
		free(fr);
		return -1;
	}
	header(r, "fill");
	struct ctr base, c;
	if (read_counters(&base)) {
		fprintf(stderr, "zs record: zswap counters unreadable\n");
		return -1;
	}
	fflush(NULL);
	r->parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		close(p2c[1]);
		close(c2p[0]);
		fill_child(r, procs, p2c[0], c2p[1]);
	}
	close(p2c[0]);
	close(c2p[1]);
	int rc = -1;
	uintptr_t addr = 0;
	if (child < 0) {
		fprintf(stderr, "zs record: fork: %s\n", strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got = read(c2p[0], &addr, sizeof(addr));
		if (got == (ssize_t)sizeof(addr))
			break;
		if (got < 0 && errno == EINTR && !stopped())
			continue;
		if (!g_stop) {
			int st = 0;
			waitpid(child, &st, 0);
			child = -1;
			fprintf(stderr, "zs record: the fill process ended early (%s %d%s)\n",
				WIFSIGNALED(st) ? "signal" : "exit",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
				WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? ": the memcg OOM killer? "
				"raise --memcg-limit" : "");
		} else {
			stopped();
		}
		goto out;
	}
	/* The state now, before the child exits and frees everything. */
	char pmpath[64];
	snprintf(pmpath, sizeof(pmpath), "/proc/%ld/pagemap", (long)child);
	int fd = open(pmpath, O_RDONLY | O_CLOEXEC);
	ssize_t want = (ssize_t)(r->n * sizeof(*pm));
	if (read_counters(&c) || fd < 0 ||
	    pread(fd, pm, (size_t)want, (off_t)(addr / r->P * sizeof(*pm))) != want) {
		fprintf(stderr, "zs record: reading the counters or %s: %s\n", pmpath, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	size_t nrec = 0, present = 0, zero = 0, huge = 0, swapped = 0;
	int type = -1;
	for (size_t i = 0; i < r->n; i++) {
		present += PM_PRESENT(pm[i]);
		if (!PM_SWAP(pm[i]))
			continue;
		swapped++;
		if (type < 0)
			type = PM_SWAP_TYPE(pm[i]);
		if (PM_SWAP_TYPE(pm[i]) != type) {
			fprintf(stderr, "zs record: pages on two swap devices (%d and %d)\n", type,
				PM_SWAP_TYPE(pm[i]));
			goto out;
		}
		if (r->flag[i] == 'z') {
			zero++;
			continue;
		}
		huge += r->flag[i] == 'h';
		fr[nrec++] = (struct fillrec){ PM_SWAP_OFF(pm[i]), r->size[i], r->flag[i] };
	}
	if (!swapped) {
		fprintf(stderr, "zs record: the kernel reclaimed none of the %zu pages: the memcg's "
				"limit (%llu MiB) holds them all; lower --memcg-limit or give more --pages\n",
			r->n, (unsigned long long)(r->o->memcg_limit >> 20));
		goto out;
	}
	/* The kernel must hold exactly the pages pagemap says, and nothing went to disk. */
	struct {
		int j;
		int64_t want;
	} chk[] = { { C_STORED, (int64_t)nrec }, { C_INCOMP, (int64_t)huge },
		    { V_ZSWPOUT, (int64_t)nrec }, { V_ZSWPIN, 0 }, { V_SWPOUT_ZERO, (int64_t)zero },
		    { V_PSWPOUT, 0 }, { V_PSWPIN, 0 }, { C_LIMIT, 0 }, { C_WB, 0 }, { C_RALLOC, 0 },
		    { C_RCFAIL, 0 }, { C_RCPOOR, 0 }, { C_RKMEM, 0 }, { C_RREC, 0 } };
	for (size_t k = 0; k < sizeof(chk) / sizeof(chk[0]); k++) {
		int j = chk[k].j;
		int64_t d = c.v[j] - (j == C_STORED || j == C_INCOMP ? 0 : base.v[j]);
		if (c.v[j] >= 0 && base.v[j] >= 0 && d != chk[k].want) {
			r->retryable = 1;
			snprintf(r->why, sizeof(r->why), "after the fill %s is %+lld, but pagemap "
				 "says %+lld (%zu pages swapped, %zu zero): something else used "
				 "zswap/swap meanwhile, or the pool limit was hit",
				 ctr_name[j], (long long)d, (long long)chk[k].want, swapped, zero);
			goto out;
		}
	}
	qsort(fr, nrec, sizeof(*fr), cmp_off);
	for (size_t k = 0; k < nrec; k++)
		fprintf(r->out, "s %llu %u %c\n", (unsigned long long)fr[k].off, fr[k].size, fr[k].flag);
	fprintf(r->out, "= %lld %lld %lld %lld %lld\n", (long long)(c.v[C_POOL] / (int64_t)r->P),
		(long long)c.v[C_STORED], (long long)c.v[C_INCOMP],
		(long long)(c.v[V_ZSWPOUT] - base.v[V_ZSWPOUT]),
		(long long)(c.v[V_ZSWPIN] - base.v[V_ZSWPIN]));
	r->nstore[0] = (long)(nrec - huge);
	r->nstore[1] = (long)huge;
	r->nstore[2] = (long)zero;
	r->ops = (long)nrec;
	fprintf(stderr, "zs record: fill of %zu pages under a %llu MiB memcg: %zu in memory, %zu "
			"swapped (%zu zero pages, %zu in zswap, %zu of them raw); kernel pool %lld pages\n",
		r->n, (unsigned long long)(r->o->memcg_limit >> 20), present, swapped, zero, nrec, huge,
		(long long)(c.v[C_POOL] / (int64_t)r->P));
	rc = 0;
out:
	close(p2c[1]); /* the child exits */
	close(c2p[0]);
	if (child > 0) {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(pm);
	free(fr);
	return rc;
}

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
		fprintf(stderr, "zs record: zswap still holds %lld pages after swapoff of our swap file "
				"(another swap device is in use): cannot start again from an empty pool\n",
			(long long)c.v[C_STORED]);
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
		if (attempt_reset(r, saved))
			return -1;
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
	if (page_sizes(r))
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

/* Under the lock: restore what a dead earlier run left, save what we will change.  0 or -1. */
static int take_over(struct settings *saved)
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
		if (restore(&stale))
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
	signals(1);
	if ((lock = take_lock(oo.lock_wait, oo.lock_fd)) < 0 || stopped() || take_over(&saved))
		goto out;
	changed = 1;
	r.out = fopen(o->out_path, "we");
	if (!r.out) {
		fprintf(stderr, "zs record: %s: %s\n", o->out_path, strerror(errno));
		goto out;
	}
	/* Swap: every page at once plus room for the allocator's clusters. */
	uint64_t swap_pages = r.n + r.n / 8 + 2048;
	if (setup_kernel(&r, &saved, r.n, swap_pages) || stopped())
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
		if (restore(&saved))
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
	signals(0);
	if (interrupted) {
		raise(interrupted); /* the default action: die of the signal, as asked */
		return 2;
	}
	return rc;
}
