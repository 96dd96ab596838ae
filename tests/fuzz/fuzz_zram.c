/*
 * libFuzzer target: the zram store API with shadow slots.  The input's first
 * bytes choose the store (page size, slots, compressor and recompression
 * algorithm among all the library has, zsmalloc (the kernel's pool or the
 * application profile's, with or without a limit) or zblock backend, mem_limit,
 * deferred free, access-time tracking, streams, the filter for typed data:
 * none or any shuffle/delta spec, large-folio groups of 2..16 slots, whose
 * objects on zsmalloc span several pages of the slots' own size); the rest
 * is a program of
 * single and range writes, reads, discards, free_notify, reset, flush,
 * compaction, idle marking, recompression, failure injection and statistics
 * checks.  Pages come in kinds the store treats differently (zero and
 * same-filled, compressible, half random, incompressible/huge, and typed
 * int32 arrays that the filters change).  Every read
 * is compared with the shadow; a refused write (limit, injected failure)
 * must leave the old page; the counters must agree with the shadow (in a
 * grouped store they count groups: bounded by the groups whose slots hold
 * data); at the end every slot reads back and, once discarded, the store
 * holds no memory.
 */
#include <errno.h>

#include "fuzz_common.h"
#include "zs/backend.h"
#include "zs/zram.h"
#include "zs/harness.h"

#define MAXSLOT 32

struct shadow {
	uint8_t kind; /* 0 empty (reads as zeros), 1 same-filled, 2 text, 3 half random, 4 random,
			 5 typed: int32 trend plus noise */
	uint64_t seed;
};

struct st {
	struct zs_zram *z;
	size_t ps;
	uint64_t nslots;
	int limited, injecting, has_recomp, actime, app;
	unsigned group;  /* slots per group (0: not grouped) */
	size_t unit;     /* bytes a stored object holds: the page, or the group */
	int zs_backend;
	struct shadow sh[MAXSLOT];
	unsigned char *buf, *exp;
};

/* Content generation is the harness's, not the code under test: no coverage for it. */
NO_COV static void gen_page(unsigned char *b, size_t ps, const struct shadow *s)
{
	uint64_t seed = s->seed;
	switch (s->kind) {
	case 0:
		memset(b, 0, ps);
		break;
	case 1:
		for (size_t i = 0; i < ps; i += 8)
			memcpy(b + i, &seed, 8);
		break;
	case 2: {
		/* a short alphabet tiled with a block counter: compresses, differently per algorithm */
		unsigned char pat[256];
		unsigned period = 1 + (unsigned)(seed % 61);
		for (unsigned i = 0; i < 256; i++)
			pat[i] = (unsigned char)('a' + ((seed >> (i / period % 8 * 8)) + i / 7) % 13);
		for (size_t i = 0; i < ps; i += 256) {
			memcpy(b + i, pat, 256);
			b[i] = (unsigned char)(i >> 8);
		}
		break;
	}
	case 5:
		/* small int32 values on a slow trend: what shuffle/delta filters are for */
		for (size_t i = 0; i < ps; i += 4) {
			uint32_t v = (uint32_t)(seed + i / 512 + (((i * 0x9E3779B97F4A7C15ULL) ^ seed) >> 59));
			memcpy(b + i, &v, 4);
		}
		break;
	case 3:
		fuzz_fill(b, ps / 2, seed);
		memset(b + ps / 2, (int)(seed & 0xff), ps - ps / 2);
		break;
	default:
		fuzz_fill(b, ps, seed);
	}
}

static int same_filled(const struct shadow *s)
{
	return s->kind <= 1;
}

static void verify_slot(struct st *s, uint64_t i, const char *why)
{
	int ret = zs_zram_read(s->z, i, s->buf, s->ps);
	FUZZ_CHECK(ret == 0, "%s: read(%llu) -> %d", why, (unsigned long long)i, ret);
	gen_page(s->exp, s->ps, &s->sh[i]);
	FUZZ_CHECK(!memcmp(s->buf, s->exp, s->ps), "%s: slot %llu (kind %d) differs from its shadow",
		   why, (unsigned long long)i, s->sh[i].kind);
}

