/*
 * The backing file's state, shared by backing.c (blocks, file I/O, the
 * hooks the core calls for written-back slots) and writeback.c (the walk
 * that fills it).  Internal to src/zram.
 */
#ifndef ZS_ZRAM_BACKING_H
#define ZS_ZRAM_BACKING_H

#include <pthread.h>

#include "zram/internal.h"
#include "common/fileio.h"

struct zram_wb {
	int fd;
	int punch;                 /* regular file: free blocks with FALLOC_FL_PUNCH_HOLE */
	int compressed;
	unsigned batch;
	uint64_t nblocks;
	pthread_mutex_t lock;      /* bitmap, hint, limit */
	uint64_t *bitmap;
	uint32_t *csum;            /* per block: checksum of the bytes written there */
	uint64_t hint;
	int limit_enable;
	uint64_t limit;
	struct zs_io_inject inj;   /* zs_zram_wb_inject */
	pthread_mutex_t run;       /* one zs_zram_writeback at a time */
	_Atomic uint64_t bd_count, bd_reads, bd_writes;
	_Atomic uint64_t read_retries, read_errors, csum_errors;
};


uint32_t zram_wb_csum(const void *p, size_t len);
/* A free block, marked used, or UINT64_MAX if the file is full (takes wb->lock). */
uint64_t zram_wb_block_alloc(struct zram_wb *wb);
/* Punches the block's hole, then frees it (takes wb->lock). */
void zram_wb_block_free(struct zs_zram *z, uint64_t blk);
/* Whole transfer or -errno (a short transfer is -EIO); the injected failures first. */
int zram_wb_file_io(struct zs_zram *z, int reads, void *buf, size_t len, uint64_t blk);
/* Take one page of the writeback limit's budget; 0 if the enabled limit is used up. */
int zram_wb_limit_take(struct zram_wb *wb);
void zram_wb_limit_give_back(struct zram_wb *wb);

#endif
