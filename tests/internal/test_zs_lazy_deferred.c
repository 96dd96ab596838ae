/*
 * Deferred free costs nothing until used.  A pool created
 * with defaults must start no thread and allocate no queue; the first
 * zs_free_deferred creates both (one worker per pool that used it, none when
 * deferred_worker is -1), exactly once even when many threads race on it;
 * flushing or destroying a pool that never deferred a free is a no-op.
 * Threads are counted in /proc/self/task, as a user would see them.
 */
#include "testutil.h"
#include "zs/zsmalloc.h"
#include "zsmalloc/internal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "must.h"

static int nthreads(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * The count once it has settled: a thread pthread_join has returned for can
 * still be listed in /proc/self/task for a moment (the kernel reaps it just
 * after it clears the tid join waits on), so one read may count it.  Reads
 * until it equals `want` or a second has passed, and returns the last; a
 * thread the pool really keeps stays and still fails the caller's check.
 */
static int nthreads_now(int want)
{
	int n = nthreads();
	for (int i = 0; i < 1000 && n != want; i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		n = nthreads();
	}
	return n;
}

static unsigned long put(struct zs_pool *p)
{
	unsigned long h = zs_malloc(p, 100);
	REQUIRE(!ZS_IS_ERR(h));
	char buf[100];
	memset(buf, 0x5a, sizeof(buf));
	CHECK_EQ(zs_obj_write(p, h, buf, sizeof(buf)), 0);
	return h;
}

#define NPOOLS 8
#define NRACE 8

struct race {
	struct zs_pool *pool;
	unsigned long h[64];
	pthread_barrier_t *bar;
	int err;
};

static void *racer(void *arg)
{
	struct race *r = arg;
	pthread_barrier_wait(r->bar);
	for (int i = 0; i < 64; i++)
		if (zs_free_deferred(r->pool, r->h[i]))
			r->err = 1;
	return NULL;
}

static void *nop(void *arg)
{
	return arg;
}

int main(void)
{
	/*
	 * The baseline is taken after one thread has come and gone: a runtime
	 * may start a helper thread of its own with the process's first
	 * pthread_create (TSan does), which is not the pool's.
	 */
	pthread_t t0;
	REQUIRE(pthread_create(&t0, NULL, nop, NULL) == 0);
	pthread_join(t0, NULL);
	/* Settled: t0 itself may still be listed for a moment (nthreads_now). */
	int base = nthreads();
	for (int i = 0, same = 0; i < 1000 && same < 20; i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		int n = nthreads();
		same = n == base ? same + 1 : 0;
		base = n;
	}
	if (base < 1) {
		printf("SKIP: /proc/self/task not readable\n");
		return 77;
	}
	struct zs_pool *pools[NPOOLS];
	for (int i = 0; i < NPOOLS; i++) {
		pools[i] = must_pool_create(NULL);
		REQUIRE(pools[i]);
		CHECK(atomic_load(&pools[i]->deferred) == NULL);
	}
	CHECK_EQ(nthreads_now(base), base);

	/* Allocation, frees, flush and compaction touch no deferred state. */
	for (int i = 0; i < NPOOLS; i++) {
		unsigned long h = put(pools[i]);
		CHECK_EQ(zs_free(pools[i], h), 0);
		zs_free_deferred_flush(pools[i]);
		zs_compact(pools[i]);
		/* 0 and error handles are ignored before anything is created. */
		CHECK_EQ(zs_free_deferred(pools[i], 0), 0);
		CHECK(atomic_load(&pools[i]->deferred) == NULL);
	}
	CHECK_EQ(nthreads_now(base), base);

	/* The first deferred free of half the pools starts one worker each. */
	for (int i = 0; i < NPOOLS / 2; i++) {
		unsigned long h = put(pools[i]);
		CHECK_EQ(zs_free_deferred(pools[i], h), 0);
		CHECK(atomic_load(&pools[i]->deferred) != NULL);
	}
	CHECK_EQ(nthreads_now(base + NPOOLS / 2), base + NPOOLS / 2);
	/* More deferred frees start nothing more; the signalled worker drains them. */
	for (int i = 0; i < NPOOLS / 2; i++) {
		for (int k = 0; k < 100; k++)
			CHECK_EQ(zs_free_deferred(pools[i], put(pools[i])), 0);
		zs_free_deferred_flush(pools[i]);
		CHECK_EQ(zs_get_total_pages(pools[i]), 0);
	}
	CHECK_EQ(nthreads_now(base + NPOOLS / 2), base + NPOOLS / 2);

	/* No flush: the worker, woken by the enqueue, frees the object by itself. */
	{
		unsigned long h = put(pools[0]);
		CHECK_EQ(zs_free_deferred(pools[0], h), 0);
		unsigned long used = 1;
		for (int t = 0; t < 5000 && used; t++) {
			used = zs_get_total_pages(pools[0]);
			struct timespec ts = { 0, 1000000 };
			if (used)
				nanosleep(&ts, NULL);
		}
		CHECK_EQ(used, 0);
	}

	for (int i = 0; i < NPOOLS; i++)
		zs_destroy_pool(pools[i]);
	CHECK_EQ(nthreads_now(base), base);

	/* deferred_worker -1: the queue appears on first use, a thread never. */
	{
		struct zs_pool_config c;
		zs_pool_config_init(&c);
		c.deferred_worker = -1;
		struct zs_pool *p = must_pool_create(&c);
		REQUIRE(p);
		CHECK(atomic_load(&p->deferred) == NULL);
		CHECK_EQ(zs_free_deferred(p, put(p)), 0);
		CHECK(atomic_load(&p->deferred) != NULL);
		CHECK_EQ(nthreads_now(base), base);
		zs_destroy_pool(p);
	}

	/* Capacity is still checked at creation, before anything is built. */
	{
		struct zs_pool_config c;
		zs_pool_config_init(&c);
		c.deferred_capacity = ZS_MAX_DEFERRED_CAPACITY + 1;
		errno = 0;
		CHECK_POOL_REFUSED(&c, "zs_pool_config");
	}

	/* Racing first users create one queue and one worker. */
	{
		struct zs_pool *p = must_pool_create(NULL);
		REQUIRE(p);
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, NRACE);
		struct race r[NRACE];
		pthread_t th[NRACE];
		for (int i = 0; i < NRACE; i++) {
			r[i].pool = p;
			r[i].bar = &bar;
			r[i].err = 0;
			for (int k = 0; k < 64; k++)
				r[i].h[k] = put(p);
		}
		for (int i = 0; i < NRACE; i++)
			REQUIRE(pthread_create(&th[i], NULL, racer, &r[i]) == 0);
		for (int i = 0; i < NRACE; i++) {
			pthread_join(th[i], NULL);
			CHECK_EQ(r[i].err, 0);
		}
		pthread_barrier_destroy(&bar);
		CHECK_EQ(nthreads_now(base + 1), base + 1);
		zs_free_deferred_flush(p);
		CHECK_EQ(zs_get_total_pages(p), 0);
		zs_destroy_pool(p);
		CHECK_EQ(nthreads_now(base), base);
	}
	return tu_done();
}
