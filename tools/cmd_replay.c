/*
 * zs replay: replays a kernel zram-trace (`zs record`, docs/trace-format.md)
 * against libzs's zsmalloc and compares the pool's page
 * accounting with the kernel's after every operation.  This is the check
 * behind libzs's core promise (page-exact agreement with the running kernel),
 * so it owns the zram slot semantics a replay needs (kernel zram_write_page /
 * slot_free order: allocate the new object, then free the old one; same-filled
 * pages hold no object; huge pages are page-size objects) and nothing else.
 * Public headers only.  Plain and .xz traces (liblzma stream decoder).
 *
 * --store replays through libzs's zram store (zs/zram.h) instead: each write
 * becomes a real page that the store compresses, built so that the store's
 * compressor (lz4) yields exactly the recorded size (a zero page for 's', a
 * random page for 'h'), so the store's own write/overwrite/slot_free path and
 * its mm_stat are what is compared.
 *
 * A zswap-trace goes through libzs's zswap front end instead (replay_zswap.c),
 * with the same record checks and reports.
 *
 * --backend zblock replays the same slot semantics on zblock instead, and any
 * pool that is not configured as the recording kernel's (another chain,
 * chain policy or delta, or zblock) is an experiment: the records differ by
 * design, so the replay reports the kernel's pool pages against the
 * experiment's (peak, mean, end) and the objects whose reads cross a page
 * boundary, rather than mismatches.  --sweep (replay_sweep.c) runs this
 * replay once per configuration.  The options and their checks are in
 * replay_opts.c.
 *
 * Exit: 0 no mismatch, 1 mismatches, 2 usage, I/O, parse or allocator error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "opts.h"
#include "replay.h"
#include "util.h"
#include "trace.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

/* ------------------------------------------------------------------ */
/* Replay state.                                                        */

static const char *const fname[NF] = { "mem_used_pages", "pages_compacted", "pages_stored",
				       "compr_bytes",    "same_pages",      "huge_pages" };

static struct slot *get_slot(struct replay *R, unsigned long idx)
{
	if (idx >= R->nslots) {
		size_t n = R->nslots ? R->nslots : 1024;
		while (n <= idx)
			n *= 2;
		struct slot *s = realloc(R->slots, n * sizeof(*s));
		if (!s)
			return NULL;
		memset(s + R->nslots, 0, (n - R->nslots) * sizeof(*s));
		R->slots = s;
		R->nslots = n;
	}
	return &R->slots[idx];
}

static int do_free(struct replay *R, unsigned long h, long line)
{
	int ret;
	if (!R->pool)
		ret = zs_backend_free(R->b, h);
	else
		ret = R->o.deferred ? zs_free_deferred(R->pool, h) : zs_free(R->pool, h);
	if (ret) {
		fprintf(stderr, "zs replay: line %ld: zs_free(%#lx) failed: %s\n", line, h,
			strerror(-ret));
		return 2;
	}
	return 0;
}

/* Bytes a read of the slot's object asks for: zram reads a huge page whole. */
static size_t read_len(const struct replay *R, const struct slot *s)
{
	return (s->flags & SL_HUGE) ? R->page_size : s->size;
}

/*
 * Does a read of object h (len bytes) cross a pool page boundary?  Asked the
 * way a reader would meet it: zsmalloc's scatter-gather read says so without
 * copying; another kind copies into the caller's buffer or does not.
 */
static int obj_spans(struct replay *R, unsigned long h, size_t len)
{
	if (R->pool) {
		struct zs_obj_piece sg[2];
		int n = zs_obj_read_sg_begin(R->pool, h, len, sg);
		if (n < 0)
			return 0;
		zs_obj_read_sg_end(R->pool, h);
		return n == 2;
	}
	void *p = zs_backend_read_begin(R->b, h, len, R->span_buf);
	if (!p)
		return 0;
	zs_backend_read_end(R->b, h, len, p);
	return p == R->span_buf;
}

void replay_span_add(struct replay *R, struct slot *s)
{
	if (!R->span_on || (s->flags & SL_SAME) || !s->used)
		return;
	if (obj_spans(R, s->handle, read_len(R, s))) {
		s->flags |= SL_SPAN;
		R->span_cur++;
		R->span_bytes_cur += read_len(R, s);
	}
}

