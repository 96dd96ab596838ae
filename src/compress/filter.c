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
 * The plain C loops (N a constant in each instance) are the reference and
 * the fallback.  On x86-64 blocks of 16 elements go through SSE2 (baseline
 * there, so no dispatch): the compilers do not vectorize a byte transpose
 * (callgrind: ~2.7 instructions a byte for the unshuffle at -O3, a third
 * of a zstd page decode).  A shuffle of 16 elements is log2(N) rounds of
 * "split a run of bytes into its even and odd bytes" (mask or shift, then
 * pack): after round r the bytes are grouped by bit r of their index in the
 * element, which is the shuffle's order; the unshuffle runs the rounds
 * backwards with byte unpacks.  Delta works on each block in a small stack
 * buffer before the shuffle (after the unshuffle when undone).  Their cost
 * per page beside the compressor's is in docs/zram.md ("Filters").
 */
#include "compress/filter.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ZS_FILTER_SCALAR: build the plain loops only (as on a machine without SSE2). */
#if defined(__SSE2__) && !defined(ZS_FILTER_SCALAR)
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint16_t a;
	uint32_t b;
	uint64_t c;

	switch (n) {
	case 2: memcpy(&a, p, 2); return a;
	case 4: memcpy(&b, p, 4); return b;
	default: memcpy(&c, p, 8); return c;
	}
#else
	uint64_t v = 0;

	for (unsigned j = 0; j < n; j++)
		v |= (uint64_t)p[j] << (8 * j);
	return v;
#endif
}

static inline void st_le(unsigned char *p, uint64_t v, unsigned n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint16_t a = (uint16_t)v;
	uint32_t b = (uint32_t)v;

	switch (n) {
	case 2: memcpy(p, &a, 2); break;
	case 4: memcpy(p, &b, 4); break;
	default: memcpy(p, &v, 8); break;
	}
#else
	for (unsigned j = 0; j < n; j++)
		p[j] = (unsigned char)(v >> (8 * j));
#endif
}

/* Unused where the SSE2 blocks replace them. */
__attribute__((unused)) static inline void shuffle_n(unsigned char *restrict d, const unsigned char *restrict s,
			     size_t cnt, unsigned n)
{
	for (unsigned j = 0; j < n; j++)
		for (size_t i = 0; i < cnt; i++)
			d[j * cnt + i] = s[i * n + j];
}

__attribute__((unused)) static inline void unshuffle_n(unsigned char *restrict d, const unsigned char *restrict s,
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

#ifdef HAVE_SSE2
/* One round's halves: the even and the odd bytes of 32 (a then b), 16 each, in order. */
static inline __m128i ev(__m128i a, __m128i b)
{
	const __m128i lo = _mm_set1_epi16(0x00ff);

	return _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo));
}

static inline __m128i od(__m128i a, __m128i b)
{
	return _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
}

#define LD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))

/* 16 elements of n bytes at s -> byte j of each to d + j * cnt (round r splits on bit r of
 * the byte's index in its element, so stream j is the leaf reached by j's bits). */
static inline void shuffle_block(unsigned char *d, const unsigned char *s, size_t cnt, unsigned n)
{
	if (n == 2) {
		__m128i v0 = LD(s), v1 = LD(s + 16);

		ST(d, ev(v0, v1));
		ST(d + cnt, od(v0, v1));
	} else if (n == 4) {
		__m128i v0 = LD(s), v1 = LD(s + 16), v2 = LD(s + 32), v3 = LD(s + 48);
		__m128i e0 = ev(v0, v1), e1 = ev(v2, v3), o0 = od(v0, v1), o1 = od(v2, v3);

		ST(d, ev(e0, e1));
		ST(d + 2 * cnt, od(e0, e1));
		ST(d + cnt, ev(o0, o1));
		ST(d + 3 * cnt, od(o0, o1));
	} else {
		__m128i v[8], e[4], o[4];

		for (int k = 0; k < 8; k++)
			v[k] = LD(s + 16 * k);
		for (int k = 0; k < 4; k++) {
			e[k] = ev(v[2 * k], v[2 * k + 1]);
			o[k] = od(v[2 * k], v[2 * k + 1]);
		}
		__m128i ee0 = ev(e[0], e[1]), ee1 = ev(e[2], e[3]), eo0 = od(e[0], e[1]),
			eo1 = od(e[2], e[3]), oe0 = ev(o[0], o[1]), oe1 = ev(o[2], o[3]),
			oo0 = od(o[0], o[1]), oo1 = od(o[2], o[3]);

		ST(d, ev(ee0, ee1));
		ST(d + 4 * cnt, od(ee0, ee1));
		ST(d + 2 * cnt, ev(eo0, eo1));
		ST(d + 6 * cnt, od(eo0, eo1));
		ST(d + cnt, ev(oe0, oe1));
		ST(d + 5 * cnt, od(oe0, oe1));
		ST(d + 3 * cnt, ev(oo0, oo1));
		ST(d + 7 * cnt, od(oo0, oo1));
	}
}

