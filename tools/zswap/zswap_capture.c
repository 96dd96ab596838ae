/*
 * `zs zswap --sizes`: reading a capture of scripts/zswap_capture.sh (plain or
 * .xz) and the kernel's counters in it.  Kept apart from the workload and the
 * output because it is the one place that knows the capture's text format:
 * a change to the script's header lines changes this file only.
 */
#include <errno.h>
#include <inttypes.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zswap_cmd.h"

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

void capture_free(struct capture *c)
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
int capture_read(const char *path, struct capture *c)
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
int cap_num(const struct capture *c, const char *sec, const char *key, double *v)
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

uint64_t cap_u64(const struct capture *c, const char *sec, const char *key)
{
	double v;
	return cap_num(c, sec, key, &v) && v > 0 ? (uint64_t)(v + 0.5) : 0;
}

/* "# KEY TEXT": the text, or "?". */
const char *cap_str(const struct capture *c, const char *key)
{
	size_t lk = strlen(key);
	for (size_t i = 0; i < c->nhdr; i++)
		if (!strncmp(c->hdr[i], key, lk) && c->hdr[i][lk] == ' ')
			return c->hdr[i] + lk + 1;
	return "?";
}

void capture_kernel_state(const struct capture *c, const char *sec, struct zs_zswap_stats *st)
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
