/*
 * Backing-file I/O shared by the stores that write pages back (zram's
 * writeback, zswap's): which files may back a store (checked and opened
 * one way for both, and for `zs zswap --backing` through the library), a
 * whole positioned transfer, and the failure
 * injection their test hooks (zs_zram_wb_inject, zs_zswap_wb_inject) arm.
 * One home, so both stores fail the same way under the same injection.
 */
#ifndef ZS_COMMON_FILEIO_H
#define ZS_COMMON_FILEIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Per direction (0 writes, 1 reads): after `after` more transfers succeed,
 * the next `count` fail (0: every one until disarmed).  `any` lets an
 * unarmed transfer skip the lock.
 */
struct zs_io_inject {
	pthread_mutex_t lock;
	_Atomic int any;
	int on[2];
	uint64_t after[2], count[2];
};

void io_inject_init(struct zs_io_inject *in);
void io_inject_destroy(struct zs_io_inject *in);
/* Arm direction `reads` (after UINT64_MAX disarms it). */
void io_inject_set(struct zs_io_inject *in, int reads, uint64_t after, uint64_t count);
/* 1 when this transfer must fail. */
int io_inject_hit(struct zs_io_inject *in, int reads);

/* len bytes at off, read (reads) or written, retried on EINTR: 0, -errno, or -EIO when short. */
int pio_whole(int fd, int reads, void *buf, size_t len, off_t off);

/*
 * Check and open a store's backing file: a regular file or a block device
 * (never a FIFO or a character device, which is not even opened), with a
 * write permission bit (refused even for root), opened O_RDWR (a block
 * device exclusively, as the kernel claims its backing_dev), and still the
 * file stat saw.  The open fd with *st filled, or -errno with a one-line
 * reason in err ("backing file PATH: why").
 */
int backing_open(const char *path, struct stat *st, char *err, size_t err_len);
#endif
