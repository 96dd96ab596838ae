/*
 * A pattern object for tests that store and read back through the public
 * API: objpat_fill writes (len, seed)'s bytes into a buffer, and
 * objpat_stored reads a handle back (zs_obj_read_begin) and compares.  One
 * home, so tests of one allocator path do not each carry a copy of the pair.
 * Objects up to OBJPAT_MAX bytes (multi-page ones too).
 */
#ifndef ZS_TEST_OBJPAT_H
#define ZS_TEST_OBJPAT_H

#include <string.h>

#include "zs/zsmalloc.h"

#define OBJPAT_MAX 65536

static inline void objpat_fill(unsigned char *b, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(seed * 37 + i * 11 + 1);
}

/* 1 when handle h of pool p holds objpat_fill(len, seed)'s bytes. */
static inline int objpat_stored(struct zs_pool *p, unsigned long h, size_t len, unsigned seed)
{
	static unsigned char want[OBJPAT_MAX], tmp[OBJPAT_MAX];
	if (len > OBJPAT_MAX)
		return 0;
	objpat_fill(want, len, seed);
	void *m = zs_obj_read_begin(p, h, len, tmp);
	if (!m)
		return 0;
	int ok = memcmp(want, m, len) == 0;
	zs_obj_read_end(p, h, len, m);
	return ok;
}

#endif
