/*
 * "zstd" over libzstd: one compression and one decompression context per
 * zs_comp with the level fixed at creation, an optional dictionary digested
 * once, and the streaming decoder for an input split in two.  Each page is
 * a frame without checksum, content size or dictionary id (compress.c's top
 * comment: how that differs from the kernel's zstd).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ZSTD_c_literalCompressionMode, for "zstd-huf", is in libzstd's experimental section. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "compress/internal.h"

struct zstd_ctx {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
};

struct zstd_dict {
	ZSTD_CDict *cdict;
	ZSTD_DDict *ddict;
};

static void zstd_levels(int *def, int *lo, int *hi)
{
	*def = ZSTD_CLEVEL_DEFAULT;
	*lo = ZSTD_minCLevel();
	*hi = ZSTD_maxCLevel();
}

static void zstd_destroy(struct zs_comp *c)
{
	struct zstd_ctx *z = c->work;
	struct zstd_dict *d = c->dict;

	if (z) {
		ZSTD_freeCCtx(z->cctx);
		ZSTD_freeDCtx(z->dctx);
		free(z);
	}
	if (d) {
		ZSTD_freeCDict(d->cdict);
		ZSTD_freeDDict(d->ddict);
		free(d);
	}
}

static int zstd_create(struct zs_comp *c)
{
	struct zstd_ctx *z = calloc(1, sizeof(*z));

	snprintf(c->name, sizeof(c->name), "zstd:%d", c->level);
	if (!z)
		return -ENOMEM;
	c->work = z;
	z->cctx = ZSTD_createCCtx();
	z->dctx = ZSTD_createDCtx();
	if (!z->cctx || !z->dctx)
		return -ENOMEM;
	/* Fix the level once; a page-sized srcSize hint keeps tables small. */
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, c->level);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_dictIDFlag, 0);
	return 0;
}

/*
 * "zstd-huf": zstd with Huffman-coded literals at every level.  libzstd's
 * fast (negative) levels store literals raw, which on text-like data whose
 * repeats are short (what is left between matches is most of the output)
 * costs about a fifth of the size; this keeps those levels' match finder
 * and adds only the entropy stage.  The output is an ordinary zstd frame.
 */
static int zstd_huf_create(struct zs_comp *c)
{
	int rc = zstd_create(c);
	struct zstd_ctx *z = c->work;

	if (rc)
		return rc;
	snprintf(c->name, sizeof(c->name), "zstd-huf:%d", c->level);
#if ZSTD_VERSION_NUMBER >= 10500
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_enable)))
		return -EOPNOTSUPP;
	return 0;
#else
	(void)z;
	return -EOPNOTSUPP; /* the switch's values were renamed in 1.5.0; older ones are not supported */
#endif
}

/* Digest the dictionary once; every compress/decompress then only references it. */
static int zstd_load_dict(struct zs_comp *c, const void *dict, size_t len)
{
	struct zstd_ctx *z = c->work;
	struct zstd_dict *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	c->dict = d;
	d->cdict = ZSTD_createCDict(dict, len, c->level);
	d->ddict = ZSTD_createDDict(dict, len);
	if (!d->cdict || !d->ddict)
		return -EINVAL; /* libzstd refused it (a corrupt zstd-format dictionary) */
	if (ZSTD_isError(ZSTD_CCtx_refCDict(z->cctx, d->cdict)) ||
	    ZSTD_isError(ZSTD_DCtx_refDDict(z->dctx, d->ddict)))
		return -EINVAL;
	return 0;
}

static size_t zstd_bound(size_t src_len)
{
	return ZSTD_compressBound(src_len);
}

static int zstd_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			 size_t dst_cap)
{
	struct zstd_ctx *z = c->work;
	/* dstSize_tooSmall on most pages given exactly their size: it wants a block's worst case. */
	unsigned char *out = codec_worst_case_room(c, src_len, dst, dst_cap);
	size_t r = ZSTD_compress2(z->cctx, out, out == dst ? dst_cap : c->sg_cap, src, src_len);

	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? -ENOSPC : -EINVAL;
	return codec_copy_if_fits(out, r, dst, dst_cap);
}

static int zstd_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			   size_t dst_len)
{
	struct zstd_ctx *z = c->work;
	const struct zstd_dict *d = c->dict;
	size_t r = d ? ZSTD_decompress_usingDDict(z->dctx, dst, dst_len, src, src_len, d->ddict)
		     : ZSTD_decompressDCtx(z->dctx, dst, dst_len, src, src_len);

	return !ZSTD_isError(r) && r == dst_len ? (int)r : -EINVAL;
}

/*
 * Warm zstd's lazily sized tables now so the first real page allocates
 * nothing.  Straight through this backend's own calls: at create no filter
 * is set, so zs_compress would add nothing, and calling it made this file
 * and compress.c depend on each other.
 */
static int zstd_ready(struct zs_comp *c)
{
	size_t max_src = c->max_src;
	char *src = calloc(1, max_src), *dst = malloc(ZSTD_compressBound(max_src));
	int n = -ENOMEM;

	if (src && dst)
		n = zstd_compress(c, src, max_src, dst, ZSTD_compressBound(max_src));
	if (n > 0)
		n = zstd_decompress(c, dst, (size_t)n, src, max_src);
	free(src);
	free(dst);
	return n < 0 ? n : 0;
}

/* The streaming decoder takes the frame in any split; it resumes mid-block. */
static int zstd_decompress2(struct zs_comp *c, const void *const src[2], const size_t src_len[2],
			    void *dst, size_t dst_len)
{
	struct zstd_ctx *z = c->work;
	ZSTD_outBuffer out = { dst, dst_len, 0 };
	size_t r = 0;

	ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
	for (int i = 0; i < 2; i++) {
		ZSTD_inBuffer in = { src[i], src_len[i], 0 };

		while (in.pos < in.size) {
			r = ZSTD_decompressStream(z->dctx, &out, &in);
			if (ZSTD_isError(r))
				return -EINVAL;
			if (out.pos == out.size && in.pos < in.size && r)
				return -EINVAL; /* more output than dst_len */
			if (!r)
				break;
		}
	}
	return !r && out.pos == dst_len ? (int)dst_len : -EINVAL;
}

const struct codec_ops codec_zstd = {
	.name = "zstd",
	.levels = zstd_levels,
	.takes_dict = 1,
	.create = zstd_create,
	.destroy = zstd_destroy,
	.load_dict = zstd_load_dict,
	.ready = zstd_ready,
	.bound = zstd_bound,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
	.decompress2 = zstd_decompress2,
};

const struct codec_ops codec_zstd_huf = {
	.name = "zstd-huf",
	.levels = zstd_levels,
	.takes_dict = 1,
	.create = zstd_huf_create,
	.destroy = zstd_destroy,
	.load_dict = zstd_load_dict,
	.ready = zstd_ready,
	.bound = zstd_bound,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
	.decompress2 = zstd_decompress2,
};
