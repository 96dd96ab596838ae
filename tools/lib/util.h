/*
 * Small helpers every `zs` command needs the same way: a monotonic wall clock
 * for timings and a seedable 64-bit generator (splitmix64) for workloads that
 * must replay from a printed seed.  Kept here so the commands do not each
 * carry their own copy.
 */
#ifndef ZS_TOOLS_UTIL_H
#define ZS_TOOLS_UTIL_H

#include <stdint.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double tool_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the next value of the stream whose state is *s. */
static inline uint64_t tool_rand64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif
