/*
 * zs_malloc_write's write pin (src/zsmalloc/lock.h, "Write pins") keeps
 * compaction off a new object while its contents are copied in, with no
 * lock held.  The copy is made to stop half way: the source runs into a
 * page that is missing under userfaultfd, so the writer thread blocks in
 * the kernel after the first bytes are in.  Meanwhile the main thread makes
 * the new object's zspage compaction's source (it is the class's emptiest;
 * a free in a full zspage makes that one the destination) and compacts:
 * with the pin nothing moves (0 pages, the pool's pages unchanged).  Then
 * the missing page arrives, the copy ends, and the object must read back
 * whole; the next compaction does move it, and it still reads back whole.
 * Without the pin the first compaction moves the half-written object and
 * frees its zspage under the writer: 0 pages fails, and the object reads
 * back with the first bytes only.
 *
 * Run for both profiles, and again from a thread numbered past the pin
 * table (ZS_WPIN_SLOTS: 256 other threads hold numbers meanwhile - numbers
 * of exited threads are reused, so they stay alive), which takes the
 * zspage read lock instead: the same checks hold.  Both threads
 * are bound to one CPU so the application profile's per-CPU class copy is
 * the same for the writer and the main thread.  Exit 77 (ctest skip) where
 * userfaultfd is not available.
 */
#include "testutil.h"
#include "common/hints.h"
#include "zs/zsmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "must.h"

#define OBJ 1000u   /* object bytes */
#define HEAD 100u   /* bytes of the source before the missing page */
#define PAGE 4096u

static unsigned char *area;   /* two pages: the first present, the second missing */
static unsigned char pattern[OBJ];
static int ufd = -1;
static cpu_set_t one_cpu;

struct writer {
	struct zs_pool *pool;
	unsigned long h;
	unsigned number;   /* the writer's library thread number */
};

static void *write_one(void *arg)
{
	struct writer *w = arg;
	pthread_setaffinity_np(pthread_self(), sizeof one_cpu, &one_cpu);
	w->h = zs_malloc_write(w->pool, area + PAGE - HEAD, OBJ);
	w->number = thread_index();
	return NULL;
}

/* Take a library thread number (one call assigns it) and hold it until `go`. */
static pthread_barrier_t holding, go;
static void *take_number(void *arg)
{
	struct zs_pool *pool = arg;
	unsigned long h = zs_malloc_write(pool, pattern, 64);
	if (!ZS_IS_ERR(h))
		zs_free(pool, h);
	pthread_barrier_wait(&holding);
	pthread_barrier_wait(&go);
	return NULL;
}

static int reads_back(struct zs_pool *pool, unsigned long h)
{
	unsigned char copy[OBJ];
	void *m = zs_obj_read_begin(pool, h, OBJ, copy);
	if (!m)
		return 0;
	int ok = !memcmp(m, pattern, OBJ);
	zs_obj_read_end(pool, h, OBJ, m);
	return ok;
}

static int uffd_open(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct uffdio_api api = { .api = UFFD_API };
	if (ioctl(fd, UFFDIO_API, &api)) {
		close(fd);
		return -1;
	}
	return fd;
}

