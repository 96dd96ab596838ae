/*
 * Compressor contexts over the Debian libraries (liblz4, libzstd, liblzo2).
 * Owns name parsing and each algorithm's work memory.  Every buffer an
 * algorithm needs is allocated in zs_comp_create so that compress/decompress
 * never allocate: that is what lets the zram store keep its hot path at the
 * cost of the compressor alone.
 *
 * How close each name comes to the kernel's algorithm of the same name,
 * measured against the running kernel's zram (6.18.44) with
 * `zs zram --vs-kernel --comp C` (docs/zram.md, "Parity"):
 *
 * - lzo: exact.  liblzo2's lzo1x_1_15_compress gives the kernel's "lzo"
 *   size on every page measured (387,305 of 387,305 compressible pages of
 *   /usr/bin, /usr/lib/x86_64-linux-gnu, /usr/share and generated ones;
 *   reference/zswap.md section 2 has 2,832 of 2,832 more), so a store's
 *   mm_stat equals the kernel's field for field without --agree (up to
 *   1 GiB measured).  The plain lzo1x_1_compress (used before) writes the
 *   same format but matched only 36% of those pages, up to 1,776 bytes off.
 *   Both decode with lzo1x_decompress_safe.
 * - lz4: not exact.  3,096 of 64,853 compressible pages of /usr/bin (4.8%)
 *   come out 1 to 9 bytes shorter here, never longer, and on every one of
 *   them the kernel's output is liblz4's with its last match turned back
 *   into literals.  Since 1.8.2 (lz4 PR #476) liblz4's match search may
 *   start a match 12 bytes before the end of the input, as the block format
 *   allows; the kernel's lib/lz4, an LZ4 from before that change (its header
 *   says 2011-2016), stops its search one byte earlier.  Everything else
 *   (16-bit table for page-size input, hash, skip rule, acceleration) is the
 *   same.  No liblz4 entry point or acceleration keeps the old limit
 *   (acceleration 2 changes 97% of the pages; LZ4_compress_default and
 *   _destSize give what _fast_extState gives).  The kernel's output can be
 *   had from liblz4 in two steps -- compress the first N-1 bytes, whose
 *   search stops where the kernel's does, and re-encode the final literal
 *   run one byte longer (or the last match one byte longer when it reached
 *   the end limit; all N bytes again when it ended exactly 12 bytes before
 *   the end) -- and that matched the kernel on all 390,486 compressible
 *   pages tried (/usr/bin, /usr/lib/x86_64-linux-gnu, /usr/share, synthetic;
 *   also at acceleration 2, 8, 64), but it costs 26% more instructions per
 *   page (callgrind: the walk over the output, and a second compression on
 *   9% of pages).  The store's write speed is worth more than a few zspages
 *   of mem_used_total (docs/zram.md), so "lz4" stays one liblz4 call.
 * - zstd: unverified.  This kernel's zram offers no zstd (comp_algorithm
 *   lists lzo-rle, lzo and lz4).  Known differences: the kernel frames each
 *   page with its content size (zstd_get_params' defaults) where this file
 *   leaves it out, and its lib/zstd is another version than Debian's
 *   libzstd 1.5.4.
 * - lzo-rle (the kernel's default): not available.  It is the kernel's own
 *   extension of lzo1x: a 2-byte header (marker and bitstream version) and
 *   a run-length code for runs of zero bytes.  liblzo2 has neither the
 *   encoder nor a decoder for it.  Only 13,362 of 64,266 compressible pages
 *   of /usr/bin come out as lzo1x_1_15 plus those 2 bytes; the others are
 *   from 1,542 bytes smaller to 780 bytes larger.  No stand-in would be
 *   right, so asking for it is -EOPNOTSUPP.
 * - lz4hc: not measurable here (the same zram list).
 */
#include "zs/compress.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4hc.h>
#include <lzo/lzo1x.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "compress/filter.h"

