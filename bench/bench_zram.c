/*
 * bench_zram: what the zram store costs on top of its compressor, and how it
 * compares with the kernel's zram, on the same pages in one run.
 *
 * For each compressor and thread count: raw compress / decompress of every
 * page with the library's contexts (the floor: no allocator, no slot table),
 * then the store's write / read of the same pages.  store/raw is the
 * allocator's (and slot table's) share of the time.  With root and zram
 * present the kernel device gets the same pages with 4 KiB O_DIRECT I/O
 * from the same number of threads (each on its own contiguous range of the
 * one device, as swap-like I/O from T CPUs), and store/kernel is printed for
 * every thread count.  Times are the best of --reps runs.
 *
 * usage: bench_zram [--quick] [--json] [--max SIZE_MB] [--reps N | --rounds N]
 *                   [--comp lz4,zstd] [--threads 1,2] [--backend KIND] [--no-kernel]
 *                   [--class-shards N] [--profile kernel|app] [PATH...]
 *                   (default /usr/bin; --quick: 8 MiB, lz4, 1 thread, 1 rep)
 * The store defaults to the kernel profile (zs_zram_config_init), the one
 * the kernel side is compared with; --profile app measures what an
 * application gets from zs_zram_config_init_app.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_common.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define MAXT 16

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum phase { RAW_COMP, RAW_DECOMP, STORE_WRITE, STORE_READ };

struct ctx {
	const struct zs_pageset *ps;
	const char *comp;
	unsigned char *cbuf;     /* raw: compressed pages, `stride` bytes apart */
	int *clen;
	size_t stride;
	unsigned char *out;      /* read / decompress target (prefaulted) */
	struct zs_zram *z;
};

struct job {
	struct ctx *c;
	enum phase ph;
	size_t first, n;
	struct zs_comp *comp;
	long errors;
	pthread_barrier_t *bar;
	double t0, t1;
};

static void *work(void *arg)
{
	struct job *j = arg;
	struct ctx *c = j->c;
	size_t psz = c->ps->page_size;

	pthread_barrier_wait(j->bar);
	j->t0 = now_s();
	for (size_t i = j->first; i < j->first + j->n; i++) {
		const unsigned char *page = c->ps->data + i * psz;
		int rc;

		switch (j->ph) {
		case RAW_COMP:
			rc = zs_compress(j->comp, page, psz, c->cbuf + i * c->stride, c->stride);
			c->clen[i] = rc;
			break;
		case RAW_DECOMP:
			rc = zs_decompress(j->comp, c->cbuf + i * c->stride, (size_t)c->clen[i],
					   c->out + i * psz, psz);
			break;
		case STORE_WRITE:
			rc = zs_zram_write(c->z, i, page);
			break;
		default:
			rc = zs_zram_read(c->z, i, c->out + i * psz, psz);
			break;
		}
		j->errors += rc < 0;
	}
	j->t1 = now_s();
	return NULL;
}

/* Wall time of one phase over all pages with `nt` threads, contiguous page ranges each. */
static double run(struct ctx *c, enum phase ph, unsigned nt, struct zs_comp **comps, long *errors)
{
	pthread_t tid[MAXT];
	struct job jobs[MAXT];
	pthread_barrier_t bar;
	size_t np = c->ps->npages, per = (np + nt - 1) / nt;
	double t0 = 1e30, t1 = 0;

	pthread_barrier_init(&bar, NULL, nt);
	for (unsigned k = 0; k < nt; k++) {
		size_t first = (size_t)k * per < np ? (size_t)k * per : np;

		jobs[k] = (struct job){ c, ph, first, np - first < per ? np - first : per,
					comps ? comps[k] : NULL, 0, &bar, 0, 0 };
		if (k)
			pthread_create(&tid[k], NULL, work, &jobs[k]);
	}
	work(&jobs[0]);
	for (unsigned k = 1; k < nt; k++)
		pthread_join(tid[k], NULL);
	pthread_barrier_destroy(&bar);
	for (unsigned k = 0; k < nt; k++) {
		t0 = jobs[k].t0 < t0 ? jobs[k].t0 : t0;
		t1 = jobs[k].t1 > t1 ? jobs[k].t1 : t1;
		*errors += jobs[k].errors;
	}
	return t1 - t0;
}

