/*
 * Filters for typed data (zs/compress.h zs_comp_set_filter, zs_zram_config
 * .filter): every filter round-trips every page kind through every path
 * that makes or reads an object -- compress/decompress and the split
 * (scatter-gather) decode, the store's write/read, groups, writeback (page
 * and compressed objects) and recompression -- with 0 mismatches; the
 * store's same-filled and huge decisions are the raw page's; bad specs are
 * refused with -EINVAL and a reason; and shuffle:4 stores an int32 array
 * (small values plus a slow trend) in at most 1/1.45 of plain zstd's pool
 * memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/compress.h"
#include "zs/zram.h"

#define PS 4096

static const char *const filters[] = { "none", "shuffle:2", "shuffle:4", "shuffle:8",
				       "delta:2", "delta:4", "delta:8", "delta+shuffle:2",
				       "delta+shuffle:4", "delta+shuffle:8" };
#define NFILTERS (sizeof(filters) / sizeof(filters[0]))

enum kind { K_ZERO, K_SAME, K_RANDOM, K_TEXT, K_RECORDS, K_HEAP, K_SPARSE, K_MIXED, K_I16,
	    K_I32, K_I64, K_SORTED, K_ELF, K_NR };
static const char *const kind_names[] = { "zero", "same", "random", "text", "records", "heap",
					  "sparse", "mixed", "int16", "int32", "int64",
					  "sorted", "elf" };

static uint64_t splitmix(uint64_t i)
{
	uint64_t z = i * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int j = 0; j < n; j++)
		p[j] = (unsigned char)(v >> (8 * j));
}

/* The corpus's page kinds (python/libzs/corpus.py names most of them) plus typed arrays. */
static void make_page(unsigned char *p, enum kind k, uint64_t *rs, const unsigned char *elf,
		      size_t elf_len)
{
	static const char *const words[] = { "ka", "tomen", "rilo", "sa", "verde", "ix", "puler",
					     "ostin", "ga", "moneshi" };
	uint64_t base = tu_rand(rs);

	switch (k) {
	case K_ZERO:
		memset(p, 0, PS);
		break;
	case K_SAME:
		for (size_t i = 0; i < PS / sizeof(unsigned long); i++)
			memcpy(p + i * sizeof(unsigned long), &base, sizeof(unsigned long));
		break;
	case K_RANDOM:
		for (size_t i = 0; i < PS; i += 8)
			put_le(p + i, tu_rand(rs), 8);
		break;
	case K_TEXT:
		for (size_t i = 0; i < PS;) {
			const char *w = words[tu_rand(rs) % 10];

			for (size_t j = 0; w[j] && i < PS; j++)
				p[i++] = (unsigned char)w[j];
			if (i < PS)
				p[i++] = tu_rand(rs) % 9 ? ' ' : '\n';
		}
		break;
	case K_RECORDS:
		for (size_t i = 0; i < PS;) {
			char line[64];
			int n = snprintf(line, sizeof(line), "{\"id\":%llu,\"t\":%llu,\"v\":%u}\n",
					 (unsigned long long)(base % 100000 + i),
					 (unsigned long long)(1700000000 + i * 3),
					 (unsigned)(tu_rand(rs) % 100));

			for (int j = 0; j < n && i < PS; j++)
				p[i++] = (unsigned char)line[j];
		}
		break;
	case K_HEAP:
		for (size_t i = 0; i < PS; i += 8) {
			uint64_t r = tu_rand(rs), w;

			w = r % 4 == 0 ? 0x7f0000000000ull + (base & 0xffff0) + (r >> 52) * 16
			  : r % 4 == 1 ? r >> 56 : r % 4 == 2 ? 0 : 0x21;
			put_le(p + i, w, 8);
		}
		break;
	case K_SPARSE:
		memset(p, 0, PS);
		for (int l = 0; l < 3; l++) {
			size_t at = (tu_rand(rs) % (PS / 64)) * 64;

			for (size_t i = 0; i < 64; i += 8)
				put_le(p + at + i, tu_rand(rs), 8);
		}
		break;
	case K_MIXED:
		for (size_t i = 0; i < PS; i += 8)
			put_le(p + i, i < PS / 2 ? tu_rand(rs) : i / 64, 8);
		break;
	case K_I16:
		for (size_t i = 0; i < PS / 2; i++)
			put_le(p + 2 * i, 1000 + i / 64 + (tu_rand(rs) & 15), 2);
		break;
	case K_I32:
		for (size_t i = 0; i < PS / 4; i++)
			put_le(p + 4 * i, (base & 0xff) + i / 256 + (splitmix(base + i) >> 58), 4);
		break;
	case K_I64:
		for (size_t i = 0; i < PS / 8; i++)
			put_le(p + 8 * i, (uint64_t)-5000 + i * 3 + (tu_rand(rs) & 7), 8);
		break;
	case K_SORTED: {
		uint32_t s = (uint32_t)base;

		for (size_t i = 0; i < PS / 4; i++)
			put_le(p + 4 * i, s += (uint32_t)(tu_rand(rs) & 63), 4);
		break;
	}
	case K_ELF: {
		size_t off = elf_len > PS ? (tu_rand(rs) % (elf_len / PS)) * PS : 0;

		memset(p, 0, PS);
		memcpy(p, elf + off, elf_len - off < PS ? elf_len - off : PS);
		break;
	}
	default:
		break;
	}
}

