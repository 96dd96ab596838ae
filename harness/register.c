/*
 * The harness's registration call: adds the malloc baselines to libzs's
 * backend registry in every program linked with the harness (the zs tool,
 * the benchmarks, the tests, the fuzzers).
 *
 * Why a constructor here and not in the library: libzs used to register
 * them at load time itself, which ran code in every process that loaded
 * libzs.so and put the baselines into the product.  The harness is an object
 * library linked whole into its programs, so this runs before their main()
 * -- on the main thread, before any worker, which is also what glibc's
 * allocator needs (be_malloc.c) -- without sixty mains having to remember a
 * call.  zs_harness_register() is idempotent for a program that wants to be
 * explicit.
 */
#include <pthread.h>

#include "harness_internal.h"
#include "zs/harness.h"

static void register_once(void)
{
	zs_be_malloc_init();
	backend_register(&zs_be_malloc_ops);
#ifdef ZS_HAVE_JEMALLOC
	backend_register(&zs_be_jemalloc_ops);
#endif
#ifdef ZS_HAVE_MIMALLOC
	backend_register(&zs_be_mimalloc_ops);
#endif
}

void zs_harness_register(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, register_once);
}

__attribute__((constructor)) static void harness_init(void)
{
	zs_harness_register();
}
