/*
 * zblock under concurrency (run it under ZS_SANITIZE=thread too): threads
 * allocate, write, verify and free in a shared pool, and hand some objects to
 * each other through a locked mailbox so that frees land on blocks other
 * threads are allocating from.  At the end every page must be back.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "zs/zblock.h"
#include "must.h"

#define THREADS 4
#define OPS 30000
#define LIVE 600
#define BOX 256

static struct zblock_pool *pool;
static uint64_t base_seed;
static pthread_mutex_t box_lock = PTHREAD_MUTEX_INITIALIZER;
static struct item {
	unsigned long h;
	unsigned size;
	unsigned char tag;
} box[BOX];
static int box_n;
static _Atomic int failures;

/* Each object is filled with one byte derived from its tag, cheap to verify. */
static int verify(unsigned long h, unsigned size, unsigned char tag)
{
	const unsigned char *m = zblock_obj_read_begin(pool, h, size, NULL);
	int ok = m != NULL;
	for (unsigned i = 0; ok && i < size; i++)
		ok = m[i] == (unsigned char)(tag + i);
	zblock_obj_read_end(pool, h, size, (void *)m);
	return ok;
}

static void *worker(void *arg)
{
	uint64_t s = base_seed + (uintptr_t)arg;
	struct item mine[LIVE];
	int n = 0;
	unsigned char buf[16384];
	size_t maxsz = zblock_max_size(pool);
	for (int op = 0; op < OPS; op++) {
		uint64_t r = tu_rand(&s) % 100;
		if (n < LIVE && (n == 0 || r < 50)) {
			unsigned size = (unsigned)(1 + tu_rand(&s) % (tu_rand(&s) % 2 ? 400 : maxsz));
			unsigned char tag = (unsigned char)tu_rand(&s);
			unsigned long h = zblock_malloc(pool, size);
			if (ZS_IS_ERR(h)) {
				failures++;
				continue;
			}
			for (unsigned i = 0; i < size; i++)
				buf[i] = (unsigned char)(tag + i);
			if (zblock_obj_write(pool, h, buf, size))
				failures++;
			mine[n++] = (struct item){ h, size, tag };
		} else if (r < 80) {
			int i = (int)(tu_rand(&s) % (uint64_t)n);
			if (!verify(mine[i].h, mine[i].size, mine[i].tag) || zblock_free(pool, mine[i].h))
				failures++;
			mine[i] = mine[--n];
		} else if (r < 90) {
			/* Swap one object through the mailbox. */
			int i = (int)(tu_rand(&s) % (uint64_t)n);
			pthread_mutex_lock(&box_lock);
			if (box_n < BOX) {
				box[box_n++] = mine[i];
				mine[i] = mine[--n];
			} else {
				struct item t = box[--box_n];
				box[box_n++] = mine[i];
				mine[i] = t;
			}
			pthread_mutex_unlock(&box_lock);
		} else {
			int i = (int)(tu_rand(&s) % (uint64_t)n);
			if (!verify(mine[i].h, mine[i].size, mine[i].tag))
				failures++;
		}
	}
	for (int i = 0; i < n; i++)
		if (!verify(mine[i].h, mine[i].size, mine[i].tag) || zblock_free(pool, mine[i].h))
			failures++;
	return NULL;
}

static void run(size_t ps, int checked)
{
	struct zblock_config c;
	zblock_config_init(&c);
	c.page_size = ps;
	c.checked = checked;
	pool = must_zblock_create(&c);
	REQUIRE(pool);
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < box_n; i++) {
		CHECK(verify(box[i].h, box[i].size, box[i].tag));
		CHECK_EQ(zblock_free(pool, box[i].h), 0);
	}
	box_n = 0;
	CHECK_EQ(failures, 0);
	CHECK_EQ(zblock_pool_objects(pool), 0);
	CHECK_EQ(zblock_get_total_pages(pool), 0);
	zblock_destroy_pool(pool);
}

int main(void)
{
	base_seed = tu_seed("test_mt_zblock");
	run(4096, 0);
	run(4096, 1);
	run(16384, 0);
	return tu_done();
}
