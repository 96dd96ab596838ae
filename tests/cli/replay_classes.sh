#!/usr/bin/env bash
# Owner: the per-class comparison of `zs replay` ('k' lines, tools/replay/
# replay_classes.c) and its capture in `zs record` (tools/lib/kclasses.c).
# This kernel has CONFIG_ZSMALLOC_STAT off, so no real class table can be
# recorded here; the comparison is tested on traces that carry libzs's own
# tables (`zs replay --classes-out`): they replay with 0 mismatches and every
# snapshot compared; one number changed, or one row left out, is a mismatch
# naming the class; a 'k' line out of place is refused.  With root and zram,
# a fresh recording must say in its header why it has no tables.
# Usage: bash tests/cli/replay_classes.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/replay_classes.sh BUILD_DIR}
zs=$build/zs
data=$(cd "$(dirname "$0")/.." && pwd)/data
[ -x "$zs" ] || { echo "replay_classes: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/zs-replay-classes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

for t in mix-text-lz4 heap-lzorle; do
	k=$tmp/$t.k.trace
	if ! "$zs" replay "$data/$t.trace.xz" --classes-out "$k" > "$tmp/out" 2>&1; then
		bad "$t: --classes-out" "$(cat "$tmp/out")"
		continue
	fi
	"$zs" replay "$k" > "$tmp/out" 2>&1
	rc=$?
	line=$(grep 'class tables:' "$tmp/out")
	if [ "$rc" = 0 ] && grep -q 'mismatches 0$' "$tmp/out" &&
	   printf '%s' "$line" | grep -Eq ' [1-9][0-9]* snapshots, [1-9][0-9]* rows .* 0 mismatches'; then
		ok "$t with libzs's tables: ${line#  }"
	else
		bad "$t with libzs's tables: exit $rc" "$(cat "$tmp/out")"
	fi
	# one number changed: the 40th 'k' line's objects used, plus one
	awk 'BEGIN { n = 0 } /^k / && ++n == 40 { $4 = $4 + 1 } { print }' "$k" > "$tmp/changed"
	cls=$(grep '^k ' "$k" | sed -n 40p | cut -d' ' -f2)
	"$zs" replay "$tmp/changed" > "$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = 1 ] && grep -q "class $cls: objects used" "$tmp/out" &&
	   grep -q ' 1 mismatches$' "$tmp/out"; then
		ok "$t: a changed row is one mismatch naming class $cls"
	else
		bad "$t: changed row (class $cls): exit $rc" "$(cat "$tmp/out")"
	fi
	# one row left out
	awk 'BEGIN { n = 0 } /^k / && ++n == 40 { next } { print }' "$k" > "$tmp/dropped"
	"$zs" replay "$tmp/dropped" > "$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = 1 ] && grep -q "class $cls: left out of the kernel's table" "$tmp/out"; then
		ok "$t: a row left out is a mismatch naming class $cls"
	else
		bad "$t: dropped row (class $cls): exit $rc" "$(cat "$tmp/out")"
	fi
done

# a 'k' line after an operation (not after its '=' record) is refused
awk '/^w / && !done { print; print "k 3 1 1 1"; done = 1; next } { print }' \
	"$tmp/mix-text-lz4.k.trace" > "$tmp/misplaced"
"$zs" replay "$tmp/misplaced" > "$tmp/out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "must follow an '=' record" "$tmp/out"; then
	ok "a 'k' line out of place: exit 2 with the reason"
else
	bad "misplaced 'k' line: exit $rc" "$(cat "$tmp/out")"
fi
printf '%s\n' '# zram-trace 1' 'w 0 100 n' '= 1 0 1 100 0 0' 'k 5 x 1 1' > "$tmp/malformed"
"$zs" replay "$tmp/malformed" > "$tmp/out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "bad class line" "$tmp/out"; then
	ok "a malformed 'k' line: exit 2 with the reason"
else
	bad "malformed 'k' line: exit $rc" "$(cat "$tmp/out")"
fi

# with root and zram: this kernel's header says why the trace has no tables
if [ "$(id -u)" = 0 ] && [ -e /sys/class/zram-control/hot_add ]; then
	if "$zs" record -o "$tmp/rec.trace" --pages 200 /usr/bin > "$tmp/out" 2>&1; then
		if [ -e /sys/kernel/debug/zsmalloc ]; then
			if grep -q '^k ' "$tmp/rec.trace" && "$zs" replay "$tmp/rec.trace" > "$tmp/out" 2>&1; then
				ok "recorded with the kernel's tables: $(grep 'class tables' "$tmp/out")"
			else
				bad "kernel with debugfs tables: replay" "$(cat "$tmp/out")"
			fi
		elif grep -q '^# classes none (no /sys/kernel/debug/zsmalloc/zram[0-9]*/classes' \
			"$tmp/rec.trace" && ! grep -q '^k ' "$tmp/rec.trace"; then
			ok "fresh recording: $(grep '^# classes' "$tmp/rec.trace")"
		else
			bad "fresh recording's classes header" "$(grep '^#' "$tmp/rec.trace")"
		fi
	else
		bad "zs record" "$(cat "$tmp/out")"
	fi
else
	echo "SKIP fresh recording: needs root and zram"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
