/*
 * zs replay on a zswap-trace (docs/trace-format.md, "The zswap-trace
 * format"): each store, load, invalidate and compaction goes through libzs's
 * zswap front end (zs/zswap.h) and every '=' record is compared with its
 * stats, with the zram replay's mismatch reports (cmd_replay.c owns those;
 * this file owns the zswap rules a replay must follow).  The trace holds
 * sizes only, so stores are size-only entries (store_compressed with no
 * data): accounted exactly as real ones, and a load of one is a load.
 *
 * zswap hides its handles, so for the spanning count (and --sweep) a shadow
 * allocator of the same kind and configuration mirrors zswap's objects: it
 * allocates when zswap stored (new object first, then the stale one freed,
 * zswap's order) and frees when zswap dropped an entry.  Fed the same calls
 * in the same order it holds the same pages; every '=' record checks that,
 * and a difference is reported rather than trusted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "zs/backend.h"
#include "zs/zsmalloc.h"
#include "zs/zswap.h"

_Static_assert(TRACE_ZSWAP_NF <= NF, "an '=' record's fields fit the replay's arrays");
_Static_assert(TRACE_ZSWAP_MAX_OFFSET == ZS_ZSWAP_MAX_OFFSET, "the reader's offset limit is zswap's");

static const char *const zfname[TRACE_ZSWAP_NF] = { "pool_pages", "stored_pages",
						    "incompressible_pages", "zswpout", "zswpin" };

/*
 * Offset -> the shadow's object.  Swap offsets are sparse (clusters spread
 * over the device), so a hash, not an array.  Open addressing with linear
 * probing; a key stays once inserted (its slot goes unused), as a freed swap
 * slot is soon reused and no probe chain ever needs repairing.
 */
struct zslot_map {
	uint64_t *keys; /* offset + 1; 0: empty */
	struct slot *vals;
	size_t cap, n;
};

static size_t zmap_hash(uint64_t k, size_t cap)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (size_t)k & (cap - 1);
}

static int zmap_grow(struct zslot_map *m)
{
	size_t nc = m->cap ? m->cap * 2 : 4096;
	uint64_t *keys = calloc(nc, sizeof(*keys));
	struct slot *vals = calloc(nc, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = zmap_hash(m->keys[i] - 1, nc);
		while (keys[j])
			j = (j + 1) & (nc - 1);
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = nc;
	return 0;
}

/* The offset's slot; NULL when absent and !create, or out of memory. */
static struct slot *zmap_get(struct zslot_map *m, uint64_t off, int create)
{
	if (create && (m->n + 1) * 4 > m->cap * 3 && zmap_grow(m))
		return NULL;
	if (!m->cap)
		return NULL;
	size_t j = zmap_hash(off, m->cap);
	while (m->keys[j]) {
		if (m->keys[j] == off + 1)
			return &m->vals[j];
		j = (j + 1) & (m->cap - 1);
	}
	if (!create)
		return NULL;
	m->keys[j] = off + 1;
	m->n++;
	return &m->vals[j];
}

/* ---- The shadow allocator ---- */

static void shadow_drop(struct replay *R, struct slot *s)
{
	if (!s || !s->used)
		return;
	if (!(s->flags & SL_SAME)) {
		replay_span_del(R, s);
		if (R->pool)
			zs_free(R->pool, s->handle);
		else
			zs_backend_free(R->b, s->handle);
	}
	memset(s, 0, sizeof(*s));
}

static unsigned long shadow_total_pages(struct replay *R)
{
	return R->pool ? zs_get_total_pages(R->pool) : zs_backend_total_pages(R->b);
}

/* Compaction moved objects: whether each one spans is where it lies now. */
static void shadow_recount(struct replay *R)
{
	struct zslot_map *m = R->zmap;
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			replay_span_del(R, &m->vals[i]);
			replay_span_add(R, &m->vals[i]);
		}
}

/* ---- Setup ---- */