/* LZ4 keeps at most this much history: a longer dictionary only counts by its tail. */
#define LZ4_DICT_MAX 65536

enum comp_algo { ALGO_LZ4, ALGO_LZ4HC, ALGO_ZSTD, ALGO_LZO };

struct zs_comp {
	enum comp_algo algo;
	int level;            /* lz4: acceleration; lz4hc/zstd: level */
	size_t max_src;
	void *work;           /* lz4/lz4hc state, lzo work memory */
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	ZSTD_CDict *cdict;    /* zstd with a dictionary: digested once at creation */
	ZSTD_DDict *ddict;
	char *lz4_dict;       /* lz4 with a dictionary: our copy (at most 64 KiB) ... */
	int lz4_dict_len;
	LZ4_stream_t *lz4_dict_state; /* ... and the stream LZ4_loadDict prepared from it */
	unsigned char *sg_buf; /* zs_decompress_sg of a split block-format input */
	size_t sg_cap;
	char name[40];
	struct comp_filter filter; /* zs_comp_set_filter; kind FILTER_NONE: off */
	unsigned char *fbuf;  /* max_src bytes: the filtered page (compress) or the decoded one */
	char filter_name[20];
};

static const char *const comp_names[] = { "lz4", "lz4hc", "zstd", "lzo", NULL };

const char *const *zs_comp_names(void)
{
	return comp_names;
}

/* liblzo2 wants lzo_init() once per process before any call. */
static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_rc;

static void lzo_init_once(void)
{
	lzo_init_rc = lzo_init();
}

/* ---- Name parsing ---- */

static int parse_level(const char *s, int lo, int hi, int *level)
{
	char *end;
	long v;

	/* Only [-]digits: strtol alone would also take spaces, '+' and hex-looking junk. */
	if (!s[*s == '-'] || s[*s == '-'] < '0' || s[*s == '-'] > '9')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*level = (int)v;
	return 0;
}

/* Split "algo[:level]" into an algorithm and level (with the algorithm's default). */
static int parse_name(const char *name, enum comp_algo *algo, int *level)
{
	const char *colon;
	size_t base_len;

	if (!name)
		return -EINVAL;
	colon = strchr(name, ':');
	base_len = colon ? (size_t)(colon - name) : strlen(name);

	if (base_len == 3 && !strncmp(name, "lz4", 3)) {
		*algo = ALGO_LZ4;
		*level = 1;
		return colon ? parse_level(colon + 1, 1, 65537, level) : 0;
	}
	if (base_len == 5 && !strncmp(name, "lz4hc", 5)) {
		*algo = ALGO_LZ4HC;
		*level = LZ4HC_CLEVEL_DEFAULT;
		return colon ? parse_level(colon + 1, 1, LZ4HC_CLEVEL_MAX, level) : 0;
	}
	if (base_len == 4 && !strncmp(name, "zstd", 4)) {
		*algo = ALGO_ZSTD;
		*level = ZSTD_CLEVEL_DEFAULT;
		return colon ? parse_level(colon + 1, ZSTD_minCLevel(), ZSTD_maxCLevel(), level) : 0;
	}
	if (base_len == 3 && !strncmp(name, "lzo", 3)) {
		*algo = ALGO_LZO;
		*level = 0;
		return colon ? -EINVAL : 0;
	}
	/* The kernel's default; liblzo2 has no lzo1x run-length variant. */
	if (base_len == 7 && !strncmp(name, "lzo-rle", 7))
		return -EOPNOTSUPP;
	return -EINVAL;
}

int zs_comp_check(const char *name)
{
	enum comp_algo algo;
	int level;

	return parse_name(name, &algo, &level);
}

/* ---- Create / destroy ---- */