void replay_span_del(struct replay *R, struct slot *s)
{
	if (s->flags & SL_SPAN) {
		s->flags &= (uint8_t)~SL_SPAN;
		R->span_cur--;
		R->span_bytes_cur -= read_len(R, s);
	}
}

/* Compaction moves objects: where each one lies now decides whether it spans. */
static void span_recount(struct replay *R)
{
	if (!R->span_on)
		return;
	for (size_t i = 0; i < R->nslots; i++) {
		replay_span_del(R, &R->slots[i]);
		replay_span_add(R, &R->slots[i]);
	}
}

/* zram's slot_free: drop whatever the slot holds and its zram-level counts. */
static int slot_free(struct replay *R, struct slot *s, long line)
{
	if (!s->used)
		return 0;
	replay_span_del(R, s);
	if (s->flags & SL_SAME) {
		R->st[F_SAME]--;
	} else {
		if (s->flags & SL_HUGE)
			R->st[F_HUGE]--;
		int ecls = events_free_begin(R, (unsigned long)(s - R->slots), s);
		if (R->shadow ? held_free(R, s, line) : !R->z && do_free(R, s->handle, line))
			return 2;
		events_free_end(R, ecls);
		R->st[F_COMPR] -= s->size;
	}
	R->st[F_STORED]--;
	memset(s, 0, sizeof(*s));
	return 0;
}

int class_of(struct replay *R, size_t size)
{
	size_t req = size + R->obj_hdr;
	if (req > R->page_size)
		req = R->page_size;
	return R->b ? zs_backend_lookup_class(R->b, req) : zs_lookup_class_index(R->pool, req);
}

/* The allocator answers replay needs, from the store's backend (--store) or the pool. */
size_t huge_size(struct replay *R)
{
	return R->b ? zs_backend_huge_class_size(R->b) : zs_huge_class_size(R->pool);
}

static int op_write(struct replay *R, unsigned long idx, unsigned long size, char flag, long line)
{
	struct slot *s = get_slot(R, idx);
	if (!s)
		return trace_fail(line, "%s", "out of memory for slots");
	R->nw++;
	R->pending_cls = -1;
	if (R->z) {
		if (flag != 's')
			R->pending_cls = class_of(R, flag == 'h' ? R->page_size : size);
		if (store_write(R, s, idx, size, flag, line))
			return 2;
		if (!s->used)
			R->st[F_STORED]++;
		else
			R->st[F_COMPR] -= s->size;
		if (s->used && (s->flags & SL_SAME))
			R->st[F_SAME]--;
		if (s->used && (s->flags & SL_HUGE))
			R->st[F_HUGE]--;
		s->used = 1;
		s->size = (uint32_t)size;
		s->flags = flag == 's' ? SL_SAME : flag == 'h' ? SL_HUGE : 0;
		R->st[F_COMPR] += size;
		R->st[F_SAME] += flag == 's';
		R->st[F_HUGE] += flag == 'h';
		R->nsame += flag == 's';
		R->nhuge += flag == 'h';
		return 0;
	}
	if (flag == 's') {
		/* same-filled: free the old object, allocate nothing */
		if (slot_free(R, s, line))
			return 2;
		s->used = 1;
		s->flags = SL_SAME;
		R->st[F_SAME]++;
		R->st[F_STORED]++;
		R->nsame++;
		return 0;
	}
	/* compressed or huge: allocate the new object first, then free the old one */
	size_t req = flag == 'h' ? R->page_size : size;
	if (flag == 'n' && zs_zram_store_kind((long)size, huge_size(R)) == ZS_ZRAM_STORE_RAW)
		R->huge_class_warnings++;
	R->pending_cls = class_of(R, req);
	if (R->pool && !R->cls_used) {
		R->ncls = zs_class_count(R->pool);
		R->cls_used = calloc((size_t)R->ncls, 1);
		if (!R->cls_used)
			return trace_fail(line, "%s", "out of memory for classes");
	}
	if (R->cls_used && R->pending_cls >= 0 && R->pending_cls < R->ncls)
		R->cls_used[R->pending_cls] = 1;
	unsigned long h = R->pool ? zs_malloc(R->pool, req) : zs_backend_malloc(R->b, req);
	if (ZS_IS_ERR(h)) {
		fprintf(stderr, "zs replay: line %ld: %s_malloc(%zu) failed: %s\n", line,
			R->pool ? "zs" : zs_backend_kind(R->b), req, strerror(-ZS_ERR(h)));
		return 2;
	}
	unsigned long mh = 0;
	if (R->shadow && held_alloc(R, &mh, req, line))
		return 2;
	events_alloc(R, idx, R->pending_cls, req);
	if (slot_free(R, s, line))
		return 2;
	s->used = 1;
	s->handle = h;
	s->shadow_h = mh;
	s->size = (uint32_t)size;
	s->flags = flag == 'h' ? SL_HUGE : 0;
	if (flag == 'h') {
		R->st[F_HUGE]++;
		R->nhuge++;
	}
	R->st[F_COMPR] += size;
	R->st[F_STORED]++;
	replay_span_add(R, s);
	events_span(R, idx, s, R->pending_cls);
	return 0;
}

