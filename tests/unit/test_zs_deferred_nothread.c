/*
 * zs_free_deferred when its worker cannot be started: pthread_create fails
 * (EAGAIN, as under a thread limit; this test's own pthread_create stands
 * in front of the C library's and fails while told to).  The frees must
 * still be done at once, by the calls themselves, with no flush: before,
 * the queue kept them until zs_free_deferred_flush or zs_destroy_pool, so
 * a program whose worker failed to start (or a forked child's) never got
 * that memory back.  Once threads can be made again, a later call (at most
 * a second after the failed start) starts the worker, which then frees
 * the queued handles on its own.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/harness.h"
#include "zs/zsmalloc.h"
#include "must.h"

static atomic_int fail_threads;
static atomic_int refused;

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	if (atomic_load(&fail_threads)) {
		atomic_fetch_add(&refused, 1);
		return EAGAIN;
	}
	create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
	return real ? real(t, a, fn, arg) : EAGAIN;
}

static void run(int app)
{
	struct zs_pool_config cfg;
	if (app)
		zs_pool_config_init_app(&cfg);
	else
		zs_pool_config_init(&cfg);
	cfg.autocompact_ms = 0;
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	enum { N = 2000 };
	static unsigned long h[N];
	for (int i = 0; i < N; i++) {
		h[i] = zs_malloc(p, 100 + (size_t)(i % 31) * 90);
		REQUIRE(!ZS_IS_ERR(h[i]));
	}
	atomic_store(&fail_threads, 1);
	atomic_store(&refused, 0);
	/* Half freed deferred with no worker: every one is gone when its call returns. */
	for (int i = 0; i < N / 2; i++)
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
	CHECK(atomic_load(&refused) >= 1);
	CHECK_EQ(zs_pool_objects(p), N - N / 2);
	CHECK_EQ(zs_pool_deferred_worker_cpu_ns(p), 0); /* no worker runs */
	/* Threads again: a call a second after the failed start makes the worker. */
	atomic_store(&fail_threads, 0);
	struct timespec ts = { 1, 100000000 };
	nanosleep(&ts, NULL);
	for (int i = N / 2; i < N; i++)
		CHECK_EQ(zs_free_deferred(p, h[i]), 0);
	/* The worker, not a flush, frees the rest (it gathers for a millisecond). */
	for (int k = 0; k < 2000 && zs_pool_objects(p); k++)
		usleep(1000);
	CHECK_EQ(zs_pool_objects(p), 0);
	CHECK(zs_pool_deferred_worker_cpu_ns(p) > 0);
	zs_destroy_pool(p);
}

int main(void)
{
	run(0);
	run(1);
	return tu_done();
}
