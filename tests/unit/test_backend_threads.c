/*
 * Backends used only from short-lived threads, the way a server's worker
 * threads come and go: every kind must survive objects stored, read and
 * freed by threads that then exit, round after round.
 *
 * Why a test of its own: the "malloc" kind calls glibc's __libc_malloc while
 * jemalloc (linked into this executable) is the process malloc, so nothing
 * has initialised ptmalloc when the workers first store objects.  Two
 * threads whose first __libc_malloc coincide both ran glibc's one-time init
 * and shared main_arena on one count, and the second to exit aborted
 * ("a->attached_threads > 0"); libzs now initialises ptmalloc from a
 * constructor.  Each kind therefore runs first in fresh forked processes
 * whose two threads spin until both are on a CPU and then allocate at once:
 * without the constructor 30 of 40 such processes aborted.  Not a test_mt_*
 * test: TSan cannot see into __libc_malloc.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "zs/backend.h"
#include "must.h"

enum { THREADS = 2, ROUNDS = 20, OBJS = 64, PROCS = 40 };

struct worker {
	struct zs_backend *b;
	atomic_int *go;
	uint64_t seed;
	int bad;
	int keep;                /* leave the odd objects live, for the caller to count and free */
	unsigned long kept[OBJS];
	size_t nkept;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned long h[OBJS];
	size_t len[OBJS];
	unsigned char buf[4096], out[4096];
	uint64_t s = w->seed;

	/* All threads make their first allocation at once, spinning so that
	 * they are all on a CPU when the last one arrives. */
	atomic_fetch_add(w->go, 1);
	while (atomic_load(w->go) < THREADS)
		;
	for (int i = 0; i < OBJS; i++) {
		len[i] = 1 + tu_rand(&s) % 3000;
		h[i] = zs_backend_malloc(w->b, len[i]);
		if (ZS_IS_ERR(h[i])) {
			w->bad++;
			h[i] = 0;
			continue;
		}
		memset(buf, (int)(i * 7 + (int)w->seed), len[i]);
		if (zs_backend_write(w->b, h[i], buf, len[i]))
			w->bad++;
	}
	for (int i = 0; i < OBJS; i++) {
		if (!h[i])
			continue;
		memset(buf, (int)(i * 7 + (int)w->seed), len[i]);
		void *m = zs_backend_read_begin(w->b, h[i], len[i], out);
		if (!m || memcmp(m, buf, len[i]))
			w->bad++;
		if (m)
			zs_backend_read_end(w->b, h[i], len[i], m);
		if (w->keep && i % 2)
			w->kept[w->nkept++] = h[i];
		else if (zs_backend_free(w->b, h[i]))
			w->bad++;
	}
	return NULL;
}

static int run_kind(const char *kind, uint64_t *seed)
{
	struct zs_backend_config c;
	zs_backend_config_init(&c);
	c.kind = kind;
	c.page_size = 4096;
	struct zs_backend *b = must_backend_create(&c);
	REQUIRE(b);
	int bad = 0;
	for (int r = 0; r < ROUNDS; r++) {
		pthread_t t[THREADS];
		struct worker w[THREADS];
		atomic_int go = 0;
		/*
		 * Every other round the workers leave half their objects live:
		 * the live count must add up across the threads that counted them
		 * (more threads than the malloc kinds' per-thread count shards,
		 * by the last rounds) and come back to 0 when this thread frees
		 * them.
		 */
		int keep = r % 2;
		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){ b, &go, tu_rand(seed), 0, keep, { 0 }, 0 };
			REQUIRE(pthread_create(&t[i], NULL, work, &w[i]) == 0);
		}
		size_t live = 0;
		for (int i = 0; i < THREADS; i++) {
			pthread_join(t[i], NULL);
			bad += w[i].bad;
			live += w[i].nkept;
		}
		struct zs_backend_stats st;
		zs_backend_stats(b, &st, sizeof(st));
		if (st.objects != live) {
			printf("  %s round %d: %lu live objects counted, %zu live\n", kind, r,
			       st.objects, live);
			bad++;
		}
		for (int i = 0; i < THREADS; i++)
			for (size_t k = 0; k < w[i].nkept; k++)
				bad += zs_backend_free(b, w[i].kept[k]) != 0;
		zs_backend_stats(b, &st, sizeof(st));
		if (st.objects != 0) {
			printf("  %s round %d: %lu live objects counted after freeing all\n", kind, r,
			       st.objects);
			bad++;
		}
	}
	zs_backend_destroy(b);
	return bad;
}

int main(void)
{
	uint64_t seed = tu_seed("test_backend_threads");
	const char *const *kinds = zs_backend_kinds();

	/*
	 * Each kind first in fresh processes, where no allocator has run yet
	 * from any thread (the glibc case above happens once per process).
	 */
	for (int k = 0; kinds[k]; k++) {
		int crashed = 0, bad = 0;
		for (int n = 0; n < PROCS; n++) {
			uint64_t s = tu_rand(&seed);
			fflush(stdout);
			pid_t pid = fork();
			REQUIRE(pid >= 0);
			if (pid == 0)
				_exit(run_kind(kinds[k], &s) ? 1 : 0);
			int st;
			REQUIRE(waitpid(pid, &st, 0) == pid);
			crashed += !WIFEXITED(st);
			bad += WIFEXITED(st) && WEXITSTATUS(st);
		}
		printf("  %-9s %d fresh processes x %d rounds x %d threads: %d crashed, %d bad\n",
		       kinds[k], PROCS, ROUNDS, THREADS, crashed, bad);
		CHECK_EQ(crashed, 0);
		CHECK_EQ(bad, 0);
	}
	for (int k = 0; kinds[k]; k++)
		CHECK_EQ(run_kind(kinds[k], &seed), 0);
	return tu_done();
}