static void current(struct replay *R, uint64_t got[NF])
{
	struct zs_pool_stats ps;
	if (R->zw) {
		zswap_current(R, got);
		return;
	}
	if (R->z) {
		struct zs_zram_stats st;
		if (R->o.deferred)
			zs_zram_flush(R->z);
		zs_zram_get_stats(R->z, &st, sizeof(st));
		got[F_MEM] = st.mem_used_total / R->page_size;
		got[F_COMPACTED] = st.pages_compacted;
		got[F_STORED] = st.orig_data_size / R->page_size;
		got[F_COMPR] = st.compr_data_size - (uint64_t)R->synth_delta_total;
		got[F_SAME] = st.same_pages;
		got[F_HUGE] = st.huge_pages;
		return;
	}
	if (!R->pool) {
		struct zs_backend_stats bs;
		zs_backend_stats(R->b, &bs, sizeof(bs));
		got[F_MEM] = bs.pages;
		got[F_COMPACTED] = bs.pages_compacted;
	} else {
		/* Also frees what a deferring free mode (percpu-deferred, page-deferred) still holds;
		 * --deferred-held keeps its queue: the model check is about those pages. */
		if (!R->shadow)
			zs_free_deferred_flush(R->pool);
		zs_pool_stats(R->pool, &ps, sizeof(ps));
		got[F_MEM] = zs_get_total_pages(R->pool);
		got[F_COMPACTED] = ps.pages_compacted;
	}
	for (int i = F_STORED; i < NF; i++)
		got[i] = R->st[i];
}

static void ring_push(struct replay *R, const struct ctx_entry *e)
{
	if (R->o.context <= 0)
		return;
	R->ring[R->ring_head] = *e;
	R->ring_head = (R->ring_head + 1) % R->o.context;
	if (R->ring_n < R->o.context)
		R->ring_n++;
}

int replay_record(struct replay *R, const uint64_t exp[NF], long line)
{
	uint64_t got[NF] = { 0 };
	current(R, got);
	R->records++;
	events_record(R, got[F_MEM]);
	R->kmem_sum += exp[F_MEM];
	R->zmem_sum += got[F_MEM];
	R->kmem_end = exp[F_MEM];
	R->zmem_end = got[F_MEM];
	if (exp[F_MEM] > R->kmem_peak)
		R->kmem_peak = exp[F_MEM];
	if (got[F_MEM] > R->zmem_peak)
		R->zmem_peak = got[F_MEM];
	if (R->span_cur > R->span_peak)
		R->span_peak = R->span_cur;
	R->span_sum += R->span_cur;
	R->span_bytes_sum += R->span_bytes_cur;
	R->span_end = R->span_cur;
	struct ctx_entry *e = &R->pending;
	memcpy(e->exp, exp, sizeof(e->exp));
	memcpy(e->got, got, sizeof(e->got));
	e->has_exp = 1;
	int bad = 0;
	if (R->shadow && (held_record(R, got[F_MEM]) || R->nheld))
		return 0;   /* frees queued: the kernel freed them already; the model check stands */
	for (int i = 0; i < R->nf; i++)
		if (exp[i] != got[i]) {
			bad = 1;
			R->field_bad[i]++;
		}
	if (bad) {
		R->mismatches++;
		if (R->first_bad_record < 0)
			R->first_bad_record = R->records;
		if (R->o.verbose && !R->o.json) {
			printf("%s record %ld (line %ld, after '%s'): expected ",
			       R->o.kernel_policy || R->o.strict ? "mismatch" : "difference", R->records, line,
			       e->op);
			replay_print_vals(stdout, R, exp);
			printf(" got ");
			replay_print_vals(stdout, R, got);
			printf("\n");
		}
		if (R->nshown < R->o.max_report) {
			struct mismatch *m = &R->shown[R->nshown++];
			m->line = line;
			m->record = R->records;
			m->at = *e;
			m->cls = R->pending_cls;
			m->nbefore = 0;
			for (int k = 0; k < R->ring_n && k < 64; k++) {
				int idx = (R->ring_head - R->ring_n + k + R->o.context) % R->o.context;
				m->before[m->nbefore++] = R->ring[idx];
			}
		}
	}
	ring_push(R, e);
	R->have_pending = 0;
	return bad;
}

