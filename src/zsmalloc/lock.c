/*
 * The one definition of the per-thread shard number (lock.h): defined in a
 * single file so that every file of the allocator sees the same number for
 * a thread (a static inside the inline helper would give each file its own).
 */
#include "zsmalloc/lock.h"

_Thread_local unsigned zs_thread_shard_id; /* 0: not assigned yet; else index + 1 */

unsigned zs_thread_shard_assign(void)
{
	static atomic_uint next;
	zs_thread_shard_id = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
	if (zs_unlikely(zs_thread_shard_id == 0)) /* after 2^32 threads */
		zs_thread_shard_id = 1;
	return zs_thread_shard_id;
}
