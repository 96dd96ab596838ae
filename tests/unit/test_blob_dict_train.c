/*
 * zs_blob_dict_train (zs/blob.h) on blocks like RocksDB db_bench's (100-byte
 * keys, values sliced from one buffer of random printable 50-byte strings
 * each repeated once, four entries a block): the dictionary it makes is as
 * dense, for lz4 and for zstd, as zstd's own default trainer's on the same
 * samples, and training leaves glibc's dynamic mmap threshold low.  glibc
 * raises that threshold to the size of any mapped chunk freed (up to 32
 * MiB) for the rest of the process; zstd's default trainer frees 4 MiB
 * tables, after which a 1 MiB malloc comes from the heap, which keeps it
 * resident after free.  Seeded: the seed is printed, ZS_SEED reruns it.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>

#include "testutil.h"
#include "malloc_probe.h"
#include "zs/blob.h"

/* ZS_TEST_SYSTEM_MALLOC: its mmap-threshold check needs glibc's own malloc (CMakeLists.txt). */

#define BUF (1u << 20)
#define SAMPLE_BYTES (6400u * 1024) /* what the RocksDB plugin gathers for a 64 KiB dictionary */
#define HELD_OUT 300
#define DICT_CAP (72u * 1024)

static unsigned char gen[BUF];

static size_t gen_block(unsigned char *b, uint64_t *rs)
{
	size_t o = 0;

	for (int e = 0; e < 4; e++) {
		for (int i = 0; i < 16; i++)
			b[o++] = (unsigned char)('0' + tu_rand(rs) % 10);
		memset(b + o, '0', 84);
		o += 84;
		memcpy(b + o, gen + tu_rand(rs) % (BUF - 1024), 1024);
		o += 1024;
		for (int i = 0; i < 10; i++)
			b[o++] = (unsigned char)tu_rand(rs);
	}
	return o;
}

/* Bytes a store of codec with dictionary d keeps for the held-out blocks. */
static unsigned long long stored(enum zs_blob_codec codec, int level, const void *d, size_t dl,
				 unsigned char (*blk)[8192], const size_t *len)
{
	struct zs_blob_config cfg;
	struct zs_blob *s = NULL;
	struct zs_blob_stats st;

	zs_blob_config_init(&cfg);
	cfg.codec = codec;
	cfg.level = level;
	cfg.dict = d;
	cfg.dict_len = dl;
	REQUIRE(zs_blob_create(&cfg, &s, NULL, 0) == 0);
	for (int i = 0; i < HELD_OUT; i++)
		REQUIRE(!ZS_IS_ERR(zs_blob_put(s, blk[i], len[i])));
	zs_blob_stats(s, &st, sizeof(st));
	zs_blob_destroy(s);
	return (unsigned long long)st.stored_bytes;
}

int main(void)
{
	uint64_t rs = tu_seed("test_blob_dict_train");
	static unsigned char held[HELD_OUT][8192], dict[DICT_CAP], ref[DICT_CAP];
	static size_t held_len[HELD_OUT], sizes[4096];
	unsigned char *samples = malloc(SAMPLE_BYTES + 8192);
	size_t n = 0, total = 0;

	REQUIRE(samples);
	for (size_t i = 0; i < BUF; i += 100) {
		unsigned char s[50];
		for (int j = 0; j < 50; j++)
			s[j] = (unsigned char)(' ' + tu_rand(&rs) % 95);
		for (size_t j = 0; j < 100 && i + j < BUF; j++)
			gen[i + j] = s[j % 50];
	}
	while (total < SAMPLE_BYTES) {
		sizes[n] = gen_block(samples + total, &rs);
		total += sizes[n++];
	}
	for (int i = 0; i < HELD_OUT; i++)
		held_len[i] = gen_block(held[i], &rs);

	int glibc = tu_glibc_malloc();
	long dl = zs_blob_dict_train(samples, sizes, n, dict, sizeof(dict));
	REQUIRE(dl > 0);
	if (glibc) {
		/* zstd's default trainer leaves the threshold at 4 MiB (a 1 MiB block from the heap). */
		int m = tu_malloc_mapped((size_t)1 << 20, 1);
		printf("after training: a 1 MiB malloc is %s\n", m ? "mapped" : "from the heap");
		CHECK(m);
	} else {
		printf("malloc is not glibc's (or is instrumented): mmap threshold not checked\n");
	}

	size_t rl = ZDICT_trainFromBuffer(ref, sizeof(ref), samples, sizes, (unsigned)n);
	REQUIRE(!ZDICT_isError(rl));
	/* lz4 uses a dictionary's last 64 KiB. */
	const unsigned char *d64 = dict + ((size_t)dl > 65536 ? (size_t)dl - 65536 : 0);
	const unsigned char *r64 = ref + (rl > 65536 ? rl - 65536 : 0);
	size_t d64l = (size_t)dl > 65536 ? 65536 : (size_t)dl, r64l = rl > 65536 ? 65536 : rl;
	unsigned long long lz_plain = stored(ZS_BLOB_LZ4, 0, NULL, 0, held, held_len);
	unsigned long long lz_new = stored(ZS_BLOB_LZ4, 0, d64, d64l, held, held_len);
	unsigned long long lz_ref = stored(ZS_BLOB_LZ4, 0, r64, r64l, held, held_len);
	unsigned long long zs_new = stored(ZS_BLOB_ZSTD, 1, dict, (size_t)dl, held, held_len);
	unsigned long long zs_ref = stored(ZS_BLOB_ZSTD, 1, ref, rl, held, held_len);
	printf("%zu samples (%zu B), %d held-out blocks: lz4 %llu B plain, %llu with this dictionary "
	       "(%ld B), %llu with zstd's default trainer's (%zu B); zstd 1: %llu / %llu\n",
	       n, total, HELD_OUT, lz_plain, lz_new, dl, lz_ref, rl, zs_new, zs_ref);
	CHECK(lz_new * 100 < lz_plain * 97);
	CHECK(lz_new * 1000 <= lz_ref * 1005);
	CHECK(zs_new * 1000 <= zs_ref * 1010);
	free(samples);
	return tu_done();
}
