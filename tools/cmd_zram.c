/*
 * `zs zram FILE|DIR...`: load the pages of real files into a user-space zram
 * store, report mm_stat / io_stat, the compression ratio (original bytes /
 * pool bytes, i.e. what the memory actually costs) and write/read
 * throughput, and verify every page read back.  With --vs-kernel the same
 * pages go through a fresh kernel zram device as well, side by side, so the
 * mem_used_total parity and the speed-up are visible in one run.
 * Public headers only.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "compare.h" /* raw_add_process, raw_add_python_heap: zs compare's heap sources */
#include "util.h"
#include "opts.h"
#include "zs/compress.h"
#include "zs/pages.h"
#include "zs/zram.h"
#include "zs/harness.h"

struct opts {
	const char *comp, *backend, *kcomp, *dict;
	const char *filter;        /* --filter: zs/compress.h spec; NULL off */
	const char *synth;         /* --synth KIND: generated pages instead of FILEs */
	const char *pid;           /* --pid PID|python: a process's anonymous memory instead */
	const char *backing;       /* writeback: file, type, batch, limit (pages), options */
	int wb_type, wb_compressed, wb_drop_cache, wb_limit_set;
	unsigned wb_batch;
	uint64_t wb_limit;
	unsigned group;            /* group_pages; the phases then move whole groups */
	int matrix;
	size_t page_size;
	unsigned threads;
	uint64_t limit, max_bytes;
	int json, vs_kernel, quiet, agree, progress;
	struct pool_opts po;
	int level;
};

#define ZRAM_OPTS OPT_ALL

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs zram [options] FILE|DIR...\n"
		"  --comp NAME        lz4 (default), lz4hc[:N], zstd[:N], lzo\n"
		"  --level N          compression level (replaces NAME's :N; zs/compress.h ranges)\n"
		"  --dict FILE        dictionary for zstd or lz4 (e.g. from `zs dict train`)\n"
		"  --backing FILE     backing file for writeback (existing file or device)\n"
		"  --writeback TYPE   after writing: idle (marks all idle first), huge, huge_idle,\n"
		"                     incompressible; the read phase then reads from the file\n"
		"  --wb-compressed    write back compressed objects instead of pages\n"
		"  --wb-batch N       writeback batch size (default 32)\n"
		"  --wb-limit PAGES   enable writeback_limit with this budget (writeback stops\n"
		"                     there, as the kernel's; not an error)\n"
		"  --matrix           table of every compressor x level (x --dict) at 4K and 64K\n"
		"                     groups: ratio, pool memory, MB/s, CPU (--json: one array)\n"
		"  --group N          compress N contiguous pages as one object (2..16, power of 2;\n"
		"                     0 or 1: a page each, the default)\n"
		"  --filter SPEC      filter for typed data before compressing: shuffle:N, delta:N,\n"
		"                     delta+shuffle:N (N = 2, 4, 8 bytes per element), none;\n"
		"                     with --matrix: rows of that filter with every compressor;\n"
		"                     --matrix --filter all: a row per filter (zstd:3)\n"
		"  --synth KIND       generated pages instead of FILEs (--max bytes of them):\n"
		"                     int32-trend (small int32 values plus a slow trend,\n"
		"                     python/README.md gives the same array in numpy),\n"
		"                     int32-sorted (running sum of the same noise: sorted keys)\n"
		"  --pid PID|python   a process's anonymous memory instead of FILEs (its [heap]\n"
		"                     and anonymous rw mappings, --max bytes of them, read through\n"
		"                     /proc/PID/mem); python: the python3 heap zs compare uses\n"
		"  --wb-drop-cache    fsync the backing file and drop it from the page cache\n"
		"                     before reading back (reads then hit the disk)\n");
	opt_pool_help(f, ZRAM_OPTS);
	fprintf(f,
		"  --threads N        writer/reader threads, 1..64 (default 1)\n"
		"  --limit SIZE       mem_limit, 4K..1T (K/M/G suffixes); writes past it fail\n"
		"  --max SIZE         load at most SIZE bytes of pages, 4K..1T (default 256M)\n"
		"  --json             machine-readable output\n"
		"  --vs-kernel        also run the pages through a kernel zram device (root;\n"
		"                     kernel profile only: refused with --profile app)\n"
		"  --kernel-comp NAME kernel comp_algorithm (default: same as --comp)\n"
		"  --agree            with --vs-kernel: keep only the pages that kernel and user\n"
		"                     space compress to the same size (exact mm_stat parity)\n"
		"  --quiet            no progress on stderr\n"
		"  --progress         progress on stderr even when it is not a terminal\n"
		"                     (default: only on a terminal)\n");
}

/* ---- Threaded write / read ---- */

struct job {
	struct zs_zram *z;
	const struct zs_pageset *ps;
	unsigned char *out;        /* read target, npages x page size */
	size_t first, n;
	int writing, progress;
	_Atomic size_t *done;
	size_t total;
	int failed;
	unsigned group;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	size_t psz = j->ps->page_size;

