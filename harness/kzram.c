/*
 * The kernel's zram as a measuring stick: a fresh device from zram-control,
 * the same pages written and read with 4 KiB O_DIRECT I/O (one bio per page,
 * the path swap takes; by T threads on disjoint ranges of the one device for
 * the scaling rows), mm_stat read in between.  The harness's one driver of
 * kernel zram devices: zs_kzram_dev_* make and remove them for zs_kzram_run*
 * here, `zs record` and bench_region's swap device, so every caller drives
 * the kernel the same way.  A device is always removed again, also on error.
 */
#include "zs/zram.h"
#include "zs/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "common/err.h"

#define KPAGE 4096
#define CTL "/sys/class/zram-control"

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int read_u64s(const char *path, uint64_t *v, int n)
{
	char buf[512], *p = buf, *end;
	int rc = zs_sysfs_read(path, buf, sizeof(buf));

	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return -EINVAL;
		p = end;
	}
	return 0;
}

int zs_kzram_available(void)
{
	return geteuid() == 0 && access(CTL "/hot_add", R_OK) == 0 &&
	       access(CTL "/hot_remove", W_OK) == 0;
}

/* devtmpfs normally creates the node; make one ourselves if it has not appeared. */
static int open_dev(int dev, char *node, size_t len, int *made)
{
	char path[128], buf[64];
	unsigned maj, min;

	*made = 0;
	snprintf(node, len, "/dev/zram%d", dev);
	for (int i = 0; i < 100; i++) {
		int fd = open(node, O_RDWR | O_DIRECT | O_CLOEXEC);

		if (fd >= 0 || errno != ENOENT)
			return fd >= 0 ? fd : -errno;
		usleep(10000);
	}
	snprintf(path, sizeof(path), "/sys/block/zram%d/dev", dev);
	if (zs_sysfs_read(path, buf, sizeof(buf)) || sscanf(buf, "%u:%u", &maj, &min) != 2)
		return -ENOENT;
	snprintf(node, len, "/tmp/zs-kzram%d-%d", dev, (int)getpid());
	unlink(node);
	if (mknod(node, S_IFBLK | 0600, makedev(maj, min)))
		return -errno;
	*made = 1;
	{
		int fd = open(node, O_RDWR | O_DIRECT | O_CLOEXEC);

		return fd >= 0 ? fd : -errno;
	}
}

static void dev_reset(struct zs_kzram_dev *k)
{
	k->dev = -1;
	k->fd = -1;
	k->made = 0;
	k->node[0] = k->reset_path[0] = k->num[0] = 0;
}

int zs_kzram_dev_add(struct zs_kzram_dev *k, const char *comp, uint64_t disksize, int open_direct,
		     char *msg, size_t msg_len)
{
	char path[128], buf[256];
	int rc;

	dev_reset(k);
	if (!zs_kzram_available()) {
		set_err(msg, msg_len, "needs root and %s", CTL);
		return -EPERM;
	}
	if (!disksize)
		return -EINVAL;
	rc = zs_sysfs_read(CTL "/hot_add", buf, sizeof(buf));
	if (rc) {
		set_err(msg, msg_len, "hot_add: %s", strerror(-rc));
		return rc;
	}
	k->dev = atoi(buf);
	/* Prepared now: a signal handler may need them before we return. */
	snprintf(k->num, sizeof(k->num), "%d", k->dev);
	snprintf(k->reset_path, sizeof(k->reset_path), "/sys/block/zram%d/reset", k->dev);
	rc = zs_kzram_dev_set(k, "comp_algorithm", comp);
	if (rc) {
		snprintf(path, sizeof(path), "/sys/block/zram%d/comp_algorithm", k->dev);
		buf[0] = 0;
		zs_sysfs_read(path, buf, sizeof(buf));
		set_err(msg, msg_len, "kernel zram has no '%s' (has: %s)", comp, buf);
		goto fail;
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)disksize);
	rc = zs_kzram_dev_set(k, "disksize", buf);
	if (rc) {
		set_err(msg, msg_len, "disksize %s: %s", buf, strerror(-rc));
		goto fail;
	}
	if (open_direct) {
		k->fd = open_dev(k->dev, k->node, sizeof(k->node), &k->made);
		if (k->fd < 0) {
			rc = k->fd;
			k->fd = -1;
			set_err(msg, msg_len, "open %s: %s", k->node, strerror(-rc));
			goto fail;
		}
	} else {
		snprintf(k->node, sizeof(k->node), "/dev/zram%d", k->dev);
	}
	return 0;
fail:
	zs_kzram_dev_remove(k);
	return rc;
}

