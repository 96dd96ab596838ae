/*
 * The stats getters' copy-out: every zs_*_stats call takes the caller's
 * sizeof its struct and writes only that many bytes (docs/abi.md, "Stats
 * that grow"), so a counter appended later is a MINOR: a program built
 * against the shorter struct gets its prefix and nothing past it is touched.
 * One function, so every layer clips the same way.
 */
#ifndef ZS_SRC_COMMON_STATS_COPY_H
#define ZS_SRC_COMMON_STATS_COPY_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* 0, or -EINVAL for a NULL destination or a size of 0 (nothing written then). */
static inline int stats_copy_out(void *dst, size_t size, const void *full, size_t full_size)
{
	if (!dst || !size)
		return -EINVAL;
	memcpy(dst, full, size < full_size ? size : full_size);
	return 0;
}

#endif
