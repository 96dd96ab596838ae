/*
 * Thread-owned zspages (the application profile's per-object path):
 * threads allocate into zspages they own and free each other's objects
 * (the remote-free stack) while a compactor (zs_compact, zs_compact_step,
 * zs_pool_trim: each revokes every heap) and the page cache's idle purge
 * run, and threads exit mid-run (their heaps revoked at exit).  Every
 * object is byte-checked on every read and before its free; at the end the
 * pool drains to 0 pages, and a single-threaded run checks that
 * zs_compact, revoking the owner, frees what an owned zspage held.
 * zs_class_stats stops each heap the same way (to count its free slots)
 * and runs in the compactor's rotation, checking obj_used <= obj_allocated.
 * The owners take no lock (heaps.c, "Revocation": the revoker's membarrier
 * stands in for their fences); the threaded run is repeated in a child
 * with ZS_OWNED_FENCED=1, the fallback where the owner fences itself.
 * Seeded (ZS_SEED); the seed is printed.
 */
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "must.h"

#define THREADS 4
#define SLOTS 512
#define MAILBOX 256
#define MAXLEN 3600

static struct zs_pool *pool;
static uint64_t seed;
static atomic_int stop;
static atomic_long bad;
/* Handles passed between threads, each slot under its own lock: 0 empty. */
static struct {
	pthread_mutex_t lock;
	unsigned long h;
	unsigned len;
} mailbox[MAILBOX];

static void fill(unsigned char *b, size_t len, unsigned long tag)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(tag * 131 + i * 7 + (i >> 8));
}

/* The object's bytes are what fill(tag) wrote; the tag is stored in its first 8 bytes. */
static int verify(unsigned long h, size_t len)
{
	unsigned char local[MAXLEN], want[MAXLEN];
	unsigned char *p = zs_obj_read_begin(pool, h, len, local);
	if (!p)
		return 0;
	unsigned long tag;
	memcpy(&tag, p, sizeof(tag));
	fill(want, len, tag);
	memcpy(want, &tag, sizeof(tag));
	int ok = memcmp(p, want, len) == 0;
	zs_obj_read_end(pool, h, len, p);
	return ok;
}

static unsigned long make_obj(size_t len, unsigned long tag)
{
	unsigned char b[MAXLEN];
	fill(b, len, tag);
	memcpy(b, &tag, sizeof(tag));
	unsigned long h = zs_malloc_write(pool, b, len);
	return ZS_IS_ERR(h) ? 0 : h;
}

static void free_checked(unsigned long h, size_t len)
{
	if (!verify(h, len)) {
		fprintf(stderr, "object %#lx (%zu bytes) not as written\n", h, len);
		atomic_fetch_add(&bad, 1);
	}
	if (zs_free(pool, h)) {
		fprintf(stderr, "zs_free(%#lx) failed\n", h);
		atomic_fetch_add(&bad, 1);
	}
}

struct worker {
	pthread_t t;
	int id;
	unsigned long ops;
	unsigned long iters;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	uint64_t rs = seed ^ (0x1234567ull * (unsigned)(w->id + 1));
	unsigned long h[SLOTS] = { 0 };
	unsigned len[SLOTS] = { 0 };
	for (unsigned long it = 0; it < w->iters && !atomic_load(&stop); it++) {
		uint64_t r = tu_rand(&rs);
		unsigned i = (unsigned)(r % SLOTS);
		unsigned op = (unsigned)(r >> 32) % 8;
		if (!h[i]) {
			len[i] = 8 + (unsigned)(tu_rand(&rs) % (MAXLEN - 8));
			h[i] = make_obj(len[i], tu_rand(&rs));
			if (!h[i]) {
				fprintf(stderr, "zs_malloc_write(%u bytes) failed\n", len[i]);
				atomic_fetch_add(&bad, 1);
			}
		} else if (op < 3) {
			if (!verify(h[i], len[i])) {
				fprintf(stderr, "object %#lx (%u bytes) not as written\n", h[i], len[i]);
				atomic_fetch_add(&bad, 1);
			}
		} else if (op < 5) {
			free_checked(h[i], len[i]);
			h[i] = 0;
		} else {
			/* Swap it with one another thread left here: this thread frees that one. */
			unsigned m = (unsigned)(tu_rand(&rs) % MAILBOX);
			pthread_mutex_lock(&mailbox[m].lock);
			unsigned long got = mailbox[m].h;
			unsigned glen = mailbox[m].len;
			mailbox[m].h = h[i];
			mailbox[m].len = len[i];
			pthread_mutex_unlock(&mailbox[m].lock);
			h[i] = 0;
			if (got)
				free_checked(got, glen);
		}
		w->ops++;
	}
	for (unsigned i = 0; i < SLOTS; i++)
		if (h[i])
			free_checked(h[i], len[i]);
	return NULL;
}