/* A real binary's pages: the test executable itself. */
static unsigned char *load_self(size_t *len)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	unsigned char *b = malloc(1 << 20);

	*len = 0;
	if (f && b)
		*len = fread(b, 1, 1 << 20, f);
	if (f)
		fclose(f);
	return b;
}

/* ---- The compressor layer ---- */

static void test_specs(void)
{
	static const char *const bad[] = { "shuffle", "shuffle:", "shuffle:3", "shuffle:16",
					   "shuffle:04", "shuffle:4x", "Shuffle:4", "delta:1",
					   "delta:0", "delta+shuffle", "shuffle+delta:4", "bitshuffle:4",
					   "none:4", " shuffle:4", "delta:-4", "lz4" };
	struct zs_comp *c;

	for (size_t i = 0; i < NFILTERS; i++)
		CHECK_EQ(zs_filter_check(filters[i]), 0);
	CHECK_EQ(zs_filter_check(NULL), 0);
	CHECK_EQ(zs_filter_check(""), 0);
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_filter_name(c), "none"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(zs_filter_check(bad[i]), -EINVAL);
		CHECK_EQ(zs_comp_set_filter(c, bad[i]), -EINVAL);
	}
	CHECK_EQ(zs_comp_set_filter(c, "delta+shuffle:8"), 0);
	CHECK(!strcmp(zs_comp_filter_name(c), "delta+shuffle:8"));
	CHECK_EQ(zs_comp_set_filter(c, "nope"), -EINVAL); /* refused: c keeps its filter */
	CHECK(!strcmp(zs_comp_filter_name(c), "delta+shuffle:8"));
	zs_comp_destroy(c);
}

/* The documented formats (zs/compress.h), written the slow way: the filtered bytes must be
 * these on every machine (the library's SSE2 blocks and plain loops alike). */
static void reference_filter(const char *spec, const unsigned char *s, unsigned char *d, size_t len)
{
	unsigned n = spec[strlen(spec) - 1] - '0';
	int shuf = strstr(spec, "shuffle") != NULL, delta = strstr(spec, "delta") != NULL;
	size_t cnt = len / n;
	uint64_t prev = 0, mask = n == 8 ? ~0ull : (1ull << (8 * n)) - 1;

	memcpy(d, s, len);
	for (size_t i = 0; i < cnt; i++) {
		uint64_t x = 0, v;

		for (unsigned j = 0; j < n; j++)
			x |= (uint64_t)s[i * n + j] << (8 * j);
		v = delta ? (x - prev) & mask : x;
		prev = x;
		for (unsigned j = 0; j < n; j++)
			d[shuf ? j * cnt + i : i * n + j] = (unsigned char)(v >> (8 * j));
	}
}