static void verify_all(struct st *s, const char *why)
{
	for (uint64_t i = 0; i < s->nslots; i++)
		verify_slot(s, i, why);
}

/* Does slot i hold anything but zeros? */
static int has_data(const struct shadow *s)
{
	return s->kind >= 2 || (s->kind == 1 && s->seed);
}

/*
 * A grouped store counts groups.  A group holding data is stored; one whose
 * slots were all never written or discarded is not; one whose slots hold
 * only written zero pages may be either (a discard of a neighbour drops an
 * all-zero group).  Same-filled and huge are kinds of stored groups.
 */
static void check_group_stats(struct st *s, const struct zs_zram_stats *st)
{
	uint64_t lo = 0, hi = 0;
	for (uint64_t g0 = 0; g0 < s->nslots; g0 += s->group) {
		int data = 0, any = 0;
		for (uint64_t i = g0; i < g0 + s->group && i < s->nslots; i++) {
			data |= has_data(&s->sh[i]);
			any |= s->sh[i].kind || s->sh[i].seed == 1;
		}
		lo += data;
		hi += any;
	}
	FUZZ_CHECK(st->pages_stored >= lo && st->pages_stored <= hi,
		   "groups stored %llu, shadow says %llu..%llu", (unsigned long long)st->pages_stored,
		   (unsigned long long)lo, (unsigned long long)hi);
	FUZZ_CHECK(st->same_pages <= st->pages_stored, "same groups %llu of %llu",
		   (unsigned long long)st->same_pages, (unsigned long long)st->pages_stored);
	FUZZ_CHECK(st->orig_data_size == st->pages_stored * s->unit, "orig_data_size %llu",
		   (unsigned long long)st->orig_data_size);
	FUZZ_CHECK(st->huge_pages <= st->pages_stored - st->same_pages, "huge groups %llu",
		   (unsigned long long)st->huge_pages);
	for (uint64_t i = 0; i < s->nslots; i++) {
		size_t size;
		unsigned flags;
		FUZZ_CHECK(zs_zram_slot_info(s->z, i, &size, &flags, NULL) == 0, "slot_info");
		FUZZ_CHECK(size <= s->unit, "slot %llu: group object of %zu bytes",
			   (unsigned long long)i, size);
		if (has_data(&s->sh[i]))
			FUZZ_CHECK(size || (flags & ZS_ZRAM_F_SAME),
				   "slot %llu holds data, its group nothing", (unsigned long long)i);
	}
}

static void check_stats(struct st *s)
{
	struct zs_zram_stats st;
	zs_zram_get_stats(s->z, &st, sizeof(st));
	FUZZ_CHECK(st.mem_used_max >= st.mem_used_total, "mem_used_max below mem_used_total");
	FUZZ_CHECK(zs_zram_slot_info(s->z, s->nslots, NULL, NULL, NULL) == -EINVAL,
		   "slot_info out of range");
	if (s->group) {
		check_group_stats(s, &st);
		return;
	}
	uint64_t stored = 0, same = 0;
	for (uint64_t i = 0; i < s->nslots; i++) {
		/* a zero page that was written is stored (as same-filled); never-written is not */
		if (s->sh[i].kind || s->sh[i].seed == 1)
			stored++;
		if ((s->sh[i].kind || s->sh[i].seed == 1) && same_filled(&s->sh[i]))
			same++;
		size_t size;
		unsigned flags, prio;
		FUZZ_CHECK(zs_zram_slot_info(s->z, i, &size, &flags, &prio) == 0, "slot_info");
		if (s->sh[i].kind == 1 || s->sh[i].seed == 1)
			FUZZ_CHECK(flags & ZS_ZRAM_F_SAME, "slot %llu same-filled but not flagged",
				   (unsigned long long)i);
		FUZZ_CHECK(size <= s->ps, "slot size %zu", size);
	}
	FUZZ_CHECK(st.pages_stored == stored, "pages_stored %llu, shadow %llu",
		   (unsigned long long)st.pages_stored, (unsigned long long)stored);
	FUZZ_CHECK(st.same_pages == same, "same_pages %llu, shadow %llu",
		   (unsigned long long)st.same_pages, (unsigned long long)same);
	FUZZ_CHECK(st.orig_data_size == stored * s->ps, "orig_data_size");
	FUZZ_CHECK(st.huge_pages <= stored - same, "huge_pages %llu", (unsigned long long)st.huge_pages);
}

