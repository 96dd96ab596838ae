#!/usr/bin/env bash
# layout-callgrind.sh: instructions per allocate + write + free of
# bench_layout's rows, counted by callgrind, for docs/benchmarks.md section 5.
# Two runs of one row that differ only in --r (2 and 6 rounds of 20,000
# objects) cancel the setup, so (Ir(r6) - Ir(r2)) / 80,000 is the per-op
# cost.  Each --r runs three times and the smallest count is kept: the purge
# thread can look at the pool inside a run and add to it.  The run is pinned
# to one CPU, 0 unless --cpu says otherwise (a thread that moves between the
# page cache's per-CPU lists adds 0-30 an op, and the count differs by about
# one an op from one CPU to another), with a 1 h page decay (no purge of the
# parked pages).
# With --functions the per-op difference is also split by function
# (callgrind_annotate's self counts; a line inlined from a header counts
# with the function it is in), largest first.
#
# Usage: scripts/layout-callgrind.sh [--functions] [--cpu N] BUILD_DIR ROW...
#   ROW: app, pair, bound, mimalloc (bench_layout --only).  BUILD_DIR holds
#   bench_layout, built Release with -g for --functions.
set -euo pipefail
funcs=0
cpu=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--functions) funcs=1; shift ;;
	--cpu) cpu=$2; shift 2 ;;
	*) break ;;
	esac
done
build=${1:?usage: scripts/layout-callgrind.sh [--functions] [--cpu N] BUILD_DIR ROW...}
shift
[[ $# -gt 0 ]] || { echo "name at least one row: app pair bound mimalloc" >&2; exit 2; }
bin="$build/bench_layout"
[[ -x "$bin" ]] || { echo "no $bin; build it: cmake --build $build --target bench_layout" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# row r -> the smallest Ir of three runs; its callgrind file kept as $tmp/ROW.R
count() {
	local row=$1 r=$2 best= k ir
	for k in 1 2 3; do
		ZS_PAGES_DECAY_MS=3600000 taskset -c "$cpu" valgrind --tool=callgrind \
			--callgrind-out-file="$tmp/cg.$k" "$bin" --only "$row" --rounds 1 --r "$r" \
			>"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
		ir=$(awk '/^summary:|^totals:/ { print $2; exit }' "$tmp/cg.$k")
		if [[ -z $best || $ir -lt $best ]]; then
			best=$ir
			cp "$tmp/cg.$k" "$tmp/$row.$r"
		fi
	done
	echo "$best"
}

for row in "$@"; do
	a=$(count "$row" 2)
	b=$(count "$row" 6)
	awk -v row="$row" -v a="$a" -v b="$b" \
		'BEGIN { printf "%-9s %.1f instructions an op ((%d - %d) / 80000)\n", row, (b - a) / 80000, b, a }'
	if [[ $funcs == 1 ]]; then
		for r in 2 6; do
			callgrind_annotate --auto=no --inclusive=no --threshold=100 "$tmp/$row.$r" |
				awk '/^ *[0-9,]+ +\(/ && !/PROGRAM TOTALS/ { n = $1; gsub(",", "", n);
				     f = $0; sub(/^[^)]*\) +/, "", f); sub(/ \[.*$/, "", f);
				     sub(/^.*:/, "", f); s[f] += n }
				     END { for (f in s) print f, s[f] }' >"$tmp/f.$r"
		done
		awk 'NR == FNR { a[$1] = $2; next } { d = ($2 - a[$1]) / 80000;
		     if (d >= 0.5 || d <= -0.5) printf "  %8.1f  %s\n", d, $1 }' \
			"$tmp/f.2" "$tmp/f.6" | sort -rn
	fi
done
