/*
 * The store's stream pool: the fixed set of compression contexts (the
 * kernel's per-CPU zcomp streams) and how a thread gets one.  Its own file
 * because every path (write, read, discard, maintenance) takes a stream and
 * the hint logic is the part worth reading alone; layout in zram/internal.h.
 */
#include <sched.h>

#include "zram/internal.h"

static _Atomic unsigned stream_hint_next;
static _Thread_local unsigned stream_hint;
static _Thread_local int stream_hint_set;

struct stream *zram_stream_get(struct zs_zram *z)
{
	unsigned n = z->nstreams, start, i;

	if (unlikely(!stream_hint_set)) {
		stream_hint = atomic_fetch_add_explicit(&stream_hint_next, 1, memory_order_relaxed);
		stream_hint_set = 1;
	}
	start = stream_hint % n;
	for (;;) {
		for (i = 0; i < n; i++) {
			struct stream *s = &z->streams[(start + i) % n];

			if (!atomic_load_explicit(&s->busy, memory_order_relaxed) &&
			    !atomic_exchange_explicit(&s->busy, 1, memory_order_acquire)) {
				if (i)
					stream_hint = (start + i) % n;
				return s;
			}
		}
		sched_yield();
	}
}
