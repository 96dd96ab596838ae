/*
 * The compressor layer's filters (filter.c), shared with compress.c, which
 * runs them inside zs_compress / zs_decompress of a context that has one
 * (zs_comp_set_filter).  Not exported: the public surface is the spec
 * string (zs/compress.h).
 */
#ifndef ZS_COMPRESS_FILTER_H
#define ZS_COMPRESS_FILTER_H

#include <stddef.h>

enum comp_filter_kind { FILTER_NONE = 0, FILTER_SHUFFLE, FILTER_DELTA, FILTER_DELTA_SHUFFLE };

struct comp_filter {
	enum comp_filter_kind kind;
	unsigned n; /* element size: 2, 4 or 8 (0 for FILTER_NONE) */
};

/* NULL, "" and "none" -> FILTER_NONE; "shuffle:N", "delta:N", "delta+shuffle:N" with N 2, 4
 * or 8; anything else -EINVAL. */
int comp_filter_parse(const char *spec, struct comp_filter *f);
/* len bytes src -> dst (not overlapping); undo is the exact inverse of apply. */
void comp_filter_apply(const struct comp_filter *f, void *dst, const void *src, size_t len);
void comp_filter_undo(const struct comp_filter *f, void *dst, const void *src, size_t len);
const char *comp_filter_kind_name(enum comp_filter_kind k);

#endif
