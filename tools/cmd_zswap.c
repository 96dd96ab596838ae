/*
 * `zs zswap`: one workload through libzs's zswap front end (zs/zswap.h) on
 * each backend (zsmalloc, zblock, ...), side by side with the kernel's
 * counter names: stored_pages, pool_total_size, Zswap/Zswapped and their
 * ratio, store and load time per page, pool memory after a fill, after a
 * seeded store/load/invalidate churn (pool limit and writeback included) and
 * after compaction.  Two inputs:
 *   FILE|DIR...   real pages: filled, churned, drained and checked byte for
 *                 byte; --vs-kernel puts the same pages through the running
 *                 kernel's zswap (MADV_PAGEOUT of single pages, page-cluster 0,
 *                 touches) for the kernel's row;
 *   --sizes FILE  a capture of scripts/zswap_capture.sh (the exact lzo sizes
 *                 of what the kernel's zswap held for a real build, with the
 *                 kernel's counters): the sizes are stored size-only
 *                 (zs_zswap_store_compressed) fresh, and replayed under a churn
 *                 driven by the capture's samples (as many stores, loads and
 *                 frees per interval as the kernel counted) that ends with the
 *                 captured entries live, so the seed-003 table (docs/zswap.md)
 *                 has the kernel's zsmalloc, libzs's zsmalloc and zblock on the
 *                 same objects.
 * Public headers only (the kernel side is this file's own, under the same
 * flock as every user of the kernel's zswap in this project).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <lzma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmds.h"
#include "json.h"
#include "opts.h"
#include "util.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/harness.h"
#include "zs/zswap.h"

#define MAX_BACKENDS 8
#define SERIES_MAX 400 /* pool-page samples kept per run (the report's plot) */

struct opts {
	const char *backends[MAX_BACKENDS];
	int nbackends;
	const char *comp, *backing, *sizes;
	uint64_t max_bytes, total_ram, ops, seed;
	unsigned max_pool_percent;
	int max_pool_set, json, vs_kernel, quiet, shrinker;
	struct pool_opts po;
};

#define ZSWAP_OPTS (OPT_POLICY | OPT_FREE_MODE | OPT_DEFERRED | OPT_CLASS_SHARDS)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zs zswap [options] FILE|DIR...\n"
		"       zs zswap [options] --sizes CAPTURE\n"
		"Runs a workload through libzs's zswap (zs/zswap.h) on each backend and prints the\n"
		"kernel's counters side by side: a fill, a seeded store/load/invalidate churn, a\n"
		"compaction, a drain (docs/zswap.md).\n"
		"  --backends LIST    comma-separated backend kinds (default zsmalloc,zblock)\n"
		"  --comp NAME        compressor (default lzo, the kernel's)\n"
		"  --max SIZE         load at most SIZE bytes of pages, 4K..1T (default 64M)\n"
		"  --max-pool-percent P  the pool limit, 0..100 (default 20; --sizes: the capture's)\n"
		"  --total-ram SIZE   RAM the limit is a share of (default: this machine's;\n"
		"                     --sizes: the capture's totalram_pages)\n"
		"  --backing FILE     swap device for writeback (existing file; without it a\n"
		"                     store rejected by the limit is only counted)\n"
		"  --shrinker         with --backing: shrinker_enabled, and the shrinker called at\n"
		"                     every churn interval for 1/8 of its own count (pressure)\n"
		"  --ops N            churn operations (default 2 x pages; --sizes with samples:\n"
		"                     the capture's own counts)\n"
		"  --seed N           churn seed (default 1)\n"
		"  --sizes FILE       a capture of scripts/zswap_capture.sh (plain or .xz)\n"
		"  --vs-kernel        also the kernel's zswap on the same pages (root; lzo)\n"
		"  --json             one row per backend (and the kernel's), the kernel's names\n"
		"  --quiet            no notes on stderr\n");
	opt_pool_help(f, ZSWAP_OPTS);
}

/* ---- Capture files (scripts/zswap_capture.sh) ---- */

struct capture {
	char **hdr;          /* header lines without "# " */
	size_t nhdr;
	uint32_t *sizes;
	size_t n;
	/* '# sample T STORED POOL_PAGES ZSWPOUT ZSWPIN' lines */
	double *st;
	uint64_t (*sv)[4];
	size_t ns;
};

/* The whole file, xz-decoded when it is xz.  NULL on error (errno set). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *raw = NULL, *out = NULL;
	size_t rlen = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (rlen + 65536 > cap) {
			char *n = realloc(raw, cap = cap ? cap * 2 : 1 << 20);
			if (!n)
				goto fail;
			raw = n;
		}
		size_t got = fread(raw + rlen, 1, cap - rlen, f);
		rlen += got;
		if (got == 0)
			break;
	}
	if (ferror(f))
		goto fail;
	fclose(f);
	f = NULL;
	if (rlen < 6 || memcmp(raw, "\xfd" "7zXZ", 5)) {
		*len = rlen;
		char *n = realloc(raw, rlen + 1);
		if (!n)
			goto fail;
		n[rlen] = 0;
		return n;
	}
	lzma_stream s = LZMA_STREAM_INIT;
	size_t ocap = rlen * 8 + 4096;
	if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK ||
	    !(out = malloc(ocap)))
		goto fail;
	s.next_in = (const uint8_t *)raw;
	s.avail_in = rlen;
	for (;;) {
		s.next_out = (uint8_t *)out + s.total_out;
		s.avail_out = ocap - 1 - s.total_out;
		lzma_ret r = lzma_code(&s, LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
			lzma_end(&s);
			errno = EINVAL;
			goto fail;
		}
		if (s.avail_out == 0) {
			char *n = realloc(out, ocap *= 2);
			if (!n) {
				lzma_end(&s);
				goto fail;
			}
			out = n;
		} else if (r == LZMA_BUF_ERROR) {
			lzma_end(&s);
			errno = EINVAL;
			goto fail;
		}
	}
	*len = s.total_out;
	out[*len] = 0;
	lzma_end(&s);
	free(raw);
	return out;
fail:
	if (f)
		fclose(f);
	free(raw);
	free(out);
	return NULL;
}

static void capture_free(struct capture *c)
{
	for (size_t i = 0; i < c->nhdr; i++)
		free(c->hdr[i]);
	free(c->hdr);
	free(c->sizes);
	free(c->st);
	free(c->sv);
	memset(c, 0, sizeof(*c));
}

/* Read a capture: 0, or 2 after a message. */
static int capture_read(const char *path, struct capture *c)
{
	size_t len, cap = 0, hcap = 0, scap = 0;
	char *text = slurp(path, &len), *line, *save = NULL;
	long lineno = 0;

	memset(c, 0, sizeof(*c));
	if (!text) {
		fprintf(stderr, "zs zswap: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		if (lineno == 1 && strcmp(line, "# zswap-sizes 1")) {
			fprintf(stderr, "zs zswap: %s: not a capture (the first line is not "
				"'# zswap-sizes 1'; scripts/zswap_capture.sh writes one)\n", path);
			goto bad;
		}
		if (line[0] == '#') {
			const char *h = line + 1 + (line[1] == ' ');
			if (!strncmp(h, "sample ", 7)) {
				double t;
				uint64_t v[4];
				if (sscanf(h + 7, "%lf %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &t,
					   &v[0], &v[1], &v[2], &v[3]) != 5) {
					fprintf(stderr, "zs zswap: %s: line %ld: bad sample\n", path, lineno);
					goto bad;
				}
				if (c->ns == scap) {
					scap = scap ? scap * 2 : 256;
					double *nt = realloc(c->st, scap * sizeof(*nt));
					if (nt)
						c->st = nt;
					uint64_t(*nv)[4] = realloc(c->sv, scap * sizeof(*nv));
					if (nv)
						c->sv = nv;
					if (!nt || !nv)
						goto oom;
				}
				c->st[c->ns] = t;
				memcpy(c->sv[c->ns++], v, sizeof(v));
				continue;
			}
			if (c->nhdr == hcap) {
				char **n = realloc(c->hdr, (hcap = hcap ? hcap * 2 : 64) * sizeof(*n));
				if (!n)
					goto oom;
				c->hdr = n;
			}
			if (!(c->hdr[c->nhdr] = strdup(h)))
				goto oom;
			c->nhdr++;
			continue;
		}
		char *end;
		errno = 0;
		unsigned long v = strtoul(line, &end, 10);
		while (*end == ' ' || *end == '\r' || *end == '\t')
			end++;
		if (errno || end == line || *end || v < 1 || v > 4096) {
			fprintf(stderr, "zs zswap: %s: line %ld: '%.40s' is not a size (1..4096)\n",
				path, lineno, line);
			goto bad;
		}
		if (c->n == cap) {
			uint32_t *n = realloc(c->sizes, (cap = cap ? cap * 2 : 65536) * sizeof(*n));
			if (!n)
				goto oom;
			c->sizes = n;
		}
		c->sizes[c->n++] = (uint32_t)v;
	}
	free(text);
	if (c->nhdr == 0 || strcmp(c->hdr[0], "zswap-sizes 1")) {
		fprintf(stderr, "zs zswap: %s: not a capture (no '# zswap-sizes 1' first line)\n", path);
		capture_free(c);
		return 2;
	}
	if (!c->n) {
		fprintf(stderr, "zs zswap: %s: no sizes\n", path);
		capture_free(c);
		return 2;
	}
	return 0;
oom:
	fprintf(stderr, "zs zswap: out of memory\n");
bad:
	free(text);
	capture_free(c);
	return 2;
}

