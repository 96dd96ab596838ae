#!/usr/bin/env bash
# Owner: the README's C example.  Extracts the block marked
# `<!-- readme-example: app.c -->` from README.md, compiles it exactly as the
# README says (shared library with rpath, with LD_LIBRARY_PATH, and static),
# with -Wall -Wextra -Werror, and runs each binary: the example must compile
# as written and print "read back intact".
# Usage: bash tests/package/readme_example.sh BUILD_DIR   (from the repository root)
set -u
build=$(cd "${1:?usage: tests/package/readme_example.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
awk '/<!-- readme-example: app.c -->/ { on = 1; next }
     on && /^```c/ { inblock = 1; next }
     inblock && /^```/ { exit }
     inblock { print }' "$root/README.md" > "$tmp/app.c"
if [ ! -s "$tmp/app.c" ]; then
	echo "FAIL no '<!-- readme-example: app.c -->' C block in README.md"
	echo "0 passed, 1 failed"; exit 1
fi
# The build's own compiler and sanitizer: a sanitized libzs needs the sanitizer runtime.
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
cc=${cc:-${CC:-cc}}
san=$(sed -n 's/^ZS_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
flags=(-std=c11 -Wall -Wextra -Werror -I"$root/include")
case "$san" in ""|OFF|FALSE|0|NO) ;; *) flags+=(-fsanitize="$san") ;; esac
# try NAME RUN-PREFIX COMPILE-ARGS...
try() {
	local name=$1 prefix=$2; shift 2
	if ! "$cc" "${flags[@]}" "$tmp/app.c" "$@" -o "$tmp/app" 2> "$tmp/cc.log"; then
		fail=$((fail + 1)); echo "FAIL $name: does not compile:"; head -20 "$tmp/cc.log" | sed 's/^/    /'
		return
	fi
	local out
	out=$(cd "$tmp" && env $prefix ./app 2>&1)
	if [ $? -eq 0 ] && grep -q "read back intact" <<< "$out"; then
		pass=$((pass + 1)); echo "ok   $name: $out"
	else
		fail=$((fail + 1)); echo "FAIL $name: $out"
	fi
}
if [ -f "$build/libzs.so" ]; then
	try "shared, rpath" "" -L"$build" -lzs -Wl,-rpath,"$build"
	try "shared, LD_LIBRARY_PATH" "LD_LIBRARY_PATH=$build" -L"$build" -lzs
	# The README: without the rpath or LD_LIBRARY_PATH, ./app stops with "error while
	# loading shared libraries: libzs.so" (unless a libzs is installed where the loader looks).
	so=$(readelf -d "$build/libzs.so" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
	if [ -z "$so" ] || ldconfig -p 2>/dev/null | grep -q "$so"; then
		echo "skip shared, no rpath: ${so:-the soname} is installed system-wide"
	elif "$cc" "${flags[@]}" "$tmp/app.c" -L"$build" -lzs -o "$tmp/app" 2> "$tmp/cc.log"; then
		out=$(cd "$tmp" && env -u LD_LIBRARY_PATH ./app 2>&1)
		if [ $? -ne 0 ] && grep -q "error while loading shared libraries: libzs.so" <<< "$out"; then
			pass=$((pass + 1)); echo "ok   shared, no rpath: $out"
		else
			fail=$((fail + 1)); echo "FAIL shared, no rpath (want the loader's error): $out"
		fi
	else
		fail=$((fail + 1)); echo "FAIL shared, no rpath: does not compile"; head -5 "$tmp/cc.log"
	fi
fi
try "static" "" "$build/libzs.a" -llz4 -lzstd -llzo2 -lpthread -lm -ldl
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
