/*
 * The blob store's dictionary trainer (zs_blob_dict_train in zs/blob.h): a
 * file of its own because it is the one part of the store that allocates
 * large working memory and calls zstd's trainer, and its sizing is a policy
 * about glibc's heap (below), not about objects.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
#include <zstd.h>

#include "zs/blob.h"
#include "zs/compress.h"

/*
 * zstd's default trainer (ZDICT_trainFromBuffer: fastCover with 2^20-entry
 * tables, level 3) mallocs 4 MiB and 2 MiB tables and a 0.9 MB compression
 * context.  glibc serves chunks that size with mmap, and freeing one raises
 * the process's dynamic mmap threshold to its size and the trim threshold
 * to twice that, for the rest of the process: free heap memory up to the
 * trim threshold is no longer given back, and blocks up to the mmap
 * threshold come from the heap instead of mappings of their own (db_bench
 * with the RocksDB plugin: threshold 4 MiB after one training, 6.4 MB with
 * the plugin's samples freed too).  With 2^16-entry tables (256 + 128 KiB)
 * and level 1 the largest chunk the trainer frees is its ~530 KiB
 * compression context, about what RocksDB's own DB open frees.  Small tables collide more, and
 * zstd's optimizer then lands on a poor segment size k from its coarse grid
 * (50, 537, ...: 1.1% more lz4 bytes on db_bench's blocks), so k is chosen
 * here from a finer one, each candidate scored by zstd level 1's output on
 * the last quarter of the samples, held out of its training: as dense as
 * the default trainer's on those blocks (tests/unit/test_blob_dict_train.c).
 */
#define DICT_TABLE_LOG 16
#define DICT_DMER 6
#define DICT_LEVEL 1

/* zstd level 1's bytes for the samples with dictionary d; SIZE_MAX when it cannot tell. */
static size_t dict_score(ZSTD_CCtx *cc, const void *d, size_t dl, const unsigned char *src,
			 const size_t *sizes, size_t n, void *dst, size_t dcap)
{
	ZSTD_CDict *cd = ZSTD_createCDict(d, dl, DICT_LEVEL);
	size_t total = 0;

	if (!cd)
		return SIZE_MAX;
	for (size_t i = 0; i < n; src += sizes[i], i++) {
		size_t c = ZSTD_compress_usingCDict(cc, dst, dcap, src, sizes[i], cd);
		total += ZSTD_isError(c) ? sizes[i] : c;
	}
	ZSTD_freeCDict(cd);
	return total;
}

long zs_blob_dict_train(const void *samples, const size_t *sizes, size_t n, void *dict, size_t cap)
{
	/* Segment sizes in steps of sqrt(2) over most of zstd's own range (50..2000). */
	static const unsigned ks[] = { 50, 71, 100, 141, 200, 283, 400, 566, 800, 1131, 1600 };

	if (!samples || !sizes || !dict || !n || n > 0xffffffffu || cap < 256 || cap > ZS_COMP_MAX_DICT)
		return -EINVAL;
	/* Too few samples to hold some out: each candidate is scored on what it saw. */
	size_t ntest = n >= 8 ? n / 4 : n, ntrain = n >= 8 ? n - ntest : n;
	const unsigned char *test = samples;
	size_t maxlen = 0;
	for (size_t i = 0; i < n; i++) {
		if (n >= 8 && i < ntrain)
			test += sizes[i];
		if (sizes[i] > maxlen)
			maxlen = sizes[i];
	}
	const size_t *tsizes = sizes + (n - ntest);
	size_t dcap = ZSTD_compressBound(maxlen);
	void *cand = malloc(cap), *dst = malloc(dcap);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t best = 0, best_score = SIZE_MAX;

	for (size_t i = 0; cand && dst && cc && i < sizeof(ks) / sizeof(ks[0]); i++) {
		ZDICT_fastCover_params_t p;
		memset(&p, 0, sizeof(p));
		p.k = ks[i];
		p.d = DICT_DMER;
		p.f = DICT_TABLE_LOG;
		p.accel = 1;
		p.zParams.compressionLevel = DICT_LEVEL;
		size_t dl = ZDICT_trainFromBuffer_fastCover(cand, cap, samples, sizes, (unsigned)ntrain, p);
		if (ZDICT_isError(dl))
			continue;
		size_t sc = dict_score(cc, cand, dl, test, tsizes, ntest, dst, dcap);
		if (sc < best_score) {
			memcpy(dict, cand, dl);
			best = dl;
			best_score = sc;
		}
	}
	ZSTD_freeCCtx(cc);
	free(dst);
	free(cand);
	return best ? (long)best : -EINVAL;
}
