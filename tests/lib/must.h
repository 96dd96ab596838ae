/*
 * Constructors for tests that need the object and are not testing its
 * refusal: the 4.0.0 shape (int, *out, reason) wrapped so a failure stops
 * the test at once with the library's reason and the caller's line.  A test
 * that checks a refusal calls the real zs_*_create and asserts on both the
 * code and the reason text (tests/unit/test_create_reasons.c).
 */
#ifndef ZS_TEST_MUST_H
#define ZS_TEST_MUST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zs/backend.h"
#include "zs/zblock.h"
#include "zs/zsmalloc.h"

static inline void must_fail(const char *what, const char *file, int line, int rc,
			     const char *why)
{
	fprintf(stderr, "%s:%d: %s failed (%d): %s\n", file, line, what, rc, why);
	abort();
}

/*
 * One constructor of that shape, int create(cfg, &out, err, errlen), made
 * into must_STEM_at (aborts with the library's reason and the caller's
 * line) and try_STEM (for a config a test expects may be refused, limits
 * probed by the test: NULL on failure, errno set by the library).
 */
#define MUST_CREATE_FNS(stem, create, type, cfg_type)                                    \
	static inline type *must_##stem##_at(const cfg_type *cfg, const char *file, int line) \
	{                                                                                \
		type *o;                                                                 \
		char why[256];                                                           \
		int rc = create(cfg, &o, why, sizeof(why));                              \
		if (rc)                                                                  \
			must_fail(#create, file, line, rc, why);                         \
		return o;                                                                \
	}                                                                                \
	static inline type *try_##stem(const cfg_type *cfg)                              \
	{                                                                                \
		type *o;                                                                 \
		return create(cfg, &o, NULL, 0) ? NULL : o;                              \
	}

MUST_CREATE_FNS(pool_create, zs_pool_create, struct zs_pool, struct zs_pool_config)
MUST_CREATE_FNS(zblock_create, zblock_pool_create, struct zblock_pool, struct zblock_config)
MUST_CREATE_FNS(backend_create, zs_backend_create, struct zs_backend, struct zs_backend_config)

#define must_pool_create(cfg) must_pool_create_at((cfg), __FILE__, __LINE__)
#define must_zblock_create(cfg) must_zblock_create_at((cfg), __FILE__, __LINE__)
#define must_backend_create(cfg) must_backend_create_at((cfg), __FILE__, __LINE__)

/*
 * A refusal, checked whole: the code, *out NULL, errno the positive code
 * and a reason that contains `field` (the config type, or the field name).
 * Expands to testutil.h's CHECK macros at the use site.
 */
#define CHECK_REFUSED_(create, type, destroy, cfg, code, field)                          \
	do {                                                                             \
		type *_o = (type *)&_o;                                                  \
		char _why[256];                                                          \
		errno = 0;                                                               \
		int _rc = create((cfg), &_o, _why, sizeof(_why));                        \
		CHECK_EQ(_rc, (code));                                                   \
		CHECK(_o == NULL);                                                       \
		CHECK_EQ(errno, -(code));                                                \
		if (!strstr(_why, (field))) {                                            \
			fprintf(stderr, "%s:%d: reason \"%s\" does not name %s\n",         \
				__FILE__, __LINE__, _why, (field));                      \
			CHECK(strstr(_why, (field)) != NULL);                            \
		}                                                                        \
		if (!_rc && _o)                                                          \
			destroy(_o);                                                     \
	} while (0)
#define CHECK_POOL_REFUSED(cfg, field)                                                   \
	CHECK_REFUSED_(zs_pool_create, struct zs_pool, zs_destroy_pool, cfg, -EINVAL, field)
#define CHECK_ZBLOCK_REFUSED(cfg, field)                                                 \
	CHECK_REFUSED_(zblock_pool_create, struct zblock_pool, zblock_destroy_pool, cfg,   \
		       -EINVAL, field)
#define CHECK_BACKEND_REFUSED(cfg, code, field)                                          \
	CHECK_REFUSED_(zs_backend_create, struct zs_backend, zs_backend_destroy, cfg, code, field)

#endif
