/*
 * `zs zswap`'s output: the JSON rows (the kernel's counter names) and the
 * text tables (one line per counter, one column per backend, the kernel's
 * first), for both modes.  Apart from the runs so that the tests' and the
 * report's view of a run (tools/report, docs/zswap.md) changes in one file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "zs/harness.h"
#include "zswap_cmd.h"

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* A row of the JSON: the kernel's names for one state. */
static void json_state(struct json *js, const struct zs_zswap_stats *st)
{
	static const char *const names[] = { "stored_pages", "stored_incompressible_pages",
					     "pool_total_size", "pool_pages", "Zswap_kB",
					     "Zswapped_kB", "zswpout", "zswpin", "zswpwb",
					     "swpout_zero", "pool_limit_hit", "written_back_pages",
					     "reject_reclaim_fail", "reject_alloc_fail",
					     "reject_compress_poor", "decompress_fail" };
	const uint64_t v[] = { st->stored_pages, st->stored_incompressible_pages,
			       st->pool_total_size, st->pool_pages, st->meminfo_zswap / 1024,
			       st->meminfo_zswapped / 1024, st->zswpout, st->zswpin, st->zswpwb,
			       st->swpout_zero, st->pool_limit_hit, st->written_back_pages,
			       st->reject_reclaim_fail, st->reject_alloc_fail,
			       st->reject_compress_poor, st->decompress_fail };
	_Static_assert(sizeof(names) / sizeof(names[0]) == sizeof(v) / sizeof(v[0]),
		       "one name per counter");

	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		json_kuint(js, names[k], v[k]);
		if (k == 5) /* Zswapped/Zswap, right after the two it is the ratio of */
			json_kfixed(js, "ratio", ratio(st->meminfo_zswapped, st->meminfo_zswap), 4);
	}
}

/* A report's object, opened with its mode. */
static void json_begin(struct json *js, const char *mode)
{
	json_init(js, stdout, 2);
	json_obj(js);
	json_kstr(js, "mode", mode);
}

static void json_run(struct json *js, const struct run *r, int drain)
{
	json_obj(js);
	json_kstr(js, "backend", r->backend);
	json_state(js, &r->fill.st);
	json_kfixed(js, "store_ns", r->fill.store_ns, 1);
	json_kfixed(js, "load_ns", drain ? r->drain.load_ns : r->churn.load_ns, 1);
	json_kobj(js, "churn");
	json_state(js, &r->churn.st);
	json_kuint(js, "stores", r->churn.n_store);
	json_kuint(js, "loads", r->churn.n_load);
	json_kuint(js, "invalidates", r->churn.n_inval);
	json_kfixed(js, "store_ns", r->churn.store_ns, 1);
	json_kfixed(js, "load_ns", r->churn.load_ns, 1);
	json_kfixed(js, "invalidate_ns", r->churn.inval_ns, 1);
	json_kuint(js, "rejected", r->rejected);
	json_kuint(js, "disk_loads", r->disk_loads);
	json_obj_end(js);
	json_kobj(js, "compacted");
	json_state(js, &r->compacted.st);
	json_kuint(js, "pages_compacted", r->compacted_pages);
	json_obj_end(js);
	if (drain) {
		json_kobj(js, "drain");
		json_kuint(js, "loads", r->drain.n_load);
		json_kfixed(js, "load_ns", r->drain.load_ns, 1);
		json_kuint(js, "stored_pages", r->drain.st.stored_pages);
		json_kuint(js, "pool_total_size", r->drain.st.pool_total_size);
		json_obj_end(js);
	}
	json_kuint(js, "mismatches", r->mismatches);
	json_kfixed(js, "wall_s", r->wall_s, 3);
	json_karr(js, "series");
	for (size_t i = 0; i < r->nseries; i++) {
		json_arr(js);
		json_fixed(js, r->series_t[i], 1);
		json_uint(js, r->series_pool[i]);
		json_uint(js, r->series_stored[i]);
		json_arr_end(js);
	}
	json_arr_end(js);
	json_obj_end(js);
}

