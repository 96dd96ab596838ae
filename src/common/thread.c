/*
 * The one definition of the per-thread number (common/hints.h): in a single
 * file so that every file sees the same number for a thread (a static
 * inside the inline helper would give each file its own).
 */
#include <stdatomic.h>

#include "common/hints.h"

_Thread_local unsigned zs_thread_index_1 ZS_TLS_IE;

unsigned zs_thread_index_assign(void)
{
	static atomic_uint next;
	unsigned v = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
	if (zs_unlikely(v == 0))   /* after 2^32 threads */
		v = 1;
	zs_thread_index_1 = v;
	return v;
}
