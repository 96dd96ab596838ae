/*
 * The "zstd-huf" codec (zs/compress.h) and ZS_BLOB_ZSTD_HUF (zs/blob.h):
 * zstd with Huffman-coded literals at every level.  It exists for values
 * like RocksDB's db_bench blocks (random printable characters, each short
 * string repeated once), where zstd's negative levels store the literals
 * that make up most of the output raw; the test builds such values and
 * checks that the codec round-trips them, whole and split in two, that its
 * output is a plain zstd frame (the "zstd" decoder reads it), that it is
 * much smaller than zstd's at the same negative level, and that the blob
 * store takes the codec, its dictionary, and refuses a codec past it.
 * Seeded: the seed is printed, ZS_SEED reruns it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "zs/blob.h"
#include "zs/compress.h"
#include "must.h"

#define BLK 4096

/* 50-byte strings of printable characters, each followed by a copy: about half repeats. */
static void gen_block(unsigned char *b, size_t n, uint64_t *rs)
{
	size_t i = 0;

	while (i < n) {
		size_t k = 50 < n - i ? 50 : n - i;

		for (size_t j = 0; j < k; j++)
			b[i + j] = (unsigned char)(' ' + tu_rand(rs) % 95);
		i += k;
		size_t r = 50 < n - i ? 50 : n - i;
		memcpy(b + i, b + i - k, r);
		i += r;
	}
}

static struct zs_comp *comp(const char *name, const void *dict, size_t dl)
{
	struct zs_comp *c = NULL;

	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = name, .max_src = BLK,
							 .dict = dict, .dict_len = dl },
			       &c, NULL, 0) == 0);
	return c;
}

/* The codec alone: sizes against zstd at the same level, and its frames. */
static void test_codec(uint64_t *rs)
{
	static unsigned char src[BLK], out[2 * BLK], back[BLK];
	struct zs_comp *huf = comp("zstd-huf:-1", NULL, 0), *raw = comp("zstd:-1", NULL, 0);
	struct zs_comp *plain = comp("zstd", NULL, 0), *def = comp("zstd-huf", NULL, 0);
	size_t sum_huf = 0, sum_raw = 0;

	CHECK(!strcmp(zs_comp_name(huf), "zstd-huf:-1"));
	CHECK(!strcmp(zs_comp_name(def), "zstd-huf:3"));
	CHECK_EQ(zs_comp_check("zstd-huf:-5"), 0);
	CHECK_EQ(zs_comp_check("zstd-huf:99"), -EINVAL);
	CHECK_EQ(zs_comp_check("zstd-huf:x"), -EINVAL);
	for (int i = 0; i < 64; i++) {
		gen_block(src, BLK, rs);
		int n = zs_compress(huf, src, BLK, out, sizeof(out));
		REQUIRE(n > 0);
		sum_huf += (size_t)n;
		memset(back, 0, BLK);
		CHECK_EQ(zs_decompress(huf, out, (size_t)n, back, BLK), BLK);
		CHECK(!memcmp(back, src, BLK));
		/* A plain zstd frame: the other codec's decoder takes it. */
		memset(back, 0, BLK);
		CHECK_EQ(zs_decompress(plain, out, (size_t)n, back, BLK), BLK);
		CHECK(!memcmp(back, src, BLK));
		/* Split in two, as the blob store reads an object across pages. */
		const void *piece[2] = { out, out + n / 3 };
		size_t plen[2] = { (size_t)n / 3, (size_t)n - (size_t)n / 3 };
		memset(back, 0, BLK);
		CHECK_EQ(zs_decompress_sg(huf, piece, plen, 2, back, BLK), BLK);
		CHECK(!memcmp(back, src, BLK));
		int m = zs_compress(raw, src, BLK, out, sizeof(out));
		REQUIRE(m > 0);
		sum_raw += (size_t)m;
	}
	/* Literals at ~6.6 bits instead of 8 on about half the bytes: well over 5% smaller. */
	printf("64 blocks: zstd-huf:-1 %zu bytes, zstd:-1 %zu bytes (%.3f)\n", sum_huf, sum_raw,
	       (double)sum_huf / (double)sum_raw);
	CHECK(sum_huf * 100 < sum_raw * 95);
	zs_comp_destroy(huf);
	zs_comp_destroy(raw);
	zs_comp_destroy(plain);
	zs_comp_destroy(def);
}