/* "# SEC KEY VALUE": 1 and *v, or 0 when absent. */
static int cap_num(const struct capture *c, const char *sec, const char *key, double *v)
{
	size_t ls = strlen(sec), lk = strlen(key);
	for (size_t i = 0; i < c->nhdr; i++) {
		const char *h = c->hdr[i];
		if (!strncmp(h, sec, ls) && h[ls] == ' ' && !strncmp(h + ls + 1, key, lk) &&
		    h[ls + 1 + lk] == ' ') {
			char *end;
			*v = strtod(h + ls + 2 + lk, &end);
			return end != h + ls + 2 + lk;
		}
	}
	return 0;
}

static uint64_t cap_u64(const struct capture *c, const char *sec, const char *key)
{
	double v;
	return cap_num(c, sec, key, &v) && v > 0 ? (uint64_t)(v + 0.5) : 0;
}

/* "# KEY TEXT": the text, or "?". */
static const char *cap_str(const struct capture *c, const char *key)
{
	size_t lk = strlen(key);
	for (size_t i = 0; i < c->nhdr; i++)
		if (!strncmp(c->hdr[i], key, lk) && c->hdr[i][lk] == ' ')
			return c->hdr[i] + lk + 1;
	return "?";
}

/* ---- The workload: a plan of stores, loads and invalidates ---- */

enum { OP_STORE, OP_LOAD, OP_INVAL };

struct op {
	uint32_t type : 2;
	uint32_t id : 30; /* the store's entry */
};

struct plan {
	size_t nfill;        /* entries 0..nfill-1 are stored first (the fill) */
	struct op *ops;      /* then these (the churn) */
	size_t nops, opcap;
	uint32_t *item;      /* per entry: the page (FILE mode) or size (--sizes) it stores */
	size_t nids, idcap;
	size_t *iend;        /* the churn's intervals: op index where each ends */
	size_t nint;
	double *kt;          /* per interval: the kernel's time and pool pages (samples) */
	uint64_t *kpool;
	uint64_t stores, loads, invals;
	size_t survivors;    /* entries live at the end */
	size_t matched;      /* of them given a captured size (--sizes with samples) */
};

static void plan_free(struct plan *p)
{
	free(p->ops);
	free(p->item);
	free(p->iend);
	free(p->kt);
	free(p->kpool);
	memset(p, 0, sizeof(*p));
}

