/*
 * bench_region's floor: the userfaultfd round trip (one process, P
 * processes, or the shared region's topology) plus one decompression: what
 * random swap-in through any user-space handler cannot beat.  Split from
 * bench_region.c.
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "region.h"
#include "zs/compress.h"

/* ---- the floor ---- */

static int floor_uffd;
static unsigned char *floor_src;
static atomic_int floor_stop;

static void *floor_handler(void *arg)
{
	(void)arg;
	struct uffd_msg m;
	while (!atomic_load_explicit(&floor_stop, memory_order_relaxed)) {
		if (read(floor_uffd, &m, sizeof(m)) != sizeof(m))
			continue;   /* spin on the non-blocking read */
		if (m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		struct uffdio_copy cp = { .dst = m.arg.pagefault.address & ~(uint64_t)(PG - 1),
					  .src = (uintptr_t)floor_src, .len = PG };
		ioctl(floor_uffd, UFFDIO_COPY, &cp);
	}
	return NULL;
}

/* p50 ns of a random-order missing fault answered by a spinning UFFDIO_COPY handler. */
double floor_roundtrip(size_t n)
{
	floor_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (floor_uffd < 0)
		return -1;
	struct uffdio_api api = { .api = UFFD_API };
	if (ioctl(floor_uffd, UFFDIO_API, &api))
		return -1;
	unsigned char *b = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	floor_src = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(floor_src, 0x5a, PG);
	madvise(b, n * PG, MADV_NOHUGEPAGE);
	struct uffdio_register reg = { .range = { .start = (uintptr_t)b, .len = n * PG },
				       .mode = UFFDIO_REGISTER_MODE_MISSING };
	if (ioctl(floor_uffd, UFFDIO_REGISTER, &reg))
		return -1;
	pthread_t t;
	atomic_store(&floor_stop, 0);
	pthread_create(&t, NULL, floor_handler, NULL);
	size_t save = npages;
	npages = n;
	uint32_t *lat = malloc(n * sizeof(*lat)), *order = make_order(77);
	touch(b, order, lat);
	double p50, p99;
	pct(lat, n, &p50, &p99);
	npages = save;
	atomic_store(&floor_stop, 1);
	pthread_join(t, NULL);
	munmap(b, n * PG);
	munmap(floor_src, PG);
	close(floor_uffd);
	free(lat);
	free(order);
	return p50;
}

/*
 * The round trip with P processes doing it at once (each an application
 * thread and a spinning handler): the floor for P workers on this machine,
 * where P > cores/2 means they share CPUs.  Mean of the processes' p50s.
 */
double floor_at(struct shared *sh, int P, size_t n)
{
	if (P == 1)
		return floor_roundtrip(n);
	pid_t pids[MAXP];
	memset(sh->r, 0, sizeof(sh->r));
	for (int i = 0; i < P; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			sh->r[i].rand_p50 = floor_roundtrip(n);
			_exit(0);
		}
	}
	double sum = 0;
	for (int i = 0; i < P; i++) {
		waitpid(pids[i], NULL, 0);
		sum += sh->r[i].rand_p50;
	}
	return sum / P;
}

struct floor_toucher {
	unsigned char *base;
	uint64_t seed;
	double p50;
};

static void *floor_touch_thread(void *p)
{
	struct floor_toucher *t = p;
	uint32_t *lat = malloc(npages * sizeof(*lat)), *order = make_order(t->seed);
	double p99;
	touch(t->base, order, lat);
	pct(lat, npages, &t->p50, &p99);
	free(lat);
	free(order);
	return NULL;
}

/*
 * The round trip in the shared region's topology (--threads): ONE
 * userfaultfd over P slices of n pages, P spinning handlers reading it and
 * P application threads each touching its own slice in random order, all in
 * one process.  Mean of the threads' p50s (ns), -1 when userfaultfd fails.
 */
double floor_shared(int P, size_t n)
{
	floor_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (floor_uffd < 0)
		return -1;
	struct uffdio_api api = { .api = UFFD_API };
	size_t len = (size_t)P * n * PG;
	unsigned char *b = MAP_FAILED;
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	if (ioctl(floor_uffd, UFFDIO_API, &api) == 0)
		b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED) {
		close(floor_uffd);
		return -1;
	}
	floor_src = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(floor_src, 0x5a, PG);
	madvise(b, len, MADV_NOHUGEPAGE);
	reg.range.start = (uintptr_t)b;
	reg.range.len = len;
	double sum = -1;
	if (ioctl(floor_uffd, UFFDIO_REGISTER, &reg) == 0) {
		pthread_t h[MAXP], a[MAXP];
		struct floor_toucher t[MAXP];
		size_t save = npages;
		npages = n;
		atomic_store(&floor_stop, 0);
		for (int i = 0; i < P; i++)
			pthread_create(&h[i], NULL, floor_handler, NULL);
		for (int i = 0; i < P; i++) {
			t[i] = (struct floor_toucher){ b + (size_t)i * n * PG, 77 + (uint64_t)i, 0 };
			pthread_create(&a[i], NULL, floor_touch_thread, &t[i]);
		}
		sum = 0;
		for (int i = 0; i < P; i++) {
			pthread_join(a[i], NULL);
			sum += t[i].p50 / P;
		}
		atomic_store(&floor_stop, 1);
		for (int i = 0; i < P; i++)
			pthread_join(h[i], NULL);
		npages = save;
	}
	munmap(b, len);
	munmap(floor_src, PG);
	close(floor_uffd);
	return sum;
}

/*
 * Median ns to get one page of this corpus back from its stored form:
 * decompression, or a copy for pages stored raw (compressed size >= 3/4 page,
 * about zsmalloc's huge class).  The median, because this machine is shared
 * and a preempted measurement must not inflate the floor.
 */
double floor_decompress(void)
{
	struct zs_comp *c;
	if (zs_comp_create(&(struct zs_comp_config){ .name = comp, .max_src = PG }, &c, NULL, 0))
		return -1;
	size_t cap = zs_comp_bound(c, PG), n = corpus.npages < 4096 ? corpus.npages : 4096;
	unsigned char *dst = malloc(cap), out[PG];
	double *t = malloc(n * sizeof(*t));
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++) {
		int len = zs_compress(c, corpus.data + i * PG, PG, dst, cap);
		if (len <= 0)
			continue;
		double t0 = bench_now_ns();
		if (len >= PG * 3 / 4)
			memcpy(out, corpus.data + i * PG, PG);
		else
			zs_decompress(c, dst, (size_t)len, out, PG);
		t[cnt++] = bench_now_ns() - t0;
		sink += out[i % PG];
	}
	qsort(t, cnt, sizeof(*t), bench_cmp_double);
	double med = cnt ? t[cnt / 2] : -1;
	free(t);
	free(dst);
	zs_comp_destroy(c);
	return med;
}
