/*
 * Where a region's handler threads run (region.c, spread_cpu): spinning
 * handlers, at least one per CPU the process may use, are each bound to one
 * CPU, round robin, so a fault is read on its thread's CPU; one handler,
 * fewer handlers than CPUs, poll-only handlers and ZS_REGION_SPREAD=0 are
 * left to the scheduler.  The threads are found in /proc/self/task: a handler is a thread that did not
 * exist before zs_region_create.  Faults still work with either placement,
 * from as many threads as handlers.  Exit 77 without userfaultfd or with
 * fewer than two usable CPUs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zs/region.h"

#define PG 4096
#define NP 256
#define MAXT 256

/* Thread ids of this process now, sorted; their count. */
static int tids(int *out)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	REQUIRE(d);
	while ((e = readdir(d)) && n < MAXT)
		if (e->d_name[0] != '.')
			out[n++] = atoi(e->d_name);
	closedir(d);
	return n;
}

static int known(const int *t, int n, int id)
{
	for (int i = 0; i < n; i++)
		if (t[i] == id)
			return 1;
	return 0;
}

/*
 * For each thread created since `before`: its only CPU in cpu[], or -1 when
 * it may run on more than one.  Returns how many new threads there are.
 */
static int new_threads(const int *before, int nb, int *cpu)
{
	int now[MAXT], n = tids(now), k = 0;
	for (int i = 0; i < n; i++) {
		if (known(before, nb, now[i]))
			continue;
		cpu_set_t s;
		CPU_ZERO(&s);
		REQUIRE(sched_getaffinity(now[i], sizeof(s), &s) == 0);
		int one = -1;
		if (CPU_COUNT(&s) == 1)
			for (int c = 0; c < CPU_SETSIZE; c++)
				if (CPU_ISSET(c, &s))
					one = c;
		cpu[k++] = one;
	}
	return k;
}

struct toucher {
	unsigned char *a;
	size_t first, n;
	size_t wrong;
};

static void *touch(void *p)
{
	struct toucher *t = p;
	for (size_t i = t->first; i < t->first + t->n; i++)
		t->wrong += t->a[i * PG + 7] != (unsigned char)(i * 13 + 1);
	return NULL;
}

/* A region with `handlers` handlers and spin `spin`; how many of its new threads are bound. */
static int bound_handlers(unsigned handlers, unsigned spin, int expect_distinct)
{
	char err[512];
	int before[MAXT], nb = tids(before), cpu[MAXT];
	struct zs_region_config c;
	zs_region_config_init(&c);
	c.size = NP * PG;
	c.handler_threads = handlers;
	c.spin_us = spin;
	c.fault_around = 1;
	struct zs_region *r = NULL;
	REQUIRE(zs_region_create(&c, &r, err, sizeof err) == 0);
	int n = new_threads(before, nb, cpu), bound = 0;
	CHECK(n >= (int)handlers);   /* the handlers, and any thread the store starts */
	for (int i = 0; i < n; i++) {
		if (cpu[i] < 0)
			continue;
		bound++;
		for (int j = 0; j < i && expect_distinct; j++)
			CHECK(cpu[j] != cpu[i]);   /* one handler per CPU while there are CPUs */
	}

	/* faults from as many threads as handlers, each on its own pages */
	unsigned char *a = zs_region_addr(r);
	for (size_t i = 0; i < NP; i++) {
		memset(a + i * PG, 0, PG);
		a[i * PG + 7] = (unsigned char)(i * 13 + 1);
	}
	REQUIRE(zs_region_pageout(r, a, NP * PG) == NP);
	pthread_t th[8];
	struct toucher t[8];
	unsigned nt = handlers < 8 ? handlers : 8;
	for (unsigned i = 0; i < nt; i++) {
		t[i] = (struct toucher){ a, i * (NP / nt), NP / nt, 0 };
		REQUIRE(pthread_create(&th[i], NULL, touch, &t[i]) == 0);
	}
	for (unsigned i = 0; i < nt; i++) {
		pthread_join(th[i], NULL);
		CHECK(t[i].wrong == 0);
	}
	zs_region_destroy(r);
	return bound;
}

int main(void)
{
	char err[512];
	if (!zs_region_available(err, sizeof err)) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	cpu_set_t all;
	REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
	int ncpu = CPU_COUNT(&all);
	if (ncpu < 2) {
		printf("SKIP: one usable CPU, nothing to spread over\n");
		return 77;
	}
	unsetenv("ZS_REGION_SPREAD");
	/* two handlers: bound where that is one per CPU (2 CPUs), else left alone */
	int two = bound_handlers(2, 0, 1);
	CHECK_EQ(two, ncpu <= 2 ? 2 : 0);
	/* one per CPU (up to the 64 allowed): every one bound, each to its own CPU */
	if (ncpu <= 64)
		CHECK_EQ(bound_handlers((unsigned)ncpu, 0, 1), ncpu);
	/* more handlers than CPUs: every one bound, round robin */
	int m = ncpu < 64 ? ncpu + 1 : 64;
	int many = bound_handlers((unsigned)m, 0, m <= ncpu);
	CHECK_EQ(many, m >= ncpu ? m : 0);
	if (ncpu > 2)   /* fewer handlers than CPUs: the scheduler places them */
		CHECK_EQ(bound_handlers((unsigned)ncpu - 1, 0, 1), 0);
	CHECK_EQ(bound_handlers(1, 0, 1), 0);
	CHECK_EQ(bound_handlers(2, ZS_REGION_NO_SPIN, 1), 0);
	setenv("ZS_REGION_SPREAD", "0", 1);
	CHECK_EQ(bound_handlers(2, 0, 1), 0);
	unsetenv("ZS_REGION_SPREAD");
	printf("test_mt_region_spread: %d CPUs; 2 handlers bound %d, %d handlers bound %d\n", ncpu,
	       two, m, many);
	return tu_done();
}
