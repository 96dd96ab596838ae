/*
 * The zram store's internals, shared by the files of src/zram: the slot and
 * stream layouts, the slot lock, the per-stream counters, the lock-order
 * checks, and each file's internal functions, declared bottom up in the
 * order the files call each other (zram.c's top comment has the graph and
 * the design note).
 *
 * Naming, as in src/pages and src/region: functions shared between these
 * files are prefixed with the layer's name, zram_ (never zs_zram_, which is
 * the public API's prefix and is defined in zram.c only); static inlines
 * here are file-local helpers and keep short names.  None of them is
 * exported (no ZS_API).
 */
#ifndef ZS_ZRAM_INTERNAL_H
#define ZS_ZRAM_INTERNAL_H

#include "zs/zram.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zs/compress.h"
#include "zs/pages.h"
#include "common/debug.h"
#include "common/err.h"
#include "common/hints.h"
#include "compress/streams.h"


/* ---- Slot flags (the kernel's layout: size bits, then the named flags) ---- */

#define F_SIZE_MASK ((1u << 17) - 1)   /* PAGE_SHIFT + 1 bits for up to 64 KiB pages */
#define F_SAME ZS_ZRAM_F_SAME
#define F_SLOCK (1u << 18)
#define F_WB ZS_ZRAM_F_WB  /* handle is a block of the backing file; size = bytes there */
#define F_PP_SLOT (1u << 20)
#define F_HUGE ZS_ZRAM_F_HUGE
#define F_IDLE ZS_ZRAM_F_IDLE
#define F_INCOMPRESSIBLE ZS_ZRAM_F_INCOMPRESSIBLE
#define F_PRIO_SHIFT 24
#define F_PRIO_MASK (3u << F_PRIO_SHIFT)

struct slot {
	unsigned long handle;      /* backend handle, or the fill word if F_SAME; under the lock */
	_Atomic uint32_t flags;
	uint32_t ac_time;          /* seconds since store creation; under the lock */
};

/* ---- Counters (per stream; see the design note) ---- */

enum {
	C_PAGES_STORED, C_COMPR_SIZE, C_SAME, C_HUGE, C_HUGE_SINCE, C_FAILED_READS,
	C_FAILED_WRITES, C_NOTIFY_FREE, C_MISS_FREE, C_READS, C_WRITES, C_INCOMPRESSIBLE,
	C_NR
};

struct stream {
	/* compress/streams.h: the pool's part (busy, ready, comp, recomp, buf, buf_cap,
	 * local_copy) named directly here; recomp serves priority 1 slots. */
	union {
		struct comp_stream cs;
		struct {
			COMP_STREAM_MEMBERS
		};
	};
	_Atomic int64_t cnt[C_NR];
} __attribute__((aligned(64)));

struct zs_zram {
	size_t page_size;
	uint64_t nslots;
	struct slot *slots;
	struct zs_backend *b;
	size_t huge_size;
	uint64_t limit_bytes;       /* mem_limit rounded up to pages; 0 none */
	int deferred;
	int block_signals;          /* zs_zram_block_signals: a region's store */
	int track_actime;
	struct timespec t0;
	unsigned nstreams;
	struct stream *streams;
	struct comp_pool pool;      /* stream.c: owns streams[], builds them lazily */
	_Atomic uint64_t mem_used_max;
	_Atomic uint64_t invalid_io;
	char comp_name[32];
	char recomp_name[32];
	struct zram_wb *wb;         /* backing.c; NULL without a backing file */
	/* The view (zram.c, group.c) only: the core code never reads these. */
	struct zram_group *grp;     /* group.c: this handle is the slot view of `inner` */
	struct zs_zram *inner;      /* the group store (page = group); NULL when not grouped */
};

/* ---- Lock-order checks (ZS_DEBUG; the order is written at the top of zram.c) ----
 *
 * zram's locks are ranks 100-199 of the library's one lock-order check
 * (ZS_LOCK_ZRAM_*, common/debug.h): a thread may take one only while every
 * lock it holds has a lower rank, so nesting follows the order and no lock
 * nests in itself (never two slot locks, never two streams).  A stream is
 * checked before the wait that picks it, so it is tracked by one token for
 * all streams (zram_stream_lockid); the others by their own address.  In a
 * build without ZS_DEBUG these compile to nothing. */
extern const char zram_stream_lockid;