static struct zs_blob *store(enum zs_blob_codec codec, int level, const void *dict, size_t dl)
{
	struct zs_blob_config cfg;
	struct zs_blob *s = NULL;
	char why[200];

	zs_blob_config_init(&cfg);
	cfg.codec = codec;
	cfg.level = level;
	cfg.dict = dict;
	cfg.dict_len = dl;
	int rc = zs_blob_create(&cfg, &s, why, sizeof(why));
	if (rc)
		fprintf(stderr, "zs_blob_create: %s\n", why);
	REQUIRE(rc == 0);
	return s;
}

/* The blob store with the codec: byte-exact values, fewer bytes stored, a dictionary. */
static void test_blob(uint64_t *rs)
{
	static unsigned char vals[32][BLK], back[BLK];
	unsigned char dict[8192];
	struct zs_blob *huf = store(ZS_BLOB_ZSTD_HUF, -1, NULL, 0), *raw = store(ZS_BLOB_ZSTD, -1, NULL, 0);
	unsigned long h[32];
	struct zs_blob_stats st_huf, st_raw;

	for (int i = 0; i < 32; i++) {
		gen_block(vals[i], BLK, rs);
		h[i] = zs_blob_put(huf, vals[i], BLK);
		REQUIRE(!ZS_IS_ERR(h[i]));
		REQUIRE(!ZS_IS_ERR(zs_blob_put(raw, vals[i], BLK)));
	}
	for (int i = 0; i < 32; i++) {
		memset(back, 0, BLK);
		CHECK_EQ(zs_blob_get(huf, h[i], back, BLK), BLK);
		CHECK(!memcmp(back, vals[i], BLK));
	}
	zs_blob_stats(huf, &st_huf, sizeof(st_huf));
	zs_blob_stats(raw, &st_raw, sizeof(st_raw));
	CHECK_EQ(st_huf.raw_objects, 0);
	CHECK(st_huf.stored_bytes * 100 < st_raw.stored_bytes * 95);
	zs_blob_destroy(huf);
	zs_blob_destroy(raw);

	/* A raw-content dictionary: accepted, and values still byte-exact. */
	memcpy(dict, vals[0], BLK);
	memcpy(dict + BLK, vals[1], BLK);
	huf = store(ZS_BLOB_ZSTD_HUF, -1, dict, sizeof(dict));
	unsigned long d = zs_blob_put(huf, vals[0], BLK);
	REQUIRE(!ZS_IS_ERR(d));
	memset(back, 0, BLK);
	CHECK_EQ(zs_blob_get(huf, d, back, BLK), BLK);
	CHECK(!memcmp(back, vals[0], BLK));
	zs_blob_destroy(huf);

	/* Past the last codec, or a dictionary with lz4hc: refused with a reason. */
	struct zs_blob_config cfg;
	struct zs_blob *s = (struct zs_blob *)1;
	char why[200] = "";
	zs_blob_config_init(&cfg);
	cfg.codec = (enum zs_blob_codec)(ZS_BLOB_ZSTD_HUF + 1);
	CHECK_EQ(zs_blob_create(&cfg, &s, why, sizeof(why)), -EINVAL);
	CHECK(s == NULL);
	CHECK(strstr(why, "ZS_BLOB_ZSTD_HUF") != NULL);
	zs_blob_config_init(&cfg);
	cfg.codec = ZS_BLOB_ZSTD_HUF;
	cfg.level = 99;
	CHECK_EQ(zs_blob_create(&cfg, &s, why, sizeof(why)), -EINVAL);
}

int main(void)
{
	uint64_t rs = tu_seed("test_zstd_huf");

	test_codec(&rs);
	test_blob(&rs);
	return tu_done();
}
