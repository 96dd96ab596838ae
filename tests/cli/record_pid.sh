#!/usr/bin/env bash
# Owner: `zs record --pid PID` (tools/cmd_record.c).  A python3 that has
# built dicts, strings and floats is recorded through a fresh kernel zram
# device (its anonymous memory read through /proc/PID/mem), with the fill
# and the mix workloads; each trace must replay with 0 mismatches, name the
# process in its '# data' header, and leave no zram device behind.  Usage
# errors (--pid with FILEs, a process that does not exist, --pid with
# --zswap) must exit 2 with a message, root or not.
# Exits 77 (ctest: skipped) when not root, without zram or without python3.
# Usage: bash tests/cli/record_pid.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/record_pid.sh BUILD_DIR}
zs=$build/zs
[ -x "$zs" ] || { echo "record_pid: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/zs-record-pid.XXXXXX)
pypid=
trap '[ -n "$pypid" ] && kill "$pypid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; printf '%s\n' "$@" | head -20 | sed 's/^/    /'; }

# usage errors: before anything touches the kernel
refuse() {
	local what=$1 want=$2; shift 2
	"$zs" record -o "$tmp/x.trace" "$@" > "$tmp/out" 2>&1
	local rc=$?
	if [ "$rc" = 2 ] && grep -q -- "$want" "$tmp/out"; then
		ok "$what: exit 2 ($(head -1 "$tmp/out"))"
	else
		bad "$what: exit $rc" "$(cat "$tmp/out")"
	fi
}
refuse "--pid with a FILE" "takes no FILE" --pid $$ /usr/bin
refuse "--pid of no process" "no such process" --pid 4194303
refuse "--pid with --zswap" "zram option" --zswap --pid $$

if [ "$(id -u)" != 0 ] || [ ! -e /sys/class/zram-control/hot_add ] || ! command -v python3 > /dev/null; then
	echo "record_pid: $pass passed, $fail failed; recording skipped (needs root, zram, python3)"
	[ "$fail" = 0 ] || exit 1
	exit 77
fi

# The process: its heap holds real Python objects when it says ready.
mkfifo "$tmp/in"
python3 -c '
import random, sys
random.seed(7)
d = {i: ("k%d" % i) * (i % 7 + 1) for i in range(200000)}
l = [random.random() for _ in range(300000)]
s = [str(x) * 3 for x in range(60000)]
print("ready", flush=True)
sys.stdin.read()
' < "$tmp/in" > "$tmp/py.out" &
pypid=$!
exec 9> "$tmp/in"
for _ in $(seq 100); do grep -q ready "$tmp/py.out" 2> /dev/null && break; sleep 0.1; done
grep -q ready "$tmp/py.out" || { bad "python3 did not start"; exit 1; }

devs_before=$(ls -d /sys/block/zram* 2> /dev/null | wc -l)
for w in fill mix; do
	t=$tmp/pid-$w.trace
	if ! "$zs" record -o "$t" --pid "$pypid" --pages 6000 --workload "$w" --ops 4000 \
		> "$tmp/rec.log" 2>&1; then
		bad "record --pid $pypid --workload $w" "$(cat "$tmp/rec.log")"
		continue
	fi
	grep -q "^# data pid $pypid anon pages" "$t" && ok "$w: header names the process" ||
		bad "$w: header" "$(grep '^# data' "$t")"
	if "$zs" replay "$t" > "$tmp/rep" 2>&1 && grep -q 'mismatches 0' "$tmp/rep"; then
		ok "$w: $(head -1 "$tmp/rep" | sed "s|$tmp/||")"
	else
		bad "$w: replay" "$(head -12 "$tmp/rep")"
	fi
done
devs_after=$(ls -d /sys/block/zram* 2> /dev/null | wc -l)
[ "$devs_after" = "$devs_before" ] && ok "zram devices: $devs_after before and after" ||
	bad "zram devices: $devs_before before, $devs_after after"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
