/*
 * For a zram store: memory goes back while the program is
 * idle.  A store written with ~160 MiB of compressed pages (past the page
 * cache's 128 MiB budget), then every slot discarded, then 1.5 s with no
 * libzs call: RSS back within 8 MiB of where it was before the writes.  The
 * store's slot table (16 bytes per slot written) is part of what remains.
 * In the kernel profile and in the application profile, whose emptied
 * zspages stay parked whole in their class (src/zsmalloc/park.c) until the
 * purge thread returns them.  The region's case is tests/unit/test_idle_region.c.
 */
#include "testutil.h"
#include "idle.h"
#include "zs/zram.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096
#define NPAGES (80 * 1024) /* 320 MiB written, about 160 MiB stored */

static unsigned char page[PAGE];

static void store_case(int app)
{
	struct zs_zram_config c;
	if (app)
		zs_zram_config_init_app(&c);
	else
		zs_zram_config_init(&c);
	c.disksize = (uint64_t)NPAGES * PAGE;
	struct zs_zram *z;
	REQUIRE(zs_zram_create(&c, &z, NULL, 0) == 0);
	memset(page, 0, sizeof page);
	size_t rss0 = idle_rss();
	for (uint64_t i = 0; i < NPAGES; i++) {
		idle_fill_page(page, PAGE, PAGE / 2, i + 1);
		REQUIRE(zs_zram_write(z, i, page) == 0);
	}
	struct zs_zram_stats st;
	zs_zram_get_stats(z, &st, sizeof(st));
	size_t rss_full = idle_rss();
	REQUIRE(zs_zram_discard_range(z, 0, NPAGES) == 0);
	size_t rss_freed = idle_rss();
	unsigned waited = idle_wait(rss0 + 8 * IDLE_MIB, 1500, 20000);
	size_t rss_idle = idle_rss();
	printf("store (%s profile): %.1f MiB in the pool; full %+.1f MiB, all slots discarded %+.1f, after %.1f s "
	       "idle %+.1f (MiB above the start)\n",
	       app ? "application" : "kernel", (double)st.mem_used_total / (double)IDLE_MIB,
	       idle_mib(rss_full, rss0),
	       idle_mib(rss_freed, rss0), waited / 1000.0, idle_mib(rss_idle, rss0));
	CHECK(st.mem_used_total > 140 * IDLE_MIB);
	if (IDLE_RSS_MEANINGFUL) {
		CHECK(rss_full > rss0 + 140 * IDLE_MIB);
		CHECK(rss_idle <= rss0 + 8 * IDLE_MIB);
	}
	CHECK_EQ(idle_purge_threads(), 0);
	zs_zram_destroy(z);
}

int main(void)
{
	store_case(0);
	store_case(1);
	return tu_done();
}