static int plan_op(struct plan *p, int type, uint32_t id)
{
	if (p->nops == p->opcap) {
		struct op *n = realloc(p->ops, (p->opcap = p->opcap ? p->opcap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		p->ops = n;
	}
	p->ops[p->nops++] = (struct op){ (uint32_t)type, id };
	if (type == OP_STORE)
		p->stores++;
	else if (type == OP_LOAD)
		p->loads++;
	else
		p->invals++;
	return 0;
}

static int plan_id(struct plan *p, uint32_t item, uint32_t *id)
{
	if (p->nids >= (1u << 30) - 1)
		return -1;
	if (p->nids == p->idcap) {
		uint32_t *n = realloc(p->item, (p->idcap = p->idcap ? p->idcap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		p->item = n;
	}
	p->item[p->nids] = item;
	*id = (uint32_t)p->nids++;
	return 0;
}

/* The live entries while a plan is made: a set with uniform random removal. */
struct live {
	uint32_t *v;
	size_t n, cap;
};

static int live_add(struct live *l, uint32_t id)
{
	if (l->n == l->cap) {
		uint32_t *n = realloc(l->v, (l->cap = l->cap ? l->cap * 2 : 65536) * sizeof(*n));
		if (!n)
			return -1;
		l->v = n;
	}
	l->v[l->n++] = id;
	return 0;
}

static uint32_t live_take(struct live *l, uint64_t *rng)
{
	size_t k = tool_rand64(rng) % l->n;
	uint32_t id = l->v[k];
	l->v[k] = l->v[--l->n];
	return id;
}

/*
 * One interval of the churn: `st` stores, `ld` loads and `iv` invalidates in
 * a random interleaving (each next op drawn in proportion to what is left;
 * a removal with nothing live becomes a store first).  Victims are uniform
 * over the live entries; a store's item is drawn from 0..nitems-1.
 */
static int plan_interval(struct plan *p, struct live *l, uint64_t st, uint64_t ld, uint64_t iv,
			 size_t nitems, uint64_t *rng)
{
	while (st + ld + iv) {
		uint64_t r = tool_rand64(rng) % (st + ld + iv);
		int type = r < st ? OP_STORE : r < st + ld ? OP_LOAD : OP_INVAL;
		uint32_t id;

		if (type != OP_STORE && l->n == 0) {
			if (!st)
				break; /* nothing to remove: the samples disagree; drop the rest */
			type = OP_STORE;
		}
		if (type == OP_STORE) {
			st--;
			if (plan_id(p, (uint32_t)(tool_rand64(rng) % nitems), &id) || live_add(l, id) ||
			    plan_op(p, OP_STORE, id))
				return -1;
		} else {
			if (type == OP_LOAD)
				ld--;
			else
				iv--;
			if (plan_op(p, type, live_take(l, rng)))
				return -1;
		}
	}
	size_t *n = realloc(p->iend, (p->nint + 1) * sizeof(*n));
	if (!n)
		return -1;
	p->iend = n;
	p->iend[p->nint++] = p->nops;
	return 0;
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * FILE mode, and --sizes without samples: fill every item, then `ops`
 * operations in 50 intervals, half stores of a random item, a quarter loads,
 * a quarter invalidates.
 */
static int plan_synthetic(struct plan *p, size_t nitems, uint64_t ops, uint64_t seed)
{
	struct live l = { 0 };
	uint64_t rng = seed;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < nitems && !rc; i++) {
		uint32_t id;
		rc = plan_id(p, (uint32_t)i, &id) || live_add(&l, id);
	}
	p->nfill = nitems;
	for (int k = 0; k < 50 && !rc; k++) {
		uint64_t n = ops / 50 + (k < (int)(ops % 50));
		rc = plan_interval(p, &l, n / 2, n / 4, n - n / 2 - n / 4, nitems, &rng);
	}
	p->survivors = l.n;
	free(l.v);
	return rc ? -1 : 0;
}

/*
 * --sizes with samples: each sample interval gets the kernel's stores
 * (zswpout delta), loads (zswpin delta) and invalidates (stores - loads -
 * the change of stored_pages: entries freed by a process's exit or munmap),
 * from an empty pool.  Then the entries live at the end, in store order, get
 * the captured sizes in swap-offset order (they are the same entries: the
 * kernel held exactly these at the freeze) and every other store a size
 * drawn from the capture.  Exact counts, synthetic order and victims.
 */
static int plan_samples(struct plan *p, const struct capture *c, uint64_t seed)
{
	struct live l = { 0 };
	uint64_t rng = seed, carry = 0;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	if (!(p->kt = calloc(c->ns, sizeof(*p->kt))) || !(p->kpool = calloc(c->ns, sizeof(*p->kpool))))
		return -1;
	for (size_t k = 1; k < c->ns && !rc; k++) {
		const uint64_t *a = c->sv[k - 1], *b = c->sv[k];
		uint64_t st = b[2] > a[2] ? b[2] - a[2] : 0, ld = b[3] > a[3] ? b[3] - a[3] : 0;
		int64_t dstored = (int64_t)b[0] - (int64_t)a[0];
		int64_t iv = (int64_t)st - (int64_t)ld - dstored;

		/* Counters are read one by one: a negative count waits for the next interval. */
		iv -= (int64_t)carry;
		carry = iv < 0 ? (uint64_t)-iv : 0;
		rc = plan_interval(p, &l, st, ld, iv > 0 ? (uint64_t)iv : 0, c->n, &rng);
		p->kt[p->nint - 1] = c->st[k];
		p->kpool[p->nint - 1] = b[1];
	}
	if (!rc) {
		qsort(l.v, l.n, sizeof(*l.v), by_u32);
		p->survivors = l.n;
		p->matched = l.n < c->n ? l.n : c->n;
		for (size_t i = 0; i < p->matched; i++)
			p->item[l.v[i]] = (uint32_t)i;
	}
	free(l.v);
	return rc ? -1 : 0;
}

/* ---- Running a plan on one backend ---- */

struct phase {
	struct zs_zswap_stats st;
	double store_ns, load_ns, inval_ns; /* per operation */
	uint64_t n_store, n_load, n_inval;
};

struct run {
	const char *backend;
	struct phase fill, churn, compacted, drain;
	uint64_t rejected;     /* stores the front end refused (the page went to "disk") */
	uint64_t disk_loads;   /* loads of such pages, and of written-back ones */
	uint64_t mismatches;   /* FILE mode: pages loaded back different */
	unsigned long compacted_pages;
	double wall_s;
	size_t nseries;
	double series_t[SERIES_MAX];
	uint64_t series_pool[SERIES_MAX], series_stored[SERIES_MAX];
	int ok;
	char err[256];
};

struct input {
	const struct zs_pageset *ps;   /* FILE mode */
	const uint32_t *sizes;         /* --sizes */
	size_t nitems;
};

static int do_store(struct zs_zswap *z, const struct input *in, uint64_t off, uint32_t item)
{
	if (in->ps)
		return zs_zswap_store(z, off, in->ps->data + (size_t)item * in->ps->page_size, 0);
	return zs_zswap_store_compressed(z, off, NULL, in->sizes[item], 0);
}

static int make_zswap(const struct opts *o, const char *backend, uint64_t total_ram,
		      unsigned max_pool, struct zs_zswap **z, char *err, size_t errlen)
{
	struct zs_zswap_config cfg;

	zs_zswap_config_init(&cfg);
	cfg.comp = o->comp;
	cfg.backend.kind = backend;
	cfg.backend.zs = o->po.cfg;
	cfg.backend.zs.page_size = 0;
	cfg.deferred_free = o->po.deferred;
	cfg.total_ram = total_ram;
	cfg.max_pool_percent = max_pool;
	cfg.backing_path = o->backing;
	cfg.shrinker_enabled = o->shrinker;
	return zs_zswap_create(&cfg, z, err, errlen);
}

/* Per entry: its offset (while stored) and where it is. */
enum { E_NONE, E_ZSWAP, E_DISK };

/* Pool pages at the end of every interval that ends by op `done` (every `every`-th kept). */
static void record_series(struct zs_zswap *z, const struct plan *p, struct run *r,
			  size_t *next_int, size_t every, size_t done)
{
	for (; *next_int < p->nint && p->iend[*next_int] <= done; (*next_int)++) {
		struct zs_zswap_stats st;

		if ((*next_int % every != every - 1 && *next_int != p->nint - 1) ||
		    r->nseries >= SERIES_MAX)
			continue;
		zs_zswap_get_stats(z, &st);
		r->series_t[r->nseries] = p->kt ? p->kt[*next_int] : (double)p->iend[*next_int];
		r->series_pool[r->nseries] = st.pool_pages;
		r->series_stored[r->nseries++] = st.stored_pages;
	}
}

/* --shrinker: at the end of each interval, the shrinker scans an eighth of what it counts (a
 * steady, moderate pressure; the kernel's share depends on reclaim priority). */
static void shrink_at_interval(struct zs_zswap *z, const struct plan *p, size_t *next, size_t done)
{
	int ended = 0;

	for (; *next < p->nint && p->iend[*next] <= done; (*next)++)
		ended = 1;
	if (ended) {
		unsigned long n = zs_zswap_shrink_count(z);
		if (n)
			zs_zswap_shrink(z, n / 8 + 1);
	}
}

static int run_plan(const struct opts *o, const char *backend, const struct plan *p,
		    const struct input *in, uint64_t total_ram, unsigned max_pool, int drain,
		    struct run *r)
{
	struct zs_zswap *z = NULL;
	uint64_t *off = calloc(p->nids ? p->nids : 1, sizeof(*off));
	uint8_t *where = calloc(p->nids ? p->nids : 1, 1);
	uint64_t *freelist = malloc((p->nids ? p->nids : 1) * sizeof(*freelist));
	size_t nfree = 0, nextoff = 0, psz = 4096;
	unsigned char *buf = NULL;
	double t, tw = tool_now();
	int rc;

	memset(r, 0, sizeof(*r));
	r->backend = backend;
	if (!off || !where || !freelist) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		goto out;
	}
	rc = make_zswap(o, backend, total_ram, max_pool, &z, r->err, sizeof(r->err));
	if (rc) {
		size_t l = strlen(r->err);
		snprintf(r->err + l, sizeof(r->err) - l, "%s%s", l ? ": " : "", strerror(-rc));
		z = NULL;
		goto out;
	}
	psz = zs_zswap_page_size(z);
	if (!(buf = malloc(psz))) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		goto out;
	}

	/* Fill. */
	t = tool_now();
	for (size_t i = 0; i < p->nfill; i++) {
		off[i] = nextoff++;
		rc = do_store(z, in, off[i], p->item[i]);
		where[i] = rc >= 0 ? E_ZSWAP : E_DISK;
		r->rejected += rc < 0;
	}
	r->fill.n_store = p->nfill;
	r->fill.store_ns = p->nfill ? (tool_now() - t) * 1e9 / (double)p->nfill : 0;
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->fill.st);

	/* Churn, timed per operation kind. */
	double ts = 0, tl = 0, ti = 0;
	size_t next_int = 0, every = p->nint > SERIES_MAX ? (p->nint + SERIES_MAX - 1) / SERIES_MAX : 1;
	size_t next_shrink = 0;
	record_series(z, p, r, &next_int, every, 0);
	for (size_t k = 0; k < p->nops; k++) {
		const struct op *op = &p->ops[k];
		uint32_t id = op->id;

		if (op->type == OP_STORE) {
			off[id] = nfree ? freelist[--nfree] : nextoff++;
			t = tool_now();
			rc = do_store(z, in, off[id], p->item[id]);
			ts += tool_now() - t;
			where[id] = rc >= 0 ? E_ZSWAP : E_DISK;
			r->rejected += rc < 0;
			r->churn.n_store++;
		} else {
			if (where[id] == E_ZSWAP) {
				t = tool_now();
				if (op->type == OP_LOAD) {
					rc = zs_zswap_load(z, off[id], buf);
					tl += tool_now() - t;
					if (rc == ZS_ZSWAP_DISK)
						r->disk_loads++;
					if (in->ps && rc >= 0 && rc != ZS_ZSWAP_NODATA &&
					    memcmp(buf, in->ps->data + (size_t)p->item[id] * psz, psz))
						r->mismatches++;
				} else {
					zs_zswap_invalidate(z, off[id]);
					ti += tool_now() - t;
				}
			} else if (op->type == OP_LOAD) {
				r->disk_loads++;
			}
			if (op->type == OP_LOAD)
				r->churn.n_load++;
			else
				r->churn.n_inval++;
			where[id] = E_NONE;
			freelist[nfree++] = off[id];
		}
		if (o->shrinker)
			shrink_at_interval(z, p, &next_shrink, k + 1);
		record_series(z, p, r, &next_int, every, k + 1);
	}
	r->churn.store_ns = r->churn.n_store ? ts * 1e9 / (double)r->churn.n_store : 0;
	r->churn.load_ns = r->churn.n_load ? tl * 1e9 / (double)r->churn.n_load : 0;
	r->churn.inval_ns = r->churn.n_inval ? ti * 1e9 / (double)r->churn.n_inval : 0;
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->churn.st);

	r->compacted_pages = zs_zswap_compact(z);
	zs_zswap_flush(z);
	zs_zswap_get_stats(z, &r->compacted.st);

	/* Drain: load every live entry back (FILE mode checks each byte). */
	if (drain) {
		t = tool_now();
		for (size_t id = 0; id < p->nids; id++) {
			if (where[id] != E_ZSWAP)
				continue;
			rc = zs_zswap_load(z, off[id], buf);
			r->drain.n_load++;
			if (rc == ZS_ZSWAP_DISK)
				r->disk_loads++;
			if (in->ps && rc >= 0 && rc != ZS_ZSWAP_NODATA &&
			    memcmp(buf, in->ps->data + (size_t)p->item[id] * psz, psz))
				r->mismatches++;
			if (in->ps && rc < 0)
				r->mismatches++;
		}
		r->drain.load_ns = r->drain.n_load ? (tool_now() - t) * 1e9 / (double)r->drain.n_load : 0;
		zs_zswap_flush(z);
		zs_zswap_get_stats(z, &r->drain.st);
	}
	r->ok = 1;
out:
	r->wall_s = tool_now() - tw;
	zs_zswap_destroy(z);
	free(buf);
	free(off);
	free(where);
	free(freelist);
	return r->ok ? 0 : -1;
}

