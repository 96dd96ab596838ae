/*
 * Writeback to a backing file (the kernel's CONFIG_ZRAM_WRITEBACK, after
 * Documentation/admin-guide/blockdev/zram.rst): idle / huge / incompressible
 * slots move to page-size blocks of a file, their objects are freed, and
 * reads fetch them back.  This file is the backing file: it owns the block
 * bitmap, the writeback limit, bd_stat and the file I/O (with a failure-
 * injection hook).  It sits under the core: core.c calls in here only for
 * slots flagged F_WB (read, free), writeback.c's walk calls its block and
 * limit functions, and it calls no other zram file but params.c.
 *
 * Design:
 *   - A written-back slot keeps F_WB, its block number as the handle, the
 *     bytes stored in the block as its size (page_size: the page itself;
 *     less: the compressed object, writeback_compressed) and its priority
 *     bits (which algorithm decompresses it).  It is counted in
 *     pages_stored but not in compr_data_size, as the kernel counts it.
 *   - Three phases per batch, as the kernel's writeback: under each slot's
 *     lock copy the data out and set F_PP_SLOT; write the batch with no slot
 *     lock held; then under the slot lock again commit only if F_PP_SLOT is
 *     still set and the handle is the one copied.  Any read, write, discard
 *     or recompression in between clears F_PP_SLOT or changes the handle, so
 *     a slot never ends up pointing at another version of its data, and a
 *     block is handed out only after the hole of its previous owner was
 *     punched (the bit is cleared last).
 *   - No fsync: zram's writeback is not crash safe either; data written is
 *     read back through the page cache of the same file.
 *   - The backing path is checked at create before it is opened (stat, so
 *     that a FIFO or a device with side effects on open is never opened):
 *     only a regular file or a block device, opened read-write, and a
 *     regular file with no write permission bit at all is refused even for
 *     root (whose CAP_DAC_OVERRIDE would otherwise let the store overwrite a
 *     file its owner marked read-only).  /dev/null and /dev/zero are
 *     character devices: writes vanish and reads return zeros, so the store
 *     would hand back zeros for every page it wrote there.
 *   - Every block carries a checksum (XXH3, 64 bits kept as 32, one per
 *     block in csum[], written in phase 2 while the block is still private
 *     to the writeback and published by the commit's slot unlock), checked
 *     after every read: a file that changed under the store (truncated,
 *     rewritten by someone else, a device returning other bytes) gives
 *     -EIO, never its bytes.  A failed read or a mismatch is retried
 *     (READ_TRIES in all) because the cause can be transient (an injected
 *     or real EIO, an NFS hiccup); bd_read_retries and bd_read_errors count
 *     both outcomes.  libxxhash is used header-only (XXH_INLINE_ALL), so
 *     libzs.a gains no link dependency.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/falloc.h>
#include <linux/fs.h>
#endif

#include "zram/internal.h"
#include "zram/backing.h"
#include "zs/harness.h"
#include "common/fileio.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Attempts per block read: a transient error costs a retry, not the page. */
#define READ_TRIES 3

uint32_t zram_wb_csum(const void *p, size_t len)
{
	return (uint32_t)XXH3_64bits(p, len);
}

static int refuse(char *err, size_t err_len, int rc, const char *path, const char *why)
{
	set_err(err, err_len, "backing file %s: %s", path, why);
	return rc;
}