/*
 * The pool (or the zram store) the trace is replayed on, configured from
 * its header and the options; notes whether that is the recording kernel's
 * own policy.  0, or 2 after a message.
 */
void replay_pool_config(struct replay *R, const struct trace_header *h,
			struct zs_pool_config *out)
{
	struct zs_pool_config cfg;
	R->hdr = *h;
	zs_pool_config_init(&cfg); /* kernel profile, explicitly: page parity with the trace */
	cfg.name = "replay";
	cfg.page_size = (size_t)h->page_size;
	cfg.max_chain = (unsigned)(R->o.chain > 0 ? R->o.chain : h->chain > 0 ? h->chain : 8);
	cfg.free_mode = R->o.po.cfg.free_mode;
	cfg.chain_policy = R->o.po.cfg.chain_policy;
	cfg.class_delta = R->o.po.cfg.class_delta;
	/* The kernel's own policy: the recorder's chain size, exhaustive chain
	 * search, delta max(page/256, 16).  Anything else is an experiment. */
	{
		unsigned kdelta = (unsigned)(h->page_size >> 8) > 16
					  ? (unsigned)(h->page_size >> 8) : 16;
		long kchain = h->chain > 0 ? h->chain : 8;
		size_t wl = 0;
		R->o.why[0] = 0;
		if (R->o.zblock)
			wl += (size_t)snprintf(R->o.why, sizeof(R->o.why), "backend zblock, ");
		else if (cfg.chain_policy != ZS_CHAIN_EXHAUSTIVE)
			wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
					       "chain policy %s, ",
					       zs_chain_policy_name(cfg.chain_policy));
		if (!R->o.zblock && (long)cfg.max_chain != kchain)
			wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
					       "chain %u vs the kernel's %ld, ",
					       cfg.max_chain, kchain);
		if (!R->o.zblock && cfg.class_delta && cfg.class_delta != kdelta)
			wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
					       "delta %u vs the kernel's %u, ",
					       cfg.class_delta, kdelta);
		/* held frees: the kernel freed those objects at once, so later allocations land
		 * elsewhere and even records with nothing queued may differ (the deferral's cost) */
		if (R->o.held)
			wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
					       "up to %ld frees held queued, ", R->o.held);
		if (wl >= 2 && wl < sizeof(R->o.why))
			R->o.why[wl - 2] = 0;
		R->o.kernel_policy = wl == 0;
		if (!R->o.kernel_policy && !R->o.strict && !R->o.max_report_set)
			R->o.max_report = 0;
	}
	cfg.checked = R->o.checked;
	R->obj_hdr = R->o.zblock ? 0 : ZS_HANDLE_SIZE;
	*out = cfg;
}

