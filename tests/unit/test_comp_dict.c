/*
 * Compressor parameters: levels given as a parameter round-trip and match
 * the ":N" name; dictionaries (zstd trained with ZDICT_trainFromBuffer on
 * 4 KiB samples, zstd raw content, lz4) round-trip and actually shrink
 * pages that resemble the dictionary; output made with a dictionary does
 * not decode without it; bad levels and dictionaries are -EINVAL;
 * zs_decompress_sg decodes every split of a compressed page.
 * The pages come from a fixed seed unless ZS_SEED says otherwise:
 * docs/zram.md quotes the byte counts this test prints.
 */
#include <errno.h>
#include <string.h>
#include <zdict.h>
#include <zstd.h>

#include "testutil.h"
#include "zs/compress.h"

#define PS 4096
#define NPAGES 256

static unsigned char pages[NPAGES][PS];

/* Pages built from a shared vocabulary of records, so a dictionary can help. */
static void make_pages(uint64_t *seed)
{
	static const char *words[] = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
				       "golf", "hotel", "india", "juliet", "kilo", "lima" };
	for (int p = 0; p < NPAGES; p++) {
		size_t at = 0;
		while (at < PS) {
			char rec[96];
			/* One draw per statement: the order in which a call's arguments are
			 * evaluated is unspecified (gcc and clang differ), and the pages
			 * must be the same for one seed whatever the compiler. */
			unsigned id = (unsigned)(tu_rand(seed) % 100000);
			const char *w1 = words[tu_rand(seed) % 12];
			const char *w2 = words[tu_rand(seed) % 12];
			unsigned val = (unsigned)(tu_rand(seed) % 977);
			int n = snprintf(rec, sizeof(rec), "{\"id\":%u,\"name\":\"%s-%s\",\"v\":%u}\n",
					 id, w1, w2, val);
			size_t k = (size_t)n < PS - at ? (size_t)n : PS - at;
			memcpy(pages[p] + at, rec, k);
			at += k;
		}
	}
}

/* Total compressed bytes of every page; checks each one round-trips (and each split with sg). */
static size_t roundtrip_all(struct zs_comp *c)
{
	static unsigned char dst[2 * PS], back[PS];
	size_t total = 0;

	for (int p = 0; p < NPAGES; p++) {
		int n = zs_compress(c, pages[p], PS, dst, sizeof(dst));
		CHECK(n > 0);
		if (n <= 0)
			continue;
		total += (size_t)n;
		memset(back, 0, PS);
		CHECK_EQ(zs_decompress(c, dst, (size_t)n, back, PS), PS);
		CHECK(!memcmp(back, pages[p], PS));
		if (p % 16 == 0) {
			for (int cut = 1; cut < n; cut += 1 + n / 7) {
				const void *src[2] = { dst, dst + cut };
				size_t len[2] = { (size_t)cut, (size_t)(n - cut) };
				memset(back, 0, PS);
				CHECK_EQ(zs_decompress_sg(c, src, len, 2, back, PS), PS);
				CHECK(!memcmp(back, pages[p], PS));
			}
		}
	}
	return total;
}

static size_t with(const char *name, int level, const void *dict, size_t dict_len)
{
	struct zs_comp_params prm = { level, dict, dict_len };
	struct zs_comp *c;
	int rc = zs_comp_create(&(struct zs_comp_config){ .name = name, .max_src = PS, .level = prm.level, .dict = prm.dict, .dict_len = prm.dict_len }, &c, NULL, 0);

	CHECK_EQ(rc, 0);
	if (rc)
		return 0;
	CHECK_EQ(zs_comp_has_dict(c), dict != NULL);
	size_t t = roundtrip_all(c);
	printf("%-6s level %3d dict %6zu: %zu bytes (%s)\n", name, level, dict_len, t, zs_comp_name(c));
	zs_comp_destroy(c);
	return t;
}

/* docs/zram.md ("Dictionaries") quotes this seed's byte counts. */
#define DOC_SEED "20261125"

