#!/usr/bin/env bash
# Owner: trace replay.  Replays every committed kernel trace
# (tests/data/*.xz, recorded with zram-trace / zram-trace-mix on Linux 6.18)
# with BUILD_DIR/zs replay, under each zs_free policy, deferred free, checked
# mode, and through the zram store (--store, contents read back): all of them
# must give the kernel's page counts record for record.  Also checks
# that replay rejects bad input with exit status 2, and the experiments that
# are not parity: --backend zblock (exit 0, zblock's pages against the
# kernel's) and --sweep (every trace over chain 8's configurations and zblock;
# its kernel row must be the trace's own pages).
# The zswap-traces have their own test, tests/cli/replay_zswap.sh.
# Usage: bash tests/cli/replay.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/replay.sh BUILD_DIR}
zs=$build/zs
here=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0
if [ ! -x "$zs" ]; then
	echo "replay: $zs not built"
	echo "0 passed, 1 failed"
	exit 1
fi
shopt -s nullglob
traces=()
for t in "$here"/data/*.xz; do
	# zswap-traces (recorded ones may be .xz too) are tests/cli/replay_zswap.sh's
	[[ $(basename "$t") == zswap-* ]] || traces+=("$t")
done
if [ ${#traces[@]} -lt 4 ]; then
	echo "replay: expected at least 4 traces in tests/data, found ${#traces[@]}"
	fail=$((fail + 1))
fi
for t in "${traces[@]}"; do
	for mode in "" "--free-mode class" "--free-mode class-unlocked" "--deferred" "--checked" \
		"--store --verify" "--free-mode page-deferred" "--free-mode percpu-deferred" \
		"--free-mode percpu-deferred --checked"; do
		# shellcheck disable=SC2086
		out=$("$zs" replay "$t" $mode 2>&1)
		rc=$?
		first=$(printf '%s\n' "$out" | head -1)
		if [ $rc -eq 0 ] && [[ $first == *" mismatches 0" ]]; then
			pass=$((pass + 1))
			echo "ok   $(basename "$t") ${mode:-(pool)}: $first"
		else
			fail=$((fail + 1))
			echo "FAIL $(basename "$t") ${mode:-(pool)} (exit $rc):"
			printf '%s\n' "$out" | head -40 | sed 's/^/    /'
		fi
	done
done

# Bad input: each must exit 2 with a message, never crash.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '# zram-trace 1\n# page_size 4096\nw 1 100 n\n= 1 0 1 100 0 0\nw 2 x n\n' > "$tmp/parse"
printf '# zram-trace 1\n# page_size 4096\n= 1 0 1 100 0 0\n' > "$tmp/orphan"
printf '# zram-trace 1\n# page_size 5000\nw 1 100 n\n= 1 0 1 100 0 0\n' > "$tmp/pagesize"
printf '# zram-trace 1\n# page_size 4096\nw 1 4097 n\n= 1 0 1 4097 0 0\n' > "$tmp/size"
: > "$tmp/empty"
head -c 4000 /dev/urandom > "$tmp/random"
if [ ${#traces[@]} -gt 0 ]; then
	head -c 20000 "${traces[0]}" > "$tmp/truncated.xz"
fi
for f in "$tmp"/* /nonexistent/trace; do
	"$zs" replay "$f" > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 2 ] && [ -s "$tmp/out.txt" ]; then
		pass=$((pass + 1))
		echo "ok   bad input $(basename "$f"): $(tail -1 "$tmp/out.txt")"
	else
		fail=$((fail + 1))
		echo "FAIL bad input $(basename "$f"): exit $rc (want 2)"
	fi
done
# A mismatch must be reported with exit 1 when parity is demanded (--strict:
# replaying chain-8 traces at chain 4); without --strict a non-kernel policy
# is an experiment: exit 0 and a line saying why the records differ.
if [ ${#traces[@]} -gt 0 ]; then
	"$zs" replay "${traces[0]}" --chain 4 --strict > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q "^mismatch at record" "$tmp/out.txt"; then
		pass=$((pass + 1))
		echo "ok   mismatches detected: $(head -1 "$tmp/out.txt") (--chain 4 --strict)"
	else
		fail=$((fail + 1))
		echo "FAIL --chain 4 --strict replay: exit $rc, want 1 with a mismatch report"
	fi
	"$zs" replay "${traces[0]}" --chain 4 > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q "expected: not the kernel's policy: chain 4" "$tmp/out.txt" &&
		grep -q "^  this policy" "$tmp/out.txt"; then
		pass=$((pass + 1))
		echo "ok   policy experiment: $(head -1 "$tmp/out.txt")"
	else
		fail=$((fail + 1))
		echo "FAIL --chain 4 replay: exit $rc, want 0 and 'not the kernel's policy'"
		head -5 "$tmp/out.txt" | sed 's/^/    /'
	fi
fi

# zblock: an experiment, exit 0, with its pages against the kernel's.
for t in "${traces[@]}"; do
	out=$("$zs" replay "$t" --backend zblock 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [[ $out == *"not the kernel's policy: backend zblock"* ]] &&
		printf '%s\n' "$out" | grep -q "^  zblock/kernel "; then
		pass=$((pass + 1))
		echo "ok   $(basename "$t") --backend zblock: $(printf '%s\n' "$out" | grep "^  zblock/kernel" | sed 's/  */ /g')"
	else
		fail=$((fail + 1))
		echo "FAIL $(basename "$t") --backend zblock (exit $rc):"
		printf '%s\n' "$out" | head -10 | sed 's/^/    /'
	fi
