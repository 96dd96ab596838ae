/*
 * Reads traces for `zs replay`: plain or xz (by magic, so a renamed or piped
 * trace still works), the '#' header, a zram-trace's w/d/c/= records and a
 * zswap-trace's s/l/i/c/= records.  All the formats' rules and limits live
 * here, so the replay trusts what it gets and a malformed trace is reported
 * by line before anything is replayed from it.
 */
#include <errno.h>
#include <lzma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "zs/pages.h"
#include "zs/zsmalloc.h"

#define MAX_SLOT (1UL << 26)

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

/* Print an error; arg is trace text, shown printable and at most 80 characters. */
int trace_fail(long line, const char *fmt, const char *arg)
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

int trace_parse_long(const char *s, long lo, long hi, long *out)
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

/* --store prepass: the largest slot a 'w' or 'd' names (the store needs a disksize). */
long trace_max_slot(const char *path)
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

struct trace {
	struct reader rd;
	const char *path;
	char *line;
	size_t cap;
	long lineno;
	int in_body; /* an operation was returned: the header is closed */
	struct trace_header h;
};

struct trace *trace_new(void)
{
	return malloc(sizeof(struct trace));
}

int trace_open(struct trace *t, const char *path)
{
	int ret = rd_open(&t->rd, path);
	t->path = path;
	t->line = NULL;
	t->cap = 0;
	t->lineno = 0;
	t->in_body = 0;
	memset(&t->h, 0, sizeof(t->h));
	t->h.page_size = ZS_PAGE_SIZE_DEFAULT;
	t->h.chain = -1;
	t->h.max_pool_percent = -1;
	strcpy(t->h.comp, "?");
	strcpy(t->h.kernel, "?");
	return ret;
}

void trace_free(struct trace *t)
{
	if (!t)
		return;
	rd_close(&t->rd);
	free(t->line);
	free(t);
}

long trace_lineno(const struct trace *t)
{
	return t->lineno;
}

const struct trace_header *trace_hdr(const struct trace *t)
{
	return &t->h;
}

int trace_next(struct trace *t, const char **sp)
{
	long n;
	while ((n = rd_line(&t->rd, &t->line, &t->cap)) >= 0) {
		t->lineno++;
		char *s = t->line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			continue;
		if (*s == '#') {
			char key[32], val[160];
			if (t->in_body) /* late comment lines are ignored */
				continue;
			if (sscanf(s, "# %31s %159[^\n]", key, val) != 2)
				continue;
			if (!strcmp(key, "zram-trace") || !strcmp(key, "zswap-trace")) {
				if (strcmp(val, "1")) {
					trace_fail(t->lineno, "unsupported trace version '%s'", val);
					return -1;
				}
				enum trace_kind k = key[1] == 's' ? TRACE_ZSWAP : TRACE_ZRAM;
				if (t->h.seen_magic && t->h.kind != k) {
					trace_fail(t->lineno, "'%s': the header already named the other "
						   "trace format", s);
					return -1;
				}
				t->h.seen_magic = 1;
				t->h.kind = k;
			} else if (!strcmp(key, "max_pool_percent")) {
				if (trace_parse_long(val, 0, 100, &t->h.max_pool_percent)) {
					trace_fail(t->lineno, "bad max_pool_percent '%s' (0..100)", val);
					return -1;
				}
			} else if (!strcmp(key, "totalram_pages")) {
				long v;
				if (trace_parse_long(val, 1, 1L << 48, &v)) {
					trace_fail(t->lineno, "bad totalram_pages '%s' (1..2^48)", val);
					return -1;
				}
				t->h.totalram_pages = (uint64_t)v;
			} else if (!strcmp(key, "mode")) {
				if (strcmp(val, "ops") && strcmp(val, "fill")) {
					trace_fail(t->lineno, "bad mode '%s' (ops or fill)", val);
					return -1;
				}
				t->h.fill_mode = !strcmp(val, "fill");
			} else if (!strcmp(key, "page_size")) {
				if (trace_parse_long(val, (long)ZS_PAGE_SIZE_MIN, (long)ZS_PAGE_SIZE_MAX,
						     &t->h.page_size) ||
				    !zs_page_size_valid((size_t)t->h.page_size)) {
					trace_fail(t->lineno, "bad page_size '%s' (power of two, 4096..65536)", val);
					return -1;
				}
			} else if (!strcmp(key, "chain_size")) {
				if (strcmp(val, "?") && trace_parse_long(val, 1, ZS_MAX_CHAIN, &t->h.chain)) {
					trace_fail(t->lineno, "bad chain_size '%s'", val);
					return -1;
				}
			} else if (!strcmp(key, "comp")) {
				snprintf(t->h.comp, sizeof(t->h.comp), "%.31s", val);
			} else if (!strcmp(key, "kernel")) {
				snprintf(t->h.kernel, sizeof(t->h.kernel), "%.63s", val);
			} else if (!strcmp(key, "data")) {
				snprintf(t->h.data, sizeof(t->h.data), "%s", val);
			}
			continue;
		}
		t->in_body = 1;
		*sp = s;
		return 1;
	}
	if (n == -2) {
		fprintf(stderr, "zs replay: %s: line %ld: %s\n", t->path, t->lineno + 1,
			t->rd.err ? t->rd.err : "read error");
		return -1;
	}
	return 0;
}

