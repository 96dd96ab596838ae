#!/usr/bin/env bash
# Runs the Python package's tests against a build: creates BUILD_DIR/pyvenv
# (with --system-site-packages so Debian's pytest/matplotlib are visible),
# pip-installs ./python into it, points LIBZS_LIBRARY at BUILD_DIR/libzs.so
# and runs pytest on python/tests.  Exits with pytest's code; "no tests
# collected" (pytest exit 5) counts as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: run-tests.sh BUILD_DIR}
build=$(cd "$build" && pwd) || exit 2
[ -f "$build/libzs.so" ] || { echo "run-tests.sh: $build/libzs.so not found (build first)"; exit 2; }
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
venv=$build/pyvenv
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv --system-site-packages "$venv" || exit 2
fi
vpy=$venv/bin/python
# setuptools from the system site: build without isolation (no downloads).
if "$vpy" -c "import setuptools" 2>/dev/null; then nbi=--no-build-isolation; else nbi=; fi
# The package normally builds libzs.so itself (setup.py); ship the one just built.
export LIBZS_PREBUILT=$build/libzs.so
"$vpy" -m pip install -q --disable-pip-version-check $nbi ./python || exit 2
"$vpy" -c "import pytest" 2>/dev/null || "$vpy" -m pip install -q pytest || exit 2
export LIBZS_LIBRARY=$build/libzs.so
export ZS_BUILD_DIR=$build
# Run from the tests dir against the installed package, not the source tree.
cd python/tests
"$vpy" -m pytest -q -p no:cacheprovider .
rc=$?
[ "$rc" -eq 5 ] && { echo "run-tests.sh: no tests collected"; exit 1; }
exit "$rc"
