/*
 * `zs record --zswap`'s parts, shared by its files and nothing else: the run
 * (record_zswap.c: attempts, signals, the trace's header), the system
 * settings and their restore (record_zswap_setup.c), zswap's counters and
 * the operation-by-operation recorder (record_zswap_ops.c) and the memcg
 * fill (record_zswap_fill.c).  record.h is the contract with cmd_record.c.
 */
#ifndef ZS_TOOLS_RECORD_ZSWAP_H
#define ZS_TOOLS_RECORD_ZSWAP_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct rec_opts;
struct zs_pageset;

#define STATE_PATH "/run/libzs-kernel-zswap.state"
#define PARAM "/sys/module/zswap/parameters/"
#define DEBUGFS "/sys/kernel/debug"
#define ZSWAP_DBG DEBUGFS "/zswap/"

/* ---- The settings a run changes: record_zswap_setup.c ---- */

struct settings {
	char enabled[8], compressor[64], max_pool[16], shrinker[8], page_cluster[16];
	int debugfs_ours;          /* debugfs was not mounted; we mounted it */
	char swap_file[PATH_MAX];  /* the swap file we create ("" none yet) */
	char memcg[PATH_MAX];      /* the memcg we create ("" none) */
	long pid;
};

/* The state file: what to restore if this process dies without restoring.  0 or -errno. */
int write_state(const struct settings *s);
/* Undo a run and check every setting reads back as saved: 0, or how many did not. */
int settings_restore(const struct settings *s);
/* Under the lock: restore what a dead earlier run left, save what we will change.  0 or -1. */
int take_over(struct settings *saved);
/* The lock, waiting at most wait_s seconds (UINT64_MAX: for ever): fd, or -1 (reported). */
int take_lock(uint64_t wait_s, int given_fd);

/* ---- zswap's counters: record_zswap_ops.c ---- */

/* Levels, then events that must not move except as an operation says. */
enum { C_STORED, C_INCOMP, C_POOL, C_LIMIT, C_WB, C_RREC, C_RALLOC, C_RKMEM, C_RCFAIL, C_RCPOOR,
       C_DFAIL, V_ZSWPOUT, V_ZSWPIN, V_ZSWPWB, V_PSWPOUT, V_PSWPIN, V_SWPOUT_ZERO, V_SWPIN_ZERO,
       NCTR };
/* The counters' names: debugfs's up to V_FIRST, then /proc/vmstat's. */
extern const char *const ctr_name[NCTR];
#define V_FIRST V_ZSWPOUT

struct ctr {
	int64_t v[NCTR]; /* -1: the kernel has no such counter */
};

/* All of them now: 0, -EIO or -ENOENT (no zswap counters). */
int read_counters(struct ctr *c);

/* ---- The recorder: record_zswap_ops.c ---- */

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

/* What a pagemap entry says (Documentation/admin-guide/mm/pagemap.rst). */
#define PM_PRESENT(e) (((e) >> 63) & 1)
#define PM_SWAP(e) (((e) >> 62) & 1)
#define PM_SWAP_TYPE(e) ((int)((e)&0x1f))
#define PM_SWAP_OFF(e) (((e) >> 5) & ((UINT64_C(1) << 50) - 1))

/* Everything the run needs from the kernel, each change in the state file first
 * (record_zswap_setup.c).  0 or -errno (reported). */
int setup_kernel(struct zrec *r, struct settings *s, uint64_t need_pages, uint64_t swap_pages);
/* Each pageset page's size and flag as zswap stores it (liblzo2's lzo1x_1_15). */
int lzo_page_sizes(struct zrec *r);
/* The ops mode: 0, -1 with r->why (the trace ends there), -2 interrupted. */
int record_ops(struct zrec *r);
/* The memcg fill mode (record_zswap_fill.c): 0 or -1. */
int record_fill(struct zrec *r, struct settings *s);

/* ---- The run: record_zswap.c ---- */

/* The signal that asked to stop (0: none), acted on between operations. */
extern volatile sig_atomic_t g_stop;
/* Install (1) or remove (0) the handlers that set g_stop. */
void stop_signals(int install);
/* 1 once a signal asked to stop (said once on stderr). */
int stop_requested(void);
/* The trace's '#' header lines; mode "ops" or "fill". */
void trace_header(struct zrec *r, const char *mode);

#endif