/* ---- The kernel's zswap (--vs-kernel) ---- */

#define KLOCK "/run/libzs-kernel-zswap.lock"
#define KPARAM "/sys/module/zswap/parameters/"
#define KDBG "/sys/kernel/debug"

struct kside {
	uint64_t stored, incompressible, pool_bytes, zero, zswpout, zswpin;
	double store_ns, load_ns;
	uint64_t mismatches, not_swapped;
	char msg[512];
};

static uint64_t kdbg(const char *name)
{
	char path[128], buf[64];
	snprintf(path, sizeof(path), KDBG "/zswap/%s", name);
	return zs_sysfs_read(path, buf, sizeof(buf)) ? 0 : strtoull(buf, NULL, 10);
}

static uint64_t kvmstat(const char *key)
{
	FILE *f = fopen("/proc/vmstat", "r");
	char k[64];
	unsigned long long v, out = 0;

	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", k, &v) == 2)
		if (!strcmp(k, key))
			out = v;
	fclose(f);
	return out;
}

static const char *const kparams[] = { "enabled", "compressor", "max_pool_percent",
				       "accept_threshold_percent", "shrinker_enabled" };
#define NKPARAMS (sizeof(kparams) / sizeof(kparams[0]))

struct ksaved {
	char val[NKPARAMS][64];
	char page_cluster[16];
	int debugfs_ours, swap_on;
	char swapfile[256];
};

