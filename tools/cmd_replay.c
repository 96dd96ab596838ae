/*
 * zs replay: replays a kernel zram-trace (../shared/tools/zram-trace,
 * zram-trace-mix) against libzs's zsmalloc and compares the pool's page
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
#include <lzma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmds.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/zsmalloc.h"

/* ------------------------------------------------------------------ */
/* Trace reader: plain text or xz (detected by magic, not by name).    */

struct reader {
	FILE *f;
	int xz;
	lzma_stream strm;
	uint8_t in[1 << 16];
	uint8_t out[1 << 16];
	size_t pos, len;    /* unread decoded bytes in out[] */
	int in_eof, done;
	const char *err;
};

static int rd_open(struct reader *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!r->f)
		return -errno;
	size_t n = fread(r->in, 1, 6, r->f);
	static const uint8_t magic[6] = { 0xFD, '7', 'z', 'X', 'Z', 0 };
	if (n == 6 && !memcmp(r->in, magic, 6)) {
		r->xz = 1;
		lzma_stream init = LZMA_STREAM_INIT;
		r->strm = init;
		if (lzma_stream_decoder(&r->strm, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
			return -ENOMEM;
		r->strm.next_in = r->in;
		r->strm.avail_in = n;
	} else {
		memcpy(r->out, r->in, n);
		r->len = n;
	}
	return 0;
}

static void rd_close(struct reader *r)
{
	if (r->xz)
		lzma_end(&r->strm);
	if (r->f && r->f != stdin)
		fclose(r->f);
}

/* Refill out[]; returns bytes available, 0 at end, -1 on error (r->err set). */
static long rd_fill(struct reader *r)
{
	if (r->done)
		return 0;
	if (!r->xz) {
		size_t n = fread(r->out, 1, sizeof(r->out), r->f);
		if (n == 0) {
			if (ferror(r->f)) {
				r->err = "read error";
				return -1;
			}
			r->done = 1;
		}
		r->pos = 0;
		r->len = n;
		return (long)n;
	}
	for (;;) {
		if (r->strm.avail_in == 0 && !r->in_eof) {
			size_t n = fread(r->in, 1, sizeof(r->in), r->f);
			if (n == 0) {
				if (ferror(r->f)) {
					r->err = "read error";
					return -1;
				}
				r->in_eof = 1;
			}
			r->strm.next_in = r->in;
			r->strm.avail_in = n;
		}
		r->strm.next_out = r->out;
		r->strm.avail_out = sizeof(r->out);
		lzma_ret ret = lzma_code(&r->strm, r->in_eof ? LZMA_FINISH : LZMA_RUN);
		size_t got = sizeof(r->out) - r->strm.avail_out;
		r->pos = 0;
		r->len = got;
		if (ret == LZMA_STREAM_END) {
			r->done = 1;
			return (long)got;
		}
		if (ret != LZMA_OK) {
			r->err = ret == LZMA_DATA_ERROR    ? "xz: corrupt data"
				 : ret == LZMA_BUF_ERROR   ? "xz: truncated file"
				 : ret == LZMA_FORMAT_ERROR ? "xz: not an xz file"
							    : "xz: decoder error";
			return -1;
		}
		if (got)
			return (long)got;
	}
}

/* Next line without its newline into *buf; returns length, -1 at EOF, -2 on error. */
static long rd_line(struct reader *r, char **buf, size_t *cap)
{
	size_t n = 0;
	int any = 0;
	for (;;) {
		if (r->pos == r->len) {
			long got = rd_fill(r);
			if (got < 0)
				return -2;
			if (got == 0)
				break;
		}
		any = 1;
		uint8_t *s = r->out + r->pos;
		size_t avail = r->len - r->pos;
		uint8_t *nl = memchr(s, '\n', avail);
		size_t take = nl ? (size_t)(nl - s) : avail;
		if (n + take > 4096) {
			r->err = "line too long (not a zram-trace?)";
			return -2;
		}
		if (n + take + 1 > *cap) {
			size_t nc = (*cap ? *cap * 2 : 256);
			while (nc < n + take + 1)
				nc *= 2;
			char *nb = realloc(*buf, nc);
			if (!nb) {
				r->err = "out of memory";
				return -2;
			}
			*buf = nb;
			*cap = nc;
		}
		memcpy(*buf + n, s, take);
		n += take;
		r->pos += take + (nl ? 1 : 0);
		if (nl)
			break;
	}
	if (!any)
		return -1;
	(*buf)[n] = 0;
	if (n && (*buf)[n - 1] == '\r')
		(*buf)[--n] = 0;
	return (long)n;
}

/* ------------------------------------------------------------------ */
/* Replay state.                                                        */

enum { F_MEM, F_COMPACTED, F_STORED, F_COMPR, F_SAME, F_HUGE, NF };
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
	int verbose, json, deferred, checked, fail_fast, store, verify;
	int context, max_report;
	enum zs_free_mode free_mode;
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
	struct zs_pool *pool;
	struct zs_zram *z;
	struct synth sy;
	long synth_inexact, verify_errors;
	int64_t synth_delta_total;
	size_t page_size;
	struct slot *slots;
	size_t nslots;
	uint64_t st[NF]; /* zram-level bookkeeping: stored, compr, same, huge */
	long records, mismatches, nw, nd, nc, nsame, nhuge, first_bad_record;
	long huge_class_warnings;
	unsigned field_bad[NF];
	struct ctx_entry *ring;
	int ring_n, ring_head;
	struct mismatch *shown;
	int nshown;
	struct ctx_entry pending; /* the last op, waiting for its '=' record */
	int have_pending;
	int pending_cls;
};

