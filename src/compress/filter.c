/*
 * Filters for typed data: byte shuffle and delta over N-byte elements, run
 * on a page before it is compressed and undone after it is decompressed.
 *
 * Why in the compressor layer and not in the zram store: a filter changes
 * only the bytes a compressor sees, so it belongs to the context
 * (struct zs_comp) that turns a page into an object and back.  Every path
 * that makes or reads an object goes through zs_compress / zs_decompress /
 * zs_decompress_sg on a context -- the store's write, read, writeback
 * read-back (writeback_compressed objects included), recompression with the
 * secondary, the group store, zs_zram_store_decide and the tools -- so none
 * of them can forget to unfilter, and an object decoded by the context that
 * made it is always the page.  The store's own decisions stay on the raw
 * page because it makes them outside the context: same-filled detection
 * runs before compression, and a page that does not compress below the
 * huge size is stored raw (unfiltered) and read back with a copy.
 *
 * Formats (N = 2, 4 or 8; the page is cnt = len / N elements and a tail of
 * len % N bytes that every filter copies unchanged):
 *   shuffle:N        byte j of element i goes to j * cnt + i (blosc's
 *                    shuffle): the high bytes of small integers become long
 *                    runs of zeros;
 *   delta:N          element i becomes x[i] - x[i-1] (x[-1] = 0), as
 *                    little-endian N-byte unsigned integers, wrapping:
 *                    sorted and slowly varying values become small ones;
 *   delta+shuffle:N  delta, then shuffle of the differences (one pass).
 * The loops are plain C with N a constant in each instance, so the
 * compiler unrolls and (where it can) vectorizes them; their cost per page
 * beside the compressor's is in docs/zram.md ("Filters").
 */
#include "compress/filter.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int comp_filter_parse(const char *spec, struct comp_filter *f)
{
	static const struct {
		const char *name;
		enum comp_filter_kind kind;
	} kinds[] = {
		{ "shuffle:", FILTER_SHUFFLE },
		{ "delta:", FILTER_DELTA },
		{ "delta+shuffle:", FILTER_DELTA_SHUFFLE },
	};

	f->kind = FILTER_NONE;
	f->n = 0;
	if (!spec || !spec[0] || !strcmp(spec, "none"))
		return 0;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t l = strlen(kinds[i].name);

		if (strncmp(spec, kinds[i].name, l))
			continue;
		/* Exactly one digit, 2, 4 or 8: "shuffle:04", "shuffle:4x" are refused. */
		if ((spec[l] != '2' && spec[l] != '4' && spec[l] != '8') || spec[l + 1])
			return -EINVAL;
		f->kind = kinds[i].kind;
		f->n = (unsigned)(spec[l] - '0');
		return 0;
	}
	return -EINVAL;
}

/* Element loads and stores as little-endian integers, whatever the host's order. */
static inline uint64_t ld_le(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned j = 0; j < n; j++)
		v |= (uint64_t)p[j] << (8 * j);
	return v;
}

static inline void st_le(unsigned char *p, uint64_t v, unsigned n)
{
	for (unsigned j = 0; j < n; j++)
		p[j] = (unsigned char)(v >> (8 * j));
}

static inline void shuffle_n(unsigned char *restrict d, const unsigned char *restrict s,
			     size_t cnt, unsigned n)
{
	for (unsigned j = 0; j < n; j++)
		for (size_t i = 0; i < cnt; i++)
			d[j * cnt + i] = s[i * n + j];
}

static inline void unshuffle_n(unsigned char *restrict d, const unsigned char *restrict s,
			       size_t cnt, unsigned n)
{
	for (unsigned j = 0; j < n; j++)
		for (size_t i = 0; i < cnt; i++)
			d[i * n + j] = s[j * cnt + i];
}

static inline void delta_n(unsigned char *restrict d, const unsigned char *restrict s, size_t cnt,
			   unsigned n, int shuf)
{
	uint64_t mask = n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1, prev = 0;

	for (size_t i = 0; i < cnt; i++) {
		uint64_t x = ld_le(s + i * n, n), v = (x - prev) & mask;

		prev = x;
		if (!shuf) {
			st_le(d + i * n, v, n);
			continue;
		}
		for (unsigned j = 0; j < n; j++)
			d[j * cnt + i] = (unsigned char)(v >> (8 * j));
	}
}

static inline void undelta_n(unsigned char *restrict d, const unsigned char *restrict s,
			     size_t cnt, unsigned n, int shuf)
{
	uint64_t mask = n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1, prev = 0;

	for (size_t i = 0; i < cnt; i++) {
		uint64_t v = 0;

		if (shuf) {
			for (unsigned j = 0; j < n; j++)
				v |= (uint64_t)s[j * cnt + i] << (8 * j);
		} else {
			v = ld_le(s + i * n, n);
		}
		prev = (prev + v) & mask;
		st_le(d + i * n, prev, n);
	}
}

/* One instance per (kind, N): the switch hands the loops a constant element size. */
#define DISPATCH(fn, ...)                       \
	switch (f->n) {                         \
	case 2: fn(__VA_ARGS__, 2); break;      \
	case 4: fn(__VA_ARGS__, 4); break;      \
	default: fn(__VA_ARGS__, 8); break;     \
	}

static inline void shuffle_k(unsigned char *d, const unsigned char *s, size_t cnt, int inv,
			     unsigned n)
{
	if (inv)
		unshuffle_n(d, s, cnt, n);
	else
		shuffle_n(d, s, cnt, n);
}

static inline void delta_k(unsigned char *d, const unsigned char *s, size_t cnt, int inv, int shuf,
			   unsigned n)
{
	if (inv)
		undelta_n(d, s, cnt, n, shuf);
	else
		delta_n(d, s, cnt, n, shuf);
}

static void run(const struct comp_filter *f, unsigned char *d, const unsigned char *s, size_t len,
		int inv)
{
	size_t cnt = len / f->n, body = cnt * f->n;

	switch (f->kind) {
	case FILTER_NONE:
		memcpy(d, s, len);
		return;
	case FILTER_SHUFFLE:
		DISPATCH(shuffle_k, d, s, cnt, inv);
		break;
	case FILTER_DELTA:
		DISPATCH(delta_k, d, s, cnt, inv, 0);
		break;
	case FILTER_DELTA_SHUFFLE:
		DISPATCH(delta_k, d, s, cnt, inv, 1);
		break;
	}
	memcpy(d + body, s + body, len - body);
}

void comp_filter_apply(const struct comp_filter *f, void *dst, const void *src, size_t len)
{
	run(f, dst, src, len, 0);
}

void comp_filter_undo(const struct comp_filter *f, void *dst, const void *src, size_t len)
{
	run(f, dst, src, len, 1);
}

const char *comp_filter_kind_name(enum comp_filter_kind k)
{
	switch (k) {
	case FILTER_SHUFFLE:
		return "shuffle";
	case FILTER_DELTA:
		return "delta";
	case FILTER_DELTA_SHUFFLE:
		return "delta+shuffle";
	default:
		return "none";
	}
}
