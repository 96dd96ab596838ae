/*
 * Writeback: the backing file (the swap device zswap writes back to), the
 * LRU walk with second chance, and its three drivers: zs_zswap_writeback,
 * the shrinker (zs_zswap_shrink) and the shrink worker queued by a store
 * rejected while the pool is full; plus the one-entry shrink a store does
 * for a group at its memory.zswap.max.  Its own file because it is the only
 * part that does file I/O or runs a thread.
 *
 * One LRU step (step_locked), with the entry's shard locked:
 *   - an entry of a group with writeback off is passed over: it becomes the
 *     youngest, its referenced bit kept (the kernel never walks such a
 *     memcg's list; here all groups share a list, so it is moved aside);
 *   - a referenced entry loses the bit and becomes the youngest (second
 *     chance);
 *   - otherwise its page is decompressed into the stream's page, written at
 *     offset x page_size, the object freed, and the node becomes a
 *     written-back page.  A failure counts reject_reclaim_fail and the entry
 *     becomes the youngest (the kernel rotates it so other reclaimers do not
 *     retry it at once).
 * Doing the file write under the shard lock is the simple way to keep a
 * load or invalidate of that offset from seeing it half moved; it holds up
 * only the offsets hashed to that shard, for one page's write.
 *
 * Fork (common/fork.h).  The shrink worker's steps take shard locks, a
 * stream and the backend's locks; a fork that copied one of them held left
 * the child stuck on it.  So the worker steps inside the zswap fork gate,
 * which the prepare handler closes (the worker leaves between two steps and
 * waits until the fork is over), and the gate's lock keeps the list of
 * workers, which the child handler walks: the worker's mutex and condition
 * variables are made anew (it sleeps there outside the gate), and the
 * worker is marked gone, so the child's next queued pass starts its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zswap/internal.h"
#include "common/fileio.h"
#include "common/fork.h"
#include "common/sigblock.h"
#include "zs/harness.h"   /* zs_zswap_wb_inject */

struct zswap_wb {
	int fd;
	int punch;                  /* regular file: free ranges with FALLOC_FL_PUNCH_HOLE */
	struct zs_io_inject inj;    /* zs_zswap_wb_inject */
};

struct zswap_worker {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	_Atomic int queued;
	int running, stop;
	_Atomic int forked;   /* the thread stayed in the parent of this child: start one anew */
	struct zs_zswap *z;
	struct zswap_worker *fork_prev, *fork_next; /* on the gate's list */
};

/* Every worker steps inside this gate; its lock guards the list (fork_head). */
static struct zs_fork_gate fork_gate = ZS_FORK_GATE_INIT(ZS_LOCK_ZSWAP_FORK_GATE);
static struct zswap_worker *fork_head;

/* ---- The backing file ---- */

int zswap_wb_create(struct zs_zswap *z, const char *path, char *err, size_t errlen)
{
	struct zswap_wb *wb;
	struct stat st;
	int fd = backing_open(path, &st, err, errlen);

	if (fd < 0)
		return fd;
	wb = calloc(1, sizeof(*wb));
	if (!wb) {
		close(fd);
		return -ENOMEM;
	}
	io_inject_init(&wb->inj);
	wb->fd = fd;
	wb->punch = S_ISREG(st.st_mode);
	z->wb = wb;
	return 0;
}

void zswap_wb_destroy(struct zs_zswap *z)
{
	if (!z->wb)
		return;
	close(z->wb->fd);
	io_inject_destroy(&z->wb->inj);
	free(z->wb);
	z->wb = NULL;
}

void zs_zswap_wb_inject(struct zs_zswap *z, int reads, uint64_t after, uint64_t count)
{
	if (z && z->wb)
		io_inject_set(&z->wb->inj, reads, after, count);
}

/* The whole page or -errno (a short transfer is -EIO). */
static int file_io(struct zs_zswap *z, int reads, void *buf, uint64_t offset)
{
	struct zswap_wb *wb = z->wb;

	if (io_inject_hit(&wb->inj, reads))
		return -EIO;
	return pio_whole(wb->fd, reads, buf, z->page_size, (off_t)(offset * z->page_size));
}

int zswap_wb_read(struct zs_zswap *z, uint64_t offset, void *page)
{
	return z->wb ? file_io(z, 1, page, offset) : -EIO;
}

void zswap_wb_punch(struct zs_zswap *z, uint64_t offset)
{
	/* Best effort: a range left allocated costs disk space, never correctness. */
	if (z->wb && z->wb->punch)
		(void)fallocate(z->wb->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)(offset * z->page_size), (off_t)z->page_size);
}

/* ---- One LRU step ---- */