static void krestore(struct ksaved *s)
{
	if (s->swap_on && swapoff(s->swapfile))
		fprintf(stderr, "zs zswap: --vs-kernel: swapoff %s: %s\n", s->swapfile, strerror(errno));
	s->swap_on = 0;
	if (s->swapfile[0])
		unlink(s->swapfile);
	/* enabled last, so that the other knobs change while it is still on or off as it was */
	for (size_t i = NKPARAMS; i-- > 0;) {
		char path[128];
		if (!s->val[i][0])
			continue;
		snprintf(path, sizeof(path), KPARAM "%s", kparams[i]);
		if (zs_sysfs_write(path, s->val[i]))
			fprintf(stderr, "zs zswap: --vs-kernel: %s not restored\n", kparams[i]);
	}
	if (s->page_cluster[0])
		zs_sysfs_write("/proc/sys/vm/page-cluster", s->page_cluster);
	if (s->debugfs_ours && umount(KDBG))
		fprintf(stderr, "zs zswap: --vs-kernel: debugfs busy, left mounted\n");
}

static uint64_t pagemap_entry(int fd, const void *addr)
{
	uint64_t e = 0;
	if (pread(fd, &e, 8, (off_t)((uintptr_t)addr / 4096 * 8)) != 8)
		return 0;
	return e;
}

