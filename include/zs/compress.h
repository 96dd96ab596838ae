/*
 * libzs compressors: the algorithms zram offers (lz4, lz4hc, zstd, lzo)
 * behind one small interface, so the store, the CLI and the benchmarks pick
 * one by name and never see a library's own API.
 *
 * A context (struct zs_comp) holds one algorithm, its level and all the work
 * memory it needs, allocated once at creation: the hot path allocates
 * nothing.  A context is used by one thread at a time (the zram store keeps
 * a small pool of them, as the kernel keeps per-CPU streams); create one per
 * thread.
 *
 * Names: "lz4" (acceleration 1, as the kernel), "lz4:N" (acceleration N,
 * 1..65537), "lz4hc" / "lz4hc:N" (level 1..12, default 9), "zstd" /
 * "zstd:N" (level ZSTD_minCLevel()..ZSTD_maxCLevel() of the linked libzstd,
 * e.g. -131072..22, default 3), "lzo" (lzo1x_1_15 from liblzo2, no level),
 * "zstd-huf" / "zstd-huf:N" (zstd's levels, default 3, with Huffman-coded
 * literals at every level: libzstd's negative levels otherwise store
 * literals raw; the output is a plain zstd frame; -EOPNOTSUPP with a
 * libzstd older than 1.5.0).
 * N is a decimal integer; anything else, or a level out of range, is
 * -EINVAL.  The kernel's default "lzo-rle" is a kernel-only variant of
 * lzo1x that liblzo2 does not have; asking for it returns -EOPNOTSUPP.
 *
 * Against the kernel's compressor of the same name (measured on Linux 6.18
 * through zram; src/compress/compress.c says how):
 *  - "lzo" is exact: every page measured (387,305) compressed to the
 *    kernel's size, and a zram store matches the kernel's mm_stat field for
 *    field.
 *  - "lz4" is not: on about 5% of pages liblz4 starts a last match 12 bytes
 *    before the end, where the kernel's older LZ4 has stopped searching, and
 *    is 1-9 bytes shorter.
 *  - "zstd", "lz4hc": not checked (the kernel measured has no zram zstd or
 *    lz4hc); "zstd" at least leaves out the frame's content size, which the
 *    kernel writes.
 *  - "lzo-rle": not available (above).
 *
 * Errors are negative errno values (README.md, "Errors"): -EINVAL (unknown name, bad level,
 * corrupt input, output does not fit), -EOPNOTSUPP, -ENOMEM.
 */
#ifndef ZS_COMPRESS_H
#define ZS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>
#include "zs/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zs_comp;

/* Largest max_src: 1 MiB (a context's work memory scales with it). */
#define ZS_COMP_MAX_SRC ((size_t)1 << 20)

/*
 * A context's settings.  Fill with zs_comp_config_init, or as a literal with
 * the fields you set (struct_size 0 is taken as this library's size,
 * reserved must stay 0: docs/abi.md "Growing a config").
 */
struct zs_comp_config {
	size_t struct_size;    /* sizeof this structure (config_init sets it) or 0 */
	const char *name;      /* "lz4", "lz4hc", "zstd", "lzo", optionally ":LEVEL"
	                          (zs_comp_names); NULL -> -EINVAL */
	size_t max_src;        /* largest input, 1..ZS_COMP_MAX_SRC (a page, usually) */
	int level;             /* 0 -> the name's level; else as struct zs_comp_params */
	const void *dict;      /* NULL, or dict_len bytes (zstd, lz4; copied at create) */
	size_t dict_len;
	uint64_t reserved[2];  /* must be 0 */
};
/* Defaults: "lz4", max_src 4096, no level, no dictionary. */
ZS_API void zs_comp_config_init(struct zs_comp_config *cfg);

/*
 * Create a context: 0 and *out, or a negative errno (-EINVAL: a field out
 * of range, an unknown name, a dictionary for lz4hc/lzo or libzstd refused
 * it; -ENOMEM). On failure *out is NULL, errno is set to the positive code
 * and err (errlen bytes, truncated; nothing when err is NULL or errlen 0)
 * holds a one-line reason naming the field and its accepted range; on
 * success err is the empty string.
 * (Absorbs zs_comp_create(name, max_src, out) and zs_comp_create_params
 * of 3.x.)
 */
ZS_API int zs_comp_create(const struct zs_comp_config *cfg, struct zs_comp **out, char *err,
			  size_t errlen);
ZS_API void zs_comp_destroy(struct zs_comp *c);

/* 0 if `name` is a compressor this build can create, else the error zs_comp_create would return. */
ZS_API int zs_comp_check(const char *name);

/* The canonical name ("zstd:3", "lz4"). */
ZS_API const char *zs_comp_name(const struct zs_comp *c);

/* Worst-case output for `src_len` input bytes: a dst buffer this large never fails. */
ZS_API size_t zs_comp_bound(const struct zs_comp *c, size_t src_len);

/*
 * Compress src_len bytes into dst (dst_cap bytes).  Returns the compressed
 * length (> 0), -ENOSPC if it does not fit in dst_cap, or another -errno.
 */
ZS_API int zs_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst, size_t dst_cap);

/*
 * Decompress src_len bytes into dst, which must take exactly dst_len bytes
 * (the original length).  Returns dst_len, or -EINVAL for corrupt input or
 * a length mismatch.
 */
