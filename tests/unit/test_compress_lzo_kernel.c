/*
 * Owner: "lzo is the kernel's lzo".  libzs's "lzo" must be
 * liblzo2's lzo1x_1_15 byte for byte (the variant whose sizes are the
 * kernel's "lzo"; plain lzo1x_1 is not), round-trip, and decode with
 * liblzo2's own decoder, on generated pages and on real binaries.  The
 * sizes of the generated pages are pinned to what Linux 6.18.44's zram
 * stored for them, so a change of variant fails here even without a kernel.
 * With root and zram, the pages also go through a kernel zram device: every
 * page's stored size and the store's mm_stat must equal the kernel's (no
 * --agree-style page filtering); lz4 is measured beside it (never shorter in
 * the kernel).  Without zram that part is skipped and says so.
 * ZS_LZO_PRINT_KERNEL=1 prints the kernel's sizes of the generated pages,
 * to re-pin them after changing the generator.
 */
#include <errno.h>
#include <string.h>

#include <lzo/lzo1x.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/compress.h"
#include "zs/harness.h"
#include "zs/zram.h"

#define PS 4096
#define NGEN 64

/*
 * What Linux 6.18.44's zram (comp_algorithm lzo) stored for gen_page(0..63):
 * compr_data_size after each page, 0 for same-filled, 4096 for huge.
 */
static const unsigned kernel_lzo_sizes[NGEN] = {
	1459, 85, 2721, 4096, 1583, 116, 4096, 2701,
	1466, 52, 2767, 4096, 1571, 224, 4096, 2610,
	1474, 64, 2688, 4096, 1676, 156, 4096, 2581,
	1479, 69, 2709, 4096, 1527, 0, 4096, 2583,
	1503, 54, 2827, 4096, 1582, 192, 4096, 2633,
	1510, 85, 2740, 4096, 1592, 239, 4096, 2576,
	1462, 52, 2790, 4096, 1552, 156, 4096, 2649,
	1483, 86, 2724, 4096, 1628, 229, 4096, 2590,
};

/* One generated page of eight kinds: the shapes real memory has, with matches near the end. */
static void gen_page(unsigned idx, unsigned char *p)
{
	static const char *const words[] = { "the ", "page ", "zsmalloc ", "kernel ", "swap ",
					     "of ", "and ", "compressed ", "\n", "zram ", "0x", "{ " };
	uint64_t s = 0x5eed0000u + idx;
	unsigned kind = idx % 8;

	switch (kind) {
	case 0: /* text */
		for (size_t o = 0; o < PS;) {
			const char *w = words[tu_rand(&s) % 12];
			size_t n = strlen(w);

			memcpy(p + o, w, o + n <= PS ? n : PS - o);
			o += n;
		}
		break;
	case 1: { /* a short period, a few bytes changed near the end */
		unsigned per = 1 + (unsigned)(tu_rand(&s) % 48);
		unsigned char pat[48];

		for (unsigned i = 0; i < per; i++)
			pat[i] = (unsigned char)tu_rand(&s);
		for (size_t i = 0; i < PS; i++)
			p[i] = pat[i % per];
		for (unsigned k = (unsigned)(tu_rand(&s) % 4); k; k--)
			p[PS - 1 - tu_rand(&s) % 36] = (unsigned char)tu_rand(&s);
		break;
	}
	case 2: /* LZ77-shaped: short literal runs between copies from earlier in the page */
	case 4: { /* the same with longer copies from further back */
		size_t o = 0;

		while (o < PS) {
			size_t lit = 1 + tu_rand(&s) % (kind == 2 ? 6 : 3), len;
			ptrdiff_t from;

			for (; lit && o < PS; lit--)
				p[o++] = (unsigned char)(tu_rand(&s) % 64);
			if (o < 64)
				continue;
			len = 3 + tu_rand(&s) % (kind == 2 ? 10 : 30);
			/*
			 * Kind 2 may reach up to 255 bytes back from offset 64, i.e.
			 * into the page before it: gen_pages keeps every page in one
			 * array and page 0 is not kind 2, so that is defined, and the
			 * recorded kernel sizes above depend on it.  Signed, so the
			 * index does not wrap (UBSan: pointer overflow).
			 */
			from = (ptrdiff_t)o - 1 - (ptrdiff_t)(tu_rand(&s) % (kind == 2 ? 256 : o - 1));
			for (; len && o < PS; len--)
				p[o++] = p[from++];
		}
		break;
	}
	case 3: { /* random, with an earlier piece copied to just before the end */
		for (size_t i = 0; i < PS; i += 8) {
			uint64_t r = tu_rand(&s);

			memcpy(p + i, &r, 8);
		}
		size_t len = 4 + tu_rand(&s) % 40, end = PS - tu_rand(&s) % 20;

		memmove(p + end - len, p + tu_rand(&s) % 3000, len);
		break;
	}
	case 5: /* zeros with sparse noise (one page of these is same-filled) */
		memset(p, 0, PS);
		for (unsigned k = (unsigned)(tu_rand(&s) % 40); k; k--)
			p[tu_rand(&s) % PS] = (unsigned char)tu_rand(&s);
		break;
	case 6: /* incompressible: stored raw by both */
		for (size_t i = 0; i < PS; i += 8) {
			uint64_t r = tu_rand(&s);

			memcpy(p + i, &r, 8);
		}
		break;
	default: /* text, then random, then the text again */
		gen_page(idx - 7, p);
		for (size_t i = 1024; i < 3072; i += 8) {
			uint64_t r = tu_rand(&s);

			memcpy(p + i, &r, 8);
		}
		memcpy(p + 3072, p, 1024);
		break;
	}
}

