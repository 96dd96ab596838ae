/*
 * Tiny test harness shared by the C tests (tests/unit, internal, mt, regress):
 * CHECK macros that report the file/line and count failures, a seeded RNG
 * whose seed is printed (override with ZS_SEED=N), and the closing
 * "N passed, N failed" line ctest/CI read.
 */
#ifndef ZS_TESTUTIL_H
#define ZS_TESTUTIL_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int tu_pass, tu_fail;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (cond) {                                                          \
			tu_pass++;                                                   \
		} else {                                                             \
			tu_fail++;                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                    \
	} while (0)
#define CHECK_EQ(a, b)                                                               \
	do {                                                                         \
		long long _a = (long long)(a), _b = (long long)(b);                  \
		if (_a == _b) {                                                      \
			tu_pass++;                                                   \
		} else {                                                             \
			tu_fail++;                                                   \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", \
				__FILE__, __LINE__, #a, _a, #b, _b);                 \
		}                                                                    \
	} while (0)
/* Stop the test at once (state is no longer meaningful). */
#define REQUIRE(cond)                                                                \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			printf("%d passed, %d failed\n", tu_pass, tu_fail + 1);      \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

static inline int tu_done(void)
{
	printf("%d passed, %d failed\n", tu_pass, tu_fail);
	return tu_fail ? 1 : 0;
}

/* splitmix64: small, seedable, good enough for test workloads. */
static inline uint64_t tu_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t tu_seed(const char *test)
{
	const char *e = getenv("ZS_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
	printf("%s: seed %" PRIu64 " (rerun with ZS_SEED=%" PRIu64 ")\n", test, seed, seed);
	return seed;
}

#endif
