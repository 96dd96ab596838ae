#!/bin/bash
# The API line (issue 12): libzs.so exports exactly the functions declared
# with ZS_API in include/zs/*.h, no internal helper and no undeclared symbol,
# every function the Python binding declares is among them, and the
# headers' ZS_VERSION_* match the library's file version.
# Usage: tests/exports.sh BUILD_DIR (run from the source root).
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
n=$(wc -l < "$tmp/declared")
[ "$n" -gt 50 ] || { echo "FAIL: only $n ZS_API declarations found (header parse broken?)"; rc=1; }
# The headers' version is the library's file version (libzs.so.MAJOR.MINOR.PATCH).
v=$(sed -n 's/^#define ZS_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/zs/common.h | paste -sd.)
real=$(readlink -f "$LIB")
case "$real" in
*"libzs.so.$v") ;;
*) echo "FAIL: headers say $v, library file is $real"; rc=1 ;;
esac
[ $rc = 0 ] && echo "ok: $n exported functions, all declared with ZS_API; version $v"
exit $rc
