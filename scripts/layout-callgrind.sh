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
# With --cache the same difference is taken of cachegrind's simulated cache
# misses instead (one run each; a 48 KiB 12-way first level and a 2 MiB
# 16-way last level, about this VM's L1d and a share of its L2): data reads
# and writes that miss each level, an op.  The write misses are mostly the
# copy's (about 30 lines an op for either allocator); the read misses are
# the memory an allocator's own paths touch, which this VM's missing
# hardware counters cannot show.  With --functions too, the last-level read
# misses are split by function.
#
# Usage: scripts/layout-callgrind.sh [--functions] [--cache] [--cpu N] BUILD_DIR ROW...
#   ROW: app, pair, bound, mimalloc (bench_layout --only).  BUILD_DIR holds
#   bench_layout, built Release with -g for --functions.
set -euo pipefail
funcs=0
cache=0
cpu=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--functions) funcs=1; shift ;;
	--cache) cache=1; shift ;;
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

# row -> per-op read/write misses of each level, from cachegrind runs at --r 2 and 6
misses() {
	local row=$1 r
	for r in 2 6; do
		ZS_PAGES_DECAY_MS=3600000 taskset -c "$cpu" valgrind --tool=cachegrind --cache-sim=yes \
			--D1=49152,12,64 --LL=2097152,16,64 --cachegrind-out-file="$tmp/cm.$row.$r" \
			"$bin" --only "$row" --rounds 1 --r "$r" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
	done
	# summary: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
	awk -v row="$row" '/^summary:/ { for (i = 2; i <= NF; i++) v[FILENAME, i] = $i; f[++n] = FILENAME }
	     END { a = f[1]; b = f[2]; d = 80000
		   printf "%-9s reads %.1f: %.2f miss the first level, %.2f the last; writes %.1f: %.2f, %.2f (an op)\n",
			  row, (v[b,5] - v[a,5]) / d, (v[b,6] - v[a,6]) / d, (v[b,7] - v[a,7]) / d,
			  (v[b,8] - v[a,8]) / d, (v[b,9] - v[a,9]) / d, (v[b,10] - v[a,10]) / d }' \
		"$tmp/cm.$row.2" "$tmp/cm.$row.6"
	if [[ $funcs == 1 ]]; then
		for r in 2 6; do
			cg_annotate --auto=no --show=DLmr --sort=DLmr "$tmp/cm.$row.$r" 2>/dev/null |
				awk '/^ *[0-9,]+ +\(/ && !/PROGRAM TOTALS/ { n = $1; gsub(",", "", n);
				     f = $NF; sub(/^.*:/, "", f); s[f] += n }
				     END { for (f in s) print f, s[f] }' >"$tmp/m.$r"
		done
		awk 'NR == FNR { a[$1] = $2; next } { d = ($2 - a[$1]) / 80000;
		     if (d >= 0.02 && $1 != "annotated") printf "  %8.2f  %s\n", d, $1 }' "$tmp/m.2" "$tmp/m.6" | sort -rn
	fi
}

for row in "$@"; do
	if [[ $cache == 1 ]]; then
		misses "$row"
		continue
	fi
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