done
# The sweep: chain 8's six zsmalloc configurations and zblock on every trace
# (for CI time; tests/cli/replay_zswap.sh sweeps the whole grid of 97 on a
# smaller trace): the kernel's row is exact (its mean is the kernel's,
# x 1.0000) and some row is Pareto-optimal.
for t in "${traces[@]}"; do
	narrow=(--chain 8) n=7
	out=$("$zs" replay "$t" --sweep "${narrow[@]}" 2>&1)
	rc=$?
	krow=$(printf '%s\n' "$out" | grep -E '^  K[ *] ')
	kmean=$(printf '%s\n' "$out" | sed -n 's/.*pool pages peak [0-9]*, mean \([0-9.]*\),.*/\1/p')
	if [ $rc -eq 0 ] && [[ $out == *"sweep of $n configurations"* ]] && [ -n "$kmean" ] &&
		[[ $krow == *" $kmean "*" 1.0000 |"* ]] && printf '%s\n' "$out" | grep -qE '^  .\* '; then
		pass=$((pass + 1))
		echo "ok   $(basename "$t") --sweep ${narrow[*]}: $n configurations, kernel row:$(printf '%s' "$krow" | sed 's/  */ /g')"
	else
		fail=$((fail + 1))
		echo "FAIL $(basename "$t") --sweep ${narrow[*]} (exit $rc):"
		printf '%s\n' "$out" | head -12 | sed 's/^/    /'
	fi
done
if [ ${#traces[@]} -gt 0 ] && command -v python3 > /dev/null; then
	"$zs" replay "${traces[0]}" --sweep --chain 8 --json > "$tmp/sweep.json" 2> "$tmp/sweep.err"
	rc=$?
	if [ $rc -eq 0 ] && python3 - "$tmp/sweep.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 7, len(rows)
k = [r for r in rows if r["kernel_config"]]
assert len(k) == 1 and k[0]["differing_records"] == 0 and k[0]["pages_mean_vs_kernel"] == 1.0, k
z = [r for r in rows if r["backend"] == "zblock"]
assert len(z) == 1 and z[0]["chain"] is None and z[0]["spanning_peak"] == 0, z
EOF
	then
		pass=$((pass + 1))
		echo "ok   --sweep --chain 8 --json: 7 rows, the kernel's exact, zblock's never spanning"
	else
		fail=$((fail + 1))
		echo "FAIL --sweep --json (exit $rc)"
		head -c 600 "$tmp/sweep.json" | sed 's/^/    /'
	fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
