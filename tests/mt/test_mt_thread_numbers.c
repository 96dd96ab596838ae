/*
 * Library thread numbers (src/common/thread.c) are reused: a thread's number
 * goes back when it exits and the next thread takes the lowest free one, so
 * the live threads hold small, distinct numbers however many came before.
 * Everything keyed by the number (write-pin slots, handle and reader shards,
 * counter shards) relies on that; before reuse a program's 257th thread had
 * no write-pin slot for the rest of the run.
 *
 * Checks: 1,000 threads one after another all get the same small number;
 * 64 threads alive at once hold 64 distinct numbers below 64 + the ones the
 * main thread and earlier survivors hold; a thread whose exit runs library
 * code in a later key destructor (after the number went back) takes a fresh
 * number there and gives that back too, so numbers do not climb; and pools
 * used by threads that come and go still count and free correctly.
 */
#include "testutil.h"
#include "common/hints.h"
#include "zs/zsmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "must.h"

static struct zs_pool *pool;
static unsigned char payload[300];

/* Failed library calls on any thread (the CHECK macros are the main thread's). */
static atomic_uint bad_calls;

/* One allocation and free: the library call that assigns the number. */
static unsigned use_library(void)
{
	unsigned long h = zs_malloc_write(pool, payload, sizeof payload);
	if (ZS_IS_ERR(h) || zs_free(pool, h))
		atomic_fetch_add(&bad_calls, 1);
	return thread_index();
}

static void *one(void *arg)
{
	*(unsigned *)arg = use_library();
	return NULL;
}

static unsigned in_thread(void)
{
	unsigned n = ~0u;
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, one, &n) == 0);
	REQUIRE(pthread_join(t, NULL) == 0);
	return n;
}

enum { ALIVE = 64 };
static pthread_barrier_t holding, go;

static void *hold(void *arg)
{
	*(unsigned *)arg = use_library();
	pthread_barrier_wait(&holding);
	pthread_barrier_wait(&go);
	return NULL;
}

/*
 * A key created after the library's first use has a higher index than the
 * library's own, so its destructor runs after the library gave the number
 * back: the library call in it must take a number again (never reuse the
 * one just given back while another thread may hold it by then).
 */
static pthread_key_t late_key;
static _Atomic unsigned late_numbers[4];

static void late_destructor(void *v)
{
	(void)v;
	unsigned n = use_library();
	for (int i = 0; i < 4; i++) {
		unsigned zero = 0;
		if (atomic_compare_exchange_strong(&late_numbers[i], &zero, n + 1))
			break;
	}
}

static void *late_user(void *arg)
{
	(void)arg;
	use_library();
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

int main(void)
{
	memset(payload, 0x5a, sizeof payload);
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	pool = must_pool_create(&cfg);
	REQUIRE(pool);
	unsigned mine = use_library();
	printf("main thread: number %u\n", mine);

	/* One after another: each exits before the next asks, so all share one number. */
	unsigned first = in_thread();
	unsigned same = 0, highest = first;
	for (int i = 0; i < 1000; i++) {
		unsigned n = in_thread();
		same += n == first;
		if (n > highest)
			highest = n;
	}
	printf("1000 threads in turn: number %u each time for %u of them, highest %u\n", first,
	       same, highest);
	CHECK_EQ(same, 1000);
	CHECK(first < 2);
	CHECK(first != mine);

	/* Alive at once: distinct, and dense. */
	pthread_t t[ALIVE];
	unsigned num[ALIVE];
	REQUIRE(pthread_barrier_init(&holding, NULL, ALIVE + 1) == 0);
	REQUIRE(pthread_barrier_init(&go, NULL, ALIVE + 1) == 0);
	for (int i = 0; i < ALIVE; i++)
		REQUIRE(pthread_create(&t[i], NULL, hold, &num[i]) == 0);
	pthread_barrier_wait(&holding);
	unsigned dup = 0, top = 0;
	for (int i = 0; i < ALIVE; i++) {
		CHECK(num[i] != mine);
		if (num[i] > top)
			top = num[i];
		for (int j = 0; j < i; j++)
			dup += num[i] == num[j];
	}
	printf("%d threads alive: %u shared numbers, highest %u\n", ALIVE, dup, top);
	CHECK_EQ(dup, 0);
	CHECK(top <= ALIVE);   /* 0..ALIVE, one of them the main thread's */
	pthread_barrier_wait(&go);
	for (int i = 0; i < ALIVE; i++)
		REQUIRE(pthread_join(t[i], NULL) == 0);
	CHECK(in_thread() < 2);

	/* Library calls in a destructor that runs after the number went back. */
	REQUIRE(pthread_key_create(&late_key, late_destructor) == 0);
	for (int i = 0; i < 4; i++) {
		pthread_t u;
		REQUIRE(pthread_create(&u, NULL, late_user, NULL) == 0);
		REQUIRE(pthread_join(u, NULL) == 0);
	}
	unsigned after = in_thread();
	printf("after 4 threads used the library in a late destructor: next thread number %u "
	       "(late calls numbered %u %u %u %u)\n",
	       after, late_numbers[0] - 1, late_numbers[1] - 1, late_numbers[2] - 1,
	       late_numbers[3] - 1);
	for (int i = 0; i < 4; i++)
		CHECK(late_numbers[i] != 0 && late_numbers[i] - 1 < 2);
	CHECK(after < 2);

	CHECK_EQ(atomic_load(&bad_calls), 0);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
	pthread_barrier_destroy(&holding);
	pthread_barrier_destroy(&go);
	pthread_key_delete(late_key);
	return tu_done();
}
