/*
 * Direct I/O into and out of region memory while pageouts run: the kernel
 * pins the pages of an O_DIRECT buffer (GUP) and the device reads or writes
 * them by DMA, which write protection does not stop.  A pageout that copies
 * and drops such a page loses what the device writes afterwards: before the
 * fix an O_DIRECT pread returned its full count while the page kept its old
 * bytes (move path and copy path alike, every run within seconds).  The
 * region now leaves a pinned page resident, as the kernel's reclaim does.
 *
 *   read_move / read_copy    O_DIRECT pread of 1-16 file pages into random
 *                            region pages while a pager thread pages out
 *                            random runs and the whole range; every page
 *                            read is checked at once, all pages at the end
 *   write_move / write_copy  O_DIRECT pwrite from region pages to the file,
 *                            read back into private memory and checked
 *   buffered_read / buffered_write  the same without O_DIRECT (the kernel's
 *                            copy to and from user memory faults stored pages
 *                            in as the program's own access would)
 *   pinned_move / pinned_copy  io_uring fixed buffers (IORING_REGISTER_BUFFERS
 *                            pins the pages for as long as they are registered):
 *                            zs_region_pageout stores none of them, the rest
 *                            of the range pages out, and an IORING_OP_READ_FIXED
 *                            after the pageout lands in the region page
 *
 * _copy cases run with ZS_REGION_MOVE=0 (pageout copies).  Each case runs in
 * a forked child under a watchdog, for ZS_DMA_SECONDS (default 2) each.  Exit
 * 77 without userfaultfd or when the file system refuses O_DIRECT; the
 * io_uring cases are skipped (and say so) where io_uring is not permitted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "forkcase.h"
#include "testutil.h"

#define NP 512       /* region pages: small, so reads and pageouts meet often */
#define FP 64        /* file pages */
#define MAXRUN 16

static size_t pg;
static char path[64] = "/var/tmp/zs_region_dmaXXXXXX";
static double secs = 2;
static uint64_t seed;