enum { STEP_EMPTY, STEP_WRITTEN, STEP_ROTATED, STEP_SKIPPED, STEP_FAILED };

/* Shard locked, n an entry: write it back.  0, or -errno with the entry rotated. */
static int write_entry_locked(struct zs_zswap *z, struct zw_stream *s, struct zw_shard *sh,
			      struct zw_node *n)
{
	int rc;

	if (zswap_entry_read(z, s, n, s->page)) {
		sc_add(sh, SC_DECOMP_FAIL, 1);
		rc = -EIO;
	} else {
		rc = file_io(z, 0, s->page, n->offset);
	}
	if (rc) {
		sc_add(sh, SC_RECLAIM_FAIL, 1);
		zswap_lru_rotate(z, sh, n);
		return rc;
	}
	g_add(&z->groups[n->group].zswpwb, 1);
	zswap_entry_release(z, sh, n, 0);
	n->kind = K_DISK;
	sc_add(sh, SC_DISK, 1);
	sc_add(sh, SC_WB, 1);
	return 0;
}

static int step_locked(struct zs_zswap *z, struct zw_stream *s, struct zw_shard *sh,
		       struct zw_node *n)
{
	if (!atomic_load_explicit(&z->groups[n->group].writeback, memory_order_relaxed)) {
		zswap_lru_rotate(z, sh, n);
		return STEP_SKIPPED;
	}
	if (n->flags & NF_REFERENCED) {
		n->flags &= (uint8_t)~NF_REFERENCED;
		zswap_lru_rotate(z, sh, n);
		return STEP_ROTATED;
	}
	return write_entry_locked(z, s, sh, n) ? STEP_FAILED : STEP_WRITTEN;
}

/* The shard whose coldest entry is the coldest of all (tail_seq is read unlocked: a hint). */
static struct zw_shard *coldest_shard(struct zs_zswap *z)
{
	uint64_t best = UINT64_MAX;
	struct zw_shard *bs = NULL;

	for (unsigned i = 0; i < ZW_NSHARDS; i++) {
		uint64_t t = atomic_load_explicit(&z->shards[i].tail_seq, memory_order_relaxed);

		if (t < best) {
			best = t;
			bs = &z->shards[i];
		}
	}
	return bs;
}

static int step(struct zs_zswap *z)
{
	struct zw_shard *sh = coldest_shard(z);
	struct zw_stream *s;
	struct zw_node *n;
	int r;

	if (!sh)
		return STEP_EMPTY;
	s = zswap_stream_get(z);
	mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lru_tail(sh, -1);
	/* Emptied meanwhile by another thread: a step that did nothing. */
	r = n ? step_locked(z, s, sh, n) : STEP_ROTATED;
	mutex_unlock_ranked(&sh->lock);
	zswap_stream_put(s);
	return r;
}

static uint64_t entries(struct zs_zswap *z)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < ZW_NSHARDS; i++)
		n += atomic_load_explicit(&z->shards[i].cnt[SC_STORED], memory_order_relaxed);
	return n;
}

long zs_zswap_writeback(struct zs_zswap *z, size_t nr)
{
	struct zs_sigguard g;
	uint64_t budget;
	long written = 0;

	if (!z)
		return -EINVAL;
	if (!z->wb)
		return -EOPNOTSUPP;
	if (nr > (size_t)LONG_MAX)
		nr = (size_t)LONG_MAX;
	signals_block(&g);
	/* Twice the entries: each may need one visit to lose its referenced bit. */
	budget = 2 * entries(z);
	while ((size_t)written < nr && budget) {
		int r = step(z);

		budget--;
		if (r == STEP_EMPTY)
			break;
		written += r == STEP_WRITTEN;
	}
	signals_restore(&g);
	return written;
}

long zs_zswap_shrink(struct zs_zswap *z, unsigned long nr_to_scan)
{
	struct zs_sigguard g;
	long written = 0;

	if (!z)
		return -EINVAL;
	if (!z->wb)
		return -EOPNOTSUPP;
	if (!z->shrinker)
		return 0;
	signals_block(&g);
	for (unsigned long i = 0; i < nr_to_scan; i++) {
		int r = step(z);

		if (r == STEP_EMPTY)
			break;
		written += r == STEP_WRITTEN;
	}
	signals_restore(&g);
	return written;
}

unsigned long zs_zswap_shrink_count(struct zs_zswap *z)
{
	uint64_t freeable = 0, stored;

	if (!z || !z->wb || !z->shrinker)
		return 0;
	for (unsigned g = 0; g < ZS_ZSWAP_MAX_GROUPS; g++)
		if (atomic_load_explicit(&z->groups[g].writeback, memory_order_relaxed))
			freeable += atomic_load_explicit(&z->groups[g].pages, memory_order_relaxed);
	stored = entries(z);
	if (!stored || !freeable)
		return 0;
	/* Writing back an entry frees its share of a pool page, not a page. */
	return (unsigned long)((unsigned __int128)freeable * zswap_pool_pages(z) / stored);
}

int zswap_group_shrink(struct zs_zswap *z, unsigned group)
{
	uint64_t best = UINT64_MAX;
	struct zw_shard *bs = NULL;
	struct zw_stream *s;
	struct zw_node *n;
	int rc;

	if (!z->wb || !atomic_load_explicit(&z->groups[group].writeback, memory_order_relaxed))
		return -ENOENT;
	for (unsigned i = 0; i < ZW_NSHARDS; i++) {
		struct zw_shard *sh = &z->shards[i];

		mutex_lock_ranked(&sh->lock, ZS_LOCK_ZSWAP_SHARD);
		n = zswap_lru_tail(sh, (int)group);
		if (n && n->seq < best) {
			best = n->seq;
			bs = sh;
		}
		mutex_unlock_ranked(&sh->lock);
	}
	if (!bs)
		return -ENOENT;
	s = zswap_stream_get(z);
	mutex_lock_ranked(&bs->lock, ZS_LOCK_ZSWAP_SHARD);
	n = zswap_lru_tail(bs, (int)group);
	if (!n) {
		rc = -EAGAIN;
	} else if (n->flags & NF_REFERENCED) {
		/* The kernel's shrink_memcg walks one entry: a second chance is not a page freed. */
		n->flags &= (uint8_t)~NF_REFERENCED;
		zswap_lru_rotate(z, bs, n);
		rc = -EAGAIN;
	} else {
		rc = write_entry_locked(z, s, bs, n);
	}
	mutex_unlock_ranked(&bs->lock);
	zswap_stream_put(s);
	return rc;
}

/* ---- The shrink worker ---- */

static void worker_pass(struct zs_zswap *z)
{
	unsigned failures = 0;

	fork_gate_enter(&fork_gate);
	while (zswap_pool_pages(z) > atomic_load_explicit(&z->accept_pages, memory_order_relaxed)) {
		int r = step(z);

		if (unlikely(fork_gate_closing(&fork_gate)))
			fork_gate_yield(&fork_gate);

		if (r == STEP_EMPTY)
			break;
		/* Rotations, skips and failures alike: the kernel's worker gives up after 16. */
		if (r != STEP_WRITTEN && ++failures == ZS_ZSWAP_WORKER_RETRIES)
			break;
	}
	fork_gate_leave(&fork_gate);
	ev_inc(z, EV_WORKER_RUNS);
}

static void *worker_main(void *arg)
{
	struct zswap_worker *w = arg;

	signals_blocked_thread();
	mutex_lock_ranked(&w->lock, ZS_LOCK_ZSWAP_WORKER);
	for (;;) {
		while (!atomic_load_explicit(&w->queued, memory_order_relaxed) && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->stop)
			break;
		atomic_store_explicit(&w->queued, 0, memory_order_relaxed);
		w->running = 1;
		mutex_unlock_ranked(&w->lock);
		worker_pass(w->z);
		mutex_lock_ranked(&w->lock, ZS_LOCK_ZSWAP_WORKER);
		w->running = 0;
		pthread_cond_broadcast(&w->idle);
	}
	w->running = 0;
	pthread_cond_broadcast(&w->idle);
	mutex_unlock_ranked(&w->lock);
	return NULL;
}

/* Started with every signal blocked: no application handler ever runs on it. */
static int worker_thread(struct zswap_worker *w)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&w->th, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

static struct zswap_worker *worker_start(struct zs_zswap *z)
{
	struct zswap_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->z = z;
	if (pthread_mutex_init(&w->lock, NULL))
		goto fail_w;
	if (pthread_cond_init(&w->wake, NULL))
		goto fail_m;
	if (pthread_cond_init(&w->idle, NULL))
		goto fail_c;
	/* Before the worker exists: a fork must find its gate (common/fork.h). */
	fork_handlers(ZS_FORK_ZSWAP, atfork_prepare, atfork_parent, atfork_child);
	if (worker_thread(w))
		goto fail_i;
	/* Callers hold no lock the worker takes, so waiting here behind a fork is safe. */
	fork_gate_lock(&fork_gate);
	w->fork_next = fork_head;
	if (fork_head)
		fork_head->fork_prev = w;
	fork_head = w;
	fork_gate_unlock(&fork_gate);
	return w;
fail_i:
	pthread_cond_destroy(&w->idle);
fail_c:
	pthread_cond_destroy(&w->wake);
fail_m:
	pthread_mutex_destroy(&w->lock);
fail_w:
	free(w);
	return NULL;
}

