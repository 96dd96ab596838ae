#!/usr/bin/env bash
# Owner: the Python package installs like one.  In a fresh
# virtual environment (no system site packages), `pip install ./python`
# builds libzs.so itself and ships it in the package, with the compiled module
# (libzs._ext, CompressedDict); then, from a directory
# outside the repository and with no LIBZS_LIBRARY, `import libzs` must load
# that bundled library and a pool must work, and the package must carry
# py.typed (its type hints are for users' type checkers).
# Usage: bash tests/package/python_install.sh BUILD_DIR   (BUILD_DIR holds the venv)
# Exit 77 (skipped): no python3 with venv, pip cannot fetch its build
# requirements (offline), or a sanitizer build directory.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
if grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP python_install: the plain build covers it"; exit 77
fi
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
command -v "$py" > /dev/null || { echo "SKIP: no python3"; exit 77; }
venv=$build/pyvenv-fresh
rm -rf "$venv"
"$py" -m venv "$venv" > /dev/null 2>&1 || { echo "SKIP: python3 -m venv unavailable"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$venv"' EXIT
unset LIBZS_LIBRARY LIBZS_PREBUILT
if ! (cd "$tmp" && "$venv/bin/python" -m pip install -q --disable-pip-version-check "$root/python") \
	> "$tmp/log" 2>&1; then
	if grep -qiE "could not find a version|network|connection|temporary failure" "$tmp/log"; then
		echo "SKIP: pip could not fetch the build requirements:"; tail -3 "$tmp/log"; exit 77
	fi
	echo "FAIL pip install ./python:"; tail -30 "$tmp/log" | sed 's/^/    /'; exit 1
fi
out=$(cd "$tmp" && env -u LIBZS_LIBRARY "$venv/bin/python" -c '
import libzs, libzs._lib as L
p = libzs.Pool()
h = p.malloc(100)
p.write(h, b"x" * 100)
ok = p.read(h, 100) == b"x" * 100
p.free(h)
d = libzs.CompressedDict()
d["k"] = b"v" * 500
ok = ok and d["k"] == b"v" * 500
p.close()
import os
typed = os.path.isfile(os.path.join(os.path.dirname(libzs.__file__), "py.typed"))
print(L.library_path(), "ok" if ok and typed else "DIFFERENT" if typed else "NO-PY.TYPED")' 2>&1)
rc=$?
echo "$out"
case "$rc:$out" in
0:"$venv"/*/site-packages/libzs/libzs.so" ok") echo "ok   fresh venv: pip install ./python, import libzs, bundled libzs.so, py.typed" ;;
*) echo "FAIL fresh venv import (want the bundled library)"; exit 1 ;;
esac
# python/README.md: LIBZS_PREBUILT=/path/to/libzs.so at install time ships that file instead
# of building.  A marked copy (bytes after the ELF's end change nothing for the loader) shows
# which file was shipped.
cp "$(readlink -f "$build/libzs.so")" "$tmp/prebuilt.so" && printf 'libzs-prebuilt-marker' >> "$tmp/prebuilt.so"
if ! (cd "$tmp" && LIBZS_PREBUILT="$tmp/prebuilt.so" "$venv/bin/python" -m pip install -q \
	--disable-pip-version-check --force-reinstall --no-deps "$root/python") > "$tmp/log" 2>&1; then
	echo "FAIL pip install with LIBZS_PREBUILT:"; tail -30 "$tmp/log" | sed 's/^/    /'; exit 1
fi
lib=$(cd "$tmp" && env -u LIBZS_LIBRARY "$venv/bin/python" -c '
import libzs, libzs._lib as L
p = libzs.Pool(); h = p.store(b"prebuilt"); assert p.read(h) == b"prebuilt"; p.close()
print(L.library_path())' 2>&1)
if [ $? -eq 0 ] && cmp -s "$lib" "$tmp/prebuilt.so"; then
	echo "ok   LIBZS_PREBUILT: the package ships that file ($lib) and it works"
else
	echo "FAIL LIBZS_PREBUILT: shipped '$lib', not the given file"; exit 1
fi
# `pip wheel ./python` gives a wheel that works without the repository: installed into another
# fresh virtual environment from a directory outside it, the compiled module (an abi3 build)
# loads beside the bundled libzs.so and a CompressedDict and a Pool round-trip.
if ! (cd "$tmp" && LIBZS_PREBUILT="$build/libzs.so" "$venv/bin/python" -m pip wheel -q \
	--disable-pip-version-check --no-deps -w "$tmp/wheel" "$root/python") > "$tmp/log" 2>&1; then
	echo "FAIL pip wheel ./python:"; tail -30 "$tmp/log" | sed 's/^/    /'; exit 1
fi
whl=$(ls "$tmp"/wheel/libzs-*.whl 2>/dev/null | head -1)
case "$whl" in
*-abi3-*.whl) ;;
*) echo "FAIL pip wheel: want an abi3 wheel, got '${whl##*/}'"; exit 1 ;;
esac
venv2=$tmp/venv-wheel
"$py" -m venv "$venv2" > /dev/null 2>&1 || { echo "FAIL python3 -m venv (second)"; exit 1; }
if ! (cd "$tmp" && "$venv2/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
	"$whl") > "$tmp/log" 2>&1; then
	echo "FAIL pip install ${whl##*/}:"; tail -30 "$tmp/log" | sed 's/^/    /'; exit 1
fi
out=$(cd "$tmp" && env -u LIBZS_LIBRARY "$venv2/bin/python" -c '
import libzs, libzs._lib as L
d = libzs.CompressedDict("zstd")
d["k"] = b"v" * 1000
d[b"k"] = b"w"
p = libzs.Pool(); h = p.store(b"wheel" * 50)
ok = d["k"] == b"v" * 1000 and d[b"k"] == b"w" and len(d) == 2 and p.read(h) == b"wheel" * 50
print(L.library_path(), libzs._ext.__file__, "ok" if ok else "DIFFERENT")' 2>&1)
rc=$?
echo "$out"
case "$rc:$out" in
0:"$venv2"/*/site-packages/libzs/libzs.so" $venv2"/*/site-packages/libzs/_ext.abi3.so" ok")
	echo "ok   ${whl##*/} in a fresh venv, no repository: CompressedDict and Pool round trips" ;;
*) echo "FAIL wheel install: want the bundled libzs.so and _ext.abi3.so"; exit 1 ;;
esac