ZS_API int zs_decompress(struct zs_comp *c, const void *src, size_t src_len, void *dst, size_t dst_len);

/* ---- Parameters beyond the name: level and dictionary ---- */

/* Largest dictionary: 1 MiB (zstd; lz4 uses the last 64 KiB of a longer one). */
#define ZS_COMP_MAX_DICT ((size_t)1 << 20)

/*
 * level: 0 -> the name's level (or the algorithm's default); otherwise it
 * replaces the name's ":N" with the same range (lz4 1..65537, lz4hc 1..12,
 * zstd ZSTD_minCLevel()..ZSTD_maxCLevel()); lzo has no level (only 0).
 * dict/dict_len: NULL/0 -> no dictionary.  Otherwise 1..ZS_COMP_MAX_DICT
 * bytes, for "zstd" (a dictionary in zstd's format, e.g. from `zs dict
 * train` / ZDICT_trainFromBuffer, or any bytes as raw content) and "lz4"
 * (any bytes; the last 64 KiB count).  lz4hc and lzo take none.  The bytes
 * are copied (and for zstd digested once into a CDict/DDict), so the caller
 * may free them after zs_comp_create returns.  Output made with a
 * dictionary decompresses only with the same dictionary.
 * Anything out of range, a dictionary for another algorithm, a dict_len
 * without dict, or a zstd-format dictionary libzstd refuses: -EINVAL.
 */
struct zs_comp_params {
	int level;
	const void *dict;
	size_t dict_len;
};

/* The checks zs_comp_create makes without creating anything (the dictionary is not parsed). */
ZS_API int zs_comp_check_params(const char *name, const struct zs_comp_params *params);
/* 1 if the context compresses with a dictionary. */
ZS_API int zs_comp_has_dict(const struct zs_comp *c);

/*
 * Decompress input given as n pieces (1..2, e.g. from zs_obj_read_sg_begin)
 * laid end to end.  zstd streams over the pieces (ZSTD_decompressStream, no
 * copy of the input by us); the block formats (lz4, lz4hc, lzo) need their
 * input contiguous, so a split input is first copied into the context's
 * scratch buffer.  Returns as zs_decompress; -EINVAL for n outside 1..2 or
 * a total over zs_comp_bound(max_src).
 */
ZS_API int zs_decompress_sg(struct zs_comp *c, const void *const src[], const size_t src_len[], int n,
		     void *dst, size_t dst_len);

/*
 * Filters for typed data (src/compress/filter.c): a context with a filter
 * rearranges its input before compressing and undoes that after
 * decompressing, so zs_compress/zs_decompress/zs_decompress_sg still map a
 * page to an object and back; only the object's bytes differ (and decode
 * only with a context that has the same filter).  Specs, N = 2, 4 or 8 (the
 * element size in bytes; a tail of len % N bytes is left as it is):
 *   "shuffle:N"        byte j of element i goes to j * (len / N) + i (the
 *                      byte shuffle of blosc): the high bytes of small
 *                      integers line up into runs;
 *   "delta:N"          each element, as a little-endian N-byte unsigned
 *                      integer, minus the one before it (wrapping; the first
 *                      is kept): for sorted or slowly varying values;
 *   "delta+shuffle:N"  both, delta first.
 * NULL, "" and "none": no filter.  Anything else (another N, a kind not
 * above, trailing characters) is -EINVAL.
 */
ZS_API int zs_filter_check(const char *spec);
/*
 * Give context c the filter `spec` (as above; "none" removes it), before
 * using it.  Allocates one max_src buffer the first time.  0, -EINVAL (bad
 * spec: c unchanged) or -ENOMEM.
 */
ZS_API int zs_comp_set_filter(struct zs_comp *c, const char *spec);
/* The context's filter in canonical form ("shuffle:4", "none"). */
ZS_API const char *zs_comp_filter_name(const struct zs_comp *c);
/* NULL-terminated list of the base algorithm names ("lz4", "lz4hc", "zstd", "lzo"). */
ZS_API const char *const *zs_comp_names(void);

#ifdef __cplusplus
}
#endif

/*
 * 3.x source compatibility (off with ZS_NO_COMPAT3; libzs's own tree builds
 * with it off).  A program written for 3.x compiles unchanged against 4.x:
 * the calls below pick the 4.0.0 function by their argument count, so the
 * 4.0.0 symbols are the only ones in libzs.so and the old calls lose only
 * the reason text.  Not kept here: the 3.x zs_comp_create(name, max_src,
 * out) (below).  docs/abi.md, 4.0.0.
 */
#ifndef ZS_NO_COMPAT3
static inline int zs_comp_create_params(const char *name, size_t max_src,
					const struct zs_comp_params *params, struct zs_comp **out)
{
	struct zs_comp_config cfg;
	zs_comp_config_init(&cfg);
	cfg.name = name;
	cfg.max_src = max_src;
	if (params) {
		cfg.level = params->level;
		cfg.dict = params->dict;
		cfg.dict_len = params->dict_len;
	}
	return zs_comp_create(&cfg, out, (char *)0, 0);
}
/* 3.x zs_comp_create(name, max_src, out) is not kept: a compound-literal config, the usual
   4.0.0 call, has commas a macro would split.  Use zs_comp_create_params(name, max_src, NULL, out). */
#endif
#endif
