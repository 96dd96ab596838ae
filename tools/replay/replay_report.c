/*
 * zs replay's reports: the text and JSON summaries a replay prints at the end
 * and the per-mismatch tables (the kernel's values beside libzs's, with the
 * operations before each).  Kept apart from the driver (cmd_replay.c) so the
 * replay logic reads without the formatting, and so every replay mode
 * (--store, zswap traces, --sweep's runs) reports through one place.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "replay.h"

void replay_print_vals(FILE *f, const struct replay *R, const uint64_t v[NF])
{
	for (int i = 0; i < R->nf; i++)
		fprintf(f, "%s%" PRIu64, i ? " " : "", v[i]);
}

static void print_mismatch(struct replay *R, const struct mismatch *m)
{
	printf("\n%s at record %ld: line %ld '%s', kernel record on line %ld",
	       R->o.kernel_policy || R->o.strict ? "mismatch" : "difference", m->record, m->at.line, m->at.op, m->line);
	if (m->cls >= 0)
		printf(" (class %d)", m->cls);
	printf("\n");
	printf("  %-20s %12s %12s\n", "field", "kernel", "libzs");
	for (int i = 0; i < R->nf; i++)
		printf("  %-20s %12" PRIu64 " %12" PRIu64 "%s\n", R->fnames[i], m->at.exp[i],
		       m->at.got[i], m->at.exp[i] != m->at.got[i] ? "   <--" : "");
	if (m->nbefore) {
		printf("  preceding operations (line: op | kernel %s | libzs %s):\n", R->ctx_label,
		       R->ctx_label);
		for (int k = 0; k < m->nbefore; k++) {
			const struct ctx_entry *c = &m->before[k];
			if (!c->has_exp) { /* replayed, but the trace has no '=' after it */
				printf("    %7ld: %-22s |    (no state record)\n", c->line, c->op);
				continue;
			}
			printf("    %7ld: %-22s | %6" PRIu64 " %6" PRIu64 " | %6" PRIu64 " %6" PRIu64 "%s\n",
			       c->line, c->op, c->exp[F_MEM], c->exp[F_COMPACTED], c->got[F_MEM],
			       c->got[F_COMPACTED],
			       memcmp(c->exp, c->got, sizeof(c->exp)) ? "  (mismatch)" : "");
		}
	}
}

static void json_vals(const struct replay *R, struct json *js, const char *key,
		      const uint64_t v[NF])
{
	json_kobj(js, key);
	for (int i = 0; i < R->nf; i++)
		json_kuint(js, R->fnames[i], v[i]);
	json_obj_end(js);
}

