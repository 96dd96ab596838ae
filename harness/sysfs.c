/*
 * Reading and writing the kernel's one-value files (sysfs, debugfs, procfs
 * knobs) for the harness and the tools that drive the real kernel (zram
 * devices, zswap's parameters and counters): one pair of helpers where the
 * kernel-zram driver, `zs zswap` and `zs record --zswap` each had their own.
 * Only open/read/write/close/strlen: zs_sysfs_write may run in a signal
 * handler (zs_kzram_dev_remove_signal).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "zs/harness.h"

int zs_sysfs_read(const char *path, char *buf, size_t len)
{
	int fd, err;
	ssize_t n;

	if (!len)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

int zs_sysfs_write(const char *path, const char *val)
{
	size_t len = strlen(val);
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != len)
		rc = -EIO;
	close(fd);
	return rc;
}