static inline void count_invalid(struct zs_zram *z)
{
	atomic_fetch_add_explicit(&z->invalid_io, 1, memory_order_relaxed);
}

static inline void cnt_add(struct stream *s, int c, int64_t d)
{
	/* Only the stream's holder writes; the stream lock orders holders. */
	atomic_store_explicit(&s->cnt[c], atomic_load_explicit(&s->cnt[c], memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/* ---- Streams (stream.c) ---- */

/* A free stream, spinning then yielding while all are busy; the thread keeps a hint. */
struct stream *zram_stream_get(struct zs_zram *z);

static inline void stream_put(struct stream *s)
{
	lock_drop(&zram_stream_lockid);
	atomic_store_explicit(&s->busy, 0, memory_order_release);
}

struct zram_params;
/*
 * cfg->streams contexts (0: 2 x online CPUs) for z->page_size: the first
 * built now (so a bad compressor, level, dictionary or filter fails the
 * create), the others on their first use (compress/streams.c).  The
 * pool copies the dictionaries prm loaded; prm stays the caller's.
 * -errno, z->streams kept for zram_streams_free on failure.
 */
int zram_streams_create(struct zs_zram *z, const struct zs_zram_config *cfg,
			struct zram_params *prm);
void zram_streams_free(struct zs_zram *z);
/* Build every stream not built yet (zs_zram_block_signals: a region's store); best effort. */
void zram_streams_build_all(struct zs_zram *z);
/* zs_zram_stream_inject (zs/harness.h). */
unsigned zram_stream_inject(struct zs_zram *z, unsigned count);

/* ---- Slot lock (slot.c: the slow path) ---- */

uint32_t zram_slot_lock_slow(struct slot *sl);

/* Returns the flags as they were (without F_SLOCK). */
static inline uint32_t slot_lock(struct slot *sl)
{
	uint32_t f;

	lock_take(sl, ZS_LOCK_ZRAM_SLOT);
	f = atomic_fetch_or_explicit(&sl->flags, F_SLOCK, memory_order_acquire);
	return likely(!(f & F_SLOCK)) ? f : zram_slot_lock_slow(sl);
}

/* ZS_DEBUG: is the slot locked (by somebody: the lock is a flag bit, it has no owner)? */
static inline int slot_is_locked(struct slot *sl)
{
	return (atomic_load_explicit(&sl->flags, memory_order_relaxed) & F_SLOCK) != 0;
}

/* ZS_DEBUG: a same-filled slot holds its fill word only: no object size, huge or writeback flag. */
static inline int slot_flags_sane(uint32_t f)
{
	return !((f & F_SAME) && (f & (F_WB | F_HUGE | F_SIZE_MASK)));
}

/* Publish new flags and release the lock in one store. */
static inline void slot_unlock(struct slot *sl, uint32_t f)
{
	assert_internal(slot_is_locked(sl));
	assert_internal(slot_flags_sane(f));
	lock_drop(sl);
	atomic_store_explicit(&sl->flags, f & ~F_SLOCK, memory_order_release);
}

static inline uint32_t now_secs(const struct zs_zram *z)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint32_t)(t.tv_sec - z->t0.tv_sec);
}

/*
 * Compressor parameters resolved from the config (params.c); owned[] hold
 * the dictionaries, loaded from a file or copied from the caller's buffer,
 * so streams built after zs_zram_create returns (stream.c) still have them.
 */
struct zram_params {
	struct zs_comp_params comp, recomp;
	void *owned[2];
};
int zram_params_load(const struct zs_zram_config *cfg, struct zram_params *out);
void zram_params_free(struct zram_params *p);

/*
 * ---- The files, bottom up (each calls only the ones above it in this list;
 * zram.c's top comment has the graph) ----
 */

/* backing.c: the backing file, hooks the core calls only for F_WB slots. */
struct zram_wb;
/* Checks and opens cfg->backing_path; -errno with the reason in err. */
int zram_wb_create(struct zs_zram *z, const struct zs_zram_config *cfg, char *err,
		   size_t err_len);
void zram_wb_destroy(struct zs_zram *z);
/* Slot locked, F_WB set: release its block (punching the hole) and drop it from the counts. */
void zram_wb_free_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f);
/* Slot locked, F_WB set: read the page back from the file, checksum checked and retried;
 * -EIO (buf zeroed) when it cannot be read back. */
