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

/*
 * A dictionary: its bytes at the start of buf, then max_src bytes of room
 * where each input is copied so that it directly follows them, and the
 * stream LZ4_loadDict prepared once over those bytes at that address.
 */
struct lz4_dict {
	LZ4_stream_t state;
	int len;
	size_t room;
	char *buf;
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
	struct lz4_dict *d = c->dict;

	free(c->work);
	if (d)
		free(d->buf);
	free(d);
}

static int lz4_load_dict(struct zs_comp *c, const void *dict, size_t len)
{
	struct lz4_dict *d;

	if (len > LZ4_DICT_MAX) {
		dict = (const char *)dict + (len - LZ4_DICT_MAX);
		len = LZ4_DICT_MAX;
	}
	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	/*
	 * The room is sized for the largest input but only the pages an input
	 * is copied into are ever touched, so a large max_src costs address
	 * space, not memory.
	 */
	d->room = c->max_src;
	d->buf = malloc(len + d->room);
	if (!d->buf) {
		free(d);
		return -ENOMEM;
	}
	memcpy(d->buf, dict, len);
	d->len = (int)len;
	LZ4_initStream(&d->state, sizeof(d->state));
	LZ4_loadDict(&d->state, d->buf, d->len);
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
		 * its state (16 KiB, about 0.3 us) is far cheaper than hashing the
		 * dictionary again.  The input is first copied to just after the
		 * dictionary's bytes, so that liblz4 compresses it as the
		 * continuation of one buffer ("prefix" mode) rather than with a
		 * separate dictionary ("external dictionary" mode): the output is
		 * the same format, decoded by LZ4_decompress_safe_usingDict, and on
		 * 4.5 KB database blocks with a 64 KiB dictionary it compresses in
		 * about half the time.  LZ4_attach_dictionary, which the shared
		 * liblz4 does not export, would not avoid the copy either: liblz4
		 * copies an attached dictionary's state itself for inputs over
		 * 4 KiB.
		 */
		const char *in = src;

		if (src_len <= d->room) {
			memcpy(d->buf + d->len, src, src_len);
			in = d->buf + d->len;
		}
		memcpy(c->work, &d->state, sizeof(LZ4_stream_t));
		n = LZ4_compress_fast_continue(c->work, in, dst, (int)src_len, (int)dst_cap,
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
	int n = d ? LZ4_decompress_safe_usingDict(src, dst, (int)src_len, (int)dst_len, d->buf,
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
