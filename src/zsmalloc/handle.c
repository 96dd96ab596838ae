/*
 * Handles: 8-byte slots that hold an object's current obj value, the
 * kernel's "zs_handle" kmem_cache.  A handle is the slot's address, so
 * resolving it is one load, and compaction moves an object by rewriting
 * the slot alone.
 *
 * Slots are carved from 64 KiB pages of a private page provider, which gives
 * checked mode a cheap, crash-free test for "is this one of our handles".
 * Free slots are kept on per-thread-sharded LIFO lists so that threads
 * freeing at once (the seed-000 munmap case) do not meet on one lock, the
 * way the kernel's per-CPU slab caches keep kmem_cache_free off shared locks.
 */
#include <errno.h>
#include <stdlib.h>

#include "zsmalloc/internal.h"

#define HANDLE_CHUNK (64 * 1024)

static atomic_uint next_thread_shard;
static _Thread_local unsigned my_shard = -1u;

static struct handle_shard *this_shard(struct zs_pool *pool)
{
	if (zs_unlikely(my_shard == -1u))
		my_shard = atomic_fetch_add_explicit(&next_thread_shard, 1, memory_order_relaxed) %
			   ZS_HANDLE_SHARDS;
	return &pool->shards[my_shard];
}

int zs_handles_init(struct zs_pool *pool)
{
	struct zs_pages_config pc = { .page_size = HANDLE_CHUNK, .chunk_bytes = 16 * HANDLE_CHUNK,
				      .cache_pages = ZS_PAGES_NO_CACHE };
	pool->handle_pages = zs_pages_create(&pc);
	if (!pool->handle_pages)
		return -ENOMEM;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
		zs_spin_init(&pool->shards[i].lock);
		pool->shards[i].free_head = 0;
		pool->shards[i].bump = pool->shards[i].bump_end = NULL;
		pool->shards[i].live = 0;
	}
	pthread_mutex_init(&pool->handle_chunks_lock, NULL);
	pool->handle_chunks = NULL;
	pool->nr_handle_chunks = pool->cap_handle_chunks = 0;
	return 0;
}

void zs_handles_destroy(struct zs_pool *pool)
{
	if (pool->handle_pages)
		zs_pages_destroy(pool->handle_pages);
	free(pool->handle_chunks);
	pthread_mutex_destroy(&pool->handle_chunks_lock);
}

/* Slow path: give the shard a fresh chunk of never-used slots. */
static int refill_shard(struct zs_pool *pool, struct handle_shard *s)
{
	zs_pfn_t pfn;
	if (zs_pages_alloc(pool->handle_pages, &pfn))
		return -ENOMEM;
	pthread_mutex_lock(&pool->handle_chunks_lock);
	if (pool->nr_handle_chunks == pool->cap_handle_chunks) {
		size_t cap = pool->cap_handle_chunks ? pool->cap_handle_chunks * 2 : 16;
		zs_pfn_t *n = realloc(pool->handle_chunks, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&pool->handle_chunks_lock);
			zs_pages_free(pool->handle_pages, pfn);
			return -ENOMEM;
		}
		pool->handle_chunks = n;
		pool->cap_handle_chunks = cap;
	}
	pool->handle_chunks[pool->nr_handle_chunks++] = pfn;
	pthread_mutex_unlock(&pool->handle_chunks_lock);
	s->bump = zs_pages_addr(pool->handle_pages, pfn);
	s->bump_end = s->bump + HANDLE_CHUNK;
	/* Slot 0 of each chunk is never handed out, so no handle value is the chunk base. */
	s->bump += sizeof(unsigned long);
	return 0;
}

unsigned long zs_handle_alloc(struct zs_pool *pool)
{
	struct handle_shard *s = this_shard(pool);
	unsigned long h;
	zs_spin_lock(&s->lock);
	if (zs_likely(s->free_head)) {
		h = s->free_head;
		s->free_head = atomic_load_explicit(handle_slot(h), memory_order_relaxed) &
			       ~HANDLE_FREE_BIT;
	} else {
		if (s->bump == s->bump_end && refill_shard(pool, s)) {
			zs_spin_unlock(&s->lock);
			return 0;
		}
		h = (unsigned long)s->bump;
		s->bump += sizeof(unsigned long);
	}
	s->live++;
	zs_spin_unlock(&s->lock);
	return h;
}

void zs_handle_free(struct zs_pool *pool, unsigned long handle)
{
	struct handle_shard *s = this_shard(pool);
	zs_spin_lock(&s->lock);
	atomic_store_explicit(handle_slot(handle), s->free_head | HANDLE_FREE_BIT,
			      memory_order_relaxed);
	s->free_head = handle;
	s->live--;
	zs_spin_unlock(&s->lock);
}

/* Checked mode: an 8-aligned address inside one of this pool's handle chunks. */
int zs_handle_in_pool(const struct zs_pool *pool, unsigned long handle)
{
	if (!handle || (handle & 7))
		return 0;
	zs_pfn_t pfn = zs_pages_pfn_of(pool->handle_pages, (const void *)handle);
	if (pfn == ZS_PFN_NONE)
		return 0;
	return (handle & (HANDLE_CHUNK - 1)) != 0;
}

/*
 * Once the pool holds no objects, give the handle chunks back too, so a
 * drained pool returns all its memory.  All shards are locked so no handle
 * is being handed out meanwhile.
 */
void zs_handles_trim_if_unused(struct zs_pool *pool)
{
	long live = 0;
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++)
		zs_spin_lock(&pool->shards[i].lock);
	for (int i = 0; i < ZS_HANDLE_SHARDS; i++)
		live += pool->shards[i].live;
	if (live == 0 && pool->nr_handle_chunks) {
		pthread_mutex_lock(&pool->handle_chunks_lock);
		for (size_t i = 0; i < pool->nr_handle_chunks; i++)
			zs_pages_free(pool->handle_pages, pool->handle_chunks[i]);
		pool->nr_handle_chunks = 0;
		pthread_mutex_unlock(&pool->handle_chunks_lock);
		for (int i = 0; i < ZS_HANDLE_SHARDS; i++) {
			pool->shards[i].free_head = 0;
			pool->shards[i].bump = pool->shards[i].bump_end = NULL;
			pool->shards[i].live = 0;
		}
		zs_pages_trim(pool->handle_pages);
	}
	for (int i = ZS_HANDLE_SHARDS - 1; i >= 0; i--)
		zs_spin_unlock(&pool->shards[i].lock);
}