/* Name plus parameters -> algorithm and effective level, with every range check. */
static int parse_params(const char *name, const struct zs_comp_params *p, enum comp_algo *algo,
			int *level)
{
	int rc = parse_name(name, algo, level);

	if (rc || !p)
		return rc;
	if (p->level) {
		char num[16];

		/* The same ranges as a name's ":N": reuse that check. */
		if (*algo == ALGO_LZO)
			return -EINVAL;
		snprintf(num, sizeof(num), "%d", p->level);
		switch (*algo) {
		case ALGO_LZ4:
			rc = parse_level(num, 1, 65537, level);
			break;
		case ALGO_LZ4HC:
			rc = parse_level(num, 1, LZ4HC_CLEVEL_MAX, level);
			break;
		case ALGO_ZSTD:
			rc = parse_level(num, ZSTD_minCLevel(), ZSTD_maxCLevel(), level);
			break;
		case ALGO_LZO:
			break;
		}
		if (rc)
			return rc;
	}
	if (!p->dict != !p->dict_len)
		return -EINVAL;
	if (p->dict && (p->dict_len > ZS_COMP_MAX_DICT || (*algo != ALGO_ZSTD && *algo != ALGO_LZ4)))
		return -EINVAL;
	return 0;
}

int zs_comp_check_params(const char *name, const struct zs_comp_params *params)
{
	enum comp_algo algo;
	int level;

	return parse_params(name, params, &algo, &level);
}

int zs_comp_has_dict(const struct zs_comp *c)
{
	return c->cdict || c->lz4_dict;
}

/* Digest the dictionary once; every compress/decompress then only references it. */
static int load_dict(struct zs_comp *c, const void *dict, size_t len)
{
	if (c->algo == ALGO_ZSTD) {
		c->cdict = ZSTD_createCDict(dict, len, c->level);
		c->ddict = ZSTD_createDDict(dict, len);
		if (!c->cdict || !c->ddict)
			return -EINVAL; /* libzstd refused it (a corrupt zstd-format dictionary) */
		if (ZSTD_isError(ZSTD_CCtx_refCDict(c->cctx, c->cdict)) ||
		    ZSTD_isError(ZSTD_DCtx_refDDict(c->dctx, c->ddict)))
			return -EINVAL;
		return 0;
	}
	/* lz4: keep the tail it can use, and a stream LZ4_loadDict prepared once. */
	if (len > LZ4_DICT_MAX) {
		dict = (const char *)dict + (len - LZ4_DICT_MAX);
		len = LZ4_DICT_MAX;
	}
	c->lz4_dict = malloc(len);
	c->lz4_dict_state = malloc(sizeof(LZ4_stream_t));
	if (!c->lz4_dict || !c->lz4_dict_state)
		return -ENOMEM;
	memcpy(c->lz4_dict, dict, len);
	c->lz4_dict_len = (int)len;
	LZ4_initStream(c->lz4_dict_state, sizeof(LZ4_stream_t));
	LZ4_loadDict(c->lz4_dict_state, c->lz4_dict, c->lz4_dict_len);
	return 0;
}

int zs_comp_create(const char *name, size_t max_src, struct zs_comp **out)
{
	return zs_comp_create_params(name, max_src, NULL, out);
}

int zs_comp_create_params(const char *name, size_t max_src, const struct zs_comp_params *params,
			  struct zs_comp **out)
{
	struct zs_comp *c;
	enum comp_algo algo;
	int level, rc;

	*out = NULL;
	rc = parse_params(name, params, &algo, &level);
	if (rc)
		return rc;
	if (max_src == 0 || max_src > ZS_COMP_MAX_SRC)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->algo = algo;
	c->level = level;
	c->max_src = max_src;

