/*
 * Per-class comparison (`k` lines).  mm_stat has only pool totals, so two
 * class layouts with equal totals after every operation would replay as a
 * match; a kernel built with CONFIG_ZSMALLOC_STAT shows its class table in
 * debugfs, `zs record` writes it after a record as `k` lines (a snapshot:
 * the run of `k` lines after one `=` record, classes never used left out),
 * and here each row is compared with libzs's class of the same index
 * (objects allocated and used, pages used), and a class libzs holds objects
 * in that the snapshot leaves out is a mismatch too.  --classes-out writes
 * the trace back with libzs's own tables in it, which is how the comparison
 * is tested on a kernel without the option (tests/cli/replay_classes.sh).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "zs/zsmalloc.h"

/* How often --classes-out writes a table: every this many records. */
#define CLASSES_OUT_EVERY 100

static void class_bad(struct replay *R, long line, const char *fmt, unsigned cls, uint64_t k,
		      uint64_t z)
{
	R->kclass_bad++;
	if (R->kclass_bad <= 3 && !R->o.json && !R->o.quiet)
		printf("class mismatch at record %ld (line %ld): class %u: %s: kernel %" PRIu64
		       ", libzs %" PRIu64 "\n", R->records, line, cls, fmt, k, z);
}

int kclass_line(struct replay *R, const struct trace_rec *rec, long line)
{
	if (!R->after_record) {
		trace_fail(line, "%s", "a 'k' line must follow an '=' record (or another 'k' line)");
		return 2;
	}
	/* Only a plain zsmalloc replay has the kernel's classes; with frees held, the '='
	 * record was not compared either. */
	if (!R->pool || (R->shadow && R->nheld)) {
		R->kclass_skipped++;
		return 0;
	}
	int n = zs_class_count(R->pool);
	if (!R->kseen) {
		R->kseen = calloc((size_t)n, 1);
		if (!R->kseen)
			return trace_fail(line, "%s", "out of memory");
	}
	if (!R->ksnap_open) {
		memset(R->kseen, 0, (size_t)n);
		R->ksnap_open = 1;
		R->ksnap_line = line;
		R->ksnaps++;
	}
	R->kclass_rows++;
	struct zs_class_stats st;
	unsigned cls = (unsigned)rec->slot;
	if ((int)cls >= n || zs_class_stats(R->pool, (int)cls, &st, sizeof(st))) {
		class_bad(R, line, "no such physical class in libzs (objects allocated)", cls,
			  rec->exp[0], 0);
		return 0;
	}
	R->kseen[cls] = 1;
	if (rec->exp[0] != st.obj_allocated)
		class_bad(R, line, "objects allocated", cls, rec->exp[0], st.obj_allocated);
	else if (rec->exp[1] != st.obj_used)
		class_bad(R, line, "objects used", cls, rec->exp[1], st.obj_used);
	else if (rec->exp[2] != st.pages_used)
		class_bad(R, line, "pages used", cls, rec->exp[2], st.pages_used);
	return 0;
}

/* A snapshot ends at the next operation or at the end: libzs's classes it left out hold nothing? */
void kclass_end(struct replay *R)
{
	if (!R->ksnap_open)
		return;
	R->ksnap_open = 0;
	int n = zs_class_count(R->pool);
	for (int i = 0; i < n; i++) {
		struct zs_class_stats st;
		if (R->kseen[i] || zs_class_stats(R->pool, i, &st, sizeof(st)) || !st.obj_allocated)
			continue;
		class_bad(R, R->ksnap_line, "left out of the kernel's table (objects allocated)",
			  (unsigned)i, 0, st.obj_allocated);
	}
}

/* --classes-out: the header once, then each line as read, and after every
 * CLASSES_OUT_EVERY-th '=' record libzs's table. */
void kclass_out(struct replay *R, const struct trace_header *h, const char *s, int is_record)
{
	if (!R->cls_out)
		return;
	if (!R->cls_out_hdr) {
		R->cls_out_hdr = 1;
		fprintf(R->cls_out, "# zram-trace 1\n# page_size %ld\n# comp %s\n# kernel %s\n"
				    "# chain_size ", h->page_size, h->comp, h->kernel);
		if (h->chain > 0)
			fprintf(R->cls_out, "%ld\n", h->chain);
		else
			fprintf(R->cls_out, "?\n");
		fprintf(R->cls_out, "# data %s\n# classes libzs's own, every %d records (zs replay "
				    "--classes-out)\n", h->data, CLASSES_OUT_EVERY);
	}
	if (s[0] == 'k')
		return; /* the input's own tables are replaced by libzs's */
	fprintf(R->cls_out, "%s\n", s);
	if (!is_record || !R->pool || R->records % CLASSES_OUT_EVERY)
		return;
	int n = zs_class_count(R->pool);
	for (int i = 0; i < n; i++) {
		struct zs_class_stats st;
		if (!zs_class_stats(R->pool, i, &st, sizeof(st)) && st.obj_allocated)
			fprintf(R->cls_out, "k %d %lu %lu %lu\n", i, st.obj_allocated, st.obj_used,
				st.pages_used);
	}
}
