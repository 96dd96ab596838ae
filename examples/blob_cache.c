/*
 * Example: a small in-memory cache of variable-size blobs on a zsmalloc
 * pool, the way a user-space program would hold many small records densely.
 * It fills the cache, evicts two thirds of the entries in a scattered order
 * (which leaves every zspage partly used: fragmentation), then compacts and
 * shows the pool shrinking while every surviving blob still reads back
 * intact.  Uses only the public headers; copy it as a starting point.
 *
 *   cc blob_cache.c $(pkg-config --cflags --libs libzs) -o blob_cache
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zs/zsmalloc.h>

#define ENTRIES 20000
#define MAX_BLOB 1024

struct entry {
	unsigned long handle; /* 0: empty */
	uint32_t len;
	uint32_t seed;
};

static void make_blob(unsigned char *buf, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
}

static int put(struct zs_pool *pool, struct entry *e, uint32_t len, uint32_t seed)
{
	unsigned char buf[MAX_BLOB];
	unsigned long h = zs_malloc(pool, len);
	if (ZS_IS_ERR(h))
		return (int)(long)h; /* -ENOMEM, -ENOSPC, -EINVAL */
	make_blob(buf, len, seed);
	zs_obj_write(pool, h, buf, len);
	*e = (struct entry){ h, len, seed };
	return 0;
}

/* 1 if the entry reads back as written. */
static int check(struct zs_pool *pool, const struct entry *e)
{
	unsigned char want[MAX_BLOB], copy[MAX_BLOB];
	make_blob(want, e->len, e->seed);
	void *p = zs_obj_read_begin(pool, e->handle, e->len, copy);
	int same = memcmp(p, want, e->len) == 0;
	zs_obj_read_end(pool, e->handle, e->len, p);
	return same;
}

int main(void)
{
	struct zs_pool_config cfg;
	/* An application, not a kernel comparison: the application profile. */
	zs_pool_config_init_app(&cfg);
	cfg.name = "blob-cache";
	struct zs_pool *pool = zs_create_pool(&cfg);
	if (!pool) {
		perror("zs_create_pool");
		return 1;
	}
	struct entry *cache = calloc(ENTRIES, sizeof(*cache));
	if (!cache)
		return 1;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < ENTRIES; i++) {
		uint32_t len = 32 + (i * 2654435761u) % (MAX_BLOB - 32);
		if (put(pool, &cache[i], len, i)) {
			fprintf(stderr, "zs_malloc failed at entry %u\n", i);
			return 1;
		}
		bytes += len;
	}
	unsigned long full = zs_get_total_pages(pool);
	printf("stored %d blobs, %llu bytes, in %lu pool pages\n", ENTRIES,
	       (unsigned long long)bytes, full);

	/* Evict two entries of every three: a scattered pattern, like LRU churn. */
	unsigned kept = 0;
	for (uint32_t i = 0; i < ENTRIES; i++) {
		if (i % 3) {
			zs_free(pool, cache[i].handle);
			cache[i].handle = 0;
		} else {
			kept++;
		}
	}
	unsigned long before = zs_get_total_pages(pool);
	unsigned long freed = zs_compact(pool);
	unsigned long after = zs_get_total_pages(pool);
	printf("after evicting to %u blobs: %lu pages; compaction freed %lu, %lu left\n", kept,
	       before, freed, after);

	unsigned bad = 0;
	for (uint32_t i = 0; i < ENTRIES; i++)
		if (cache[i].handle && !check(pool, &cache[i]))
			bad++;
	printf("%u of %u surviving blobs intact\n", kept - bad, kept);

	for (uint32_t i = 0; i < ENTRIES; i++)
		if (cache[i].handle)
			zs_free(pool, cache[i].handle);
	free(cache);
	zs_destroy_pool(pool);
	return bad || after >= before ? 1 : 0;
}