/* A page written to slot i: the shadow changes only if the store took it. */
static void do_write(struct st *s, uint64_t i, struct shadow nw, int ret)
{
	if (ret == 0) {
		s->sh[i] = nw;
		if (!nw.kind)
			s->sh[i].seed = 1; /* a written zero page: stored, same-filled */
		return;
	}
	FUZZ_CHECK(ret == -ENOMEM && (s->limited || s->injecting), "write(%llu) -> %d",
		   (unsigned long long)i, ret);
}

static struct shadow new_page(struct fin *in)
{
	struct shadow n;
	unsigned k = fin_u8(in);
	n.kind = (uint8_t)(k % 6);
	n.seed = (k >> 3) ? (k >> 3) * 0x100000001b3ULL + fin_u8(in) : fin_u64(in);
	return n;
}

static const char *const comps[] = { "lz4", "lz4:8", "lz4hc", "lz4hc:1", "zstd", "zstd:-5",
				     "zstd:1", "lzo" };
static const char *const recomps[] = { NULL, "zstd", "lz4hc", "lzo", "zstd:7", "lz4", NULL, "zstd:-1" };
/* b3's top bits and b2 bit 5: every spec, "none" and NULL (off) twice more */
static const char *const filters[] = { NULL, "shuffle:2", "shuffle:4", "shuffle:8", "delta:2",
				       "delta:4", "delta:8", "delta+shuffle:2", "delta+shuffle:4",
				       "delta+shuffle:8", "none", "", NULL, "shuffle:4",
				       "delta+shuffle:4", "shuffle:8" };
static const char *const bad_filters[] = { "shuffle:3", "shuffle", "delta:16", "shuffle:4 ",
					   "delta+shuffle", "bitshuffle:4", "shuffle+delta:4",
					   "delta:04" };