/* Every filter x length (tails of len % N bytes) through compress, decompress and the split decode. */
static void test_comp_roundtrip(uint64_t *rs)
{
	static const char *const comps[] = { "lz4", "zstd", "lzo", "lz4hc" };
	static const size_t lens[] = { 1, 2, 3, 7, 9, 15, 17, 100, 127, 128, 129, 255, 257, 1001,
				       2056, 4095, 4096 };
	unsigned char src[PS], out[PS], obj[2 * PS], plain[2 * PS], ref[PS];
	int bad = 0;

	for (size_t ci = 0; ci < 4; ci++)
		for (size_t fi = 0; fi < NFILTERS; fi++) {
			struct zs_comp *c, *raw;

			REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = comps[ci], .max_src = PS }, &c, NULL, 0) == 0);
			REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = comps[ci], .max_src = PS }, &raw, NULL, 0) == 0);
			REQUIRE(zs_comp_set_filter(c, filters[fi]) == 0);
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				size_t len = lens[li];

				make_page(src, (enum kind)(tu_rand(rs) % K_ELF), rs, NULL, 0);
				int n = zs_compress(c, src, len, obj, sizeof(obj));

				CHECK(n > 0);
				if (n <= 0)
					continue;
				memset(out, 0xa5, sizeof(out));
				bad += zs_decompress(c, obj, (size_t)n, out, len) != (int)len ||
				       memcmp(out, src, len);
				/* The split decode (zstd streams, block formats copy) unfilters too. */
				if (n >= 2) {
					const void *parts[2] = { obj, obj + n / 2 };
					size_t plen[2] = { (size_t)n / 2, (size_t)n - (size_t)n / 2 };

					memset(out, 0x5a, sizeof(out));
					bad += zs_decompress_sg(c, parts, plen, 2, out, len) != (int)len ||
					       memcmp(out, src, len);
				}
				/* A filter is really applied: the unfiltered decode gives the filtered
				 * bytes, whose undo is the page (checked above); for "none" equal. */
				int m = zs_decompress(raw, obj, (size_t)n, plain, len);

				CHECK_EQ(m, (int)len);
				if (fi == 0) {
					CHECK(!memcmp(plain, src, len));
				} else {
					reference_filter(filters[fi], src, ref, len);
					bad += memcmp(plain, ref, len) != 0;
				}
			}
			/* A destination longer than the context's page is refused, not overrun. */
			if (fi) {
				int n = zs_compress(c, src, PS, obj, sizeof(obj));

				CHECK(n > 0);
				CHECK_EQ(zs_decompress(c, obj, (size_t)n, plain, PS + 1), -EINVAL);
			}
			zs_comp_destroy(c);
			zs_comp_destroy(raw);
		}
	CHECK_EQ(bad, 0);
}

/* ---- The store ---- */

struct mode {
	const char *name, *comp, *recomp;
	unsigned group;
	int wb;          /* 0 none; 1 pages; 2 compressed objects */
};

static int mkbacking(char *path, size_t len, uint64_t bytes)
{
	snprintf(path, len, "/tmp/zs_filter_wb_XXXXXX");
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes)) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

static uint64_t verify(struct zs_zram *z, const unsigned char *shadow, size_t npages,
		       unsigned char *buf)
{
	uint64_t bad = 0;

	for (size_t i = 0; i < npages; i++)
		bad += zs_zram_read(z, i, buf, PS) != 0 || memcmp(buf, shadow + i * PS, PS) != 0;
	return bad;
}