static int setup(struct replay *R, const struct trace_header *h)
{
	struct zs_pool_config cfg;
	char why[256] = "";
	if (!h->seen_magic && !R->o.quiet)
		fprintf(stderr, "zs replay: warning: no '# zram-trace 1' header\n");
	replay_pool_config(R, h, &cfg);
	if (R->o.store) {
		long maxslot = trace_max_slot(R->o.path);
		if (maxslot < 0) {
			trace_fail(0, "%s: cannot read the trace", R->o.path);
			return 2;
		}
		struct zs_zram_config zc;
		zs_zram_config_init(&zc); /* kernel profile: zram's, for parity */
		zc.page_size = (size_t)h->page_size;
		zc.disksize = (uint64_t)(maxslot + 1) * (uint64_t)h->page_size;
		zc.comp = "lz4";
		zc.backend.kind = R->o.po.backend;
		zc.backend.page_size = (size_t)h->page_size;
		zc.backend.checked = R->o.checked;
		zc.backend.zs = cfg;
		zc.deferred_free = R->o.deferred;
		int zr = zs_zram_create(&zc, &R->z, NULL, 0);
		if (zr) {
			fprintf(stderr, "zs replay: zs_zram_create(page_size %ld, chain %u, NULL, 0): %s\n",
				h->page_size, cfg.max_chain, strerror(-zr));
			return 2;
		}
		R->b = zs_zram_backend(R->z);
		if (!(zs_backend_caps(R->b) & ZS_BACKEND_CAP_CLASSES)) {
			trace_fail(0, "%s", "--store: the zram store's backend has no size classes");
			return 2;
		}
		zr = synth_init(&R->sy, zc.comp, (size_t)h->page_size);
		if (zr) {
			fprintf(stderr, "zs replay: --store: compressor %s: %s\n", zc.comp,
				strerror(-zr));
			return 2;
		}
	} else if (R->o.zblock) {
		struct zs_backend_config bc;
		zs_backend_config_init(&bc);
		bc.kind = "zblock";
		bc.page_size = (size_t)h->page_size;
		bc.checked = R->o.checked;
		zs_backend_create(&bc, &R->b, why, sizeof(why));
		R->b_owned = R->b != NULL;
		R->span_buf = malloc((size_t)h->page_size);
		if (!R->span_buf)
			return trace_fail(0, "%s", "out of memory");
		R->span_on = 1;
	} else {
		if (R->o.held)
			held_pool_config(R, &cfg);
		zs_pool_create(&cfg, &R->pool, why, sizeof(why));
		R->span_on = 1;
		if (R->pool && R->o.held && held_setup(R, &cfg))
			return trace_fail(0, "%s", "out of memory for --deferred-held's model pool");
	}
	R->page_size = (size_t)h->page_size;
	if (R->pool && R->ev && events_begin(R, cfg.max_chain, replay_delta(R)))
		return trace_fail(0, "%s", "out of memory");
	if (!R->pool && !R->b) {
		if (R->o.zblock)
			fprintf(stderr, "zs replay: zblock backend (page_size %ld): %s\n",
				h->page_size, why);
		else
			fprintf(stderr, "zs replay: zs_pool_create(page_size %ld, chain %u): %s\n",
				h->page_size, cfg.max_chain, why);
		return 2;
	}
	R->page_size = (size_t)h->page_size;
	if (R->o.verbose && !R->o.json) {
		char chs[24] = "?";
		if (h->chain > 0)
			snprintf(chs, sizeof(chs), "%ld", h->chain);
		printf("trace %s: comp %s, kernel %s, page_size %ld, chain_size %s\n",
		       R->o.path, h->comp, h->kernel, h->page_size, chs);
		if (h->data[0])
			printf("  data %s\n", h->data);
		if (R->o.zblock)
			printf("%s: page_size %zu%s, %d classes, objects up to %zu bytes\n",
			       R->o.store ? "zram store (lz4) on zblock" : "zblock", R->page_size,
			       R->o.checked ? ", checked" : "", zs_backend_class_count(R->b),
			       huge_size(R) - 1);
		else
		printf("%s: page_size %zu, chain %u, free_mode %s%s%s, huge_class_size %zu, "
		       "%d logical classes\n",
		       R->o.store ? "zram store (lz4) on pool" : "pool",
		       R->page_size, cfg.max_chain, zs_free_mode_name(R->o.po.cfg.free_mode),
		       R->o.deferred ? ", deferred" : "", R->o.checked ? ", checked" : "",
		       huge_size(R), R->b ? zs_backend_class_count(R->b) : zs_class_count(R->pool));
	}
	return 0;
}

void replay_op_begin(struct replay *R, const char *s, long lineno)
{
	if (R->have_pending) {
		/* an operation without its '=' record: keep it as context only */
		R->pending.has_exp = 0;
		ring_push(R, &R->pending);
		R->have_pending = 0;
	}
	memset(&R->pending, 0, sizeof(R->pending));
	R->pending.line = lineno;
	snprintf(R->pending.op, sizeof(R->pending.op), "%.47s", s);
	R->pending_cls = -1;
}

