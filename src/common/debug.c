/*
 * The out-of-line half of common/debug.h: the one thread-id variable every
 * layer's lock owner fields compare against, and the report an internal
 * check makes before it aborts.  Both are internal (hidden in libzs.so).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/debug.h"

_Thread_local char zs_debug_thread_id;

#ifdef ZS_DEBUG
void zs_assert_fail(const char *cond, const char *file, int line, const char *func)
{
	fprintf(stderr, "libzs: %s:%d: %s: internal check failed: %s\n", file, line, func, cond);
	fflush(stderr);
	abort();
}
#endif