void replay_print_json(const struct replay *R, const struct trace_header *h)
{
	const struct opts *o = &R->o;
	struct json js;
	json_init(&js, stdout, 0);
	json_obj(&js);
	json_kstr(&js, "trace", o->path);
	json_kstr(&js, "format", R->zw ? "zswap-trace" : "zram-trace");
	json_kstr(&js, "comp", h->comp);
	json_kint(&js, "page_size", h->page_size);
	if (o->zblock) { /* zblock has no chains */
		json_key(&js, "chain");
		json_null(&js);
	} else {
		json_kint(&js, "chain", o->chain > 0 ? o->chain : h->chain > 0 ? h->chain : 8);
	}
	json_kstr(&js, "free_mode", zs_free_mode_name(o->po.cfg.free_mode));
	json_kbool(&js, "deferred", o->deferred);
	json_kint(&js, "records", R->records);
	json_kint(&js, "mismatches", R->mismatches);
	json_kint(&js, "first_mismatch_record", R->first_bad_record);
	json_kint(&js, "writes", R->nw);
	json_kint(&js, "discards", R->nd);
	json_kint(&js, "compactions", R->nc);
	json_kint(&js, "same", R->nsame);
	json_kint(&js, "huge", R->nhuge);
	if (R->ksnaps || R->kclass_skipped) {
		/* the kernel's class tables, where the trace has them (replay_classes.c) */
		json_kobj(&js, "class_tables");
		json_kint(&js, "snapshots", R->ksnaps);
		json_kint(&js, "rows", R->kclass_rows);
		json_kint(&js, "mismatches", R->kclass_bad);
		json_kint(&js, "rows_not_compared", R->kclass_skipped);
		json_obj_end(&js);
	}
	if (o->held) {
		/* a model check: the kernel ran no deferral (replay_held.c) */
		json_kobj(&js, "deferred_held");
		json_kint(&js, "queue", o->held);
		json_kint(&js, "records_checked", R->held_records);
		json_kint(&js, "records_with_frees_queued", R->held_queued_records);
		json_kint(&js, "drains", R->held_drains);
		json_kint(&js, "model_differences", R->held_bad);
		json_obj_end(&js);
	}
	if (R->zw) {
		/* a zswap-trace: writes are stores, discards invalidates, same zero pages,
		 * huge incompressible pages */
		json_kint(&js, "loads", R->nl);
		json_kint(&js, "rejected_stores", R->nrej);
		json_kint(&js, "empty_offsets", R->nempty);
		json_kint(&js, "shadow_differences", R->shadow_diff);
	}
	json_kfixed(&js, "seconds", R->secs, 3);
	json_kobj(&js, "field_mismatches");
	for (int i = 0; i < R->nf; i++)
		json_kuint(&js, R->fnames[i], R->field_bad[i]);
	json_obj_end(&js);
	json_kbool(&js, "store", o->store);
	json_kint(&js, "store_inexact_sizes", R->synth_inexact);
	json_kint(&js, "verify_errors", R->verify_errors);
	json_kstr(&js, "backend", o->po.backend);
	json_kstr(&js, "chain_policy", zs_chain_policy_name(o->po.cfg.chain_policy));
	json_kuint(&js, "delta", o->po.cfg.class_delta);
	json_kbool(&js, "kernel_policy", o->kernel_policy);
	json_kstr(&js, "not_kernel_because", o->why);
	json_kobj(&js, "mem_used_pages");
	json_kuint(&js, "kernel_peak", R->kmem_peak);
	json_kfixed(&js, "kernel_mean", (double)R->kmem_sum / (double)R->records, 1);
	json_kuint(&js, "kernel_end", R->kmem_end);
	json_kuint(&js, "libzs_peak", R->zmem_peak);
	json_kfixed(&js, "libzs_mean", (double)R->zmem_sum / (double)R->records, 1);
	json_kuint(&js, "libzs_end", R->zmem_end);
	json_obj_end(&js);
	if (R->span_on) {
		/* live objects whose read crosses a pool page boundary, over the records */
		json_kobj(&js, "spanning_objects");
		json_kuint(&js, "peak", R->span_peak);
		json_kfixed(&js, "mean", (double)R->span_sum / (double)R->records, 1);
		json_kuint(&js, "end", R->span_end);
		json_kfixed(&js, "mean_bytes", (double)R->span_bytes_sum / (double)R->records, 1);
		json_obj_end(&js);
	}
	json_karr(&js, "first_mismatches");
	for (int i = 0; i < R->nshown; i++) {
		const struct mismatch *m = &R->shown[i];
		json_obj(&js);
		json_kint(&js, "record", m->record);
		json_kint(&js, "line", m->line);
		json_kstr(&js, "op", m->at.op);
		json_kint(&js, "class", m->cls);
		json_vals(R, &js, "expected", m->at.exp);
		json_vals(R, &js, "got", m->at.got);
		json_obj_end(&js);
	}
	json_arr_end(&js);
	json_obj_end(&js);
	json_done(&js);
}