	switch (algo) {
	case ALGO_LZ4:
		c->work = malloc((size_t)LZ4_sizeofState());
		if (level == 1)
			snprintf(c->name, sizeof(c->name), "lz4");
		else
			snprintf(c->name, sizeof(c->name), "lz4:%d", level);
		break;
	case ALGO_LZ4HC:
		c->work = malloc((size_t)LZ4_sizeofStateHC());
		snprintf(c->name, sizeof(c->name), "lz4hc:%d", level);
		break;
	case ALGO_ZSTD:
		c->cctx = ZSTD_createCCtx();
		c->dctx = ZSTD_createDCtx();
		if (c->cctx && c->dctx) {
			/* Fix the level once; a page-sized srcSize hint keeps tables small. */
			ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, level);
			ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0);
			ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 0);
			ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_dictIDFlag, 0);
			c->work = c; /* non-NULL marker: contexts made */
		}
		snprintf(c->name, sizeof(c->name), "zstd:%d", level);
		break;
	case ALGO_LZO:
		pthread_once(&lzo_once, lzo_init_once);
		if (lzo_init_rc != LZO_E_OK) {
			free(c);
			return -EOPNOTSUPP;
		}
		/* lzo1x_1_15's hash table: 256 KiB on 64-bit, twice lzo1x_1's (the price of
		 * the kernel's sizes; it is no slower per page). */
		c->work = malloc(LZO1X_1_15_MEM_COMPRESS);
		snprintf(c->name, sizeof(c->name), "lzo");
		break;
	}
	if (!c->work) {
		zs_comp_destroy(c);
		return -ENOMEM;
	}
	c->sg_cap = zs_comp_bound(c, max_src);
	c->sg_buf = malloc(c->sg_cap);
	if (!c->sg_buf) {
		zs_comp_destroy(c);
		return -ENOMEM;
	}
	if (params && params->dict) {
		rc = load_dict(c, params->dict, params->dict_len);
		if (rc) {
			zs_comp_destroy(c);
			return rc;
		}
		/* Name it so stats and tools show that a dictionary is in use. */
		size_t nl = strlen(c->name);
		snprintf(c->name + nl, sizeof(c->name) - nl, "+dict");
	}
	/* Warm zstd's lazily sized tables now so the first real page allocates nothing. */
	if (algo == ALGO_ZSTD) {
		char *src = calloc(1, max_src), *dst = malloc(ZSTD_compressBound(max_src));
		int n = -ENOMEM;

		if (src && dst)
			n = zs_compress(c, src, max_src, dst, ZSTD_compressBound(max_src));
		if (n > 0)
			n = zs_decompress(c, dst, (size_t)n, src, max_src);
		free(src);
		free(dst);
		if (n < 0) {
			zs_comp_destroy(c);
			return n;
		}
	}
	*out = c;
	return 0;
}

void zs_comp_destroy(struct zs_comp *c)
{
	if (!c)
		return;
	if (c->algo != ALGO_ZSTD)
		free(c->work);
	ZSTD_freeCCtx(c->cctx);
	ZSTD_freeDCtx(c->dctx);
	ZSTD_freeCDict(c->cdict);
	ZSTD_freeDDict(c->ddict);
	free(c->lz4_dict);
	free(c->lz4_dict_state);
	free(c->sg_buf);
	free(c->fbuf);
	free(c);
}

const char *zs_comp_name(const struct zs_comp *c)
{
	return c->name;
}

size_t zs_comp_bound(const struct zs_comp *c, size_t src_len)
{
	switch (c->algo) {
	case ALGO_LZ4:
	case ALGO_LZ4HC:
		return (size_t)LZ4_compressBound((int)src_len);
	case ALGO_ZSTD:
		return ZSTD_compressBound(src_len);
	case ALGO_LZO:
		/* liblzo2's documented worst case for lzo1x. */
		return src_len + src_len / 16 + 64 + 3;
	}
	return 0;
}

/* ---- Compress / decompress ---- */

/*
 * zs_compress's -ENOSPC means "does not fit in dst_cap" (zs/compress.h), but
 * two libraries cannot honour a dst below their worst case: lzo1x_1_15 has
 * no output bound check at all, and zstd fails with dstSize_tooSmall on most
 * pages given exactly their compressed size (it wants room for a block's
 * worst case).  Such a dst is swapped for the context's scratch
 * (zs_comp_bound(max_src) bytes), and what fits is copied back, so the
 * result never depends on dst_cap beyond fitting.  Callers that size dst by
 * zs_comp_bound (zram, zswap, the tools) never take the copy.
 */