int zram_wb_create(struct zs_zram *z, const struct zs_zram_config *cfg, char *err,
		   size_t err_len)
{
	struct zram_wb *wb;
	struct stat st;
	uint64_t blocks = z->nslots;
	int fd;

	if (cfg->writeback_batch_size > ZS_ZRAM_MAX_WB_BATCH ||
	    (cfg->writeback_compressed != 0 && cfg->writeback_compressed != 1)) {
		set_err(err, err_len, "writeback_batch_size or writeback_compressed out of "
			     "range");
		return -EINVAL;
	}
	if (!cfg->backing_path) {
		if (!cfg->writeback_batch_size && !cfg->writeback_compressed)
			return 0;
		set_err(err, err_len, "writeback options given without a backing_path");
		return -EINVAL;
	}
	fd = backing_open(cfg->backing_path, &st, err, err_len);
	if (fd < 0)
		return fd;
	if (S_ISREG(st.st_mode)) {
		/* Grow sparse to the disk size; blocks take space only while used. */
		if ((uint64_t)st.st_size < blocks * z->page_size &&
		    ftruncate(fd, (off_t)(blocks * z->page_size))) {
			int e = errno;
			close(fd);
			return refuse(err, err_len, -e, cfg->backing_path, strerror(e));
		}
	}
#ifdef BLKGETSIZE64
	else if (S_ISBLK(st.st_mode)) {
		uint64_t bytes = 0;
		if (ioctl(fd, BLKGETSIZE64, &bytes) == 0 && bytes / z->page_size < blocks)
			blocks = bytes / z->page_size;
	}
#endif
	if (!blocks) {
		close(fd);
		return refuse(err, err_len, -EINVAL, cfg->backing_path, "is smaller than one page");
	}
	wb = calloc(1, sizeof(*wb));
	if (wb) {
		wb->bitmap = calloc((blocks + 63) / 64, sizeof(uint64_t));
		wb->csum = calloc(blocks, sizeof(uint32_t));
	}
	if (!wb || !wb->bitmap || !wb->csum) {
		if (wb) {
			free(wb->bitmap);
			free(wb->csum);
		}
		free(wb);
		close(fd);
		set_err(err, err_len, "no memory for the backing file's block table");
		return -ENOMEM;
	}
	wb->fd = fd;
	wb->punch = S_ISREG(st.st_mode);
	wb->compressed = cfg->writeback_compressed;
	wb->batch = cfg->writeback_batch_size ? cfg->writeback_batch_size : 32;
	wb->nblocks = blocks;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_mutex_init(&wb->run, NULL);
	io_inject_init(&wb->inj);
	z->wb = wb;
	return 0;
}

void zram_wb_destroy(struct zs_zram *z)
{
	struct zram_wb *wb = z->wb;

	if (!wb)
		return;
	close(wb->fd);
	pthread_mutex_destroy(&wb->lock);
	pthread_mutex_destroy(&wb->run);
	io_inject_destroy(&wb->inj);
	free(wb->bitmap);
	free(wb->csum);
	free(wb);
	z->wb = NULL;
}

/* ---- blocks ---- */

/* A free block, marked used, or UINT64_MAX if the file is full. */
uint64_t zram_wb_block_alloc(struct zram_wb *wb)
{
	uint64_t r = UINT64_MAX, words = (wb->nblocks + 63) / 64;

	mutex_lock_ranked(&wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	for (uint64_t k = 0; k < words; k++) {
		uint64_t w = (wb->hint + k) % words, free_bits = ~wb->bitmap[w];

		if (w == words - 1 && wb->nblocks % 64)
			free_bits &= (1ull << (wb->nblocks % 64)) - 1;
		if (free_bits) {
			unsigned b = (unsigned)__builtin_ctzll(free_bits);

			wb->bitmap[w] |= 1ull << b;
			wb->hint = w;
			r = w * 64 + b;
			break;
		}
	}
	mutex_unlock_ranked(&wb->lock);
	return r;
}

void zram_wb_block_free(struct zs_zram *z, uint64_t blk)
{
	struct zram_wb *wb = z->wb;

	/* Punch before the bit clears: a new owner must never lose its data to our hole. */
	if (wb->punch)
		(void)fallocate(wb->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)(blk * z->page_size), (off_t)z->page_size);
	mutex_lock_ranked(&wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	wb->bitmap[blk / 64] &= ~(1ull << (blk % 64));
	mutex_unlock_ranked(&wb->lock);
}

/* ---- file I/O with failure injection ---- */

/* Whole transfer or -errno (a short transfer is -EIO). */
int zram_wb_file_io(struct zs_zram *z, int reads, void *buf, size_t len, uint64_t blk)
{
	struct zram_wb *wb = z->wb;

	if (io_inject_hit(&wb->inj, reads))
		return -EIO;
	return pio_whole(wb->fd, reads, buf, len, (off_t)(blk * z->page_size));
}

void zram_wb_inject(struct zs_zram *z, int reads, uint64_t after, uint64_t count)
{
	struct zram_wb *wb = z->wb;

	if (wb)
		io_inject_set(&wb->inj, reads, after, count);
}

/* ---- hooks from the slot code ---- */

void zram_wb_free_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f)
{
	(void)f;
	assert_internal(slot_is_locked(sl) && (f & F_WB));
	zram_wb_block_free(z, sl->handle);
	atomic_fetch_sub_explicit(&z->wb->bd_count, 1, memory_order_relaxed);
	cnt_add(s, C_PAGES_STORED, -1);
}