void zswap_worker_queue(struct zs_zswap *z)
{
	struct zswap_worker *w;

	if (!z->wb)
		return;
	w = atomic_load_explicit(&z->worker, memory_order_acquire);
	if (!w) {
		/* Started lazily, once: a zswap that never fills never runs a thread. */
		mutex_lock_ranked(&z->worker_lock, ZS_LOCK_ZSWAP_WORKER_START);
		w = atomic_load_explicit(&z->worker, memory_order_relaxed);
		if (!w) {
			w = worker_start(z);
			atomic_store_explicit(&z->worker, w, memory_order_release);
		}
		mutex_unlock_ranked(&z->worker_lock);
		if (!w)
			return;
	}
	if (unlikely(atomic_load_explicit(&w->forked, memory_order_acquire))) {
		/* A forked child: its first pass starts its own thread (the parent's did not come). */
		mutex_lock_ranked(&z->worker_lock, ZS_LOCK_ZSWAP_WORKER_START);
		if (atomic_load_explicit(&w->forked, memory_order_relaxed) && !worker_thread(w))
			atomic_store_explicit(&w->forked, 0, memory_order_release);
		mutex_unlock_ranked(&z->worker_lock);
		if (atomic_load_explicit(&w->forked, memory_order_acquire))
			return;
	}
	/* Already queued: one pending pass covers it, as queue_work coalesces. */
	if (atomic_load_explicit(&w->queued, memory_order_relaxed))
		return;
	mutex_lock_ranked(&w->lock, ZS_LOCK_ZSWAP_WORKER);
	if (!atomic_load_explicit(&w->queued, memory_order_relaxed)) {
		atomic_store_explicit(&w->queued, 1, memory_order_relaxed);
		pthread_cond_signal(&w->wake);
	}
	mutex_unlock_ranked(&w->lock);
}

static void zswap_worker_flush(struct zs_zswap *z)
{
	struct zswap_worker *w;

	w = atomic_load_explicit(&z->worker, memory_order_acquire);
	if (!w)
		return;
	mutex_lock_ranked(&w->lock, ZS_LOCK_ZSWAP_WORKER);
	while (atomic_load_explicit(&w->queued, memory_order_relaxed) || w->running)
		pthread_cond_wait(&w->idle, &w->lock);
	mutex_unlock_ranked(&w->lock);
}

/* Here, with the worker it waits for: the pool limit and stats (stats.c) stay below writeback. */
void zs_zswap_flush(struct zs_zswap *z)
{
	if (!z)
		return;
	zswap_worker_flush(z);
	if (z->deferred)
		zs_backend_flush(z->b);
}

void zswap_worker_stop(struct zs_zswap *z)
{
	struct zswap_worker *w = atomic_load_explicit(&z->worker, memory_order_acquire);

	if (!w)
		return;
	if (!atomic_load_explicit(&w->forked, memory_order_relaxed)) {
		mutex_lock_ranked(&w->lock, ZS_LOCK_ZSWAP_WORKER);
		w->stop = 1;
		pthread_cond_signal(&w->wake);
		mutex_unlock_ranked(&w->lock);
		pthread_join(w->th, NULL);
	}
	fork_gate_lock(&fork_gate);
	if (w->fork_prev)
		w->fork_prev->fork_next = w->fork_next;
	else
		fork_head = w->fork_next;
	if (w->fork_next)
		w->fork_next->fork_prev = w->fork_prev;
	fork_gate_unlock(&fork_gate);
	pthread_cond_destroy(&w->idle);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
	atomic_store_explicit(&z->worker, NULL, memory_order_relaxed);
}

/* ---- Fork (common/fork.h) ---- */

static void atfork_prepare(void)
{
	fork_gate_close(&fork_gate);
}

static void atfork_parent(void)
{
	fork_gate_open_parent(&fork_gate);
}

static void atfork_child(void)
{
	for (struct zswap_worker *w = fork_head; w; w = w->fork_next) {
		/* Outside the gate the thread sleeps on these, or holds the mutex: make them anew. */
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->wake, NULL);
		pthread_cond_init(&w->idle, NULL);
		/* A pass queued or running in the parent is not run here; the next full store queues one. */
		atomic_store_explicit(&w->queued, 0, memory_order_relaxed);
		w->running = 0;
		atomic_store_explicit(&w->forked, 1, memory_order_relaxed);
	}
	fork_gate_open_child(&fork_gate);
}
