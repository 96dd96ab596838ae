/*
 * Backend kind "mimalloc" (built when CMake finds libmimalloc: ZS_HAVE_MIMALLOC).
 *
 * Uses mi_malloc/mi_free on mimalloc's default (per-thread) heaps.  A private
 * mi_heap_t per backend would isolate it better, but a mimalloc heap may only
 * allocate from the thread that created it, and backends must be usable from
 * any thread.  mem_bytes is mimalloc's own committed-bytes counter
 * (mi_process_info), i.e. every mimalloc user in the process; `zs compare`
 * runs each backend in its own child process so that this is just the pool.
 */
#ifdef ZS_HAVE_MIMALLOC
#include <errno.h>
#include <mimalloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <pthread.h>
#include "harness_internal.h"

/* Loaded with dlopen(RTLD_LOCAL) on first use, not linked: see be_jemalloc.c for why. */
static void *(*p_mi_malloc)(size_t);
static void (*p_mi_free)(void *);
static void (*p_mi_collect)(bool);
static void (*p_mi_process_info)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
				 size_t *, size_t *);
static pthread_once_t mi_once = PTHREAD_ONCE_INIT;

static void mi_load(void)
{
	void *lib = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	*(void **)&p_mi_free = dlsym(lib, "mi_free");
	*(void **)&p_mi_collect = dlsym(lib, "mi_collect");
	*(void **)&p_mi_process_info = dlsym(lib, "mi_process_info");
	if (p_mi_free && p_mi_collect && p_mi_process_info)
		*(void **)&p_mi_malloc = dlsym(lib, "mi_malloc");
}
#define mi_malloc p_mi_malloc
#define mi_free p_mi_free
#define mi_collect p_mi_collect
#define mi_process_info p_mi_process_info

static int mi_be_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	(void)cfg;
	pthread_once(&mi_once, mi_load);
	if (!p_mi_malloc)
		return -ENOTSUP;
	b->impl = calloc(1, sizeof(struct zs_be_count));
	return b->impl ? 0 : -ENOMEM;
}

static void mi_be_destroy(struct zs_backend *b)
{
	free(b->impl);
}

static unsigned long mi_be_malloc(struct zs_backend *b, size_t size)
{
	if (be_bad_size(b, size))
		return (unsigned long)(size ? -ENOSPC : -EINVAL);
	void *p = mi_malloc(size);
	if (!p)
		return (unsigned long)-ENOMEM;
	struct zs_be_count *c = b->impl;
	be_count_add(c, 1);
	return (unsigned long)p;
}

static int mi_be_free(struct zs_backend *b, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	mi_free((void *)h);
	struct zs_be_count *c = b->impl;
	be_count_add(c, -1);
	return 0;
}

/* mimalloc's strongest cleanup: free retired pages/segments back to the OS. */
static unsigned long mi_be_compact(struct zs_backend *b)
{
	(void)b;
	mi_collect(true);
	return 0;
}

static void mi_be_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	struct zs_be_count *c = b->impl;
	size_t commit = 0, peak_commit = 0, rss = 0, peak_rss = 0, faults = 0;
	memset(st, 0, sizeof(*st));
	st->objects = be_count_objects(c);
	mi_process_info(NULL, NULL, NULL, &rss, &peak_rss, &commit, &peak_commit, &faults);
	st->mem_bytes = commit;
}

const struct zs_backend_ops zs_be_mimalloc_ops = {
	.kind = "mimalloc",
	.create = mi_be_create,
	.destroy = mi_be_destroy,
	.malloc = mi_be_malloc,
	.free = mi_be_free,
	.read_begin = be_ptr_read_begin,
	.read_end = be_ptr_read_end,
	.write = be_ptr_write,
	.compact = mi_be_compact,
	.stats = mi_be_stats,
};
#else
typedef int zs_be_mimalloc_unused;
#endif
