#!/usr/bin/env bash
# Owner: libzs as a sub-project of someone else's CMake build.
# Creates a tiny project in a temporary directory that add_subdirectory()s
# this repository, links libzs::zs (shared) and libzs::zs_static, builds and
# runs both programs; then checks that a FetchContent consumer configures.
# This failed with "No SOURCES given to target: zs_obj" while the build used
# CMAKE_SOURCE_DIR (the consumer's) instead of its own source directory.
# Usage: bash tests/package/consumer_subdir.sh BUILD_DIR   (BUILD_DIR is unused: the
# consumer builds its own copy; skipped (77) in sanitizer build directories)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-}
if [ -n "$build" ] && grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP consumer_subdir: the plain build covers it"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
mkdir -p "$tmp/app" "$tmp/fetch"
cat > "$tmp/app/main.c" <<'C'
#include <stdio.h>
#include <zs/zsmalloc.h>
int main(void)
{
	struct zs_pool *pool = NULL;
	char why[256];
	if (zs_pool_create(NULL, &pool, why, sizeof(why))) {
		printf("zs_pool_create: %s\n", why);
		return 1;
	}
	unsigned long h = pool ? zs_malloc(pool, 100) : 0;
	if (!pool || ZS_IS_ERR(h))
		return 1;
	zs_obj_write(pool, h, "consumer", 9);
	char copy[100];
	const char *p = zs_obj_read_begin(pool, h, 9, copy);
	printf("consumer read '%s'\n", p);
	zs_obj_read_end(pool, h, 9, (void *)p);
	zs_free(pool, h);
	zs_destroy_pool(pool);
	return 0;
}
C
cat > "$tmp/app/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(consumer C)
add_subdirectory("$root" libzs)
add_executable(app_shared main.c)
target_link_libraries(app_shared PRIVATE libzs::zs)
add_executable(app_static main.c)
target_link_libraries(app_static PRIVATE libzs::zs_static)
CM
if cmake -S "$tmp/app" -B "$tmp/app/build" > "$tmp/log" 2>&1 &&
	cmake --build "$tmp/app/build" -j2 >> "$tmp/log" 2>&1; then
	for exe in app_shared app_static; do
		out=$("$tmp/app/build/$exe" 2>&1)
		if [ $? -eq 0 ] && [ "$out" = "consumer read 'consumer'" ]; then
			pass=$((pass + 1)); echo "ok   add_subdirectory: $exe: $out"
		else
			fail=$((fail + 1)); echo "FAIL add_subdirectory: $exe: $out"
		fi
	done
	if [ -e "$tmp/app/build/libzs/zs" ] || ls "$tmp/app/build/libzs"/test_* > /dev/null 2>&1; then
		fail=$((fail + 1)); echo "FAIL a sub-project build also built libzs's tests or zs"
	else
		pass=$((pass + 1)); echo "ok   as a sub-project only the libraries are built"
	fi
else
	fail=$((fail + 1)); echo "FAIL add_subdirectory build:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
cat > "$tmp/fetch/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(fetcher C)
include(FetchContent)
FetchContent_Declare(libzs SOURCE_DIR "$root")
FetchContent_MakeAvailable(libzs)
add_executable(app ../app/main.c)
target_link_libraries(app PRIVATE libzs::zs)
CM
if cmake -S "$tmp/fetch" -B "$tmp/fetch/build" > "$tmp/log" 2>&1; then
	pass=$((pass + 1)); echo "ok   FetchContent consumer configures"
else
	fail=$((fail + 1)); echo "FAIL FetchContent configure:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
