/*
 * Which sanitizer a test is built under, in one place: gcc says so with
 * __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang with __has_feature, and
 * a test that checked only one of the two ran its full, unsanitized sizes
 * under the other compiler.  Tests scale their rounds, or skip what a
 * sanitizer's allocator and shadow memory make meaningless (RSS bounds,
 * malloc counts), from these three.
 */
#ifndef ZS_TEST_SANITIZER_H
#define ZS_TEST_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

#define TU_SANITIZED (TU_ASAN || TU_TSAN)

#endif
