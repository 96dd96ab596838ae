/*
 * Backend kind "zblock": a thin wrapper over include/zs/zblock.h.  Huge mode
 * is on so that page-size objects (zram's incompressible pages) are stored
 * rather than refused; the kernel's zblock only served zswap, which rejects
 * those pages before they reach the allocator.
 */
#include <errno.h>
#include "backend_internal.h"
#include "zs/zblock.h"

static int zbb_create(struct zs_backend *b, const struct zs_backend_config *cfg)
{
	struct zblock_config zc;
	zblock_config_init(&zc);
	zc.page_size = cfg->page_size;
	zc.max_pages = cfg->max_pages;
	zc.checked = cfg->checked;
	zc.huge = 1;
	zc.page_cache_pages = cfg->zs.page_cache_pages;
	struct zblock_pool *pool;
	int rc = zblock_pool_create(&zc, &pool, NULL, 0);
	if (rc)
		return rc;
	b->impl = pool;
	return 0;
}

static void zbb_destroy(struct zs_backend *b)
{
	zblock_destroy_pool(b->impl);
}

static unsigned long zbb_malloc(struct zs_backend *b, size_t size)
{
	return zblock_malloc(b->impl, size);
}

static int zbb_free(struct zs_backend *b, unsigned long h)
{
	return zblock_free(b->impl, h);
}

static void *zbb_read_begin(struct zs_backend *b, unsigned long h, size_t len, void *local)
{
	return zblock_obj_read_begin(b->impl, h, len, local);
}

static void zbb_read_end(struct zs_backend *b, unsigned long h, size_t len, void *mem)
{
	zblock_obj_read_end(b->impl, h, len, mem);
}

static int zbb_write(struct zs_backend *b, unsigned long h, const void *src, size_t len)
{
	return zblock_obj_write(b->impl, h, src, len);
}

static unsigned long zbb_compact(struct zs_backend *b)
{
	return zblock_compact(b->impl);
}

static void zbb_stats(struct zs_backend *b, struct zs_backend_stats *st)
{
	st->pages = zblock_get_total_pages(b->impl);
	st->mem_bytes = st->pages * b->page_size;
	st->objects = zblock_pool_objects(b->impl);
	st->object_bytes = 0;
	st->pages_compacted = 0;
}

/* No one-object-per-page class: report the first size past the last class. */
static size_t zbb_huge_class_size(struct zs_backend *b)
{
	return zblock_max_size(b->impl) + 1;
}

static int zbb_lookup_class(struct zs_backend *b, size_t size)
{
	return zblock_lookup_class(b->impl, size);
}

static unsigned long zbb_total_pages(struct zs_backend *b)
{
	return zblock_get_total_pages(b->impl);
}

static int zbb_class_count(struct zs_backend *b)
{
	return zblock_class_count(b->impl);
}

const struct zs_backend_ops be_zblock_ops = {
	.kind = "zblock",
	.create = zbb_create,
	.destroy = zbb_destroy,
	.malloc = zbb_malloc,
	.free = zbb_free,
	.read_begin = zbb_read_begin,
	.read_end = zbb_read_end,
	.write = zbb_write,
	.compact = zbb_compact,
	.stats = zbb_stats,
	.huge_class_size = zbb_huge_class_size,
	.lookup_class = zbb_lookup_class,
	.total_pages = zbb_total_pages,
	.class_count = zbb_class_count,
	/* No ZS_BACKEND_CAP_COMPACT: zblock moves nothing, its compact frees nothing. */
	.caps = ZS_BACKEND_CAP_PAGES | ZS_BACKEND_CAP_FREES_ON_DESTROY | ZS_BACKEND_CAP_CLASSES,
};
