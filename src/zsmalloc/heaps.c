/*
 * The application profile's thread heaps (owned.c has what a heap does with
 * its zspages): each thread's heap per owned pool, found from the thread's
 * slots (heap_tls) and registered by id in a global table so that another
 * thread's free finds the owner of a zspage (heap_remote_free); a thread's
 * exit retires its heaps, and its write-pin slot goes before its number does.
 * Why a file of its own: it is the one place another thread touches a heap,
 * so the protocol that makes that safe for an owner paying no locked
 * instruction lives here, apart from the per-zspage work it protects.
 *
 * Revocation.  Only the owner touches its heap's data (its lists, handle
 * cache, page addresses, and the freeobj/inuse of the zspages it owns),
 * except a revoker: zs_compact, zs_compact_step, zs_pool_trim, an
 * allocation out of memory (each through heaps_revoke_all) and
 * zs_class_stats (heaps_owned_free).  The owner brackets each operation with
 * heap_enter / heap_exit (internal.h):
 *     owner:   busy = HEAP_BUSY (relaxed); compiler barrier; r = revoke (acquire);
 *              r ? class path : { heap work; busy = 0 (release) }
 *     revoker: revoke |= REVOKE (seq_cst); membarrier(PRIVATE_EXPEDITED);
 *              wait until busy == 0 (acquire); heap work; revoke &= ~REVOKE (release)
 * This is Dekker's mutual exclusion with the owner's fence moved to the
 * revoker: membarrier runs a full barrier on every thread of the process
 * that is running, and a thread that is not running has passed one (the
 * kernel's context switch), so at the barrier each owner's earlier stores
 * are visible and its later loads come after the revoker's store.  Either
 * the owner's busy store precedes the barrier (the revoker sees it and waits
 * for busy = 0, whose release hands it the owner's writes) or the owner's
 * load of revoke follows it (the owner sees REVOKE and takes the class
 * path, touching no heap data).  The revoker's heap writes reach the owner
 * through the release that clears REVOKE and the acquire load that finds it
 * clear.  So the owner pays two plain stores and a load an operation, and
 * the revoker a barrier (a few microseconds, IPIs to the process's running
 * CPUs) a heap.  Where the kernel refuses membarrier (before Linux 4.14, a
 * seccomp filter) or ZS_OWNED_FENCED=1 is set, every heap carries
 * HEAP_FENCED: the owner's heap_enter then goes to heap_enter_slow, which
 * stores busy with a seq_cst exchange and reads revoke seq_cst, the revoker
 * reads busy seq_cst after its seq_cst or (the plain C11 form of Dekker).
 * A barrier that fails after registration (a forked child whose
 * registration did not carry over and cannot be renewed) makes the revoker
 * skip the heap: revocation only gives memory back sooner, no caller needs
 * it for correctness (owned zspages are on no class list, so compaction
 * never sees them).  The copy of zs_malloc_write runs after heap_exit,
 * under the write pin (lock.h), so a source that faults into a handler
 * that compacts this pool does not wait for itself.  A call nested in the
 * owner's own operation (a signal handler) finds busy set and takes the
 * class path.
 *
 * Lock order: the global heap lock (a mutex) -> waiting for an owner's busy
 * -> a class lock or a handle shard lock -> the page provider.  An owner
 * holds no lock while busy that a revoker holds while it waits (the revoker
 * holds only the global heap lock, which an owner never takes while busy).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zsmalloc/internal.h"

_Thread_local struct heap_tls heap_tls ZS_TLS_IE;

#define ZS_MAX_HEAPS 4096 /* heap ids are 1..ZS_MAX_HEAPS-1; a thread past that has no heap */

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct zs_heap *) heap_table[ZS_MAX_HEAPS];
static uint32_t heap_hint = 1;
static atomic_ulong heap_keys = 1;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t tl_key;

/* A heap whose thread has no pin slot points here: a pin that always reads set, so the write
 * takes the zspage read lock with no test for a missing slot. */
static struct zs_wpin wpin_none = { .z = &wpin_none };

/*
 * A thread slot whose pool has no heap to be had (no heap id left, out of
 * memory) holds this one, not NULL: its busy word is set for good, so the
 * fast paths' one busy test sends such a thread to the class path with no
 * test for a missing heap.  Never registered or entered; the only write is
 * heap_enter_word's store of the busy it already holds.
 */
struct zs_heap heap_none = { .busy = HEAP_BUSY, .wpin = &wpin_none };

void heap_remote_free(struct zs_pool *pool, struct zspage *z, unsigned long obj)
{
	struct zs_heap *h = atomic_load_explicit(&heap_table[zspage_heap_id(z)], memory_order_relaxed);
	unsigned long *hdr = obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), zspage_class(pool, z)->size);
	unsigned long old = atomic_load_explicit(&h->remote, memory_order_relaxed);
	do
		*hdr = old;
	while (!atomic_compare_exchange_weak_explicit(&h->remote, &old, (obj << 1) | 1,
						      memory_order_release, memory_order_relaxed));
}