/* One trace line: an operation, or the '=' record after one.  0 next line,
 * 1 stop (--fail-fast), 2 error (reported). */
static int step(struct replay *R, struct trace *rd, const char *s, long lineno)
{
	struct trace_rec rec;
	if (trace_parse(rd, s, &rec))
		return 2;
	if (rec.op == 'k')
		return kclass_line(R, &rec, lineno);
	if (rec.op == '=') {
		if (!R->have_pending) {
			trace_fail(lineno, "%s", "'=' record without an operation before it");
			return 2;
		}
		R->after_record = 1;
		if (replay_record(R, rec.exp, lineno) && R->o.fail_fast)
			return 1;
		return 0;
	}
	R->after_record = 0;
	kclass_end(R);
	replay_op_begin(R, s, lineno);
	events_op(R, lineno, s);
	if (rec.op == 'w') {
		if (op_write(R, (unsigned long)rec.slot, (unsigned long)rec.size, rec.flag, lineno))
			return 2;
	} else if (rec.op == 'd') {
		R->nd++;
		if (R->z) {
			int zr = zs_zram_discard(R->z, rec.slot);
			if (zr) {
				fprintf(stderr, "zs replay: line %ld: zs_zram_discard(%" PRIu64 "): %s\n",
					lineno, rec.slot, strerror(-zr));
				return 2;
			}
			if (rec.slot < R->nslots && R->slots[rec.slot].used)
				R->synth_delta_total -= R->slots[rec.slot].synth_delta;
		}
		if (rec.slot < R->nslots && slot_free(R, &R->slots[rec.slot], lineno))
			return 2;
	} else {
		R->nc++;
		if (R->z) {
			if (R->o.deferred)
				zs_zram_flush(R->z);
			zs_zram_compact(R->z);
			if (R->o.verify)
				store_verify(R, lineno);
		} else if (R->pool) {
			if (R->shadow)
				held_drain(R);   /* the kernel's compaction ran with nothing queued */
			else
				zs_free_deferred_flush(R->pool); /* as in current(): any free mode's */
			events_compact_begin(R);
			zs_compact(R->pool);
			events_compact_end(R);
			if (R->shadow)
				zs_compact(R->shadow);
		} else {
			zs_backend_compact(R->b);
		}
		span_recount(R);
	}
	R->have_pending = 1;
	return 0;
}

/* Every line of the trace.  0, or 2 on an error (reported). */
static int run(struct replay *R, struct trace *rd)
{
	const struct trace_header *h = trace_hdr(rd);
	const char *s;
	int n, st = 0;
	R->nf = NF;
	R->fnames = fname;
	R->ctx_label = "mem/compacted";
	n = trace_next(rd, &s);
	if (n > 0 && h->kind == TRACE_ZSWAP) {
		if (R->ev) {
			fprintf(stderr, "zs replay: --events: %s is a zswap-trace; events are written "
					"for zram-traces only\n", R->o.path);
			return 2;
		}
		if (R->o.held) {
			fprintf(stderr, "zs replay: --deferred-held: %s is a zswap-trace; the held-queue "
					"model runs on zram-traces\n", R->o.path);
			return 2;
		}
		return zswap_run(R, rd, s);
	}
	while (n > 0) {
		long lineno = trace_lineno(rd);
		if (!R->pool && !R->b && setup(R, h))
			return 2;
		st = step(R, rd, s, lineno);
		if (st == 2)
			return 2;
		kclass_out(R, h, s, s[0] == '=');
		if (st == 1)
			break;
		n = trace_next(rd, &s);
	}
	if (st != 1 && n < 0)
		return 2;
	if (R->pool)
		kclass_end(R);
	if ((!R->pool && !R->b) || R->records == 0) {
		trace_fail(0, "%s: no operations with '=' records (not a zram-trace?)", R->o.path);
		return 2;
	}
	if (R->z && R->o.verify)
		store_verify(R, trace_lineno(rd));
	return 0;
}

