#!/bin/bash
# The API line: libzs.so exports exactly the functions declared
# with ZS_API in include/zs/*.h, no internal helper and no undeclared symbol,
# every function the Python binding declares is among them, and the
# headers' ZS_VERSION_* match the library's file version.
# The product line: none of the harness (zs/harness.h: failure
# injection, RSS probe, page loader, kernel-zram driver, malloc baselines'
# registration) and none of the page provider's pages_* is exported, and
# libzs runs no code of its own at load time (.init_array/.ctors).
# Names: a global zs_ symbol of the library's objects is ZS_API or a harness
# hook; internal names carry their layer's prefix instead.
# Usage: tests/package/exports.sh BUILD_DIR (run from the source root).
set -u
B=${1:-build}
LIB=$B/libzs.so
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 77; }
[ -e "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | sort -u > "$tmp/exported"
# A ZS_API declaration names its function on the same line: "ZS_API type name(".
sed -n 's/^ZS_API[^(]*[^A-Za-z0-9_(]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' include/zs/*.h | sort -u > "$tmp/declared"
rc=0
if ! diff -u "$tmp/declared" "$tmp/exported" > "$tmp/diff"; then
	echo "FAIL: exported symbols differ from the ZS_API declarations (- declared only, + exported only):"
	grep '^[-+][^-+]' "$tmp/diff"
	rc=1
fi
# Data symbols are never part of the API.
if nm -D --defined-only "$LIB" | awk '$2 ~ /^[DdBbRr]$/' | grep -v ' _' | grep .; then
	echo "FAIL: data symbols exported"
	rc=1
fi
# The Python binding loads functions by name and skips missing ones until
# used: every function it declares (_PROTOS in python/libzs/_lib.py) must be exported.
if [ -f python/libzs/_lib.py ]; then
	sed -n 's/^    "\([a-z][a-z0-9_]*\)": (.*/\1/p' python/libzs/_lib.py | sort -u > "$tmp/python"
	missing=$(comm -23 "$tmp/python" "$tmp/exported")
	[ -s "$tmp/python" ] || { echo "FAIL: no functions parsed from python/libzs/_lib.py"; rc=1; }
	[ -z "$missing" ] || { echo "FAIL: python/libzs/_lib.py uses functions libzs.so does not export:" $missing; rc=1; }
fi
# The harness header declares its functions without ZS_API; none may be exported.
sed -n 's/^[a-z][a-z0-9_ *]*[ *]\([a-z_][a-z0-9_]*\)(.*/\1/p' include/zs/harness.h | sort -u > "$tmp/harness"
[ -s "$tmp/harness" ] || { echo "FAIL: no functions parsed from include/zs/harness.h"; rc=1; }
leaked=$(comm -12 "$tmp/harness" "$tmp/exported")
[ -z "$leaked" ] || { echo "FAIL: harness functions exported from libzs.so:" $leaked; rc=1; }
nh=$(wc -l < "$tmp/harness")
if grep -E '^(pages_|zs_pageset_|zs_kzram_|zs_process_rss|backend_register|zs_harness_)' "$tmp/exported"; then
	echo "FAIL: page-provider or harness functions exported"; rc=1
fi
if grep -q ZS_API include/zs/harness.h; then
	echo "FAIL: include/zs/harness.h declares ZS_API functions"; rc=1
fi
# The zs_ prefix is the API's: every global zs_ symbol an object of the
# library defines is ZS_API or a harness hook; internal functions and data
# carry their layer's name (pages_, handle_, park_, lockdep_, ...) instead.
# Read from libzs.a, whose members are the objects libzs.so is linked from:
# the hidden ones are invisible in libzs.so itself.
if [ -e "$B/libzs.a" ]; then
	nm -g --defined-only "$B/libzs.a" | awk 'NF == 3 && $3 ~ /^zs_/ { print $3 }' | sort -u > "$tmp/zsdefs"
	new=$(comm -23 "$tmp/zsdefs" "$tmp/declared" | comm -23 - "$tmp/harness")
	if [ -n "$new" ]; then
		echo "FAIL: internal functions or data named zs_ (the API's prefix) that are not ZS_API" \
			"and not in include/zs/harness.h:" $new
		echo "  name them with their layer's prefix (pages_, zswap_, region_, ...), or declare them ZS_API"
		rc=1
	fi
else
	echo "FAIL: $B/libzs.a not built (the zs_ internal-name check reads it)"; rc=1
fi
# No load-time code of libzs's own: no object of the library has a constructor
# section (libzs.a holds the same objects as libzs.so).  libzs.so's
# .init_array then holds only the toolchain's crtbegin entry (frame_dummy).
# A sanitizer build's objects each carry the sanitizer's own module constructor
# (.init_array.1): not libzs's code, so the plain and clang builds check this.
san=0
grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$B/CMakeCache.txt" 2>/dev/null && san=1
if [ "$san" = 1 ]; then
	echo "skip: load-time constructor check (sanitizer build: the sanitizer's own constructors)"
elif [ -e "$B/libzs.a" ] && command -v objdump >/dev/null; then
	ctors=$(objdump -h "$B/libzs.a" | awk '/^In archive/ { next } /file format/ { f = $1 } $2 ~ /^\.(init_array|ctors)/ { print f, $2 }')
	[ -z "$ctors" ] || { echo "FAIL: libzs objects with load-time constructors:" $ctors; rc=1; }
fi
if [ "$san" = 0 ] && command -v readelf >/dev/null; then
	ia=$(readelf -SW "$LIB" | awk '$2 == ".init_array" { print $6 }')
	ia=$((16#${ia:-0}))
	[ "$ia" -le 8 ] || { echo "FAIL: libzs.so .init_array holds ${ia} bytes (more than the toolchain's one entry)"; rc=1; }
fi
n=$(wc -l < "$tmp/declared")
[ "$n" -gt 50 ] || { echo "FAIL: only $n ZS_API declarations found (header parse broken?)"; rc=1; }
# The headers' version is the library's file version (libzs.so.MAJOR.MINOR.PATCH).
v=$(sed -n 's/^#define ZS_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/zs/common.h | paste -sd.)
real=$(readlink -f "$LIB")
case "$real" in
*"libzs.so.$v") ;;
*) echo "FAIL: headers say $v, library file is $real"; rc=1 ;;
esac
# docs/abi.md: the SONAME is libzs.so.MAJOR, so only a MAJOR change makes old programs refuse.
if command -v readelf >/dev/null; then
	so=$(readelf -d "$LIB" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
	[ "$so" = "libzs.so.${v%%.*}" ] || { echo "FAIL: SONAME '$so', want libzs.so.${v%%.*}"; rc=1; }
fi
[ $rc = 0 ] && echo "ok: $n exported functions, all declared with ZS_API; none of the $nh harness functions; no load-time constructor; version $v"
exit $rc