void replay_print_text(struct replay *R)
{
	if (R->o.kernel_policy || R->o.strict)
		printf("%s: records %ld mismatches %ld\n", R->o.path, R->records, R->mismatches);
	else
		printf("%s: records %ld, %ld differ from the kernel's (expected: not the kernel's "
		       "policy: %s)\n",
		       R->o.path, R->records, R->mismatches, R->o.why);
	if (R->ksnaps)
		printf("  class tables: %ld snapshots, %ld rows (objects allocated, used, pages per "
		       "class) compared, %ld mismatches\n", R->ksnaps, R->kclass_rows, R->kclass_bad);
	if (R->kclass_skipped)
		printf("  class tables: %ld rows not compared (not a plain zsmalloc replay, or frees "
		       "held)\n", R->kclass_skipped);
	if (R->o.held)
		printf("  deferred-held %ld: %ld records against the model pool, %ld of them with frees "
		       "queued (those against the model only), %ld drains, %ld differ from the model\n",
		       R->o.held, R->held_records, R->held_queued_records, R->held_drains, R->held_bad);
	if (!R->o.kernel_policy) {
		double kmean = (double)R->kmem_sum / (double)R->records;
		double zmean = (double)R->zmem_sum / (double)R->records;
		const char *who = R->o.zblock ? "zblock" : "this policy";
		printf("  %-16s %10s %10s %10s\n"
		       "  kernel           %10" PRIu64 " %10.1f %10" PRIu64 "\n"
		       "  %-16s %10" PRIu64 " %10.1f %10" PRIu64 "\n"
		       "  %-16s %10.4f %10.4f %10.4f\n",
		       R->zw ? "pool pages" : "mem_used pages", "peak", "mean", "end", R->kmem_peak,
		       kmean, R->kmem_end, who, R->zmem_peak,
		       zmean, R->zmem_end, R->o.zblock ? "zblock/kernel" : "policy/kernel",
		       R->kmem_peak ? (double)R->zmem_peak / (double)R->kmem_peak : 0.0,
		       kmean > 0 ? zmean / kmean : 0.0,
		       R->kmem_end ? (double)R->zmem_end / (double)R->kmem_end : 0.0);
		if (R->span_on)
			printf("  %-16s %10" PRIu64 " %10.1f %10" PRIu64 "   (live objects a read finds split "
			       "over two pool pages)\n",
			       "spanning objects", R->span_peak, (double)R->span_sum / (double)R->records,
			       R->span_end);
	}
	if (R->zw && (R->o.verbose || (R->mismatches && (R->o.kernel_policy || R->o.strict)))) {
		printf("  %ld stores (%ld zero pages, %ld incompressible), %ld loads, %ld invalidates, "
		       "%ld compactions, %.2fs\n",
		       R->nw, R->nsame, R->nhuge, R->nl, R->nd, R->nc, R->secs);
	} else if (R->o.verbose || (R->mismatches && (R->o.kernel_policy || R->o.strict))) {
		printf("  %ld writes (%ld same-filled, %ld huge), %ld discards, %ld compactions, "
		       "%.2fs\n",
		       R->nw, R->nsame, R->nhuge, R->nd, R->nc, R->secs);
	}
	if (R->nrej)
		printf("  %ld stores rejected by libzs's zswap (its pool limit: the trace's "
		       "max_pool_percent of totalram_pages)\n", R->nrej);
	if (R->nempty)
		printf("  %ld loads or invalidates found their offset empty in libzs's zswap\n",
		       R->nempty);
	if (R->shadow_diff && !R->o.kernel_policy)
		printf("  warning: the spanning count's shadow pool differed from zswap's pool on %ld "
		       "records: the count is not exact\n", R->shadow_diff);
	if (R->mismatches && (R->o.kernel_policy || R->o.strict)) {
		printf("  first mismatch at record %ld; mismatching records per field:",
		       R->first_bad_record);
		for (int i = 0; i < R->nf; i++)
			printf(" %s %u", R->fnames[i], R->field_bad[i]);
		printf("\n");
	}
	if (R->z)
		printf("  store: %ld writes synthesized at another size of the same class%s\n",
		       R->synth_inexact,
		       R->o.verify ? (R->verify_errors ? ", READ-BACK ERRORS" : ", all slots read back intact")
				: "");
	if (R->verify_errors)
		printf("  %ld slots read back wrong\n", R->verify_errors);
	if (R->huge_class_warnings)
		printf("  warning: %ld 'n' writes at or above libzs huge_class_size %zu "
		       "(the kernel stored them as normal objects)\n",
		       R->huge_class_warnings, huge_size(R));
	for (int i = 0; i < R->nshown; i++)
		print_mismatch(R, &R->shown[i]);
}