void replay_free(struct replay *R)
{
	if (!R)
		return;
	zswap_free(R);
	events_close(R);
	held_free_all(R);
	free(R->kseen);
	if (R->cls_out)
		fclose(R->cls_out);
	if (R->z)
		zs_zram_destroy(R->z);
	else if (R->pool)
		zs_destroy_pool(R->pool);
	if (R->b_owned)
		zs_backend_destroy(R->b);
	synth_free(&R->sy);
	free(R->span_buf);
	free(R->cls_used);
	free(R->slots);
	free(R->ring);
	free(R->shown);
	free(R);
}

int replay_file(const struct opts *o, struct replay **out)
{
	struct trace *rd = trace_new();
	struct replay *R = calloc(1, sizeof(*R));
	*out = NULL;
	if (!rd || !R) {
		free(rd);
		free(R);
		return trace_fail(0, "%s", "out of memory");
	}
	int ret = trace_open(rd, o->path);
	if (ret) {
		fprintf(stderr, "zs replay: %s: %s\n", o->path, strerror(-ret));
		trace_free(rd);
		free(R);
		return 2;
	}
	R->o = *o;
	R->first_bad_record = -1;
	R->ring = calloc(o->context ? (size_t)o->context : 1, sizeof(*R->ring));
	R->shown = calloc(o->max_report ? (size_t)o->max_report : 1, sizeof(*R->shown));
	if (!R->ring || !R->shown) {
		trace_fail(0, "%s", "out of memory");
		replay_free(R);
		trace_free(rd);
		return 2;
	}
	if (o->classes_out && !(R->cls_out = fopen(o->classes_out, "w"))) {
		fprintf(stderr, "zs replay: --classes-out %s: %s\n", o->classes_out, strerror(errno));
		replay_free(R);
		trace_free(rd);
		return 2;
	}
	if (o->events && events_open(R, o->events)) {
		replay_free(R);
		trace_free(rd);
		return 2;
	}
	double t0 = tool_now();
	if (run(R, rd)) {
		replay_free(R);
		trace_free(rd);
		return 2;
	}
	R->secs = tool_now() - t0;
	trace_free(rd);
	*out = R;
	return 0;
}

int replay_class_slack(const struct replay *R, unsigned *classes, uint64_t *pages)
{
	*classes = 0;
	*pages = 0;
	if (!R->pool || !R->cls_used || R->z || R->zw)
		return -1;
	uint8_t *phys = calloc((size_t)R->ncls, 1);
	if (!phys)
		return -1;
	for (int i = 0; i < R->ncls; i++) {
		struct zs_class_info ci;
		if (!R->cls_used[i] || zs_class_info(R->pool, i, &ci) || ci.phys_index < 0 ||
		    ci.phys_index >= R->ncls || phys[ci.phys_index])
			continue;
		phys[ci.phys_index] = 1;
		(*classes)++;
		*pages += ci.pages_per_zspage;
	}
	free(phys);
	return 0;
}

unsigned replay_chain(const struct replay *R)
{
	return (unsigned)(R->o.chain > 0 ? R->o.chain : R->hdr.chain > 0 ? R->hdr.chain : 8);
}

unsigned replay_delta(const struct replay *R)
{
	unsigned kdelta = (unsigned)(R->hdr.page_size >> 8) > 16 ? (unsigned)(R->hdr.page_size >> 8)
								   : 16;
	return R->o.po.cfg.class_delta ? R->o.po.cfg.class_delta : kdelta;
}

int cmd_replay(int argc, char **argv)
{
	struct opts o;
	struct replay *R;
	int rc = replay_parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (o.sweep)
		return replay_sweep(&o);
	if (replay_file(&o, &R))
		return 2;
	if (events_close(R)) {
		replay_free(R);
		return 2;
	}
	if (o.json)
		replay_print_json(R, &R->hdr);
	else
		replay_print_text(R);
	rc = ((R->mismatches || R->kclass_bad) && (R->o.kernel_policy || o.strict)) ||
		     R->verify_errors || R->held_bad
		     ? 1 : 0;
	if (R->cls_out && fclose(R->cls_out)) {
		fprintf(stderr, "zs replay: --classes-out %s: %s\n", o.classes_out, strerror(errno));
		rc = 2;
	}
	R->cls_out = NULL;
	replay_free(R);
	return rc;
}
