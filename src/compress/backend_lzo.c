/*
 * "lzo" over liblzo2: lzo1x_1_15 to compress (the variant whose sizes are
 * the kernel's lzo, compress.c's top comment) and lzo1x_decompress_safe.
 * No level, no dictionary.  The kernel's default "lzo-rle" is named here
 * as refused: liblzo2 has neither its encoder nor its decoder.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <lzo/lzo1x.h>

#include "compress/internal.h"

/* liblzo2 wants lzo_init() once per process before any call. */
static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_rc;

static void lzo_init_once(void)
{
	lzo_init_rc = lzo_init();
}

static int lzo_create(struct zs_comp *c)
{
	pthread_once(&lzo_once, lzo_init_once);
	if (lzo_init_rc != LZO_E_OK)
		return -EOPNOTSUPP;
	/* lzo1x_1_15's hash table: 256 KiB on 64-bit, twice lzo1x_1's (the price of
	 * the kernel's sizes; it is no slower per page). */
	c->work = malloc(LZO1X_1_15_MEM_COMPRESS);
	snprintf(c->name, sizeof(c->name), "lzo");
	return c->work ? 0 : -ENOMEM;
}

static void lzo_destroy(struct zs_comp *c)
{
	free(c->work);
}

/* liblzo2's documented worst case for lzo1x. */
static size_t lzo_bound(size_t src_len)
{
	return src_len + src_len / 16 + 64 + 3;
}

static int lzo_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			size_t dst_cap)
{
	/* lzo1x_1_15 never checks its output bound: a short dst gets the scratch. */
	unsigned char *out = codec_worst_case_room(c, src_len, dst, dst_cap);
	lzo_uint out_len = dst_cap;

	if (lzo1x_1_15_compress(src, src_len, out, &out_len, c->work) != LZO_E_OK)
		return -EINVAL;
	return codec_copy_if_fits(out, out_len, dst, dst_cap);
}

static int lzo_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			  size_t dst_len)
{
	lzo_uint out_len = dst_len;
	int rc = lzo1x_decompress_safe(src, src_len, dst, &out_len, NULL);

	(void)c;
	return rc == LZO_E_OK && out_len == dst_len ? (int)dst_len : -EINVAL;
}

static const char *const lzo_refused[] = { "lzo-rle", NULL };

const struct codec_ops codec_lzo = {
	.name = "lzo",
	.refused = lzo_refused,
	.create = lzo_create,
	.destroy = lzo_destroy,
	.bound = lzo_bound,
	.compress = lzo_compress,
	.decompress = lzo_decompress,
};
