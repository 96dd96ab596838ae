#!/usr/bin/env bash
# Runs every test: the plain build (gcc) and a clang build, each with ctest;
# an ASan+UBSan build with ctest; a TSan build running the concurrency tests
# (tests/test_mt_*); the libFuzzer targets for ZS_FUZZ_SECONDS (default 60)
# each (scripts/fuzz.sh); and the Python package's tests.  Exits non-zero on any
# failure and ends with one "N passed, N failed" summary line.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
pass=0; fail=0
step() {  # step NAME COMMAND...
  echo "=== $1"
  shift
  if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "=== FAILED: $*"; fi
}
build() {  # build DIR CC [cmake args...]
  local dir=$1 cc=$2; shift 2
  CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null &&
    cmake --build "$dir" -j"$jobs" >/dev/null
}
run_ctest() {  # run_ctest DIR [ctest args...]
  local dir=$1; shift
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 900 "$@")
}
# TSan cannot map its shadow with the kernel's largest ASLR entropy; run it without ASLR.
tsan_run() { setarch "$(uname -m)" -R "$@"; }

step "gcc build" build build-gcc gcc
step "gcc tests" run_ctest build-gcc
step "clang build" build build-clang clang
step "clang tests" run_ctest build-clang -E 'replay|record'
step "asan+ubsan build" build build-asan clang -DZS_SANITIZE=address,undefined
step "asan+ubsan tests" run_ctest build-asan
step "fuzzers (${ZS_FUZZ_SECONDS:-60} s per target)" bash scripts/fuzz.sh "${ZS_FUZZ_SECONDS:-60}"
step "tsan build" build build-tsan clang -DZS_SANITIZE=thread
step "tsan concurrency tests" tsan_run bash -c "cd build-tsan && ctest --output-on-failure -j$jobs --timeout 900 -R '^test_mt_'"
if [ -f python/pyproject.toml ]; then
  step "python tests" bash python/run-tests.sh build-gcc
fi
echo "test.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
