/*
 * The cache under threads: four threads insert, replace, look up (copy and
 * callback) and erase on one shared set of keys while a fifth enumerates,
 * once without a capacity and once with one small enough that evictions and
 * compaction steps (from calls and the idle thread) run all the time.  Every
 * value names its key and version in its first bytes and the rest is
 * generated from them, so each read is checked byte for byte: a value of
 * another key, a torn value or a moved object read mid-move fails.
 * Seeded (printed; ZS_SEED reruns).  CI runs it under TSan too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blob_gen.h"
#include "testutil.h"
#include "zs/cache.h"

#include "sanitizer.h"
#define SLOW TU_SANITIZED

enum { THREADS = 4, KEYS = 1500 };
static int ops_per_thread = SLOW ? 6000 : 40000;
static uint64_t seed;
static atomic_int bad, stop_enum;
static atomic_long enum_keys;

static size_t keyname(char *k, unsigned id)
{
	return (size_t)snprintf(k, 32, "k%u/%s", id, id % 2 ? "s" : "a-longer-key-name");
}

/* The value of (id, ver): 8 bytes naming them, then a record generated from them. */
static size_t make_val(unsigned char *v, unsigned id, uint32_t ver)
{
	uint64_t tag = (uint64_t)id << 32 | ver;
	size_t len = 8 + (size_t)((tag * 0x9e3779b97f4a7c15ULL) >> 52) % 3000;
	memcpy(v, &tag, 8);
	gen_record(v + 8, len - 8, tag);
	return len;
}

static int val_ok(const unsigned char *d, size_t len, unsigned id)
{
	if (len < 8)
		return 0;
	uint64_t tag;
	memcpy(&tag, d, 8);
	if ((unsigned)(tag >> 32) != id)
		return 0;
	unsigned char want[3100];
	size_t wl = make_val(want, id, (uint32_t)tag);
	return wl == len && memcmp(want, d, len) == 0;
}

struct cbarg {
	unsigned id;
	int ok;
};

static int cb_check(const void *d, size_t len, void *arg)
{
	struct cbarg *a = arg;
	a->ok = val_ok(d, len, a->id);
	return 1;
}

struct targ {
	struct zs_cache *c;
	int t;
};

static void *worker(void *p)
{
	struct targ *a = p;
	uint64_t rs = seed + (uint64_t)a->t * 7919;
	unsigned char v[3100], out[3100];
	char k[32];
	for (int i = 0; i < ops_per_thread; i++) {
		uint64_t r = tu_rand(&rs);
		unsigned id = (unsigned)(r % KEYS);
		size_t kl = keyname(k, id);
		switch ((r >> 16) % 8) {
		case 0:
		case 1:
		case 2: {
			size_t len = make_val(v, id, (uint32_t)(r >> 32));
			int rc = zs_cache_insert(a->c, k, kl, v, len);
			if (rc) {
				if (atomic_fetch_add(&bad, 1) < 5)
					fprintf(stderr, "insert: %d\n", rc);
			}
			break;
		}
		case 3: {
			int rc = zs_cache_erase(a->c, k, kl);
			if (rc && rc != -ENOENT)
				atomic_fetch_add(&bad, 1);
			break;
		}
		case 4: {
			struct cbarg ca = { id, 0 };
			int rc = zs_cache_lookup_cb(a->c, k, kl, cb_check, &ca);
			if (rc == 1 ? !ca.ok : rc != -ENOENT) {
				if (atomic_fetch_add(&bad, 1) < 5)
					fprintf(stderr, "lookup_cb %u: rc %d ok %d\n", id, rc, ca.ok);
			}
			break;
		}
		default: {
			long n = zs_cache_lookup(a->c, k, kl, out, sizeof(out));
			if (n >= 0 ? !val_ok(out, (size_t)n, id) : n != -ENOENT) {
				if (atomic_fetch_add(&bad, 1) < 5)
					fprintf(stderr, "lookup %u: %ld\n", id, n);
			}
		}
		}
	}
	return NULL;
}

static void *enumerator(void *p)
{
	struct zs_cache *c = p;
	char k[64];
	while (!atomic_load(&stop_enum)) {
		uint64_t cur = 0;
		size_t kl;
		int rc;
		while ((rc = zs_cache_next(c, &cur, k, sizeof(k) - 1, &kl)) == 0) {
			unsigned id;
			k[kl] = 0;
			if (sscanf(k, "k%u/", &id) != 1 || id >= KEYS)
				atomic_fetch_add(&bad, 1);
			atomic_fetch_add(&enum_keys, 1);
		}
		if (rc != -ENOENT)
			atomic_fetch_add(&bad, 1);
	}
	return NULL;
}

static void run(size_t capacity)
{
	struct zs_cache_config cfg;
	zs_cache_config_init(&cfg);
	cfg.blob.mem_limit = capacity;
	cfg.blob.compact_idle_ms = 20;
	cfg.blob.compact_min_bytes = 64 * 1024;
	cfg.shards = 4;
	struct zs_cache *c = NULL;
	REQUIRE(zs_cache_create(&cfg, &c, NULL, 0) == 0);
	atomic_store(&bad, 0);
	atomic_store(&stop_enum, 0);
	atomic_store(&enum_keys, 0);
	pthread_t th[THREADS], en;
	struct targ ta[THREADS];
	for (int t = 0; t < THREADS; t++) {
		ta[t] = (struct targ){ c, t };
		REQUIRE(pthread_create(&th[t], NULL, worker, &ta[t]) == 0);
	}
	REQUIRE(pthread_create(&en, NULL, enumerator, c) == 0);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	atomic_store(&stop_enum, 1);
	pthread_join(en, NULL);
	struct zs_cache_stats st;
	zs_cache_stats(c, &st, sizeof(st));
	/* Quiet now: every entry left reads back as its key's, and the counts agree. */
	char k[32];
	unsigned char out[3100];
	uint64_t found = 0;
	int badleft = 0;
	for (unsigned id = 0; id < KEYS; id++) {
		size_t kl = keyname(k, id);
		long n = zs_cache_lookup(c, k, kl, out, sizeof(out));
		if (n >= 0) {
			found++;
			badleft += !val_ok(out, (size_t)n, id);
		}
	}
	printf("capacity %zu: %llu entries, %llu hits, %llu misses, %llu evictions, %llu compaction steps, "
	       "%ld keys enumerated, held %llu B\n",
	       capacity, (unsigned long long)st.entries, (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)st.evictions,
	       (unsigned long long)st.blob.compact_steps, atomic_load(&enum_keys),
	       (unsigned long long)(st.mem_bytes - st.blob.cached_bytes));
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(badleft, 0);
	CHECK_EQ(found, st.entries);
	CHECK_EQ(st.blob.objects, st.entries);
	CHECK(st.hits > 0);
	if (capacity) {
		CHECK(st.evictions > 0);
		/* One zspage per storing thread past the capacity at most. */
		CHECK(st.mem_bytes - st.blob.cached_bytes <= capacity + THREADS * 32768);
	}
	zs_cache_destroy(c);
}

int main(void)
{
	seed = tu_seed("test_mt_cache");
	run(0);
	run(2560 << 10); /* a fixed part of about 2 MiB (contexts, tables) and room for a few hundred entries: evictions all the time */
	return tu_done();
}
