/*
 * zs replay's state, shared by the replay driver (cmd_replay.c), its --store
 * half (replay_store.c, which makes real pages compress to the recorded
 * sizes), the zswap-trace replay (replay_zswap.c, which drives zs/zswap.h
 * with the same record checking and reports) and --sweep (replay_sweep.c,
 * which runs the driver once per pool configuration and compares the runs),
 * its reports (replay_report.c) and its options (replay_opts.c).
 * Private to those files.
 */
#ifndef ZS_TOOLS_REPLAY_H
#define ZS_TOOLS_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "opts.h"
#include "trace.h"

enum { F_MEM, F_COMPACTED, F_STORED, F_COMPR, F_SAME, F_HUGE, NF };
_Static_assert(NF == TRACE_NF, "an '=' record carries one value per field");

enum { SL_SAME = 1, SL_HUGE = 2, SL_SPAN = 4 /* its read crosses a pool page boundary */ };
struct slot {
	unsigned long handle;
	unsigned long shadow_h; /* --deferred-held: the model pool's handle (replay_held.c) */
	uint32_t size;
	uint8_t flags;
	uint8_t used;
	int16_t synth_delta;   /* --store: synthesized length - recorded size */
	uint16_t synth_k;      /* --store: page recipe (see synth_page) */
	uint8_t synth_v;
};

struct ctx_entry {
	long line;
	char op[48];
	uint64_t exp[NF], got[NF];
	int has_exp;
};

struct opts {
	const char *path;
	long chain;           /* -1: from the header */
	int verbose, json, deferred, checked, fail_fast, store, verify, strict, progress;
	int context, max_report, max_report_set;
	int sweep;            /* --sweep: replay_sweep() runs the replay once per point */
	int zblock;           /* --backend zblock */
	int quiet;            /* a sweep point: no warnings on stderr (the sweep sums them up) */
	const char *events;   /* --events FILE: the pool's decisions (replay_events.c) */
	const char *plot;     /* --plot FILE: the sweep's points and Pareto front as SVG */
	long held;            /* --deferred-held N: frees kept queued, checked against a model */
	const char *classes_out; /* --classes-out FILE: the trace with libzs's class tables */
	struct pool_opts po;  /* --chain-policy, --delta, --free-mode, --deferred, --backend */
	int kernel_policy;    /* 1: the pool is configured as the recording kernel's */
	char why[160];        /* when not: what differs */
};

struct mismatch {
	long line, record;
	struct ctx_entry before[64];
	int nbefore;
	struct ctx_entry at;
	int cls;
};

/*
 * --store: pages whose compressed length (with the store's compressor) is a
 * wanted size.  Recipe (k, v): k bytes of a fixed random buffer followed by
 * tail variant v.  len_k/len_v map a length to the first recipe giving it.
 */
#define SYNTH_VARIANTS 4
struct synth {
	struct zs_comp *comp;
	size_t ps;
	uint8_t *rnd, *page, *out;
	size_t out_cap;
	int32_t *len_k; /* -1: no recipe for this length */
	uint8_t *len_v;
};

struct zslot_map;
struct replay_events;

struct replay {
	struct opts o;
	int nf;                  /* fields of an '=' record: NF, or TRACE_ZSWAP_NF */
	const char *const *fnames; /* their names, for reports and JSON */
	const char *ctx_label;   /* fields 0 and 1 in the context lines of a mismatch */
	struct trace_header hdr; /* the trace's, once the first operation is read */
	struct zs_pool *pool;   /* plain replay on zsmalloc: the pool itself */
	struct zs_zram *z;
	struct zs_backend *b;   /* --store: the store's backend, asked through its ops;
				   --backend zblock: the replay's own backend (b_owned) */
	int b_owned;
	size_t obj_hdr;         /* bytes the allocator adds to an object (zsmalloc's handle) */
	struct synth sy;
	long synth_inexact, verify_errors;
	int64_t synth_delta_total;
	size_t page_size;
	struct slot *slots;
	size_t nslots;
	uint64_t st[NF]; /* zram-level bookkeeping: stored, compr, same, huge */
	long records, mismatches, nw, nd, nc, nsame, nhuge, first_bad_record;
	long huge_class_warnings;
	uint64_t kmem_peak, kmem_sum, zmem_peak, zmem_sum, kmem_end, zmem_end;
	/*
	 * Objects whose read crosses a pool page boundary (a read_begin that
	 * copies into the caller's buffer: the memcpy cost of a long chain),
	 * counted over the live objects at every record, as the pages are.
	 * Only a plain replay sees its handles (not --store).
	 */
	int span_on;
	uint64_t span_cur, span_bytes_cur, span_peak, span_sum, span_end, span_bytes_sum;
	void *span_buf;          /* read_begin's local copy (backend kinds) */
	/*
	 * A zswap-trace replay: the zswap front end under test, and beside it a
	 * shadow allocator (pool or b above) that mirrors its objects, because
	 * zswap keeps its handles to itself and the spanning count needs them.
	 * shadow_diff counts records where the shadow's pages were not zswap's
	 * (then its spanning count is not exact and the report says so).
	 */
	struct zs_zswap *zw;
	struct zslot_map *zmap;  /* offset -> the shadow's object */
	long nl, nrej, nempty, shadow_diff;
	long zw_error;           /* a store, load or invalidate failed unexpectedly */
	double secs;             /* wall time of the replay */
	/*
	 * Which logical classes a plain zsmalloc replay allocated from (a byte
	 * each, zs_class_count of them), for --sweep's small-trace rule.
	 */
	uint8_t *cls_used;
	int ncls;
	struct replay_events *ev; /* --events: open while the replay runs */
	unsigned field_bad[NF];
	struct ctx_entry *ring;
	int ring_n, ring_head;
	struct mismatch *shown;
	int nshown;
	struct ctx_entry pending; /* the last op, waiting for its '=' record */
	int have_pending;
	int pending_cls;
	/* --deferred-held (replay_held.c): the model pool and the frees it holds back */
	struct zs_pool *shadow;
	struct held *held;
	size_t nheld;
	long held_records, held_queued_records, held_bad, held_drains;
	/* 'k' lines (replay_classes.c): the kernel's class tables against libzs's */
	int after_record, ksnap_open, cls_out_hdr;
	long ksnap_line, ksnaps, kclass_rows, kclass_bad, kclass_skipped;
	uint8_t *kseen;
	FILE *cls_out;           /* --classes-out */
};

