/*
 * Backend kind "zsmalloc": a thin wrapper over zs_* (include/zs/zsmalloc.h).
 * The backend config's page_size/max_pages/checked override the embedded
 * pool config so every kind is driven by the same three knobs.
 */
#include <errno.h>
#include "backend_internal.h"

static int zsb_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	struct zs_pool_config pc = cfg->zs;
	if (!pc.name)
		pc.name = "zs-backend";
	pc.page_size = cfg->page_size;
	pc.max_pages = cfg->max_pages;
	pc.checked = cfg->checked;
	struct zs_pool *pool;
	int rc = zs_pool_create(&pc, &pool, NULL, 0);
	if (rc)
		return rc;
	b->impl = pool;
	return 0;
}

static void zsb_destroy(struct zs_backend *b)
{
	zs_destroy_pool(b->impl);
}

static unsigned long zsb_malloc(struct zs_backend *b, size_t size)
{
	return zs_malloc(b->impl, size);
}

static int zsb_free(struct zs_backend *b, unsigned long h)
{
	return zs_free(b->impl, h);
}

static int zsb_free_deferred(struct zs_backend *b, unsigned long h)
{
	return zs_free_deferred(b->impl, h);
}

static void zsb_flush(struct zs_backend *b)
{
	zs_free_deferred_flush(b->impl);
}

static void *zsb_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local)
{
	return zs_obj_read_begin(b->impl, h, len, local);
}

static void zsb_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	zs_obj_read_end(b->impl, h, len, mem);
}

static int zsb_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	return zs_obj_write(b->impl, h, src, len);
}

static unsigned long zsb_compact(struct zs_backend *b)
{
	return zs_compact(b->impl);
}

static void zsb_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	struct zs_pool_stats ps;
	zs_pool_stats(b->impl, &ps, sizeof(ps));
	st->pages = zs_get_total_pages(b->impl);
	st->mem_bytes = st->pages * b->page_size;
	st->objects = zs_pool_objects(b->impl);
	st->object_bytes = 0;
	st->pages_compacted = ps.pages_compacted;
}

static size_t zsb_huge_class_size(struct zs_backend *b)
{
	return zs_huge_class_size(b->impl);
}

static int zsb_lookup_class(struct zs_backend *b, size_t size)
{
	return zs_lookup_class_index(b->impl, size);
}

static unsigned long zsb_total_pages(struct zs_backend *b)
{
	return zs_get_total_pages(b->impl);
}

static int zsb_class_count(struct zs_backend *b)
{
	return zs_class_count(b->impl);
}

const struct zs_backend_ops be_zsmalloc_ops = {
	.kind = "zsmalloc",
	.create = zsb_create,
	.destroy = zsb_destroy,
	.malloc = zsb_malloc,
	.free = zsb_free,
	.free_deferred = zsb_free_deferred,
	.flush = zsb_flush,
	.read_begin = zsb_read_begin,
	.read_end = zsb_read_end,
	.write = zsb_write,
	.compact = zsb_compact,
	.stats = zsb_stats,
	.huge_class_size = zsb_huge_class_size,
	.lookup_class = zsb_lookup_class,
	.total_pages = zsb_total_pages,
	.class_count = zsb_class_count,
	.caps = ZS_BACKEND_CAP_PAGES | ZS_BACKEND_CAP_FREES_ON_DESTROY | ZS_BACKEND_CAP_COMPACT |
		ZS_BACKEND_CAP_CLASSES,
};
