/*
 * The stream pool of zram and zswap (compress/streams.h): how many streams,
 * how one is built, and when.
 *
 * Streams are built on first use, not at create: a pool gets 2 per CPU,
 * and each stream holds a compressor context and its buffers - 14 KiB with
 * lz4, 110 KiB with zstd - so an empty store on a 16-CPU machine held
 * 560 KiB (lz4) to 3.5 MiB (zstd) before it stored a page, and a program
 * that writes from one thread only ever needs one.  Stream 0 is built at
 * create, so a bad compressor, level, dictionary or filter still fails the
 * store's create, and is the fallback when building another stream fails
 * for lack of memory: a thread then waits for stream 0 rather than failing
 * its write.  A stream is built by the thread holding its busy flag, which
 * the next holder takes with acquire, so the build is published with the
 * flag's release.  A store that must not be interrupted mid-call (zram's
 * block-signals mode, a region's store) builds them all at once instead
 * (comp_pool_build_all), so no fault handler allocates.
 */
#include "compress/streams.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void stream_clear(struct comp_stream *s)
{
	zs_comp_destroy(s->comp);
	zs_comp_destroy(s->recomp);
	free(s->buf);
	free(s->local);
	free(s->page);
	s->comp = s->recomp = NULL;
	s->buf = s->local = s->page = NULL;
	s->buf_cap = 0;
	s->ready = 0;
}

/* Build one stream; on failure it is left empty (stream_clear) for a later try. */
static int stream_build(const struct comp_pool *p, struct comp_stream *s)
{
	size_t ps = p->page_size;
	int rc = zs_comp_create(&(struct zs_comp_config){ .name = p->comp, .max_src = ps, .level = p->prm.level, .dict = p->prm.dict, .dict_len = p->prm.dict_len }, &s->comp, NULL, 0);

	if (!rc && p->recomp)
		rc = zs_comp_create(&(struct zs_comp_config){ .name = p->recomp, .max_src = ps, .level = p->rprm.level, .dict = p->rprm.dict, .dict_len = p->rprm.dict_len }, &s->recomp, NULL, 0);
	/* Both algorithms filter, so a slot's priority alone says how to decode it. */
	if (!rc)
		rc = zs_comp_set_filter(s->comp, p->filter);
	if (!rc && s->recomp)
		rc = zs_comp_set_filter(s->recomp, p->filter);
	if (!rc) {
		s->buf_cap = zs_comp_bound(s->comp, ps);
		if (s->recomp && zs_comp_bound(s->recomp, ps) > s->buf_cap)
			s->buf_cap = zs_comp_bound(s->recomp, ps);
		s->buf = malloc(s->buf_cap);
		s->local = malloc(ps);
		if (p->page_buf)
			s->page = malloc(ps);
		if (!s->buf || !s->local || (p->page_buf && !s->page))
			rc = -ENOMEM;
	}
	if (rc)
		stream_clear(s);
	else
		s->ready = 1;
	return rc;
}

int comp_pool_build_taken(void *pool, unsigned i)
{
	struct comp_pool *p = pool;
	unsigned inj = atomic_load_explicit(&p->inject, memory_order_relaxed);

	while (inj && !atomic_compare_exchange_weak_explicit(&p->inject, &inj, inj - 1,
							     memory_order_relaxed, memory_order_relaxed))
		;
	if (!inj && !stream_build(p, comp_pool_at(p, i)))
		return 0;
	atomic_fetch_add_explicit(&p->failed, 1, memory_order_relaxed);
	return -ENOMEM;
}

/* The pool's own copy of a parameter set's dictionary. */
static int copy_params(struct zs_comp_params *dst, const struct zs_comp_params *src)
{
	*dst = src ? *src : (struct zs_comp_params){ 0 };
	if (!dst->dict)
		return 0;
	if (!dst->dict_len) {
		dst->dict = NULL; /* not ours to free; zs_comp_create refuses it too */
		return -EINVAL;
	}
	void *d = malloc(dst->dict_len);
	if (!d) {
		dst->dict = NULL;
		return -ENOMEM;
	}
	memcpy(d, src->dict, src->dict_len);
	dst->dict = d;
	return 0;
}

int comp_pool_create(struct comp_pool *p, const struct comp_pool_config *cfg)
{
	memset(p, 0, sizeof(*p));
	if (cfg->nstreams) {
		p->n = cfg->nstreams;
	} else {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		/* More streams than CPUs: a thread preempted while holding one does not stall others. */
		p->n = ncpu > 2 ? (unsigned)ncpu * 2 : 4;
		if (p->n > cfg->max_streams)
			p->n = cfg->max_streams;
	}
	p->stride = cfg->stride;
	p->page_size = cfg->page_size;
	p->page_buf = cfg->page_buf;
	p->comp = strdup(cfg->comp);
	p->recomp = cfg->recomp ? strdup(cfg->recomp) : NULL;
	p->filter = cfg->filter ? strdup(cfg->filter) : NULL;
	if (!p->comp || (cfg->recomp && !p->recomp) || (cfg->filter && !p->filter))
		return -ENOMEM;
	int rc = copy_params(&p->prm, cfg->prm);
	if (!rc)
		rc = copy_params(&p->rprm, cfg->rprm);
	if (rc)
		return rc;
	p->base = aligned_alloc(64, p->stride * p->n);
	if (!p->base)
		return -ENOMEM;
	memset(p->base, 0, p->stride * p->n);
	return stream_build(p, comp_pool_at(p, 0));
}

void comp_pool_build_all(struct comp_pool *p)
{
	for (unsigned i = 1; i < p->n; i++) {
		struct comp_stream *s = comp_pool_at(p, i);
		unsigned spins = 0;

		while (atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
			spin_wait(&spins);
		if (!s->ready)
			(void)stream_build(p, s); /* failed: built on first use, as usual */
		atomic_store_explicit(&s->busy, 0, memory_order_release);
	}
}

unsigned comp_pool_inject(struct comp_pool *p, unsigned count)
{
	atomic_store_explicit(&p->inject, count, memory_order_relaxed);
	return atomic_load_explicit(&p->failed, memory_order_relaxed);
}

void comp_pool_free(struct comp_pool *p)
{
	if (p->base) {
		for (unsigned i = 0; i < p->n; i++)
			stream_clear(comp_pool_at(p, i));
		free(p->base);
	}
	free(p->comp);
	free(p->recomp);
	free(p->filter);
	free((void *)p->prm.dict);
	free((void *)p->rprm.dict);
	memset(p, 0, sizeof(*p));
}
