#!/usr/bin/env bash
# Owner: examples/trace_replay.c, the copyable replay of a user's own trace.
# It must agree with the kernel on every recorded trace in tests/data (each
# '=' record's mem_used pages, as `zs replay` checks) and read as many
# records as the tool's own reader (tools/lib/trace.c) does.
# Usage: bash tests/cli/trace_replay_example.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/trace_replay_example.sh BUILD_DIR}
ex=$build/example_trace_replay
[ -x "$ex" ] || { echo "skip: $ex not built (ZS_EXAMPLES off)"; exit 77; }
command -v xz >/dev/null || { echo "skip: no xz to decompress the traces"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
for t in tests/data/*.trace.xz; do
	# the example replays zram-traces; zswap-traces are tests/cli/replay_zswap.sh's
	xz -dc "$t" | head -5 | grep -q '^# zswap-trace' && continue
	xz -dc "$t" | "$ex" - >"$tmp/out" 2>&1
	rc=$?
	want=$("$build/zs" replay --json "$t" | python3 -c 'import json, sys; print(json.load(sys.stdin)["records"])')
	if [ $rc -eq 0 ] && grep -q " $want records, 0 mem_used mismatches" "$tmp/out"; then
		pass=$((pass + 1)); echo "ok   $(basename "$t"): $(cat "$tmp/out")"
	else
		fail=$((fail + 1)); echo "FAIL $(basename "$t") (exit $rc, zs replay: $want records):"
		sed 's/^/    /' "$tmp/out" | head -5
	fi
done
# A malformed line is an error, not a silent skip.
printf '# zram-trace 1\nw 0 100 n\n= 1 0 1 100 0 0\nx 1\n' | "$ex" - >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "line 4: not a trace record" "$tmp/out"; then
	pass=$((pass + 1)); echo "ok   malformed line -> exit 2"
else
	fail=$((fail + 1)); echo "FAIL malformed line -> exit $rc"; cat "$tmp/out"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
