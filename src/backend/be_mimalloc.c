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
#include "backend_internal.h"

static int mi_be_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	(void)cfg;
	b->impl = calloc(1, sizeof(struct zs_be_count));
	return b->impl ? 0 : -ENOMEM;
}

static void mi_be_destroy(struct zs_backend *b)
{
	free(b->impl);
}

static unsigned long mi_be_malloc(struct zs_backend *b, size_t size)
{
	if (zs_be_bad_size(b, size))
		return (unsigned long)(size ? -ENOSPC : -EINVAL);
	void *p = mi_malloc(size);
	if (!p)
		return (unsigned long)-ENOMEM;
	struct zs_be_count *c = b->impl;
	atomic_fetch_add_explicit(&c->objects, 1, memory_order_relaxed);
	return (unsigned long)p;
}

static int mi_be_free(struct zs_backend *b, unsigned long h)
{
	if (h == 0 || ZS_IS_ERR(h))
		return 0;
	mi_free((void *)h);
	struct zs_be_count *c = b->impl;
	atomic_fetch_sub_explicit(&c->objects, 1, memory_order_relaxed);
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
	st->objects = atomic_load_explicit(&c->objects, memory_order_relaxed);
	mi_process_info(NULL, NULL, NULL, &rss, &peak_rss, &commit, &peak_commit, &faults);
	st->mem_bytes = commit;
}

const struct zs_backend_ops zs_be_mimalloc_ops = {
	.kind = "mimalloc",
	.create = mi_be_create,
	.destroy = mi_be_destroy,
	.malloc = mi_be_malloc,
	.free = mi_be_free,
	.read_begin = zs_be_ptr_read_begin,
	.read_end = zs_be_ptr_read_end,
	.write = zs_be_ptr_write,
	.compact = mi_be_compact,
	.stats = mi_be_stats,
};
#else
typedef int zs_be_mimalloc_unused;
#endif
