/*
 * zsmalloc's config rules for the layers that carry a zs_pool_config
 * without always building a pool from it: the backend, whose zblock and
 * malloc kinds read little or none of backend.zs, still refuses it as
 * zs_pool_create would (zs/backend.h: its ranges hold whatever the kind),
 * so a config is accepted or refused the same whichever kind it names, and
 * a field set on a library that does not know it is refused rather than
 * ignored (docs/abi.md).  Hidden in libzs.so, like every cross-layer helper.
 */
#ifndef ZS_ZSMALLOC_CHECK_H
#define ZS_ZSMALLOC_CHECK_H

#include "zs/zsmalloc.h"

/*
 * 0, or -EINVAL where zs_pool_create(cfg) would refuse cfg, with the same
 * reason in err; allocates nothing.
 */
int pool_config_check(const struct zs_pool_config *cfg, char *err, size_t err_len);

#endif
