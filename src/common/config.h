/*
 * The head and tail every public config structure carries (struct_size
 * first, reserved[] last; docs/abi.md "Growing a config"), checked in one
 * place by every create call, so a config from another layout, or one not
 * made by its config_init, is refused the same way everywhere.
 */
#ifndef ZS_COMMON_CONFIG_H
#define ZS_COMMON_CONFIG_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * 0 when struct_size is 0 or `size` (the library's sizeof) and every
 * reserved word is 0; -EINVAL otherwise, with *bad set to the first
 * reserved index that is not 0 (or -1 when struct_size is the problem).
 */
static inline int config_abi_check(size_t struct_size, size_t size, const uint64_t *reserved,
				      size_t nreserved, int *bad)
{
	*bad = -1;
	if (struct_size && struct_size != size)
		return -EINVAL;
	for (size_t i = 0; i < nreserved; i++) {
		if (reserved[i]) {
			*bad = (int)i;
			return -EINVAL;
		}
	}
	return 0;
}

/* The create calls' message for a refused head or tail (`bad` from the check). */
static inline void config_abi_err(char *err, size_t len, const char *type, size_t struct_size,
				     size_t size, int bad)
{
	if (!err || !len)
		return;
	if (bad >= 0)
		snprintf(err, len, "%s: reserved[%d] is not 0 (fill the config with its "
			 "config_init; docs/abi.md)", type, bad);
	else
		snprintf(err, len, "%s: struct_size %zu is not this library's %zu (a config "
			 "compiled against another layout; docs/abi.md)", type, struct_size, size);
}

#define ZS_CONFIG_ABI_CHECK(cfg, bad)                                                     \
	config_abi_check((cfg)->struct_size, sizeof(*(cfg)), (cfg)->reserved,          \
			    sizeof((cfg)->reserved) / sizeof((cfg)->reserved[0]), (bad))

#endif
