/*
 * "lz4hc": liblz4's high-compression encoder, levels 1..LZ4HC_CLEVEL_MAX,
 * no dictionary.  It writes lz4's block format, so it decodes with
 * backend_lz4.c's decoder and bounds like lz4.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <lz4hc.h>

#include "compress/internal.h"

static void lz4hc_levels(int *def, int *lo, int *hi)
{
	*def = LZ4HC_CLEVEL_DEFAULT;
	*lo = 1;
	*hi = LZ4HC_CLEVEL_MAX;
}

static int lz4hc_create(struct zs_comp *c)
{
	c->work = malloc((size_t)LZ4_sizeofStateHC());
	snprintf(c->name, sizeof(c->name), "lz4hc:%d", c->level);
	return c->work ? 0 : -ENOMEM;
}

static void lz4hc_destroy(struct zs_comp *c)
{
	free(c->work);
}

static int lz4hc_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			  size_t dst_cap)
{
	int n;

	n = LZ4_compress_HC_extStateHC(c->work, src, dst, (int)src_len, (int)dst_cap, c->level);
	return n > 0 ? n : -ENOSPC;
}

const struct codec_ops codec_lz4hc = {
	.name = "lz4hc",
	.levels = lz4hc_levels,
	.create = lz4hc_create,
	.destroy = lz4hc_destroy,
	.bound = codec_lz4_bound,
	.compress = lz4hc_compress,
	.decompress = codec_lz4_decompress,
};