static const char *const bad_comps[] = { "lzo-rle", "nope", "zstd:99", "lz4hc:0x", "", "lz4:-1",
					 "zstd:", "842" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size, 0 };
	static struct st s;
	memset(&s, 0, sizeof(s));
	unsigned b0 = fin_u8(&in), b1 = fin_u8(&in), b2 = fin_u8(&in), b3 = fin_u8(&in);
	struct zs_zram_config c;
	/* The application profile's pool (class copies, fitted zspages) or the kernel's:
	 * without a memory limit b3's low bit picks it; with one (b3 sizes the limit) one
	 * more byte does, so limits meet both profiles. */
	s.app = (b2 & 0x10) ? (fin_u8(&in) & 1) : (b3 & 1);
	if (s.app)
		zs_zram_config_init_app(&c);
	else
		zs_zram_config_init(&c);
	static const size_t pss[] = { 4096, 4096, 8192, 16384, 4096, 8192, 16384, 65536 };
	s.ps = pss[b0 & 7];
	c.page_size = s.ps;
	/* Indices 4-6 (the page sizes that 0-3 give too) make a grouped store, from one more
	 * byte: group_pages 2, 4, 8 or 16, halved until the group fits 64 KiB; 1 (off) now and
	 * then.  (Older inputs with those indices become grouped; the seeds are kept.) */
	if ((b0 & 7) >= 4 && (b0 & 7) <= 6) {
		unsigned b4 = fin_u8(&in);
		unsigned g = 2u << (b4 & 3);
		while (g * s.ps > 65536)
			g >>= 1;
		c.group_pages = ((b4 >> 2) & 7) == 7 ? 1 : g;
		s.group = c.group_pages > 1 ? c.group_pages : 0;
	}
	s.unit = s.group ? s.group * s.ps : s.ps;
	s.nslots = 1 + (b0 >> 3) % MAXSLOT;
	c.disksize = s.nslots * s.ps + (b1 & 1) * (s.ps - 1); /* a partial page is dropped */
	c.comp = comps[(b1 >> 1) & 7];
	c.recomp = recomps[(b1 >> 4) & 7];
	s.has_recomp = c.recomp != NULL;
	c.backend.kind = (b1 & 0x80) ? "zblock" : "zsmalloc";
	s.zs_backend = !(b1 & 0x80);
	c.backend.checked = b2 & 1;
	c.deferred_free = (b2 >> 1) & 1;
	c.track_actime = s.actime = (b2 >> 2) & 1;
	c.filter = filters[(b3 >> 5) | ((b2 >> 5) & 1) << 3];
	c.streams = 1 + ((b2 >> 3) & 1);
	if (b2 & 0x10) {
		c.mem_limit = (uint64_t)(1 + (b3 & 31)) * s.ps;
		s.limited = 1;
	}
	if ((b2 >> 5) == 7) {
		/* a bad compressor name is refused, and so is a zero disksize */
		struct zs_zram_config bad = c;
		struct zs_zram *bz = NULL;
		bad.comp = bad_comps[b3 & 7];
		FUZZ_CHECK(zs_zram_create(&bad, &bz, NULL, 0) < 0 && !bz, "bad comp '%s' accepted", bad.comp);
		bad = c;
		bad.filter = bad_filters[b3 & 7];
		FUZZ_CHECK(zs_zram_create(&bad, &bz, NULL, 0) == -EINVAL && !bz, "bad filter '%s' accepted",
			   bad.filter);
		bad = c;
		bad.disksize = s.ps - 1;
		FUZZ_CHECK(zs_zram_create(&bad, &bz, NULL, 0) == -EINVAL && !bz, "disksize < page accepted");
		/* a group that is no power of two, over 16 slots or over 64 KiB */
		static const unsigned bad_groups[] = { 3, 5, 6, 12, 17, 32, 0, 1024 };
		bad = c;
		bad.group_pages = bad_groups[b3 & 7] ? bad_groups[b3 & 7] : (unsigned)(131072 / s.ps);
		FUZZ_CHECK(zs_zram_create(&bad, &bz, NULL, 0) == -EINVAL && !bz, "group_pages %u accepted",
			   bad.group_pages);
	}
	int ret = zs_zram_create(&c, &s.z, NULL, 0);
	FUZZ_CHECK(ret == 0, "zs_zram_create -> %d", ret);
	FUZZ_CHECK(zs_zram_slots(s.z) == s.nslots, "slots %llu", (unsigned long long)zs_zram_slots(s.z));
	struct zs_pool *pool = zs_backend_zspool(zs_zram_backend(s.z));
	if (s.group && s.zs_backend) {
		/* a group's object lives in a pool of the slots' own page, spanning its pages */
		FUZZ_CHECK(pool && zs_pool_page_size(pool) == s.ps &&
			   zs_pool_get_config(pool)->max_object_size >= s.unit,
			   "group store's pool: page %zu, largest object %zu (group %zu)",
			   pool ? zs_pool_page_size(pool) : 0,
			   pool ? zs_pool_get_config(pool)->max_object_size : 0, s.unit);
	}
	static unsigned char buf[5 * 65536], exp[5 * 65536];
	s.buf = buf;
	s.exp = exp;

	int ops = 0;
	while (fin_more(&in) && ops++ < 2048) {
		unsigned op = fin_u8(&in);
		uint64_t i = fin_u8(&in) % (s.nslots + 1); /* nslots: out of range */
		int oor = i == s.nslots;
		switch (op % 16) {
		case 0: case 1: case 2: case 3: {
			struct shadow nw = new_page(&in);
			gen_page(s.buf, s.ps, &nw);
			ret = zs_zram_write(s.z, i, s.buf);
			if (oor)
				FUZZ_CHECK(ret == -EINVAL, "write out of range -> %d", ret);
			else
				do_write(&s, i, nw, ret);
			break;
		}
		case 4:
			if (oor) {
				FUZZ_CHECK(zs_zram_read(s.z, i, s.buf, s.ps) == -EINVAL, "read out of range");
			} else if (op & 16) {
				FUZZ_CHECK(zs_zram_read(s.z, i, s.buf, s.ps - 1) == -EINVAL, "short buffer");
			} else {
				verify_slot(&s, i, "read");
			}
			break;
		case 5:
			ret = (op & 16) ? zs_zram_free_notify(s.z, i) : zs_zram_discard(s.z, i);
			if (oor) {
				FUZZ_CHECK(ret == -EINVAL, "discard out of range -> %d", ret);
			} else {
				FUZZ_CHECK(ret == 0, "discard/free_notify -> %d", ret);
				s.sh[i].kind = 0;
				s.sh[i].seed = 0;
			}
			break;
		case 6: {
			uint64_t n = fin_u8(&in) % 5;
			struct shadow nw[4];
			for (uint64_t k = 0; k < n; k++) {
				nw[k] = new_page(&in);
				gen_page(s.buf + k * s.ps, s.ps, &nw[k]);
			}
			ret = zs_zram_write_range(s.z, i, n, s.buf);
			if (oor || i + n > s.nslots) {
				FUZZ_CHECK(ret == -EINVAL, "write_range past the end -> %d", ret);
				break;
			}
			if (ret == 0) {
				for (uint64_t k = 0; k < n; k++)
					do_write(&s, i + k, nw[k], 0);
				break;
			}
			/* a failed range wrote a prefix: the first slot that differs from the new
			 * page holds its old one, and so does every slot after it (a slot whose old
			 * and new pages are equal reads the same either way) */
			FUZZ_CHECK(ret == -ENOMEM && (s.limited || s.injecting), "write_range -> %d", ret);
			uint64_t k = 0;
			for (; k < n; k++) {
				FUZZ_CHECK(zs_zram_read(s.z, i + k, s.exp, s.ps) == 0, "read");
				if (memcmp(s.exp, s.buf + k * s.ps, s.ps))
					break;
				/* an empty slot and a stored zero page read alike: whether the slot
				 * holds anything tells */
				unsigned fl = 0;
				size_t sz = 0;
				zs_zram_slot_info(s.z, i + k, &sz, &fl, NULL);
				if (!s.sh[i + k].kind && !s.sh[i + k].seed && !(fl & ZS_ZRAM_F_SAME) && !sz)
					break;
				do_write(&s, i + k, nw[k], 0);
			}
			for (; k < n; k++)
				verify_slot(&s, i + k, "after a failed write_range");
			break;
		}
		case 7: {
			uint64_t n = fin_u8(&in) % 5;
			ret = zs_zram_read_range(s.z, i, n, s.buf, 4 * s.ps);
			if (oor || i + n > s.nslots) {
				FUZZ_CHECK(ret == -EINVAL, "read_range past the end -> %d", ret);
				break;
			}
			FUZZ_CHECK(ret == 0, "read_range -> %d", ret);
			for (uint64_t k = 0; k < n; k++) {
				gen_page(s.exp, s.ps, &s.sh[i + k]);
				FUZZ_CHECK(!memcmp(s.buf + k * s.ps, s.exp, s.ps), "read_range slot differs");
			}
			break;
		}
		case 8: {
			uint64_t n = fin_u8(&in) % 5;
			ret = zs_zram_discard_range(s.z, i, n);
			if (oor || i + n > s.nslots) {
				FUZZ_CHECK(ret == -EINVAL, "discard_range past the end -> %d", ret);
				break;
			}
			FUZZ_CHECK(ret == 0, "discard_range -> %d", ret);
			for (uint64_t k = 0; k < n; k++)
				s.sh[i + k].kind = 0, s.sh[i + k].seed = 0;
			break;
		}
		case 9:
			if (op & 0x30)
				break; /* rare */
			zs_zram_reset(s.z);
			memset(s.sh, 0, sizeof(s.sh));
			check_stats(&s);
			break;
		case 10:
			zs_zram_flush(s.z);
			break;
		case 11:
			zs_zram_flush(s.z);
			zs_zram_compact(s.z);
			verify_all(&s, "after compact");
			check_stats(&s);
			break;
		case 12: {
			unsigned age = (op & 16) ? 1 + (op >> 5) : 0;
			long n = zs_zram_mark_idle(s.z, age);
			if (age && !s.actime)
				FUZZ_CHECK(n == -EINVAL, "mark_idle by age without track_actime -> %ld", n);
			else
				FUZZ_CHECK(n >= 0 && (uint64_t)n <= s.nslots, "mark_idle -> %ld", n);
			break;
		}
		case 13: {
			struct zs_zram_recomp_result res;
			unsigned a = fin_u8(&in);
			size_t thr = (a & 3) == 0 ? 0 : (size_t)fin_u16(&in) % (s.unit + 1);
			ret = zs_zram_recompress(s.z, (enum zs_zram_recomp_type)((a >> 2) & 3), thr,
						 (a >> 4) % 4 ? (a >> 4) : 0, &res);
			size_t huge = zs_backend_huge_class_size(zs_zram_backend(s.z));
			if (s.group && s.zs_backend)
				/* a group is kept raw once its last partial page no longer packs
				 * into a small class (src/zram/core.c): that is its huge size */
				huge = s.unit - s.ps + huge;
			if (!s.has_recomp || (thr && thr >= (huge < s.unit ? huge : s.unit))) {
				FUZZ_CHECK(ret == -EINVAL, "recompress without a secondary or threshold >= huge -> %d", ret);
				break;
			}
			FUZZ_CHECK(ret == 0 || (ret == -ENOMEM && (s.limited || s.injecting)),
				   "recompress -> %d", ret);
			if (ret == 0)
				FUZZ_CHECK(res.recompressed + res.incompressible <= res.scanned,
					   "recompress result %lu + %lu > %lu", res.recompressed,
					   res.incompressible, res.scanned);
			verify_all(&s, "after recompress");
			break;
		}
		case 14:
			check_stats(&s);
			break;
		default:
			if (pool && (op & 16)) {
				unsigned a = fin_u8(&in);
				s.injecting = a != 255;
				zs_pool_fail_pages(pool, a == 255 ? UINT64_MAX : a % 16, (a >> 4) % 3);
			} else {
				zs_zram_reset_mem_used_max(s.z);
			}
		}
	}

	if (pool)
		zs_pool_fail_pages(pool, UINT64_MAX, 0);
	verify_all(&s, "at the end");
	check_stats(&s);
	FUZZ_CHECK(zs_zram_discard_range(s.z, 0, s.nslots) == 0, "discard all");
	zs_zram_flush(s.z);
	zs_zram_compact(s.z);
	struct zs_zram_stats st;
	zs_zram_get_stats(s.z, &st, sizeof(st));
	FUZZ_CHECK(st.pages_stored == 0 && st.compr_data_size == 0 && st.huge_pages == 0,
		   "discarded store: pages_stored %llu compr %llu huge %llu",
		   (unsigned long long)st.pages_stored, (unsigned long long)st.compr_data_size,
		   (unsigned long long)st.huge_pages);
	FUZZ_CHECK(st.mem_used_total == 0, "discarded store still uses %llu bytes",
		   (unsigned long long)st.mem_used_total);
	zs_zram_destroy(s.z);
	return 0;
}
