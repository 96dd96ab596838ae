/*
 * Regression test: in a checked pool, zs_obj_read_end /
 * zs_unmap_object for a handle that holds no pin (after a failed begin, a
 * freed, garbage or foreign handle, an end without a begin) used to drop the
 * read lock of whatever zspage the stale slot named, so a later reader or
 * the compactor spun forever, or crashed on a garbage handle.  Each case is
 * followed by reads of unrelated live objects and a compaction; alarm() turns
 * a hang into a failure that names the case.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/backend.h"
#include "zs/zsmalloc.h"
#include "must.h"

static const char *volatile current_case = "setup";

static void on_alarm(int sig)
{
	(void)sig;
	const char msg[] = "hang (alarm) in case: ";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	r = write(2, current_case, strlen(current_case));
	r = write(2, "\n", 1);
	(void)r;
	_exit(1);
}

static struct zs_pool *new_pool(int free_mode)
{
	struct zs_pool_config c;
	zs_pool_config_init(&c);
	c.checked = 1;
	c.deferred_worker = -1;
	c.free_mode = (enum zs_free_mode)free_mode;
	struct zs_pool *p = must_pool_create(&c);
	REQUIRE(p);
	return p;
}

/* Every live object still reads back its pattern, and a write-locking compaction completes. */
static void check_pool_sane(struct zs_pool *p, unsigned long *h, int n, size_t len)
{
	char loc[4096];
	for (int i = 0; i < n; i++) {
		if (!h[i])
			continue;
		unsigned char *m = zs_obj_read_begin(p, h[i], len, loc);
		CHECK(m != NULL);
		if (!m)
			continue;
		int ok = 1;
		for (size_t k = 0; k < len; k++)
			ok &= m[k] == (unsigned char)(i + k);
		CHECK(ok);
		zs_obj_read_end(p, h[i], len, m);
	}
	zs_compact(p);
}

static void fill(struct zs_pool *p, unsigned long *h, int n, size_t len)
{
	unsigned char buf[4096];
	for (int i = 0; i < n; i++) {
		h[i] = zs_malloc(p, len);
		REQUIRE(!ZS_IS_ERR(h[i]));
		for (size_t k = 0; k < len; k++)
			buf[k] = (unsigned char)(i + k);
		REQUIRE(zs_obj_write(p, h[i], buf, len) == 0);
	}
}

#define N 64

static void run_cases(int free_mode)
{
	char loc[4096];
	size_t len = 100;
	unsigned long h[N];
	struct zs_pool *p = new_pool(free_mode), *other = new_pool(free_mode);
	fill(p, h, N, len);
	unsigned long foreign = zs_malloc(other, len);
	REQUIRE(!ZS_IS_ERR(foreign));

	current_case = "read_end after a failed begin on a freed handle";
	unsigned long dead = h[0];
	CHECK_EQ(zs_free(p, dead), 0);
	h[0] = 0;
	CHECK(zs_obj_read_begin(p, dead, len, loc) == NULL);
	zs_obj_read_end(p, dead, len, NULL);
	check_pool_sane(p, h, N, len);

	current_case = "read_end with garbage handles";
	unsigned long local_var = 0;
	unsigned long garbage[] = { 12345, 8, (unsigned long)&local_var, dead + 1, foreign,
				    (unsigned long)-1, (unsigned long)-4095 };
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		CHECK(zs_obj_read_begin(p, garbage[i], len, loc) == NULL);
		zs_obj_read_end(p, garbage[i], len, NULL);
	}
	check_pool_sane(p, h, N, len);

	current_case = "read_end twice / without a begin on a live handle";
	void *m = zs_obj_read_begin(p, h[1], len, loc);
	CHECK(m != NULL);
	zs_obj_read_end(p, h[1], len, m);
	zs_obj_read_end(p, h[1], len, m); /* a second end must not turn the lock into a write lock */
	zs_obj_read_end(p, h[2], len, NULL);
	check_pool_sane(p, h, N, len);

	current_case = "legacy unmap after a failed map (foreign and freed handles)";
	CHECK(zs_map_object(p, foreign, ZS_MM_RO) == NULL);
	zs_unmap_object(p, foreign);
	CHECK(zs_map_object(p, dead, ZS_MM_RW) == NULL);
	zs_unmap_object(p, dead);
	zs_unmap_object(p, 12345);
	check_pool_sane(p, h, N, len);

	current_case = "legacy unmap of another handle than the one mapped";
	m = zs_map_object(p, h[3], ZS_MM_RO);
	CHECK(m != NULL);
	zs_unmap_object(p, h[4]);     /* wrong handle: ignored */
	zs_unmap_object(other, h[3]); /* wrong pool: ignored */
	zs_unmap_object(p, h[3]);     /* the real one */
	zs_unmap_object(p, h[3]);     /* again: ignored */
	check_pool_sane(p, h, N, len);

	current_case = "read_end of a pinned handle queued for deferred free";
	m = zs_obj_read_begin(p, h[5], len, loc);
	CHECK(m != NULL);
	CHECK_EQ(zs_free_deferred(p, h[5]), 0);
	zs_obj_read_end(p, h[5], len, m);
	zs_free_deferred_flush(p);
	h[5] = 0;
	check_pool_sane(p, h, N, len);

	current_case = "free-all leaves no pages";
	for (int i = 0; i < N; i++)
		CHECK_EQ(zs_free(p, h[i]), 0);
	zs_compact(p);
	CHECK_EQ(zs_get_total_pages(p), 0);
	zs_destroy_pool(p);
	zs_destroy_pool(other);
}

/* The checked backend layer must not pass an unpinned end down either. */
static void backend_case(const char *kind)
{
	current_case = kind;
	struct zs_backend_config bc;
	zs_backend_config_init(&bc);
	bc.zs.deferred_worker = -1;
	bc.kind = kind;
	bc.checked = 1;
	struct zs_backend *b = must_backend_create(&bc);
	REQUIRE(b);
	char loc[4096];
	unsigned long a = zs_backend_malloc(b, 100), keep = zs_backend_malloc(b, 100);
	REQUIRE(!ZS_IS_ERR(a) && !ZS_IS_ERR(keep));
	CHECK_EQ(zs_backend_free(b, a), 0);
	CHECK(zs_backend_read_begin(b, a, 10, loc) == NULL);
	zs_backend_read_end(b, a, 10, NULL);
	zs_backend_read_end(b, 12345, 10, NULL);
	void *m = zs_backend_read_begin(b, keep, 10, loc);
	CHECK(m != NULL);
	zs_backend_read_end(b, keep, 10, m);
	zs_backend_compact(b);
	CHECK_EQ(zs_backend_free(b, keep), 0);
	zs_backend_destroy(b);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(60);
	for (int mode = ZS_FREE_POOL_LOCK; mode <= ZS_FREE_CLASS_INDEX_UNLOCKED; mode++)
		run_cases(mode);
	const char *const *kinds = zs_backend_kinds();
	for (int i = 0; kinds[i]; i++)
		backend_case(kinds[i]);
	return tu_done();
}