/* Text: one line per counter, one column per backend (and the kernel's first). */
struct col {
	const char *name;
	const struct zs_zswap_stats *st;
	double store_ns, load_ns;
	int have_time;
};

static void text_state(const char *title, const struct col *cols, int ncols)
{
	static const char *const names[] = { "stored_pages", "stored_incompressible_pages",
					     "pool_total_size", "Zswap (kB)", "Zswapped (kB)",
					     "Zswapped/Zswap", "zswpout", "zswpin",
					     "pool_limit_hit", "written_back_pages" };

	printf("%s\n", title);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		printf("  %-28s", names[k]);
		for (int c = 0; c < ncols; c++) {
			const struct zs_zswap_stats *s = cols[c].st;
			if (!s) {
				printf(" %14s", "-");
				continue;
			}
			uint64_t v[] = { s->stored_pages, s->stored_incompressible_pages,
					 s->pool_total_size, s->meminfo_zswap / 1024,
					 s->meminfo_zswapped / 1024, 0, s->zswpout, s->zswpin,
					 s->pool_limit_hit, s->written_back_pages };
			if (k == 5)
				printf(" %14.3f", ratio(s->meminfo_zswapped, s->meminfo_zswap));
			else
				printf(" %14" PRIu64, v[k]);
		}
		printf("\n");
	}
	for (int w = 0; w < 2; w++) {
		int any = 0;
		for (int c = 0; c < ncols; c++)
			any |= cols[c].have_time;
		if (!any)
			break;
		printf("  %-28s", w ? "load ns/page" : "store ns/page");
		for (int c = 0; c < ncols; c++) {
			if (cols[c].have_time)
				printf(" %14.0f", w ? cols[c].load_ns : cols[c].store_ns);
			else
				printf(" %14s", "-");
		}
		printf("\n");
	}
}

static void text_header(const char *first, const struct run *runs, int nruns)
{
	printf("%-30s", "");
	if (first)
		printf(" %14s", first);
	for (int i = 0; i < nruns; i++)
		printf(" %14s", runs[i].backend);
	printf("\n");
}

/* Which state of a run a table shows. */
enum { PH_FILL, PH_CHURN, PH_COMPACTED };

/* One table: `first` (the kernel's column, or NULL) and then one column per run, the
 * run's state after `ph`, timed for the fill (its loads are the drain's) and the churn. */
static void text_phase(const char *title, const struct col *first, const struct run *runs,
		       int nruns, int ph)
{
	struct col cols[MAX_BACKENDS + 1];
	int nc = 0;

	if (first)
		cols[nc++] = *first;
	for (int b = 0; b < nruns; b++) {
		const struct run *r = &runs[b];
		const struct phase *s = ph == PH_FILL ? &r->fill : ph == PH_CHURN ? &r->churn
								    : &r->compacted;
		cols[nc++] = (struct col){ r->backend, r->ok ? &s->st : NULL, s->store_ns,
					   ph == PH_FILL ? r->drain.load_ns : s->load_ns,
					   r->ok && ph != PH_COMPACTED };
	}
	text_state(title, cols, nc);
}