static int zswap_setup(struct replay *R, const struct trace_header *h)
{
	struct zs_pool_config cfg;
	char why[256] = "";
	struct zs_zswap_config zc;
	char err[200];
	if (!h->seen_magic && !R->o.quiet)
		fprintf(stderr, "zs replay: warning: no '# zswap-trace 1' header\n");
	replay_pool_config(R, h, &cfg);
	R->page_size = (size_t)h->page_size;
	zs_zswap_config_init(&zc);
	zc.page_size = R->page_size;
	/* Sizes come from the trace: the compressor only names the pool. */
	zc.backend.kind = R->o.zblock ? "zblock" : "zsmalloc";
	zc.backend.checked = R->o.checked;
	zc.backend.zs = cfg;
	/* The pool limit is a share of the recording machine's RAM; a trace that
	 * does not say how much cannot hit it, so the replay has none either. */
	if (h->totalram_pages)
		zc.total_ram = h->totalram_pages * (uint64_t)h->page_size;
	else
		zc.total_ram = (uint64_t)1 << 60;
	if (h->max_pool_percent >= 0)
		zc.max_pool_percent = (unsigned)h->max_pool_percent;
	zc.deferred_free = R->o.deferred;
	int rc = zs_zswap_create(&zc, &R->zw, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "zs replay: zs_zswap_create (page_size %ld, %s): %s\n", h->page_size,
			zc.backend.kind, err[0] ? err : strerror(-rc));
		return 2;
	}
	R->zmap = calloc(1, sizeof(*R->zmap));
	R->span_buf = malloc(R->page_size);
	if (!R->zmap || !R->span_buf)
		return trace_fail(0, "%s", "out of memory");
	if (R->o.zblock) {
		struct zs_backend_config bc;
		zs_backend_config_init(&bc);
		bc.kind = "zblock";
		bc.page_size = R->page_size;
		zs_backend_create(&bc, &R->b, why, sizeof(why));
		R->b_owned = R->b != NULL;
	} else {
		cfg.checked = 0;
		zs_pool_create(&cfg, &R->pool, why, sizeof(why));
	}
	if (!R->pool && !R->b) {
		fprintf(stderr, "zs replay: the shadow %s pool: %s\n", zc.backend.kind, why);
		return 2;
	}
	R->span_on = 1;
	if (R->o.verbose && !R->o.json) {
		char chs[24] = "?";
		if (h->chain > 0)
			snprintf(chs, sizeof(chs), "%ld", h->chain);
		printf("zswap-trace %s: comp %s, kernel %s, page_size %ld, chain_size %s, mode %s\n",
		       R->o.path, h->comp, h->kernel, h->page_size, chs, h->fill_mode ? "fill" : "ops");
		if (h->data[0])
			printf("  data %s\n", h->data);
		struct zs_zswap_stats st;
		zs_zswap_get_stats(R->zw, &st, sizeof(st));
		if (h->totalram_pages)
			printf("  pool limit: max_pool_percent %u of totalram_pages %" PRIu64 " = %" PRIu64
			       " pages\n", zc.max_pool_percent, h->totalram_pages, st.max_pool_pages);
		else
			printf("  pool limit: none (the trace has no totalram_pages)\n");
		if (R->o.zblock)
			printf("zswap on zblock: page_size %zu%s, %d classes\n", R->page_size,
			       R->o.checked ? ", checked" : "", zs_backend_class_count(R->b));
		else
			printf("zswap on pool: page_size %zu, chain %u, %s, delta %u, free_mode %s%s%s, "
			       "huge_class_size %zu\n",
			       R->page_size, cfg.max_chain, zs_chain_policy_name(cfg.chain_policy),
			       replay_delta(R), zs_free_mode_name(cfg.free_mode),
			       R->o.deferred ? ", deferred" : "", R->o.checked ? ", checked" : "",
			       zs_huge_class_size(R->pool));
	}
	return 0;
}

/* ---- Operations ---- */

static int op_store(struct replay *R, uint64_t off, uint64_t size, char flag, long line)
{
	struct slot *s = zmap_get(R->zmap, off, 1);
	if (!s)
		return trace_fail(line, "%s", "out of memory for offsets");
	size_t len = flag == 'z' ? 0 : flag == 'h' ? R->page_size : (size_t)size;
	R->nw++;
	if (flag != 'z')
		R->pending_cls = class_of(R, len);
	int rc = zs_zswap_store_compressed(R->zw, off, NULL, len, 0);
	if (rc == -EINVAL) {
		fprintf(stderr, "zs replay: line %ld: zs_zswap_store_compressed(%" PRIu64 ", %zu): %s\n",
			line, off, len, strerror(-rc));
		return 2;
	}
	if (flag == 'z') {
		R->nsame++;
		shadow_drop(R, s);
		s->used = 1;
		s->flags = SL_SAME;
		return 0;
	}
	if (rc < 0) {
		/* zswap refused it (pool limit): the page went to the swap device
		 * and the offset's stale contents were dropped */
		R->nrej++;
		shadow_drop(R, s);
		return 0;
	}
	unsigned long h = R->pool ? zs_malloc(R->pool, len) : zs_backend_malloc(R->b, len);
	if (ZS_IS_ERR(h)) {
		fprintf(stderr, "zs replay: line %ld: the shadow pool's malloc(%zu): %s\n", line, len,
			strerror(-ZS_ERR(h)));
		return 2;
	}
	shadow_drop(R, s);
	s->used = 1;
	s->handle = h;
	s->size = (uint32_t)len;
	s->flags = flag == 'h' ? SL_HUGE : 0;
	R->nhuge += flag == 'h';
	replay_span_add(R, s);
	return 0;
}