static unsigned char *worst_case_room(struct zs_comp *c, size_t src_len, void *dst,
				      size_t dst_cap)
{
	return dst_cap < zs_comp_bound(c, src_len) ? c->sg_buf : dst;
}

static int copy_if_fits(const unsigned char *out, size_t len, void *dst, size_t dst_cap)
{
	if (out != dst) {
		if (len > dst_cap)
			return -ENOSPC;
		memcpy(dst, out, len);
	}
	return (int)len;
}

static int raw_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			size_t dst_cap)
{
	int n;

	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;

	switch (c->algo) {
	case ALGO_LZ4:
		if (c->lz4_dict_state) {
			/*
			 * Start from the stream LZ4_loadDict prepared at creation: copying
			 * its state (16 KiB) is far cheaper than hashing the dictionary
			 * again, and liblz4's shared library does not export
			 * LZ4_attach_dictionary.
			 */
			memcpy(c->work, c->lz4_dict_state, sizeof(LZ4_stream_t));
			n = LZ4_compress_fast_continue(c->work, src, dst, (int)src_len, (int)dst_cap,
						       c->level);
			return n > 0 ? n : -ENOSPC;
		}
		/* extState keeps the kernel's small-input (16-bit) table, so sizes match its lz4. */
		n = LZ4_compress_fast_extState(c->work, src, dst, (int)src_len, (int)dst_cap,
					       c->level);
		return n > 0 ? n : -ENOSPC;
	case ALGO_LZ4HC:
		n = LZ4_compress_HC_extStateHC(c->work, src, dst, (int)src_len, (int)dst_cap,
					       c->level);
		return n > 0 ? n : -ENOSPC;
	case ALGO_ZSTD: {
		unsigned char *out = worst_case_room(c, src_len, dst, dst_cap);
		size_t r = ZSTD_compress2(c->cctx, out, out == dst ? dst_cap : c->sg_cap, src,
					  src_len);

		if (ZSTD_isError(r))
			return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? -ENOSPC : -EINVAL;
		return copy_if_fits(out, r, dst, dst_cap);
	}
	case ALGO_LZO: {
		lzo_uint out_len = dst_cap;
		unsigned char *out = worst_case_room(c, src_len, dst, dst_cap);

		/* The variant whose sizes are the kernel's "lzo" (top of this file). */
		if (lzo1x_1_15_compress(src, src_len, out, &out_len, c->work) != LZO_E_OK)
			return -EINVAL;
		return copy_if_fits(out, out_len, dst, dst_cap);
	}
	}
	return -EINVAL;
}

int zs_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	if (src_len == 0 || src_len > c->max_src)
		return -EINVAL;
	if (c->filter.kind != FILTER_NONE) {
		comp_filter_apply(&c->filter, c->fbuf, src, src_len);
		src = c->fbuf;
	}
	return raw_compress(c, src, src_len, dst, dst_cap);
}

static int raw_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			  size_t dst_len)
{

	switch (c->algo) {
	case ALGO_LZ4:
	case ALGO_LZ4HC: {
		int n = c->lz4_dict ? LZ4_decompress_safe_usingDict(src, dst, (int)src_len,
								     (int)dst_len, c->lz4_dict,
								     c->lz4_dict_len)
				    : LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);

		return n == (int)dst_len ? n : -EINVAL;
	}
	case ALGO_ZSTD: {
		size_t r = c->ddict ? ZSTD_decompress_usingDDict(c->dctx, dst, dst_len, src, src_len,
								 c->ddict)
				    : ZSTD_decompressDCtx(c->dctx, dst, dst_len, src, src_len);

		return !ZSTD_isError(r) && r == dst_len ? (int)r : -EINVAL;
	}
	case ALGO_LZO: {
		lzo_uint out_len = dst_len;
		int rc = lzo1x_decompress_safe(src, src_len, dst, &out_len, NULL);

		return rc == LZO_E_OK && out_len == dst_len ? (int)dst_len : -EINVAL;
	}
	}
	return -EINVAL;
}