/* The inverse, the rounds backwards: byte unpacks merge the even and odd halves again. */
static inline void unshuffle_block(unsigned char *d, const unsigned char *s, size_t cnt,
				   unsigned n)
{
#define LO(a, b) _mm_unpacklo_epi8(a, b)
#define HI(a, b) _mm_unpackhi_epi8(a, b)
	if (n == 2) {
		__m128i b0 = LD(s), b1 = LD(s + cnt);

		ST(d, LO(b0, b1));
		ST(d + 16, HI(b0, b1));
	} else if (n == 4) {
		__m128i b0 = LD(s), b1 = LD(s + cnt), b2 = LD(s + 2 * cnt), b3 = LD(s + 3 * cnt);
		__m128i e0 = LO(b0, b2), e1 = HI(b0, b2), o0 = LO(b1, b3), o1 = HI(b1, b3);

		ST(d, LO(e0, o0));
		ST(d + 16, HI(e0, o0));
		ST(d + 32, LO(e1, o1));
		ST(d + 48, HI(e1, o1));
	} else {
		__m128i b[8], e[4], o[4];

		for (int j = 0; j < 8; j++)
			b[j] = LD(s + j * cnt);
		__m128i ee0 = LO(b[0], b[4]), ee1 = HI(b[0], b[4]), eo0 = LO(b[2], b[6]),
			eo1 = HI(b[2], b[6]), oe0 = LO(b[1], b[5]), oe1 = HI(b[1], b[5]),
			oo0 = LO(b[3], b[7]), oo1 = HI(b[3], b[7]);

		e[0] = LO(ee0, eo0);
		e[1] = HI(ee0, eo0);
		e[2] = LO(ee1, eo1);
		e[3] = HI(ee1, eo1);
		o[0] = LO(oe0, oo0);
		o[1] = HI(oe0, oo0);
		o[2] = LO(oe1, oo1);
		o[3] = HI(oe1, oo1);
		for (int k = 0; k < 4; k++) {
			ST(d + 32 * k, LO(e[k], o[k]));
			ST(d + 32 * k + 16, HI(e[k], o[k]));
		}
	}
#undef LO
#undef HI
}

/* Lane arithmetic on n-byte elements (wrapping, as the format says). */
static inline __m128i vsub(__m128i a, __m128i b, unsigned n)
{
	return n == 2 ? _mm_sub_epi16(a, b) : n == 4 ? _mm_sub_epi32(a, b) : _mm_sub_epi64(a, b);
}

static inline __m128i vadd(__m128i a, __m128i b, unsigned n)
{
	return n == 2 ? _mm_add_epi16(a, b) : n == 4 ? _mm_add_epi32(a, b) : _mm_add_epi64(a, b);
}

/* Running sum across the lanes (log2 steps of shifted adds). */
static inline __m128i prefix(__m128i x, unsigned n)
{
	if (n == 2) {
		x = vadd(x, _mm_slli_si128(x, 2), 2);
		x = vadd(x, _mm_slli_si128(x, 4), 2);
	} else if (n == 4) {
		x = vadd(x, _mm_slli_si128(x, 4), 4);
	}
	return vadd(x, _mm_slli_si128(x, 8), n);
}

