/*
 * The zswap front end's internals, shared by zswap.c (create, store, load,
 * invalidate), table.c (the sharded offset table and its LRU lists),
 * stream.c (compression contexts), writeback.c (backing file, LRU walk,
 * shrinker, shrink worker) and stats.c (statistics, groups, limits).  The
 * design note is at the top of zswap.c.
 *
 * Naming as in src/zram: functions shared between these files are prefixed
 * zswap_ (never zs_zswap_, the public prefix); none is exported.
 */
#ifndef ZS_ZSWAP_INTERNAL_H
#define ZS_ZSWAP_INTERNAL_H

#include "zs/zswap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "zs/compress.h"
#include "common/debug.h"
#include "common/err.h"
#include "common/hints.h"
#include "compress/streams.h"


/* ---- What an offset holds (node.kind) ---- */

enum { K_ENTRY = 1, K_ZERO = 2, K_DISK = 3 };

#define NF_REFERENCED 1u  /* second chance: set at store, cleared by the first LRU visit */
#define NF_RAW 2u         /* the object is the page itself (page_size bytes) */
#define NF_NODATA 4u      /* size-only (store_compressed with cdata NULL) */

struct zw_list {
	struct zw_list *prev, *next;
};

/* One offset's state; entries are also on their shard's LRU and its group's LRU there. */
struct zw_node {
	struct zw_node *hnext;   /* hash chain */
	struct zw_list lru;      /* shard LRU: head = youngest, tail = coldest (entries only) */
	struct zw_list glru;     /* the same order restricted to the entry's group */
	uint64_t offset;
	uint64_t seq;            /* LRU age: taken from zs_zswap.seq when inserted or rotated */
	unsigned long handle;
	uint32_t len;            /* object bytes (page_size when NF_RAW) */
	uint16_t group;
	uint8_t kind;
	uint8_t flags;
};

/* ---- Shards: hash table + LRU lists + the counters changed under the shard lock ---- */

#define ZW_SHARD_BITS 6
#define ZW_NSHARDS (1u << ZW_SHARD_BITS)

enum {
	SC_STORED, SC_INCOMP, SC_BYTES, SC_ZERO, SC_DISK, SC_ZSWPOUT, SC_ZSWPIN, SC_WB,
	SC_SWPOUT_ZERO, SC_SWPIN_ZERO, SC_PSWPIN, SC_DECOMP_FAIL, SC_RECLAIM_FAIL, SC_NR
};

struct zw_shard {
	pthread_mutex_t lock;
	struct zw_node **buckets;
	size_t nbuckets;          /* power of two */
	size_t count;
	struct zw_list lru;
	struct zw_list *glru;     /* [ZS_ZSWAP_MAX_GROUPS] */
	_Atomic uint64_t tail_seq;  /* seq of the coldest entry, UINT64_MAX when none: the
	                               writeback walk picks the shard with the smallest */
	_Atomic uint64_t cnt[SC_NR];
} __attribute__((aligned(64)));

/* Events counted outside any shard lock (rare paths): relaxed atomic adds. */
enum { EV_POOL_LIMIT_HIT, EV_ALLOC_FAIL, EV_KMEM_FAIL, EV_COMP_FAIL, EV_COMP_POOR,
       EV_WORKER_RUNS, EV_NR };

struct zw_group {
	_Atomic uint64_t charged, pages, zswpin, zswpout, zswpwb;
	_Atomic uint64_t max_bytes;
	_Atomic int writeback;
} __attribute__((aligned(64)));

struct zw_stream {
	/* compress/streams.h: busy, ready, comp, buf (zs_comp_bound(page) bytes), buf_cap,
	 * local (read_begin's copy of a page-spanning object) and page (writeback's
	 * decompressed copy, raw store_compressed); recomp stays NULL. */
	union {
		struct comp_stream cs;
		struct {
			COMP_STREAM_MEMBERS
		};
	};
} __attribute__((aligned(64)));

struct zswap_wb;     /* writeback.c */
struct zswap_worker; /* writeback.c */

struct zs_zswap {
	size_t page_size;
	struct zs_backend *b;
	int has_pages;            /* ZS_BACKEND_CAP_PAGES: total_pages is a cheap read */
	int deferred;
	int shrinker;
	uint64_t total_ram_pages;
	_Atomic uint64_t max_pages, accept_pages;
	_Atomic int reached_full;
	_Atomic uint64_t seq;
	_Atomic uint64_t ev[EV_NR];
	size_t comp_bound;
	unsigned nstreams;
	struct zw_stream *streams;
	struct comp_pool pool;       /* stream.c: owns streams[], builds them lazily */
	char comp_name[32];
	struct zswap_wb *wb;         /* NULL: no backing file */
	_Atomic(struct zswap_worker *) worker; /* NULL until a pass is first queued */
	pthread_mutex_t worker_lock; /* starts the worker once */
	struct zw_shard shards[ZW_NSHARDS];
	struct zw_group groups[ZS_ZSWAP_MAX_GROUPS];
};