/* A filtered context decodes into fbuf, then undoes the filter into dst (they cannot overlap). */
static void *decode_target(struct zs_comp *c, void *dst, size_t dst_len)
{
	if (c->filter.kind == FILTER_NONE)
		return dst;
	return dst_len <= c->max_src ? c->fbuf : NULL;
}

static int decode_done(struct zs_comp *c, int n, void *dst, size_t dst_len)
{
	if (n >= 0 && c->filter.kind != FILTER_NONE)
		comp_filter_undo(&c->filter, dst, c->fbuf, dst_len);
	return n;
}

int zs_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst, size_t dst_len)
{
	void *t;

	if (src_len == 0 || src_len > INT_MAX || dst_len > INT_MAX)
		return -EINVAL;
	if (!(t = decode_target(c, dst, dst_len)))
		return -EINVAL;
	return decode_done(c, raw_decompress(c, src, src_len, t, dst_len), dst, dst_len);
}

int zs_decompress_sg(struct zs_comp *c, const void *const src[], const size_t src_len[], int n,
		     void *dst, size_t dst_len)
{
	size_t total;

	if (n == 1)
		return zs_decompress(c, src[0], src_len[0], dst, dst_len);
	if (n != 2 || dst_len > INT_MAX)
		return -EINVAL;
	total = src_len[0] + src_len[1];
	if (total < src_len[0] || total > c->sg_cap || !src_len[0] || !src_len[1])
		return -EINVAL;
	if (c->algo == ALGO_ZSTD) {
		/* The streaming decoder takes the frame in any split; it resumes mid-block. */
		void *t = decode_target(c, dst, dst_len);
		ZSTD_outBuffer out = { t, dst_len, 0 };
		size_t r = 0;

		if (!t)
			return -EINVAL;

		ZSTD_DCtx_reset(c->dctx, ZSTD_reset_session_only);
		for (int i = 0; i < 2; i++) {
			ZSTD_inBuffer in = { src[i], src_len[i], 0 };

			while (in.pos < in.size) {
				r = ZSTD_decompressStream(c->dctx, &out, &in);
				if (ZSTD_isError(r))
					return -EINVAL;
				if (out.pos == out.size && in.pos < in.size && r)
					return -EINVAL; /* more output than dst_len */
				if (!r)
					break;
			}
		}
		return decode_done(c, !r && out.pos == dst_len ? (int)dst_len : -EINVAL, dst,
				   dst_len);
	}
	/* Block formats decode from one contiguous buffer only. */
	memcpy(c->sg_buf, src[0], src_len[0]);
	memcpy(c->sg_buf + src_len[0], src[1], src_len[1]);
	return zs_decompress(c, c->sg_buf, total, dst, dst_len);
}

/* ---- Filters (filter.c) ---- */

int zs_filter_check(const char *spec)
{
	struct comp_filter f;

	return comp_filter_parse(spec, &f);
}

int zs_comp_set_filter(struct zs_comp *c, const char *spec)
{
	struct comp_filter f;
	int rc = comp_filter_parse(spec, &f);

	if (rc)
		return rc;
	if (f.kind != FILTER_NONE && !c->fbuf && !(c->fbuf = malloc(c->max_src)))
		return -ENOMEM;
	c->filter = f;
	if (f.kind == FILTER_NONE)
		snprintf(c->filter_name, sizeof(c->filter_name), "none");
	else
		snprintf(c->filter_name, sizeof(c->filter_name), "%s:%u",
			 comp_filter_kind_name(f.kind), f.n);
	return 0;
}

const char *zs_comp_filter_name(const struct zs_comp *c)
{
	return c->filter_name[0] ? c->filter_name : "none";
}