/* The last lane in every lane: the carry into the next vector. */
static inline __m128i last_lane(__m128i x, unsigned n)
{
	if (n == 2) {
		x = _mm_shufflehi_epi16(x, 0xff);
		return _mm_unpackhi_epi64(x, x);
	}
	return n == 4 ? _mm_shuffle_epi32(x, 0xff) : _mm_unpackhi_epi64(x, x);
}
#endif

/* Shuffle and its inverse, optionally with delta; blocks of 16 elements by SSE2 where
 * available, the rest (and everything elsewhere) by the plain loops above. */
static inline void shuffle_fast(unsigned char *restrict d, const unsigned char *restrict s,
				size_t cnt, int inv, int delta, unsigned n)
{
	size_t i = 0;
#ifdef HAVE_SSE2
	unsigned char blk[128] __attribute__((aligned(16)));
	__m128i carry = _mm_setzero_si128();

	for (; i + 16 <= cnt; i += 16) {
		if (!inv) {
			const unsigned char *src = s + i * n;

			if (delta) {
				/* Each element minus the one n bytes before it; the page's first
				 * element has none (0): shift it in from the left. */
				for (unsigned k = 0; k < n; k++) {
					__m128i x = LD(src + 16 * k);
					__m128i p = i || k ? LD(src + 16 * k - n) : x;

					if (!i && !k)
						p = n == 2 ? _mm_slli_si128(x, 2)
						  : n == 4 ? _mm_slli_si128(x, 4) : _mm_slli_si128(x, 8);
					ST(blk + 16 * k, vsub(x, p, n));
				}
				src = blk;
			}
			shuffle_block(d + i, src, cnt, n);
		} else if (!delta) {
			unshuffle_block(d + i * n, s + i, cnt, n);
		} else {
			unshuffle_block(blk, s + i, cnt, n);
			for (unsigned k = 0; k < n; k++) {
				__m128i x = vadd(prefix(LD(blk + 16 * k), n), carry, n);

				ST(d + i * n + 16 * k, x);
				carry = last_lane(x, n);
			}
		}
	}
	if (i == cnt)
		return;
	/* The tail elements continue the delta chain from the last block. */
	uint64_t mask = n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1;
	uint64_t prev = !i ? 0 : ld_le((inv ? d : s) + (i - 1) * n, n);

	for (; i < cnt; i++) {
		uint64_t v;

		if (!inv) {
			uint64_t x = ld_le(s + i * n, n);

			v = delta ? (x - prev) & mask : x;
			prev = x;
			for (unsigned j = 0; j < n; j++)
				d[j * cnt + i] = (unsigned char)(v >> (8 * j));
		} else {
			v = 0;
			for (unsigned j = 0; j < n; j++)
				v |= (uint64_t)s[j * cnt + i] << (8 * j);
			prev = delta ? (prev + v) & mask : v;
			st_le(d + i * n, prev, n);
		}
	}
#else
	(void)i;
	if (delta) {
		if (inv)
			undelta_n(d, s, cnt, n, 1);
		else
			delta_n(d, s, cnt, n, 1);
	} else if (inv) {
		unshuffle_n(d, s, cnt, n);
	} else {
		shuffle_n(d, s, cnt, n);
	}
#endif
}

/* One instance per (kind, N): the switch hands the loops a constant element size. */
#define DISPATCH(fn, ...)                       \
	switch (f->n) {                         \
	case 2: fn(__VA_ARGS__, 2); break;      \
	case 4: fn(__VA_ARGS__, 4); break;      \
	default: fn(__VA_ARGS__, 8); break;     \
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
		DISPATCH(shuffle_fast, d, s, cnt, inv, 0);
		break;
	case FILTER_DELTA:
		DISPATCH(delta_k, d, s, cnt, inv, 0);
		break;
	case FILTER_DELTA_SHUFFLE:
		DISPATCH(shuffle_fast, d, s, cnt, inv, 1);
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
