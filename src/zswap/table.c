/*
 * The offset table: one shard per hash of the offset, each a chained hash
 * table (the kernel keeps an xarray per 64 MiB of swap; offsets here are
 * sparse 40-bit numbers, so a hash is the simpler index) with its own lock,
 * LRU list and per-group LRU lists.  Its own file because the LRU's
 * ordering rules (one sequence number orders every shard, so picking the
 * shard with the coldest tail is a global LRU) are what writeback relies on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zswap/internal.h"

#define INIT_BUCKETS 64

static inline void list_init(struct zw_list *l)
{
	l->prev = l->next = l;
}

static inline int list_empty(const struct zw_list *l)
{
	return l->next == l;
}

static inline void list_add_head(struct zw_list *head, struct zw_list *e)
{
	e->next = head->next;
	e->prev = head;
	head->next->prev = e;
	head->next = e;
}

static inline void list_del(struct zw_list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

#define node_of(ptr, member) ((struct zw_node *)((char *)(ptr) - offsetof(struct zw_node, member)))

int zswap_shard_init(struct zw_shard *sh)
{
	memset(sh, 0, sizeof(*sh));
	if (pthread_mutex_init(&sh->lock, NULL))
		return -ENOMEM;
	sh->nbuckets = INIT_BUCKETS;
	sh->buckets = calloc(sh->nbuckets, sizeof(*sh->buckets));
	/* Zeroed, and a group's head is set up at its first entry: a zswap whose programs use
	 * one group never touches the other heads' memory. */
	sh->glru = calloc(ZS_ZSWAP_MAX_GROUPS, sizeof(*sh->glru));
	if (!sh->buckets || !sh->glru) {
		free(sh->buckets);
		free(sh->glru);
		sh->buckets = NULL;
		sh->glru = NULL;
		pthread_mutex_destroy(&sh->lock);
		return -ENOMEM;
	}
	list_init(&sh->lru);
	atomic_init(&sh->tail_seq, UINT64_MAX);
	return 0;
}

void zswap_shard_fini(struct zw_shard *sh)
{
	if (!sh->buckets)
		return;
	free(sh->buckets);
	free(sh->glru);
	sh->buckets = NULL;
	sh->glru = NULL;
	pthread_mutex_destroy(&sh->lock);
}

static inline size_t bucket_of(const struct zw_shard *sh, uint64_t offset)
{
	return (size_t)(zw_mix(offset) & (sh->nbuckets - 1));
}

struct zw_node *zswap_lookup(struct zw_shard *sh, uint64_t offset)
{
	struct zw_node *n = sh->buckets[bucket_of(sh, offset)];

	while (n && n->offset != offset)
		n = n->hnext;
	return n;
}

/* Doubling keeps chains short; without memory the table keeps working with longer chains. */
static void grow(struct zw_shard *sh)
{
	size_t nb = sh->nbuckets * 2;
	struct zw_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < sh->nbuckets; i++) {
		struct zw_node *n = sh->buckets[i], *next;

		for (; n; n = next) {
			size_t k = (size_t)(zw_mix(n->offset) & (nb - 1));

			next = n->hnext;
			n->hnext = b[k];
			b[k] = n;
		}
	}
	free(sh->buckets);
	sh->buckets = b;
	sh->nbuckets = nb;
}

void zswap_insert(struct zw_shard *sh, struct zw_node *n)
{
	size_t k;

	if (sh->count >= sh->nbuckets * 2)
		grow(sh);
	k = bucket_of(sh, n->offset);
	n->hnext = sh->buckets[k];
	sh->buckets[k] = n;
	sh->count++;
}

void zswap_unlink(struct zw_shard *sh, struct zw_node *n)
{
	struct zw_node **pp = &sh->buckets[bucket_of(sh, n->offset)];

	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
	n->hnext = NULL;
	sh->count--;
}

/* ---- LRU ---- */

static void update_tail(struct zw_shard *sh)
{
	uint64_t t = list_empty(&sh->lru) ? UINT64_MAX : node_of(sh->lru.prev, lru)->seq;

	atomic_store_explicit(&sh->tail_seq, t, memory_order_relaxed);
}

static inline uint64_t next_seq(struct zs_zswap *z)
{
	/* Taken under the shard lock, so each shard's list stays in seq order. */
	return atomic_fetch_add_explicit(&z->seq, 1, memory_order_relaxed);
}

void zswap_lru_add(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n)
{
	n->seq = next_seq(z);
	list_add_head(&sh->lru, &n->lru);
	if (unlikely(!sh->glru[n->group].next))
		list_init(&sh->glru[n->group]);
	list_add_head(&sh->glru[n->group], &n->glru);
	update_tail(sh);
}

void zswap_lru_del(struct zw_shard *sh, struct zw_node *n)
{
	list_del(&n->lru);
	list_del(&n->glru);
	update_tail(sh);
}

void zswap_lru_rotate(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n)
{
	list_del(&n->lru);
	list_del(&n->glru);
	zswap_lru_add(z, sh, n);
}

struct zw_node *zswap_lru_tail(struct zw_shard *sh, int group)
{
	struct zw_list *head = group < 0 ? &sh->lru : &sh->glru[group];

	if (!head->next || list_empty(head))
		return NULL;
	return group < 0 ? node_of(head->prev, lru) : node_of(head->prev, glru);
}

/* ---- Dropping what an offset holds ---- */

void zswap_entry_release(struct zs_zswap *z, struct zw_shard *sh, struct zw_node *n, int deferred)
{
	struct zw_group *g = &z->groups[n->group];

	assert_internal(n->kind == K_ENTRY);
	zswap_lru_del(sh, n);
	if (deferred)
		zs_backend_free_deferred(z->b, n->handle);
	else
		zs_backend_free(z->b, n->handle);
	n->handle = 0;
	sc_add(sh, SC_STORED, -1);
	sc_add(sh, SC_BYTES, -(int64_t)n->len);
	if (n->flags & NF_RAW)
		sc_add(sh, SC_INCOMP, -1);
	g_add(&g->charged, -(int64_t)n->len);
	g_add(&g->pages, -1);
}
