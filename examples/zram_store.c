/*
 * Example: a compressed page store with zram's semantics, e.g. as the swap
 * or page cache behind a user-space VM, database buffer pool or emulator.
 * It writes pages of three kinds (same-filled, text-like, random), reads
 * them back, overwrites and discards some, and prints the store's mm_stat
 * line exactly as the kernel's /sys/block/zramN/mm_stat would.  Uses only
 * the public headers; copy it as a starting point.
 *
 *   cc zram_store.c $(pkg-config --cflags --libs libzs) -o zram_store
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zs/zram.h>

#define PAGE 4096
#define PAGES 4096 /* a 16 MiB device */

static void make_page(unsigned char *p, uint64_t index)
{
	switch (index % 3) {
	case 0: /* same-filled: stored as the fill value, no memory */
		memset(p, (int)(index & 0xff), PAGE);
		break;
	case 1: /* text-like: compresses well */
		for (int i = 0; i < PAGE; i++)
			p[i] = "the quick brown fox jumps over the lazy dog "[(i + index) % 44];
		break;
	default: { /* random: incompressible, stored raw ("huge") */
		uint64_t x = index * 0x9e3779b97f4a7c15ULL + 1;
		for (int i = 0; i < PAGE; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[i] = (unsigned char)x;
		}
	}
	}
}

int main(void)
{
	struct zs_zram_config cfg;
	/* An application's store: the application profile (zs_zram_config_init
	 * gives the kernel's exact pool layout, for comparing with kernel zram). */
	zs_zram_config_init_app(&cfg);
	cfg.disksize = (uint64_t)PAGES * PAGE;
	cfg.comp = "lz4";
	struct zs_zram *z;
	char why[256]; /* a refusal names the field and its range */
	int err = zs_zram_create(&cfg, &z, why, sizeof(why));
	if (err) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	static unsigned char page[PAGE], back[PAGE];
	for (uint64_t i = 0; i < PAGES; i++) {
		make_page(page, i);
		if ((err = zs_zram_write(z, i, page))) {
			fprintf(stderr, "write %llu: %s\n", (unsigned long long)i, strerror(-err));
			return 1;
		}
	}
	unsigned bad = 0;
	for (uint64_t i = 0; i < PAGES; i++) {
		make_page(page, i);
		if (zs_zram_read(z, i, back, sizeof(back)) || memcmp(page, back, PAGE))
			bad++;
	}
	/* Overwrite a quarter with zeros and discard another quarter (a TRIM). */
	memset(page, 0, PAGE);
	for (uint64_t i = 0; i < PAGES / 4; i++)
		zs_zram_write(z, i, page);
	zs_zram_discard_range(z, PAGES / 2, PAGES / 4);
	zs_zram_compact(z);

	struct zs_zram_stats st;
	char line[256];
	zs_zram_get_stats(z, &st, sizeof(st));
	zs_zram_format_mm_stat(&st, line, sizeof(line));
	printf("%u pages written and read back, %u mismatches\n", PAGES, bad);
	printf("mm_stat: %s", line);
	printf("%llu pages stored in %llu bytes of pool memory (%llu same-filled, %llu huge)\n",
	       (unsigned long long)st.pages_stored, (unsigned long long)st.mem_used_total,
	       (unsigned long long)st.same_pages, (unsigned long long)st.huge_pages);
	zs_zram_destroy(z);
	return bad ? 1 : 0;
}
