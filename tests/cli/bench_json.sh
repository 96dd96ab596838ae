#!/usr/bin/env bash
# Owner: every benchmark's --json output.  Each bench in bench/ runs with
# --quick --json (and options that keep it to seconds on 2 cores) and its
# output must be one JSON document Python's json.load accepts, naming its
# bench: tools/report/report.py and any other reader parse these, never the text tables.
# Timings are not checked (benchmarks are never timed tests).  Kernel sides
# (root + zram) are switched off: a test must not hot-add devices or swap.
# Usage: bash tests/cli/bench_json.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/bench_json.sh BUILD_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 skip=0

# Extra options per bench, beyond --quick --json.
opts_for() {
	case $1 in
	bench_threads) echo "--threads 1 --rows zs-pool,glibc --n 2000 --r 2 --slots 1024 --ops 20000" ;;
	bench_region) echo "--no-kernel --mib 4 --procs 1" ;;
	bench_zram) echo "--no-kernel --max 2" ;;
	bench_release) echo "--mib 4 --threads 1,2" ;;
	bench_deferred) echo "--mib 8" ;;
	bench_free_modes) echo "--mib 4 --rounds 1" ;;
	bench_chain) echo "--input-mib 2" ;;
	bench_sg) echo "--input-mib 2" ;;
	*) echo "" ;;
	esac
}

n=0
for src in bench/bench_*.c; do
	name=$(basename "$src" .c)
	exe=$build/$name
	if [ ! -x "$exe" ]; then
		fail=$((fail + 1)); echo "FAIL $name: not built ($exe)"; continue
	fi
	n=$((n + 1))
	# shellcheck disable=SC2046
	timeout 120 "$exe" --quick --json $(opts_for "$name") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 0 ] && grep -qE "not permitted|need root" "$tmp/err"; then
		# e.g. bench_region without userfaultfd rights: it says so and measures nothing.
		skip=$((skip + 1)); echo "skip $name: $(head -1 "$tmp/err")"
		continue
	fi
	if [ $rc -ne 0 ]; then
		fail=$((fail + 1)); echo "FAIL $name --quick --json: exit $rc"; head -3 "$tmp/err" | sed 's/^/    /'
		continue
	fi
	if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, dict) and d.get("bench"), "no bench name"
print(len(d), "keys" + (", %d rows" % len(d["rows"]) if "rows" in d else ""))' "$tmp/out" >"$tmp/py" 2>&1; then
		pass=$((pass + 1)); echo "ok   $name --quick --json: $(cat "$tmp/py")"
	else
		fail=$((fail + 1)); echo "FAIL $name --quick --json does not parse: $(tail -1 "$tmp/py")"
		head -c 300 "$tmp/out" | sed 's/^/    /'; echo
	fi
done
[ $n -gt 0 ] || { echo "no benches found under bench/"; exit 1; }
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