static void store_mode(const struct mode *m, const char *filter, uint64_t *rs,
		       const unsigned char *elf, size_t elf_len)
{
	const size_t per = 6, npages = K_NR * per;
	unsigned char *shadow = malloc(npages * PS), buf[PS];
	struct zs_zram_config cfg;
	struct zs_zram *z;
	char path[64] = "", why[256];
	uint64_t bad;

	REQUIRE(shadow);
	zs_zram_config_init_app(&cfg);
	cfg.disksize = (uint64_t)npages * PS;
	cfg.comp = m->comp;
	cfg.recomp = m->recomp;
	cfg.group_pages = m->group;
	cfg.filter = filter;
	if (m->wb) {
		REQUIRE(mkbacking(path, sizeof(path), cfg.disksize) == 0);
		cfg.backing_path = path;
		cfg.writeback_compressed = m->wb == 2;
	}
	int rc = zs_zram_create(&cfg, &z, why, sizeof(why));

	if (rc)
		fprintf(stderr, "create %s %s: %s\n", m->name, filter, why);
	REQUIRE(rc == 0);
	/* Kinds interleaved so that groups mix them. */
	for (size_t i = 0; i < npages; i++) {
		make_page(shadow + i * PS, (enum kind)(i % K_NR), rs, elf, elf_len);
		CHECK_EQ(zs_zram_write(z, i, shadow + i * PS), 0);
	}
	bad = verify(z, shadow, npages, buf);
	if (bad)
		fprintf(stderr, "%s filter %s: %llu mismatches after write\n", m->name, filter,
			(unsigned long long)bad);
	CHECK_EQ(bad, 0);
	/* Same-filled and huge are decided on the raw page (ungrouped stores: per slot). */
	if (!m->group) {
		for (size_t i = 0; i < npages; i++) {
			unsigned fl;
			size_t sz;

			REQUIRE(zs_zram_slot_info(z, i, &sz, &fl, NULL) == 0);
			if (i % K_NR == K_ZERO || i % K_NR == K_SAME)
				CHECK(fl & ZS_ZRAM_F_SAME);
			else
				CHECK(!(fl & ZS_ZRAM_F_SAME));
			if (i % K_NR == K_RANDOM)
				CHECK((fl & ZS_ZRAM_F_HUGE) && sz == PS);
		}
	}
	/* Overwrite and discard a few against the shadow. */
	for (int k = 0; k < 40; k++) {
		size_t i = tu_rand(rs) % npages;

		if (k % 5 == 0) {
			CHECK_EQ(zs_zram_discard(z, i), 0);
			memset(shadow + i * PS, 0, PS);
		} else {
			make_page(shadow + i * PS, (enum kind)(tu_rand(rs) % K_NR), rs, elf, elf_len);
			CHECK_EQ(zs_zram_write(z, i, shadow + i * PS), 0);
		}
	}
	CHECK_EQ(verify(z, shadow, npages, buf), 0);
	if (m->recomp) {
		struct zs_zram_recomp_result res;

		CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &res), 0);
		CHECK(res.scanned > 0);
		bad = verify(z, shadow, npages, buf);
		if (bad)
			fprintf(stderr, "%s filter %s: %llu mismatches after recompress\n", m->name,
				filter, (unsigned long long)bad);
		CHECK_EQ(bad, 0);
	}
	if (m->wb) {
		struct zs_zram_wb_result res;
		struct zs_zram_stats st;

		CHECK(zs_zram_mark_idle(z, 0) > 0);
		CHECK_EQ(zs_zram_writeback(z, ZS_ZRAM_WB_IDLE, 0, &res), 0);
		CHECK(res.written > 0);
		zs_zram_get_stats(z, &st, sizeof(st));
		CHECK(st.bd_count > 0);
		bad = verify(z, shadow, npages, buf);
		if (bad)
			fprintf(stderr, "%s filter %s: %llu mismatches after writeback\n", m->name,
				filter, (unsigned long long)bad);
		CHECK_EQ(bad, 0);
	}
	zs_zram_compact(z);
	CHECK_EQ(verify(z, shadow, npages, buf), 0);
	zs_zram_destroy(z);
	if (path[0])
		unlink(path);
	free(shadow);
}

