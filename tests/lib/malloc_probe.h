/*
 * Probes of glibc's malloc for the tests that check what libzs does to a
 * program's heap (mmap threshold, mapped tables).  One home, because each
 * copy of it had to learn the same two things: a compiler may elide a
 * malloc whose block is never used (clang did, and the check then ran as
 * "not glibc's"), so the pointer is volatile; and freeing a mapped chunk of
 * up to 32 MiB raises glibc's mmap threshold to its size, so a probe that
 * must not move the threshold keeps its block.  C and C++.
 */
#ifndef ZS_TESTS_MALLOC_PROBE_H
#define ZS_TESTS_MALLOC_PROBE_H

#include <malloc.h>
#include <stdlib.h>

/*
 * Whether a malloc of n bytes is served by a mapping of its own (mallinfo2's
 * hblkhd grows by n).  keep: the block is not freed when freeing it would
 * raise the threshold (n <= 32 MiB); it is leaked, on purpose.
 */
static inline int tu_malloc_mapped(size_t n, int keep)
{
	struct mallinfo2 a = mallinfo2();
	void *volatile p = malloc(n); /* volatile: a compiler may not elide it */
	struct mallinfo2 b = mallinfo2();
	int r = p && b.hblkhd >= a.hblkhd + n;
	if (!(keep && n <= ((size_t)32 << 20)))
		free(p);
	return r;
}

/*
 * 1 when malloc is glibc's own: a chunk over 32 MiB is always mapped and its
 * free changes nothing, so one that mallinfo2 does not count as mapped means
 * another allocator (jemalloc, a sanitizer's) answers malloc.
 */
static inline int tu_glibc_malloc(void)
{
	return tu_malloc_mapped((size_t)33 << 20, 0);
}

#endif
