/*
 * libFuzzer target: the zswap front end (zs/zswap.h) with a shadow of what
 * each offset holds.  The first bytes choose the zswap (page size,
 * compressor, zsmalloc or zblock, deferred free, shrinker, a backing file or
 * none, a small total_ram and pool percentages); the rest is a program of
 * stores (zero, 0xAB-filled, text, half random, random pages), compressed
 * stores (real output, size-only, garbage, zero), loads, invalidates,
 * writeback, shrinker calls, group limits and writeback switches, pool
 * limit changes, injected file and pool-page failures, compaction and
 * statistics checks, on a few offsets (one of them near
 * ZS_ZSWAP_MAX_OFFSET) plus out-of-range ones.  Every load is compared with
 * the shadow: where a page went (entry, backing file, zero mark) may vary,
 * its bytes may not; a rejected store leaves the offset empty; the
 * counters must add up with the shadow's tallies; at the end every offset
 * is drained and the pool holds no page.
 */
#include <errno.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "zs/compress.h"
#include "zs/harness.h"
#include "zs/zswap.h"

#define NOFF 24
#define NGRP 3

enum { S_NONE, S_PAGE, S_ZERO, S_BAD, S_NODATA };

struct sh {
	uint8_t state;
	uint8_t kind;   /* page generator (S_PAGE) */
	uint64_t seed;
};

struct tally {
	uint64_t out, out_zero, in, in_zero, in_disk;
};

static char path[64];
static unsigned char page[65536], back[65536], exp_[65536], cbuf[2 * 65536 + 4096];

NO_COV static void gen_page(unsigned char *b, size_t ps, unsigned kind, uint64_t seed)
{
	switch (kind % 5) {
	case 0:
		memset(b, 0, ps);
		break;
	case 1:
		memset(b, 0xab, ps);
		break;
	case 2: {
		/* A short alphabet tiled with a block counter: compresses, differently per seed. */
		unsigned char pat[256];

		for (unsigned i = 0; i < 256; i++)
			pat[i] = (unsigned char)('a' + (i / 9 + seed) % 11);
		for (size_t i = 0; i < ps; i += 256) {
			memcpy(b + i, pat, 256);
			b[i] = (unsigned char)(i >> 8);
		}
		break;
	}
	case 3:
		fuzz_fill(b, ps / 2, seed);
		memset(b + ps / 2, (int)(seed & 0xff), ps - ps / 2);
		break;
	default:
		fuzz_fill(b, ps, seed);
	}
}

static uint64_t off_of(unsigned i)
{
	/* The last offset sits at the top of the range: its file position is out of reach. */
	return i == NOFF - 1 ? ZS_ZSWAP_MAX_OFFSET - 1 : (uint64_t)i * 7;
}

static const char *const comps[] = { "lzo", "lz4", "zstd", "lz4hc:3" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size, 0 };
	struct zs_zswap_config c;
	struct zs_zswap *z = NULL;
	struct zs_comp *comp = NULL;
	struct sh s[NOFF];
	struct tally t = { 0 };
	int inj_reads = 0, inj_pages = 0, limited[NGRP + 1] = { 0 }, wboff[NGRP + 1] = { 0 };
	static const size_t pss[] = { 4096, 4096, 4096, 8192, 16384, 4096, 65536, 4096 };
	char err[200];
	unsigned b0 = fin_u8(&in), b1 = fin_u8(&in), b2 = fin_u8(&in);
	int rc;

	if (!path[0]) {
		int fd;

		/* tmpfs when there is one: file writes and punched holes cost far less there. */
		snprintf(path, sizeof(path), "%s/zs-fuzz-zswap-XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		fd = mkstemp(path);
		FUZZ_CHECK(fd >= 0, "mkstemp");
		close(fd);
	}
	memset(s, 0, sizeof(s));
	zs_zswap_config_init(&c);
	size_t ps = pss[b0 & 7];
	c.page_size = ps;
	c.comp = comps[(b0 >> 3) & 3];
	c.backend.kind = (b0 & 0x20) ? "zblock" : "zsmalloc";
	c.deferred_free = (b0 >> 6) & 1;
	c.shrinker_enabled = (b0 >> 7) & 1;
	int backing = b1 & 1;
	c.backing_path = backing ? path : NULL;
	c.total_ram = (uint64_t)(8 + (b1 >> 1)) * 8 * ps;
	c.max_pool_percent = b2 % 101;
	c.accept_threshold_percent = (b2 * 7) % 101;
	rc = zs_zswap_create(&c, &z, err, sizeof(err));
	FUZZ_CHECK(rc == 0, "create -> %d (%s)", rc, err);
	FUZZ_CHECK(zs_comp_create(&(struct zs_comp_config){ .name = c.comp, .max_src = ps }, &comp, NULL, 0) == 0, "comp");
	struct zs_pool *pool = zs_backend_zspool(zs_zswap_backend(z));

	int ops = 0;
	while (fin_more(&in) && ops++ < 1024) {
		unsigned op = fin_u8(&in);
		unsigned i = fin_u8(&in) % (NOFF + 1);
		/* gi NGRP stands for the last valid group */
		unsigned gi = (op >> 4) % (NGRP + 1), g = gi == NGRP ? ZS_ZSWAP_MAX_GROUPS - 1 : gi;
		uint64_t off = i == NOFF ? ZS_ZSWAP_MAX_OFFSET + (op & 3) : off_of(i);
		int oor = i == NOFF;

		switch (op % 14) {
		case 0: case 1: case 2: case 3: {
			unsigned kind = fin_u8(&in);
			uint64_t seed = fin_u8(&in);

			gen_page(page, ps, kind, seed);
			rc = zs_zswap_store(z, off, page, g);
			if (oor) {
				FUZZ_CHECK(rc == -EINVAL, "store out of range -> %d", rc);
				break;
			}
			if (rc == 0) {
				t.out++;
				s[i] = (struct sh){ S_PAGE, (uint8_t)kind, seed };
			} else if (rc == ZS_ZSWAP_ZERO) {
				FUZZ_CHECK(kind % 5 == 0, "a non-zero page bypassed");
				t.out_zero++;
				s[i].state = S_ZERO;
			} else {
				FUZZ_CHECK(kind % 5 != 0, "a zero page -> %d", rc);
				FUZZ_CHECK(rc == -ENOSPC || (rc == -EDQUOT && limited[gi]) ||
					   (rc == -E2BIG && wboff[gi]) ||
					   ((rc == -ENOMEM || rc == -EIO) && inj_pages),
					   "store -> %d", rc);
				s[i].state = S_NONE;
			}
			break;
		}
		case 4: case 5: {
			/* Compressed elsewhere: real output, size-only, garbage. */
			unsigned form = fin_u8(&in), kind = fin_u8(&in);
			uint64_t seed = fin_u8(&in);
			int n, dec = 0;
			struct sh nw = { S_PAGE, (uint8_t)kind, seed };

			gen_page(page, ps, kind, seed);
			n = zs_compress(comp, page, ps, cbuf, sizeof(cbuf));
			FUZZ_CHECK(n > 0, "compress");
			if (kind % 5 == 0 && (form & 3) != 3)
				n = 0;
			if ((form & 3) == 0 || (form & 3) == 1) {
				rc = zs_zswap_store_compressed(z, off, cbuf, (size_t)n, g);
			} else if ((form & 3) == 2) {
				rc = zs_zswap_store_compressed(z, off, NULL, (size_t)n, g);
				nw.state = S_NODATA;
			} else {
				size_t len = 1 + (form >> 2) * ps / 64;

				fuzz_fill(cbuf, len, seed);
				dec = zs_decompress(comp, cbuf, len, exp_, ps) == (int)ps;
				rc = zs_zswap_store_compressed(z, off, cbuf, len, g);
				nw.state = S_BAD;
				if (len >= ps) {
					FUZZ_CHECK(rc == -EINVAL || oor || dec,
						   "raw garbage accepted -> %d", rc);
					if (rc == -EINVAL)
						break;
				}
				if (dec && !oor) {
					/* Decodes to some page: too rare to shadow; drop it again. */
					t.out += rc == 0;
					zs_zswap_invalidate(z, off);
					s[i].state = S_NONE;
					break;
				}
			}
			if (oor) {
				FUZZ_CHECK(rc == -EINVAL, "store_compressed out of range -> %d", rc);
				break;
			}
			if (rc == 0) {
				t.out++;
				s[i] = nw;
			} else if (rc == ZS_ZSWAP_ZERO) {
				FUZZ_CHECK(n == 0, "clen %d bypassed", n);
				t.out_zero++;
				s[i].state = S_ZERO;
			} else {
				FUZZ_CHECK(rc == -ENOSPC || (rc == -EDQUOT && limited[gi]) ||
					   (rc == -E2BIG && wboff[gi]) ||
					   ((rc == -ENOMEM || rc == -EIO) && inj_pages),
					   "store_compressed -> %d", rc);
				s[i].state = S_NONE;
			}
			break;
		}
		case 6: case 7: {
			memset(back, 0xee, ps);
			rc = zs_zswap_load(z, off, back);
			if (oor) {
				FUZZ_CHECK(rc == -EINVAL, "load out of range -> %d", rc);
				break;
			}
			switch (s[i].state) {
			case S_NONE:
				FUZZ_CHECK(rc == -ENOENT, "load of nothing -> %d", rc);
				break;
			case S_ZERO:
				FUZZ_CHECK(rc == ZS_ZSWAP_ZERO, "load of a zero mark -> %d", rc);
				t.in_zero++;
				s[i].state = S_NONE;
				break;
			case S_BAD:
				FUZZ_CHECK(rc == -EIO, "load of garbage -> %d", rc);
				break;
			default:
				if (rc == -EIO) {
					FUZZ_CHECK(inj_reads, "load -> -EIO without injection");
					break;
				}
				if (s[i].state == S_NODATA)
					FUZZ_CHECK(rc == ZS_ZSWAP_NODATA || rc == ZS_ZSWAP_DISK,
						   "load of a size-only entry -> %d", rc);
				else
					FUZZ_CHECK(rc == 0 || rc == ZS_ZSWAP_DISK, "load -> %d", rc);
				if (s[i].state == S_NODATA)
					memset(exp_, 0, ps);
				else
					gen_page(exp_, ps, s[i].kind, s[i].seed);
				FUZZ_CHECK(!memcmp(back, exp_, ps), "offset %u: wrong bytes", i);
				t.in += rc != ZS_ZSWAP_DISK;
				t.in_disk += rc == ZS_ZSWAP_DISK;
				s[i].state = S_NONE;
			}
			if (rc < 0 && rc != -ENOENT)
				for (size_t k = 0; k < ps; k++)
					FUZZ_CHECK(back[k] == 0, "a failed load left bytes");
			break;
		}
		case 8:
			rc = zs_zswap_invalidate(z, off);
			if (oor) {
				FUZZ_CHECK(rc == -EINVAL, "invalidate out of range -> %d", rc);
				break;
			}
			FUZZ_CHECK(rc == (s[i].state == S_NONE ? -ENOENT : 0), "invalidate -> %d", rc);
			s[i].state = S_NONE;
			break;
		case 9: {
			long n = (op & 0x80) ? zs_zswap_shrink(z, fin_u8(&in) % 32)
					     : zs_zswap_writeback(z, fin_u8(&in) % 32);
			FUZZ_CHECK(backing ? n >= 0 : n == -EOPNOTSUPP, "writeback/shrink -> %ld", n);
			(void)zs_zswap_shrink_count(z);
			break;
		}
		case 10: {
			unsigned a = fin_u8(&in);
			uint64_t max = a & 1 ? ZS_ZSWAP_NO_LIMIT : (uint64_t)(a >> 1) * 97;

			FUZZ_CHECK(zs_zswap_group_set(z, g, max, (a >> 7) ^ 1) == 0, "group_set");
			limited[gi] = max != ZS_ZSWAP_NO_LIMIT;
			wboff[gi] = a >> 7;
			FUZZ_CHECK(zs_zswap_group_set(z, ZS_ZSWAP_MAX_GROUPS, 0, 1) == -EINVAL, "group");
			break;
		}
		case 11: {
			unsigned a = fin_u8(&in), b = fin_u8(&in);

			rc = zs_zswap_set_pool_limit(z, a % 128, b % 128);
			FUZZ_CHECK(rc == (a % 128 > 100 || b % 128 > 100 ? -EINVAL : 0),
				   "set_pool_limit -> %d", rc);
			break;
		}
		case 12: {
			unsigned a = fin_u8(&in);

			if ((a & 3) == 3 && pool) {
				inj_pages = (a >> 2) != 63;
				zs_pool_fail_pages(pool, inj_pages ? (a >> 2) % 8 : UINT64_MAX, (a >> 5) % 3);
			} else if ((a & 3) != 3) {
				int reads = a & 1;

				zs_zswap_wb_inject(z, reads, (a >> 3) % 5 == 4 ? UINT64_MAX : (a >> 3) % 5,
						   (a >> 6) % 3);
				if (reads && backing)
					inj_reads = (a >> 3) % 5 != 4;
			}
			break;
		}
		default: {
			struct zs_zswap_stats st;
			uint64_t held = 0, zero = 0, charged = 0, zswapped = 0;

			if (op & 0x40)
				zs_zswap_compact(z);
			zs_zswap_flush(z);
			zs_zswap_get_stats(z, &st, sizeof(st));
			for (unsigned k = 0; k < NOFF; k++) {
				held += s[k].state != S_NONE;
				zero += s[k].state == S_ZERO;
			}
			for (unsigned k = 0; k < ZS_ZSWAP_MAX_GROUPS; k++) {
				struct zs_zswap_group_stats gs;

				zs_zswap_group_stats(z, k, &gs, sizeof(gs));
				charged += gs.zswap;
				zswapped += gs.zswapped;
			}
			FUZZ_CHECK(st.stored_pages + st.zero_pages + st.disk_pages == held,
				   "offsets held %llu + %llu + %llu, shadow %llu",
				   (unsigned long long)st.stored_pages, (unsigned long long)st.zero_pages,
				   (unsigned long long)st.disk_pages, (unsigned long long)held);
			FUZZ_CHECK(st.zero_pages == zero, "zero_pages");
			FUZZ_CHECK(charged == st.stored_bytes && zswapped == st.stored_pages * ps,
				   "group charges %llu / %llu", (unsigned long long)charged,
				   (unsigned long long)st.stored_bytes);
			FUZZ_CHECK(st.zswpout == t.out && st.swpout_zero == t.out_zero &&
				   st.zswpin == t.in && st.swpin_zero == t.in_zero &&
				   st.pswpin == t.in_disk, "events");
			FUZZ_CHECK(st.pool_total_size == st.pool_pages * ps &&
				   st.meminfo_zswap == st.pool_total_size &&
				   st.meminfo_zswapped == st.stored_pages * ps, "meminfo");
			FUZZ_CHECK(st.stored_incompressible_pages <= st.stored_pages, "incompressible");
			FUZZ_CHECK(st.stored_bytes <= st.stored_pages * ps, "stored_bytes");
			FUZZ_CHECK(st.written_back_pages == st.zswpwb, "zswpwb");
			if (!backing)
				FUZZ_CHECK(st.written_back_pages == 0 && st.disk_pages == 0 &&
					   st.shrink_worker_runs == 0, "writeback without a file");
		}
		}
	}

	/* Drain: every offset reads back its page (or fails as garbage), then nothing is left. */
	if (pool)
		zs_pool_fail_pages(pool, UINT64_MAX, 0);
	zs_zswap_wb_inject(z, 1, UINT64_MAX, 0);
	for (unsigned i = 0; i < NOFF; i++) {
		rc = zs_zswap_load(z, off_of(i), back);
		if (s[i].state == S_PAGE) {
			gen_page(exp_, ps, s[i].kind, s[i].seed);
			FUZZ_CHECK((rc == 0 || rc == ZS_ZSWAP_DISK) && !memcmp(back, exp_, ps),
				   "drain offset %u -> %d", i, rc);
		} else if (s[i].state == S_NONE) {
			FUZZ_CHECK(rc == -ENOENT, "drain empty offset %u -> %d", i, rc);
		} else if (s[i].state == S_BAD) {
			FUZZ_CHECK(rc == -EIO && zs_zswap_invalidate(z, off_of(i)) == 0, "drain bad");
		} else {
			FUZZ_CHECK(rc > 0, "drain offset %u -> %d", i, rc);
		}
	}
	zs_zswap_flush(z);
	zs_zswap_compact(z);
	struct zs_zswap_stats st;
	zs_zswap_get_stats(z, &st, sizeof(st));
	FUZZ_CHECK(st.stored_pages == 0 && st.zero_pages == 0 && st.disk_pages == 0 &&
		   st.stored_bytes == 0 && st.stored_incompressible_pages == 0,
		   "drained: stored %llu zero %llu disk %llu", (unsigned long long)st.stored_pages,
		   (unsigned long long)st.zero_pages, (unsigned long long)st.disk_pages);
	FUZZ_CHECK(st.pool_pages == 0, "drained pool holds %llu pages",
		   (unsigned long long)st.pool_pages);
	zs_zswap_destroy(z);
	zs_comp_destroy(comp);
	return 0;
}