/* The pages through the kernel's zswap, one page at a time.  0, or -1 with k->msg. */
static int kernel_run(const struct zs_pageset *ps, int quiet, struct kside *k)
{
	struct ksaved s;
	sigset_t block, old;
	int lock = -1, pm = -1, ret = -1;
	unsigned char *area = MAP_FAILED;
	size_t n = ps->npages, bytes = n * 4096;
	struct statfs sf;

	memset(&s, 0, sizeof(s));
	memset(k, 0, sizeof(*k));
	if (geteuid()) {
		snprintf(k->msg, sizeof(k->msg), "needs root");
		return -1;
	}
	if (access("/sys/module/zswap/parameters/enabled", W_OK)) {
		snprintf(k->msg, sizeof(k->msg), "no zswap in this kernel");
		return -1;
	}
	/* Ctrl-C waits until every setting is back (then it takes effect). */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigprocmask(SIG_BLOCK, &block, &old);
	lock = open(KLOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock < 0) {
		snprintf(k->msg, sizeof(k->msg), "%s: %s", KLOCK, strerror(errno));
		goto out;
	}
	if (flock(lock, LOCK_EX | LOCK_NB)) {
		if (!quiet)
			fprintf(stderr, "zs zswap: --vs-kernel: waiting for %s...\n", KLOCK);
		if (flock(lock, LOCK_EX)) {
			snprintf(k->msg, sizeof(k->msg), "flock: %s", strerror(errno));
			goto out;
		}
	}
	if (access("/run/libzs-zswap-capture.state", F_OK) == 0 ||
	    access("/run/libzs-kernel-zswap.state", F_OK) == 0) {
		snprintf(k->msg, sizeof(k->msg), "a killed capture or recorder left its state file "
			 "in /run; run it again to restore its settings first");
		goto out;
	}
	for (size_t i = 0; i < NKPARAMS; i++) {
		char path[128];
		snprintf(path, sizeof(path), KPARAM "%s", kparams[i]);
		if (zs_sysfs_read(path, s.val[i], sizeof(s.val[i]))) {
			snprintf(k->msg, sizeof(k->msg), "cannot read %s", path);
			goto out;
		}
	}
	zs_sysfs_read("/proc/sys/vm/page-cluster", s.page_cluster, sizeof(s.page_cluster));
	if (access(KDBG "/zswap", F_OK) && statfs(KDBG, &sf) == 0 && sf.f_type != 0x64626720) {
		if (mount("none", KDBG, "debugfs", 0, NULL)) {
			snprintf(k->msg, sizeof(k->msg), "mount debugfs: %s", strerror(errno));
			goto out;
		}
		s.debugfs_ours = 1;
	}
	snprintf(s.swapfile, sizeof(s.swapfile), "/var/tmp/libzs-zs-zswap.%d.swap", (int)getpid());
	{
		uint64_t sz = bytes + (64u << 20);
		int fd = open(s.swapfile, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		char cmd[512];
		if (fd < 0 || posix_fallocate(fd, 0, (off_t)sz)) {
			snprintf(k->msg, sizeof(k->msg), "swap file %s: %s", s.swapfile, strerror(errno));
			if (fd >= 0)
				close(fd);
			else
				s.swapfile[0] = 0; /* not ours: do not remove */
			goto restore;
		}
		close(fd);
		snprintf(cmd, sizeof(cmd), "mkswap -q '%s' >/dev/null 2>&1", s.swapfile);
		if (system(cmd)) {
			snprintf(k->msg, sizeof(k->msg), "mkswap %s failed", s.swapfile);
			goto restore;
		}
		if (swapon(s.swapfile, SWAP_FLAG_PREFER | (32767 << SWAP_FLAG_PRIO_SHIFT))) {
			snprintf(k->msg, sizeof(k->msg), "swapon: %s", strerror(errno));
			goto restore;
		}
		s.swap_on = 1;
	}
	if (zs_sysfs_write("/proc/sys/vm/page-cluster", "0") || zs_sysfs_write(KPARAM "compressor", "lzo") ||
	    zs_sysfs_write(KPARAM "max_pool_percent", "20") || zs_sysfs_write(KPARAM "shrinker_enabled", "N") ||
	    zs_sysfs_write(KPARAM "enabled", "Y")) {
		snprintf(k->msg, sizeof(k->msg), "cannot set zswap's parameters");
		goto restore;
	}
	area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (area == MAP_FAILED || pm < 0) {
		snprintf(k->msg, sizeof(k->msg), "mmap/pagemap: %s", strerror(errno));
		goto restore;
	}
	madvise(area, bytes, MADV_NOHUGEPAGE);
	memcpy(area, ps->data, bytes);
	uint64_t st0 = kdbg("stored_pages"), inc0 = kdbg("stored_incompressible_pages");
	uint64_t pool0 = kdbg("pool_total_size"), out0 = kvmstat("zswpout"),
		 in0 = kvmstat("zswpin"), zero0 = kvmstat("swpout_zero");
	double t = tool_now();
	for (size_t i = 0; i < n; i++)
		madvise(area + i * 4096, 4096, MADV_PAGEOUT);
	k->store_ns = (tool_now() - t) * 1e9 / (double)n;
	for (size_t i = 0; i < n; i++)
		k->not_swapped += !(pagemap_entry(pm, area + i * 4096) & (1ull << 62));
	k->stored = kdbg("stored_pages") - st0;
	k->incompressible = kdbg("stored_incompressible_pages") - inc0;
	k->pool_bytes = kdbg("pool_total_size") - pool0;
	k->zswpout = kvmstat("zswpout") - out0;
	k->zero = kvmstat("swpout_zero") - zero0;
	t = tool_now();
	for (size_t i = 0; i < n; i++)
		(void)*(volatile unsigned char *)(area + i * 4096);
	k->load_ns = (tool_now() - t) * 1e9 / (double)n;
	k->zswpin = kvmstat("zswpin") - in0;
	for (size_t i = 0; i < n; i++)
		k->mismatches += memcmp(area + i * 4096, ps->data + i * 4096, 4096) != 0;
	ret = 0;
restore:
	if (area != MAP_FAILED)
		munmap(area, bytes);
	if (pm >= 0)
		close(pm);
	krestore(&s);
out:
	if (lock >= 0)
		close(lock);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* ---- Output ---- */

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* A row of the JSON: the kernel's names for one state. */
static void json_state(struct json *js, const struct zs_zswap_stats *st)
{
	json_kuint(js, "stored_pages", st->stored_pages);
	json_kuint(js, "stored_incompressible_pages", st->stored_incompressible_pages);
	json_kuint(js, "pool_total_size", st->pool_total_size);
	json_kuint(js, "pool_pages", st->pool_pages);
	json_kuint(js, "Zswap_kB", st->meminfo_zswap / 1024);
	json_kuint(js, "Zswapped_kB", st->meminfo_zswapped / 1024);
	json_kfixed(js, "ratio", ratio(st->meminfo_zswapped, st->meminfo_zswap), 4);
	json_kuint(js, "zswpout", st->zswpout);
	json_kuint(js, "zswpin", st->zswpin);
	json_kuint(js, "zswpwb", st->zswpwb);
	json_kuint(js, "swpout_zero", st->swpout_zero);
	json_kuint(js, "pool_limit_hit", st->pool_limit_hit);
	json_kuint(js, "written_back_pages", st->written_back_pages);
	json_kuint(js, "reject_reclaim_fail", st->reject_reclaim_fail);
	json_kuint(js, "reject_alloc_fail", st->reject_alloc_fail);
	json_kuint(js, "reject_compress_poor", st->reject_compress_poor);
	json_kuint(js, "decompress_fail", st->decompress_fail);
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

/* ---- Parsing ---- */

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		OPT_POOL_LONGOPTS,
		{ "backends", required_argument, NULL, 'b' },
		{ "comp", required_argument, NULL, 'c' },
		{ "max", required_argument, NULL, 'm' },
		{ "max-pool-percent", required_argument, NULL, 'p' },
		{ "total-ram", required_argument, NULL, 'r' },
		{ "backing", required_argument, NULL, 'B' },
		{ "ops", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "vs-kernel", no_argument, NULL, 'k' },
		{ "shrinker", no_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static char blist[256];
	int opt, rc;
	uint64_t x;

	memset(o, 0, sizeof(*o));
	o->comp = "lzo";
	o->max_bytes = 64ull << 20;
	o->max_pool_percent = 20;
	o->seed = 1;
	o->ops = UINT64_MAX;
	pool_opts_init(&o->po);
	snprintf(blist, sizeof(blist), "zsmalloc,zblock");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		if (opt >= OPT_POOL_FIRST && opt <= OPT_POOL_LAST) {
			if (opt == OPTC_BACKEND) {
				fprintf(stderr, "zs zswap: use --backends LIST\n");
				return 2;
			}
			if (opt_pool_arg("zswap", ZSWAP_OPTS, opt, optarg, &o->po))
				return 2;
			continue;
		}
		switch (opt) {
		case 'b':
			if (strlen(optarg) >= sizeof(blist)) {
				fprintf(stderr, "zs zswap: --backends: too long\n");
				return 2;
			}
			snprintf(blist, sizeof(blist), "%s", optarg);
			break;
		case 'c': o->comp = optarg; break;
		case 'B': o->backing = optarg; break;
		case 'S': o->sizes = optarg; break;
		case 'k': o->vs_kernel = 1; break;
		case 'R': o->shrinker = 1; break;
		case 'j': o->json = 1; break;
		case 'q': o->quiet = 1; break;
		case 'm':
			if (opt_bytes("zswap", "--max", optarg, 4096, 1ull << 40, &o->max_bytes))
				return 2;
			break;
		case 'r':
			if (opt_bytes("zswap", "--total-ram", optarg, 4096, 1ull << 60, &o->total_ram))
				return 2;
			break;
		case 'p':
			if (opt_u64("zswap", "--max-pool-percent", optarg, 0, 100, &x))
				return 2;
			o->max_pool_percent = (unsigned)x;
			o->max_pool_set = 1;
			break;
		case 'o':
			if (opt_u64("zswap", "--ops", optarg, 0, 1ull << 29, &o->ops))
				return 2;
			break;
		case 's':
			if (opt_u64("zswap", "--seed", optarg, 0, UINT64_MAX, &o->seed))
				return 2;
			break;
		case 'h': usage(stdout); return 1;
		default: return opt_bad("zswap", argc, argv);
		}
	}
	for (char *save = NULL, *t = strtok_r(blist, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const char *const *kinds = zs_backend_kinds();
		int known = 0;
		for (size_t i = 0; kinds[i]; i++)
			known |= !strcmp(kinds[i], t);
		if (!known) {
			fprintf(stderr, "zs zswap: --backends: unknown backend '%s' (", t);
			for (size_t i = 0; kinds[i]; i++)
				fprintf(stderr, "%s%s", i ? ", " : "", kinds[i]);
			fprintf(stderr, ")\n");
			return 2;
		}
		if (o->nbackends == MAX_BACKENDS) {
			fprintf(stderr, "zs zswap: --backends: at most %d\n", MAX_BACKENDS);
			return 2;
		}
		o->backends[o->nbackends++] = t;
	}
	if (!o->nbackends) {
		fprintf(stderr, "zs zswap: --backends: empty\n");
		return 2;
	}
	if ((rc = zs_comp_check(o->comp))) {
		fprintf(stderr, "zs zswap: compressor '%s': %s\n", o->comp, strerror(-rc));
		return 2;
	}
	if (o->sizes && optind < argc) {
		fprintf(stderr, "zs zswap: --sizes takes no FILE or DIR\n");
		return 2;
	}
	if (!o->sizes && optind >= argc) {
		fprintf(stderr, "zs zswap: no FILE or DIR given (or --sizes CAPTURE)\n");
		usage(stderr);
		return 2;
	}
	if (o->vs_kernel && o->sizes) {
		fprintf(stderr, "zs zswap: --vs-kernel needs pages (FILE|DIR), not --sizes: the "
				"capture already has the kernel's counters\n");
		return 2;
	}
	if (o->vs_kernel && strcmp(o->comp, "lzo")) {
		fprintf(stderr, "zs zswap: --vs-kernel compares lzo (this kernel's zswap has lzo "
				"and deflate only)\n");
		return 2;
	}
	if (o->sizes && strcmp(o->comp, "lzo")) {
		fprintf(stderr, "zs zswap: --sizes: a capture holds lzo sizes; --comp must be lzo\n");
		return 2;
	}
	if (o->shrinker && !o->backing) {
		fprintf(stderr, "zs zswap: --shrinker needs --backing FILE (it writes back)\n");
		return 2;
	}
	o->quiet |= o->json;
	return 0;
}

/* ---- The two modes ---- */

static int mode_pages(const struct opts *o, char **paths, int npaths)
{
	struct zs_pageset ps;
	struct plan p;
	struct run *runs = calloc((size_t)o->nbackends, sizeof(*runs));
	struct kside k;
	int have_k = 0, ret = 0;

	if (!runs)
		return 2;
	for (int i = 0; i < npaths; i++)
		if (opt_path("zswap", "FILE", paths[i], 1)) {
			free(runs);
			return 2;
		}
	int lrc = zs_pageset_load(&ps, 4096, paths, npaths, o->max_bytes);
	if (lrc || !ps.npages) {
		fprintf(stderr, "zs zswap: no pages loaded (%s)\n", lrc ? strerror(-lrc) : "empty");
		if (!lrc)
			zs_pageset_free(&ps);
		free(runs);
		return 2;
	}
	uint64_t ops = o->ops == UINT64_MAX ? 2 * (uint64_t)ps.npages : o->ops;
	if (plan_synthetic(&p, ps.npages, ops, o->seed)) {
		fprintf(stderr, "zs zswap: out of memory\n");
		zs_pageset_free(&ps);
		free(runs);
		return 2;
	}
	struct input in = { &ps, NULL, ps.npages };
	for (int b = 0; b < o->nbackends; b++) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: %s...\n", o->backends[b]);
		if (run_plan(o, o->backends[b], &p, &in, o->total_ram, o->max_pool_percent, 1,
			     &runs[b])) {
			fprintf(stderr, "zs zswap: backend %s: %s\n", o->backends[b], runs[b].err);
			ret = 2;
		} else if (runs[b].mismatches) {
			ret = 1;
		}
	}
	if (o->vs_kernel) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: the kernel's zswap (lzo), one page at a time...\n");
		if (kernel_run(&ps, o->quiet, &k)) {
			fprintf(stderr, "zs zswap: --vs-kernel: %s\n", k.msg);
			ret = 2;
		} else {
			have_k = 1;
			if (k.mismatches)
				ret = 1;
		}
	}
	struct zs_zswap_stats kst;
	memset(&kst, 0, sizeof(kst));
	if (have_k) {
		kst.stored_pages = k.stored;
		kst.stored_incompressible_pages = k.incompressible;
		kst.pool_total_size = k.pool_bytes;
		kst.pool_pages = k.pool_bytes / 4096;
		kst.meminfo_zswap = k.pool_bytes;
		kst.meminfo_zswapped = k.stored * 4096;
		kst.zswpout = k.zswpout;
		kst.zswpin = k.zswpin;
		kst.swpout_zero = k.zero;
	}
	if (o->json) {
		struct json js;
		json_init(&js, stdout, 2);
		json_obj(&js);
		json_kstr(&js, "mode", "pages");
		json_kuint(&js, "pages", ps.npages);
		json_kuint(&js, "files", ps.files);
		json_kstr(&js, "comp", o->comp);
		json_kuint(&js, "seed", o->seed);
		json_kuint(&js, "churn_ops", p.nops);
		json_karr(&js, "rows");
		if (have_k) {
			json_obj(&js);
			json_kstr(&js, "backend", "kernel");
			json_state(&js, &kst);
			json_kfixed(&js, "store_ns", k.store_ns, 1);
			json_kfixed(&js, "load_ns", k.load_ns, 1);
			json_kuint(&js, "not_swapped", k.not_swapped);
			json_kuint(&js, "mismatches", k.mismatches);
			json_obj_end(&js);
		}
		for (int b = 0; b < o->nbackends; b++)
			if (runs[b].ok)
				json_run(&js, &runs[b], 1);
		json_arr_end(&js);
		json_obj_end(&js);
		json_done(&js);
	} else {
		struct col cols[MAX_BACKENDS + 1] = { { 0 } };
		int nc = 0;
		printf("zs zswap: %zu pages (%.1f MiB) from %zu files; comp %s; churn %zu ops "
		       "(%" PRIu64 " stores, %" PRIu64 " loads, %" PRIu64 " invalidates, seed %" PRIu64
		       ")%s%s\n\n",
		       ps.npages, (double)ps.npages * 4096 / 1048576.0, ps.files, o->comp, p.nops,
		       p.stores, p.loads, p.invals, o->seed, o->backing ? "; writeback to " : "",
		       o->backing ? o->backing : "");
		text_header(have_k ? "kernel" : NULL, runs, o->nbackends);
		if (have_k)
			cols[nc++] = (struct col){ "kernel", &kst, k.store_ns, k.load_ns, 1 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ runs[b].backend, runs[b].ok ? &runs[b].fill.st : NULL,
						   runs[b].fill.store_ns, runs[b].drain.load_ns,
						   runs[b].ok };
		text_state("after the fill (load ns/page: the drain at the end)", cols, nc);
		nc = 0;
		if (have_k)
			cols[nc++] = (struct col){ "kernel", NULL, 0, 0, 0 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ runs[b].backend, runs[b].ok ? &runs[b].churn.st : NULL,
						   runs[b].churn.store_ns, runs[b].churn.load_ns,
						   runs[b].ok };
		text_state("after the churn", cols, nc);
		nc = 0;
		if (have_k)
			cols[nc++] = (struct col){ "kernel", NULL, 0, 0, 0 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ runs[b].backend,
						   runs[b].ok ? &runs[b].compacted.st : NULL, 0, 0, 0 };
		text_state("after compaction", cols, nc);
		for (int b = 0; b < o->nbackends; b++)
			if (runs[b].ok)
				printf("%s: %" PRIu64 " mismatches; %" PRIu64 " stores rejected, %" PRIu64
				       " loads from disk; %.2f s\n",
				       runs[b].backend, runs[b].mismatches, runs[b].rejected,
				       runs[b].disk_loads, runs[b].wall_s);
		if (have_k) {
			printf("kernel: %" PRIu64 " zero pages (zeromap), %" PRIu64
			       " pages not swapped out, %" PRIu64 " mismatches\n",
			       k.zero, k.not_swapped, k.mismatches);
			for (int b = 0; b < o->nbackends; b++)
				if (runs[b].ok)
					printf("pool pages: %s %" PRIu64 " vs kernel %" PRIu64 " (%+.2f%%)\n",
					       runs[b].backend, runs[b].fill.st.pool_pages, kst.pool_pages,
					       100.0 * ((double)runs[b].fill.st.pool_pages -
							(double)kst.pool_pages) /
						       (double)(kst.pool_pages ? kst.pool_pages : 1));
		}
	}
	plan_free(&p);
	zs_pageset_free(&ps);
	free(runs);
	return ret;
}

static void kernel_state(const struct capture *c, const char *sec, struct zs_zswap_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->stored_pages = cap_u64(c, sec, "stored_pages");
	st->stored_incompressible_pages = cap_u64(c, sec, "stored_incompressible_pages");
	st->pool_total_size = cap_u64(c, sec, "pool_total_size");
	st->pool_pages = st->pool_total_size / 4096;
	st->meminfo_zswap = st->pool_total_size;
	st->meminfo_zswapped = st->stored_pages * 4096;
	st->zswpout = cap_u64(c, sec, "zswpout") - cap_u64(c, "start", "zswpout");
	st->zswpin = cap_u64(c, sec, "zswpin") - cap_u64(c, "start", "zswpin");
	st->swpout_zero = cap_u64(c, sec, "swpout_zero") - cap_u64(c, "start", "swpout_zero");
	st->pool_limit_hit = cap_u64(c, sec, "pool_limit_hit") - cap_u64(c, "start", "pool_limit_hit");
	st->written_back_pages =
		cap_u64(c, sec, "written_back_pages") - cap_u64(c, "start", "written_back_pages");
}

static int mode_sizes(const struct opts *o)
{
	struct capture c;
	struct plan fresh, churn;
	struct run *fr = calloc((size_t)o->nbackends, sizeof(*fr));
	struct run *cr = calloc((size_t)o->nbackends, sizeof(*cr));
	int ret = 0, sampled;

	if (!fr || !cr || capture_read(o->sizes, &c)) {
		free(fr);
		free(cr);
		return 2;
	}
	uint64_t tr_pages = strtoull(cap_str(&c, "totalram_pages"), NULL, 10);
	double v;
	uint64_t total_ram = o->total_ram ? o->total_ram : tr_pages * 4096;
	unsigned max_pool = o->max_pool_percent;
	if (!o->max_pool_set && strcmp(cap_str(&c, "max_pool_percent"), "?"))
		max_pool = (unsigned)strtoul(cap_str(&c, "max_pool_percent"), NULL, 10);
	/* Fresh: every captured size once, in swap-offset order. */
	memset(&fresh, 0, sizeof(fresh));
	sampled = c.ns >= 2 && o->ops == UINT64_MAX;
	int prc = plan_synthetic(&fresh, c.n, 0, o->seed);
	if (!prc)
		prc = sampled ? plan_samples(&churn, &c, o->seed)
			      : plan_synthetic(&churn, c.n, o->ops == UINT64_MAX ? 2 * c.n : o->ops,
					       o->seed);
	if (prc) {
		fprintf(stderr, "zs zswap: out of memory\n");
		capture_free(&c);
		free(fr);
		free(cr);
		return 2;
	}
	struct input in = { NULL, c.sizes, c.n };
	for (int b = 0; b < o->nbackends; b++) {
		if (!o->quiet)
			fprintf(stderr, "zs zswap: %s: fresh fill, then the churn (%zu ops)...\n",
				o->backends[b], churn.nops + churn.nfill);
		if (run_plan(o, o->backends[b], &fresh, &in, total_ram, max_pool, 1, &fr[b]) ||
		    run_plan(o, o->backends[b], &churn, &in, total_ram, max_pool, 0, &cr[b])) {
			fprintf(stderr, "zs zswap: backend %s: %s%s\n", o->backends[b], fr[b].err,
				cr[b].err);
			ret = 2;
		}
	}
	struct zs_zswap_stats kf, kc;
	int have_kc = cap_num(&c, "compacted", "pool_total_size", &v);
	kernel_state(&c, "freeze", &kf);
	kernel_state(&c, have_kc ? "compacted" : "freeze", &kc);
	double kt = 0;
	cap_num(&c, "freeze", "t_s", &kt);
	uint64_t resid = cap_u64(&c, "after_read", "stored_pages");
	uint64_t resid_pool = cap_u64(&c, cap_num(&c, "residual_compacted", "pool_total_size", &v)
					      ? "residual_compacted" : "after_read", "pool_total_size");

	if (o->json) {
		struct json js;
		json_init(&js, stdout, 2);
		json_obj(&js);
		json_kstr(&js, "mode", "sizes");
		json_kstr(&js, "capture", o->sizes);
		json_kstr(&js, "kernel_version", cap_str(&c, "kernel"));
		json_kstr(&js, "workload", strcmp(cap_str(&c, "workload"), "?") ? cap_str(&c, "workload")
									    : cap_str(&c, "command"));
		json_kuint(&js, "pages", c.n);
		json_kuint(&js, "totalram_pages", total_ram / 4096);
		json_kuint(&js, "max_pool_percent", max_pool);
		json_kbool(&js, "sampled_churn", sampled);
		json_kuint(&js, "churn_ops", churn.nops);
		json_kuint(&js, "churn_survivors", churn.survivors);
		json_kuint(&js, "churn_captured_live", churn.matched);
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
		for (size_t i = 0; i < c.ns; i++) {
			json_arr(&js);
			json_fixed(&js, c.st[i], 1);
			json_uint(&js, c.sv[i][1]);
			json_uint(&js, c.sv[i][0]);
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
		struct col cols[MAX_BACKENDS + 1] = { { 0 } };
		int nc = 0;
		printf("zs zswap --sizes %s: %zu entries (%s, kernel %s)\n", o->sizes, c.n,
		       strcmp(cap_str(&c, "workload"), "?") ? cap_str(&c, "workload")
							  : cap_str(&c, "command"),
		       cap_str(&c, "kernel"));
		printf("churn: %s, %zu ops (%" PRIu64 " stores, %" PRIu64 " loads, %" PRIu64
		       " invalidates), %zu entries live at the end, %zu of them the captured ones\n\n",
		       sampled ? "the capture's samples" : "synthetic", churn.nops, churn.stores,
		       churn.loads, churn.invals, churn.survivors, churn.matched);
		text_header("kernel", fr, o->nbackends);
		cols[nc++] = (struct col){ "kernel", &kc, 0, 0, 0 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ fr[b].backend, fr[b].ok ? &fr[b].fill.st : NULL,
						   fr[b].fill.store_ns, fr[b].drain.load_ns, fr[b].ok };
		text_state(have_kc ? "fresh fill (kernel: its pool after its own compaction)"
				   : "fresh fill (kernel: at the freeze, not compacted)",
			   cols, nc);
		nc = 0;
		cols[nc++] = (struct col){ "kernel", &kf, 0, 0, 0 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ cr[b].backend, cr[b].ok ? &cr[b].churn.st : NULL,
						   cr[b].churn.store_ns, cr[b].churn.load_ns, cr[b].ok };
		text_state("after the churn (kernel: at the freeze)", cols, nc);
		nc = 0;
		cols[nc++] = (struct col){ "kernel", have_kc ? &kc : NULL, 0, 0, 0 };
		for (int b = 0; b < o->nbackends; b++)
			cols[nc++] = (struct col){ cr[b].backend, cr[b].ok ? &cr[b].compacted.st : NULL,
						   0, 0, 0 };
		text_state("after compaction", cols, nc);
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
	plan_free(&fresh);
	plan_free(&churn);
	capture_free(&c);
	free(fr);
	free(cr);
	return ret;
}

int cmd_zswap(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	return o.sizes ? mode_sizes(&o) : mode_pages(&o, argv + optind, argc - optind);
}
