#!/usr/bin/env bash
# bench-api-callgrind.sh: instructions of the seed-004 API vs the legacy
# map/unmap API, counted by callgrind (hardware counters are not available
# here).  Each variant runs in its own valgrind process (`bench_api --variant
# legacy|new --iterations N`) with --toggle-collect on its loop function, so
# pool setup and allocation are not counted; only the N iterations over the
# objects (read + write each) are.  Instruction counts are deterministic, so
# one run per variant is enough (no noise, unlike the ns/op timing).
#
# Usage: scripts/bench-api-callgrind.sh [--json] [BUILD_DIR] [ITERATIONS]
#   BUILD_DIR defaults to build-bench (must contain bench_api), ITERATIONS to 10.
set -euo pipefail
json=0
if [[ "${1:-}" == "--json" ]]; then json=1; shift; fi
build=${1:-build-bench}
iters=${2:-10}
bin="$build/bench_api"
[[ -x "$bin" ]] || { echo "no $bin; build it: cmake --build $build --target bench_api" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() { # variant -> Ir inside bench_api_loop_<variant>
	local v=$1 out="$tmp/cg.$1"
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		--toggle-collect="bench_api_loop_$v" \
		"$bin" --variant "$v" --iterations "$iters" >"$tmp/log.$v" 2>&1 ||
		{ cat "$tmp/log.$v" >&2; exit 1; }
	# Callgrind writes "summary: <Ir>" (older versions: "totals: <Ir>").
	awk '/^summary:|^totals:/ { print $2; exit }' "$out"
}
objects=$("$bin" --variant new --iterations 0 | sed -n 's/.*, \([0-9]*\) objects.*/\1/p')
legacy=$(count legacy)
new=$(count new)
pct=$(awk -v a="$legacy" -v b="$new" 'BEGIN { printf "%.2f", 100 * (b - a) / a }')
lpo=$(awk -v a="$legacy" -v n="$objects" -v i="$iters" 'BEGIN { printf "%.1f", a / (n * i) }')
npo=$(awk -v a="$new" -v n="$objects" -v i="$iters" 'BEGIN { printf "%.1f", a / (n * i) }')
if [[ $json == 1 ]]; then
	printf '{"bench": "api_callgrind", "objects": %s, "iterations": %s, "legacy_instructions": %s, "new_instructions": %s, "legacy_instr_per_object": %s, "new_instr_per_object": %s, "new_vs_legacy_pct": %s}\n' \
		"$objects" "$iters" "$legacy" "$new" "$lpo" "$npo" "$pct"
else
	echo "callgrind instructions, $objects objects x $iters iterations (one read + one write per object),"
	echo "setup excluded (--toggle-collect on the loop function):"
	printf '  %-7s %14s  %8s instr/object\n' legacy "$legacy" "$lpo"
	printf '  %-7s %14s  %8s instr/object\n' new "$new" "$npo"
	echo "  new vs legacy: ${pct}% (seed 004: -27.97% +/- 0.01%, perf stat on the kernel module)"
fi
