/*
 * "lz4" over liblz4's block format: acceleration as the level, and an
 * optional dictionary.  compress.c's top comment says how close its sizes
 * come to the kernel's lz4 and why it stays one liblz4 call per page.
 * The decoder is also lz4hc's (backend_lz4hc.c): both write one format.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "compress/internal.h"

/* LZ4 keeps at most this much history: a longer dictionary only counts by its tail. */
#define LZ4_DICT_MAX 65536

/* A dictionary: our copy of the bytes and the stream LZ4_loadDict prepared from them once. */
struct lz4_dict {
	LZ4_stream_t state;
	int len;
	char bytes[];
};

static void lz4_levels(int *def, int *lo, int *hi)
{
	*def = 1;
	*lo = 1;
	*hi = 65537;
}

static int lz4_create(struct zs_comp *c)
{
	c->work = malloc((size_t)LZ4_sizeofState());
	if (c->level == 1)
		snprintf(c->name, sizeof(c->name), "lz4");
	else
		snprintf(c->name, sizeof(c->name), "lz4:%d", c->level);
	return c->work ? 0 : -ENOMEM;
}

static void lz4_destroy(struct zs_comp *c)
{
	free(c->work);
	free(c->dict);
}

static int lz4_load_dict(struct zs_comp *c, const void *dict, size_t len)
{
	struct lz4_dict *d;

	if (len > LZ4_DICT_MAX) {
		dict = (const char *)dict + (len - LZ4_DICT_MAX);
		len = LZ4_DICT_MAX;
	}
	d = malloc(sizeof(*d) + len);
	if (!d)
		return -ENOMEM;
	memcpy(d->bytes, dict, len);
	d->len = (int)len;
	LZ4_initStream(&d->state, sizeof(d->state));
	LZ4_loadDict(&d->state, d->bytes, d->len);
	c->dict = d;
	return 0;
}

size_t codec_lz4_bound(size_t src_len)
{
	return (size_t)LZ4_compressBound((int)src_len);
}

static int lz4_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			size_t dst_cap)
{
	const struct lz4_dict *d = c->dict;
	int n;

	if (d) {
		/*
		 * Start from the stream LZ4_loadDict prepared at creation: copying
		 * its state (16 KiB) is far cheaper than hashing the dictionary
		 * again, and liblz4's shared library does not export
		 * LZ4_attach_dictionary.
		 */
		memcpy(c->work, &d->state, sizeof(LZ4_stream_t));
		n = LZ4_compress_fast_continue(c->work, src, dst, (int)src_len, (int)dst_cap,
					       c->level);
		return n > 0 ? n : -ENOSPC;
	}
	/* extState keeps the kernel's small-input (16-bit) table, so sizes match its lz4. */
	n = LZ4_compress_fast_extState(c->work, src, dst, (int)src_len, (int)dst_cap, c->level);
	return n > 0 ? n : -ENOSPC;
}

int codec_lz4_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			 size_t dst_len)
{
	const struct lz4_dict *d = c->dict;
	int n = d ? LZ4_decompress_safe_usingDict(src, dst, (int)src_len, (int)dst_len, d->bytes,
						  d->len)
		  : LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);

	return n == (int)dst_len ? n : -EINVAL;
}

const struct codec_ops codec_lz4 = {
	.name = "lz4",
	.levels = lz4_levels,
	.takes_dict = 1,
	.create = lz4_create,
	.destroy = lz4_destroy,
	.load_dict = lz4_load_dict,
	.bound = codec_lz4_bound,
	.compress = lz4_compress,
	.decompress = codec_lz4_decompress,
};