int main(void)
{
	if (!getenv("ZS_SEED"))
		setenv("ZS_SEED", DOC_SEED, 0);
	uint64_t seed = tu_seed("test_comp_dict");
	make_pages(&seed);

	/* Train on the first half (4 KiB samples); measure on all. */
	static size_t sizes[NPAGES / 2];
	for (int i = 0; i < NPAGES / 2; i++)
		sizes[i] = PS;
	static unsigned char dict[16384];
	size_t dl = ZDICT_trainFromBuffer(dict, sizeof(dict), pages, sizes, NPAGES / 2);
	REQUIRE(!ZDICT_isError(dl));
	printf("trained dictionary: %zu bytes\n", dl);

	/* Levels: parameter and name agree, both round-trip. */
	size_t z1 = with("zstd", 1, NULL, 0), z19 = with("zstd", 19, NULL, 0);
	size_t zneg = with("zstd", -5, NULL, 0);
	CHECK(z19 <= z1);
	CHECK(zneg >= z1);
	struct zs_comp *c;
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "zstd:19", .max_src = PS }, &c, NULL, 0) == 0);
	CHECK_EQ(roundtrip_all(c), z19);
	zs_comp_destroy(c);
	with("lz4", 8, NULL, 0);
	with("lz4hc", 12, NULL, 0);

	/* Dictionaries shrink these pages, for both algorithms. */
	size_t zplain = with("zstd", 3, NULL, 0), zdict = with("zstd", 3, dict, dl);
	size_t zraw = with("zstd", 3, pages[0], PS); /* raw-content dictionary */
	size_t lplain = with("lz4", 0, NULL, 0), ldict = with("lz4", 0, dict, dl);
	CHECK(zdict < zplain);
	CHECK(zraw < zplain);
	CHECK(ldict < lplain);
	with("zstd", 19, dict, dl);

	/* A dictionary frame does not decode without the dictionary (or with another one). */
	struct zs_comp *cd, *cp;
	struct zs_comp_params prm = { 0, dict, dl };
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = prm.level, .dict = prm.dict, .dict_len = prm.dict_len }, &cd, NULL, 0) == 0);
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS }, &cp, NULL, 0) == 0);
	static unsigned char dst[2 * PS], back[PS];
	int bad = 0;
	for (int p = 0; p < NPAGES; p++) {
		int n = zs_compress(cd, pages[p], PS, dst, sizeof(dst));
		if (zs_decompress(cp, dst, (size_t)n, back, PS) != PS || memcmp(back, pages[p], PS))
			bad++;
	}
	CHECK(bad > NPAGES / 2);
	zs_comp_destroy(cd);
	zs_comp_destroy(cp);

	/* EINVAL: levels out of range, dictionaries where none is taken or malformed. */
	struct zs_comp_params p;
	memset(&p, 0, sizeof(p));
	p.level = 23;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	CHECK_EQ(zs_comp_check_params("zstd", &p), -EINVAL);
	p.level = 13;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4hc", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.level = 65538;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.level = -1;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.level = 1;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lzo", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	memset(&p, 0, sizeof(p));
	p.dict = dict;
	p.dict_len = 0;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.dict = NULL;
	p.dict_len = 10;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.dict = dict;
	p.dict_len = ZS_COMP_MAX_DICT + 1;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	p.dict_len = dl;
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lzo", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4hc", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	/* zstd's dictionary magic with a corrupt body: libzstd refuses it. */
	static unsigned char broken[256];
	memcpy(broken, dict, 8);
	memset(broken + 8, 0xff, sizeof(broken) - 8);
	p.dict = broken;
	p.dict_len = sizeof(broken);
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	CHECK(c == NULL);
	/* The boundaries, just inside and just outside (names and parameters agree). */
	char name[32];
	snprintf(name, sizeof(name), "zstd:%d", ZSTD_minCLevel());
	CHECK_EQ(zs_comp_check(name), 0);
	snprintf(name, sizeof(name), "zstd:%d", ZSTD_minCLevel() - 1);
	CHECK_EQ(zs_comp_check(name), -EINVAL);
	snprintf(name, sizeof(name), "zstd:%d", ZSTD_maxCLevel());
	CHECK_EQ(zs_comp_check(name), 0);
	memset(&p, 0, sizeof(p));
	p.level = ZSTD_minCLevel();
	CHECK_EQ(zs_comp_check_params("zstd", &p), 0);
	p.level = ZSTD_minCLevel() - 1;
	CHECK_EQ(zs_comp_check_params("zstd", &p), -EINVAL);
	p.level = ZSTD_maxCLevel();
	CHECK_EQ(zs_comp_check_params("zstd", &p), 0);
	p.level = 65537;
	CHECK_EQ(zs_comp_check_params("lz4", &p), 0);
	p.level = 1;
	CHECK_EQ(zs_comp_check_params("lz4hc", &p), 0);
	CHECK_EQ(zs_comp_check_params("lz4", &p), 0);
	p.level = 0; /* the name's level */
	CHECK_EQ(zs_comp_check_params("lzo", &p), 0);
	CHECK_EQ(zs_comp_check_params("lz4hc:0", &p), -EINVAL);
	/* NULL params is zs_comp_create; a level replaces the name's ":N", 0 keeps it. */
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "zstd:19", .max_src = PS }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_name(c), "zstd:19"));
	CHECK(!zs_comp_has_dict(c));
	zs_comp_destroy(c);
	memset(&p, 0, sizeof(p));
	p.level = 5;
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "zstd:19", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_name(c), "zstd:5"));
	zs_comp_destroy(c);
	p.level = 0;
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4hc:3", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0) == 0);
	CHECK(!strcmp(zs_comp_name(c), "lz4hc:3"));
	zs_comp_destroy(c);
	/* A dictionary of exactly ZS_COMP_MAX_DICT bytes: zstd (raw content) and lz4 take it. */
	static unsigned char bigdict[ZS_COMP_MAX_DICT];
	for (size_t i = 0; i < sizeof(bigdict); i++)
		bigdict[i] = pages[i / PS % NPAGES][i % PS];
	p.dict = bigdict;
	p.dict_len = ZS_COMP_MAX_DICT;
	const char *dict_algos[] = { "zstd", "lz4" };
	for (int a = 0; a < 2; a++) {
		CHECK_EQ(zs_comp_check_params(dict_algos[a], &p), 0);
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = dict_algos[a], .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0) == 0);
		CHECK(zs_comp_has_dict(c));
		CHECK(roundtrip_all(c) > 0);
		zs_comp_destroy(c);
	}
	/* "The bytes are copied": a context outlives its caller's dictionary buffer (freed
	 * after being scribbled over) and compresses as one made from the intact bytes. */
	for (int a = 0; a < 2; a++) {
		unsigned char *copy = malloc(dl);
		REQUIRE(copy);
		memcpy(copy, dict, dl);
		struct zs_comp_params pc = { 0, copy, dl }, pi = { 0, dict, dl };
		struct zs_comp *early, *intact;
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = dict_algos[a], .max_src = PS, .level = pc.level, .dict = pc.dict, .dict_len = pc.dict_len }, &early, NULL, 0) == 0);
		memset(copy, 0x5a, dl);
		free(copy);
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = dict_algos[a], .max_src = PS, .level = pi.level, .dict = pi.dict, .dict_len = pi.dict_len }, &intact, NULL, 0) == 0);
		CHECK_EQ(roundtrip_all(early), roundtrip_all(intact));
		zs_comp_destroy(early);
		zs_comp_destroy(intact);
	}
	/* lz4 "uses the last 64 KiB of a longer one": the same output as from that tail alone. */
	{
		struct zs_comp *whole, *tail;
		struct zs_comp_params pt = { 0, bigdict + ZS_COMP_MAX_DICT - 65536, 65536 };
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &whole, NULL, 0) == 0);
		REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = pt.level, .dict = pt.dict, .dict_len = pt.dict_len }, &tail, NULL, 0) == 0);
		static unsigned char o1[2 * PS], o2[2 * PS];
		int differ = 0;
		for (int i = 0; i < NPAGES; i += 8) {
			int n1 = zs_compress(whole, pages[i], PS, o1, sizeof(o1));
			int n2 = zs_compress(tail, pages[i], PS, o2, sizeof(o2));
			differ += n1 <= 0 || n1 != n2 || memcmp(o1, o2, (size_t)n1);
		}
		CHECK_EQ(differ, 0);
		zs_comp_destroy(whole);
		zs_comp_destroy(tail);
	}
	p.dict_len = ZS_COMP_MAX_DICT + 1;
	CHECK_EQ(zs_comp_check_params("lz4", &p), -EINVAL);
	CHECK_EQ(zs_comp_create(&(struct zs_comp_config){ .name = "lz4", .max_src = PS, .level = p.level, .dict = p.dict, .dict_len = p.dict_len }, &c, NULL, 0), -EINVAL);
	CHECK(c == NULL);

	/* Bad sg arguments. */
	REQUIRE(zs_comp_create(&(struct zs_comp_config){ .name = "zstd", .max_src = PS }, &c, NULL, 0) == 0);
	const void *src[2] = { dst, dst };
	size_t len[2] = { 1, 1 };
	CHECK_EQ(zs_decompress_sg(c, src, len, 3, back, PS), -EINVAL);
	CHECK_EQ(zs_decompress_sg(c, src, len, 0, back, PS), -EINVAL);
	CHECK_EQ(zs_decompress_sg(c, src, len, 2, back, PS), -EINVAL); /* garbage */
	zs_comp_destroy(c);
	return tu_done();
}