/* Print an error; arg is trace text, shown printable and at most 80 characters. */
static int fail(long line, const char *fmt, const char *arg)
{
	char safe[84];
	size_t k = 0;
	for (; arg && arg[k] && k < 80; k++)
		safe[k] = (arg[k] >= 0x20 && arg[k] < 0x7f) ? arg[k] : '?';
	if (arg && arg[k])
		safe[k - 1] = safe[k - 2] = safe[k - 3] = '.';
	safe[k] = 0;
	arg = safe;
	if (line > 0)
		fprintf(stderr, "zs replay: line %ld: ", line);
	else
		fprintf(stderr, "zs replay: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
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

static int same_filled(const uint8_t *page, size_t ps)
{
	uint64_t w0, w;
	memcpy(&w0, page, 8);
	for (size_t i = 8; i < ps; i += 8) {
		memcpy(&w, page + i, 8);
		if (w != w0)
			return 0;
	}
	return 1;
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
			if (same_filled(sy->page, ps))
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
	size_t huge = zs_huge_class_size(R->pool);
	int cls = class_of(R, size);
	for (size_t d = 1; d < sy->ps; d++) {
		size_t c[2] = { size - d, size + d };
		for (int i = 0; i < 2; i++) {
			if (c[i] == 0 || c[i] > sy->ps || (d > size && i == 0))
				continue;
			if (sy->len_k[c[i]] >= 0 && c[i] < huge && class_of(R, c[i]) == cls)
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
	return zs_lookup_class_index(R->pool, req);
}

static int op_write(struct replay *R, unsigned long idx, unsigned long size, char flag, long line)
{
	struct slot *s = get_slot(R, idx);
	if (!s)
		return fail(line, "%s", "out of memory for slots");
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
	if (flag == 'n' && size >= zs_huge_class_size(R->pool))
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
			printf("mismatch record %ld (line %ld, after '%s'): expected ", R->records, line,
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
	printf("\nmismatch at record %ld: line %ld '%s', kernel record on line %ld", m->record,
	       m->at.line, m->at.op, m->line);
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
	(void)R;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_vals(FILE *f, const uint64_t v[NF])
{
	fputc('{', f);
	for (int i = 0; i < NF; i++)
		fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", fname[i], v[i]);
	fputc('}', f);
}

static const char *free_mode_name(enum zs_free_mode m)
{
	return m == ZS_FREE_CLASS_INDEX ? "class"
	       : m == ZS_FREE_CLASS_INDEX_UNLOCKED ? "class-unlocked"
						    : "pool";
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs replay TRACE [options]\n"
		"Replay a zram-trace (plain or .xz) on a libzs zsmalloc pool and compare the\n"
		"kernel's numbers with libzs's after every operation.\n\n"
		"  --chain N          max pages per zspage (default: the trace's # chain_size, else 8)\n"
		"  --free-mode M      pool | class | class-unlocked (zs_free locking policy)\n"
		"  --deferred         free with zs_free_deferred, flush before each comparison\n"
		"  --checked          checked pool mode (every handle validated)\n"
		"  --store            replay through the zram store (zs/zram.h): real pages made\n"
		"                     to compress (lz4) to the recorded sizes\n"
		"  --verify           with --store: read every slot back after each compaction\n"
		"                     and at the end\n"
		"  --context N        preceding operations shown per mismatch (default 8, max 64)\n"
		"  --max-report N     mismatches shown in detail (default 3)\n"
		"  --fail-fast        stop at the first mismatch\n"
		"  --verbose          print the trace header, pool geometry and every mismatch\n"
		"  --json             print a JSON summary instead of text\n\n"
		"Exit status: 0 no mismatch, 1 mismatches, 2 error.\n");
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* Parse up to n unsigned decimal fields after the first token; returns count parsed. */
static int parse_fields(const char *s, uint64_t *v, int n, const char **rest)
{
	int k = 0;
	while (k < n) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s < '0' || *s > '9')
			break;
		char *end;
		errno = 0;
		unsigned long long x = strtoull(s, &end, 10);
		if (errno)
			return -1;
		v[k++] = x;
		s = end;
		if (*s && *s != ' ' && *s != '\t')
			return -1;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	*rest = s;
	return k;
}

#define MAX_SLOT (1UL << 26)

/* --store prepass: the largest slot a 'w' or 'd' names (the store needs a disksize). */
static long scan_max_slot(const char *path)
{
	struct reader *r = malloc(sizeof(*r));
	char *line = NULL;
	size_t cap = 0;
	long n, max = 0;
	if (!r || rd_open(r, path)) {
		free(r);
		return -1;
	}
	while ((n = rd_line(r, &line, &cap)) >= 0) {
		if ((line[0] == 'w' || line[0] == 'd') && line[1] == ' ') {
			unsigned long v = strtoul(line + 2, NULL, 10);
			if (v < MAX_SLOT && (long)v > max)
				max = (long)v;
		}
	}
	rd_close(r);
	free(r);
	free(line);
	return n == -2 ? -1 : max;
}

int cmd_replay(int argc, char **argv)
{
	struct opts o = { .chain = -1, .context = 8, .max_report = 3,
			  .free_mode = ZS_FREE_POOL_LOCK };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		long v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			o.verbose = 1;
		} else if (!strcmp(a, "--json")) {
			o.json = 1;
		} else if (!strcmp(a, "--deferred")) {
			o.deferred = 1;
		} else if (!strcmp(a, "--checked")) {
			o.checked = 1;
		} else if (!strcmp(a, "--store")) {
			o.store = 1;
		} else if (!strcmp(a, "--verify")) {
			o.verify = 1;
		} else if (!strcmp(a, "--fail-fast")) {
			o.fail_fast = 1;
		} else if (!strcmp(a, "--chain") || !strcmp(a, "--context") ||
			   !strcmp(a, "--max-report") || !strcmp(a, "--free-mode")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "zs replay: %s needs a value\n", a);
				return 2;
			}
			const char *val = argv[++i];
			if (!strcmp(a, "--free-mode")) {
				if (!strcmp(val, "pool"))
					o.free_mode = ZS_FREE_POOL_LOCK;
				else if (!strcmp(val, "class"))
					o.free_mode = ZS_FREE_CLASS_INDEX;
				else if (!strcmp(val, "class-unlocked"))
					o.free_mode = ZS_FREE_CLASS_INDEX_UNLOCKED;
				else {
					fprintf(stderr, "zs replay: --free-mode: pool, class or class-unlocked\n");
					return 2;
				}
			} else if (!strcmp(a, "--chain")) {
				if (parse_long(val, 1, ZS_MAX_CHAIN, &v)) {
					fprintf(stderr, "zs replay: --chain: 1..%d\n", ZS_MAX_CHAIN);
					return 2;
				}
				o.chain = v;
			} else if (!strcmp(a, "--context")) {
				if (parse_long(val, 0, 64, &v)) {
					fprintf(stderr, "zs replay: --context: 0..64\n");
					return 2;
				}
				o.context = (int)v;
			} else {
				if (parse_long(val, 0, 1000, &v)) {
					fprintf(stderr, "zs replay: --max-report: 0..1000\n");
					return 2;
				}
				o.max_report = (int)v;
			}
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "zs replay: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else if (!o.path) {
			o.path = a;
		} else {
			fprintf(stderr, "zs replay: one trace at a time ('%s')\n", a);
			return 2;
		}
	}
	if (!o.path) {
		usage(stderr);
		return 2;
	}

	struct reader *rd = malloc(sizeof(*rd));
	struct replay *R = calloc(1, sizeof(*R));
	if (!rd || !R) {
		free(rd);
		free(R);
		return fail(0, "%s", "out of memory");
	}
	int rc = 2;
	char *line = NULL;
	size_t cap = 0;
	long lineno = 0;
	int ret = rd_open(rd, o.path);
	if (ret) {
		fprintf(stderr, "zs replay: %s: %s\n", o.path, strerror(-ret));
		free(rd);
		free(R);
		return 2;
	}
	R->o = o;
	R->first_bad_record = -1;
	R->ring = calloc(o.context ? (size_t)o.context : 1, sizeof(*R->ring));
	R->shown = calloc(o.max_report ? (size_t)o.max_report : 1, sizeof(*R->shown));
	if (!R->ring || !R->shown) {
		fail(0, "%s", "out of memory");
		goto out;
	}

	long page_size = 4096, hdr_chain = -1;
	int seen_magic = 0;
	char comp[32] = "?", kernel[64] = "?", data_desc[160] = "";
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	long n;
	while ((n = rd_line(rd, &line, &cap)) >= 0) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			continue;
		if (*s == '#') {
			char key[32], val[160];
			if (R->pool) /* late comment lines are ignored */
				continue;
			if (sscanf(s, "# %31s %159[^\n]", key, val) != 2)
				continue;
			if (!strcmp(key, "zram-trace")) {
				if (strcmp(val, "1")) {
					fail(lineno, "unsupported trace version '%s'", val);
					goto out;
				}
				seen_magic = 1;
			} else if (!strcmp(key, "page_size")) {
				if (parse_long(val, 4096, 65536, &page_size) || (page_size & (page_size - 1))) {
					fail(lineno, "bad page_size '%s' (power of two, 4096..65536)", val);
					goto out;
				}
			} else if (!strcmp(key, "chain_size")) {
				if (strcmp(val, "?") && parse_long(val, 1, ZS_MAX_CHAIN, &hdr_chain)) {
					fail(lineno, "bad chain_size '%s'", val);
					goto out;
				}
			} else if (!strcmp(key, "comp")) {
				snprintf(comp, sizeof(comp), "%.31s", val);
			} else if (!strcmp(key, "kernel")) {
				snprintf(kernel, sizeof(kernel), "%.63s", val);
			} else if (!strcmp(key, "data")) {
				snprintf(data_desc, sizeof(data_desc), "%s", val);
			}
			continue;
		}
		if (!R->pool) {
			if (!seen_magic)
				fprintf(stderr, "zs replay: warning: no '# zram-trace 1' header\n");
			struct zs_pool_config cfg;
			zs_pool_config_init(&cfg);
			cfg.name = "replay";
			cfg.page_size = (size_t)page_size;
			cfg.max_chain = (unsigned)(o.chain > 0 ? o.chain : hdr_chain > 0 ? hdr_chain : 8);
			cfg.free_mode = o.free_mode;
			cfg.checked = o.checked;
			if (o.store) {
				long maxslot = scan_max_slot(o.path);
				if (maxslot < 0) {
					fail(0, "%s: cannot read the trace", o.path);
					goto out;
				}
				struct zs_zram_config zc;
				zs_zram_config_init(&zc);
				zc.page_size = (size_t)page_size;
				zc.disksize = (uint64_t)(maxslot + 1) * (uint64_t)page_size;
				zc.comp = "lz4";
				zc.backend.kind = "zsmalloc";
				zc.backend.page_size = (size_t)page_size;
				zc.backend.checked = o.checked;
				zc.backend.zs = cfg;
				zc.deferred_free = o.deferred;
				int zr = zs_zram_create(&zc, &R->z);
				if (zr) {
					fprintf(stderr, "zs replay: zs_zram_create(page_size %ld, chain %u): %s\n",
						page_size, cfg.max_chain, strerror(-zr));
					goto out;
				}
				R->pool = zs_backend_zspool(zs_zram_backend(R->z));
				if (!R->pool) {
					fail(0, "%s", "--store: the zram store has no zsmalloc pool");
					goto out;
				}
				zr = synth_init(&R->sy, zc.comp, (size_t)page_size);
				if (zr) {
					fprintf(stderr, "zs replay: --store: compressor %s: %s\n", zc.comp,
						strerror(-zr));
					goto out;
				}
			} else {
				R->pool = zs_create_pool(&cfg);
			}
			if (!R->pool) {
				fprintf(stderr, "zs replay: zs_create_pool(page_size %ld, chain %u): %s\n",
					page_size, cfg.max_chain, strerror(errno));
				goto out;
			}
			R->page_size = (size_t)page_size;
			if (o.verbose && !o.json) {
				char chs[24] = "?";
				if (hdr_chain > 0)
					snprintf(chs, sizeof(chs), "%ld", hdr_chain);
				printf("trace %s: comp %s, kernel %s, page_size %ld, chain_size %s\n",
				       o.path, comp, kernel, page_size, chs);
				if (data_desc[0])
					printf("  data %s\n", data_desc);
				printf("%s: page_size %zu, chain %u, free_mode %s%s%s, huge_class_size %zu, "
				       "%d logical classes\n",
				       o.store ? "zram store (lz4) on pool" : "pool",
				       zs_pool_page_size(R->pool), cfg.max_chain, free_mode_name(o.free_mode),
				       o.deferred ? ", deferred" : "", o.checked ? ", checked" : "",
				       zs_huge_class_size(R->pool), zs_class_count(R->pool));
			}
		}
		if (*s == '=') {
			uint64_t exp[NF];
			const char *rest;
			if (parse_fields(s + 1, exp, NF, &rest) != NF || *rest) {
				fail(lineno, "bad '=' record: '%s'", s);
				goto out;
			}
			if (!R->have_pending) {
				fail(lineno, "%s", "'=' record without an operation before it");
				goto out;
			}
			if (on_record(R, exp, lineno) && o.fail_fast)
				break;
			continue;
		}
		if (R->have_pending) {
			/* an operation without its '=' record: keep it as context only */
			R->pending.has_exp = 0;
			ring_push(R, &R->pending);
			R->have_pending = 0;
		}
		uint64_t v[2];
		const char *rest;
		int k = parse_fields(s + 1, v, 2, &rest);
		if (s[1] && s[1] != ' ' && s[1] != '\t')
			k = -1;
		memset(&R->pending, 0, sizeof(R->pending));
		R->pending.line = lineno;
		snprintf(R->pending.op, sizeof(R->pending.op), "%.47s", s);
		R->pending_cls = -1;
		if (s[0] == 'w') {
			if (k != 2 || !rest[0] || rest[1] || !strchr("nsh", rest[0])) {
				fail(lineno, "bad write '%s' (want: w SLOT SIZE n|s|h)", s);
				goto out;
			}
			char flag = rest[0];
			if (v[0] >= MAX_SLOT) {
				fail(lineno, "slot number too large in '%s'", s);
				goto out;
			}
			if ((flag == 'n' && (v[1] == 0 || v[1] > (uint64_t)page_size)) ||
			    (flag == 's' && v[1] != 0) || (flag == 'h' && v[1] > (uint64_t)page_size)) {
				fail(lineno, "size out of range in '%s'", s);
				goto out;
			}
			if (op_write(R, (unsigned long)v[0], (unsigned long)v[1], flag, lineno))
				goto out;
		} else if (s[0] == 'd') {
			if (k != 1 || *rest) {
				fail(lineno, "bad discard '%s' (want: d SLOT)", s);
				goto out;
			}
			if (v[0] >= MAX_SLOT) {
				fail(lineno, "slot number too large in '%s'", s);
				goto out;
			}
			R->nd++;
			if (R->z) {
				int zr = zs_zram_discard(R->z, v[0]);
				if (zr) {
					fprintf(stderr, "zs replay: line %ld: zs_zram_discard(%" PRIu64 "): %s\n",
						lineno, v[0], strerror(-zr));
					goto out;
				}
				if (v[0] < R->nslots && R->slots[v[0]].used)
					R->synth_delta_total -= R->slots[v[0]].synth_delta;
			}
			if (v[0] < R->nslots && slot_free(R, &R->slots[v[0]], lineno))
				goto out;
		} else if (s[0] == 'c') {
			if (k != 0 || *rest) {
				fail(lineno, "bad compaction line '%s' (want: c)", s);
				goto out;
			}
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
		} else {
			fail(lineno, "unknown record '%s'", s);
			goto out;
		}
		R->have_pending = 1;
	}
	if (n == -2) {
		fprintf(stderr, "zs replay: %s: line %ld: %s\n", o.path, lineno + 1,
			rd->err ? rd->err : "read error");
		goto out;
	}
	if (!R->pool || R->records == 0) {
		fail(0, "%s: no operations with '=' records (not a zram-trace?)", o.path);
		goto out;
	}
	if (R->z && o.verify)
		store_verify(R, lineno);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	if (o.json) {
		printf("{\"trace\": ");
		json_str(stdout, o.path);
		printf(", \"comp\": ");
		json_str(stdout, comp);
		printf(", \"page_size\": %ld, \"chain\": %ld, \"free_mode\": \"%s\", \"deferred\": %s,"
		       " \"records\": %ld, \"mismatches\": %ld, \"first_mismatch_record\": %ld,"
		       " \"writes\": %ld, \"discards\": %ld, \"compactions\": %ld, \"same\": %ld,"
		       " \"huge\": %ld, \"seconds\": %.3f, \"field_mismatches\": {",
		       page_size, o.chain > 0 ? o.chain : hdr_chain > 0 ? hdr_chain : 8,
		       free_mode_name(o.free_mode), o.deferred ? "true" : "false", R->records,
		       R->mismatches, R->first_bad_record, R->nw, R->nd, R->nc, R->nsame, R->nhuge, secs);
		for (int i = 0; i < NF; i++)
			printf("%s\"%s\": %u", i ? ", " : "", fname[i], R->field_bad[i]);
		printf("}, \"store\": %s, \"store_inexact_sizes\": %ld, \"verify_errors\": %ld",
		       o.store ? "true" : "false", R->synth_inexact, R->verify_errors);
		printf(", \"first_mismatches\": [");
		for (int i = 0; i < R->nshown; i++) {
			const struct mismatch *m = &R->shown[i];
			printf("%s{\"record\": %ld, \"line\": %ld, \"op\": ", i ? ", " : "", m->record,
			       m->line);
			json_str(stdout, m->at.op);
			printf(", \"class\": %d, \"expected\": ", m->cls);
			json_vals(stdout, m->at.exp);
			printf(", \"got\": ");
			json_vals(stdout, m->at.got);
			printf("}");
		}
		printf("]}\n");
	} else {
		printf("records %ld mismatches %ld\n", R->records, R->mismatches);
		if (o.verbose || R->mismatches) {
			printf("  %ld writes (%ld same-filled, %ld huge), %ld discards, %ld compactions, "
			       "%.2fs\n",
			       R->nw, R->nsame, R->nhuge, R->nd, R->nc, secs);
		}
		if (R->mismatches) {
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
			       R->huge_class_warnings, zs_huge_class_size(R->pool));
		for (int i = 0; i < R->nshown; i++)
			print_mismatch(R, &R->shown[i]);
	}
	rc = R->mismatches || R->verify_errors ? 1 : 0;
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
	free(line);
	rd_close(rd);
	free(rd);
	return rc;
}
