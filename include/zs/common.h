/*
 * libzs's API line: the version, and ZS_API, which every public function
 * declaration in include/zs/ carries.  The library is built with
 * -fvisibility=hidden, so ZS_API is what exports a symbol from libzs.so;
 * everything else (the layers' cross-file helpers) stays inside it and can
 * change freely.  docs/abi.md states the compatibility policy.
 */
#ifndef ZS_COMMON_H
#define ZS_COMMON_H

#ifndef ZS_API
#if defined(__GNUC__) || defined(__clang__)
#define ZS_API __attribute__((visibility("default")))
#else
#define ZS_API
#endif
#endif

/* Kept equal to project(VERSION) in CMakeLists.txt (tests/package/exports.sh checks). */
#define ZS_VERSION_MAJOR 4
#define ZS_VERSION_MINOR 1
#define ZS_VERSION_PATCH 0
#define ZS_VERSION_NUMBER (ZS_VERSION_MAJOR * 10000 + ZS_VERSION_MINOR * 100 + ZS_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* ZS_VERSION_NUMBER of the library actually loaded (may differ from the header's). */
ZS_API unsigned zs_version(void);
/* "MAJOR.MINOR.PATCH" of the library actually loaded; a static string. */
ZS_API const char *zs_version_string(void);
/*
 * The value of a public constant by its macro or enumerator name
 * ("ZS_ZRAM_F_HUGE", "ZS_CLASS_SHARDS_AUTO", "ZS_REGION_COLD", ...), for
 * bindings that cannot read C headers (Python's ctypes): 0 and the value, or
 * -ENOENT for a name the library does not list.  zs_const_names(): every
 * listed name, NULL-terminated.  The headers stay the definitions: the table
 * is built from the macros and enumerators themselves (src/api/consts.c).
 */
ZS_API int zs_const(const char *name, unsigned long long *value);
ZS_API const char *const *zs_const_names(void);

#ifdef __cplusplus
}
#endif

/* 3.x source compatibility: pick a call by its argument count (docs/abi.md, 4.0.0). */
#define ZS_PICK2_(a, b, NAME, ...) NAME
#define ZS_PICK3_(a, b, c, NAME, ...) NAME
#define ZS_PICK4_(a, b, c, d, NAME, ...) NAME
#endif