/* ---- revocation ---- */

/* linux/membarrier.h's commands (not every libc's headers have it). */
#define MB_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MB_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)

/* 1: registered for the expedited barrier; 0: the heaps are HEAP_FENCED (global heap lock). */
static int heap_membarrier = -1;

static long membarrier_call(int cmd)
{
#ifdef SYS_membarrier
	return syscall(SYS_membarrier, cmd, 0, 0);
#else
	(void)cmd;
	errno = ENOSYS;
	return -1;
#endif
}

/* Global heap lock held: the mode a new heap starts in (HEAP_FENCED or 0). */
static unsigned heap_mode(void)
{
	if (heap_membarrier < 0) {
		const char *e = getenv("ZS_OWNED_FENCED");
		heap_membarrier = !(e && e[0] == '1') &&
				  membarrier_call(MB_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
	}
	return heap_membarrier ? 0 : HEAP_FENCED;
}

/* The process-wide barrier (global heap lock held): 0, or -1 when the kernel refuses it. */
static int heap_barrier(void)
{
	if (membarrier_call(MB_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	/* A forked child's registration may not have come along: register again, once. */
	if (membarrier_call(MB_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
	    membarrier_call(MB_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	return -1;
}

/* The fenced owner (HEAP_FENCED), or one that found REVOKE: 1 entered, 0 class path. */
int heap_enter_slow(struct zs_heap *h)
{
	unsigned r = atomic_load_explicit(&h->revoke, memory_order_acquire);
	if (r == HEAP_FENCED) {
		atomic_exchange_explicit(&h->busy, HEAP_BUSY, memory_order_seq_cst);
		if (!(atomic_load_explicit(&h->revoke, memory_order_seq_cst) & HEAP_REVOKE))
			return 1;
	}
	atomic_store_explicit(&h->busy, 0, memory_order_release);
	return 0;
}

/*
 * Global heap lock held, not the heap's owner in an operation: 1 once the
 * owner is out of its heap and stays out until heap_resume; 0 when the
 * barrier is refused (the heap is left to its owner).
 */
static int heap_stop(struct zs_heap *h)
{
	unsigned r = atomic_fetch_or_explicit(&h->revoke, HEAP_REVOKE, memory_order_seq_cst);
	if (!(r & HEAP_FENCED) && heap_barrier()) {
		atomic_fetch_and_explicit(&h->revoke, ~HEAP_REVOKE, memory_order_release);
		return 0;
	}
	/* An owner seen busy finishes its operation without waiting on anything this thread holds. */
	while (atomic_load_explicit(&h->busy, memory_order_seq_cst))
		sched_yield();
	return 1;
}

static void heap_resume(struct zs_heap *h)
{
	atomic_fetch_and_explicit(&h->revoke, ~HEAP_REVOKE, memory_order_release);
}

/* The heap stopped (or its owner): every owned zspage back to its class, the remote frees done,
 * the handles back. */
static void revoke_locked(struct zs_pool *pool, struct zs_heap *h)
{
	for (int i = 0; i < pool->nr_classes; i++)
		heap_class_give_back(pool, &h->cls[i]);
	/* Their zspages are the classes' now: free them as any other thread would. */
	unsigned long v = atomic_exchange_explicit(&h->remote, 0, memory_order_acquire);
	while (v) {
		unsigned long obj = v >> 1;
		struct zspage *z = obj_to_zspage(pool, obj);
		struct size_class *class = zspage_class(pool, z);
		spin_lock(&class->lock);
		unsigned long *hdr = obj_header(pool, obj_to_pfn(obj), obj_to_idx(obj), class->size);
		v = *hdr;
		*hdr |= OBJ_ALLOCATED_TAG; /* it is: still counted in its zspage */
		/* Another heap may own the zspage already (a revocation without a compaction). */
		struct zspage *empty = free_locked_any(pool, class, obj);
		if (empty && !(pool->park && park_zspage(pool, class, empty)))
			free_zspage_pages(pool, empty);
		spin_unlock(&class->lock);
	}
	heap_handles_drain(pool, h, 0);
}

void heaps_revoke_all(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		if (!heap_stop(h))
			continue;
		revoke_locked(pool, h);
		heap_resume(h);
	}
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * zs_class_stats' snapshot: every heap of the pool stopped for the whole
 * count (heaps_stats_begin .. heaps_stats_end), so the class counts it reads
 * and the owned zspages it counts are of one moment.  Stopped one class at
 * a time, after the class counts were read, an owner could empty and park a
 * zspage in between: the class still counted its objects as allocated and
 * no heap held it any more.  Each heap's remote stack is collected first,
 * as its owner's next refill would: another thread's frees are done frees,
 * and an owner that makes no further call (idle, or done) never collects
 * them, so obj_used would count them for ever.  While stopped, an owner's
 * own calls take the class path, as during any revocation.  A heap whose
 * barrier is refused stays its owner's (its zspages count as wholly in
 * use, as the class counts them).  Stopped heaps are those with HEAP_REVOKE
 * set: only the holder of the global heap lock sets it.
 */
void heaps_stats_begin(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next)
		if (heap_stop(h))
			heap_collect_remote(pool, h);
}

void heaps_stats_end(struct zs_pool *pool)
{
	if (!pool->owned)
		return;
	for (struct zs_heap *h = pool->heaps; h; h = h->next)
		if (atomic_load_explicit(&h->revoke, memory_order_relaxed) & HEAP_REVOKE)
			heap_resume(h);
	pthread_mutex_unlock(&heaps_lock);
}

/* Between heaps_stats_begin and _end: free slots in the zspages the stopped heaps own of
 * physical class phys (every copy), each zspage counted in the group its use puts it in. */
unsigned long heaps_owned_free(struct zs_pool *pool, int phys, unsigned long *fullness)
{
	unsigned long n = 0;
	if (!pool->owned)
		return 0;
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		struct zs_heap_class *c = &h->cls[phys];
		if (!(atomic_load_explicit(&h->revoke, memory_order_relaxed) & HEAP_REVOKE))
			continue;
		if (c->cur) {
			n += c->cur->objs - c->cur->inuse;
			fullness[get_fullness_group(NULL, c->cur)]++;
		}
		for (struct zspage *z = c->partial; z; z = z->lnext) {
			n += z->objs - z->inuse;
			fullness[get_fullness_group(NULL, z)]++;
		}
		for (struct zspage *z = c->full; z; z = z->lnext)
			fullness[ZS_INUSE_RATIO_100]++;
		for (struct zspage *z = c->spare; z; z = z->lnext) {
			n += z->objs;
			fullness[ZS_INUSE_RATIO_0]++;
		}
	}
	return n;
}

/* Global heap lock held: a heap whose thread is done with it (exit, or its slot reused). */
static void heap_retire(struct zs_heap *h)
{
	struct zs_pool *pool = h->pool;
	if (pool) {
		revoke_locked(pool, h); /* by its owner, between operations */
		for (struct zs_heap **p = &pool->heaps; *p; p = &(*p)->next)
			if (*p == h) {
				*p = h->next;
				break;
			}
		atomic_store_explicit(&heap_table[h->id], NULL, memory_order_relaxed);
	}
	free(h);
}

static void tl_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&heaps_lock);
	for (int i = 0; i < ZS_TL_HEAPS; i++) {
		if (heap_tls.heap[i] && heap_tls.heap[i] != &heap_none)
			heap_retire(heap_tls.heap[i]);
		heap_tls.heap[i] = NULL;
		heap_tls.key[i] = 0;
	}
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * The thread's number is about to go back (common/thread.c), and with it
 * the pin slot its heaps' wpin names: another thread may get both next.
 * A call later in this thread's exit takes the read-lock path, or its new
 * number's slot (wpin_own), so the write path tests no thread number.
 */
static void heaps_number_gone(void)
{
	for (int i = 0; i < ZS_TL_HEAPS; i++)
		if (heap_tls.heap[i] && heap_tls.heap[i] != &heap_none)
			heap_tls.heap[i]->wpin = &wpin_none;
}

static void tl_key_create(void)
{
	if (pthread_key_create(&tl_key, tl_exit))
		tl_key = (pthread_key_t)-1;
	thread_on_give_back(heaps_number_gone);
}

/* Global heap lock held: a new heap registered in the pool, or NULL. */
static struct zs_heap *heap_new(struct zs_pool *pool)
{
	uint32_t id = 0;
	for (uint32_t k = 0; k < ZS_MAX_HEAPS - 1; k++) {
		uint32_t i = 1 + (heap_hint - 1 + k) % (ZS_MAX_HEAPS - 1);
		if (!atomic_load_explicit(&heap_table[i], memory_order_relaxed)) {
			id = i;
			break;
		}
	}
	if (!id)
		return NULL;
	/* Aligned: busy and revoke sit on lines of their own (internal.h). */
	size_t bytes = sizeof(struct zs_heap) + (size_t)pool->nr_classes * sizeof(struct zs_heap_class);
	bytes = (bytes + 63) & ~(size_t)63;
	struct zs_heap *h = aligned_alloc(64, bytes);
	if (!h)
		return NULL;
	memset(h, 0, bytes);
	heap_hint = id + 1;
	atomic_init(&h->busy, 0);
	atomic_init(&h->revoke, heap_mode());
	h->id = id;
	h->zid = id | ZSPAGE_OWNED;
	h->pool = pool;
	atomic_init(&h->remote, 0);
	/* No pin slot yet: the owner's first zs_malloc_write takes one (zsmalloc.c, wpin_own). */
	h->wpin = &wpin_none;
	h->next = pool->heaps;
	pool->heaps = h;
	atomic_store_explicit(&heap_table[id], h, memory_order_relaxed);
	return h;
}

struct zs_heap *heap_lookup(struct zs_pool *pool)
{
	if (!pool->owned)
		return NULL;
	struct heap_tls *t = &heap_tls;
	for (int i = 1; i < ZS_TL_HEAPS; i++) {
		if (t->key[i] == pool->heap_key) {
			uint64_t k = t->key[i];
			struct zs_heap *h = t->heap[i];
			t->key[i] = t->key[0];
			t->heap[i] = t->heap[0];
			t->key[0] = k;
			t->heap[0] = h;
			return h == &heap_none ? NULL : h;
		}
	}
	pthread_once(&tl_once, tl_key_create);
	if (tl_key == (pthread_key_t)-1)
		return NULL;
	pthread_mutex_lock(&heaps_lock);
	/* The least recently used slot goes: its heap gives its zspages back first. */
	if (t->heap[ZS_TL_HEAPS - 1] && t->heap[ZS_TL_HEAPS - 1] != &heap_none)
		heap_retire(t->heap[ZS_TL_HEAPS - 1]);
	for (int i = ZS_TL_HEAPS - 1; i > 0; i--) {
		t->key[i] = t->key[i - 1];
		t->heap[i] = t->heap[i - 1];
	}
	/* No heap to be had: the key still matches, so the class path is taken at once. */
	struct zs_heap *h = heap_new(pool);
	t->key[0] = pool->heap_key;
	t->heap[0] = h ? h : &heap_none;
	pthread_mutex_unlock(&heaps_lock);
	pthread_setspecific(tl_key, t);
	return h;
}

void heaps_pool_init(struct zs_pool *pool)
{
	pool->owned = ZS_OWNED_ZSPAGES && pool->cfg.free_mode != ZS_FREE_POOL_LOCK &&
		      !pool->cfg.checked && pool->cfg.fit_zspages;
	pool->small_limit = pool->owned ? 0 : pool->page_size;
	pool->free_flags = pool->cfg.checked;
	pool->free_limit = pool->owned ? 0 : (unsigned long)-4096;
	pool->heap_key = atomic_fetch_add_explicit(&heap_keys, 1, memory_order_relaxed);
	pool->heaps = NULL;
}

/* zs_destroy_pool: the heaps stay with their threads (freed at exit), marked dead. */
void heaps_pool_gone(struct zs_pool *pool)
{
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		heap_handles_drain(pool, h, 0); /* written free, so the chunks' records see them */
		atomic_store_explicit(&heap_table[h->id], NULL, memory_order_relaxed);
		h->pool = NULL;
	}
	pool->heaps = NULL;
	pthread_mutex_unlock(&heaps_lock);
}

/*
 * Self-compaction's look (autocompact.c): free slots in the zspages the
 * pool's heaps own, added to free_slots[phys] for every physical class,
 * stopping each heap once (heaps_owned_free stops it once a class).  While
 * a heap is stopped its owner's frees take the class path, which puts an
 * object of a zspage it owns on its own remote stack; so does every free
 * another thread makes of such an object.  Either waits for the owner's
 * next refill, which an owner that is freeing everything or has gone quiet
 * never makes: the looks then stranded a fifth to a third of a free-all
 * (the pages stayed) and an idle owner's zspages forever.  So the stopped
 * heap's remote stack is collected, as its owner would, before and after
 * the count.  Returns how many heaps it stopped.
 */
unsigned heaps_look(struct zs_pool *pool, unsigned long *free_slots)
{
	unsigned stopped = 0;
	if (!pool->owned)
		return 0;
	pthread_mutex_lock(&heaps_lock);
	for (struct zs_heap *h = pool->heaps; h; h = h->next) {
		if (!heap_stop(h))
			continue; /* its zspages count as wholly in use, as the class counts them */
		stopped++;
		heap_collect_remote(pool, h);
		for (int i = 0; i < pool->nr_classes; i++) {
			struct zs_heap_class *c = &h->cls[i];
			heap_spares_give_back(pool, c); /* an idle heap keeps no empty zspage */
			if (c->cur)
				free_slots[i] += c->cur->objs - c->cur->inuse;
			for (struct zspage *z = c->partial; z; z = z->lnext)
				free_slots[i] += z->objs - z->inuse;
		}
		heap_collect_remote(pool, h);
		heap_resume(h);
	}
	pthread_mutex_unlock(&heaps_lock);
	return stopped;
}