static const unsigned char *gen_pages(void)
{
	static _Alignas(PS) unsigned char pages[NGEN * PS];

	for (unsigned i = 0; i < NGEN; i++)
		gen_page(i, pages + (size_t)i * PS);
	return pages;
}

/*
 * Every page: libzs "lzo" == lzo1x_1_15 (bytes, not only size), decodes both
 * ways; counts where plain lzo1x_1 would have differed.  Returns that count.
 */
static size_t check_lzo_is_1_15(const unsigned char *pages, size_t npages, const char *what)
{
	static lzo_align_t wrk[LZO1X_1_15_MEM_COMPRESS / sizeof(lzo_align_t) + 1];
	static unsigned char ref[PS + PS / 16 + 67], out[PS];
	struct zs_comp *c;
	unsigned char *dst;
	size_t cap, other = 0, bad = 0;

	REQUIRE(lzo_init() == LZO_E_OK);
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lzo", .max_src = PS }, &c, NULL, 0) == 0);
	cap = zs_comp_bound(c, PS);
	REQUIRE(cap >= sizeof(ref));
	dst = malloc(cap);
	REQUIRE(dst);
	for (size_t i = 0; i < npages; i++) {
		const unsigned char *p = pages + i * PS;
		lzo_uint rlen = sizeof(ref), olen = PS;
		int n = zs_compress(c, p, PS, dst, cap);

		REQUIRE(lzo1x_1_15_compress(p, PS, ref, &rlen, wrk) == LZO_E_OK);
		if (n != (int)rlen || memcmp(dst, ref, rlen)) {
			if (bad++ < 5)
				fprintf(stderr, "%s page %zu: libzs lzo %d bytes, lzo1x_1_15 %lu\n",
					what, i, n, (unsigned long)rlen);
			continue;
		}
		CHECK(zs_decompress(c, dst, (size_t)n, out, PS) == PS && !memcmp(out, p, PS));
		CHECK(lzo1x_decompress_safe(dst, (lzo_uint)n, out, &olen, NULL) == LZO_E_OK &&
		      olen == PS && !memcmp(out, p, PS));
		rlen = sizeof(ref);
		REQUIRE(lzo1x_1_compress(p, PS, ref, &rlen, wrk) == LZO_E_OK);
		other += rlen != (lzo_uint)n;
	}
	CHECK_EQ(bad, 0);
	printf("  %-24s %5zu pages: lzo == lzo1x_1_15 on all %s; lzo1x_1 differs on %zu\n", what,
	       npages, bad ? "but some" : "of them", other);
	free(dst);
	zs_comp_destroy(c);
	return other;
}

/* What a libzs zram store keeps for each page (0 same-filled, page size raw), as mm_stat counts it. */
static void store_sizes(const char *comp, size_t huge, const unsigned char *pages, size_t npages,
			uint32_t *sz)
{
	struct zs_comp *c;
	unsigned char *buf;

	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = comp, .max_src = PS }, &c, NULL, 0) == 0);
	buf = malloc(zs_comp_bound(c, PS));
	REQUIRE(buf);
	for (size_t i = 0; i < npages; i++) {
		struct zs_zram_store_decision d;

		REQUIRE(zs_zram_store_decide(c, pages + i * PS, PS, huge, buf, zs_comp_bound(c, PS),
					     &d) == 0);
		sz[i] = (uint32_t)d.len;
	}
	free(buf);
	zs_comp_destroy(c);
}

static struct zs_zram *make_store(const char *comp, size_t npages)
{
	struct zs_zram_config cfg;
	struct zs_zram *z;

	zs_zram_config_init(&cfg);
	cfg.comp = comp;
	cfg.disksize = (uint64_t)npages * PS;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	return z;
}

