/*
 * The store's algorithm parameters: level and dictionary (bytes or a file)
 * for the primary and, separately, the secondary algorithm; every page
 * round-trips, also after recompression with the secondary's own
 * dictionary; the dictionary shrinks data it was trained on; out-of-range
 * levels, both dictionary forms at once, dictionaries for algorithms that
 * take none, recomp parameters without recomp and unreadable paths fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zdict.h>

#include "testutil.h"
#include "zs/compress.h"
#include "zs/zram.h"

#define PS 4096
#define N 192

static unsigned char pages[N][PS], back[PS];

static void make_pages(uint64_t *seed)
{
	static const char *w[] = { "kworker", "systemd", "sshd", "bash", "python3", "nginx",
				   "postgres", "redis", "chrome", "java" };
	for (int p = 0; p < N; p++)
		for (size_t at = 0; at < PS;) {
			char rec[128];
			int n = snprintf(rec, sizeof(rec), "pid=%u comm=%s state=%c rss=%uk vm=%s\n",
					 (unsigned)(tu_rand(seed) % 32768), w[tu_rand(seed) % 10],
					 "RSDZ"[tu_rand(seed) % 4], (unsigned)(tu_rand(seed) % 99999),
					 w[tu_rand(seed) % 10]);
			size_t k = (size_t)n < PS - at ? (size_t)n : PS - at;
			memcpy(pages[p] + at, rec, k);
			at += k;
		}
}

static uint64_t store(struct zs_zram_config *cfg, int recompress)
{
	struct zs_zram *z;
	struct zs_zram_stats st;
	int rc = zs_zram_create(cfg, &z, NULL, 0);

	CHECK_EQ(rc, 0);
	if (rc)
		return 0;
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_zram_write(z, (uint64_t)i, pages[i]), 0);
	if (recompress) {
		struct zs_zram_recomp_result r;
		CHECK_EQ(zs_zram_recompress(z, ZS_ZRAM_RECOMP_ALL, 0, 0, &r), 0);
		CHECK(r.recompressed > 0);
	}
	for (int i = 0; i < N; i++) {
		memset(back, 0, PS);
		CHECK_EQ(zs_zram_read(z, (uint64_t)i, back, PS), 0);
		CHECK(!memcmp(back, pages[i], PS));
	}
	zs_zram_get_stats(z, &st, sizeof(st));
	printf("%-14s recomp %d: compr_data_size %llu\n", zs_zram_comp_name(z), recompress,
	       (unsigned long long)st.compr_data_size);
	zs_zram_destroy(z);
	return st.compr_data_size;
}

int main(void)
{
	uint64_t seed = tu_seed("test_zram_params");
	make_pages(&seed);
	static size_t sizes[N / 2];
	static unsigned char dict[8192];
	for (int i = 0; i < N / 2; i++)
		sizes[i] = PS;
	size_t dl = ZDICT_trainFromBuffer(dict, sizeof(dict), pages, sizes, N / 2);
	REQUIRE(!ZDICT_isError(dl));
	char path[] = "/tmp/zs_test_dict_XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, dict, dl) == (ssize_t)dl);
	close(fd);

	struct zs_zram_config cfg;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;

	cfg.comp = "zstd";
	uint64_t zplain = store(&cfg, 0);
	cfg.comp_dict = dict;
	cfg.comp_dict_len = dl;
	uint64_t zdict = store(&cfg, 0);
	CHECK(zdict < zplain);
	cfg.comp_dict = NULL;
	cfg.comp_dict_len = 0;
	cfg.comp_dict_path = path;
	CHECK_EQ(store(&cfg, 0), zdict); /* same bytes from the file */
	cfg.comp_level = 19;
	CHECK(store(&cfg, 0) <= zdict);
	cfg.comp_level = 0;
	cfg.comp_dict_path = NULL;

	cfg.comp = "lz4";
	uint64_t lplain = store(&cfg, 0);
	cfg.comp_dict_path = path;
	CHECK(store(&cfg, 0) < lplain);
	cfg.comp_dict_path = NULL;
	cfg.comp_level = 4;
	CHECK(store(&cfg, 0) >= lplain);
	cfg.comp_level = 0;

	/* Recompression with the secondary's own level and dictionary. */
	cfg.comp = "lz4";
	cfg.recomp = "zstd";
	cfg.recomp_level = 12;
	cfg.recomp_dict_path = path;
	CHECK(store(&cfg, 1) < lplain);

	/* EINVAL, and the errno of an unreadable file. */
	struct zs_zram *z;
	cfg.recomp_level = 23;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.recomp_level = 0;
	cfg.recomp_dict = dict;
	cfg.recomp_dict_len = dl;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL); /* bytes and path */
	cfg.recomp = NULL;
	cfg.recomp_dict_path = NULL;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL); /* recomp dict without recomp */
	cfg.recomp_dict = NULL;
	cfg.recomp_dict_len = 0;
	cfg.comp = "lzo";
	cfg.comp_dict_path = path;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.comp_dict_path = NULL;
	cfg.comp_level = 3;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.comp = "lz4hc";
	cfg.comp_level = 13;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.comp_level = -3;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	cfg.comp = "zstd";
	cfg.comp_level = -3;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	zs_zram_destroy(z);
	cfg.comp_level = 0;
	cfg.comp_dict_path = "/nonexistent/zs.dict";
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -ENOENT);
	cfg.comp_dict_path = "/tmp";  /* not a regular file */
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	/* A dictionary file holds 1..ZS_COMP_MAX_DICT bytes: empty and one byte over refused. */
	fd = open(path, O_WRONLY | O_TRUNC);
	REQUIRE(fd >= 0);
	cfg.comp_dict_path = path;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	REQUIRE(ftruncate(fd, (off_t)ZS_COMP_MAX_DICT + 1) == 0);
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	REQUIRE(ftruncate(fd, (off_t)ZS_COMP_MAX_DICT) == 0);
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);   /* zstd takes raw bytes as a dictionary */
	zs_zram_destroy(z);
	REQUIRE(ftruncate(fd, 0) == 0 && pwrite(fd, dict, 1, 0) == 1);
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), 0);
	zs_zram_destroy(z);
	close(fd);
	cfg.comp_dict_path = NULL;
	cfg.comp_dict = dict;
	cfg.comp_dict_len = ZS_COMP_MAX_DICT + 1;
	CHECK_EQ(zs_zram_create(&cfg, &z, NULL, 0), -EINVAL);
	unlink(path);
	return tu_done();
}
