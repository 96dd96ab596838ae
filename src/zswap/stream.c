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

struct zw_stream *zswap_stream_get(struct zs_zswap *z)
{
	return &z->streams[zs_busy_take(&z->streams[0].busy, sizeof(z->streams[0]), z->nstreams,
					 &hint)];
}

int zswap_streams_create(struct zs_zswap *z, const char *comp, int level)
{
	struct zs_comp_params prm = { .level = level };
	size_t ps = z->page_size;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int rc;

	/* More streams than CPUs: a thread preempted while holding one does not stall others. */
	z->nstreams = ncpu > 2 ? (unsigned)ncpu * 2 : 4;
	if (z->nstreams > 256)
		z->nstreams = 256;
	z->streams = aligned_alloc(64, sizeof(*z->streams) * z->nstreams);
	if (!z->streams)
		return -ENOMEM;
	memset(z->streams, 0, sizeof(*z->streams) * z->nstreams);
	for (unsigned i = 0; i < z->nstreams; i++) {
		struct zw_stream *s = &z->streams[i];

		rc = zs_comp_create_params(comp, ps, &prm, &s->comp);
		if (rc)
			return rc;
		s->buf_cap = zs_comp_bound(s->comp, ps);
		s->buf = malloc(s->buf_cap);
		s->page = malloc(ps);
		s->local = malloc(ps);
		if (!s->buf || !s->page || !s->local)
			return -ENOMEM;
	}
	z->comp_bound = z->streams[0].buf_cap;
	return 0;
}

void zswap_streams_free(struct zs_zswap *z)
{
	if (!z->streams)
		return;
	for (unsigned i = 0; i < z->nstreams; i++) {
		zs_comp_destroy(z->streams[i].comp);
		free(z->streams[i].buf);
		free(z->streams[i].page);
		free(z->streams[i].local);
	}
	free(z->streams);
	z->streams = NULL;
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
