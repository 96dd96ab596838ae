/*
 * Compression contexts (the kernel's per-CPU acomp contexts): a fixed pool
 * of streams, each with its context and buffers, taken with one atomic
 * exchange.  Its own file because store, load, writeback and the worker all
 * take one, and how an entry's object is read back into a page (raw,
 * size-only or compressed) is the same for load and writeback.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zswap/internal.h"

static _Thread_local unsigned hint;

/*
 * Streams are built on first use, as the zram store's are (zram/stream.c:
 * 2 per CPU, each a compressor context and three buffers, held by an empty
 * zswap before it stored a page).  Stream 0 is built at create, so a bad
 * compressor or level still fails zs_zswap_create, and serves a thread
 * whose stream cannot be built for lack of memory.
 */
static void stream_clear(struct zw_stream *s)
{
	zs_comp_destroy(s->comp);
	free(s->buf);
	free(s->page);
	free(s->local);
	s->comp = NULL;
	s->buf = s->page = s->local = NULL;
	s->buf_cap = 0;
	s->ready = 0;
}

static int stream_build(struct zs_zswap *z, struct zw_stream *s)
{
	struct zs_comp_params prm = { .level = z->stream_level };
	size_t ps = z->page_size;
	int rc = zs_comp_create_params(z->stream_comp, ps, &prm, &s->comp);

	if (!rc) {
		s->buf_cap = zs_comp_bound(s->comp, ps);
		s->buf = malloc(s->buf_cap);
		s->page = malloc(ps);
		s->local = malloc(ps);
		if (!s->buf || !s->page || !s->local)
			rc = -ENOMEM;
	}
	if (rc)
		stream_clear(s);
	else
		s->ready = 1;
	return rc;
}

static int build_taken(void *ctx, unsigned i)
{
	struct zs_zswap *z = ctx;
	return stream_build(z, &z->streams[i]);
}

struct zw_stream *zswap_stream_get(struct zs_zswap *z)
{
	return &z->streams[zs_busy_take_built(&z->streams[0].busy, &z->streams[0].ready,
					      sizeof(z->streams[0]), z->nstreams, &hint,
					      build_taken, z)];
}

int zswap_streams_create(struct zs_zswap *z, const char *comp, int level)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* More streams than CPUs: a thread preempted while holding one does not stall others. */
	z->nstreams = ncpu > 2 ? (unsigned)ncpu * 2 : 4;
	if (z->nstreams > 256)
		z->nstreams = 256;
	z->stream_level = level;
	z->stream_comp = strdup(comp);
	if (!z->stream_comp)
		return -ENOMEM;
	z->streams = aligned_alloc(64, sizeof(*z->streams) * z->nstreams);
	if (!z->streams)
		return -ENOMEM;
	memset(z->streams, 0, sizeof(*z->streams) * z->nstreams);
	int rc = stream_build(z, &z->streams[0]);
	if (rc)
		return rc;
	z->comp_bound = z->streams[0].buf_cap;
	return 0;
}

void zswap_streams_free(struct zs_zswap *z)
{
	if (z->streams) {
		for (unsigned i = 0; i < z->nstreams; i++)
			stream_clear(&z->streams[i]);
		free(z->streams);
		z->streams = NULL;
	}
	free(z->stream_comp);
	z->stream_comp = NULL;
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
		if (zs_unlikely(!p))
			return -EIO;
		if (p != page)
			memcpy(page, p, ps);
		zs_backend_read_end(z->b, n->handle, ps, p);
		return 0;
	}
	p = zs_backend_read_begin(z->b, n->handle, n->len, s->local);
	if (zs_unlikely(!p))
		return -EIO;
	if (zs_decompress(s->comp, p, n->len, page, ps) != (int)ps)
		rc = -EIO;
	zs_backend_read_end(z->b, n->handle, n->len, p);
	return rc;
}
