#!/usr/bin/env bash
# Owner: the tools where they are installed.  Installs the
# build into a temporary prefix and runs the installed `zs report --quick`
# from an unrelated directory, with no source tree on any path: it must write
# report.md and at least 8 plots, every section available that the quick run
# has here.  Then the same with ZS_PYTHON_DIR naming the source tree's
# python/: the script still gets the installed libzs.so (LIBZS_LIBRARY).
# Takes ~2 minutes.  Usage: bash tests/package/install_report.sh BUILD_DIR
# Exit 77: no Python with matplotlib, or a sanitizer build.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: tests/package/install_report.sh BUILD_DIR}" && pwd)
if grep -qE '^ZS_SANITIZE:[A-Z]*=(address|thread|undefined)' "$build/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP install_report: the plain build covers it"; exit 77
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" -c "import matplotlib" 2>/dev/null || { echo "SKIP: no Python with matplotlib"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if ! cmake --install "$build" --prefix "$tmp/p" > "$tmp/log" 2>&1; then
	echo "FAIL cmake --install:"; tail -20 "$tmp/log"; exit 1
fi
mkdir "$tmp/cwd"
# A clean environment: nothing points into the source or build tree.
if (cd "$tmp/cwd" && env -u LIBZS_LIBRARY -u ZS_PYTHON_DIR -u PYTHONPATH \
	"$tmp/p/bin/zs" report --quick --out R > "$tmp/log" 2>&1); then
	ok "installed zs report --quick exits 0"
else
	bad "installed zs report --quick:"; tail -20 "$tmp/log" | sed 's/^/    /'
fi
R=$tmp/cwd/R
[ -s "$R/report.md" ] && ok "report.md written" || bad "no report.md"
n=$(ls "$R"/*.png 2>/dev/null | wc -l)
[ "$n" -ge 8 ] && ok "$n plots" || bad "$n plots (want at least 8)"
if grep -q "not available" "$R/report.md" 2>/dev/null; then
	# Kernel-only parts (root, zram) may be unavailable; nothing else.
	other=$(grep "not available" "$R/report.md" | grep -v -i "kernel\\|root\\|zram-control\\|zswap" || true)
	[ -z "$other" ] && ok "only kernel parts unavailable" || bad "sections not available: $other"
else
	ok "every section available"
fi
# The backend step runs the tool's kinds, malloc baselines included (not the binding's).
grep -q '"backend": "malloc"' "$R/results.json" 2>/dev/null && ok "malloc baseline in the backend step" \
	|| bad "no malloc baseline in results.json"
# ZS_PYTHON_DIR: the source tree's package, the installed library.
cat > "$tmp/py" <<SH
#!/bin/sh
echo "\$LIBZS_LIBRARY" > "$tmp/lib_seen"
exec $py "\$@"
SH
chmod +x "$tmp/py"
if (cd "$tmp/cwd" && env -u LIBZS_LIBRARY ZS_PYTHON="$tmp/py" ZS_PYTHON_DIR="$root/python" \
	"$tmp/p/bin/zs" report --quick --only classes --out R2 > "$tmp/log" 2>&1) && [ -s "$tmp/cwd/R2/report.md" ]; then
	ok "ZS_PYTHON_DIR run writes its report"
else
	bad "ZS_PYTHON_DIR run:"; tail -5 "$tmp/log" | sed 's/^/    /'
fi
seen=$(cat "$tmp/lib_seen" 2>/dev/null)
[ "$(readlink -f "$seen")" = "$(readlink -f "$tmp/p/lib/libzs.so")" ] 2>/dev/null \
	|| [ "$(readlink -f "$seen")" = "$(readlink -f "$(ls -d "$tmp"/p/lib*/libzs.so | head -1)")" ] \
	&& ok "LIBZS_LIBRARY is the installed libzs.so ($seen)" || bad "LIBZS_LIBRARY was '$seen'"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