	for (size_t i = j->first; i < j->first + j->n; i++) {
		int rc;

		if (j->group > 1 && i % j->group == 0 && j->first + j->n - i >= j->group) {
			/* A whole group at once: one object, no read-modify-write. */
			rc = j->writing ? zs_zram_write_range(j->z, i, j->group, j->ps->data + i * psz)
					: zs_zram_read_range(j->z, i, j->group, j->out + i * psz,
							     j->group * psz);
			if (rc)
				j->failed += (int)j->group;
			i += j->group - 1;
			if (((i - j->first) & 4095) == 4095)
				atomic_fetch_add(j->done, 4096);
			continue;
		}
		rc = j->writing ? zs_zram_write(j->z, i, j->ps->data + i * psz)
				: zs_zram_read(j->z, i, j->out + i * psz, psz);

		if (rc)
			j->failed++;
		if (((i - j->first) & 4095) == 4095) {
			size_t d = atomic_fetch_add(j->done, 4096) + 4096;

			if (j->progress)
				progress_line("  %s %zu/%zu pages", j->writing ? "write" : "read ",
					d, j->total);
		}
	}
	return NULL;
}

static unsigned phase_group; /* --group, read by run_phase */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static double run_phase(struct zs_zram *z, const struct zs_pageset *ps, unsigned char *out,
			unsigned threads, int writing, int progress, int *failed)
{
	pthread_t tid[64];
	struct job jobs[64];
	_Atomic size_t done = 0;
	size_t per = (ps->npages + threads - 1) / threads;
	double t;

	t = tool_now();
	for (unsigned k = 0; k < threads; k++) {
		size_t first = (size_t)k * per;

		jobs[k] = (struct job){ z, ps, out, first > ps->npages ? ps->npages : first, 0,
					writing, progress && k == 0, &done, ps->npages, 0,
					phase_group };
		jobs[k].n = first >= ps->npages ? 0
			    : (ps->npages - first < per ? ps->npages - first : per);
		if (threads == 1)
			worker(&jobs[0]);
		else
			pthread_create(&tid[k], NULL, worker, &jobs[k]);
	}
	if (threads > 1)
		for (unsigned k = 0; k < threads; k++)
			pthread_join(tid[k], NULL);
	t = tool_now() - t;
	if (progress) {
		progress_line("  %s %zu/%zu pages", writing ? "write" : "read ", ps->npages,
			      ps->npages);
		progress_done();
	}
	*failed = 0;
	for (unsigned k = 0; k < threads; k++)
		*failed += jobs[k].failed;
	return t;
}

/*
 * Drop the pages whose stored size differs between the kernel's compressor
 * and ours, so what remains isolates the allocator: mem_used_total must then
 * agree.  lzo needs none of it (every page agrees: lzo1x_1_15 is the
 * kernel's lzo); lz4 does (liblz4 is shorter on ~5% of pages), and so would
 * a --kernel-comp other than --comp (zs/compress.h).
 */