static unsigned run(const char *name, int app)
{
	struct zs_pool_config cfg;
	if (app)
		zs_pool_config_init_app(&cfg);
	else
		zs_pool_config_init(&cfg);
	struct zs_pool *pool = must_pool_create(&cfg);
	REQUIRE(pool);

	/* The source: HEAD bytes at the end of a present page, the rest in a missing one. */
	memcpy(area + PAGE - HEAD, pattern, HEAD);
	REQUIRE(madvise(area + PAGE, PAGE, MADV_DONTNEED) == 0);
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)(area + PAGE), .len = PAGE },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	REQUIRE(ioctl(ufd, UFFDIO_REGISTER, &reg) == 0);

	/* k objects fill a zspage: count them by the pages the pool takes. */
	enum { MAXO = 512 };
	static unsigned long hs[2 * MAXO];
	unsigned n = 0, k = 0;
	unsigned long pages0 = 0;
	for (;;) {
		REQUIRE(n < MAXO);
		hs[n] = zs_malloc_write(pool, pattern, OBJ);
		REQUIRE(!ZS_IS_ERR(hs[n]));
		n++;
		unsigned long pages = zs_get_total_pages(pool);
		if (n == 1)
			pages0 = pages;
		else if (pages != pages0) {
			k = n - 1;
			break;
		}
	}
	/* Two full zspages, A (objects 0..k-1) and B, and no partly used one. */
	while (n < 2 * k) {
		hs[n] = zs_malloc_write(pool, pattern, OBJ);
		REQUIRE(!ZS_IS_ERR(hs[n]));
		n++;
	}
	unsigned long full = zs_get_total_pages(pool);

	/* The writer stops in the copy: its object is the only one in a new zspage Z. */
	struct writer w = { .pool = pool };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, write_one, &w) == 0);
	struct pollfd pfd = { .fd = ufd, .events = POLLIN };
	REQUIRE(poll(&pfd, 1, 20000) == 1);
	struct uffd_msg msg;
	REQUIRE(read(ufd, &msg, sizeof msg) == (ssize_t)sizeof msg);
	CHECK_EQ(msg.event, UFFD_EVENT_PAGEFAULT);
	CHECK(zs_get_total_pages(pool) > full); /* Z was allocated */
	unsigned long with_z = zs_get_total_pages(pool);

	/* A loses one object: the destination; Z (one object of k) is the source. */
	CHECK_EQ(zs_free(pool, hs[0]), 0);
	hs[0] = 0;
	unsigned long moved = zs_compact(pool);
	printf("%s: k=%u, compaction during the copy freed %lu pages (want 0)\n", name, k, moved);
	CHECK_EQ(moved, 0);
	CHECK_EQ(zs_get_total_pages(pool), with_z);

	/* The missing page arrives: the copy goes on and the call returns. */
	static unsigned char page[PAGE] __attribute__((aligned(4096)));
	memset(page, 0, sizeof page);
	memcpy(page, pattern + HEAD, OBJ - HEAD);
	struct uffdio_copy cp = {
		.dst = (unsigned long)(area + PAGE), .src = (unsigned long)page, .len = PAGE,
	};
	REQUIRE(ioctl(ufd, UFFDIO_COPY, &cp) == 0);
	REQUIRE(pthread_join(t, NULL) == 0);
	REQUIRE(!ZS_IS_ERR(w.h));
	CHECK(reads_back(pool, w.h));

	/* Now compaction moves it into A, and Z's pages go. */
	moved = zs_compact(pool);
	printf("%s: compaction after the copy freed %lu pages (want > 0)\n", name, moved);
	CHECK(moved > 0);
	CHECK_EQ(zs_get_total_pages(pool), full);
	CHECK(reads_back(pool, w.h));
	for (unsigned i = 1; i < n; i++)
		CHECK(reads_back(pool, hs[i]));

	CHECK_EQ(zs_free(pool, w.h), 0);
	for (unsigned i = 1; i < n; i++)
		CHECK_EQ(zs_free(pool, hs[i]), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	struct uffdio_range rng = { .start = (unsigned long)(area + PAGE), .len = PAGE };
	REQUIRE(ioctl(ufd, UFFDIO_UNREGISTER, &rng) == 0);
	zs_destroy_pool(pool);
	return w.number;
}

int main(void)
{
	ufd = uffd_open();
	if (ufd < 0) {
		printf("SKIP: userfaultfd: %s\n", strerror(errno));
		return 77;
	}
	for (unsigned i = 0; i < OBJ; i++)
		pattern[i] = (unsigned char)(i * 7 + 3);
	area = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(area != MAP_FAILED);
	/* Main thread and writers on the CPU the main thread is on now. */
	int cpu = sched_getcpu();
	CPU_ZERO(&one_cpu);
	CPU_SET(cpu < 0 ? 0 : cpu, &one_cpu);
	REQUIRE(sched_setaffinity(0, sizeof one_cpu, &one_cpu) == 0);

	CHECK(run("kernel profile", 0) < 256);
	CHECK(run("application profile", 1) < 256);

	/* 256 threads hold thread numbers: the next writer has no pin slot. */
	struct zs_pool_config cfg;
	zs_pool_config_init(&cfg);
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	enum { HOLDERS = 256 };
	static pthread_t held[HOLDERS];
	REQUIRE(pthread_barrier_init(&holding, NULL, HOLDERS + 1) == 0);
	REQUIRE(pthread_barrier_init(&go, NULL, HOLDERS + 1) == 0);
	for (int i = 0; i < HOLDERS; i++)
		REQUIRE(pthread_create(&held[i], NULL, take_number, p) == 0);
	pthread_barrier_wait(&holding);
	unsigned k = run("kernel profile, no pin slot", 0);
	unsigned a = run("application profile, no pin slot", 1);
	printf("writers numbered %u and %u with %d other threads alive\n", k, a, HOLDERS);
	CHECK(k >= 256);
	CHECK(a >= 256);
	pthread_barrier_wait(&go);
	for (int i = 0; i < HOLDERS; i++)
		REQUIRE(pthread_join(held[i], NULL) == 0);
	zs_destroy_pool(p);
	pthread_barrier_destroy(&holding);
	pthread_barrier_destroy(&go);

	munmap(area, 2 * PAGE);
	close(ufd);
	return tu_done();
}
