/*
 * Signal handlers that read region memory must not deadlock, for calls
 * made directly on a region's store: a thread
 * that compacts, writes back or recompresses zs_region_store() gets signals
 * whose handler reads stored region pages, while a pager keeps pages stored
 * and releases some.  Before zs_compact kept signals blocked through its
 * handle and page trims (common/sigblock.h), the handler ran on the
 * compactor with the handle lock held, and the fault handler's discard
 * waited for it forever.  A watchdog turns a hang into a failure.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "sanitizer.h"
#include "testutil.h"
#include "zs/region.h"

#define PG 4096
#define NP 512
static struct zs_region *r;
static unsigned char *a;
static atomic_int stop;
static atomic_ulong calls, hits, rounds;
static uint64_t seed;

/*
 * The pager rewrites pages while the handler reads them, on purpose: only
 * byte 0 is checked, which only ever holds 0 or i + 1.  TSan cannot know the
 * byte is never torn, so the read is not instrumented.
 */
#if TU_TSAN
__attribute__((no_sanitize("thread")))
#endif
static unsigned char first_byte(size_t i)
{
	return *(volatile unsigned char *)(a + i * PG);
}

/* Reads a page and checks the byte it must hold (the pager writes i + 1, or it was released). */
static void on_sig(int s)
{
	(void)s;
	int saved = errno;
	unsigned i = (unsigned)(atomic_load(&hits) * 2654435761u) % NP;
	unsigned char v = first_byte(i);
	if (v != 0 && v != (unsigned char)(i + 1))
		_exit(3);
	atomic_fetch_add(&hits, 1);
	errno = saved;
}

static void *store_caller(void *arg)
{
	(void)arg;
	struct zs_zram *z = zs_region_store(r);
	struct zs_zram_wb_result res;
	while (!atomic_load(&stop)) {
		switch (atomic_load(&calls) % 3) {
		case 0: zs_zram_compact(z); break;
		case 1: zs_zram_writeback(z, ZS_ZRAM_WB_HUGE, 4, &res); break;
		default: zs_zram_flush(z); break;
		}
		atomic_fetch_add(&calls, 1);
	}
	return NULL;
}

static void *pager(void *arg)
{
	(void)arg;
	uint64_t s = seed;
	while (!atomic_load(&stop)) {
		for (unsigned i = 0; i < NP; i++) {
			memset(a + (size_t)i * PG + 1, (int)(i + 1), 64 + tu_rand(&s) % 3000);
			if (i % 7 == 0)   /* some incompressible: huge, written back */
				for (unsigned k = 8; k < PG; k += 8)
					*(uint64_t *)(a + (size_t)i * PG + k) = tu_rand(&s) | 1;
			a[(size_t)i * PG] = (unsigned char)(i + 1);
		}
		zs_region_pageout(r, a, NP * PG);
		size_t p = tu_rand(&s) % NP;
		zs_region_release(r, a + p * PG, PG);
		atomic_fetch_add(&rounds, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char why[512], path[] = "/tmp/zs_sig_storeXXXXXX";
	double secs = argc > 1 ? atof(argv[1]) : 3;
	if (!zs_region_available(why, sizeof why)) {
		printf("SKIP: userfaultfd not available: %s\n", why);
		return 77;
	}
	seed = tu_seed("test_mt_region_sig_store");
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	struct zs_region_config c;
	zs_region_config_init(&c);
	c.size = NP * PG;
	c.store.backing_path = path;
	REQUIRE(zs_region_create(&c, &r, why, sizeof why) == 0);
	a = zs_region_addr(r);
	CHECK_EQ(zs_zram_block_signals(NULL, 1), -EINVAL);
	CHECK_EQ(zs_zram_block_signals(zs_region_store(r), 2), -EINVAL);

	struct sigaction sa = { .sa_handler = on_sig };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t1, t2;
	pthread_create(&t1, NULL, store_caller, NULL);
	pthread_create(&t2, NULL, pager, NULL);
	unsigned long last = 0;
	int stuck = 0;
	for (int ms = 0; ms < secs * 1000; ms++) {
		pthread_kill(t1, SIGUSR1);
		usleep(1000);
		if (ms % 2000 == 1999) {
			unsigned long now = atomic_load(&calls) + atomic_load(&rounds);
			if (now == last) {
				stuck = 1;
				break;
			}
			last = now;
		}
	}
	if (stuck) {
		printf("HANG: no store call or pager round for 2 s (calls %lu, rounds %lu, handler "
		       "reads %lu)\n", (unsigned long)calls, (unsigned long)rounds,
		       (unsigned long)hits);
		fflush(stdout);
		_exit(1);
	}
	atomic_store(&stop, 1);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	printf("store calls %lu, pager rounds %lu, handler reads %lu\n", (unsigned long)calls,
	       (unsigned long)rounds, (unsigned long)hits);
	CHECK(atomic_load(&hits) > 0);
	CHECK(atomic_load(&rounds) > 0);
	zs_region_destroy(r);
	unlink(path);
	return tu_done();
}
