/*
 * Example: a compressed key-value cache of records held to a memory
 * capacity, on the blob store (zs/blob.h, zs/cache.h) -- the way a program
 * keeps many small records compressed in RAM without handling zsmalloc
 * handles, lengths, codecs or compaction itself.
 *
 * It fills a cache capped at 4 MiB with 20,000 JSON-like records (about
 * 30 MiB uncompressed), so older entries are evicted (CLOCK: entries looked
 * up recently stay), reads back every entry still there, erases a third of
 * them, waits for the store's idle compaction to give the holes back, and
 * prints what the cache holds of the process's memory.  Then the same
 * records through the blob store alone: a handle per record, the length
 * kept inside the object.  Uses only the public headers; copy it as a
 * starting point.
 *
 *   cc blob_cache.c $(pkg-config --cflags --libs libzs) -o blob_cache
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zs/blob.h>
#include <zs/cache.h>

#define ENTRIES 20000
#define MAX_REC 3000

/* A JSON-like record for id: the same bytes every time, so reads can be checked. */
static size_t make_record(char *buf, uint32_t id)
{
	static const char *const words[] = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot" };
	uint32_t s = id * 2654435761u + 1;
	size_t len = 200 + id % (MAX_REC - 300), at = 0;
	while (at < len) {
		s = s * 1103515245u + 12345u;
		int n = snprintf(buf + at, len - at + 1, "{\"id\":%u,\"tag\":\"%s\",\"v\":%u},", id,
				 words[(s >> 16) % 6], s % 1000);
		if (n < 0)
			break;
		at += (size_t)n < len - at ? (size_t)n : len - at;
	}
	return len;
}

static int cache_demo(void)
{
	struct zs_cache_config cfg;
	zs_cache_config_init(&cfg);
	cfg.blob.codec = ZS_BLOB_ZSTD;      /* or ZS_BLOB_LZ4 (the default), ZS_BLOB_LZ4HC */
	cfg.blob.mem_limit = 4 << 20;        /* capacity in real memory: inserts evict */
	struct zs_cache *c;
	char why[256]; /* a refusal names the field and its range */
	int rc = zs_cache_create(&cfg, &c, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	char rec[MAX_REC + 1], out[MAX_REC + 1], key[16];
	uint64_t raw = 0;
	for (uint32_t id = 0; id < ENTRIES; id++) {
		size_t len = make_record(rec, id);
		snprintf(key, sizeof(key), "user:%u", id);
		rc = zs_cache_insert(c, key, strlen(key), rec, len);
		if (rc) {
			fprintf(stderr, "insert %u: %s\n", id, strerror(-rc));
			return 1;
		}
		raw += len;
		/* Keep the first hundred records hot: CLOCK spares what is looked up. */
		snprintf(key, sizeof(key), "user:%u", id % 100);
		zs_cache_lookup(c, key, strlen(key), out, sizeof(out));
	}
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	printf("cache: %u records (%.1f MiB) into a 4 MiB cache: %llu kept, %llu evicted, "
	       "%.1f MiB held, %.1f B of index per entry\n",
	       ENTRIES, raw / 1048576.0, (unsigned long long)st.entries,
	       (unsigned long long)st.evictions, (st.mem_bytes - st.blob.cached_bytes) / 1048576.0,
	       (double)st.index_bytes / (double)st.entries);

	/* Every entry still there reads back as written; the hot ones are all there. */
	unsigned bad = 0, hot = 0, present = 0;
	for (uint32_t id = 0; id < ENTRIES; id++) {
		size_t len = make_record(rec, id);
		snprintf(key, sizeof(key), "user:%u", id);
		long n = zs_cache_lookup(c, key, strlen(key), out, sizeof(out));
		if (n == -ENOENT)
			continue;
		present++;
		hot += id < 100;
		bad += n != (long)len || memcmp(out, rec, len) != 0;
	}
	printf("cache: %u present, %u of 100 hot records kept, %u differ\n", present, hot, bad);

	/* Erase a third; idle, the store compacts by itself and returns the pages. */
	for (uint32_t id = 0; id < ENTRIES; id += 3) {
		snprintf(key, sizeof(key), "user:%u", id);
		zs_cache_erase(c, key, strlen(key));
	}
	zs_cache_stats(c, &st, sizeof(st));
	double before = (st.mem_bytes - st.blob.cached_bytes) / 1048576.0;
	sleep(1);
	zs_cache_stats(c, &st, sizeof(st));
	printf("cache: after erasing a third, %llu entries: %.1f MiB held, %.1f MiB after 1 s idle "
	       "(%llu compaction passes)\n",
	       (unsigned long long)st.entries, before, (st.mem_bytes - st.blob.cached_bytes) / 1048576.0,
	       (unsigned long long)st.blob.compact_passes);

	/* Keys can be enumerated (a cursor, resumable). */
	uint64_t cursor = 0;
	size_t klen;
	unsigned counted = 0;
	while (zs_cache_next(c, &cursor, key, sizeof(key), &klen) == 0)
		counted++;
	printf("cache: %u keys enumerated\n", counted);
	int fail = bad || hot < 90 || counted != st.entries;
	zs_cache_destroy(c);
	return fail;
}

static int blob_demo(void)
{
	struct zs_blob *s;
	int rc = zs_blob_create(NULL, &s, NULL, 0); /* defaults: lz4, no limit, compaction policy on */
	if (rc)
		return 1;
	static unsigned long h[ENTRIES];
	char rec[MAX_REC + 1], out[MAX_REC + 1];
	for (uint32_t id = 0; id < ENTRIES; id++) {
		size_t len = make_record(rec, id);
		h[id] = zs_blob_put(s, rec, len);
		if (ZS_IS_ERR(h[id])) {
			fprintf(stderr, "put: %s\n", strerror(-ZS_ERR(h[id])));
			return 1;
		}
	}
	unsigned bad = 0;
	for (uint32_t id = 0; id < ENTRIES; id++) {
		size_t len = make_record(rec, id);
		/* The store knows each length: ask, or pass a buffer and get -ENOSPC if short. */
		bad += zs_blob_size(s, h[id]) != (long)len;
		bad += zs_blob_get(s, h[id], out, sizeof(out)) != (long)len || memcmp(rec, out, len) != 0;
	}
	struct zs_blob_stats st;
	zs_blob_stats(s, &st, sizeof(st));
	printf("blob: %llu records, %.1f MiB of values stored in %.1f MiB (%llu kept raw), %u differ\n",
	       (unsigned long long)st.objects, st.value_bytes / 1048576.0, st.stored_bytes / 1048576.0,
	       (unsigned long long)st.raw_objects, bad);
	for (uint32_t id = 0; id < ENTRIES; id++)
		zs_blob_free(s, h[id]);
	zs_blob_destroy(s);
	return bad != 0;
}

int main(void)
{
	int rc = cache_demo();
	rc |= blob_demo();
	return rc;
}
