/*
 * The cache index's large shard tables stay out of the heap (src/blob/cache.c,
 * table_alloc): a host process whose glibc mmap threshold has been raised
 * (RocksDB's DB open frees a 520 KB block, which raises it to that size)
 * would otherwise get each doubled table from the heap, and every table a
 * doubling replaces would stay there as a hole.  The test raises the
 * threshold to 32 MiB itself, grows one shard's table to 8 MiB, and checks
 * that the heap did not grow by the tables.  It needs glibc's own malloc,
 * so it links no other (ZS_TEST_SYSTEM_MALLOC, CMakeLists.txt).
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "malloc_probe.h"
#include "zs/cache.h"

/* ZS_TEST_SYSTEM_MALLOC */

#define ENTRIES 300000

int main(void)
{
	uint64_t rs = tu_seed("test_cache_tables");
	if (!tu_glibc_malloc()) {
		printf("malloc is not glibc's (or is instrumented): nothing to check\n");
		return 77;
	}
	REQUIRE(mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1);

	struct zs_cache_config cfg;
	struct zs_cache *c = NULL;
	struct zs_cache_stats st;
	zs_cache_config_init(&cfg);
	cfg.shards = 1;
	REQUIRE(zs_cache_create(&cfg, &c, NULL, 0) == 0);
	size_t heap0 = mallinfo2().uordblks;
	for (unsigned i = 0; i < ENTRIES; i++) {
		char key[16], val[48];
		uint64_t r = tu_rand(&rs);
		memcpy(key, &i, sizeof(i));
		memcpy(key + 4, &r, 8);
		memset(key + 12, 'k', 4);
		memset(val, (int)(r & 0x7f), sizeof(val));
		REQUIRE(zs_cache_insert(c, key, sizeof(key), val, sizeof(val)) == 0);
	}
	size_t heap1 = mallinfo2().uordblks;
	REQUIRE(zs_cache_stats(c, &st, sizeof(st)) == 0);
	printf("%llu entries, index %llu B; heap in use %zu -> %zu B\n",
	       (unsigned long long)st.entries, (unsigned long long)st.index_bytes, heap0, heap1);
	CHECK(st.entries == ENTRIES);
	CHECK(st.index_bytes >= (4u << 20)); /* the table did grow past the mapped size */
	/* The tables from the heap are the small ones (< 64 KiB each, 128 KiB in all). */
	CHECK(heap1 < heap0 + (1u << 20));
	zs_cache_clear(c);
	zs_cache_destroy(c);
	return tu_done();
}
