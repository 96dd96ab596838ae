#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c, clang, -DZS_FUZZ=ON, with the
# ZS_DEBUG internal checks, so a broken invariant is a crash the fuzzer keeps) and
# runs each for SECONDS (default 60) from its committed seed corpus
# (tests/fuzz/corpus/<target>/) plus what earlier runs found (kept in the
# build dir).  Fails if any target crashes, hangs (-timeout), leaks or runs
# out of memory; the input is saved as BUILD/crash-<target>-*.  Prints the
# executions per target and their total.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (no TARGET: every target not in tests/fuzz/OPEN)
#   env: ZS_FUZZ_DIR (build dir, default build-fuzz), ZS_FUZZ_SANITIZE
#        (default address,undefined), ZS_FUZZ_EXTRA (extra compile flags),
#        ZS_FUZZ_ARGS (extra libFuzzer flags)
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
dir=${ZS_FUZZ_DIR:-build-fuzz}
san=${ZS_FUZZ_SANITIZE:-address,undefined}
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found: fuzzers not built (they need libFuzzer)"
  exit 0
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  # tests/fuzz/OPEN lists targets that find a defect still open: named, never silent.
  for f in tests/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c)
    if why=$(grep -E "^$t[[:space:]]" tests/fuzz/OPEN 2>/dev/null); then
      echo "fuzz.sh: $t left out of the default run (tests/fuzz/OPEN): ${why#$t}"
      continue
    fi
    targets+=("$t")
  done
fi
CC=clang cmake -S . -B "$dir" -DZS_FUZZ=ON -DZS_DEBUG=ON -DZS_FUZZ_SANITIZE="$san" -DZS_FUZZ_EXTRA="${ZS_FUZZ_EXTRA:-}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}" >/dev/null || { echo "fuzz.sh: build failed"; exit 1; }
# One fuzzer per CPU at a time (ZS_FUZZ_JOBS overrides): each gets its SECONDS
# of a CPU as when they ran one after another, and the run takes
# ceil(targets / jobs) x SECONDS instead of targets x SECONDS (CI: 3 minutes,
# not 5, on two CPUs).  Results are read afterwards in target order.
jobs=${ZS_FUZZ_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
run_target() {
  local t=$1 work="$dir/corpus-$1"
  mkdir -p "$work"
  # stderr of the code under test is closed (-close_fd_mask=2); libFuzzer and the
  # sanitizers still report on their own descriptor.
  "$dir/$t" -max_total_time="$secs" -max_len=4096 -timeout=30 -rss_limit_mb=3072 \
    -print_final_stats=1 -close_fd_mask=2 -artifact_prefix="$dir/crash-$t-" \
    ${ZS_FUZZ_ARGS:-} "$work" "tests/fuzz/corpus/$t" >"$dir/$t.log" 2>&1
  echo $? >"$dir/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  rm -f "$dir/$t.rc"
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait
fail=0 total=0
summary=""
for t in "${targets[@]}"; do
  log="$dir/$t.log"
  rc=$(cat "$dir/$t.rc" 2>/dev/null || echo 1)
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  n=${n:-0}
  total=$((total + n))
  if [ $rc -ne 0 ]; then
    fail=1
    echo "fuzz.sh: $t FAILED (exit $rc); log $log:"
    grep -E "ERROR|check failed|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20
    # the failing thread's stack: a failure that does not come back on a rerun
    # (a race) is otherwise only "deadly signal"
    grep -E "^ +#[0-9]+ " "$log" | head -24
    # rerun the saved input with stderr open, for the failed check's message
    for c in "$dir/crash-$t-"* ; do
      [ -f "$c" ] && "$dir/$t" "$c" 2>&1 | grep -E "check failed|ERROR: [A-Z]" | head -5
    done
  fi
  line=$(printf "  %-12s %10d executions in %ss (%d/s)%s" "$t" "$n" "$secs" $((n / (secs > 0 ? secs : 1))) \
    "$([ $rc -ne 0 ] && echo '  FAILED')")
  echo "$line"
  summary+="$line"$'\n'
done
echo "fuzz.sh: $total executions in total over ${#targets[@]} targets ($san), $([ $fail -eq 0 ] && echo ok || echo FAILED)"
nf=$(grep -c FAILED <<< "$summary")
echo "fuzz.sh: $((${#targets[@]} - nf)) passed, $nf failed"
exit $fail
