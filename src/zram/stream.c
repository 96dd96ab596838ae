/*
 * The store's stream pool: the fixed set of compression contexts (the
 * kernel's per-CPU zcomp streams) and how a thread gets one.  Its own file
 * because every path (write, read, discard, maintenance) takes a stream and
 * the hint logic is the part worth reading alone; layout in zram/internal.h.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zram/internal.h"

const char zram_stream_lockid;   /* every stream's identity for the lock-order check */
static _Thread_local unsigned stream_hint;

struct stream *zram_stream_get(struct zs_zram *z)
{
	/* Checked before the wait: a stream taken out of order would wait forever. */
	zs_lock_take(&zram_stream_lockid, ZS_LOCK_ZRAM_STREAM);
	return &z->streams[zs_busy_take(&z->streams[0].busy, sizeof(z->streams[0]), z->nstreams,
					 &stream_hint)];
}

int zram_streams_create(struct zs_zram *z, const struct zs_zram_config *cfg,
			const struct zram_params *prm)
{
	size_t ps = z->page_size;
	int rc = -ENOMEM;

	if (cfg->streams) {
		z->nstreams = cfg->streams;
	} else {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		z->nstreams = ncpu > 2 ? (unsigned)ncpu * 2 : 4;
		if (z->nstreams > ZS_ZRAM_MAX_STREAMS)
			z->nstreams = ZS_ZRAM_MAX_STREAMS;
	}
	z->streams = aligned_alloc(64, sizeof(struct stream) * z->nstreams);
	if (!z->streams)
		return rc;
	memset(z->streams, 0, sizeof(struct stream) * z->nstreams);
	for (unsigned i = 0; i < z->nstreams; i++) {
		struct stream *s = &z->streams[i];

		rc = zs_comp_create_params(cfg->comp ? cfg->comp : "lz4", ps, &prm->comp, &s->comp);
		if (rc)
			return rc;
		if (cfg->recomp &&
		    (rc = zs_comp_create_params(cfg->recomp, ps, &prm->recomp, &s->recomp)))
			return rc;
		/* Both algorithms filter, so a slot's priority alone says how to decode it. */
		if ((rc = zs_comp_set_filter(s->comp, cfg->filter)) ||
		    (s->recomp && (rc = zs_comp_set_filter(s->recomp, cfg->filter))))
			return rc;
		s->buf_cap = zs_comp_bound(s->comp, ps);
		if (s->recomp && zs_comp_bound(s->recomp, ps) > s->buf_cap)
			s->buf_cap = zs_comp_bound(s->recomp, ps);
		s->buf = malloc(s->buf_cap);
		s->local_copy = malloc(ps);
		rc = -ENOMEM;
		if (!s->buf || !s->local_copy)
			return rc;
	}
	return 0;
}

void zram_streams_free(struct zs_zram *z)
{
	if (!z->streams)
		return;
	for (unsigned i = 0; i < z->nstreams; i++) {
		zs_comp_destroy(z->streams[i].comp);
		zs_comp_destroy(z->streams[i].recomp);
		free(z->streams[i].buf);
		free(z->streams[i].local_copy);
	}
	free(z->streams);
	z->streams = NULL;
}