int zs_kzram_dev_set(const struct zs_kzram_dev *k, const char *attr, const char *val)
{
	char path[128];

	if (k->dev < 0)
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/block/zram%d/%s", k->dev, attr);
	return zs_sysfs_write(path, val);
}

int zs_kzram_dev_mm_stat(const struct zs_kzram_dev *k, uint64_t v[9])
{
	char path[128], buf[512], *p = buf, *end;

	memset(v, 0, 9 * sizeof(*v));
	if (k->dev < 0)
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/block/zram%d/mm_stat", k->dev);
	int rc = zs_sysfs_read(path, buf, sizeof(buf));
	if (rc)
		return rc;
	/* Older kernels print 8 columns (no huge_pages_since). */
	for (int i = 0; i < 9; i++) {
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return i >= 8 ? 0 : -EIO;
		p = end;
	}
	return 0;
}

void zs_kzram_dev_remove(struct zs_kzram_dev *k)
{
	if (k->fd >= 0)
		close(k->fd); /* an open device cannot be reset or removed */
	k->fd = -1;
	if (k->made)
		unlink(k->node);
	if (k->dev < 0)
		return;
	zs_sysfs_write(k->reset_path, "1");
	/* A device just closed can be busy for a moment; retry the removal briefly. */
	for (int i = 0; i < 50; i++) {
		int r = zs_sysfs_write(CTL "/hot_remove", k->num);

		if (r != -EBUSY)
			break;
		usleep(20000);
	}
	dev_reset(k);
}

/* Only open/write/close on the paths prepared by zs_kzram_dev_add. */
void zs_kzram_dev_remove_signal(const struct zs_kzram_dev *k)
{
	if (k->fd >= 0)
		close(k->fd);
	if (k->dev < 0)
		return;
	int fd = open(k->reset_path, O_WRONLY);
	if (fd >= 0) {
		ssize_t n = write(fd, "1", 1);
		(void)n;
		close(fd);
	}
	fd = open(CTL "/hot_remove", O_WRONLY);
	if (fd >= 0) {
		ssize_t n = write(fd, k->num, strlen(k->num));
		(void)n;
		close(fd);
	}
}

/* One thread's share of the I/O: pages [first, first + n) of the device. */
struct kjob {
	int fd, write;
	const unsigned char *pages;
	unsigned char *io;
	size_t first, n;
	atomic_int *go;  /* 0 wait, 1 run, -1 give up (a thread could not be started) */
	double t0, t1;
	int rc;
	size_t bad;
};

static void *kjob_run(void *arg)
{
	struct kjob *j = arg;

	int go;

	while (!(go = atomic_load_explicit(j->go, memory_order_acquire)))
		sched_yield();
	if (go < 0)
		return NULL;
	j->t0 = now_s();
	for (size_t i = j->first; i < j->first + j->n; i++) {
		ssize_t got;

		if (j->write) {
			const unsigned char *src = j->pages + i * KPAGE;

			/* Unaligned pages go through this page's own slot of the bounce buffer. */
			if ((uintptr_t)src % KPAGE) {
				memcpy(j->io + i * KPAGE, src, KPAGE);
				src = j->io + i * KPAGE;
			}
			got = pwrite(j->fd, src, KPAGE, (off_t)i * KPAGE);
		} else {
			got = pread(j->fd, j->io + i * KPAGE, KPAGE, (off_t)i * KPAGE);
		}
		if (got != KPAGE) {
			j->rc = errno ? -errno : -EIO;
			j->bad = i;
			break;
		}
	}
	j->t1 = now_s();
	return NULL;
}

/* Wall time of one pass with nt threads on disjoint contiguous ranges; 0 or -errno. */
static int kpass(int fd, int write, const unsigned char *pages, unsigned char *io, size_t npages,
		 unsigned nt, double *secs, char *msg, size_t msg_len)
{
	pthread_t tid[ZS_KZRAM_MAX_THREADS];
	struct kjob jobs[ZS_KZRAM_MAX_THREADS];
	atomic_int go = 0;
	size_t per = (npages + nt - 1) / nt;
	double t0 = 1e300, t1 = 0;
	unsigned started = 1;
	int rc = 0;

	for (unsigned k = 0; k < nt; k++) {
		size_t first = (size_t)k * per < npages ? (size_t)k * per : npages;

		jobs[k] = (struct kjob){ fd, write, pages, io, first,
					 npages - first < per ? npages - first : per, &go, 0, 0, 0, 0 };
	}
	for (unsigned k = 1; k < nt; k++) {
		if (pthread_create(&tid[k], NULL, kjob_run, &jobs[k]))
			break;
		started++;
	}
	atomic_store_explicit(&go, started < nt ? -1 : 1, memory_order_release);
	if (started == nt)
		kjob_run(&jobs[0]);
	for (unsigned k = 1; k < started; k++)
		pthread_join(tid[k], NULL);
	if (started < nt) {
		set_err(msg, msg_len, "pthread_create failed");
		return -EAGAIN;
	}
	for (unsigned k = 0; k < nt; k++) {
		t0 = jobs[k].t0 < t0 ? jobs[k].t0 : t0;
		t1 = jobs[k].t1 > t1 ? jobs[k].t1 : t1;
		if (jobs[k].rc && !rc) {
			rc = jobs[k].rc;
			set_err(msg, msg_len, "%s page %zu: %s", write ? "pwrite" : "pread",
				jobs[k].bad, strerror(-rc));
		}
	}
	*secs = t1 - t0;
	return rc;
}

