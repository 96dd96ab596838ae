/*
 * The pool rwlock's promise to the region's fault path (src/zsmalloc/lock.h,
 * write_lock): a reader that holds the lock while it waits for a second
 * reader is never stuck because a writer queued between the two.  That is
 * the shape of the region's signal-handler deadlock: a thread inside
 * zs_free (read lock) takes a page fault whose handler needs the read lock to decompress, while
 * compaction waits for the write lock.  The test builds that chain with
 * plain threads, for the shared-word and the sharded lock, and then checks
 * the writer still gets the lock once the readers leave, and that readers
 * and the writer exclude each other under churn.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "zsmalloc/lock.h"

static rwlock_t lk;
static atomic_int stage, b_in, w_in, shared_val;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *writer(void *arg)
{
	(void)arg;
	write_lock(&lk);
	atomic_store(&w_in, 1);
	write_unlock(&lk);
	return NULL;
}

static void *second_reader(void *arg)
{
	(void)arg;
	read_lock(&lk);
	atomic_store(&b_in, 1);
	read_unlock(&lk);
	return NULL;
}

/* Reader A holds the lock and waits for reader B; writer W queues in between. */
static void chain(int sharded)
{
	pthread_t w, b;

	rw_init(&lk, sharded);
	atomic_store(&b_in, 0);
	atomic_store(&w_in, 0);
	read_lock(&lk);                          /* A */
	pthread_create(&w, NULL, writer, NULL);
	double t0 = now_s();
	while (!(atomic_load(&lk.v) & 1) && now_s() - t0 < 5)
		sched_yield();                      /* W has taken the bit and waits for A */
	CHECK(atomic_load(&lk.v) & 1);
	pthread_create(&b, NULL, second_reader, NULL);
	t0 = now_s();
	while (!atomic_load(&b_in) && now_s() - t0 < 10)
		usleep(100);
	if (!atomic_load(&b_in))
		fprintf(stderr, "sharded=%d: reader B stuck behind the waiting writer (deadlock)\n",
			sharded);
	CHECK(atomic_load(&b_in));
	CHECK(!atomic_load(&w_in));                 /* A still holds it: W must not be in */
	double waited = now_s() - t0;
	read_unlock(&lk);                        /* with the old lock this is what frees B */
	pthread_join(b, NULL);
	pthread_join(w, NULL);
	CHECK(atomic_load(&w_in));
	printf("sharded=%d: second reader got in after %.1f ms behind the queued writer; writer then ran\n",
	       sharded, waited * 1e3);
}

/* Mutual exclusion under churn: the writer sees no reader, readers see no half-done write. */
static void *churn_reader(void *arg)
{
	long *bad = arg;
	for (int i = 0; i < 20000 && atomic_load(&stage) == 0; i++) {
		read_lock(&lk);
		int a = atomic_load_explicit(&shared_val, memory_order_relaxed);
		if (a & 1)
			(*bad)++;
		read_unlock(&lk);
	}
	return NULL;
}

static void *churn_writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2000; i++) {
		write_lock(&lk);
		atomic_fetch_add_explicit(&shared_val, 1, memory_order_relaxed);
		sched_yield();
		atomic_fetch_add_explicit(&shared_val, 1, memory_order_relaxed);
		write_unlock(&lk);
	}
	atomic_store(&stage, 1);
	return NULL;
}

static void churn(int sharded)
{
	pthread_t r[3], w;
	long bad[3] = { 0 };

	rw_init(&lk, sharded);
	atomic_store(&stage, 0);
	atomic_store(&shared_val, 0);
	pthread_create(&w, NULL, churn_writer, NULL);
	for (int i = 0; i < 3; i++)
		pthread_create(&r[i], NULL, churn_reader, &bad[i]);
	for (int i = 0; i < 3; i++)
		pthread_join(r[i], NULL);
	pthread_join(w, NULL);
	CHECK_EQ(bad[0] + bad[1] + bad[2], 0);
	CHECK_EQ(atomic_load(&shared_val) % 2, 0);
}

int main(void)
{
	chain(0);
	chain(1);
	churn(0);
	churn(1);
	return tu_done();
}
