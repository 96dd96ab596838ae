/*
 * Compaction for the library's own callers (the blob store), which must tell
 * "nothing to free" from "another compactor holds the place" and may wait for
 * that one to finish: zs_compact and zs_compact_step keep their public
 * contract (0 for both, never wait; zs/zsmalloc.h).  The place itself is
 * here too, so that a white-box test can hold it as the pool's idle
 * compaction does between its steps.
 */
#ifndef ZS_ZSMALLOC_COMPACT_H
#define ZS_ZSMALLOC_COMPACT_H

struct zs_pool;

/*
 * zs_compact_step that reports the busy case: pages freed (>= 0), or
 * -EBUSY when another compactor holds the place and wait is 0 (*cursor
 * untouched).  With wait it blocks until the place is given up (the idle
 * compaction gives it up after each step of its pass and then leaves the
 * rest to this caller), then steps.  -EINVAL: pool or cursor NULL.  The
 * caller holds no pool lock (checked in debug builds).
 */
long compact_step(struct zs_pool *pool, unsigned *cursor, unsigned max_classes, int wait);
/* zs_compact, but waiting for a running compactor rather than returning 0. */
unsigned long compact_all_wait(struct zs_pool *pool);

/* Take the compactor's place: 1, or 0 when another holds it and wait is 0. */
int compact_place_take(struct zs_pool *pool, int wait);
/* Give it back and wake the callers waiting for it. */
void compact_place_give(struct zs_pool *pool);

#endif
