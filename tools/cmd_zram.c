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
#include "util.h"
#include "opts.h"
#include "zs/compress.h"
#include "zs/pages.h"
#include "zs/zram.h"
#include "zs/harness.h"

struct opts {
	const char *comp, *backend, *kcomp, *dict;
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
		"  --wb-limit PAGES   enable writeback_limit with this budget\n"
		"  --matrix           table of every compressor x level (x --dict) at 4K and 64K\n"
		"                     groups: ratio, pool memory, MB/s, CPU (--json: one array)\n"
		"  --group N          compress N contiguous pages as one object (2..16, power of 2)\n"
		"  --wb-drop-cache    fsync the backing file and drop it from the page cache\n"
		"                     before reading back (reads then hit the disk)\n");
	opt_pool_help(f, ZRAM_OPTS);
	fprintf(f,
		"  --threads N        writer/reader threads, 1..64 (default 1)\n"
		"  --limit SIZE       mem_limit, 4K..1T (K/M/G suffixes); writes past it fail\n"
		"  --max SIZE         load at most SIZE bytes of pages, 4K..1T (default 256M)\n"
		"  --json             machine-readable output\n"
		"  --vs-kernel        also run the pages through a kernel zram device (root)\n"
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
 * and ours (lz4 versions differ on a few pages; lzo-rle vs lzo1x on most),
 * so what remains isolates the allocator: mem_used_total must then agree.
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
		rc = zs_comp_create(comp, psz, &c);
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

int cmd_zram(int argc, char **argv)
{
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "comp", required_argument, NULL, 'c' },
		{ "progress", no_argument, NULL, 'P' },
		{ "threads", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'l' },
		{ "max", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "vs-kernel", no_argument, NULL, 'k' },
		{ "kernel-comp", required_argument, NULL, 'K' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "agree", no_argument, NULL, 'a' },
		{ "dict", required_argument, NULL, 'D' },
		{ "level", required_argument, NULL, 'L' },
		{ "backing", required_argument, NULL, 'B' },
		{ "writeback", required_argument, NULL, 'W' },
		{ "wb-compressed", no_argument, NULL, 'C' },
		{ "wb-batch", required_argument, NULL, 'N' },
		{ "wb-limit", required_argument, NULL, 'T' },
		{ "wb-drop-cache", no_argument, NULL, 'Y' },
		{ "group", required_argument, NULL, 'G' },
		{ "matrix", no_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .comp = "lz4", .backend = "zsmalloc", .page_size = 4096, .threads = 1,
			  .max_bytes = 256ull << 20 };
	struct zs_zram_wb_result wr = { 0, 0 };
	double twb = 0;
	int wb_rc = 0;
	struct zs_zram_config cfg;
	struct zs_zram_stats st;
	struct zs_pageset ps;
	struct zs_kzram_result kr;
	struct zs_zram *z;
	unsigned char *out;
	uint64_t v[9], mism = 0, bytes;
	double tw, tr;
	int opt, rc, wfail, rfail, have_k = 0, ret = 0;
	char kmsg[256] = "", line[256];

	pool_opts_init(&o.po);
	o.progress = opt_progress_default();
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		uint64_t x;

		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt_pool_arg("zram", ZRAM_OPTS, opt, optarg, &o.po))
				return 2;
			continue;
		}
		switch (opt) {
		case 'c': o.comp = optarg; break;
		case 'P': o.progress = 1; break;
		case 'K': o.kcomp = optarg; break;
		case 'j': o.json = 1; break;
		case 'k': o.vs_kernel = 1; break;
		case 'q': o.quiet = 1; break;
		case 'a': o.agree = 1; break;
		case 'D': o.dict = optarg; break;
		case 'X': o.matrix = 1; break;
		case 'B': o.backing = optarg; break;
		case 'C': o.wb_compressed = 1; break;
		case 'Y': o.wb_drop_cache = 1; break;
		case 'W': {
			static const char *const types[] = { "idle", "huge", "huge_idle",
							     "incompressible" };
			for (int k = 0; k < 4; k++)
				if (!strcmp(optarg, types[k]))
					o.wb_type = k + 1;
			if (!o.wb_type) {
				fprintf(stderr, "zs zram: --writeback: unknown type '%s'\n", optarg);
				return 2;
			}
			break;
		}
		case 'N':
		case 'G':
		case 'T': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    (opt == 'N' && (v < 1 || v > ZS_ZRAM_MAX_WB_BATCH)) ||
			    (opt == 'G' && v > 16)) {
				fprintf(stderr, "zs zram: bad number '%s'\n", optarg);
				return 2;
			}
			if (opt == 'N')
				o.wb_batch = (unsigned)v;
			else if (opt == 'G')
				o.group = (unsigned)v;
			else {
				o.wb_limit = v;
				o.wb_limit_set = 1;
			}
			break;
		}
		case 'L': {
			char *end;
			long lv;

			errno = 0;
			lv = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || lv < -1000000 || lv > 1000000) {
				fprintf(stderr, "zs zram: bad level '%s'\n", optarg);
				return 2;
			}
			o.level = (int)lv;
			break;
		}
		case 't':
			if (opt_u64("zram", "--threads", optarg, 1, 64, &x))
				return 2;
			o.threads = (unsigned)x;
			break;
		case 'l':
		case 'm':
			if (opt_bytes("zram", opt == 'l' ? "--limit" : "--max", optarg, 4096, 1ull << 40,
				      &x))
				return 2;
			if (opt == 'l')
				o.limit = x;
			else
				o.max_bytes = x;
			break;
		case 'h': usage(stdout); return 0;
		default: return opt_bad("zram", argc, argv);
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "zs zram: no FILE or DIR given\n");
		usage(stderr);
		return 2;
	}
	o.backend = o.po.backend;
	if (o.po.set & OPT_PAGE_SIZE)
		o.page_size = o.po.cfg.page_size;
	if ((rc = zs_comp_check(o.comp))) {
		fprintf(stderr, "zs zram: compressor '%s': %s%s\n", o.comp, strerror(-rc),
			rc == -EOPNOTSUPP ? " (lzo-rle is kernel-only; use lzo)" : "");
		return 2;
	}
	if (!o.backing && (o.wb_type || o.wb_compressed || o.wb_batch || o.wb_limit_set ||
			   o.wb_drop_cache)) {
		fprintf(stderr, "zs zram: the --writeback/--wb-* options need --backing FILE\n");
		return 2;
	}
	if (o.agree && !o.vs_kernel) {
		fprintf(stderr, "zs zram: --agree needs --vs-kernel\n");
		return 2;
	}
	if (o.vs_kernel && o.page_size != 4096) {
		fprintf(stderr, "zs zram: --vs-kernel needs --page-size 4096\n");
		return 2;
	}
	if (!o.kcomp) {
		/* The kernel names the algorithm without our level suffix. */
		static char kbuf[32];

		snprintf(kbuf, sizeof(kbuf), "%s", o.comp);
		kbuf[strcspn(kbuf, ":")] = 0;
		o.kcomp = kbuf;
	}

	/* The loader skips what it cannot read inside directories; a path named
	 * on the command line that does not exist is a typo, not an empty set. */
	for (int i = optind; i < argc; i++)
		if (opt_path("zram", "FILE", argv[i], 1))
			return 2;
	o.quiet |= o.json;
	if (o.quiet)
		o.progress = 0;
	if (o.progress)
		fprintf(stderr, "zs zram: loading pages...\n");
	rc = zs_pageset_load(&ps, o.page_size, argv + optind, argc - optind, o.max_bytes);
	if (rc || !ps.npages) {
		fprintf(stderr, "zs zram: no pages loaded (%s)\n", rc ? strerror(-rc) : "empty");
		return 2;
	}
	bytes = (uint64_t)ps.npages * ps.page_size;
	if (o.matrix) {
		ret = zram_matrix(&ps, o.dict, o.json);
		zs_pageset_free(&ps);
		return ret;
	}

	zs_zram_config_init(&cfg);
	cfg.page_size = o.page_size;
	cfg.disksize = bytes;
	cfg.comp = o.comp;
	cfg.backend.kind = o.backend;
	cfg.backend.zs = o.po.cfg;
	cfg.deferred_free = o.po.deferred;
	cfg.mem_limit = o.limit;
	cfg.comp_level = o.level;
	cfg.comp_dict_path = o.dict;
	cfg.backing_path = o.backing;
	cfg.group_pages = o.group;
	cfg.writeback_batch_size = o.wb_batch;
	cfg.writeback_compressed = o.wb_compressed;
	rc = zs_zram_create(&cfg, &z);
	if (rc) {
		fprintf(stderr, "zs zram: store (backend %s, page size %zu, comp %s): %s%s\n", o.backend,
			o.page_size, o.comp, strerror(-rc),
			rc == -EOPNOTSUPP ? " (this backend cannot hold a zram store; use zsmalloc, "
					    "zblock or malloc)"
			: o.dict || o.level ? " (check --level/--dict for this compressor)" : "");
		zs_pageset_free(&ps);
		return 2;
	}
	if (o.agree) {
		size_t before = ps.npages;

		rc = keep_agreeing_pages(&ps, z, o.comp, o.kcomp, kmsg, sizeof(kmsg));
		if (rc) {
			fprintf(stderr, "zs zram: --agree: %s\n", kmsg[0] ? kmsg : strerror(-rc));
			zs_zram_destroy(z);
			zs_pageset_free(&ps);
			return 2;
		}
		fprintf(o.json ? stderr : stdout,
			"zs zram: --agree: %zu of %zu pages compress to the same size in the "
			"kernel and here; using those\n", ps.npages, before);
		bytes = (uint64_t)ps.npages * ps.page_size;
		if (!ps.npages) {
			zs_zram_destroy(z);
			zs_pageset_free(&ps);
			return 2;
		}
	}
	out = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (out == MAP_FAILED) {
		fprintf(stderr, "zs zram: out of memory\n");
		zs_zram_destroy(z);
		zs_pageset_free(&ps);
		return 2;
	}
	/* Prefault the read target so page faults are not billed to reads. */
	memset(out, 0, bytes);

	phase_group = o.group;
	/* Memory the writes made resident: the store's pages or, for malloc kinds (whose
	 * own counters may count reserved arenas), the heap they grew. */
	size_t rss0 = zs_process_rss();
	double cw = cpu_s();
	tw = run_phase(z, &ps, out, o.threads, 1, o.progress, &wfail);
	cw = cpu_s() - cw;
	size_t rss1 = zs_process_rss();
	uint64_t rss_growth = rss1 > rss0 ? rss1 - rss0 : 0;
	zs_zram_get_stats(z, &st);
	if (o.wb_type) {
		struct zs_zram_stats st2;

		if (o.wb_type == ZS_ZRAM_WB_IDLE || o.wb_type == ZS_ZRAM_WB_HUGE_IDLE)
			zs_zram_mark_idle(z, 0);
		if (o.wb_limit_set)
			zs_zram_set_writeback_limit(z, 1, o.wb_limit);
		twb = tool_now();
		wb_rc = zs_zram_writeback(z, (enum zs_zram_wb_type)o.wb_type, 0, &wr);
		twb = tool_now() - twb;
		if (o.wb_drop_cache) {
			int fd = open(o.backing, O_RDWR);

			if (fd < 0 || fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
				fprintf(stderr, "zs zram: --wb-drop-cache: %s\n", strerror(errno));
			if (fd >= 0)
				close(fd);
		}
		zs_zram_get_stats(z, &st2);
		st.bd_count = st2.bd_count;
		st.bd_writes = st2.bd_writes;
		if (!o.quiet)
			fprintf(stderr, "zs zram: writeback: %lu of %lu pages (%s)\n", wr.written,
				wr.scanned, wb_rc ? strerror(-wb_rc) : "ok");
		if (wb_rc)
			ret = 1;
		/* The memory numbers printed are those after writeback. */
		st.mem_used_total = st2.mem_used_total;
		st.compr_data_size = st2.compr_data_size;
		st.huge_pages = st2.huge_pages;
	}
	double cr = cpu_s();
	tr = run_phase(z, &ps, out, o.threads, 0, o.progress, &rfail);
	cr = cpu_s() - cr;
	if (o.wb_type) {
		struct zs_zram_stats st3;

		zs_zram_get_stats(z, &st3);
		st.bd_reads = st3.bd_reads;
	}
	for (size_t i = 0; i < ps.npages; i++)
		mism += memcmp(out + i * ps.page_size, ps.data + i * ps.page_size, ps.page_size) != 0;
	/* Pages whose write failed (limit) read back as zeros; they are not lost data. */
	if (wfail && mism >= (uint64_t)wfail)
		mism -= (uint64_t)wfail;
	mm_array(&st, v);

	if (o.vs_kernel) {
		if (!o.quiet)
			fprintf(stderr, "zs zram: kernel zram (%s), O_DIRECT 4 KiB...\n", o.kcomp);
		rc = zs_kzram_run(o.kcomp, ps.data, ps.npages, &kr, kmsg, sizeof(kmsg));
		if (rc) {
			fprintf(stderr, "zs zram: --vs-kernel: %s\n", kmsg[0] ? kmsg : strerror(-rc));
			ret = 2;
		} else {
			have_k = 1;
		}
	}

	if (o.json) {
		printf("{\"pages\": %zu, \"files\": %zu, \"file_bytes\": %llu, \"page_size\": %zu, "
		       "\"comp\": \"%s\", \"backend\": \"%s\", \"threads\": %u,\n",
		       ps.npages, ps.files, (unsigned long long)ps.file_bytes, ps.page_size,
		       zs_zram_comp_name(z), o.backend, o.threads);
		if (o.wb_type)
			printf(" \"writeback\": {\"written\": %lu, \"scanned\": %lu, \"rc\": %d, "
			       "\"seconds\": %.6f, \"MBps\": %.1f, \"read_us_per_page\": %.3f, "
			       "\"bd_count\": %llu, \"bd_reads\": %llu, \"bd_writes\": %llu, "
			       "\"compressed\": %d},\n",
			       wr.written, wr.scanned, wb_rc, twb,
			       mbps((uint64_t)wr.written * ps.page_size, twb),
			       1e6 * tr / (double)ps.npages, (unsigned long long)st.bd_count,
			       (unsigned long long)st.bd_reads, (unsigned long long)st.bd_writes,
			       o.wb_compressed);
		printf(" \"store\": {");
		for (int i = 0; i < 9; i++)
			printf("\"%s\": %llu, ", mm_cols[i], (unsigned long long)v[i]);
		printf("\"failed_reads\": %llu, \"failed_writes\": %llu, \"notify_free\": %llu, "
		       "\"ratio\": %.4f, \"ratio_compr\": %.4f, \"write_s\": %.6f, \"read_s\": %.6f, "
		       "\"write_MBps\": %.1f, \"read_MBps\": %.1f, \"write_cpu_s\": %.4f, "
		       "\"read_cpu_s\": %.4f, \"group\": %u, \"mismatches\": %llu, "
		       "\"rss_growth\": %llu}",
		       (unsigned long long)st.failed_reads, (unsigned long long)st.failed_writes,
		       (unsigned long long)st.notify_free, ratio(v[0], v[2]), ratio(v[0], v[1]), tw,
		       tr, mbps(bytes, tw), mbps(bytes, tr), cw, cr, o.group ? o.group : 1,
		       (unsigned long long)mism,
		       (unsigned long long)rss_growth);
		if (have_k) {
			printf(",\n \"kernel\": {\"comp\": \"%s\", ", kr.comp);
			for (int i = 0; i < 9; i++)
				printf("\"%s\": %llu, ", mm_cols[i], (unsigned long long)kr.mm_stat[i]);
			printf("\"ratio\": %.4f, \"write_s\": %.6f, \"read_s\": %.6f, "
			       "\"write_MBps\": %.1f, \"read_MBps\": %.1f, \"mismatches\": %llu}",
			       ratio(kr.mm_stat[0], kr.mm_stat[2]), kr.write_s, kr.read_s,
			       mbps(bytes, kr.write_s), mbps(bytes, kr.read_s),
			       (unsigned long long)kr.mismatches);
		}
		printf("}\n");
	} else {
		printf("zs zram: %zu pages (%.1f MiB) from %zu files; comp %s, backend %s, page %zu, "
		       "threads %u\n",
		       ps.npages, (double)bytes / 1048576.0, ps.files, zs_zram_comp_name(z), o.backend,
		       ps.page_size, o.threads);
		zs_zram_format_mm_stat(&st, line, sizeof(line));
		printf("mm_stat  %s", line);
		zs_zram_format_io_stat(&st, line, sizeof(line));
		printf("io_stat  %s", line);
		if (o.wb_type) {
			zs_zram_format_bd_stat(&st, line, sizeof(line));
			printf("bd_stat  %s", line);
			printf("writeback: %lu of %lu pages in %.3f s (%.1f MB/s%s), %s; read back "
			       "%.2f us/page\n",
			       wr.written, wr.scanned, twb,
			       mbps((uint64_t)wr.written * ps.page_size, twb),
			       o.wb_compressed ? ", compressed" : "",
			       wb_rc ? strerror(-wb_rc) : "ok", 1e6 * tr / (double)ps.npages);
		}
		printf("\n%-18s %16s", "", "store");
		if (have_k)
			printf(" %16s %10s", "kernel", "store/kern");
		printf("\n");
		for (int i = 0; i < 9; i++) {
			printf("%-18s %16llu", mm_cols[i], (unsigned long long)v[i]);
			if (have_k) {
				printf(" %16llu", (unsigned long long)kr.mm_stat[i]);
				if (kr.mm_stat[i])
					printf(" %10.4f", ratio(v[i], kr.mm_stat[i]));
			}
			printf("\n");
		}
		printf("%-18s %16llu\n", "rss growth (write)", (unsigned long long)rss_growth);
		printf("%-18s %16.3f", "ratio orig/mem", ratio(v[0], v[2]));
		if (have_k)
			printf(" %16.3f", ratio(kr.mm_stat[0], kr.mm_stat[2]));
		printf("\n%-18s %16.3f", "ratio orig/compr", ratio(v[0], v[1]));
		if (have_k)
			printf(" %16.3f", ratio(kr.mm_stat[0], kr.mm_stat[1]));
		printf("\n%-18s %16.1f", "write MB/s", mbps(bytes, tw));
		if (have_k)
			printf(" %16.1f %10.2f", mbps(bytes, kr.write_s), kr.write_s / tw);
		printf("\n%-18s %16.0f", "write pages/s", (double)ps.npages / tw);
		if (have_k)
			printf(" %16.0f", (double)ps.npages / kr.write_s);
		printf("\n%-18s %16.1f", "read MB/s", mbps(bytes, tr));
		if (have_k)
			printf(" %16.1f %10.2f", mbps(bytes, kr.read_s), kr.read_s / tr);
		printf("\n%-18s %16.0f", "read pages/s", (double)ps.npages / tr);
		if (have_k)
			printf(" %16.0f", (double)ps.npages / kr.read_s);
		printf("\n%-18s %16.3f", "write cpu s", cw);
		printf("\n%-18s %16.3f", "read cpu s", cr);
		printf("\n%-18s %16llu", "mismatches", (unsigned long long)mism);
		if (have_k)
			printf(" %16llu", (unsigned long long)kr.mismatches);
		printf("\n");
		if (have_k) {
			double dm = 100.0 * ((double)v[2] - (double)kr.mm_stat[2]) /
				    (double)(kr.mm_stat[2] ? kr.mm_stat[2] : 1);
			double dc = 100.0 * ((double)v[1] - (double)kr.mm_stat[1]) /
				    (double)(kr.mm_stat[1] ? kr.mm_stat[1] : 1);

			printf("mem_used_total: store %+.2f%% vs kernel (compr_data_size %+.2f%%)\n",
			       dm, dc);
			if (o.threads > 1)
				printf("note: the kernel side is single threaded; store uses %u threads\n",
				       o.threads);
		}
		if (wfail)
			printf("failed writes: %d (memory limit)\n", wfail);
	}
	if (mism || rfail || (have_k && kr.mismatches))
		ret = 1;
	munmap(out, bytes);
	zs_zram_destroy(z);
	zs_pageset_free(&ps);
	return ret;
}
