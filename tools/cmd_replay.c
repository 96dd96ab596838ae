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
#include "trace.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

/* ------------------------------------------------------------------ */
/* Replay state.                                                        */

enum { F_MEM, F_COMPACTED, F_STORED, F_COMPR, F_SAME, F_HUGE, NF };
_Static_assert(NF == TRACE_NF, "an '=' record carries one value per field");
static const char *const fname[NF] = { "mem_used_pages", "pages_compacted", "pages_stored",
				       "compr_bytes",    "same_pages",      "huge_pages" };

enum { SL_SAME = 1, SL_HUGE = 2 };
struct slot {
	unsigned long handle;
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
	struct pool_opts po;  /* --chain-policy, --delta, --free-mode, --deferred */
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

struct replay {
	struct opts o;
	struct zs_pool *pool;   /* plain replay: the pool itself */
	struct zs_zram *z;
	struct zs_backend *b;   /* --store: the store's backend, asked through its ops */
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
	unsigned field_bad[NF];
	struct ctx_entry *ring;
	int ring_n, ring_head;
	struct mismatch *shown;
	int nshown;
	struct ctx_entry pending; /* the last op, waiting for its '=' record */
	int have_pending;
	int pending_cls;
};

/* The allocator answers replay needs, from the store's backend (--store) or the pool. */
static size_t huge_size(struct replay *R)
{
	return R->b ? zs_backend_huge_class_size(R->b) : zs_huge_class_size(R->pool);
}

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
	int ret = R->o.deferred ? zs_free_deferred(R->pool, h) : zs_free(R->pool, h);
	if (ret) {
		fprintf(stderr, "zs replay: line %ld: zs_free(%#lx) failed: %s\n", line, h,
			strerror(-ret));
		return 2;
	}
	return 0;
}

/* zram's slot_free: drop whatever the slot holds and its zram-level counts. */
static int slot_free(struct replay *R, struct slot *s, long line)
{
	if (!s->used)
		return 0;
	if (s->flags & SL_SAME) {
		R->st[F_SAME]--;
	} else {
		if (s->flags & SL_HUGE)
			R->st[F_HUGE]--;
		if (!R->z && do_free(R, s->handle, line))
			return 2;
		R->st[F_COMPR] -= s->size;
	}
	R->st[F_STORED]--;
	memset(s, 0, sizeof(*s));
	return 0;
}

static void synth_page(struct synth *sy, unsigned k, unsigned v, uint8_t *page)
{
	size_t ps = sy->ps;
	memcpy(page, sy->rnd, k);
	switch (v) {
	case 0: /* zeros */
		memset(page + k, 0, ps - k);
		break;
	case 1: /* zeros, one random byte in the middle of them */
		memset(page + k, 0, ps - k);
		page[k + (ps - k) / 2] = sy->rnd[ps - 1] | 1;
		break;
	case 2: /* a two-byte pattern */
		for (size_t i = k; i < ps; i++)
			page[i] = (i & 1) ? 0x5a : 0xa5;
		break;
	default: /* zeros with a random 8-byte run near the end */
		memset(page + k, 0, ps - k);
		if (ps - k > 64)
			memcpy(page + ps - 40, sy->rnd + ps - 8, 8);
		break;
	}
}