static void test_store(uint64_t *rs)
{
	static const struct mode modes[] = {
		{ "lz4", "lz4", NULL, 0, 0 },
		{ "zstd", "zstd", NULL, 0, 0 },
		{ "lzo+recomp", "lzo", "zstd:9", 0, 0 },
		{ "zstd-group4", "zstd", NULL, 4, 0 },
		{ "lz4-wb", "lz4", NULL, 0, 1 },
		{ "zstd-wbcomp", "zstd", NULL, 0, 2 },
		{ "lz4-group2-recomp-wbcomp", "lz4", "zstd", 2, 2 },
	};
	size_t elf_len;
	unsigned char *elf = load_self(&elf_len);

	REQUIRE(elf && elf_len > PS);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		for (size_t f = 0; f < NFILTERS; f++)
			store_mode(&modes[m], filters[f], rs, elf, elf_len);
	free(elf);
	printf("store: %zu kinds (%s..%s) x %zu filters x %zu modes round-tripped\n", (size_t)K_NR,
	       kind_names[0], kind_names[K_NR - 1], NFILTERS, sizeof(modes) / sizeof(modes[0]));
}

static void test_store_bad_spec(void)
{
	struct zs_zram_config cfg;
	struct zs_zram *z = (void *)1;
	char why[256];

	zs_zram_config_init(&cfg);
	cfg.disksize = 1 << 20;
	cfg.filter = "shuffle:3";
	CHECK_EQ(zs_zram_create(&cfg, &z, why, sizeof(why)), -EINVAL);
	CHECK(z == NULL);
	CHECK(strstr(why, "filter") && strstr(why, "shuffle:3"));
	cfg.group_pages = 4; /* the grouped store checks before building its inner one */
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.filter = "none";
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
	zs_zram_destroy(z);
}

/* The density target: the int32 array (small values plus a slow trend) at 4 KiB pages. */
static void test_density(void)
{
	const size_t npages = 8192; /* 32 MiB: a small pool's partly filled zspages would blur the ratio */
	unsigned char *data = malloc(npages * PS);
	uint64_t mem[2];

	REQUIRE(data);
	for (size_t i = 0; i < npages * PS / 4; i++)
		put_le(data + 4 * i, i / 4096 + (splitmix(i) >> 58), 4);
	for (int f = 0; f < 2; f++) {
		struct zs_zram_config cfg;
		struct zs_zram_stats st;
		struct zs_zram *z;
		unsigned char buf[PS];

		zs_zram_config_init(&cfg);
		cfg.disksize = (uint64_t)npages * PS;
		cfg.comp = "zstd";
		cfg.filter = f ? "shuffle:4" : NULL;
		REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);
		REQUIRE(zs_zram_write_range(z, 0, npages, data) == 0);
		zs_zram_get_stats(z, &st, sizeof(st));
		mem[f] = st.mem_used_total;
		uint64_t bad = 0;
		for (size_t i = 0; i < npages; i++)
			bad += zs_zram_read(z, i, buf, PS) || memcmp(buf, data + i * PS, PS);
		CHECK_EQ(bad, 0);
		zs_zram_destroy(z);
	}
	printf("int32-trend, zstd, 4 KiB: pool %llu plain, %llu shuffle:4 (%.2fx)\n",
	       (unsigned long long)mem[0], (unsigned long long)mem[1],
	       (double)mem[0] / (double)mem[1]);
	CHECK(mem[1] * 145 <= mem[0] * 100);
	free(data);
}

int main(void)
{
	uint64_t rs = tu_seed("test_zram_filter");

	test_specs();
	test_comp_roundtrip(&rs);
	test_store_bad_spec();
	test_store(&rs);
	test_density();
	return tu_done();
}