/* One attempt: the block's bytes into dst, checked against the checksum written with them. */
static int read_block(struct zs_zram *z, void *dst, size_t len, uint64_t blk)
{
	int rc = zram_wb_file_io(z, 1, dst, len, blk);

	if (!rc && zram_wb_csum(dst, len) != z->wb->csum[blk]) {
		atomic_fetch_add_explicit(&z->wb->csum_errors, 1, memory_order_relaxed);
		rc = -EIO;
	}
	return rc;
}

int zram_wb_read_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f,
			void *buf)
{
	size_t len = f & F_SIZE_MASK;
	assert_internal(slot_is_locked(sl) && (f & F_WB));
	/* A page-size block is the page: read it straight into the caller's buffer. */
	void *dst = len == z->page_size ? buf : s->local_copy;
	int rc;

	for (int t = 0;; t++) {
		rc = read_block(z, dst, len, sl->handle);
		if (!rc || t + 1 == READ_TRIES)
			break;
		atomic_fetch_add_explicit(&z->wb->read_retries, 1, memory_order_relaxed);
	}
	/* Checksummed bytes that do not decompress are not the page either. */
	if (!rc && dst != buf &&
	    zs_decompress((f & F_PRIO_MASK) ? s->recomp : s->comp, dst, len, buf, z->page_size) < 0)
		rc = -EIO;
	if (rc) {
		/* Nothing of a failed read reaches the caller: a careless one sees zeros, not
		 * another page's or the file's wrong bytes. */
		memset(buf, 0, z->page_size);
		atomic_fetch_add_explicit(&z->wb->read_errors, 1, memory_order_relaxed);
		return -EIO;
	}
	atomic_fetch_add_explicit(&z->wb->bd_reads, 1, memory_order_relaxed);
	return 0;
}

void zram_wb_stats(struct zs_zram *z, struct zs_zram_stats *st)
{
	if (!z->wb)
		return;
	st->bd_count = atomic_load_explicit(&z->wb->bd_count, memory_order_relaxed);
	st->bd_reads = atomic_load_explicit(&z->wb->bd_reads, memory_order_relaxed);
	st->bd_writes = atomic_load_explicit(&z->wb->bd_writes, memory_order_relaxed);
	st->bd_read_retries = atomic_load_explicit(&z->wb->read_retries, memory_order_relaxed);
	st->bd_read_errors = atomic_load_explicit(&z->wb->read_errors, memory_order_relaxed);
	st->bd_csum_errors = atomic_load_explicit(&z->wb->csum_errors, memory_order_relaxed);
}

/* ---- limit ---- */

int zram_wb_set_limit(struct zs_zram *z, int enable, uint64_t pages)
{
	if (!z->wb || (enable != 0 && enable != 1))
		return -EINVAL;
	mutex_lock_ranked(&z->wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	z->wb->limit_enable = enable;
	z->wb->limit = pages;
	mutex_unlock_ranked(&z->wb->lock);
	return 0;
}

int zram_wb_get_limit(struct zs_zram *z, int *enable, uint64_t *pages)
{
	if (!z->wb)
		return -EINVAL;
	mutex_lock_ranked(&z->wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	if (enable)
		*enable = z->wb->limit_enable;
	if (pages)
		*pages = z->wb->limit;
	mutex_unlock_ranked(&z->wb->lock);
	return 0;
}

/* Take one page of budget; 0 if the enabled limit is used up. */
int zram_wb_limit_take(struct zram_wb *wb)
{
	int ok = 1;

	mutex_lock_ranked(&wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	if (wb->limit_enable) {
		if (wb->limit)
			wb->limit--;
		else
			ok = 0;
	}
	mutex_unlock_ranked(&wb->lock);
	return ok;
}

void zram_wb_limit_give_back(struct zram_wb *wb)
{
	mutex_lock_ranked(&wb->lock, ZS_LOCK_ZRAM_WB_LOCK);
	if (wb->limit_enable)
		wb->limit++;
	mutex_unlock_ranked(&wb->lock);
}

