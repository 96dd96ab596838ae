/*
 * Large-folio groups under concurrency (TSan in CI): two writers overwrite
 * alternate slots of the same 64 KiB groups one slot at a time (each a
 * read-modify-write of the whole group), a third writes whole aligned groups
 * of its own region, and a reader reads any slot, checking each page is
 * either zeros or a valid page of that slot; at the end every slot holds its
 * last writer's page.  A lost update (one writer's RMW reverting the other's
 * slot) or a torn group shows up as a mismatch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "zs/zram.h"

#define PS 4096
#define G 16
#define SHARED 128          /* slots [0, SHARED): writers 0 and 1, alternate slots */
#define OWN 64              /* slots [SHARED, SHARED + OWN): writer 2, whole groups */
#define N (SHARED + OWN)
#define ROUNDS 12

static struct zs_zram *z;
static _Atomic int stop;
static _Atomic long bad;

static void make(unsigned char *p, unsigned slot, unsigned round)
{
	memset(p, (int)((slot * 7 + round) & 0xff), PS);
	memcpy(p, &slot, sizeof(slot));
	memcpy(p + 8, &round, sizeof(round));
	p[PS - 1] ^= 0x5a;
}

static int plausible(const unsigned char *p, unsigned slot)
{
	unsigned s, r;
	unsigned char want[PS];
	static const unsigned char zero[PS];
	if (!memcmp(p, zero, PS))
		return 1;
	memcpy(&s, p, sizeof(s));
	memcpy(&r, p + 8, sizeof(r));
	if (s != slot || r >= ROUNDS)
		return 0;
	make(want, slot, r);
	return !memcmp(p, want, PS);
}

static void *slot_writer(void *arg)
{
	unsigned id = (unsigned)(long)arg;
	unsigned char p[PS];
	for (unsigned r = 0; r < ROUNDS; r++)
		for (unsigned i = id; i < SHARED; i += 2) {
			make(p, i, r);
			if (zs_zram_write(z, i, p))
				atomic_fetch_add(&bad, 1);
		}
	return NULL;
}

static void *group_writer(void *arg)
{
	(void)arg;
	static unsigned char buf[G * PS];
	for (unsigned r = 0; r < ROUNDS; r++)
		for (unsigned g = SHARED; g < N; g += G) {
			for (unsigned k = 0; k < G; k++)
				make(buf + (size_t)k * PS, g + k, r);
			if (zs_zram_write_range(z, g, G, buf))
				atomic_fetch_add(&bad, 1);
		}
	return NULL;
}

static void *reader(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg;
	unsigned char p[PS];
	while (!atomic_load(&stop)) {
		unsigned i = (unsigned)(tu_rand(&s) % N);
		if (zs_zram_read(z, i, p, PS) || !plausible(p, i))
			atomic_fetch_add(&bad, 1);
	}
	return NULL;
}

int main(void)
{
	uint64_t seed = tu_seed("test_mt_zram_group");
	struct zs_zram_config cfg;
	zs_zram_config_init(&cfg);
	cfg.disksize = (uint64_t)N * PS;
	cfg.group_pages = G;
	cfg.streams = 2;
	REQUIRE(zs_zram_create(&cfg, &z, NULL, 0) == 0);

	pthread_t w[3], rd;
	pthread_create(&rd, NULL, reader, (void *)(uintptr_t)seed);
	pthread_create(&w[0], NULL, slot_writer, (void *)0L);
	pthread_create(&w[1], NULL, slot_writer, (void *)1L);
	pthread_create(&w[2], NULL, group_writer, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(w[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(rd, NULL);
	CHECK_EQ(atomic_load(&bad), 0);

	unsigned char p[PS], want[PS];
	int lost = 0;
	for (unsigned i = 0; i < N; i++) {
		make(want, i, ROUNDS - 1);
		if (zs_zram_read(z, i, p, PS) || memcmp(p, want, PS))
			lost++;
	}
	CHECK_EQ(lost, 0);
	zs_zram_destroy(z);
	return tu_done();
}