int trace_parse(struct trace *t, const char *s, struct trace_rec *r)
{
	long lineno = t->lineno;
	uint64_t page_size = (uint64_t)t->h.page_size;
	r->op = s[0];
	if (*s == '=') {
		const char *rest;
		if (parse_fields(s + 1, r->exp, TRACE_NF, &rest) != TRACE_NF || *rest) {
			trace_fail(lineno, "bad '=' record: '%s'", s);
			return -1;
		}
		return 0;
	}
	if (*s == 'k') {
		/* k CLASS OBJ_ALLOCATED OBJ_USED PAGES_USED: one row of the kernel's class table */
		uint64_t kv[4];
		const char *rest;
		if ((s[1] != ' ' && s[1] != '\t') || parse_fields(s + 1, kv, 4, &rest) != 4 || *rest ||
		    kv[0] >= TRACE_MAX_CLASS) {
			trace_fail(lineno, "bad class line '%s' (want: k CLASS OBJ_ALLOCATED OBJ_USED "
					   "PAGES_USED)", s);
			return -1;
		}
		r->slot = kv[0];
		memcpy(r->exp, kv + 1, 3 * sizeof(kv[0]));
		return 0;
	}
	uint64_t v[2];
	const char *rest;
	int k = parse_fields(s + 1, v, 2, &rest);
	if (s[1] && s[1] != ' ' && s[1] != '\t')
		k = -1;
	if (s[0] == 'w') {
		if (k != 2 || !rest[0] || rest[1] || !strchr("nsh", rest[0])) {
			trace_fail(lineno, "bad write '%s' (want: w SLOT SIZE n|s|h)", s);
			return -1;
		}
		char flag = rest[0];
		if (v[0] >= MAX_SLOT) {
			trace_fail(lineno, "slot number too large in '%s'", s);
			return -1;
		}
		if ((flag == 'n' && (v[1] == 0 || v[1] > page_size)) ||
		    (flag == 's' && v[1] != 0) || (flag == 'h' && v[1] > page_size)) {
			trace_fail(lineno, "size out of range in '%s'", s);
			return -1;
		}
		r->slot = v[0];
		r->size = v[1];
		r->flag = flag;
	} else if (s[0] == 'd') {
		if (k != 1 || *rest) {
			trace_fail(lineno, "bad discard '%s' (want: d SLOT)", s);
			return -1;
		}
		if (v[0] >= MAX_SLOT) {
			trace_fail(lineno, "slot number too large in '%s'", s);
			return -1;
		}
		r->slot = v[0];
	} else if (s[0] == 'c') {
		if (k != 0 || *rest) {
			trace_fail(lineno, "bad compaction line '%s' (want: c)", s);
			return -1;
		}
	} else {
		trace_fail(lineno, "unknown record '%s'", s);
		return -1;
	}
	return 0;
}

int trace_parse_zswap(struct trace *t, const char *s, struct trace_zswap_rec *r)
{
	long lineno = t->lineno;
	uint64_t page_size = (uint64_t)t->h.page_size;
	const char *rest;
	r->op = s[0];
	if (*s == '=') {
		if (parse_fields(s + 1, r->exp, TRACE_ZSWAP_NF, &rest) != TRACE_ZSWAP_NF || *rest) {
			trace_fail(lineno, "bad '=' record: '%s' (want: = POOL_PAGES STORED_PAGES "
				   "INCOMPRESSIBLE_PAGES ZSWPOUT ZSWPIN)", s);
			return -1;
		}
		return 0;
	}
	uint64_t v[2];
	int k = parse_fields(s + 1, v, 2, &rest);
	if (s[1] && s[1] != ' ' && s[1] != '\t')
		k = -1;
	if (s[0] == 's') {
		if (k != 2 || !rest[0] || rest[1] || !strchr("nhz", rest[0])) {
			trace_fail(lineno, "bad store '%s' (want: s OFFSET SIZE n|h|z)", s);
			return -1;
		}
		char flag = rest[0];
		/* zswap keeps a compressed page only when it is smaller than a page; a
		 * zero page never reaches it (the swap layer's zeromap) */
		if ((flag == 'n' && (v[1] == 0 || v[1] >= page_size)) ||
		    (flag == 'h' && v[1] != page_size) || (flag == 'z' && v[1] != 0)) {
			trace_fail(lineno, "size out of range in '%s' (n: 1..page_size-1, h: "
				   "page_size, z: 0)", s);
			return -1;
		}
		r->size = v[1];
		r->flag = flag;
	} else if (s[0] == 'l' || s[0] == 'i') {
		if (k != 1 || *rest) {
			trace_fail(lineno, s[0] == 'l' ? "bad load '%s' (want: l OFFSET)"
						       : "bad invalidate '%s' (want: i OFFSET)", s);
			return -1;
		}
	} else if (s[0] == 'c') {
		if (k != 0 || *rest) {
			trace_fail(lineno, "bad compaction line '%s' (want: c)", s);
			return -1;
		}
		return 0;
	} else {
		trace_fail(lineno, "unknown zswap-trace record '%s'", s);
		return -1;
	}
	if (v[0] >= TRACE_ZSWAP_MAX_OFFSET) {
		trace_fail(lineno, "offset too large in '%s' (below 2^40)", s);
		return -1;
	}
	r->offset = v[0];
	return 0;
}
