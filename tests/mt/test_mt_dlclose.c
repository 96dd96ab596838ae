/*
 * libzs.so stays loaded after dlclose (linked -z nodelete, CMakeLists.txt).
 * Why: the library leaves code behind in the process that runs after any
 * call - a pthread key destructor on every thread that used it (its thread
 * number goes back at exit, src/common/thread.c) and the page provider's
 * purge thread.  Unmapped by dlclose, the first thread to exit afterwards
 * jumps into a hole: SIGSEGV in a program that only loaded, used and
 * closed the library (a plugin, a test runner, Python's ctypes were it to
 * unload).
 *
 * The test loads the shared library from the build folder (ZS_BIN's), uses
 * it from a thread, frees and destroys everything, closes the library, and
 * only then lets that thread exit.  It must exit cleanly, the library must
 * still be there (RTLD_NOLOAD finds it), and a second open must work as
 * the first.  Exit 77 without ZS_BIN (run by ctest, which sets it).
 */
#include "testutil.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct api {
	void (*config_init_app)(void *cfg);
	int (*create_pool)(const void *cfg, void **out, char *err, size_t errlen);
	unsigned long (*malloc_write)(void *pool, const void *src, size_t len);
	int (*free_obj)(void *pool, unsigned long h);
	void (*destroy_pool)(void *pool);
};

static int load(void *lib, struct api *a)
{
	*(void **)&a->config_init_app = dlsym(lib, "zs_pool_config_init_app");
	*(void **)&a->create_pool = dlsym(lib, "zs_pool_create");
	*(void **)&a->malloc_write = dlsym(lib, "zs_malloc_write");
	*(void **)&a->free_obj = dlsym(lib, "zs_free");
	*(void **)&a->destroy_pool = dlsym(lib, "zs_destroy_pool");
	return a->config_init_app && a->create_pool && a->malloc_write && a->free_obj &&
	       a->destroy_pool;
}

/* Big enough for any version's struct zs_pool_config (its struct_size says how big). */
static _Alignas(16) unsigned char cfg[4096];
static pthread_barrier_t used, closed;

struct user {
	struct api *a;
	void *pool;
	int ok;
};

static void *use(void *arg)
{
	struct user *u = arg;
	unsigned char buf[500];
	memset(buf, 0x33, sizeof buf);
	unsigned long h[64];
	int ok = 1;
	for (int i = 0; i < 64; i++) {
		h[i] = u->a->malloc_write(u->pool, buf, sizeof buf - (size_t)i);
		ok &= h[i] != 0 && h[i] < (unsigned long)-4095;
	}
	for (int i = 0; i < 64; i++)
		ok &= u->a->free_obj(u->pool, h[i]) == 0;
	u->ok = ok;
	pthread_barrier_wait(&used);
	pthread_barrier_wait(&closed);   /* the library is closed now: exit runs its destructor */
	return NULL;
}

static void round_trip(const char *path, int round)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		printf("dlopen %s: %s\n", path, dlerror());
	REQUIRE(lib);
	struct api a;
	REQUIRE(load(lib, &a));
	memset(cfg, 0, sizeof cfg);
	a.config_init_app(cfg);
	void *pool = NULL;
	char why[256];
	REQUIRE(a.create_pool(cfg, &pool, why, sizeof(why)) == 0);
	REQUIRE(pool);

	struct user u = { &a, pool, 0 };
	pthread_t t;
	REQUIRE(pthread_barrier_init(&used, NULL, 2) == 0);
	REQUIRE(pthread_barrier_init(&closed, NULL, 2) == 0);
	REQUIRE(pthread_create(&t, NULL, use, &u) == 0);
	pthread_barrier_wait(&used);
	CHECK(u.ok);
	a.destroy_pool(pool);
	CHECK_EQ(dlclose(lib), 0);
	/* Still mapped: the thread's exit below calls into it. */
	void *again = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	printf("round %d: after dlclose the library is %s\n", round,
	       again ? "still loaded" : "gone");
	CHECK(again != NULL);
	if (again)
		dlclose(again);
	pthread_barrier_wait(&closed);
	REQUIRE(pthread_join(t, NULL) == 0);
	pthread_barrier_destroy(&used);
	pthread_barrier_destroy(&closed);
}

int main(void)
{
	const char *bin = getenv("ZS_BIN");
	if (!bin || !strchr(bin, '/')) {
		printf("SKIP: ZS_BIN (the build folder's zs) not set; ctest sets it\n");
		return 77;
	}
	char path[PATH_MAX];
	size_t dir = (size_t)(strrchr(bin, '/') - bin);
	REQUIRE(dir + sizeof "/libzs.so" < sizeof path);
	memcpy(path, bin, dir);
	strcpy(path + dir, "/libzs.so");
	round_trip(path, 1);
	round_trip(path, 2);   /* opened again after a close: works as the first time */
	printf("threads exited after dlclose without a fault\n");
	return tu_done();
}