/* replay_store.c: --store's page synthesis and read-back. */
int synth_init(struct synth *sy, const char *comp, size_t ps);
void synth_free(struct synth *sy);
int store_write(struct replay *R, struct slot *s, unsigned long idx, unsigned long size,
		char flag, long line);
void store_verify(struct replay *R, long line);

/* cmd_replay.c: one whole replay of o->path (what `zs replay` without --sweep
 * does, minus printing).  0 with *out set (free it with replay_free; also
 * when --fail-fast stopped it early), or 2 after an error was reported. */
int replay_file(const struct opts *o, struct replay **out);
void replay_free(struct replay *R);

/* replay_held.c: --deferred-held's model pool. */
void held_pool_config(const struct replay *R, struct zs_pool_config *cfg);
int held_setup(struct replay *R, const struct zs_pool_config *cfg);
int held_alloc(struct replay *R, unsigned long *out, size_t req, long line);
int held_free(struct replay *R, struct slot *s, long line);
void held_drain(struct replay *R);
int held_record(struct replay *R, uint64_t pool_pages);
void held_free_all(struct replay *R);

/* replay_classes.c: the 'k' lines (the kernel's class tables). */
int kclass_line(struct replay *R, const struct trace_rec *rec, long line);
void kclass_end(struct replay *R);
void kclass_out(struct replay *R, const struct trace_header *h, const char *s, int is_record);
/* The pool configuration R ran with, as the sweep prints it. */
unsigned replay_chain(const struct replay *R);
unsigned replay_delta(const struct replay *R);

/* cmd_replay.c, for replay_zswap.c: the pool configuration the options and
 * the header ask for (also sets R->hdr, kernel_policy, why, obj_hdr); a new
 * operation line (the previous one without its '=' goes to the context); an
 * '=' record compared with the replay's state (1 when it differs). */
void replay_pool_config(struct replay *R, const struct trace_header *h,
			struct zs_pool_config *cfg);
void replay_op_begin(struct replay *R, const char *s, long lineno);
int replay_record(struct replay *R, const uint64_t exp[NF], long line);
/* Spanning bookkeeping of one slot's object (R->pool or R->b holds it). */
void replay_span_add(struct replay *R, struct slot *s);
void replay_span_del(struct replay *R, struct slot *s);

/* replay_zswap.c: a zswap-trace from its first operation line s (the header
 * is read): 0, or 2 on an error (reported).  Its '=' state; its teardown. */
int zswap_run(struct replay *R, struct trace *rd, const char *s);
void zswap_current(struct replay *R, uint64_t got[NF]);
void zswap_free(struct replay *R);

/* cmd_replay.c: after a plain zsmalloc replay, the physical classes it used
 * and the sum of their pages per zspage (each class keeps up to one partly
 * used zspage: that sum bounds the pages the pool can hold as tail slack).
 * 0, or -1 when the replay had no pool of its own (--store, zblock, zswap). */
int replay_class_slack(const struct replay *R, unsigned *classes, uint64_t *pages);

/* replay_events.c: --events.  open: -1 after a message; begin: once the pool
 * exists; the rest do nothing without --events.  free_begin returns the
 * class to diff in free_end (-1: none).  close: -1 when the file could not
 * be written. */
int events_open(struct replay *R, const char *path);
int events_begin(struct replay *R, unsigned chain, unsigned delta);
void events_op(struct replay *R, long line, const char *op);
void events_alloc(struct replay *R, unsigned long idx, int cls, size_t req);
void events_span(struct replay *R, unsigned long idx, const struct slot *s, int cls);
int events_free_begin(struct replay *R, unsigned long idx, const struct slot *s);
void events_free_end(struct replay *R, int cls);
void events_compact_begin(struct replay *R);
void events_compact_end(struct replay *R);
void events_record(struct replay *R, uint64_t pages);
int events_close(struct replay *R);

/* replay_opts.c: options -> o.  0, 1 after --help (exit 0), or 2 after a usage message. */
int replay_parse(int argc, char **argv, struct opts *o);

/* replay_sweep.c: --sweep.  Exit status as cmd_replay's. */
int replay_sweep(const struct opts *o);

/* cmd_replay.c: the pool class index of a compressed object of `size` bytes, and the
 * huge class size, from the store's backend (--store) or the pool. */
int class_of(struct replay *R, size_t size);
size_t huge_size(struct replay *R);

/* replay_report.c: the end-of-run reports (text, JSON) and one field row of values. */
void replay_print_vals(FILE *f, const struct replay *R, const uint64_t v[NF]);
void replay_print_text(struct replay *R);
void replay_print_json(const struct replay *R, const struct trace_header *h);

#endif
