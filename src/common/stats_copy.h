/*
 * The stats getters' copy-out: every zs_*_stats call takes the caller's
 * sizeof its struct and writes only that many bytes (docs/abi.md, "Stats
 * that grow"), so a counter appended later is a MINOR: a program built
 * against the shorter struct gets its prefix and nothing past it is touched.
 * One function, so every layer clips the same way; stats_get is a whole
 * getter around it, so every layer checks and zeroes the same way too.
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

/* Fills a zeroed *full from obj (and arg: an index, a group); 0 or a negative errno. */
typedef int (*stats_fill_fn)(void *obj, const void *arg, void *full);

/*
 * A whole getter: -EINVAL for a NULL destination or a size of 0, then fill
 * into the caller's local full (zeroed first), whose error comes back with
 * nothing written, then the clipped copy.  The fill checks obj itself: a
 * NULL object is -EINVAL for most getters and all zeros for some
 * (zs_zswap_get_stats).
 */
static inline int stats_get(void *dst, size_t size, void *full, size_t full_size,
			    stats_fill_fn fill, void *obj, const void *arg)
{
	if (!dst || !size)
		return -EINVAL;
	memset(full, 0, full_size);
	int rc = fill(obj, arg, full);
	return rc ? rc : stats_copy_out(dst, size, full, full_size);
}

#endif
