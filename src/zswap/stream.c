/*
 * zswap's side of the stream pool (compress/streams.h, the kernel's
 * per-CPU acomp contexts), and how an entry's object is read back into a
 * page (raw, size-only or compressed), the same for load and writeback.
 * Its own file because store, load, writeback and the worker all take a
 * stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zswap/internal.h"

static _Thread_local unsigned hint;
const char zswap_stream_lockid;   /* every stream's identity for the lock-order check */

/*
 * Streams come from the pool zram's store uses too (compress/streams.c:
 * 2 per CPU, built on first use; stream 0 at create, so a bad compressor
 * or level still fails zs_zswap_create, and serves a thread whose stream
 * cannot be built for lack of memory).  zswap's streams carry a second
 * page (writeback's decompressed copy) and no recompression context.
 */
struct zw_stream *zswap_stream_get(struct zs_zswap *z)
{
	/* Checked before the wait: a second stream, or one taken under a shard lock, could wait forever. */
	lock_take(&zswap_stream_lockid, ZS_LOCK_ZSWAP_STREAM);
	/* A zw_stream begins with its comp_stream (the union), so the pointers are one. */
	return (struct zw_stream *)(void *)comp_pool_get(&z->pool, &hint);
}

int zswap_streams_create(struct zs_zswap *z, const char *comp, int level)
{
	const struct zs_comp_params prm = { .level = level };
	const struct comp_pool_config pc = {
		.comp = comp,
		.prm = &prm,
		.page_size = z->page_size,
		.max_streams = 256,
		.stride = sizeof(struct zw_stream),
		.page_buf = 1,
	};
	int rc = comp_pool_create(&z->pool, &pc);

	z->streams = z->pool.base;
	z->nstreams = z->pool.n;
	if (rc)
		return rc;
	z->comp_bound = z->streams[0].buf_cap;
	return 0;
}

void zswap_streams_free(struct zs_zswap *z)
{
	comp_pool_free(&z->pool);
	z->streams = NULL;
	z->nstreams = 0;
}

int zswap_entry_read(struct zs_zswap *z, struct zw_stream *s, struct zw_node *n, void *page)
{
	size_t ps = z->page_size;
	void *p;
	int rc = 0;

	if (n->flags & NF_NODATA) {
		memset(page, 0, ps);
		return 0;
	}
	if (n->flags & NF_RAW) {
		/* The caller's page doubles as the local copy: a spanning raw object costs one copy. */
		p = zs_backend_read_begin(z->b, n->handle, ps, page);
		if (unlikely(!p))
			return -EIO;
		if (p != page)
			memcpy(page, p, ps);
		zs_backend_read_end(z->b, n->handle, ps, p);
		return 0;
	}
	p = zs_backend_read_begin(z->b, n->handle, n->len, s->local);
	if (unlikely(!p))
		return -EIO;
	if (zs_decompress(s->comp, p, n->len, page, ps) != (int)ps)
		rc = -EIO;
	zs_backend_read_end(z->b, n->handle, n->len, p);
	return rc;
}