static int synth_init(struct synth *sy, const char *comp, size_t ps)
{
	int rc = zs_comp_create(comp, ps, &sy->comp);
	if (rc)
		return rc;
	sy->ps = ps;
	sy->out_cap = zs_comp_bound(sy->comp, ps);
	sy->rnd = malloc(ps);
	sy->page = malloc(ps);
	sy->out = malloc(sy->out_cap);
	sy->len_k = malloc((ps + 1) * sizeof(*sy->len_k));
	sy->len_v = calloc(ps + 1, 1);
	if (!sy->rnd || !sy->page || !sy->out || !sy->len_k || !sy->len_v)
		return -ENOMEM;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < ps; i++) { /* xorshift64*: fixed, incompressible bytes */
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		sy->rnd[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
	for (size_t i = 0; i <= ps; i++)
		sy->len_k[i] = -1;
	for (unsigned v = 0; v < SYNTH_VARIANTS; v++)
		for (size_t k = 0; k < ps; k++) {
			synth_page(sy, (unsigned)k, v, sy->page);
			if (zs_zram_page_same_filled(sy->page, ps, NULL))
				continue;
			int n = zs_compress(sy->comp, sy->page, ps, sy->out, sy->out_cap);
			if (n > 0 && (size_t)n <= ps && sy->len_k[n] < 0) {
				sy->len_k[n] = (int32_t)k;
				sy->len_v[n] = (uint8_t)v;
			}
		}
	return 0;
}

static void synth_free(struct synth *sy)
{
	if (sy->comp)
		zs_comp_destroy(sy->comp);
	free(sy->rnd);
	free(sy->page);
	free(sy->out);
	free(sy->len_k);
	free(sy->len_v);
}

static int class_of(struct replay *R, size_t size);

/*
 * Pick the recipe for a compressed object of `size` bytes: exact if one
 * exists, else the nearest length in the same size class (same page
 * accounting; the compr_bytes difference is tracked).  -1 if none.
 */
static long synth_pick(struct replay *R, size_t size)
{
	struct synth *sy = &R->sy;
	if (sy->len_k[size] >= 0)
		return (long)size;
	size_t huge = huge_size(R);
	int cls = class_of(R, size);
	for (size_t d = 1; d < sy->ps; d++) {
		size_t c[2] = { size - d, size + d };
		for (int i = 0; i < 2; i++) {
			if (c[i] == 0 || c[i] > sy->ps || (d > size && i == 0))
				continue;
			if (sy->len_k[c[i]] >= 0 &&
			    zs_zram_store_kind((long)c[i], huge) == ZS_ZRAM_STORE_COMPRESSED &&
			    class_of(R, c[i]) == cls)
				return (long)c[i];
		}
		if (d > 64)
			break;
	}
	return -1;
}

static int store_write(struct replay *R, struct slot *s, unsigned long idx, unsigned long size,
		       char flag, long line)
{
	struct synth *sy = &R->sy;
	long len = (long)size;
	unsigned k = 0, v = 0;
	if (flag == 's') {
		memset(sy->page, 0, sy->ps);
		v = 255;
	} else if (flag == 'h') {
		memcpy(sy->page, sy->rnd, sy->ps);
		k = (unsigned)sy->ps;
		v = 254;
	} else {
		len = synth_pick(R, size);
		if (len < 0) {
			fprintf(stderr, "zs replay: line %ld: --store cannot make a page that compresses to "
					"%lu bytes (or another size of its class)\n", line, size);
			return 2;
		}
		if (len != (long)size)
			R->synth_inexact++;
		k = (unsigned)sy->len_k[len];
		v = sy->len_v[len];
		synth_page(sy, k, v, sy->page);
	}
	int rc = zs_zram_write(R->z, idx, sy->page);
	if (rc) {
		fprintf(stderr, "zs replay: line %ld: zs_zram_write(slot %lu): %s\n", line, idx,
			strerror(-rc));
		return 2;
	}
	if (s->used)
		R->synth_delta_total -= s->synth_delta;
	s->synth_delta = flag == 'n' ? (int16_t)(len - (long)size) : 0;
	R->synth_delta_total += s->synth_delta;
	s->synth_k = (uint16_t)k;
	s->synth_v = (uint8_t)v;
	return 0;
}

/* --verify: read every stored slot back through the store and compare. */
static void store_verify(struct replay *R, long line)
{
	struct synth *sy = &R->sy;
	uint8_t *want = malloc(sy->ps), *got = malloc(sy->ps);
	if (!want || !got) {
		free(want);
		free(got);
		return;
	}
	for (size_t i = 0; i < R->nslots; i++) {
		struct slot *s = &R->slots[i];
		if (!s->used)
			continue;
		if (s->synth_v == 255)
			memset(want, 0, sy->ps);
		else if (s->synth_v == 254)
			memcpy(want, sy->rnd, sy->ps);
		else
			synth_page(sy, s->synth_k, s->synth_v, want);
		int rc = zs_zram_read(R->z, i, got, sy->ps);
		if (rc || memcmp(want, got, sy->ps)) {
			if (R->verify_errors++ < 5)
				fprintf(stderr, "zs replay: line %ld: slot %zu reads back %s\n", line, i,
					rc ? strerror(-rc) : "different contents");
		}
	}
	free(want);
	free(got);
}

static int class_of(struct replay *R, size_t size)
{
	size_t req = size + ZS_HANDLE_SIZE;
	if (req > R->page_size)
		req = R->page_size;
	return R->b ? zs_backend_lookup_class(R->b, req) : zs_lookup_class_index(R->pool, req);
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
	unsigned long h = zs_malloc(R->pool, req);
	if (ZS_IS_ERR(h)) {
		fprintf(stderr, "zs replay: line %ld: zs_malloc(%zu) failed: %s\n", line, req,
			strerror(-ZS_ERR(h)));
		return 2;
	}
	if (slot_free(R, s, line))
		return 2;
	s->used = 1;
	s->handle = h;
	s->size = (uint32_t)size;
	s->flags = flag == 'h' ? SL_HUGE : 0;
	if (flag == 'h') {
		R->st[F_HUGE]++;
		R->nhuge++;
	}
	R->st[F_COMPR] += size;
	R->st[F_STORED]++;
	return 0;
}

static void current(struct replay *R, uint64_t got[NF])
{
	struct zs_pool_stats ps;
	if (R->z) {
		struct zs_zram_stats st;
		if (R->o.deferred)
			zs_zram_flush(R->z);
		zs_zram_get_stats(R->z, &st);
		got[F_MEM] = st.mem_used_total / R->page_size;
		got[F_COMPACTED] = st.pages_compacted;
		got[F_STORED] = st.orig_data_size / R->page_size;
		got[F_COMPR] = st.compr_data_size - (uint64_t)R->synth_delta_total;
		got[F_SAME] = st.same_pages;
		got[F_HUGE] = st.huge_pages;
		return;
	}
	if (R->o.deferred)
		zs_free_deferred_flush(R->pool);
	zs_pool_stats(R->pool, &ps);
	got[F_MEM] = zs_get_total_pages(R->pool);
	got[F_COMPACTED] = ps.pages_compacted;
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

static void print_vals(FILE *f, const uint64_t v[NF])
{
	fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, v[0], v[1],
		v[2], v[3], v[4], v[5]);
}

static int on_record(struct replay *R, const uint64_t exp[NF], long line)
{
	uint64_t got[NF];
	current(R, got);
	R->records++;
	R->kmem_sum += exp[F_MEM];
	R->zmem_sum += got[F_MEM];
	R->kmem_end = exp[F_MEM];
	R->zmem_end = got[F_MEM];
	if (exp[F_MEM] > R->kmem_peak)
		R->kmem_peak = exp[F_MEM];
	if (got[F_MEM] > R->zmem_peak)
		R->zmem_peak = got[F_MEM];
	struct ctx_entry *e = &R->pending;
	memcpy(e->exp, exp, sizeof(e->exp));
	memcpy(e->got, got, sizeof(e->got));
	e->has_exp = 1;
	int bad = 0;
	for (int i = 0; i < NF; i++)
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
			print_vals(stdout, exp);
			printf(" got ");
			print_vals(stdout, got);
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

static void print_mismatch(struct replay *R, const struct mismatch *m)
{
	printf("\n%s at record %ld: line %ld '%s', kernel record on line %ld",
	       R->o.kernel_policy || R->o.strict ? "mismatch" : "difference", m->record, m->at.line, m->at.op, m->line);
	if (m->cls >= 0)
		printf(" (class %d)", m->cls);
	printf("\n");
	printf("  %-16s %12s %12s\n", "field", "kernel", "libzs");
	for (int i = 0; i < NF; i++)
		printf("  %-16s %12" PRIu64 " %12" PRIu64 "%s\n", fname[i], m->at.exp[i], m->at.got[i],
		       m->at.exp[i] != m->at.got[i] ? "   <--" : "");
	if (m->nbefore) {
		printf("  preceding operations (line: op | kernel mem/compacted | libzs mem/compacted):\n");
		for (int k = 0; k < m->nbefore; k++) {
			const struct ctx_entry *c = &m->before[k];
			printf("    %7ld: %-22s | %6" PRIu64 " %6" PRIu64 " | %6" PRIu64 " %6" PRIu64 "%s\n",
			       c->line, c->op, c->exp[F_MEM], c->exp[F_COMPACTED], c->got[F_MEM],
			       c->got[F_COMPACTED],
			       memcmp(c->exp, c->got, sizeof(c->exp)) ? "  (mismatch)" : "");
		}
	}
}

static void json_vals(FILE *f, const uint64_t v[NF])
{
	fputc('{', f);
	for (int i = 0; i < NF; i++)
		fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", fname[i], v[i]);
	fputc('}', f);
}

#define REPLAY_OPTS (OPT_CHAIN | OPT_CHAIN_POLICY | OPT_DELTA | OPT_FREE_MODE | OPT_DEFERRED)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs replay TRACE [options]\n"
		"Replay a zram-trace (plain or .xz; `zs record` makes one, docs/trace-format.md)\n"
		"on a libzs zsmalloc pool and compare the kernel's numbers with libzs's after\n"
		"every operation.  The trace fixes the page size.\n\n");
	opt_pool_help(f, REPLAY_OPTS);
	fprintf(f,
		"                       (--chain default: the trace's # chain_size, else 8)\n"
		"  --checked            checked pool mode (every handle validated)\n"
		"  --store              replay through the zram store (zs/zram.h): real pages made\n"
		"                       to compress (lz4) to the recorded sizes\n"
		"  --verify             with --store: read every slot back after each compaction\n"
		"                       and at the end\n"
		"  --context N          preceding operations shown per mismatch, 0..64 (default 8)\n"
		"  --max-report N       mismatches shown in detail, 0..1000 (default 3; 0 when the\n"
		"                       policy is not the kernel's)\n"
		"  --fail-fast          stop at the first mismatch\n"
		"  --strict             count differences as mismatches (exit 1) even when the\n"
		"                       pool is not configured as the recording kernel\n"
		"  --verbose            print the trace header, pool geometry and every mismatch\n"
		"  --json               print a JSON summary instead of text\n\n"
		"With the kernel's own policy (exhaustive chain search, the trace's chain size,\n"
		"the kernel's class delta) every record must match: exit 0, or 1 on a mismatch.\n"
		"With another policy (--chain-policy heuristic, another --chain or --delta) the\n"
		"records are expected to differ: the replay reports how many differ and the\n"
		"memory each side used (kernel vs this policy), and exits 0 unless --strict.\n"
		"Exit status: 0 no mismatch (or a policy experiment), 1 mismatches, 2 error.\n");
}

