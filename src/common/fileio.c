/*
 * Backing files (fileio.h): the check and open, and the I/O with failure
 * injection - the one copy that zram's and zswap's writeback both call.
 */
#include "common/fileio.h"

#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void io_inject_init(struct zs_io_inject *in)
{
	pthread_mutex_init(&in->lock, NULL);
	atomic_init(&in->any, 0);
	in->on[0] = in->on[1] = 0;
	in->after[0] = in->after[1] = in->count[0] = in->count[1] = 0;
}

void io_inject_destroy(struct zs_io_inject *in)
{
	pthread_mutex_destroy(&in->lock);
}

void io_inject_set(struct zs_io_inject *in, int reads, uint64_t after, uint64_t count)
{
	reads = !!reads;
	pthread_mutex_lock(&in->lock);
	in->on[reads] = after != UINT64_MAX;
	in->after[reads] = after;
	in->count[reads] = count;
	atomic_store_explicit(&in->any, in->on[0] || in->on[1], memory_order_relaxed);
	pthread_mutex_unlock(&in->lock);
}

int io_inject_hit(struct zs_io_inject *in, int reads)
{
	int fail = 0;

	if (!atomic_load_explicit(&in->any, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&in->lock);
	if (in->on[reads]) {
		if (in->after[reads]) {
			in->after[reads]--;
		} else {
			fail = 1;
			if (in->count[reads] && !--in->count[reads])
				in->on[reads] = 0;
		}
	}
	pthread_mutex_unlock(&in->lock);
	return fail;
}

int pio_whole(int fd, int reads, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = reads ? pread(fd, (char *)buf + done, len - done, off + (off_t)done)
				  : pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int backing_refuse(char *err, size_t err_len, int rc, const char *path, const char *why)
{
	set_err(err, err_len, "backing file %s: %s", path, why);
	return rc;
}

int backing_open(const char *path, struct stat *st, char *err, size_t err_len)
{
	struct stat st2;
	int fd;

	if (stat(path, st))
		return backing_refuse(err, err_len, -errno, path, strerror(errno));
	/* By type before opening: a FIFO or a character device is never opened at all. */
	if (S_ISDIR(st->st_mode))
		return backing_refuse(err, err_len, -EINVAL, path, "is a directory (needs a regular file "
			      "or a block device)");
	if (S_ISCHR(st->st_mode))
		return backing_refuse(err, err_len, -EINVAL, path, "is a character device, which cannot "
			      "read back what is written to it (needs a regular file or a block "
			      "device)");
	if (S_ISFIFO(st->st_mode))
		return backing_refuse(err, err_len, -EINVAL, path, "is a FIFO (needs a regular file or a "
			      "block device)");
	if (!S_ISREG(st->st_mode) && !S_ISBLK(st->st_mode))
		return backing_refuse(err, err_len, -EINVAL, path, "is not a regular file or a block "
			      "device");
	if (!(st->st_mode & 0222))
		return backing_refuse(err, err_len, -EACCES, path, "is read-only (no write permission "
			      "bit; refused even for root)");
	/* O_EXCL on a block device is Linux's exclusive open, as the kernel's backing_dev
	 * claims its device: a mounted or otherwise claimed disk is refused (EBUSY). */
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | (S_ISBLK(st->st_mode) ? O_EXCL : 0));
	if (fd < 0) {
		int e = errno;

		return backing_refuse(err, err_len, -e, path, e == EROFS ? "is on a read-only file system"
			      : e == EACCES || e == EPERM ? "cannot be opened for writing"
			      : e == EBUSY ? "is in use (mounted or claimed by another program)"
			      : strerror(e));
	}
	/* The path may have been replaced between stat and open: judge what was opened. */
	if (fstat(fd, &st2) || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
		close(fd);
		return backing_refuse(err, err_len, -EINVAL, path, "changed while being opened");
	}
	return fd;
}
