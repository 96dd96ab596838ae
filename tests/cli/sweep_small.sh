#!/usr/bin/env bash
# Owner: `zs replay --sweep`'s small-trace rule (tools/replay/replay_sweep.c).  Every
# size class in use keeps up to one partly used zspage; when those can hold
# more than 2% of the kernel's mean pool pages, short chains win the sweep
# because the trace is small, not because of the workload, and the sweep
# must say so (table, stderr, JSON trace_too_small).  Every committed zram
# trace is small (under 7,000 pool pages at peak) and must be flagged.  With
# root and zram, a fresh 200,000-page recording (about 88,000 pool pages on
# the mean, 0.7%) must not be, and an 8,000-page one must.
# Usage: bash tests/cli/sweep_small.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/sweep_small.sh BUILD_DIR}
zs=$build/zs
[ -x "$zs" ] || { echo "sweep_small: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/zs-sweep-small.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 skipped=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

# sweep TRACE WANT: a sweep narrowed to the kernel point (the rule is its) must warn (WANT=1) or not (0).
sweep() {
	local t=$1 want=$2 got=0
	"$zs" replay --sweep --chain-policy exhaustive --delta 16 --backend zsmalloc --chain 8 \
		"$t" > "$tmp/out" 2> "$tmp/err"
	local rc=$?
	[ "$rc" = 0 ] || { bad "$t: sweep exit $rc" "$(cat "$tmp/err")"; return; }
	grep -q 'warning: trace too small' "$tmp/out" && got=1
	local share
	share=$(grep -o '[0-9.]*% of the' "$tmp/out" | head -1)
	if [ "$got" != "$want" ]; then
		bad "$t: too-small warning $got, want $want ($share)" "$(tail -6 "$tmp/out")"
		return
	fi
	if [ "$want" = 1 ] && ! grep -q 'too small for the sweep' "$tmp/err"; then
		bad "$t: warning missing on stderr" "$(cat "$tmp/err")"
		return
	fi
	"$zs" replay --sweep --json --chain-policy exhaustive --delta 16 --backend zsmalloc \
		--chain 8 "$t" > "$tmp/json" 2> /dev/null
	local jwant=false
	[ "$want" = 1 ] && jwant=true
	if ! grep -q "\"trace_too_small\": *$jwant" "$tmp/json"; then
		bad "$t: JSON trace_too_small is not $jwant" "$(head -c 600 "$tmp/json")"
		return
	fi
	ok "$t: warning $want (partly used zspages up to $share mean pool pages)"
}

for t in tests/data/heap-lzorle.trace.xz tests/data/mix-text-lz4.trace.xz \
	tests/data/usrlib-lz4.trace.xz; do
	sweep "$t" 1
done

if [ "$(id -u)" != 0 ] || [ ! -e /sys/class/zram-control/hot_add ]; then
	echo "skip recorded 8,000- and 200,000-page traces: needs root and zram"
	skipped=1
else
	for p in 8000 200000; do
		if "$zs" record -o "$tmp/r$p.trace" --comp lz4 --pages "$p" /usr/lib /usr/bin /usr/share \
			> "$tmp/rec.log" 2>&1; then
			sweep "$tmp/r$p.trace" $([ "$p" = 8000 ] && echo 1 || echo 0)
		else
			bad "zs record --pages $p" "$(tail -5 "$tmp/rec.log")"
		fi
		rm -f "$tmp/r$p.trace"
	done
fi
echo "$pass passed, $fail failed$([ "$skipped" = 1 ] && echo ", recorded traces skipped")"
[ "$fail" = 0 ]