static double mbps(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0;
}

int main(int argc, char **argv)
{
	char comp_arg[128] = "", *comps[8];
	const char *comp_s = NULL;
	int threads[MAXT], nthr = 0;
	const char *backend = "zsmalloc";
	char *def_paths[] = { "/usr/bin" }, **paths = def_paths;
	int npaths = 1, reps = 0, nokernel = 0, ncomp = 0, quick = 0;
	uint64_t max_mb = 0;
	struct zs_pageset ps;
	unsigned char *out;
	size_t bytes;
	struct bench_json js = { 0 };
	unsigned shards = 0; /* --class-shards: 0 = the profile's own (kernel: one copy per class) */
	const char *profile = "kernel";

	const struct bench_opt opts[] = {
		BENCH_OPTS_COMMON(quick, reps, js),
		BENCH_OPT_U64("--max", max_mb, 1, 1 << 20, "MB",
			      "MiB of pages to load; default 8 quick, else 64"),
		BENCH_OPT_U64("--reps", reps, 1, 64, "N", "the same as --rounds"),
		BENCH_OPT_STR("--comp", comp_s, "a,b", "compressors; default lz4 quick, else lz4,zstd"),
		BENCH_OPT_LIST("--threads", threads, nthr, 1, MAXT, 8, "1,2",
			       "thread counts; default 1 quick, else 1,2"),
		BENCH_OPT_STR("--backend", backend, "KIND", "the store's backend"),
		BENCH_OPT_FLAG("--no-kernel", nokernel, "skip the kernel zram side"),
		BENCH_OPT_U64("--class-shards", shards, 0, ZS_MAX_CLASS_SHARDS, "N",
			      "copies of each size class; 0: the profile's (kernel: one)"),
		BENCH_OPT_STR("--profile", profile, "kernel|app",
			      "the store's pool profile; default kernel"),
		BENCH_OPT_REST("PATH", paths, npaths, "files or directories to load; default /usr/bin"),
		BENCH_OPT_END,
	};
	if (bench_parse(argc, argv, opts))
		return 2;
	if (comp_s)
		snprintf(comp_arg, sizeof(comp_arg), "%s", comp_s);
	if (!comp_arg[0])
		snprintf(comp_arg, sizeof(comp_arg), "%s", quick ? "lz4" : "lz4,zstd");
	for (char *tok = strtok(comp_arg, ","); tok && ncomp < 8; tok = strtok(NULL, ","))
		comps[ncomp++] = tok;
	if (!nthr) {
		threads[nthr++] = 1;
		if (!quick)
			threads[nthr++] = 2;
	}
	if (!reps)
		reps = quick ? 1 : 3;
	if (strcmp(profile, "kernel") && strcmp(profile, "app")) {
		fprintf(stderr, "bench_zram: --profile: '%s' is not one of: kernel, app\n", profile);
		return 2;
	}
	if (!max_mb)
		max_mb = quick ? 8 : 64;
	bench_quiet = js.enabled;

	if (zs_pageset_load(&ps, 4096, paths, npaths, max_mb << 20) || !ps.npages) {
		fprintf(stderr, "bench_zram: no pages\n");
		return 2;
	}
	bytes = ps.npages * ps.page_size;
	out = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (out == MAP_FAILED)
		return 2;
	memset(out, 0, bytes);   /* prefault: page faults are billed to nobody */
	bench_say("bench_zram: %zu pages (%.1f MiB) from %zu files, backend %s, best of %d\n",
		  ps.npages, (double)bytes / 1048576.0, ps.files, backend, reps);
	bench_json_begin(&js, "zram");
	bench_json_num(&js, "pages", (double)ps.npages);
	bench_json_num(&js, "files", (double)ps.files);
	bench_json_str(&js, "backend", backend);
	bench_json_num(&js, "reps", reps);
	bench_json_num(&js, "class_shards", shards);
	bench_json_str(&js, "profile", profile);
	if (strcmp(profile, "kernel"))
		bench_say("store profile: %s (zs_zram_config_init_app)\n", profile);
	if (shards > 1)
		bench_say("zsmalloc class shards: %u (a copy of each size class per CPU)\n", shards);
	struct json *w = bench_json_w(&js);
	if (w)
		json_karr(w, "rows");
	bench_say("%-8s %3s %12s %12s %12s %12s %12s %7s %7s %7s %6s\n", "comp", "thr", "raw_comp",
		  "store_wr", "st_wr_warm", "raw_dec", "store_rd", "wr/raw", "wrw/raw", "rd/raw",
		  "ratio");

	for (int ci = 0; ci < ncomp; ci++) {
		/* Kernel runs interleave with the store's single-thread reps: same noise for both. */
		int kern_ok = !nokernel && zs_kzram_available();
		struct zs_kzram_result kr;
		char kmsg[200] = "", kname[32];

		snprintf(kname, sizeof(kname), "%s", comps[ci]);
		kname[strcspn(kname, ":")] = 0;

		for (int ti = 0; ti < nthr; ti++) {
			unsigned nt = (unsigned)threads[ti];
			struct zs_comp *cc[MAXT] = { 0 };
			struct ctx c = { &ps, comps[ci], NULL, NULL, 0, out, NULL };
			double t_rc = 1e30, t_rd = 1e30, t_sw = 1e30, t_sr = 1e30, t_ww = 1e30;
			double kw = 1e30, kr_s = 1e30;
			long errors = 0;
			struct zs_zram_stats st = { 0 };
			int ok = 1;

			for (unsigned k = 0; k < nt && ok; k++)
				ok = zs_comp_create(&(struct zs_comp_config){ .name = comps[ci], .max_src = ps.page_size }, &cc[k], NULL, 0) == 0;
			if (!ok) {
				fprintf(stderr, "bench_zram: %s: cannot create compressor\n", comps[ci]);
				break;
			}
			c.stride = zs_comp_bound(cc[0], ps.page_size);
			c.cbuf = malloc(ps.npages * c.stride);
			c.clen = calloc(ps.npages, sizeof(int));
			if (!c.cbuf || !c.clen)
				return 2;
			memset(c.cbuf, 0, ps.npages * c.stride);

			for (int r = 0; r < reps; r++) {
				struct zs_zram_config cfg;
				double t;

				t = run(&c, RAW_COMP, nt, cc, &errors);
				t_rc = t < t_rc ? t : t_rc;
				t = run(&c, RAW_DECOMP, nt, cc, &errors);
				t_rd = t < t_rd ? t : t_rd;

				if (strcmp(profile, "app"))
					zs_zram_config_init(&cfg);
				else
					zs_zram_config_init_app(&cfg);
				cfg.disksize = bytes;
				cfg.comp = comps[ci];
				cfg.backend.kind = backend;
				/* Keep freed pool pages mapped so the warm pass measures no page faults. */
				cfg.backend.zs.page_cache_pages = ps.npages;
				if (shards || strcmp(profile, "app"))
					cfg.backend.zs.class_shards = shards; /* zsmalloc: class copies */
				if (zs_zram_create(&cfg, &c.z, NULL, 0)) {
					fprintf(stderr, "bench_zram: store create failed\n");
					return 2;
				}
				t = run(&c, STORE_WRITE, nt, NULL, &errors);
				t_sw = t < t_sw ? t : t_sw;
				t = run(&c, STORE_READ, nt, NULL, &errors);
				t_sr = t < t_sr ? t : t_sr;
				zs_zram_get_stats(c.z, &st, sizeof(st));
				/* Warm pool: the same writes again after freeing everything. */
				zs_zram_discard_range(c.z, 0, ps.npages);
				t = run(&c, STORE_WRITE, nt, NULL, &errors);
				t_ww = t < t_ww ? t : t_ww;
				zs_zram_destroy(c.z);
				if (memcmp(out, ps.data, bytes))
					errors++;
				if (kern_ok) {
					if (zs_kzram_run_threads(kname, ps.data, ps.npages, nt, &kr, kmsg,
								 sizeof(kmsg))) {
						kern_ok = 0;
						bench_say("%-8s kernel: %s\n", comps[ci], kmsg);
					} else {
						kw = kr.write_s < kw ? kr.write_s : kw;
						kr_s = kr.read_s < kr_s ? kr.read_s : kr_s;
					}
				}
			}
			double ratio = (double)st.orig_data_size /
				       (double)(st.mem_used_total ? st.mem_used_total : 1);
			bench_say("%-8s %3u %7.1f MB/s %7.1f MB/s %7.1f MB/s %7.1f MB/s %7.1f MB/s %7.3f %7.3f "
				  "%7.3f %6.3f%s\n",
				  comps[ci], nt, mbps(bytes, t_rc), mbps(bytes, t_sw), mbps(bytes, t_ww),
				  mbps(bytes, t_rd), mbps(bytes, t_sr), t_rc / t_sw, t_rc / t_ww, t_rd / t_sr,
				  ratio, errors ? "  ERRORS" : "");
			int have_k = kern_ok && kw < 1e30;
			double kmem = (double)(kr.mm_stat[2] ? kr.mm_stat[2] : 1);
			if (have_k)
				bench_say("%-8s kernel zram %u thread(s): write %.1f MB/s, read %.1f MB/s, ratio %.3f "
					  "(mem_used_total %llu, store %llu: %+.2f%%); store/kernel: write %.2fx "
					  "(warm %.2fx), read %.2fx%s\n",
					  kname, nt, mbps(bytes, kw), mbps(bytes, kr_s),
					  (double)kr.mm_stat[0] / kmem, (unsigned long long)kr.mm_stat[2],
					  (unsigned long long)st.mem_used_total,
					  100.0 * ((double)st.mem_used_total - (double)kr.mm_stat[2]) / kmem,
					  kw / t_sw, kw / t_ww, kr_s / t_sr,
					  kr.mismatches ? "  KERNEL MISMATCHES" : "");
			if (w) {
				json_obj(w);
				json_kstr(w, "comp", comps[ci]);
				json_kuint(w, "threads", nt);
				json_knum(w, "raw_comp_MBps", mbps(bytes, t_rc));
				json_knum(w, "store_write_MBps", mbps(bytes, t_sw));
				json_knum(w, "store_write_warm_MBps", mbps(bytes, t_ww));
				json_knum(w, "raw_decomp_MBps", mbps(bytes, t_rd));
				json_knum(w, "store_read_MBps", mbps(bytes, t_sr));
				json_knum(w, "write_vs_raw", t_rc / t_sw);
				json_knum(w, "warm_write_vs_raw", t_rc / t_ww);
				json_knum(w, "read_vs_raw", t_rd / t_sr);
				json_knum(w, "ratio", ratio);
				json_kuint(w, "mem_used_total", st.mem_used_total);
				json_kint(w, "errors", errors);
				if (have_k) {
					json_kobj(w, "kernel");
					json_knum(w, "write_MBps", mbps(bytes, kw));
					json_knum(w, "read_MBps", mbps(bytes, kr_s));
					json_knum(w, "ratio", (double)kr.mm_stat[0] / kmem);
					json_kuint(w, "mem_used_total", kr.mm_stat[2]);
					json_knum(w, "store_vs_kernel_write", kw / t_sw);
					json_knum(w, "store_vs_kernel_warm_write", kw / t_ww);
					json_knum(w, "store_vs_kernel_read", kr_s / t_sr);
					json_kuint(w, "mismatches", kr.mismatches);
					json_obj_end(w);
				} else {
					json_kstr(w, "kernel_note", nokernel ? "--no-kernel"
								: kmsg[0] ? kmsg
								: "kernel zram unavailable (needs root and /sys/class/zram-control)");
				}
				json_obj_end(w);
			}
			for (unsigned k = 0; k < nt; k++)
				zs_comp_destroy(cc[k]);
			free(c.cbuf);
			free(c.clen);
		}
	}
	if (w)
		json_arr_end(w);
	bench_json_end(&js);
	munmap(out, bytes);
	zs_pageset_free(&ps);
	return 0;
}
