/*
 * What the harness's files share among themselves: the malloc baselines'
 * ops tables, which register.c hands to the backend registry.
 */
#ifndef ZS_HARNESS_INTERNAL_H
#define ZS_HARNESS_INTERNAL_H

#include "backend/backend_internal.h"

extern const struct zs_backend_ops zs_be_malloc_ops;
#ifdef ZS_HAVE_JEMALLOC
extern const struct zs_backend_ops zs_be_jemalloc_ops;
#endif
#ifdef ZS_HAVE_MIMALLOC
extern const struct zs_backend_ops zs_be_mimalloc_ops;
#endif
/* Make glibc's allocator initialise itself on this (the main) thread: be_malloc.c says why. */
void zs_be_malloc_init(void);

#endif
