/*
 * Backing-file I/O with failure injection (fileio.h): the one copy that
 * zram's and zswap's writeback both call.
 */
#include "common/fileio.h"

#include <errno.h>
#include <unistd.h>

void zs_io_inject_init(struct zs_io_inject *in)
{
	pthread_mutex_init(&in->lock, NULL);
	atomic_init(&in->any, 0);
	in->on[0] = in->on[1] = 0;
	in->after[0] = in->after[1] = in->count[0] = in->count[1] = 0;
}

void zs_io_inject_destroy(struct zs_io_inject *in)
{
	pthread_mutex_destroy(&in->lock);
}

void zs_io_inject_set(struct zs_io_inject *in, int reads, uint64_t after, uint64_t count)
{
	reads = !!reads;
	pthread_mutex_lock(&in->lock);
	in->on[reads] = after != UINT64_MAX;
	in->after[reads] = after;
	in->count[reads] = count;
	atomic_store_explicit(&in->any, in->on[0] || in->on[1], memory_order_relaxed);
	pthread_mutex_unlock(&in->lock);
}

int zs_io_inject_hit(struct zs_io_inject *in, int reads)
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

int zs_pio_whole(int fd, int reads, void *buf, size_t len, off_t off)
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
