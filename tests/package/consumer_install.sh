#!/usr/bin/env bash
# Owner: libzs as an installed package.  Installs the build
# directory into a temporary prefix with `cmake --install`, then builds and
# runs a tiny consumer three ways: find_package(libzs) with libzs::zs (shared)
# and libzs::zs_static, and a plain cc line from `pkg-config libzs`.  The
# consumer checks the loaded library's version against its headers.
# Usage: bash tests/package/consumer_install.sh BUILD_DIR
# Exit 77 (skipped): no cmake or pkg-config, or a sanitizer build directory.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
command -v cmake > /dev/null || { echo "SKIP: no cmake"; exit 77; }
command -v pkg-config > /dev/null || { echo "SKIP: no pkg-config"; exit 77; }
if grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP consumer_install: the plain build covers it"; exit 77
fi
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

if ! cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/log" 2>&1; then
	bad "cmake --install:"; tail -20 "$tmp/log" | sed 's/^/    /'
	echo "$pass passed, $fail failed"; exit 1
fi
p=$tmp/prefix
libdir=$(sed -n 's/^libdir=\${prefix}\///p' "$p"/lib*/pkgconfig/libzs.pc)
for f in include/zs/zsmalloc.h include/zs/common.h "$libdir/libzs.a" \
	"$libdir/libzs.so" "$libdir/pkgconfig/libzs.pc" "$libdir/cmake/libzs/libzsConfig.cmake" bin/zs \
	share/libzs/report/report.py share/libzs/python/libzs/__init__.py libexec/libzs/bench_chain; do
	[ -e "$p/$f" ] && ok "installed $f" || bad "missing $f"
done
# The harness is not product: its header stays out of the install (libzs.so exports none of it).
[ ! -e "$p/include/zs/harness.h" ] && ok "zs/harness.h not installed" || bad "zs/harness.h installed"
# The installed library has its SONAME, and the tool runs.
soname=$(objdump -p "$p/$libdir/libzs.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
case "$soname" in libzs.so.[0-9]*) ok "SONAME $soname" ;; *) bad "SONAME '$soname'" ;; esac
"$p/bin/zs" --version > /dev/null 2>&1 && ok "installed zs runs" || bad "installed zs --version"

mkdir -p "$tmp/app"
cat > "$tmp/app/main.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <zs/common.h>
#include <zs/zsmalloc.h>
int main(void)
{
	if (zs_version() != ZS_VERSION_NUMBER) {
		printf("headers %d, library %u\n", ZS_VERSION_NUMBER, zs_version());
		return 1;
	}
	struct zs_pool *pool = NULL;
	char why[256];
	if (zs_pool_create(NULL, &pool, why, sizeof(why))) {
		printf("zs_pool_create: %s\n", why);
		return 1;
	}
	unsigned long h = pool ? zs_malloc(pool, 100) : 0;
	if (!pool || ZS_IS_ERR(h))
		return 1;
	zs_obj_write(pool, h, "installed", 10);
	char copy[100];
	const char *p = zs_obj_read_begin(pool, h, 10, copy);
	int same = !strcmp(p, "installed");
	zs_obj_read_end(pool, h, 10, (void *)p);
	zs_free(pool, h);
	zs_destroy_pool(pool);
	printf("libzs %s: %s\n", zs_version_string(), same ? "ok" : "DIFFERENT");
	return !same;
}
C
# Ask for the headers' own MAJOR.MINOR: a consumer written against this version.
major=$(sed -n 's/^#define ZS_VERSION_MAJOR \([0-9]*\).*/\1/p' "$root/include/zs/common.h")
minor=$(sed -n 's/^#define ZS_VERSION_MINOR \([0-9]*\).*/\1/p' "$root/include/zs/common.h")
cat > "$tmp/app/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(libzs $major.$minor REQUIRED)
add_executable(app_shared main.c)
target_link_libraries(app_shared PRIVATE libzs::zs)
add_executable(app_static main.c)
target_link_libraries(app_static PRIVATE libzs::zs_static)
CM
run() {  # run NAME EXE
	local out
	out=$("$2" 2>&1)
	case "$?:$out" in 0:"libzs "*": ok") ok "$1: $out" ;; *) bad "$1: $out" ;; esac
}
if cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$p" > "$tmp/log" 2>&1 &&
	cmake --build "$tmp/app/build" -j2 >> "$tmp/log" 2>&1; then
	run "find_package libzs::zs" "$tmp/app/build/app_shared"
	run "find_package libzs::zs_static" "$tmp/app/build/app_static"
	if ldd "$tmp/app/build/app_shared" | grep -q "$p/"; then
		ok "the shared consumer loads the installed libzs.so"
	else
		bad "the shared consumer does not load $p's libzs.so"
	fi
else
	bad "find_package consumer build:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
if $cc "$tmp/app/main.c" $(pkg-config --cflags --libs libzs) -Wl,-rpath,"$p/$libdir" \
	-o "$tmp/app/pc_shared" > "$tmp/log" 2>&1; then
	run "pkg-config (shared)" "$tmp/app/pc_shared"
else
	bad "pkg-config shared build:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
# Static: the archive itself, with pkg-config's --static dependency list.
if $cc "$tmp/app/main.c" $(pkg-config --cflags libzs) "$p/$libdir/libzs.a" \
	$(pkg-config --static --libs-only-L --libs-only-l libzs | sed 's/-lzs\b//') \
	-o "$tmp/app/pc_static" > "$tmp/log" 2>&1; then
	run "pkg-config --static" "$tmp/app/pc_static"
else
	bad "pkg-config static build:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