struct ctx {
	struct zs_region *r;
	unsigned char *a;
	atomic_int stop;
	uint64_t seed;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Page contents are a function of a stamp: word k is stamp * K + k. */
static void fill(unsigned char *p, uint64_t v)
{
	for (size_t k = 0; k < pg / 8; k++) {
		uint64_t w = v * 0x9E3779B97F4A7C15ULL + k;
		memcpy(p + k * 8, &w, 8);
	}
}

static int holds(const unsigned char *p, uint64_t v)
{
	for (size_t k = 0; k < pg / 8; k++) {
		uint64_t w;
		memcpy(&w, p + k * 8, 8);
		if (w != v * 0x9E3779B97F4A7C15ULL + k)
			return 0;
	}
	return 1;
}

static void *pager(void *arg)
{
	struct ctx *c = arg;
	uint64_t s = c->seed ^ 0x5151;
	while (!atomic_load(&c->stop)) {
		size_t i = tu_rand(&s) % NP, n = 1 + tu_rand(&s) % 64;
		if (tu_rand(&s) % 4 == 0) {
			i = 0;
			n = NP;
		}
		if (i + n > NP)
			n = NP - i;
		long k = zs_region_pageout(c->r, c->a + i * pg, n * pg);
		if (k < 0 && k != -ENOMEM) {
			printf("pageout -> %ld\n", k);
			exit(1);
		}
	}
	return NULL;
}

static int open_direct(void)
{
	return open(path, O_RDWR | O_DIRECT);
}

enum { M_WRITE = 1, M_COPY = 2, M_BUFFERED = 4 };

static struct zs_region *make_region(int copy)
{
	if (copy)
		setenv("ZS_REGION_MOVE", "0", 1);   /* read at create: this child only */
	struct zs_region_config cfg;
	char err[256];
	struct zs_region *r;
	zs_region_config_init(&cfg);
	cfg.size = NP * pg;
	cfg.handler_threads = 2;
	int rc = zs_region_create(&cfg, &r, err, sizeof err);
	if (rc) {
		printf("zs_region_create -> %d %s\n", rc, err);
		exit(1);
	}
	return r;
}

/* The I/O cases: arg is M_* bits. */
static int io_case(void *arg)
{
	int mode = (int)(intptr_t)arg, writes = mode & M_WRITE, copy = !!(mode & M_COPY);
	int direct = !(mode & M_BUFFERED);
	struct ctx c = { .seed = seed + (uint64_t)mode };
	c.r = make_region(copy);
	c.a = zs_region_addr(c.r);
	static uint64_t stamp[NP], fstamp[FP];
	for (size_t i = 0; i < NP; i++) {
		stamp[i] = i + 1;
		fill(c.a + i * pg, stamp[i]);
	}
	int fd = direct ? open_direct() : open(path, O_RDWR);
	unsigned char *tmp = aligned_alloc(pg, FP * pg);
	if (fd < 0 || !tmp) {
		printf("open O_DIRECT: %s\n", strerror(errno));
		return 1;
	}
	for (size_t f = 0; f < FP; f++) {
		fstamp[f] = 1000000 + f;
		fill(tmp + f * pg, fstamp[f]);
	}
	if (pwrite(fd, tmp, FP * pg, 0) != (ssize_t)(FP * pg)) {
		printf("pwrite file: %s\n", strerror(errno));
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, pager, &c);
	uint64_t s = c.seed;
	unsigned long ops = 0, bad = 0;
	double t0 = now_s();
	while (now_s() - t0 < secs && !bad) {
		size_t i = tu_rand(&s) % (NP - MAXRUN), n = 1 + tu_rand(&s) % MAXRUN,
		       f = tu_rand(&s) % (FP - MAXRUN);
		if (!writes) {
			ssize_t got = pread(fd, c.a + i * pg, n * pg, (off_t)(f * pg));
			if (got != (ssize_t)(n * pg)) {
				printf("pread into the region -> %zd (%s)\n", got, strerror(errno));
				bad++;
				break;
			}
			for (size_t k = 0; k < n; k++) {
				uint64_t old = stamp[i + k];
				stamp[i + k] = fstamp[f + k];
				if (!holds(c.a + (i + k) * pg, stamp[i + k])) {
					printf("%s pread of %zu pages returned %zd, but region page "
					       "%zu does not hold file page %zu: %s\n",
					       direct ? "O_DIRECT" : "buffered", n, got, i + k,
					       f + k, holds(c.a + (i + k) * pg, old) ?
					       "it kept its old bytes" : "other bytes");
					bad++;
				}
			}
		} else {
			ssize_t put = pwrite(fd, c.a + i * pg, n * pg, (off_t)(f * pg));
			if (put != (ssize_t)(n * pg)) {
				printf("pwrite from the region -> %zd (%s)\n", put, strerror(errno));
				bad++;
				break;
			}
			for (size_t k = 0; k < n; k++)
				fstamp[f + k] = stamp[i + k];
			if (pread(fd, tmp, n * pg, (off_t)(f * pg)) != (ssize_t)(n * pg)) {
				printf("pread back: %s\n", strerror(errno));
				bad++;
				break;
			}
			for (size_t k = 0; k < n; k++)
				if (!holds(tmp + k * pg, fstamp[f + k])) {
					printf("%s pwrite from region page %zu: file page %zu "
					       "does not hold it\n", direct ? "O_DIRECT" : "buffered",
					       i + k, f + k);
					bad++;
				}
			/* and the region itself is unchanged by being written out */
			for (size_t k = 0; k < n; k++)
				if (!holds(c.a + (i + k) * pg, stamp[i + k])) {
					printf("region page %zu changed by a pwrite from it\n", i + k);
					bad++;
				}
		}
		ops++;
	}
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	for (size_t i = 0; i < NP; i++)
		if (!holds(c.a + i * pg, stamp[i])) {
			printf("end: region page %zu wrong\n", i);
			bad++;
		}
	struct zs_region_stats st;
	zs_region_get_stats(c.r, &st, sizeof(st));
	printf("  %s path, %s %s: %lu calls, %llu pages paged out\n", copy ? "copy" : "move",
	       direct ? "O_DIRECT" : "buffered", writes ? "pwrite" : "pread", ops,
	       (unsigned long long)st.pageouts);
	zs_region_destroy(c.r);
	close(fd);
	free(tmp);
	return bad != 0;
}

/* ---- io_uring fixed buffers, by raw syscalls (liburing is not required) ---- */

struct ring {
	int fd;
	struct io_uring_params p;
	unsigned char *sq, *cq;
	struct io_uring_sqe *sqes;
	size_t sqsz, cqsz;
};

static int ring_init(struct ring *g)
{
	memset(g, 0, sizeof *g);
	g->fd = (int)syscall(__NR_io_uring_setup, 4, &g->p);
	if (g->fd < 0)
		return -errno;
	g->sqsz = g->p.sq_off.array + g->p.sq_entries * sizeof(unsigned);
	g->cqsz = g->p.cq_off.cqes + g->p.cq_entries * sizeof(struct io_uring_cqe);
	g->sq = mmap(NULL, g->sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, g->fd,
		     IORING_OFF_SQ_RING);
	g->cq = mmap(NULL, g->cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, g->fd,
		     IORING_OFF_CQ_RING);
	g->sqes = mmap(NULL, g->p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, g->fd, IORING_OFF_SQES);
	if (g->sq == MAP_FAILED || g->cq == MAP_FAILED || g->sqes == MAP_FAILED)
		return -ENOMEM;
	return 0;
}

/* One READ_FIXED of len bytes at off into buf (registered buffer 0); the result. */
static int ring_read_fixed(struct ring *g, int fd, void *buf, unsigned len, off_t off)
{
	unsigned *tail = (unsigned *)(g->sq + g->p.sq_off.tail);
	unsigned mask = *(unsigned *)(g->sq + g->p.sq_off.ring_mask);
	unsigned *arr = (unsigned *)(g->sq + g->p.sq_off.array);
	unsigned t = atomic_load_explicit((_Atomic unsigned *)tail, memory_order_acquire);
	struct io_uring_sqe *e = &g->sqes[t & mask];
	memset(e, 0, sizeof *e);
	e->opcode = IORING_OP_READ_FIXED;
	e->fd = fd;
	e->addr = (uintptr_t)buf;
	e->len = len;
	e->off = (uint64_t)off;
	e->buf_index = 0;
	arr[t & mask] = t & mask;
	atomic_store_explicit((_Atomic unsigned *)tail, t + 1, memory_order_release);
	if (syscall(__NR_io_uring_enter, g->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return -errno;
	unsigned *head = (unsigned *)(g->cq + g->p.cq_off.head);
	unsigned cmask = *(unsigned *)(g->cq + g->p.cq_off.ring_mask);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)(g->cq + g->p.cq_off.cqes);
	unsigned h = atomic_load_explicit((_Atomic unsigned *)head, memory_order_acquire);
	int res = cqes[h & cmask].res;
	atomic_store_explicit((_Atomic unsigned *)head, h + 1, memory_order_release);
	return res;
}

#define PIN_FIRST 100
#define PIN_N 8

static int pinned_case(void *arg)
{
	int copy = (int)(intptr_t)arg;
	struct zs_region *r = make_region(copy);
	unsigned char *a = zs_region_addr(r);
	for (size_t i = 0; i < NP; i++)
		fill(a + i * pg, i + 1);
	struct ring g;
	int rc = ring_init(&g);
	if (rc) {
		printf("  io_uring not usable here (%s): case skipped\n", strerror(-rc));
		zs_region_destroy(r);
		return 0;
	}
	struct iovec iov = { .iov_base = a + PIN_FIRST * pg, .iov_len = PIN_N * pg };
	if (syscall(__NR_io_uring_register, g.fd, IORING_REGISTER_BUFFERS, &iov, 1) != 0) {
		printf("IORING_REGISTER_BUFFERS on region memory: %s\n", strerror(errno));
		return 1;
	}
	int bad = 0;
	long k = zs_region_pageout(r, a, NP * pg);
	struct zs_region_stats st;
	zs_region_get_stats(r, &st, sizeof(st));
	/* every page but the pinned ones is stored; the pinned ones stay mapped */
	if (k != NP - PIN_N || st.resident != PIN_N) {
		printf("pageout of the range with %d pinned pages stored %ld, resident %llu "
		       "(want %d and %d)\n", PIN_N, k, (unsigned long long)st.resident,
		       NP - PIN_N, PIN_N);
		bad++;
	}
	unsigned char vec[PIN_N];
	if (mincore(a + PIN_FIRST * pg, PIN_N * pg, vec) == 0)
		for (int i = 0; i < PIN_N; i++)
			if (!(vec[i] & 1)) {
				printf("pinned page %d is not mapped after the pageout\n", PIN_FIRST + i);
				bad++;
			}
	/* the device writes through the pin, after the pageout: the program sees it */
	int fd = open_direct();
	unsigned char *tmp = aligned_alloc(pg, PIN_N * pg);
	for (int i = 0; i < PIN_N; i++)
		fill(tmp + (size_t)i * pg, 1000000 + (uint64_t)i);
	if (fd < 0 || pwrite(fd, tmp, PIN_N * pg, 0) != (ssize_t)(PIN_N * pg)) {
		printf("file: %s\n", strerror(errno));
		return 1;
	}
	free(tmp);
	int got = ring_read_fixed(&g, fd, a + PIN_FIRST * pg, (unsigned)(PIN_N * pg), 0);
	if (got != (int)(PIN_N * pg)) {
		printf("READ_FIXED -> %d\n", got);
		bad++;
	}
	for (int i = 0; i < PIN_N; i++)
		if (!holds(a + (PIN_FIRST + i) * pg, 1000000 + (uint64_t)i)) {
			printf("READ_FIXED into pinned region page %d: the page does not hold "
			       "what the device wrote\n", PIN_FIRST + i);
			bad++;
		}
	/* unpinned, the same pages page out like any other */
	syscall(__NR_io_uring_register, g.fd, IORING_UNREGISTER_BUFFERS, NULL, 0);
	k = zs_region_pageout(r, a + PIN_FIRST * pg, PIN_N * pg);
	if (k != PIN_N) {
		printf("pageout after unregistering stored %ld of %d\n", k, PIN_N);
		bad++;
	}
	for (size_t i = 0; i < NP; i++) {
		int in = i >= PIN_FIRST && i < PIN_FIRST + PIN_N;
		if (!holds(a + i * pg, in ? 1000000 + (i - PIN_FIRST) : i + 1)) {
			printf("end: page %zu wrong\n", i);
			bad++;
		}
	}
	if (!bad)
		printf("  %s path: %d pinned pages kept resident, %d others stored\n",
		       copy ? "copy" : "move", PIN_N, NP - PIN_N);
	close(fd);
	zs_region_destroy(r);
	return bad != 0;
}

int main(void)
{
	fc_skip_without_uffd();
	pg = (size_t)sysconf(_SC_PAGESIZE);
	const char *e = getenv("ZS_DMA_SECONDS");
	if (e)
		secs = atof(e);
	seed = tu_seed("test_mt_region_dma");
	int fd = mkstemp(path);
	if (fd < 0) {
		printf("SKIP: mkstemp %s: %s\n", path, strerror(errno));
		return 77;
	}
	close(fd);
	fd = open_direct();
	if (fd < 0) {
		printf("SKIP: the file system of /var/tmp refuses O_DIRECT (%s)\n", strerror(errno));
		unlink(path);
		return 77;
	}
	close(fd);
	/* Pinned pages are told by UFFDIO_MOVE's refusal: without it pageout cannot see them. */
	const char *mvz = getenv("ZS_REGION_MOVE");
	struct zs_region_config cfg;
	struct zs_region *r;
	struct zs_region_stats st;
	zs_region_config_init(&cfg);
	cfg.size = pg;
	if (zs_region_create(&cfg, &r, NULL, 0) == 0) {
		zs_region_get_stats(r, &st, sizeof(st));
		zs_region_destroy(r);
		if (!st.uffd_move || (mvz && !strcmp(mvz, "zap"))) {
			printf("SKIP: no UFFDIO_MOVE (kernel before 6.8 or ZS_REGION_MOVE=zap): "
			       "pageout cannot tell pinned pages (include/zs/region.h)\n");
			unlink(path);
			return 77;
		}
	}
	int t = (int)secs + 30;
	const char *mv = getenv("ZS_REGION_MOVE");
	int only_copy = mv && !strcmp(mv, "0");
	for (int copy = only_copy; copy < 2; copy++) {
		char n[32];
		snprintf(n, sizeof n, "read_%s", copy ? "copy" : "move");
		if (fc_run(n, t, io_case, (void *)(intptr_t)(copy ? M_COPY : 0)))
			tu_fail++;
		else
			tu_pass++;
		snprintf(n, sizeof n, "write_%s", copy ? "copy" : "move");
		if (fc_run(n, t, io_case, (void *)(intptr_t)(M_WRITE | (copy ? M_COPY : 0))))
			tu_fail++;
		else
			tu_pass++;
		if (copy == only_copy) {   /* one path is enough: nothing is pinned */
			if (fc_run("buffered_read", t, io_case,
				   (void *)(intptr_t)(M_BUFFERED | (copy ? M_COPY : 0))))
				tu_fail++;
			else
				tu_pass++;
			if (fc_run("buffered_write", t, io_case,
				   (void *)(intptr_t)(M_BUFFERED | M_WRITE | (copy ? M_COPY : 0))))
				tu_fail++;
			else
				tu_pass++;
		}
		snprintf(n, sizeof n, "pinned_%s", copy ? "copy" : "move");
		if (fc_run(n, 30, pinned_case, (void *)(intptr_t)copy))
			tu_fail++;
		else
			tu_pass++;
	}
	unlink(path);
	return tu_done();
}