void print_pages(const struct opts *o, const struct zs_pageset *ps, const struct plan *p,
		 const struct run *runs, const struct kside *k)
{
	struct zs_zswap_stats kst;
	memset(&kst, 0, sizeof(kst));
	if (k) {
		kst.stored_pages = k->stored;
		kst.stored_incompressible_pages = k->incompressible;
		kst.pool_total_size = k->pool_bytes;
		kst.pool_pages = k->pool_bytes / 4096;
		kst.meminfo_zswap = k->pool_bytes;
		kst.meminfo_zswapped = k->stored * 4096;
		kst.zswpout = k->zswpout;
		kst.zswpin = k->zswpin;
		kst.swpout_zero = k->zero;
	}
	if (o->json) {
		struct json js;
		json_begin(&js, "pages");
		json_kuint(&js, "pages", ps->npages);
		json_kuint(&js, "files", ps->files);
		json_kstr(&js, "comp", o->comp);
		json_kuint(&js, "seed", o->seed);
		json_kuint(&js, "churn_ops", p->nops);
		json_karr(&js, "rows");
		if (k) {
			json_obj(&js);
			json_kstr(&js, "backend", "kernel");
			json_state(&js, &kst);
			json_kfixed(&js, "store_ns", k->store_ns, 1);
			json_kfixed(&js, "load_ns", k->load_ns, 1);
			json_kuint(&js, "not_swapped", k->not_swapped);
			json_kuint(&js, "mismatches", k->mismatches);
			json_obj_end(&js);
		}
		for (int b = 0; b < o->nbackends; b++)
			if (runs[b].ok)
				json_run(&js, &runs[b], 1);
		json_arr_end(&js);
		json_obj_end(&js);
		json_done(&js);
	} else {
		printf("zs zswap: %zu pages (%.1f MiB) from %zu files; comp %s; churn %zu ops "
		       "(%" PRIu64 " stores, %" PRIu64 " loads, %" PRIu64 " invalidates, seed %" PRIu64
		       ")%s%s\n\n",
		       ps->npages, (double)ps->npages * 4096 / 1048576.0, ps->files, o->comp, p->nops,
		       p->stores, p->loads, p->invals, o->seed, o->backing ? "; writeback to " : "",
		       o->backing ? o->backing : "");
		text_header(k ? "kernel" : NULL, runs, o->nbackends);
		struct col kcol = { "kernel", &kst, k ? k->store_ns : 0, k ? k->load_ns : 0, 1 };
		struct col knone = { "kernel", NULL, 0, 0, 0 };
		text_phase("after the fill (load ns/page: the drain at the end)", k ? &kcol : NULL,
			   runs, o->nbackends, PH_FILL);
		text_phase("after the churn", k ? &knone : NULL, runs, o->nbackends, PH_CHURN);
		text_phase("after compaction", k ? &knone : NULL, runs, o->nbackends, PH_COMPACTED);
		for (int b = 0; b < o->nbackends; b++)
			if (runs[b].ok)
				printf("%s: %" PRIu64 " mismatches; %" PRIu64 " stores rejected, %" PRIu64
				       " loads from disk; %.2f s\n",
				       runs[b].backend, runs[b].mismatches, runs[b].rejected,
				       runs[b].disk_loads, runs[b].wall_s);
		if (k) {
			printf("kernel: %" PRIu64 " zero pages (zeromap), %" PRIu64
			       " pages not swapped out, %" PRIu64 " mismatches\n",
			       k->zero, k->not_swapped, k->mismatches);
			for (int b = 0; b < o->nbackends; b++)
				if (runs[b].ok)
					printf("pool pages: %s %" PRIu64 " vs kernel %" PRIu64 " (%+.2f%%)\n",
					       runs[b].backend, runs[b].fill.st.pool_pages, kst.pool_pages,
					       100.0 * ((double)runs[b].fill.st.pool_pages -
							(double)kst.pool_pages) /
						       (double)(kst.pool_pages ? kst.pool_pages : 1));
		}
	}
}

