/*
 * The stream pool zram and zswap share (the kernel's per-CPU zcomp
 * streams): a fixed table of compression streams, each a compressor
 * context (and an optional second one for recompression), an output buffer
 * of the contexts' worst case and one or two page buffers, taken with one
 * atomic exchange.  streams.c says when streams are built.
 *
 * A user's stream type embeds the pool's part first, as
 *     union { struct comp_stream cs; struct { COMP_STREAM_MEMBERS }; };
 * so its code names the members directly (s->comp, s->buf) while the pool
 * reaches them through struct comp_stream, and adds its own fields after
 * (zram: per-stream counters).
 */
#ifndef ZS_COMPRESS_STREAMS_H
#define ZS_COMPRESS_STREAMS_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/hints.h"
#include "zs/compress.h"

#define COMP_STREAM_MEMBERS                                                                   \
	_Atomic int busy;                                                                     \
	int ready;                 /* built: stream 0 at create, the others on first use */   \
	struct zs_comp *comp;                                                                 \
	struct zs_comp *recomp;    /* the second algorithm; NULL if none configured */        \
	unsigned char *buf;        /* compression output, the contexts' worst case */         \
	size_t buf_cap;                                                                       \
	union {                    /* one page: read_begin's copy of a page-spanning object */ \
		unsigned char *local;                                                         \
		unsigned char *local_copy;                                                    \
	};                                                                                    \
	unsigned char *page;       /* a second page, when the pool was asked for one */

struct comp_stream {
	COMP_STREAM_MEMBERS
};

struct comp_pool_config {
	const char *comp;                   /* required */
	const char *recomp;                 /* NULL: none */
	const char *filter;                 /* zs_comp_set_filter's spec, on both; NULL: none */
	const struct zs_comp_params *prm;   /* for comp; NULL: defaults.  The dictionary is copied. */
	const struct zs_comp_params *rprm;  /* for recomp, likewise */
	size_t page_size;
	unsigned nstreams;   /* 0: 2 per online CPU, 4 with 1-2 CPUs, at most max_streams */
	unsigned max_streams;
	size_t stride;       /* sizeof the user's stream type (a multiple of 64) */
	int page_buf;        /* also give each stream `page` */
};

struct comp_pool {
	void *base;          /* nstreams streams, stride bytes apart */
	unsigned n;
	size_t stride;
	/* What every stream is built from, copied at create, kept for lazy builds. */
	char *comp, *recomp, *filter;
	struct zs_comp_params prm, rprm;
	size_t page_size;
	int page_buf;
	_Atomic unsigned inject;   /* comp_pool_inject: builds left to fail */
	_Atomic unsigned failed;   /* builds that failed, injected or not */
};

/*
 * Allocate the table and build stream 0 now, so a bad compressor, level,
 * dictionary or filter fails here.  0 or -errno; on failure what was made
 * stays for comp_pool_free (call it either way).
 */
int comp_pool_create(struct comp_pool *p, const struct comp_pool_config *cfg);
void comp_pool_free(struct comp_pool *p);

static inline struct comp_stream *comp_pool_at(const struct comp_pool *p, unsigned i)
{
	return (struct comp_stream *)(void *)((char *)p->base + (size_t)i * p->stride);
}

/* busy_take_built's build step (streams.c). */
int comp_pool_build_taken(void *pool, unsigned i);

/*
 * A free stream, spinning then yielding while all are busy, built on first
 * use; never fails (stream 0 serves a thread whose stream cannot be built).
 * hint: the caller's thread-local starting point.
 */
static inline struct comp_stream *comp_pool_get(struct comp_pool *p, unsigned *hint)
{
	struct comp_stream *s0 = comp_pool_at(p, 0);

	return comp_pool_at(p, busy_take_built(&s0->busy, &s0->ready, p->stride, p->n, hint,
						  comp_pool_build_taken, p));
}

static inline void comp_pool_put(struct comp_stream *s)
{
	atomic_store_explicit(&s->busy, 0, memory_order_release);
}

/* Build every stream not built yet, now (a signal-blocking zram store); best effort. */
void comp_pool_build_all(struct comp_pool *p);
/* Make the next `count` builds fail as out of memory; returns the failures so far. */
unsigned comp_pool_inject(struct comp_pool *p, unsigned count);

#endif
