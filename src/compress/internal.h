/*
 * The compressor registry's contract with its backends: struct zs_comp (one
 * context, shared by every algorithm) and struct codec_ops (what one
 * algorithm provides).  compress.c owns the public zs_comp_* functions and
 * the table of codecs; each backend_<alg>.c owns everything that depends on
 * its library, so adding an algorithm is one backend file and one table line
 * in compress.c, and no code outside the backends tests which algorithm a
 * context runs.
 */
#ifndef ZS_COMPRESS_INTERNAL_H
#define ZS_COMPRESS_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "compress/filter.h"
#include "zs/compress.h"

struct codec_ops;

struct zs_comp {
	const struct codec_ops *ops;
	int level;            /* the codec's meaning: lz4 acceleration, lz4hc/zstd level */
	size_t max_src;
	void *work;           /* the backend's per-context memory (never NULL once created) */
	void *dict;           /* the backend's digested dictionary; NULL without one */
	unsigned char *sg_buf; /* zs_comp_bound(max_src) bytes: split inputs, short dsts */
	size_t sg_cap;
	char name[40];
	struct comp_filter filter; /* zs_comp_set_filter; kind FILTER_NONE: off */
	unsigned char *fbuf;  /* max_src bytes: the filtered page (compress) or the decoded one */
	char filter_name[20];
};

/*
 * One algorithm.  Return values follow zs/compress.h: compress gives the
 * output length or -ENOSPC (does not fit) / -EINVAL; decompress gives
 * exactly dst_len or -EINVAL.  Optional hooks are NULL when not needed.
 */
struct codec_ops {
	const char *name;              /* the name before ":level" */
	const char *const *refused;    /* related names known but not provided: -EOPNOTSUPP */
	/* The level range and default; NULL: the name takes no level. */
	void (*levels)(int *def, int *lo, int *hi);
	int takes_dict;                /* accepts zs_comp_params.dict */
	/* Allocate c->work for c->level and write c->name; 0 or -errno (c freed by the caller). */
	int (*create)(struct zs_comp *c);
	void (*destroy)(struct zs_comp *c);  /* frees c->work and c->dict */
	/* Digest a dictionary of 1..ZS_COMP_MAX_DICT bytes into c->dict (takes_dict only). */
	int (*load_dict)(struct zs_comp *c, const void *dict, size_t len);
	/* After create and load_dict: the last step of zs_comp_create (zstd sizes its tables). */
	int (*ready)(struct zs_comp *c);
	size_t (*bound)(size_t src_len);
	int (*compress)(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			size_t dst_cap);
	int (*decompress)(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			  size_t dst_len);
	/* Two pieces of one compressed input, decoded into dst without joining them;
	 * NULL: the registry joins them in sg_buf and calls decompress. */
	int (*decompress2)(struct zs_comp *c, const void *const src[2], const size_t src_len[2],
			   void *dst, size_t dst_len);
};

extern const struct codec_ops codec_lz4, codec_lz4hc, codec_zstd, codec_zstd_huf, codec_lzo;

/* lz4 and lz4hc write one format: backend_lz4.c's bound and decoder serve both. */
size_t codec_lz4_bound(size_t src_len);
int codec_lz4_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst,
			 size_t dst_len);

/*
 * zs_compress's -ENOSPC means "does not fit in dst_cap" (zs/compress.h), but
 * two libraries cannot honour a dst below their worst case: lzo1x_1_15 has
 * no output bound check at all, and zstd fails with dstSize_tooSmall on most
 * pages given exactly their compressed size (it wants room for a block's
 * worst case).  Such a dst is swapped for the context's scratch
 * (zs_comp_bound(max_src) bytes), and what fits is copied back, so the
 * result never depends on dst_cap beyond fitting.  Callers that size dst by
 * zs_comp_bound (zram, zswap, the tools) never take the copy.  Inline here,
 * beside the contract, so the backends need nothing of compress.c (which
 * needs their tables): no file cycle.
 */
static inline unsigned char *codec_worst_case_room(struct zs_comp *c, size_t src_len, void *dst,
						  size_t dst_cap)
{
	return dst_cap < c->ops->bound(src_len) ? c->sg_buf : dst;
}

/* The copy back of what fits from codec_worst_case_room's choice (-ENOSPC when it does not). */
static inline int codec_copy_if_fits(const unsigned char *out, size_t len, void *dst,
				     size_t dst_cap)
{
	if (out != dst) {
		if (len > dst_cap)
			return -ENOSPC;
		memcpy(dst, out, len);
	}
	return (int)len;
}

#endif