int zram_wb_read_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f,
			void *buf);
void zram_wb_stats(struct zs_zram *z, struct zs_zram_stats *st);
void zram_wb_inject(struct zs_zram *z, int reads, uint64_t after, uint64_t count);
int zram_wb_set_limit(struct zs_zram *z, int enable, uint64_t pages);
int zram_wb_get_limit(struct zs_zram *z, int *enable, uint64_t *pages);

/* core.c: the store itself (slot table, write/read/free paths); never a group. */
int zram_core_create(const struct zs_zram_config *cfg, size_t ps, size_t pool_page,
		     struct zs_zram **out, char *err, size_t err_len);
void zram_core_destroy(struct zs_zram *z);
int zram_page_same_filled(const void *page, size_t ps, unsigned long *fill);
int zram_store_decide(struct zs_comp *comp, const void *page, size_t ps, size_t huge_size,
		      void *buf, size_t buf_cap, struct zs_zram_store_decision *d);
enum zs_zram_store_kind zram_store_kind(long comp_len, size_t huge_size);
/* The slot paths: index checked (-EINVAL and invalid_io), buffers are the caller's. */
int zram_core_write(struct zs_zram *z, uint64_t index, const void *page);
int zram_core_read(struct zs_zram *z, uint64_t index, void *buf);
int zram_core_discard(struct zs_zram *z, uint64_t index);
int zram_core_free_notify(struct zs_zram *z, uint64_t index);
int zram_core_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
			unsigned *prio);
/* Frees every slot, then flushes deferred frees. */
void zram_core_reset(struct zs_zram *z);
void zram_core_flush(struct zs_zram *z);
unsigned long zram_core_compact(struct zs_zram *z);
/* The kernel's slot_free, slot locked: drop whatever the slot holds and
 * return the cleared flags (idle, incompressible, priority all reset). */
uint32_t zram_slot_free_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f);
/* Slot locked: read its page into buf with stream s's contexts. */
int zram_read_locked(struct zs_zram *z, struct stream *s, struct slot *sl, uint32_t f, void *buf);
/*
 * mem_used_total, the one place it is computed (the write path's limit
 * check and the statistics): zs_backend_mem_bytes of the backend.  bs: the
 * backend's stats if the caller has them; NULL reads the cheap page count
 * where the backend has one (ZS_BACKEND_CAP_PAGES), else the stats.
 */
uint64_t zram_used_bytes(struct zs_zram *z, const struct zs_backend_stats *bs);
void zram_update_used_max(struct zs_zram *z, uint64_t used);

/* Over the core: statistics (stats.c), writeback (writeback.c), idle and
 * recompression (recompress.c).  z is always a core store. */
void zram_core_get_stats(struct zs_zram *z, struct zs_zram_stats *st);
void zram_core_reset_mem_used_max(struct zs_zram *z);
int zram_core_writeback(struct zs_zram *z, enum zs_zram_wb_type type, unsigned long max_pages,
			struct zs_zram_wb_result *res);
long zram_core_mark_idle(struct zs_zram *z, unsigned age_seconds);
int zram_core_recompress(struct zs_zram *z, enum zs_zram_recomp_type type, size_t threshold,
			 unsigned long max_pages, struct zs_zram_recomp_result *res);

/* group.c: large-folio groups (cfg.group_pages > 1), a view over a core store. */
struct zram_group;
int zram_group_create(const struct zs_zram_config *cfg, size_t ps, struct zs_zram **out,
		      char *err, size_t err_len);
void zram_group_destroy(struct zs_zram *z);
int zram_group_write(struct zs_zram *z, uint64_t index, const void *page);
int zram_group_read(struct zs_zram *z, uint64_t index, void *buf);
int zram_group_discard(struct zs_zram *z, uint64_t index);
int zram_group_write_range(struct zs_zram *z, uint64_t first, uint64_t n, const void *buf);
int zram_group_read_range(struct zs_zram *z, uint64_t first, uint64_t n, void *buf);
int zram_group_discard_range(struct zs_zram *z, uint64_t first, uint64_t n);
int zram_group_slot_info(struct zs_zram *z, uint64_t index, size_t *size, unsigned *flags,
			 unsigned *prio);
/* zs_zram_reset of the slot view: forget the per-slot marks with the data. */
void zram_group_reset_marks(struct zs_zram *z);

#endif