static void *compactor(void *arg)
{
	(void)arg;
	unsigned cursor = 0, n = 0;
	while (!atomic_load(&stop)) {
		switch (n++ % 4) {
		case 3:
			/* Stops every heap in turn while its owner allocates and frees. */
			for (int i = 0; i < zs_class_count(pool); i++) {
				struct zs_class_stats st;
				if (zs_class_stats(pool, i, &st, sizeof(st)) == 0 && st.obj_used > st.obj_allocated) {
					fprintf(stderr, "class %d: obj_used %lu > obj_allocated %lu\n", i,
						st.obj_used, st.obj_allocated);
					atomic_fetch_add(&bad, 1);
				}
			}
			break;
		case 0:
			zs_compact(pool);
			break;
		case 1:
			zs_compact_step(pool, &cursor, 4);
			break;
		default:
			zs_pool_trim(pool);
		}
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void run_threads(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	cfg.page_cache_decay_ms = 1; /* the idle purge runs all along */
	pool = must_pool_create(&cfg);
	REQUIRE(pool);
	for (unsigned m = 0; m < MAILBOX; m++)
		pthread_mutex_init(&mailbox[m].lock, NULL);
	pthread_t ct;
	REQUIRE(!pthread_create(&ct, NULL, compactor, NULL));
	/* Two waves: the first wave's heaps are revoked at their threads' exit mid-run. */
	for (int wave = 0; wave < 2; wave++) {
		struct worker w[THREADS];
		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){ .id = wave * THREADS + i, .iters = 40000 };
			REQUIRE(!pthread_create(&w[i].t, NULL, worker, &w[i]));
		}
		for (int i = 0; i < THREADS; i++)
			pthread_join(w[i].t, NULL);
	}
	atomic_store(&stop, 1);
	pthread_join(ct, NULL);
	for (unsigned m = 0; m < MAILBOX; m++)
		if (mailbox[m].h)
			free_checked(mailbox[m].h, mailbox[m].len);
	CHECK_EQ(atomic_load(&bad), 0);
	zs_compact(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
}

/* One thread: what its heap holds goes back at zs_compact, and compaction frees it. */
static void test_compact_revokes(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	pool = must_pool_create(&cfg);
	REQUIRE(pool);
	enum { N = 4000 };
	static unsigned long h[N];
	for (int i = 0; i < N; i++) {
		h[i] = make_obj(1000, (unsigned long)i);
		REQUIRE(h[i]);
	}
	unsigned long full = zs_get_total_pages(pool);
	/* Free 3 of 4: every zspage keeps a quarter, all of them owned or full. */
	for (int i = 0; i < N; i++)
		if (i % 4)
			free_checked(h[i], 1000);
	zs_compact(pool);
	unsigned long after = zs_get_total_pages(pool);
	/* A quarter of the objects: at most a third of the pages plus a zspage (chain of 8 at most). */
	CHECK(after * 3 <= full + 24);
	for (int i = 0; i < N; i += 4)
		free_checked(h[i], 1000);
	zs_compact(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	CHECK_EQ(atomic_load(&bad), 0);
	zs_destroy_pool(pool);
}

/* A thread whose first call on the pool is a free: its heap is made by the free, and its
 * first writes still land whole (their pin slot is counted on the way). */
static unsigned long first_free_handle;
static void *first_free_worker(void *arg)
{
	(void)arg;
	free_checked(first_free_handle, 700);
	unsigned long h[64];
	for (int i = 0; i < 64; i++) {
		h[i] = make_obj(100 + 50 * (size_t)i, (unsigned long)i + 77);
		if (!h[i])
			atomic_fetch_add(&bad, 1);
	}
	for (int i = 0; i < 64; i++)
		if (h[i])
			free_checked(h[i], 100 + 50 * (size_t)i);
	return NULL;
}

static void test_first_call_free(void)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	pool = must_pool_create(&cfg);
	REQUIRE(pool);
	first_free_handle = make_obj(700, 5);
	REQUIRE(first_free_handle);
	pthread_t t;
	REQUIRE(!pthread_create(&t, NULL, first_free_worker, NULL));
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	zs_compact(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
}

/*
 * Objects another thread freed (onto the owner's remote stack) count as free
 * in zs_class_stats at once, though their owner makes no further call and no
 * self-compaction runs: the count stops the heap and collects its stack.
 * Before, they stayed in obj_used until the owner's next refill, so a forked
 * child polling the stats for its deferred frees could wait for ever.
 */
enum { RS_N = 3000 };
static unsigned long rs_h[RS_N];
static int rs_deferred;
static void *remote_freer(void *arg)
{
	(void)arg;
	for (int i = 0; i < RS_N; i++)
		if ((rs_deferred ? zs_free_deferred(pool, rs_h[i]) : zs_free(pool, rs_h[i])) != 0)
			atomic_fetch_add(&bad, 1);
	if (rs_deferred)
		zs_free_deferred_flush(pool);
	return NULL;
}

static void test_remote_stats(int deferred)
{
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	cfg.autocompact_ms = 0; /* nothing but the stats call may collect the remote stack */
	pool = must_pool_create(&cfg);
	REQUIRE(pool);
	for (int i = 0; i < RS_N; i++) {
		rs_h[i] = make_obj(200 + (size_t)(i % 17) * 150, (unsigned long)i);
		REQUIRE(rs_h[i]);
	}
	CHECK_EQ(zs_pool_objects(pool), RS_N);
	rs_deferred = deferred;
	pthread_t t;
	REQUIRE(!pthread_create(&t, NULL, remote_freer, NULL));
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	if (zs_pool_objects(pool) != 0)
		printf("remote frees (%s) still counted in use: %lu\n",
		       deferred ? "deferred" : "direct", zs_pool_objects(pool));
	CHECK_EQ(zs_pool_objects(pool), 0);
	zs_compact(pool);
	CHECK_EQ(zs_get_total_pages(pool), 0);
	zs_destroy_pool(pool);
}

extern char **environ;

/* The threaded run again in a child whose heaps fence (the mode is chosen once a process). */
static void test_fenced_child(const char *self)
{
	char seedbuf[32], *argv[] = { (char *)self, "--fenced", NULL };
	snprintf(seedbuf, sizeof(seedbuf), "%llu", (unsigned long long)seed);
	setenv("ZS_SEED", seedbuf, 1);
	setenv("ZS_OWNED_FENCED", "1", 1);
	pid_t pid;
	int st = 0;
	REQUIRE(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	unsetenv("ZS_OWNED_FENCED");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	seed = tu_seed("test_mt_zs_owned");
	if (argc > 1 && !strcmp(argv[1], "--fenced")) {
		run_threads();
		return tu_done();
	}
	test_compact_revokes();
	test_first_call_free();
	test_remote_stats(0);
	test_remote_stats(1);
	run_threads();
	test_fenced_child(argv[0]);
	return tu_done();
}