void print_sizes(const struct opts *o, const struct capture *c, const struct plan *churn,
		 const struct run *fr, const struct run *cr, int sampled, uint64_t total_ram,
		 unsigned max_pool)
{
	struct zs_zswap_stats kf, kc;
	double v;
	int have_kc = cap_num(c, "compacted", "pool_total_size", &v);
	capture_kernel_state(c, "freeze", &kf);
	capture_kernel_state(c, have_kc ? "compacted" : "freeze", &kc);
	double kt = 0;
	cap_num(c, "freeze", "t_s", &kt);
	uint64_t resid = cap_u64(c, "after_read", "stored_pages");
	uint64_t resid_pool = cap_u64(c, cap_num(c, "residual_compacted", "pool_total_size", &v)
					      ? "residual_compacted" : "after_read", "pool_total_size");

	if (o->json) {
		struct json js;
		json_begin(&js, "sizes");
		json_kstr(&js, "capture", o->sizes);
		json_kstr(&js, "kernel_version", cap_str(c, "kernel"));
		json_kstr(&js, "workload", strcmp(cap_str(c, "workload"), "?") ? cap_str(c, "workload")
									    : cap_str(c, "command"));
		json_kuint(&js, "pages", c->n);
		json_kuint(&js, "totalram_pages", total_ram / 4096);
		json_kuint(&js, "max_pool_percent", max_pool);
		json_kbool(&js, "sampled_churn", sampled);
		json_kuint(&js, "churn_ops", churn->nops);
		json_kuint(&js, "churn_survivors", churn->survivors);
		json_kuint(&js, "churn_captured_live", churn->matched);
		json_karr(&js, "rows");
		json_obj(&js);
		json_kstr(&js, "backend", "kernel");
		json_state(&js, &kf);
		json_kfixed(&js, "t_s", kt, 1);
		json_kobj(&js, "compacted");
		json_state(&js, &kc);
		json_kbool(&js, "measured", have_kc);
		json_obj_end(&js);
		/* Entries no pte of the group named (read none): 0 makes the comparison exact. */
		json_kuint(&js, "residual_entries", resid);
		json_kuint(&js, "residual_pool_total_size", resid_pool);
		json_karr(&js, "series");
		for (size_t i = 0; i < c->ns; i++) {
			json_arr(&js);
			json_fixed(&js, c->st[i], 1);
			json_uint(&js, c->sv[i][1]);
			json_uint(&js, c->sv[i][0]);
			json_arr_end(&js);
		}
		json_arr_end(&js);
		json_obj_end(&js);
		for (int b = 0; b < o->nbackends; b++) {
			if (!fr[b].ok || !cr[b].ok)
				continue;
			/* The row: the fresh fill's state and times; the churn's own run inside. */
			struct run merged = cr[b];
			merged.fill = fr[b].fill;
			merged.drain = fr[b].drain;
			json_run(&js, &merged, 1);
		}
		json_arr_end(&js);
		json_obj_end(&js);
		json_done(&js);
	} else {
		printf("zs zswap --sizes %s: %zu entries (%s, kernel %s)\n", o->sizes, c->n,
		       strcmp(cap_str(c, "workload"), "?") ? cap_str(c, "workload")
							  : cap_str(c, "command"),
		       cap_str(c, "kernel"));
		printf("churn: %s, %zu ops (%" PRIu64 " stores, %" PRIu64 " loads, %" PRIu64
		       " invalidates), %zu entries live at the end, %zu of them the captured ones\n\n",
		       sampled ? "the capture's samples" : "synthetic", churn->nops, churn->stores,
		       churn->loads, churn->invals, churn->survivors, churn->matched);
		text_header("kernel", fr, o->nbackends);
		struct col kfill = { "kernel", &kc, 0, 0, 0 }, kfreeze = { "kernel", &kf, 0, 0, 0 };
		struct col kcomp = { "kernel", have_kc ? &kc : NULL, 0, 0, 0 };
		text_phase(have_kc ? "fresh fill (kernel: its pool after its own compaction)"
				   : "fresh fill (kernel: at the freeze, not compacted)",
			   &kfill, fr, o->nbackends, PH_FILL);
		text_phase("after the churn (kernel: at the freeze)", &kfreeze, cr, o->nbackends, PH_CHURN);
		text_phase("after compaction", &kcomp, cr, o->nbackends, PH_COMPACTED);
		printf("kernel: %.1f s of the workload to the freeze\n", kt);
		if (resid)
			printf("kernel: %" PRIu64 " entries (%" PRIu64 " pool pages when compacted alone) "
			       "were on no pte of the group and are not in the sizes: the kernel's pool may "
			       "be that much above a fill of the sizes\n",
			       resid, resid_pool / 4096);
		else
			printf("kernel: every entry was read (0 left): the fresh fill is comparable "
			       "page for page\n");
		for (int b = 0; b < o->nbackends; b++)
			if (fr[b].ok && cr[b].ok)
				printf("%s: fresh %.3f s, churn %.3f s (%.0f ns/store, %.0f ns/load, "
				       "%.0f ns/invalidate)\n",
				       fr[b].backend, fr[b].wall_s, cr[b].wall_s, cr[b].churn.store_ns,
				       cr[b].churn.load_ns, cr[b].churn.inval_ns);
	}
}
