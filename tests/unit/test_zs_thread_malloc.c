/*
 * The library's own threads leave the host program's malloc alone: a pool's
 * self-compaction runs on the page provider's purge thread ("zs-purge"),
 * and a first malloc there would take a glibc arena of its own that stays
 * resident and, each time the thread ends, goes on glibc's free list for
 * the program's next new thread.  So compaction maps its scratch instead
 * (src/zsmalloc/compact.c).  This test stands its own malloc, calloc,
 * realloc and aligned allocations in front of glibc's (forwarding to them)
 * and counts the calls made on a thread named "zs-purge" while a pool of
 * the application profile, 60% freed at random, compacts itself with no
 * call.  Before, that was 133 calls here (compact_step's copy
 * buffer, compact_by_address's array, the look's owned-slot counts).
 * Seeded (ZS_SEED).
 * ZS_TEST_SYSTEM_MALLOC: it needs glibc's malloc, not the harness's
 * (CMakeLists.txt); under a sanitizer (which owns malloc) it says so and
 * skips.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "zs/zsmalloc.h"
#include "must.h"

#include "sanitizer.h"
#define SANITIZED TU_SANITIZED

static atomic_ulong purge_calls;

#if !SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* PR_GET_NAME: a system call that allocates nothing. */
static void note(void)
{
	char name[16] = { 0 };
	if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && !strcmp(name, "zs-purge"))
		atomic_fetch_add_explicit(&purge_calls, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
	note();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	note();
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	note();
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	note();
	return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	note();
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
#endif

int main(void)
{
	if (SANITIZED) {
		printf("built with a sanitizer, which owns malloc: nothing to check\n");
		return 77;
	}
	uint64_t rs = tu_seed("test_zs_thread_malloc");
	struct zs_pool_config cfg;
	zs_pool_config_init_app(&cfg);
	struct zs_pool *p = must_pool_create(&cfg);
	REQUIRE(p);
	enum { N = 20000 };
	static unsigned long h[N];
	for (int i = 0; i < N; i++) {
		h[i] = zs_malloc(p, 200 + (size_t)(tu_rand(&rs) % 3300));
		REQUIRE(!ZS_IS_ERR(h[i]));
	}
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(tu_rand(&rs) % (uint64_t)(i + 1));
		unsigned long t = h[i];
		h[i] = h[j];
		h[j] = t;
	}
	for (int i = 0; i < N * 6 / 10; i++)
		REQUIRE(zs_free(p, h[i]) == 0);
	/* No call for up to 5 s: the purge thread compacts (a pass or more). */
	for (int k = 0; k < 50 && zs_pool_autocompact_passes(p) == 0; k++)
		usleep(100000);
	unsigned long passes = zs_pool_autocompact_passes(p);
	unsigned long calls = atomic_load(&purge_calls);
	printf("%lu self-compaction passes; allocation calls on the purge thread: %lu\n", passes,
	       calls);
	CHECK(passes > 0);
	CHECK_EQ(calls, 0);
	for (int i = N * 6 / 10; i < N; i++)
		REQUIRE(zs_free(p, h[i]) == 0);
	zs_destroy_pool(p);
	return tu_done();
}
