/*
 * JSON-like records for the blob store and cache tests: field names and
 * words from a small vocabulary, numbers from a seeded generator, so values
 * compress as real application records do (2-4x with lz4), and the same
 * (seed, length) always gives the same bytes, which is how tests check what
 * they read back without keeping a copy.
 */
#ifndef ZS_TESTS_BLOB_GEN_H
#define ZS_TESTS_BLOB_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const gen_words[] = {
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
	"juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
	"sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
};
static const char *const gen_fields[] = {
	"id", "name", "email", "created_at", "tags", "score", "status", "owner", "region", "count",
};

static inline uint64_t gen_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Fill buf with exactly len bytes of a record made from seed. */
static inline void gen_record(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed;
	size_t at = 0;
	char tmp[96];
	while (at < len) {
		uint64_t r = gen_next(&s);
		const char *f = gen_fields[r % 10];
		const char *w = gen_words[(r >> 8) % 26];
		int n;
		switch ((r >> 16) % 4) {
		case 0:
			n = snprintf(tmp, sizeof(tmp), "{\"%s\":%u,", f, (unsigned)(r >> 32) % 100000);
			break;
		case 1:
			n = snprintf(tmp, sizeof(tmp), "\"%s\":\"%s_%u\",", f, w, (unsigned)(r >> 40) % 1000);
			break;
		case 2:
			n = snprintf(tmp, sizeof(tmp), "\"%s\":[\"%s\",\"%s\"],", f, w,
				     gen_words[(r >> 24) % 26]);
			break;
		default:
			n = snprintf(tmp, sizeof(tmp), "\"%s\":0.%06u},\n", f, (unsigned)(r >> 36) % 1000000);
			break;
		}
		size_t k = (size_t)n < len - at ? (size_t)n : len - at;
		memcpy(buf + at, tmp, k);
		at += k;
	}
}

#endif
