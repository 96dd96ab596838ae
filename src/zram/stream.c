/*
 * The store's side of the stream pool (compress/streams.c: when streams
 * are built and from what): the pool's configuration from zs_zram_config,
 * and the lock-order check that every stream taken passes.  Its own file
 * because every path (write, read, discard, maintenance) takes a stream;
 * layout in zram/internal.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zram/internal.h"

const char zram_stream_lockid;   /* every stream's identity for the lock-order check */
static _Thread_local unsigned stream_hint;

struct stream *zram_stream_get(struct zs_zram *z)
{
	/* Checked before the wait: a stream taken out of order would wait forever. */
	lock_take(&zram_stream_lockid, ZS_LOCK_ZRAM_STREAM);
	/* A struct stream begins with its comp_stream (the union), so the pointers are one. */
	return (struct stream *)(void *)comp_pool_get(&z->pool, &stream_hint);
}

int zram_streams_create(struct zs_zram *z, const struct zs_zram_config *cfg,
			struct zram_params *prm)
{
	const struct comp_pool_config pc = {
		.comp = cfg->comp ? cfg->comp : "lz4",
		.recomp = cfg->recomp,
		.filter = cfg->filter,
		.prm = &prm->comp,
		.rprm = &prm->recomp,
		.page_size = z->page_size,
		.nstreams = cfg->streams,
		.max_streams = ZS_ZRAM_MAX_STREAMS,
		.stride = sizeof(struct stream),
	};
	int rc = comp_pool_create(&z->pool, &pc);

	z->streams = z->pool.base;
	z->nstreams = z->pool.n;
	return rc;
}

void zram_streams_build_all(struct zs_zram *z)
{
	comp_pool_build_all(&z->pool);
}

unsigned zram_stream_inject(struct zs_zram *z, unsigned count)
{
	return comp_pool_inject(&z->pool, count);
}

void zram_streams_free(struct zs_zram *z)
{
	comp_pool_free(&z->pool);
	z->streams = NULL;
	z->nstreams = 0;
}
