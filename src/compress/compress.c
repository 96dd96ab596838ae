/*
 * Compressor contexts over the Debian libraries (liblz4, libzstd, liblzo2):
 * the registry.  Owns the public zs_comp_* functions, name and parameter
 * checks, and what every algorithm shares (filters, split inputs, short
 * destinations); each algorithm is one backend_<alg>.c behind struct
 * codec_ops (compress/internal.h), listed once in `codecs` below.  Every
 * buffer an algorithm needs is allocated in zs_comp_create so that
 * compress/decompress never allocate: that is what lets the zram store keep
 * its hot path at the cost of the compressor alone.
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

#include "compress/internal.h"
#include "common/config.h"
#include "common/err.h"

/* Every algorithm, in the order zs_comp_names lists them: a new codec is one line here. */
static const struct codec_ops *const codecs[] = {
	&codec_lz4,
	&codec_lz4hc,
	&codec_zstd,
	&codec_lzo,
	&codec_zstd_huf,
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

static const char *comp_names[NCODECS + 1];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void)
{
	for (size_t i = 0; i < NCODECS; i++)
		comp_names[i] = codecs[i]->name;
}

const char *const *zs_comp_names(void)
{
	pthread_once(&names_once, names_init);
	return comp_names;
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

static int name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && !strncmp(name, want, len);
}

/* Split "algo[:level]" into a codec and level (with the codec's default). */
static int parse_name(const char *name, const struct codec_ops **ops, int *level)
{
	const char *colon;
	size_t base_len;

	if (!name)
		return -EINVAL;
	colon = strchr(name, ':');
	base_len = colon ? (size_t)(colon - name) : strlen(name);

	for (size_t i = 0; i < NCODECS; i++) {
		const struct codec_ops *o = codecs[i];
		int def, lo, hi;

		if (!name_is(name, base_len, o->name))
			continue;
		*ops = o;
		if (!o->levels) {
			*level = 0;
			return colon ? -EINVAL : 0;
		}
		o->levels(&def, &lo, &hi);
		*level = def;
		return colon ? parse_level(colon + 1, lo, hi, level) : 0;
	}
	for (size_t i = 0; i < NCODECS; i++)
		for (const char *const *r = codecs[i]->refused; r && *r; r++)
			if (name_is(name, base_len, *r))
				return -EOPNOTSUPP;
	return -EINVAL;
}

int zs_comp_check(const char *name)
{
	const struct codec_ops *ops;
	int level;

	return parse_name(name, &ops, &level);
}

/* ---- Create / destroy ---- */

/* Name plus parameters -> codec and effective level, with every range check. */
static int parse_params(const char *name, const struct zs_comp_params *p,
			const struct codec_ops **ops, int *level)
{
	int rc = parse_name(name, ops, level);

	if (rc || !p)
		return rc;
	if (p->level) {
		int def, lo, hi;

		/* The same ranges as a name's ":N". */
		if (!(*ops)->levels)
			return -EINVAL;
		(*ops)->levels(&def, &lo, &hi);
		if (p->level < lo || p->level > hi)
			return -EINVAL;
		*level = p->level;
	}
	if (!p->dict != !p->dict_len)
		return -EINVAL;
	if (p->dict && (p->dict_len > ZS_COMP_MAX_DICT || !(*ops)->takes_dict))
		return -EINVAL;
	return 0;
}

int zs_comp_check_params(const char *name, const struct zs_comp_params *params)
{
	const struct codec_ops *ops;
	int level;

	return parse_params(name, params, &ops, &level);
}

int zs_comp_has_dict(const struct zs_comp *c)
{
	return c->dict != NULL;
}

void zs_comp_config_init(struct zs_comp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->name = "lz4";
	cfg->max_src = 4096;
}

static int comp_create(const struct zs_comp_config *cfg, struct zs_comp **out, char *err,
		       size_t err_len)
{
	const struct codec_ops *ops;
	struct zs_comp *c;
	int level, rc, bad;

	if (!cfg || !out) {
		set_err(err, err_len, "zs_comp_create: %s is NULL", cfg ? "out" : "cfg");
		return -EINVAL;
	}
	*out = NULL;
	if (ZS_CONFIG_ABI_CHECK(cfg, &bad)) {
		config_abi_err(err, err_len, "zs_comp_config", cfg->struct_size, sizeof(*cfg), bad);
		return -EINVAL;
	}
	const char *name = cfg->name;
	size_t max_src = cfg->max_src;
	struct zs_comp_params pv = { .level = cfg->level, .dict = cfg->dict,
				     .dict_len = cfg->dict_len };
	const struct zs_comp_params *params = &pv;
	rc = parse_name(name, &ops, &level);
	if (rc) {
		set_err(err, err_len, "zs_comp_config.name \"%s\": not a compressor of this build "
			"(lz4, lz4hc, zstd, lzo, zstd-huf, with an optional \":LEVEL\")", name ? name : "(null)");
		return rc;
	}
	rc = parse_params(name, params, &ops, &level);
	if (rc) {
		set_err(err, err_len, "zs_comp_config.level %d / dict_len %zu refused for %s (level "
			"in the algorithm's range, 0 for lzo; dict 1..%zu bytes for zstd, zstd-huf and lz4 only)",
			cfg->level, cfg->dict_len, name, (size_t)ZS_COMP_MAX_DICT);
		return rc;
	}
	if (max_src == 0 || max_src > ZS_COMP_MAX_SRC) {
		set_err(err, err_len, "zs_comp_config.max_src %zu: must be 1..%zu", max_src,
			(size_t)ZS_COMP_MAX_SRC);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ops = ops;
	c->level = level;
	c->max_src = max_src;
	rc = ops->create(c);
	if (!rc) {
		c->sg_cap = ops->bound(max_src);
		c->sg_buf = malloc(c->sg_cap);
		if (!c->sg_buf)
			rc = -ENOMEM;
	}
	if (!rc && params->dict) {
		rc = ops->load_dict(c, params->dict, params->dict_len);
		/* Name it so stats and tools show that a dictionary is in use. */
		size_t nl = strlen(c->name);
		snprintf(c->name + nl, sizeof(c->name) - nl, "+dict");
	}
	if (!rc && ops->ready)
		rc = ops->ready(c);
	if (rc) {
		zs_comp_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

int zs_comp_create(const struct zs_comp_config *cfg, struct zs_comp **out, char *err,
		   size_t err_len)
{
	create_begin(err, err_len);
	int rc = comp_create(cfg, out, err, err_len);
	if (rc && out)
		*out = NULL;
	return create_finish("zs_comp_create", rc, err, err_len);
}

void zs_comp_destroy(struct zs_comp *c)
{
	if (!c)
		return;
	c->ops->destroy(c);
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
	return c->ops->bound(src_len);
}

/* ---- Compress / decompress ---- */

int zs_compress(struct zs_comp *c, const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	if (src_len == 0 || src_len > c->max_src)
		return -EINVAL;
	if (c->filter.kind != FILTER_NONE) {
		comp_filter_apply(&c->filter, c->fbuf, src, src_len);
		src = c->fbuf;
	}
	/* Every backend returns an int length. */
	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;
	return c->ops->compress(c, src, src_len, dst, dst_cap);
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
	return decode_done(c, c->ops->decompress(c, src, src_len, t, dst_len), dst, dst_len);
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
	if (c->ops->decompress2) {
		void *t = decode_target(c, dst, dst_len);

		if (!t)
			return -EINVAL;
		return decode_done(c, c->ops->decompress2(c, src, src_len, t, dst_len), dst,
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
