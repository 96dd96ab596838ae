/*
 * Compressor interface tests: every algorithm round-trips the pages of real
 * files (binaries and text) and edge pages (zeros, random), names and levels
 * parse as documented, and bad input returns errors instead of crashing.
 */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zs/compress.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define PS 4096

static const char *const algos[] = { "lz4", "lz4:8", "lz4hc", "lz4hc:3", "zstd", "zstd:1",
				     "zstd:-5", "zstd:9", "lzo", NULL };

static void roundtrip_pages(const char *name, const struct zs_pageset *ps, uint64_t *seed)
{
	struct zs_comp *c;
	unsigned char *dst, out[PS];
	size_t cap;
	unsigned long bad = 0, fit_bad = 0;
	uint64_t in = 0, comp = 0;

	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = name, .max_src = PS }, &c, NULL, 0) == 0);
	cap = zs_comp_bound(c, PS);
	CHECK(cap >= PS);
	dst = malloc(cap);
	REQUIRE(dst);
	for (size_t i = 0; i < ps->npages; i++) {
		const unsigned char *src = ps->data + i * PS;
		int n = zs_compress(c, src, PS, dst, cap);

		if (n <= 0 || zs_decompress(c, dst, (size_t)n, out, PS) != PS || memcmp(out, src, PS)) {
			bad++;
			continue;
		}
		in += PS;
		comp += (uint64_t)n;
		/* -ENOSPC means "does not fit": dst_cap of exactly n takes the same n bytes,
		 * n - 1 is refused (every algorithm, zstd and lzo included). */
		if (i % 16 == 0) {
			static unsigned char exact[2 * PS];
			int m = zs_compress(c, src, PS, exact, (size_t)n);
			if (m != n || memcmp(exact, dst, (size_t)n))
				fit_bad++;
			if (zs_compress(c, src, PS, exact, (size_t)n - 1) != -ENOSPC)
				fit_bad++;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(fit_bad, 0);
	printf("  %-8s %6zu pages  ratio %.2f\n", zs_comp_name(c), ps->npages,
	       comp ? (double)in / (double)comp : 0.0);

	/* Random bytes are incompressible: output must still fit the bound and round-trip. */
	{
		unsigned char rnd[PS];
		int n;

		for (size_t i = 0; i < PS; i += 8) {
			uint64_t r = tu_rand(seed);
			memcpy(rnd + i, &r, 8);
		}
		n = zs_compress(c, rnd, PS, dst, cap);
		CHECK(n > 0 && (size_t)n <= cap);
		CHECK(n > 0 && zs_decompress(c, dst, (size_t)n, out, PS) == PS && !memcmp(out, rnd, PS));
		/* A too-small destination fails cleanly. */
		CHECK_EQ(zs_compress(c, rnd, PS, dst, 64), -ENOSPC);
		/* Corrupt / truncated input and a wrong length are errors. */
		memset(dst, 0xff, 32);
		CHECK(zs_decompress(c, dst, 32, out, PS) < 0);
		CHECK(zs_decompress(c, dst, 0, out, PS) < 0);
		/* ... and the code is the documented one. */
		CHECK_EQ(zs_decompress(c, dst, 32, out, PS), -EINVAL);
		CHECK_EQ(zs_decompress(c, dst, 0, out, PS), -EINVAL);
		/* zs_decompress_sg: a total past zs_comp_bound(max_src) is refused. */
		const void *sp[2] = { dst, dst };
		size_t sl[2] = { cap, 1 };
		CHECK_EQ(zs_decompress_sg(c, sp, sl, 2, out, PS), -EINVAL);
		sl[0] = cap + 1;
		CHECK_EQ(zs_decompress_sg(c, sp, sl, 1, out, PS), -EINVAL);
	}
	{
		unsigned char zero[PS] = { 0 };
		int n = zs_compress(c, zero, PS, dst, cap);

		CHECK(n > 0 && n < 200);
		CHECK(n > 0 && zs_decompress(c, dst, (size_t)n, out, PS - 1) < 0);
		CHECK(n > 0 && zs_decompress(c, dst, (size_t)n, out, PS - 1) == -EINVAL);
		/* Longer than the original is a length mismatch too. */
		static unsigned char big[PS + 1];
		CHECK(n > 0 && zs_decompress(c, dst, (size_t)n, big, PS + 1) == -EINVAL);
		CHECK_EQ(zs_compress(c, zero, PS + 1, dst, cap), -EINVAL);  /* over max_src */
		CHECK_EQ(zs_compress(c, zero, 0, dst, cap), -EINVAL);
	}
	free(dst);
	zs_comp_destroy(c);
}

int main(void)
{
	uint64_t seed = tu_seed("test_compress");
	char *paths[] = { "/usr/bin", "/usr/include" };
	struct zs_pageset bin, txt;
	struct zs_comp *c;

	/* Names. */
	CHECK_EQ(zs_comp_check("lz4"), 0);
	CHECK_EQ(zs_comp_check("zstd:19"), 0);
	CHECK_EQ(zs_comp_check("zstd:999"), -EINVAL);
	CHECK_EQ(zs_comp_check("zstd:"), -EINVAL);
	CHECK_EQ(zs_comp_check("zstd:3x"), -EINVAL);
	CHECK_EQ(zs_comp_check("lzo:1"), -EINVAL);
	CHECK_EQ(zs_comp_check("lzo-rle"), -EOPNOTSUPP);
	CHECK_EQ(zs_comp_check("deflate"), -EINVAL);
	CHECK_EQ(zs_comp_check(""), -EINVAL);
	CHECK_EQ(zs_comp_check(NULL), -EINVAL);
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "nope", .max_src = PS }, &c, NULL, 0), -EINVAL);
	CHECK(c == NULL);
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = 0 }, &c, NULL, 0), -EINVAL);
	/* zs_comp_check returns what zs_comp_create would, success and each error alike. */
	{
		static const char *const names[] = { "lz4", "lz4:65537", "lz4:65538", "lz4:0",
						     "lz4hc:12", "lz4hc:13", "zstd:-1", "zstd:3x",
						     "lzo", "lzo:1", "lzo-rle", "deflate", "", "lz4:" };
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			struct zs_comp *cc = (struct zs_comp *)&cc;
			int want = zs_comp_check(names[i]), rc = zs_comp_create(&(struct zs_comp_config){ .name = names[i], .max_src = PS }, &cc, NULL, 0);
			if (rc != want)
				fprintf(stderr, "\"%s\": check %d, create %d\n", names[i], want, rc);
			CHECK_EQ(rc, want);
			CHECK(rc == 0 ? cc != NULL : cc == NULL);
			if (rc == 0)
				zs_comp_destroy(cc);
		}
	}
	/* max_src 1..ZS_COMP_MAX_SRC: the smallest works. */
	for (int i = 0; algos[i]; i++) {
		unsigned char one = 'x', z[64], back;
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = algos[i], .max_src = 1 }, &c, NULL, 0) == 0);
		int n = zs_compress(c, &one, 1, z, sizeof(z));
		CHECK(n > 0 && zs_decompress(c, z, (size_t)n, &back, 1) == 1 && back == 'x');
		CHECK_EQ(zs_compress(c, z, 2, z, sizeof(z)), -EINVAL); /* over max_src */
		zs_comp_destroy(c);
	}
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_name(c), "zstd:3"));
	zs_comp_destroy(c);
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4hc", .max_src = PS }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_name(c), "lz4hc:9"));
	zs_comp_destroy(c);
	{
		const char *const *names = zs_comp_names();
		int n = 0;

		while (names[n])
			CHECK_EQ(zs_comp_check(names[n++]), 0);
		CHECK_EQ(n, 5);
	}

	/* Real pages: a slice of binaries and of text. */
	REQUIRE(zs_pageset_load(&bin, PS, &paths[0], 1, 8u << 20) == 0);
	REQUIRE(zs_pageset_load(&txt, PS, &paths[1], 1, 4u << 20) == 0);
	REQUIRE(bin.npages > 100 && txt.npages > 100);
	for (int i = 0; algos[i]; i++) {
		roundtrip_pages(algos[i], &bin, &seed);
		roundtrip_pages(algos[i], &txt, &seed);
	}
	zs_pageset_free(&bin);
	zs_pageset_free(&txt);
	return tu_done();
}