/* ---- helpers ---- */

static inline uint64_t zw_mix(uint64_t x)
{
	/* A 64-bit finalizer: neighbouring offsets land in unrelated shards and buckets. */
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline struct zw_shard *zw_shard_of(struct zs_zswap *z, uint64_t offset)
{
	return &z->shards[zw_mix(offset) >> (64 - ZW_SHARD_BITS)];
}

/* Shard lock held: only its holder writes a shard counter, so no locked add is needed. */
static inline void sc_add(struct zw_shard *sh, int c, int64_t d)
{
	atomic_store_explicit(&sh->cnt[c],
			      atomic_load_explicit(&sh->cnt[c], memory_order_relaxed) + (uint64_t)d,
			      memory_order_relaxed);
}

static inline void ev_inc(struct zs_zswap *z, int e)
{
	atomic_fetch_add_explicit(&z->ev[e], 1, memory_order_relaxed);
}

static inline void g_add(_Atomic uint64_t *c, int64_t d)
{
	atomic_fetch_add_explicit(c, (uint64_t)d, memory_order_relaxed);
}

/* ---- table.c (every call with the shard lock held, except init/fini) ---- */

int zswap_shard_init(struct zw_shard *sh);
void zswap_shard_fini(struct zw_shard *sh);
struct zw_node *zswap_lookup(struct zw_shard *sh, uint64_t offset);
void zswap_insert(struct zw_shard *sh, struct zw_node *n);
void zswap_unlink(struct zw_shard *sh, struct zw_node *n);
/* LRU: add as the youngest with a new seq; remove; move to the youngest with a new seq. */
void zswap_lru_add(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n);
void zswap_lru_del(struct zw_shard *sh, struct zw_node *n);
void zswap_lru_rotate(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n);
/* The coldest entry of the shard (group < 0) or of one group in it; NULL when none. */
struct zw_node *zswap_lru_tail(struct zw_shard *sh, int group);

/* Free an entry's object and uncount it (the node stays, kind unchanged). */
void zswap_entry_release(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n, int deferred);

/* ---- stream.c ---- */

struct zw_stream *zswap_stream_get(struct zs_zswap *z);
/* One identity for all of zswap's streams in the lock-order check (ZS_DEBUG). */
extern const char zswap_stream_lockid;
static inline void zswap_stream_put(struct zw_stream *s)
{
	comp_pool_put(&s->cs);
	lock_drop(&zswap_stream_lockid);
}
int zswap_streams_create(struct zs_zswap *z, const char *comp, int level);
void zswap_streams_free(struct zs_zswap *z);

/* Decompress an entry's object into page; 0 or -EIO (counted by the caller). Shard locked. */
int zswap_entry_read(struct zs_zswap *z, struct zw_stream *s, struct zw_node *n, void *page);

/* ---- writeback.c ---- */

int zswap_wb_create(struct zs_zswap *z, const char *path, char *err, size_t errlen);
void zswap_wb_destroy(struct zs_zswap *z);
/* A written-back page's file range is no longer needed. */
void zswap_wb_punch(struct zs_zswap *z, uint64_t offset);
/* Read a written-back page: 0 or -errno (-EIO for a short read or an injected failure). */
int zswap_wb_read(struct zs_zswap *z, uint64_t offset, void *page);
/* Writing back one of the group's entries to make room (memory.zswap.max): 0 if one went. */
int zswap_group_shrink(struct zs_zswap *z, unsigned group);
/* Queue a shrink worker pass (started at the first one); no-op without a backing file. */
void zswap_worker_queue(struct zs_zswap *z);
void zswap_worker_stop(struct zs_zswap *z);

/* ---- stats.c ---- */

/* Pool pages now (the pool limit's measure; for backends without pages, bytes rounded up). */
uint64_t zswap_pool_pages(struct zs_zswap *z);
/* The kernel's zswap_check_limits: 1 when the store must be rejected (counts pool_limit_hit). */
int zswap_pool_full(struct zs_zswap *z);
void zswap_set_limits(struct zs_zswap *z, unsigned max_pct, unsigned acc_pct);

#endif