/* Kernel zram next to the store, page by page and in mm_stat.  0, or 77 when it cannot run here. */
static int vs_kernel(const unsigned char *pages, size_t npages, const char *what)
{
	uint32_t *ks = calloc(npages, sizeof(*ks)), *us = calloc(npages, sizeof(*us));
	struct zs_zram *z = make_store("lzo", npages);
	size_t huge = zs_backend_huge_class_size(zs_zram_backend(z)), differ = 0, shorter = 0;
	struct zs_kzram_result kr;
	struct zs_zram_stats st;
	char msg[256] = "";
	int rc;

	REQUIRE(ks && us);
	rc = zs_kzram_sizes("lzo", pages, npages, ks, msg, sizeof(msg));
	if (rc) {
		printf("  kernel part skipped: %s\n", msg[0] ? msg : strerror(-rc));
		zs_zram_destroy(z);
		free(ks);
		free(us);
		return 77;
	}
	store_sizes("lzo", huge, pages, npages, us);
	for (size_t i = 0; i < npages; i++)
		if (us[i] != ks[i] && differ++ < 5)
			fprintf(stderr, "%s page %zu: kernel lzo %u, libzs %u\n", what, i, ks[i], us[i]);
	CHECK_EQ(differ, 0);

	/* The whole store against a kernel device holding the same pages. */
	for (size_t i = 0; i < npages; i++)
		CHECK_EQ(zs_zram_write(z, i, pages + i * PS), 0);
	zs_zram_get_stats(z, &st, sizeof(st));
	rc = zs_kzram_run("lzo", pages, npages, &kr, msg, sizeof(msg));
	CHECK_EQ(rc, 0);
	if (!rc) {
		CHECK_EQ(st.orig_data_size, kr.mm_stat[0]);
		CHECK_EQ(st.compr_data_size, kr.mm_stat[1]);
		CHECK_EQ(st.mem_used_total, kr.mm_stat[2]);
		CHECK_EQ(st.mem_used_max, kr.mm_stat[4]);
		CHECK_EQ(st.same_pages, kr.mm_stat[5]);
		CHECK_EQ(st.huge_pages, kr.mm_stat[7]);
		CHECK_EQ(kr.mismatches, 0);
		printf("  %-24s %5zu pages vs kernel lzo: %zu sizes differ; mm_stat compr %llu/%llu "
		       "mem_used_total %llu/%llu huge %llu/%llu (store/kernel)\n", what, npages,
		       differ, (unsigned long long)st.compr_data_size,
		       (unsigned long long)kr.mm_stat[1], (unsigned long long)st.mem_used_total,
		       (unsigned long long)kr.mm_stat[2], (unsigned long long)st.huge_pages,
		       (unsigned long long)kr.mm_stat[7]);
	}
	zs_zram_destroy(z);

	/* lz4, measured not required: liblz4 is a newer LZ4 and may only be shorter. */
	differ = 0;
	if (!zs_kzram_sizes("lz4", pages, npages, ks, msg, sizeof(msg))) {
		store_sizes("lz4", huge, pages, npages, us);
		for (size_t i = 0; i < npages; i++) {
			differ += us[i] != ks[i];
			shorter += ks[i] < us[i];
		}
		CHECK_EQ(shorter, 0);
		printf("  %-24s %5zu pages vs kernel lz4: %zu sizes differ (the kernel never shorter)\n",
		       what, npages, differ);
	}
	free(ks);
	free(us);
	return 0;
}

int main(void)
{
	const unsigned char *gen = gen_pages();
	char *paths[] = { "/usr/bin" };
	struct zs_pageset bin;
	int kernel = 0;

	printf("test_compress_lzo_kernel: liblzo2 %s\n", lzo_version_string());

	/* Offline: the variant, and the kernel's sizes pinned for the generated pages. */
	/* 17 of the 64 come out otherwise with lzo1x_1: the pinned sizes tell the variants apart. */
	CHECK(check_lzo_is_1_15(gen, NGEN, "generated") >= 8);
	if (getenv("ZS_LZO_PRINT_KERNEL")) {
		uint32_t ks[NGEN];
		char msg[256] = "";

		REQUIRE(zs_kzram_sizes("lzo", gen, NGEN, ks, msg, sizeof(msg)) == 0);
		for (unsigned i = 0; i < NGEN; i++)
			printf("%u,%s", ks[i], i % 8 == 7 ? "\n" : " ");
	}
	{
		struct zs_zram *z = make_store("lzo", NGEN);
		uint32_t us[NGEN];
		size_t off = 0;

		store_sizes("lzo", zs_backend_huge_class_size(zs_zram_backend(z)), gen, NGEN, us);
		for (unsigned i = 0; i < NGEN; i++)
			if (us[i] != kernel_lzo_sizes[i] && off++ < 5)
				fprintf(stderr, "generated page %u: libzs stores %u, kernel stored %u\n",
					i, us[i], kernel_lzo_sizes[i]);
		CHECK_EQ(off, 0);
		zs_zram_destroy(z);
	}

	/* Real binaries: lzo1x_1 differs on many of them, so this tells the variants apart. */
	REQUIRE(zs_pageset_load(&bin, PS, paths, 1, 16u << 20) == 0);
	REQUIRE(bin.npages > 100);
	CHECK(check_lzo_is_1_15(bin.data, bin.npages, "/usr/bin (16 MiB)") > bin.npages / 4);

	/* Online: the running kernel. */
	if (!zs_kzram_available()) {
		printf("  kernel part skipped: needs root and /sys/class/zram-control\n");
	} else {
		kernel = vs_kernel(gen, NGEN, "generated") == 0;
		if (kernel)
			vs_kernel(bin.data, bin.npages, "/usr/bin (16 MiB)");
	}
	zs_pageset_free(&bin);
	printf("  kernel comparison %s\n", kernel ? "ran" : "skipped");
	return tu_done();
}