int cmd_replay(int argc, char **argv)
{
	enum { O_VERBOSE = 1, O_JSON, O_CHECKED, O_STORE, O_VERIFY, O_FAILFAST, O_STRICT, O_CONTEXT,
	       O_MAXREP };
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "json", no_argument, NULL, O_JSON },
		{ "checked", no_argument, NULL, O_CHECKED },
		{ "store", no_argument, NULL, O_STORE },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "fail-fast", no_argument, NULL, O_FAILFAST },
		{ "strict", no_argument, NULL, O_STRICT },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "max-report", required_argument, NULL, O_MAXREP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .chain = -1, .context = 8, .max_report = 3 };
	int opt;
	uint64_t v;
	pool_opts_init(&o.po);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "hv", lopts, NULL)) != -1) {
		if (opt == OPTC_PAGE_SIZE) {
			fprintf(stderr, "zs replay: --page-size: the trace fixes the page size (its "
					"'# page_size' header)\n");
			return 2;
		}
		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt_pool_arg("replay", REPLAY_OPTS, opt, optarg, &o.po))
				return 2;
			continue;
		}
		switch (opt) {
		case 'h': usage(stdout); return 0;
		case 'v':
		case O_VERBOSE: o.verbose = 1; break;
		case O_JSON: o.json = 1; break;
		case O_CHECKED: o.checked = 1; break;
		case O_STORE: o.store = 1; break;
		case O_VERIFY: o.verify = 1; break;
		case O_FAILFAST: o.fail_fast = 1; break;
		case O_STRICT: o.strict = 1; break;
		case O_CONTEXT:
			if (opt_u64("replay", "--context", optarg, 0, 64, &v))
				return 2;
			o.context = (int)v;
			break;
		case O_MAXREP:
			if (opt_u64("replay", "--max-report", optarg, 0, 1000, &v))
				return 2;
			o.max_report = (int)v;
			o.max_report_set = 1;
			break;
		default: return opt_bad("replay", argc, argv);
		}
	}
	if (optind < argc)
		o.path = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "zs replay: one trace at a time ('%s')\n", argv[optind]);
		return 2;
	}
	if (!o.path) {
		fprintf(stderr, "zs replay: no trace given\n");
		usage(stderr);
		return 2;
	}
	if (o.verify && !o.store) {
		fprintf(stderr, "zs replay: --verify reads slots back through the store: it needs "
				"--store\n");
		return 2;
	}
	if (o.po.set & OPT_CHAIN)
		o.chain = (long)o.po.cfg.max_chain;
	o.deferred = o.po.deferred;

	struct trace *rd = trace_new();
	struct replay *R = calloc(1, sizeof(*R));
	if (!rd || !R) {
		free(rd);
		free(R);
		return trace_fail(0, "%s", "out of memory");
	}
	int rc = 2;
	int ret = trace_open(rd, o.path);
	if (ret) {
		fprintf(stderr, "zs replay: %s: %s\n", o.path, strerror(-ret));
		trace_free(rd);
		free(R);
		return 2;
	}
	R->o = o;
	R->first_bad_record = -1;
	R->ring = calloc(o.context ? (size_t)o.context : 1, sizeof(*R->ring));
	R->shown = calloc(o.max_report ? (size_t)o.max_report : 1, sizeof(*R->shown));
	if (!R->ring || !R->shown) {
		trace_fail(0, "%s", "out of memory");
		goto out;
	}

	const struct trace_header *h = trace_hdr(rd);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	const char *s;
	int n;
	while ((n = trace_next(rd, &s)) > 0) {
		long lineno = trace_lineno(rd);
		if (!R->pool && !R->b) {
			if (!h->seen_magic)
				fprintf(stderr, "zs replay: warning: no '# zram-trace 1' header\n");
			struct zs_pool_config cfg;
			zs_pool_config_init(&cfg);
			cfg.name = "replay";
			cfg.page_size = (size_t)h->page_size;
			cfg.max_chain = (unsigned)(o.chain > 0 ? o.chain : h->chain > 0 ? h->chain : 8);
			cfg.free_mode = o.po.cfg.free_mode;
			cfg.chain_policy = o.po.cfg.chain_policy;
			cfg.class_delta = o.po.cfg.class_delta;
			/* The kernel's own policy: the recorder's chain size, exhaustive chain
			 * search, delta max(page/256, 16).  Anything else is an experiment. */
			{
				unsigned kdelta = (unsigned)(h->page_size >> 8) > 16
							  ? (unsigned)(h->page_size >> 8) : 16;
				long kchain = h->chain > 0 ? h->chain : 8;
				size_t wl = 0;
				R->o.why[0] = 0;
				if (cfg.chain_policy != ZS_CHAIN_EXHAUSTIVE)
					wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
							       "chain policy %s, ",
							       chain_policy_name(cfg.chain_policy));
				if ((long)cfg.max_chain != kchain)
					wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
							       "chain %u vs the kernel's %ld, ",
							       cfg.max_chain, kchain);
				if (cfg.class_delta && cfg.class_delta != kdelta)
					wl += (size_t)snprintf(R->o.why + wl, sizeof(R->o.why) - wl,
							       "delta %u vs the kernel's %u, ",
							       cfg.class_delta, kdelta);
				if (wl >= 2 && wl < sizeof(R->o.why))
					R->o.why[wl - 2] = 0;
				R->o.kernel_policy = wl == 0;
				if (!R->o.kernel_policy && !o.strict && !o.max_report_set)
					R->o.max_report = 0;
			}
			cfg.checked = o.checked;
			if (o.store) {
				long maxslot = trace_max_slot(o.path);
				if (maxslot < 0) {
					trace_fail(0, "%s: cannot read the trace", o.path);
					goto out;
				}
				struct zs_zram_config zc;
				zs_zram_config_init(&zc);
				zc.page_size = (size_t)h->page_size;
				zc.disksize = (uint64_t)(maxslot + 1) * (uint64_t)h->page_size;
				zc.comp = "lz4";
				zc.backend.kind = "zsmalloc";
				zc.backend.page_size = (size_t)h->page_size;
				zc.backend.checked = o.checked;
				zc.backend.zs = cfg;
				zc.deferred_free = o.deferred;
				int zr = zs_zram_create(&zc, &R->z);
				if (zr) {
					fprintf(stderr, "zs replay: zs_zram_create(page_size %ld, chain %u): %s\n",
						h->page_size, cfg.max_chain, strerror(-zr));
					goto out;
				}
				R->b = zs_zram_backend(R->z);
				if (!(zs_backend_caps(R->b) & ZS_BACKEND_CAP_CLASSES)) {
					trace_fail(0, "%s", "--store: the zram store's backend has no size classes");
					goto out;
				}
				zr = synth_init(&R->sy, zc.comp, (size_t)h->page_size);
				if (zr) {
					fprintf(stderr, "zs replay: --store: compressor %s: %s\n", zc.comp,
						strerror(-zr));
					goto out;
				}
			} else {
				R->pool = zs_create_pool(&cfg);
			}
			if (!R->pool && !R->b) {
				fprintf(stderr, "zs replay: zs_create_pool(page_size %ld, chain %u): %s\n",
					h->page_size, cfg.max_chain, strerror(errno));
				goto out;
			}
			R->page_size = (size_t)h->page_size;
			if (o.verbose && !o.json) {
				char chs[24] = "?";
				if (h->chain > 0)
					snprintf(chs, sizeof(chs), "%ld", h->chain);
				printf("trace %s: comp %s, kernel %s, page_size %ld, chain_size %s\n",
				       o.path, h->comp, h->kernel, h->page_size, chs);
				if (h->data[0])
					printf("  data %s\n", h->data);
				printf("%s: page_size %zu, chain %u, free_mode %s%s%s, huge_class_size %zu, "
				       "%d logical classes\n",
				       o.store ? "zram store (lz4) on pool" : "pool",
				       R->page_size, cfg.max_chain, free_mode_name(o.po.cfg.free_mode),
				       o.deferred ? ", deferred" : "", o.checked ? ", checked" : "",
				       huge_size(R), R->b ? zs_backend_class_count(R->b) : zs_class_count(R->pool));
			}
		}
		struct trace_rec rec;
		if (trace_parse(rd, s, &rec))
			goto out;
		if (rec.op == '=') {
			if (!R->have_pending) {
				trace_fail(lineno, "%s", "'=' record without an operation before it");
				goto out;
			}
			if (on_record(R, rec.exp, lineno) && o.fail_fast)
				break;
			continue;
		}
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
		if (rec.op == 'w') {
			if (op_write(R, (unsigned long)rec.slot, (unsigned long)rec.size, rec.flag, lineno))
				goto out;
		} else if (rec.op == 'd') {
			R->nd++;
			if (R->z) {
				int zr = zs_zram_discard(R->z, rec.slot);
				if (zr) {
					fprintf(stderr, "zs replay: line %ld: zs_zram_discard(%" PRIu64 "): %s\n",
						lineno, rec.slot, strerror(-zr));
					goto out;
				}
				if (rec.slot < R->nslots && R->slots[rec.slot].used)
					R->synth_delta_total -= R->slots[rec.slot].synth_delta;
			}
			if (rec.slot < R->nslots && slot_free(R, &R->slots[rec.slot], lineno))
				goto out;
		} else {
			R->nc++;
			if (R->z) {
				if (o.deferred)
					zs_zram_flush(R->z);
				zs_zram_compact(R->z);
				if (o.verify)
					store_verify(R, lineno);
			} else {
				if (o.deferred)
					zs_free_deferred_flush(R->pool);
				zs_compact(R->pool);
			}
		}
		R->have_pending = 1;
	}
	if (n < 0)
		goto out;
	if ((!R->pool && !R->b) || R->records == 0) {
		trace_fail(0, "%s: no operations with '=' records (not a zram-trace?)", o.path);
		goto out;
	}
	if (R->z && o.verify)
		store_verify(R, trace_lineno(rd));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	if (o.json) {
		printf("{\"trace\": ");
		json_string(stdout, o.path);
		printf(", \"comp\": ");
		json_string(stdout, h->comp);
		printf(", \"page_size\": %ld, \"chain\": %ld, \"free_mode\": \"%s\", \"deferred\": %s,"
		       " \"records\": %ld, \"mismatches\": %ld, \"first_mismatch_record\": %ld,"
		       " \"writes\": %ld, \"discards\": %ld, \"compactions\": %ld, \"same\": %ld,"
		       " \"huge\": %ld, \"seconds\": %.3f, \"field_mismatches\": {",
		       h->page_size, o.chain > 0 ? o.chain : h->chain > 0 ? h->chain : 8,
		       free_mode_name(o.po.cfg.free_mode), o.deferred ? "true" : "false", R->records,
		       R->mismatches, R->first_bad_record, R->nw, R->nd, R->nc, R->nsame, R->nhuge, secs);
		for (int i = 0; i < NF; i++)
			printf("%s\"%s\": %u", i ? ", " : "", fname[i], R->field_bad[i]);
		printf("}, \"store\": %s, \"store_inexact_sizes\": %ld, \"verify_errors\": %ld",
		       o.store ? "true" : "false", R->synth_inexact, R->verify_errors);
		printf(", \"chain_policy\": \"%s\", \"delta\": %u, \"kernel_policy\": %s, "
		       "\"not_kernel_because\": ",
		       chain_policy_name(o.po.cfg.chain_policy), o.po.cfg.class_delta,
		       R->o.kernel_policy ? "true" : "false");
		json_string(stdout, R->o.why);
		printf(", \"mem_used_pages\": {\"kernel_peak\": %" PRIu64 ", \"kernel_mean\": %.1f, "
		       "\"kernel_end\": %" PRIu64 ", \"libzs_peak\": %" PRIu64 ", \"libzs_mean\": %.1f, "
		       "\"libzs_end\": %" PRIu64 "}",
		       R->kmem_peak, (double)R->kmem_sum / (double)R->records, R->kmem_end,
		       R->zmem_peak, (double)R->zmem_sum / (double)R->records, R->zmem_end);
		printf(", \"first_mismatches\": [");
		for (int i = 0; i < R->nshown; i++) {
			const struct mismatch *m = &R->shown[i];
			printf("%s{\"record\": %ld, \"line\": %ld, \"op\": ", i ? ", " : "", m->record,
			       m->line);
			json_string(stdout, m->at.op);
			printf(", \"class\": %d, \"expected\": ", m->cls);
			json_vals(stdout, m->at.exp);
			printf(", \"got\": ");
			json_vals(stdout, m->at.got);
			printf("}");
		}
		printf("]}\n");
	} else {
		if (R->o.kernel_policy || o.strict)
			printf("%s: records %ld mismatches %ld\n", o.path, R->records, R->mismatches);
		else
			printf("%s: records %ld, %ld differ from the kernel's (expected: not the kernel's "
			       "policy: %s)\n",
			       o.path, R->records, R->mismatches, R->o.why);
		if (!R->o.kernel_policy) {
			double kmean = (double)R->kmem_sum / (double)R->records;
			double zmean = (double)R->zmem_sum / (double)R->records;
			printf("  mem_used pages   %10s %10s %10s\n"
			       "  kernel           %10" PRIu64 " %10.1f %10" PRIu64 "\n"
			       "  this policy      %10" PRIu64 " %10.1f %10" PRIu64 "\n"
			       "  policy/kernel    %10.4f %10.4f %10.4f\n",
			       "peak", "mean", "end", R->kmem_peak, kmean, R->kmem_end, R->zmem_peak,
			       zmean, R->zmem_end,
			       R->kmem_peak ? (double)R->zmem_peak / (double)R->kmem_peak : 0.0,
			       kmean > 0 ? zmean / kmean : 0.0,
			       R->kmem_end ? (double)R->zmem_end / (double)R->kmem_end : 0.0);
		}
		if (o.verbose || (R->mismatches && (R->o.kernel_policy || o.strict))) {
			printf("  %ld writes (%ld same-filled, %ld huge), %ld discards, %ld compactions, "
			       "%.2fs\n",
			       R->nw, R->nsame, R->nhuge, R->nd, R->nc, secs);
		}
		if (R->mismatches && (R->o.kernel_policy || o.strict)) {
			printf("  first mismatch at record %ld; mismatching records per field:",
			       R->first_bad_record);
			for (int i = 0; i < NF; i++)
				printf(" %s %u", fname[i], R->field_bad[i]);
			printf("\n");
		}
		if (R->z)
			printf("  store: %ld writes synthesized at another size of the same class%s\n",
			       R->synth_inexact,
			       o.verify ? (R->verify_errors ? ", READ-BACK ERRORS" : ", all slots read back intact")
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
	rc = (R->mismatches && (R->o.kernel_policy || o.strict)) || R->verify_errors ? 1 : 0;
out:
	if (R->z)
		zs_zram_destroy(R->z);
	else if (R->pool)
		zs_destroy_pool(R->pool);
	synth_free(&R->sy);
	free(R->slots);
	free(R->ring);
	free(R->shown);
	free(R);
	trace_free(rd);
	return rc;
}