static int op_drop(struct replay *R, char op, uint64_t off, long line)
{
	int rc;
	if (op == 'l') {
		R->nl++;
		rc = zs_zswap_load(R->zw, off, R->span_buf);
	} else {
		R->nd++;
		rc = zs_zswap_invalidate(R->zw, off);
	}
	if (rc == -ENOENT) {
		/* nothing there: a page zswap rejected lives on the swap device */
		R->nempty++;
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "zs replay: line %ld: zs_zswap_%s(%" PRIu64 "): %s\n", line,
			op == 'l' ? "load" : "invalidate", off, strerror(-rc));
		return 2;
	}
	shadow_drop(R, zmap_get(R->zmap, off, 0));
	return 0;
}

/* One line: an operation or its '=' record.  0 next, 1 stop (--fail-fast), 2 error. */
static int zstep(struct replay *R, struct trace *rd, const char *s, long lineno)
{
	struct trace_zswap_rec rec;
	if (trace_parse_zswap(rd, s, &rec))
		return 2;
	if (rec.op == '=') {
		if (!R->have_pending) {
			trace_fail(lineno, "%s", "'=' record without an operation before it");
			return 2;
		}
		uint64_t exp[NF] = { 0 };
		memcpy(exp, rec.exp, sizeof(rec.exp));
		return replay_record(R, exp, lineno) && R->o.fail_fast ? 1 : 0;
	}
	replay_op_begin(R, s, lineno);
	int rc = 0;
	if (rec.op == 's') {
		rc = op_store(R, rec.offset, rec.size, rec.flag, lineno);
	} else if (rec.op == 'l' || rec.op == 'i') {
		rc = op_drop(R, rec.op, rec.offset, lineno);
	} else {
		R->nc++;
		if (R->o.deferred)
			zs_zswap_flush(R->zw);
		zs_zswap_compact(R->zw);
		if (R->pool)
			zs_compact(R->pool);
		else
			zs_backend_compact(R->b);
		shadow_recount(R);
	}
	R->have_pending = 1;
	return rc;
}

int zswap_run(struct replay *R, struct trace *rd, const char *s)
{
	R->nf = TRACE_ZSWAP_NF;
	R->fnames = zfname;
	R->ctx_label = "pool/stored";
	if (R->o.store || R->o.verify) {
		fprintf(stderr, "zs replay: %s is a zswap-trace: --store and --verify replay through "
				"zram's store\n", R->o.path);
		return 2;
	}
	if (zswap_setup(R, trace_hdr(rd)))
		return 2;
	int n = 1, st = 0;
	while (n > 0) {
		st = zstep(R, rd, s, trace_lineno(rd));
		if (st == 2)
			return 2;
		if (st == 1)
			break;
		n = trace_next(rd, &s);
	}
	if (st != 1 && n < 0)
		return 2;
	if (R->records == 0) {
		trace_fail(0, "%s: no operations with '=' records", R->o.path);
		return 2;
	}
	return 0;
}

void zswap_current(struct replay *R, uint64_t got[NF])
{
	struct zs_zswap_stats st;
	if (R->o.deferred)
		zs_zswap_flush(R->zw);
	zs_zswap_get_stats(R->zw, &st, sizeof(st));
	got[0] = st.pool_total_size / R->page_size;
	got[1] = st.stored_pages;
	got[2] = st.stored_incompressible_pages;
	got[3] = st.zswpout;
	got[4] = st.zswpin;
	if (shadow_total_pages(R) != got[0])
		R->shadow_diff++;
}

void zswap_free(struct replay *R)
{
	if (R->zw)
		zs_zswap_destroy(R->zw);
	R->zw = NULL;
	if (R->zmap) {
		free(R->zmap->keys);
		free(R->zmap->vals);
		free(R->zmap);
		R->zmap = NULL;
	}
}
