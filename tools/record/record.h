/*
 * `zs record`'s two recorders share one option parser and one page loader
 * (tools/cmd_record.c): the zram recorder (cmd_record.c) and the zswap
 * recorder (record_zswap.c, `zs record --zswap`).  This header is the
 * contract between the two files and nothing else includes it.
 */
#ifndef ZS_TOOLS_RECORD_H
#define ZS_TOOLS_RECORD_H

#include <stddef.h>
#include <stdint.h>

struct zs_pageset;

struct rec_opts {
	const char *out_path, *comp;
	uint64_t npages, seed, nops;
	double discard, overwrite, refill, p_compact, p_discard;
	int mix, progress;
	char **paths;         /* the FILEs/DIRs pages come from */
	int npaths;
	int pid;              /* --pid: a process's anonymous memory instead (zram only); 0: none */
	uint64_t classes_every; /* --classes-every: the kernel's class table each N records; 0 off */
	/* --zswap */
	int zswap;            /* record the kernel's zswap instead of zram */
	int memcg_fill;       /* --memcg-fill: one fill under a memory-limited v1 memcg */
	int nops_set;         /* --ops was given */
	double p_load, p_inval;   /* the op mix: loads, invalidates, the rest stores */
	uint64_t memcg_limit; /* bytes; 0: a third of the pages */
	const char *swap_file;    /* NULL: /var/tmp/libzs-zswap-record.PID.swap */
	uint64_t attempts;    /* tries when something else moved zswap's counters */
	uint64_t lock_wait;   /* seconds to wait for the zswap lock; UINT64_MAX: for ever */
	int lock_fd;          /* --lock-fd: the lock file, opened by the caller; -1: open it */
};

/* The pages of o->paths (or of process o->pid), at most o->npages of them.  0, or -1
 * after a message. */
int record_load_pages(const struct rec_opts *o, size_t page_size, struct zs_pageset *ps);

/* CONFIG_ZSMALLOC_CHAIN_SIZE of the running kernel into out, or "?". */
void record_kernel_chain(char *out, size_t len);

/* `zs record --zswap`: exit code (0 ok, 2 usage or kernel error). */
int record_zswap(const struct rec_opts *o);

#endif
