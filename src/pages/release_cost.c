/*
 * The modelled cost of giving a page back, and its clock.  Freed pool pages
 * go to a user-space cache or an madvise; the kernel's zspage free goes
 * through its page allocator instead, a cost in between that user space
 * cannot reproduce.  So a settable busy wait per released page stands in
 * for it (ZS_PAGES_RELEASE_COST_NS, or zs_pages_set_release_cost_ns), and
 * the time spent releasing can be summed for the free-mode benchmark, which
 * has to say how much of a free is the page release (docs/deferred.md).
 * Both are off by default and then cost one relaxed load per release call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pages/internal.h"
#include "zs/harness.h"

static atomic_uint g_cost_ns;
static atomic_int g_timing;
static atomic_uint_least64_t g_ns, g_pages, g_calls;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void env_init(void)
{
	const char *e = getenv("ZS_PAGES_RELEASE_COST_NS");
	if (!e || !*e)
		return;
	char *end;
	errno = 0;
	long v = strtol(e, &end, 10);
	if (errno || *end || v < 0 || v > ZS_PAGES_RELEASE_COST_MAX_NS) {
		fprintf(stderr, "libzs: ZS_PAGES_RELEASE_COST_NS=%s ignored (want 0..%d)\n", e,
			ZS_PAGES_RELEASE_COST_MAX_NS);
		return;
	}
	atomic_store_explicit(&g_cost_ns, (unsigned)v, memory_order_relaxed);
}

/* Not the provider's coarse clock: a release takes well under its tick. */
static uint64_t fine_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int zs_pages_set_release_cost_ns(unsigned ns)
{
	pthread_once(&g_once, env_init);
	if (ns > ZS_PAGES_RELEASE_COST_MAX_NS)
		return -EINVAL;
	atomic_store_explicit(&g_cost_ns, ns, memory_order_relaxed);
	return 0;
}

unsigned zs_pages_release_cost_ns(void)
{
	pthread_once(&g_once, env_init);
	return atomic_load_explicit(&g_cost_ns, memory_order_relaxed);
}

void zs_pages_release_timing(int on, struct zs_pages_release_time *out)
{
	if (out) {
		out->ns = atomic_load_explicit(&g_ns, memory_order_relaxed);
		out->pages = atomic_load_explicit(&g_pages, memory_order_relaxed);
		out->calls = atomic_load_explicit(&g_calls, memory_order_relaxed);
	}
	if (on >= 0) {
		atomic_store_explicit(&g_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&g_pages, 0, memory_order_relaxed);
		atomic_store_explicit(&g_calls, 0, memory_order_relaxed);
		atomic_store_explicit(&g_timing, on, memory_order_relaxed);
	}
}

uint64_t pages_release_begin(unsigned pages)
{
	pthread_once(&g_once, env_init);
	unsigned cost = atomic_load_explicit(&g_cost_ns, memory_order_relaxed);
	int timing = atomic_load_explicit(&g_timing, memory_order_relaxed);
	if (__builtin_expect(!cost && !timing, 1))
		return 0;
	uint64_t t0 = fine_ns();
	if (cost) {
		/* Busy, not asleep: the kernel's free path spends CPU, it does not wait. */
		uint64_t until = t0 + (uint64_t)cost * pages;
		while (fine_ns() < until)
			;
	}
	return timing ? t0 : 0;
}

void pages_release_end(uint64_t t0, unsigned pages)
{
	if (__builtin_expect(!t0, 1))
		return;
	atomic_fetch_add_explicit(&g_ns, fine_ns() - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_pages, pages, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
}
