/*
 * The store's stream pool: the fixed set of compression contexts (the
 * kernel's per-CPU zcomp streams) and how a thread gets one.  Its own file
 * because every path (write, read, discard, maintenance) takes a stream and
 * the hint logic is the part worth reading alone; layout in zram/internal.h.
 *
 * Streams are built on first use, not at create: a store gets 2 per CPU
 * (up to ZS_ZRAM_MAX_STREAMS), and each holds a compressor context and two
 * buffers - 14 KiB with lz4, 110 KiB with zstd - so an empty store on a
 * 16-CPU machine held 560 KiB (lz4) to 3.5 MiB (zstd) before it stored a
 * page, and a program that writes from one thread only ever needs one.
 * Stream 0 is built at create, so a bad compressor, level, dictionary or
 * filter still fails zs_zram_create, and is the fallback when building
 * another stream fails for lack of memory: a thread then waits for stream 0
 * rather than failing its write.  A stream is built by the thread holding
 * its busy flag, which the next holder takes with acquire, so the build is
 * published with the flag's release.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zram/internal.h"

const char zram_stream_lockid;   /* every stream's identity for the lock-order check */
static _Thread_local unsigned stream_hint;

/* What every stream is built from: the config's names and filter, copied, and its parameters. */
struct zram_stream_spec {
	char *comp, *recomp, *filter;
	struct zram_params prm;
	size_t page_size;
	_Atomic unsigned inject;   /* zs_zram_stream_inject: builds left to fail */
	_Atomic unsigned failed;   /* builds that failed, injected or not */
};

static void stream_clear(struct stream *s)
{
	zs_comp_destroy(s->comp);
	zs_comp_destroy(s->recomp);
	free(s->buf);
	free(s->local_copy);
	s->comp = s->recomp = NULL;
	s->buf = s->local_copy = NULL;
	s->buf_cap = 0;
	s->ready = 0;
}

/* Build one stream from the spec; on failure it is left empty (stream_clear) for a later try. */
static int stream_build(const struct zram_stream_spec *sp, struct stream *s)
{
	size_t ps = sp->page_size;
	int rc = zs_comp_create_params(sp->comp, ps, &sp->prm.comp, &s->comp);

	if (!rc && sp->recomp)
		rc = zs_comp_create_params(sp->recomp, ps, &sp->prm.recomp, &s->recomp);
	/* Both algorithms filter, so a slot's priority alone says how to decode it. */
	if (!rc)
		rc = zs_comp_set_filter(s->comp, sp->filter);
	if (!rc && s->recomp)
		rc = zs_comp_set_filter(s->recomp, sp->filter);
	if (!rc) {
		s->buf_cap = zs_comp_bound(s->comp, ps);
		if (s->recomp && zs_comp_bound(s->recomp, ps) > s->buf_cap)
			s->buf_cap = zs_comp_bound(s->recomp, ps);
		s->buf = malloc(s->buf_cap);
		s->local_copy = malloc(ps);
		if (!s->buf || !s->local_copy)
			rc = -ENOMEM;
	}
	if (rc)
		stream_clear(s);
	else
		s->ready = 1;
	return rc;
}

/* zs_busy_take_built's build step for stream i (its taker holds it); counts failures. */
static int build_taken(void *ctx, unsigned i)
{
	struct zs_zram *z = ctx;
	struct zram_stream_spec *sp = z->spec;
	unsigned inj = atomic_load_explicit(&sp->inject, memory_order_relaxed);
	while (inj && !atomic_compare_exchange_weak_explicit(&sp->inject, &inj, inj - 1,
							     memory_order_relaxed, memory_order_relaxed))
		;
	if (!inj && !stream_build(sp, &z->streams[i]))
		return 0;
	atomic_fetch_add_explicit(&sp->failed, 1, memory_order_relaxed);
	return -ENOMEM;
}

struct stream *zram_stream_get(struct zs_zram *z)
{
	/* Checked before the wait: a stream taken out of order would wait forever. */
	zs_lock_take(&zram_stream_lockid, ZS_LOCK_ZRAM_STREAM);
	return &z->streams[zs_busy_take_built(&z->streams[0].busy, &z->streams[0].ready,
					      sizeof(z->streams[0]), z->nstreams, &stream_hint,
					      build_taken, z)];
}

int zram_streams_create(struct zs_zram *z, const struct zs_zram_config *cfg,
			struct zram_params *prm)
{
	if (cfg->streams) {
		z->nstreams = cfg->streams;
	} else {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		z->nstreams = ncpu > 2 ? (unsigned)ncpu * 2 : 4;
		if (z->nstreams > ZS_ZRAM_MAX_STREAMS)
			z->nstreams = ZS_ZRAM_MAX_STREAMS;
	}
	struct zram_stream_spec *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	z->spec = sp;
	sp->page_size = z->page_size;
	sp->prm = *prm; /* the dictionaries are the spec's now */
	*prm = (struct zram_params){ 0 };
	sp->comp = strdup(cfg->comp ? cfg->comp : "lz4");
	sp->recomp = cfg->recomp ? strdup(cfg->recomp) : NULL;
	sp->filter = cfg->filter ? strdup(cfg->filter) : NULL;
	if (!sp->comp || (cfg->recomp && !sp->recomp) || (cfg->filter && !sp->filter))
		return -ENOMEM;
	z->streams = aligned_alloc(64, sizeof(struct stream) * z->nstreams);
	if (!z->streams)
		return -ENOMEM;
	memset(z->streams, 0, sizeof(struct stream) * z->nstreams);
	return stream_build(sp, &z->streams[0]);
}

void zram_streams_build_all(struct zs_zram *z)
{
	for (unsigned i = 1; i < z->nstreams; i++) {
		struct stream *s = &z->streams[i];
		unsigned spins = 0;
		while (atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
			zs_spin_wait(&spins);
		if (!s->ready)
			(void)stream_build(z->spec, s); /* failed: built on first use, as usual */
		atomic_store_explicit(&s->busy, 0, memory_order_release);
	}
}

unsigned zram_stream_inject(struct zs_zram *z, unsigned count)
{
	atomic_store_explicit(&z->spec->inject, count, memory_order_relaxed);
	return atomic_load_explicit(&z->spec->failed, memory_order_relaxed);
}

void zram_streams_free(struct zs_zram *z)
{
	if (z->streams) {
		for (unsigned i = 0; i < z->nstreams; i++)
			stream_clear(&z->streams[i]);
		free(z->streams);
		z->streams = NULL;
	}
	if (z->spec) {
		free(z->spec->comp);
		free(z->spec->recomp);
		free(z->spec->filter);
		zram_params_free(&z->spec->prm);
		free(z->spec);
		z->spec = NULL;
	}
}