int zs_kzram_run_threads(const char *comp, const unsigned char *pages, size_t npages,
			 unsigned threads, struct zs_kzram_result *res, char *msg, size_t msg_len)
{
	char path[128];
	unsigned char *io = NULL;
	struct zs_kzram_dev k;
	int dev, fd, rc;

	memset(res, 0, sizeof(*res));
	if (threads < 1 || threads > ZS_KZRAM_MAX_THREADS) {
		set_err(msg, msg_len, "threads must be 1..%d", ZS_KZRAM_MAX_THREADS);
		return -EINVAL;
	}
	rc = zs_kzram_dev_add(&k, comp, (uint64_t)npages * KPAGE, 1, msg, msg_len);
	res->dev = k.dev;
	if (rc)
		return rc;
	dev = k.dev;
	fd = k.fd;
	snprintf(res->comp, sizeof(res->comp), "%s", comp);
	/* Reads land in one prefaulted buffer and are compared after the clock stops. */
	if (posix_memalign((void **)&io, KPAGE, npages * KPAGE)) {
		rc = -ENOMEM;
		goto out;
	}
	memset(io, 0, npages * KPAGE);

	/* Writes straight from the caller's pages when they are aligned, as the store reads them. */
	rc = kpass(fd, 1, pages, io, npages, threads, &res->write_s, msg, msg_len);
	if (rc)
		goto out;

	snprintf(path, sizeof(path), "/sys/block/zram%d/mm_stat", dev);
	rc = read_u64s(path, res->mm_stat, 9);
	if (rc) {
		set_err(msg, msg_len, "mm_stat: %s", strerror(-rc));
		goto out;
	}
	snprintf(path, sizeof(path), "/sys/block/zram%d/io_stat", dev);
	read_u64s(path, res->io_stat, 4);

	rc = kpass(fd, 0, pages, io, npages, threads, &res->read_s, msg, msg_len);
	if (rc)
		goto out;
	for (size_t i = 0; i < npages; i++)
		res->mismatches += memcmp(io + i * KPAGE, pages + i * KPAGE, KPAGE) != 0;
	rc = 0;
out:
	free(io);
	zs_kzram_dev_remove(&k);
	return rc;
}

int zs_kzram_run(const char *comp, const unsigned char *pages, size_t npages,
		 struct zs_kzram_result *res, char *msg, size_t msg_len)
{
	return zs_kzram_run_threads(comp, pages, npages, 1, res, msg, msg_len);
}

int zs_kzram_sizes(const char *comp, const unsigned char *pages, size_t npages, uint32_t *sizes,
		   char *msg, size_t msg_len)
{
	char path[128];
	unsigned char *io = NULL;
	uint64_t mm[9], prev = 0;
	struct zs_kzram_dev k;
	int rc = zs_kzram_dev_add(&k, comp, (uint64_t)npages * KPAGE, 1, msg, msg_len);

	if (rc)
		return rc;
	if (posix_memalign((void **)&io, KPAGE, KPAGE)) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(path, sizeof(path), "/sys/block/zram%d/mm_stat", k.dev);
	for (size_t i = 0; i < npages; i++) {
		memcpy(io, pages + i * KPAGE, KPAGE);
		if (pwrite(k.fd, io, KPAGE, (off_t)i * KPAGE) != KPAGE) {
			rc = errno ? -errno : -EIO;
			set_err(msg, msg_len, "pwrite page %zu: %s", i, strerror(-rc));
			goto out;
		}
		rc = read_u64s(path, mm, 9);
		if (rc) {
			set_err(msg, msg_len, "mm_stat: %s", strerror(-rc));
			goto out;
		}
		sizes[i] = (uint32_t)(mm[1] - prev);
		prev = mm[1];
	}
out:
	free(io);
	zs_kzram_dev_remove(&k);
	return rc;
}
