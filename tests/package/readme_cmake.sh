#!/usr/bin/env bash
# Owner: the README's CMake example.  Installs the build
# into a temporary prefix, extracts the block marked
# `<!-- readme-example: CMakeLists.txt -->` and the C example
# (`<!-- readme-example: app.c -->`) from README.md, and builds them as
# written with find_package against that prefix: the version the README asks
# for must be one the installed package satisfies.  The binary must print
# "read back intact".
# Usage: bash tests/package/readme_cmake.sh BUILD_DIR   (from the repository root)
# Exit 77: no cmake, or a sanitizer build (the plain build covers it).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: tests/package/readme_cmake.sh BUILD_DIR}" && pwd)
command -v cmake > /dev/null || { echo "SKIP: no cmake"; exit 77; }
if grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP readme_cmake: the plain build covers it"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
extract() {  # extract MARKER LANG
	awk -v m="<!-- readme-example: $1 -->" -v lang="$2" '
	     $0 == m { on = 1; next }
	     on && $0 == "```" lang { inblock = 1; next }
	     inblock && /^```/ { exit }
	     inblock { print }' "$root/README.md"
}
mkdir "$tmp/app"
extract CMakeLists.txt cmake > "$tmp/app/CMakeLists.txt"
extract app.c c > "$tmp/app/app.c"
for f in CMakeLists.txt app.c; do
	[ -s "$tmp/app/$f" ] || { echo "FAIL no '<!-- readme-example: $f -->' block in README.md"; exit 1; }
done
echo "README's CMakeLists.txt:"; sed 's/^/    /' "$tmp/app/CMakeLists.txt"
if ! cmake --install "$build" --prefix "$tmp/p" > "$tmp/log" 2>&1; then
	echo "FAIL cmake --install:"; tail -20 "$tmp/log"; exit 1
fi
if ! cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/p" > "$tmp/log" 2>&1 ||
	! cmake --build "$tmp/app/build" >> "$tmp/log" 2>&1; then
	echo "FAIL the README's CMake example does not build against the installed package:"
	tail -20 "$tmp/log" | sed 's/^/    /'
	exit 1
fi
out=$(cd "$tmp/app" && ./build/app 2>&1)
if [ $? -eq 0 ] && grep -q "read back intact" <<< "$out"; then
	echo "ok   README CMake example: $out"
else
	echo "FAIL README CMake example runs: $out"; exit 1
fi
