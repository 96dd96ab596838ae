/*
 * Shared by the libFuzzer targets in tests/fuzz/: a reader that turns the
 * fuzzer's input into config choices and operation arguments (returning
 * zeros once the input runs out, so every input is a complete program), a
 * fast byte generator for object contents, and FUZZ_CHECK, which aborts so
 * that libFuzzer records the input as a crash.
 *
 * fuzz.sh runs with -close_fd_mask=2 (the code under test's stderr closed),
 * which would also swallow FUZZ_CHECK's message: a failure seen only once, in
 * CI, would then read "deadly signal" and nothing else.  So the messages go to
 * a copy of stderr taken before libFuzzer's main closes it.
 */
#ifndef ZS_FUZZ_COMMON_H
#define ZS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fin {
	const uint8_t *d;
	size_t n, pos;
};

static inline int fin_more(const struct fin *f)
{
	return f->pos < f->n;
}

static inline unsigned fin_u8(struct fin *f)
{
	return f->pos < f->n ? f->d[f->pos++] : 0;
}

static inline unsigned fin_u16(struct fin *f)
{
	unsigned a = fin_u8(f);
	return a | fin_u8(f) << 8;
}

static inline uint64_t fin_u64(struct fin *f)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)fin_u8(f) << (8 * i);
	return v;
}

#if defined(__has_attribute)
#if __has_attribute(no_sanitize_coverage)
#define NO_COV __attribute__((no_sanitize_coverage))
#endif
#endif
#ifndef NO_COV
#define NO_COV
#endif

/* Object contents: xorshift bytes from a seed (what they are does not matter, only that they stay). */
NO_COV static inline void fuzz_fill(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
	for (; i < n; i++)
		b[i] = (unsigned char)(x >> (8 * (i & 7)));
}

static int fuzz_errfd = 2;

__attribute__((constructor)) static void fuzz_keep_stderr(void)
{
	int fd = dup(2);
	if (fd >= 0)
		fuzz_errfd = fd;
}

#define FUZZ_CHECK(cond, ...)                                                        \
	do {                                                                         \
		if (!(cond)) {                                                       \
			dprintf(fuzz_errfd, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			dprintf(fuzz_errfd, __VA_ARGS__);                            \
			dprintf(fuzz_errfd, "\n");                                   \
			abort();                                                     \
		}                                                                    \
	} while (0)

#endif