static int keep_agreeing_pages(struct zs_pageset *ps, struct zs_zram *z, const char *comp,
			       const char *kcomp, char *msg, size_t msg_len)
{
	size_t huge = zs_backend_huge_class_size(zs_zram_backend(z)), kept = 0, psz = ps->page_size;
	uint32_t *ksz = calloc(ps->npages, sizeof(*ksz));
	struct zs_comp *c = NULL;
	unsigned char *buf = NULL;
	int rc = -ENOMEM;

	if (!ksz)
		return rc;
	rc = zs_kzram_sizes(kcomp, ps->data, ps->npages, ksz, msg, msg_len);
	if (!rc)
		rc = zs_comp_create(&(struct zs_comp_config){ .name = comp, .max_src = psz }, &c, NULL, 0);
	if (!rc && !(buf = malloc(zs_comp_bound(c, psz))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < ps->npages; i++) {
		const unsigned char *p = ps->data + i * psz;
		struct zs_zram_store_decision d;

		/* What the store keeps: 0 bytes same-filled, else the rule's length. */
		if (zs_zram_store_decide(c, p, psz, huge, buf, zs_comp_bound(c, psz), &d) < 0)
			continue;
		if ((uint32_t)d.len != ksz[i])
			continue;
		if (kept != i)
			memcpy(ps->data + kept * psz, p, psz);
		kept++;
	}
	if (!rc)
		ps->npages = kept;
	free(buf);
	zs_comp_destroy(c);
	free(ksz);
	return rc;
}

/* ---- Output ---- */

static const char *const mm_cols[9] = { "orig_data_size", "compr_data_size", "mem_used_total",
					"mem_limit", "mem_used_max", "same_pages",
					"pages_compacted", "huge_pages", "huge_pages_since" };

static void mm_array(const struct zs_zram_stats *st, uint64_t v[9])
{
	v[0] = st->orig_data_size;
	v[1] = st->compr_data_size;
	v[2] = st->mem_used_total;
	v[3] = st->mem_limit;
	v[4] = st->mem_used_max;
	v[5] = st->same_pages;
	v[6] = st->pages_compacted;
	v[7] = st->huge_pages;
	v[8] = st->huge_pages_since;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static double mbps(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0.0;
}

/* What one run measured, for the printers. */
struct zrun {
	struct zs_pageset ps;
	struct zs_zram *z;
	unsigned char *out;        /* read-back target, prefaulted */
	uint64_t bytes, v[9], mism, rss_growth;
	struct zs_zram_stats st;
	double tw, tr, cw, cr, twb;
	int wfail, rfail, wb_rc, have_k;
	int wb_limit_hit;          /* writeback stopped at --wb-limit's budget (-EIO, asked for) */
	int paged;                 /* ZS_BACKEND_CAP_PAGES: mem_used_total is pool pages */
	struct zs_zram_wb_result wr;
	struct zs_kzram_result kr;
	char kmsg[256];
};

/* How the writeback ended: the budget's end is what --wb-limit asked for, not an I/O error. */
static const char *wb_status(const struct zrun *r)
{
	return r->wb_limit_hit ? "stopped at --wb-limit" : r->wb_rc ? strerror(-r->wb_rc) : "ok";
}

/* --writeback TYPE: the kernel's writeback types, numbered from 1. */
static int set_wb_type(const char *cmd, const char *opt, const char *arg, void *type)
{
	static const char *const types[] = { "idle", "huge", "huge_idle", "incompressible" };
	(void)opt;
	for (int k = 0; k < 4; k++)
		if (!strcmp(arg, types[k])) {
			*(int *)type = k + 1;
			return 0;
		}
	fprintf(stderr, "zs %s: --writeback: unknown type '%s'\n", cmd, arg);
	return 2;
}

/* --level N: only the form is checked here, with the one int parser
 * (tools/lib/parse.c); the range is the compressor's (zs_comp_check_params). */
static int set_level(const char *cmd, const char *opt, const char *arg, void *level)
{
	(void)opt;
	if (parse_int(arg, -1000000, 1000000, level)) {
		fprintf(stderr, "zs %s: bad level '%s' (a whole number, e.g. 3 or -5)\n", cmd, arg);
		return 2;
	}
	return 0;
}

/* Options -> o; FILEs stay in argv[optind..].  0, 1 after --help, or 2 after a message. */
static int parse(int argc, char **argv, struct opts *o)
{
	int rc;
	uint64_t wb_batch = 0, group = 0, threads = 1;

	*o = (struct opts){ .comp = "lz4", .backend = "zsmalloc",
			    .page_size = ZS_PAGE_SIZE_DEFAULT, .threads = 1,
			    .max_bytes = 256ull << 20 };
	pool_opts_init(&o->po);
	o->progress = opt_progress_default();
	const struct opt_hook wb_type = { set_wb_type, &o->wb_type },
			      level = { set_level, &o->level };
	const struct opt_flag flags[] = {
		{ "comp", 0, OPTK_STR, &o->comp, 0, 0, NULL },
		{ "progress", 0, OPTK_FLAG, &o->progress, 0, 0, NULL },
		{ "threads", 0, OPTK_U64, &threads, 1, 64, NULL },
		{ "limit", 0, OPTK_BYTES, &o->limit, 4096, 1ull << 40, NULL },
		{ "max", 0, OPTK_BYTES, &o->max_bytes, 4096, 1ull << 40, NULL },
		{ "json", 0, OPTK_FLAG, &o->json, 0, 0, NULL },
		{ "vs-kernel", 0, OPTK_FLAG, &o->vs_kernel, 0, 0, NULL },
		{ "kernel-comp", 0, OPTK_STR, &o->kcomp, 0, 0, NULL },
		{ "quiet", 0, OPTK_FLAG, &o->quiet, 0, 0, NULL },
		{ "agree", 0, OPTK_FLAG, &o->agree, 0, 0, NULL },
		{ "dict", 0, OPTK_STR, &o->dict, 0, 0, NULL },
		{ "level", 0, OPTK_FN, (void *)&level, 0, 0, NULL },
		{ "backing", 0, OPTK_STR, &o->backing, 0, 0, NULL },
		{ "writeback", 0, OPTK_FN, (void *)&wb_type, 0, 0, NULL },
		{ "wb-compressed", 0, OPTK_FLAG, &o->wb_compressed, 0, 0, NULL },
		{ "wb-batch", 0, OPTK_U64, &wb_batch, 1, ZS_ZRAM_MAX_WB_BATCH, NULL },
		{ "wb-limit", 0, OPTK_U64, &o->wb_limit, 0, UINT64_MAX, NULL },
		{ "wb-drop-cache", 0, OPTK_FLAG, &o->wb_drop_cache, 0, 0, NULL },
		{ "group", 0, OPTK_U64, &group, 0, 16, NULL },
		{ "matrix", 0, OPTK_FLAG, &o->matrix, 0, 0, NULL },
		{ "filter", 0, OPTK_STR, &o->filter, 0, 0, NULL },
		{ "synth", 0, OPTK_STR, &o->synth, 0, 0, NULL },
		{ "pid", 0, OPTK_STR, &o->pid, 0, 0, NULL },
		{ NULL, 0, OPTK_FLAG, NULL, 0, 0, NULL },
	};
	unsigned char given[sizeof(flags) / sizeof(flags[0])] = { 0 };
	rc = opt_parse("zram", argc, argv, flags, ZRAM_OPTS, &o->po, usage, given);
	if (rc)
		return rc;
	o->threads = (unsigned)threads;
	o->wb_batch = (unsigned)wb_batch;
	o->group = (unsigned)group;
	o->wb_limit_set = opt_given(flags, given, &o->wb_limit);
	if (o->filter && !strcmp(o->filter, "all") && !o->matrix) {
		fprintf(stderr, "zs zram: --filter all needs --matrix\n");
		return 2;
	}
	if (o->filter && strcmp(o->filter, "all") && zs_filter_check(o->filter)) {
		fprintf(stderr, "zs zram: --filter '%s': not none, shuffle:N, delta:N or "
			"delta+shuffle:N with N 2, 4 or 8\n", o->filter);
		return 2;
	}
	if (o->synth && strcmp(o->synth, "int32-trend") && strcmp(o->synth, "int32-sorted")) {
		fprintf(stderr, "zs zram: --synth '%s': the kinds are: int32-trend, int32-sorted\n",
			o->synth);
		return 2;
	}
	if (o->pid && strcmp(o->pid, "python")) {
		uint64_t v;
		if (opt_u64("zram", "--pid", o->pid, 1, 4194304, &v))
			return 2;
	}
	if ((o->synth || o->pid) && optind < argc) {
		fprintf(stderr, "zs zram: --%s takes no FILE or DIR\n", o->synth ? "synth" : "pid");
		return 2;
	}
	if (o->synth && o->pid) {
		fprintf(stderr, "zs zram: give --synth or --pid, not both\n");
		return 2;
	}
	if (optind >= argc && !o->synth && !o->pid) {
		fprintf(stderr, "zs zram: no FILE or DIR given\n");
		usage(stderr);
		return 2;
	}
	o->backend = o->po.backend;
	if (o->po.set & OPT_PAGE_SIZE)
		o->page_size = o->po.cfg.page_size;
	if ((rc = zs_comp_check(o->comp))) {
		fprintf(stderr, "zs zram: compressor '%s': %s%s\n", o->comp, strerror(-rc),
			rc == -EOPNOTSUPP ? " (lzo-rle is kernel-only; use lzo)" : "");
		return 2;
	}
	if (!o->backing && (o->wb_type || o->wb_compressed || o->wb_batch || o->wb_limit_set ||
			   o->wb_drop_cache)) {
		fprintf(stderr, "zs zram: the --writeback/--wb-* options need --backing FILE\n");
		return 2;
	}
	if ((o->agree || o->kcomp) && !o->vs_kernel) {
		/* --kernel-comp alone used to be ignored without a word */
		fprintf(stderr, "zs zram: %s needs --vs-kernel\n",
			o->agree ? "--agree" : "--kernel-comp");
		return 2;
	}
	if (o->vs_kernel && !strcmp(o->po.profile, "app")) {
		/* mm_stat is compared with a kernel device: only its layout can match. */
		fprintf(stderr, "zs zram: --profile app: --vs-kernel needs the kernel profile "
				"(accepted with --vs-kernel: kernel)\n");
		return 2;
	}
	if (o->vs_kernel && o->page_size != 4096) {
		fprintf(stderr, "zs zram: --vs-kernel needs --page-size 4096\n");
		return 2;
	}
	if (!o->kcomp) {
		/* The kernel names the algorithm without our level suffix. */
		static char kbuf[32];

		snprintf(kbuf, sizeof(kbuf), "%s", o->comp);
		kbuf[strcspn(kbuf, ":")] = 0;
		o->kcomp = kbuf;
	}
	o->quiet |= o->json;
	if (o->quiet)
		o->progress = 0;
	return 0;
}

/*
 * --synth int32-trend: little-endian int32 x[i] = i / 4096 + (splitmix64(i) >> 58), a slow
 * trend plus 6 bits of noise (the "small values plus a slow trend"); numpy gives the
 * same array (python/README.md).  int32-sorted: the running sum of that noise, an ascending
 * array (sorted keys, offsets) where delta filters pay.  Deterministic, no data file needed.
 */
static uint64_t splitmix64(uint64_t i)
{
	uint64_t z = i * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int synth_pages(struct zs_pageset *ps, const char *kind, size_t page_size, uint64_t bytes)
{
	size_t np = (size_t)(bytes / page_size), n = np * page_size / 4;

	memset(ps, 0, sizeof(*ps));
	ps->page_size = page_size;
	ps->map_bytes = np * page_size;
	ps->data = mmap(NULL, ps->map_bytes ? ps->map_bytes : 1, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ps->data == MAP_FAILED) {
		ps->data = NULL;
		return -ENOMEM;
	}
	int sorted = !strcmp(kind, "int32-sorted");
	uint32_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t noise = (uint32_t)(splitmix64(i) >> 58);
		uint32_t v = sorted ? (sum += noise) : (uint32_t)(i / 4096) + noise;

		for (int j = 0; j < 4; j++)
			ps->data[i * 4 + j] = (unsigned char)(v >> (8 * j));
	}
	ps->npages = np;
	ps->file_bytes = ps->map_bytes;
	return 0;
}

/* --pid: up to max_bytes of a process's anonymous memory, as zs compare reads it. */
static int process_pages(struct zs_pageset *ps, const char *pid, size_t page_size,
			 uint64_t max_bytes)
{
	struct raw raw = { .what = "process" };
	int rc = zs_pageset_init(&raw.ps, page_size, max_bytes);
	if (rc)
		return rc;
	rc = strcmp(pid, "python") ? raw_add_process(&raw, (int)strtol(pid, NULL, 10))
				   : raw_add_python_heap(&raw);
	raw.ps.npages = (raw.ps.len + page_size - 1) / page_size;
	raw.ps.file_bytes = raw.ps.len;
	*ps = raw.ps;
	return rc;
}

/* Load the pages, create the store (and --agree's page selection), map the read target.
 * 0, or 2 after a message; zrun_free() releases what was made either way. */
static int setup(const struct opts *o, char **paths, int npaths, struct zrun *r)
{
	/* The loader skips what it cannot read inside directories; a path named
	 * on the command line that does not exist is a typo, not an empty set. */
	for (int i = 0; i < npaths; i++)
		if (opt_path("zram", "FILE", paths[i], 1))
			return 2;
	if (o->progress)
		fprintf(stderr, "zs zram: loading pages...\n");
	int lrc = o->synth ? synth_pages(&r->ps, o->synth, o->page_size, o->max_bytes)
		  : o->pid ? process_pages(&r->ps, o->pid, o->page_size, o->max_bytes)
			   : zs_pageset_load(&r->ps, o->page_size, paths, npaths, o->max_bytes);
	if (lrc || !r->ps.npages) {
		if (o->pid) /* name the process: "No such file or directory" alone says nothing */
			fprintf(stderr, "zs zram: --pid %s: no pages loaded (%s)\n", o->pid,
				lrc == -ENOENT ? "no such process" : lrc ? strerror(-lrc) : "empty");
		else
			fprintf(stderr, "zs zram: no pages loaded (%s)\n", lrc ? strerror(-lrc) : "empty");
		return 2;
	}
	r->bytes = (uint64_t)r->ps.npages * r->ps.page_size;
	if (o->matrix)
		return 0;

	struct zs_zram_config cfg;
	int rc;

	/* Kernel profile: --vs-kernel compares pages with a kernel zram device. */
	zs_zram_config_init(&cfg);
	cfg.page_size = o->page_size;
	cfg.disksize = r->bytes;
	cfg.comp = o->comp;
	cfg.backend.kind = o->backend;
	cfg.backend.zs = o->po.cfg;
	cfg.deferred_free = o->po.deferred;
	cfg.mem_limit = o->limit;
	cfg.comp_level = o->level;
	cfg.comp_dict_path = o->dict;
	cfg.backing_path = o->backing;
	cfg.group_pages = o->group;
	cfg.filter = o->filter;
	cfg.writeback_batch_size = o->wb_batch;
	cfg.writeback_compressed = o->wb_compressed;
	char why[256];
	rc = zs_zram_create(&cfg, &r->z, why, sizeof(why));
	if (rc) {
		const char *hint = rc == -EOPNOTSUPP ? " (this backend cannot hold a zram store; use "
						       "zsmalloc, zblock or malloc)"
				   : o->dict || o->level ? " (check --level/--dict for this compressor)"
							 : "";
		fprintf(stderr, "zs zram: store (backend %s, page size %zu, comp %s): %s%s%s%s%s\n",
			o->backend, o->page_size, o->comp, why, why[0] ? " (" : "", strerror(-rc),
			why[0] ? ")" : "", hint);
		return 2;
	}
	r->paged = !!(zs_backend_caps(zs_zram_backend(r->z)) & ZS_BACKEND_CAP_PAGES);
	if (o->agree) {
		size_t before = r->ps.npages;

		rc = keep_agreeing_pages(&r->ps, r->z, o->comp, o->kcomp, r->kmsg, sizeof(r->kmsg));
		if (rc) {
			fprintf(stderr, "zs zram: --agree: %s\n", r->kmsg[0] ? r->kmsg : strerror(-rc));
			return 2;
		}
		fprintf(o->json ? stderr : stdout,
			"zs zram: --agree: %zu of %zu pages compress to the same size in the "
			"kernel and here; using those\n", r->ps.npages, before);
		r->bytes = (uint64_t)r->ps.npages * r->ps.page_size;
		if (!r->ps.npages)
			return 2;
	}
	r->out = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->out == MAP_FAILED) {
		r->out = NULL;
		fprintf(stderr, "zs zram: out of memory\n");
		return 2;
	}
	/* Prefault the read target so page faults are not billed to reads. */
	memset(r->out, 0, r->bytes);
	return 0;
}

/* Write, writeback, read back, compare, and the kernel's side.  0, 1 (mismatches,
 * writeback error) or 2 (--vs-kernel failed). */
static int run(const struct opts *o, struct zrun *r)
{
	phase_group = o->group;
	/* Memory the writes made resident: the store's pages or, for malloc kinds (whose
	 * own counters may count reserved arenas), the heap they grew. */
	int rc, ret = 0;
	size_t rss0 = zs_process_rss();
	r->cw = cpu_s();
	r->tw = run_phase(r->z, &r->ps, r->out, o->threads, 1, o->progress, &r->wfail);
	r->cw = cpu_s() - r->cw;
	size_t rss1 = zs_process_rss();
	r->rss_growth = rss1 > rss0 ? rss1 - rss0 : 0;
	zs_zram_get_stats(r->z, &r->st, sizeof(r->st));
	if (o->wb_type) {
		struct zs_zram_stats st2;

		if (o->wb_type == ZS_ZRAM_WB_IDLE || o->wb_type == ZS_ZRAM_WB_HUGE_IDLE)
			zs_zram_mark_idle(r->z, 0);
		if (o->wb_limit_set)
			zs_zram_set_writeback_limit(r->z, 1, o->wb_limit);
		r->twb = tool_now();
		r->wb_rc = zs_zram_writeback(r->z, (enum zs_zram_wb_type)o->wb_type, 0, &r->wr);
		r->twb = tool_now() - r->twb;
		if (o->wb_drop_cache) {
			int fd = open(o->backing, O_RDWR);

			if (fd < 0 || fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
				fprintf(stderr, "zs zram: --wb-drop-cache: %s\n", strerror(errno));
			if (fd >= 0)
				close(fd);
		}
		if (r->wb_rc == -EIO && o->wb_limit_set) {
			int en;
			uint64_t left;

			r->wb_limit_hit = !zs_zram_get_writeback_limit(r->z, &en, &left) && en &&
					  !left;
		}
		zs_zram_get_stats(r->z, &st2, sizeof(st2));
		r->st.bd_count = st2.bd_count;
		r->st.bd_writes = st2.bd_writes;
		if (!o->quiet)
			fprintf(stderr, "zs zram: writeback: %lu of %lu pages (%s)\n", r->wr.written,
				r->wr.scanned, wb_status(r));
		if (r->wb_rc && !r->wb_limit_hit)
			ret = 1;
		/* The memory numbers printed are those after writeback. */
		r->st.mem_used_total = st2.mem_used_total;
		r->st.compr_data_size = st2.compr_data_size;
		r->st.huge_pages = st2.huge_pages;
	}
	r->cr = cpu_s();
	r->tr = run_phase(r->z, &r->ps, r->out, o->threads, 0, o->progress, &r->rfail);
	r->cr = cpu_s() - r->cr;
	if (o->wb_type) {
		struct zs_zram_stats st3;

		zs_zram_get_stats(r->z, &st3, sizeof(st3));
		r->st.bd_reads = st3.bd_reads;
		r->st.bd_read_retries = st3.bd_read_retries;
		r->st.bd_read_errors = st3.bd_read_errors;
		r->st.bd_csum_errors = st3.bd_csum_errors;
	}
	for (size_t i = 0; i < r->ps.npages; i++)
		r->mism += memcmp(r->out + i * r->ps.page_size, r->ps.data + i * r->ps.page_size, r->ps.page_size) != 0;
	/* Pages whose write failed (limit) read back as zeros; they are not lost data. */
	if (r->wfail && r->mism >= (uint64_t)r->wfail)
		r->mism -= (uint64_t)r->wfail;
	mm_array(&r->st, r->v);

	if (o->vs_kernel) {
		if (!o->quiet)
			fprintf(stderr, "zs zram: kernel zram (%s), O_DIRECT 4 KiB...\n", o->kcomp);
		rc = zs_kzram_run(o->kcomp, r->ps.data, r->ps.npages, &r->kr, r->kmsg, sizeof(r->kmsg));
		if (rc) {
			fprintf(stderr, "zs zram: --vs-kernel: %s\n", r->kmsg[0] ? r->kmsg : strerror(-rc));
			ret = 2;
		} else {
			r->have_k = 1;
		}
	}

	if (r->mism || r->rfail || (r->have_k && r->kr.mismatches))
		ret = 1;
	return ret;
}

static void print_json(const struct opts *o, const struct zrun *r)
{
	struct json js;
	json_init(&js, stdout, 1);
	json_obj(&js);
	json_kuint(&js, "pages", r->ps.npages);
	json_kuint(&js, "files", r->ps.files);
	json_kuint(&js, "file_bytes", r->ps.file_bytes);
	json_kuint(&js, "page_size", r->ps.page_size);
	json_kstr(&js, "comp", zs_zram_comp_name(r->z));
	json_kstr(&js, "filter", o->filter ? o->filter : "none");
	json_kstr(&js, "backend", o->backend);
	json_kuint(&js, "threads", o->threads);
	if (o->wb_type) {
		json_kobj(&js, "writeback");
		json_kuint(&js, "written", r->wr.written);
		json_kuint(&js, "scanned", r->wr.scanned);
		json_kint(&js, "rc", r->wb_rc);
		json_kbool(&js, "limit_reached", r->wb_limit_hit);
		json_kfixed(&js, "seconds", r->twb, 6);
		json_kfixed(&js, "MBps", mbps((uint64_t)r->wr.written * r->ps.page_size, r->twb), 1);
		json_kfixed(&js, "read_us_per_page", 1e6 * r->tr / (double)r->ps.npages, 3);
		json_kuint(&js, "bd_count", r->st.bd_count);
		json_kuint(&js, "bd_reads", r->st.bd_reads);
		json_kuint(&js, "bd_writes", r->st.bd_writes);
		json_kuint(&js, "bd_read_retries", r->st.bd_read_retries);
		json_kuint(&js, "bd_read_errors", r->st.bd_read_errors);
		json_kuint(&js, "bd_csum_errors", r->st.bd_csum_errors);
		json_kint(&js, "compressed", o->wb_compressed);
		json_obj_end(&js);
	}
	json_kobj(&js, "store");
	json_kbool(&js, "paged", r->paged);
	for (int i = 0; i < 9; i++)
		json_kuint(&js, mm_cols[i], r->v[i]);
	json_kuint(&js, "failed_reads", r->st.failed_reads);
	json_kuint(&js, "failed_writes", r->st.failed_writes);
	json_kuint(&js, "notify_free", r->st.notify_free);
	json_kfixed(&js, "ratio", ratio(r->v[0], r->v[2]), 4);
	json_kfixed(&js, "ratio_compr", ratio(r->v[0], r->v[1]), 4);
	json_kfixed(&js, "write_s", r->tw, 6);
	json_kfixed(&js, "read_s", r->tr, 6);
	json_kfixed(&js, "write_MBps", mbps(r->bytes, r->tw), 1);
	json_kfixed(&js, "read_MBps", mbps(r->bytes, r->tr), 1);
	json_kfixed(&js, "write_cpu_s", r->cw, 4);
	json_kfixed(&js, "read_cpu_s", r->cr, 4);
	json_kuint(&js, "group", o->group ? o->group : 1);
	json_kuint(&js, "mismatches", r->mism);
	json_kuint(&js, "rss_growth", r->rss_growth);
	json_obj_end(&js);
	if (r->have_k) {
		json_kobj(&js, "kernel");
		json_kstr(&js, "comp", r->kr.comp);
		for (int i = 0; i < 9; i++)
			json_kuint(&js, mm_cols[i], r->kr.mm_stat[i]);
		json_kfixed(&js, "ratio", ratio(r->kr.mm_stat[0], r->kr.mm_stat[2]), 4);
		json_kfixed(&js, "write_s", r->kr.write_s, 6);
		json_kfixed(&js, "read_s", r->kr.read_s, 6);
		json_kfixed(&js, "write_MBps", mbps(r->bytes, r->kr.write_s), 1);
		json_kfixed(&js, "read_MBps", mbps(r->bytes, r->kr.read_s), 1);
		json_kuint(&js, "mismatches", r->kr.mismatches);
		json_obj_end(&js);
	}
	json_obj_end(&js);
	json_done(&js);
}

static void print_text(const struct opts *o, const struct zrun *r)
{
	char line[256];

	printf("zs zram: %zu pages (%.1f MiB) from %zu files; comp %s%s%s, backend %s, page %zu, "
	       "threads %u\n",
	       r->ps.npages, (double)r->bytes / 1048576.0, r->ps.files, zs_zram_comp_name(r->z),
	       o->filter ? ", filter " : "", o->filter ? o->filter : "", o->backend,
	       r->ps.page_size, o->threads);
	zs_zram_format_mm_stat(&r->st, line, sizeof(line));
	printf("mm_stat  %s", line);
	zs_zram_format_io_stat(&r->st, line, sizeof(line));
	printf("io_stat  %s", line);
	if (o->wb_type) {
		zs_zram_format_bd_stat(&r->st, line, sizeof(line));
		printf("bd_stat  %s", line);
		printf("bd_read_faults  retries %llu errors %llu checksum mismatches %llu\n",
		       (unsigned long long)r->st.bd_read_retries,
		       (unsigned long long)r->st.bd_read_errors,
		       (unsigned long long)r->st.bd_csum_errors);
		printf("writeback: %lu of %lu pages in %.3f s (%.1f MB/s%s), %s; read back "
		       "%.2f us/page\n",
		       r->wr.written, r->wr.scanned, r->twb,
		       mbps((uint64_t)r->wr.written * r->ps.page_size, r->twb),
		       o->wb_compressed ? ", compressed" : "",
		       wb_status(r), 1e6 * r->tr / (double)r->ps.npages);
	}
	printf("\n%-18s %16s", "", "store");
	if (r->have_k)
		printf(" %16s %10s", "kernel", "store/kern");
	printf("\n");
	for (int i = 0; i < 9; i++) {
		printf("%-18s %16llu", mm_cols[i], (unsigned long long)r->v[i]);
		if (r->have_k) {
			printf(" %16llu", (unsigned long long)r->kr.mm_stat[i]);
			if (r->kr.mm_stat[i])
				printf(" %10.4f", ratio(r->v[i], r->kr.mm_stat[i]));
		}
		printf("\n");
	}
	printf("%-18s %16llu\n", "rss growth (write)", (unsigned long long)r->rss_growth);
	printf("%-18s %16.3f", "ratio orig/mem", ratio(r->v[0], r->v[2]));
	if (r->have_k)
		printf(" %16.3f", ratio(r->kr.mm_stat[0], r->kr.mm_stat[2]));
	printf("\n%-18s %16.3f", "ratio orig/compr", ratio(r->v[0], r->v[1]));
	if (r->have_k)
		printf(" %16.3f", ratio(r->kr.mm_stat[0], r->kr.mm_stat[1]));
	printf("\n%-18s %16.1f", "write MB/s", mbps(r->bytes, r->tw));
	if (r->have_k)
		printf(" %16.1f %10.2f", mbps(r->bytes, r->kr.write_s), r->kr.write_s / r->tw);
	printf("\n%-18s %16.0f", "write pages/s", (double)r->ps.npages / r->tw);
	if (r->have_k)
		printf(" %16.0f", (double)r->ps.npages / r->kr.write_s);
	printf("\n%-18s %16.1f", "read MB/s", mbps(r->bytes, r->tr));
	if (r->have_k)
		printf(" %16.1f %10.2f", mbps(r->bytes, r->kr.read_s), r->kr.read_s / r->tr);
	printf("\n%-18s %16.0f", "read pages/s", (double)r->ps.npages / r->tr);
	if (r->have_k)
		printf(" %16.0f", (double)r->ps.npages / r->kr.read_s);
	printf("\n%-18s %16.3f", "write cpu s", r->cw);
	printf("\n%-18s %16.3f", "read cpu s", r->cr);
	printf("\n%-18s %16llu", "mismatches", (unsigned long long)r->mism);
	if (r->have_k)
		printf(" %16llu", (unsigned long long)r->kr.mismatches);
	printf("\n");
	if (r->have_k) {
		double dm = 100.0 * ((double)r->v[2] - (double)r->kr.mm_stat[2]) /
			    (double)(r->kr.mm_stat[2] ? r->kr.mm_stat[2] : 1);
		double dc = 100.0 * ((double)r->v[1] - (double)r->kr.mm_stat[1]) /
			    (double)(r->kr.mm_stat[1] ? r->kr.mm_stat[1] : 1);

		printf("mem_used_total: store %+.2f%% vs kernel (compr_data_size %+.2f%%)\n",
		       dm, dc);
		if (o->threads > 1)
			printf("note: the kernel side is single threaded; store uses %u threads\n",
			       o->threads);
	}
	if (r->wfail)
		printf("failed writes: %d (memory limit)\n", r->wfail);
}

static void zrun_free(struct zrun *r)
{
	if (r->out)
		munmap(r->out, r->bytes);
	if (r->z)
		zs_zram_destroy(r->z);
	if (r->ps.data)
		zs_pageset_free(&r->ps);
}

int cmd_zram(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	struct zrun *r = calloc(1, sizeof(*r));
	if (!r)
		return 2;
	rc = setup(&o, argv + optind, argc - optind, r);
	if (!rc && o.matrix)
		rc = zram_matrix(&r->ps, o.dict, o.filter, o.json);
	else if (!rc) {
		rc = run(&o, r);
		if (o.json)
			print_json(&o, r);
		else
			print_text(&o, r);
	}
	zrun_free(r);
	free(r);
	return rc;
}
