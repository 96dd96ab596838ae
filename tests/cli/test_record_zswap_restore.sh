#!/usr/bin/env bash
# Owner: `zs record --zswap` (tools/record/record_zswap.c; the restore is
# tools/record/record_zswap_setup.c), the ways out.
# Every way a recording can end must leave the kernel's settings as they
# were: a setup error (swap file on tmpfs, swap file that exists), a run
# spoilt by another process swapping (a rogue MADV_PAGEOUT loop, with
# --attempts 2: the recorder starts over once, then gives up), SIGTERM and
# SIGINT mid-run (exit by the signal, trace marked "ended early"), SIGTERM
# and --lock-wait while waiting for the lock, and SIGKILL mid-run (settings
# stay changed, recorded in /run/libzs-kernel-zswap.state; the next run
# restores them first).  After each case the settings (zswap parameters,
# vm.page-cluster, /proc/swaps, debugfs mount, memcgs, state file) are
# compared with a snapshot taken before.  The test holds the project's zswap
# lock throughout (the recorder gets it with --lock-fd; the lock-wait cases
# run without it and find it taken), so no other user's run interleaves.
# Exits 77 (ctest: skipped) without root or zswap, or when the lock stays
# busy for ZS_LOCK_WAIT seconds (default 600).
# Usage: bash tests/cli/test_record_zswap_restore.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/test_record_zswap_restore.sh BUILD_DIR}
zs=$build/zs
LOCK=/run/libzs-kernel-zswap.lock
STATE=/run/libzs-kernel-zswap.state
wait_s=${ZS_LOCK_WAIT:-600}
skip() { echo "SKIP test_record_zswap_restore: $*"; exit 77; }
[ -x "$zs" ] || { echo "test_record_zswap_restore: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (swap file, zswap parameters, debugfs)"
[ -e /sys/module/zswap/parameters/enabled ] || skip "no zswap in this kernel (CONFIG_ZSWAP)"

tmp=$(mktemp -d /tmp/zs-record-zswap-restore.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   [$SECONDS s] $*"; }
bad() {
	fail=$((fail + 1)); echo "FAIL $1"; shift
	printf '%s\n' "$@" | head -40 | sed 's/^/    /'
}

snapshot() {
	for f in /sys/module/zswap/parameters/*; do echo "$f=$(cat "$f")"; done
	echo "vm.page-cluster=$(cat /proc/sys/vm/page-cluster)"
	echo "swaps:"; tail -n +2 /proc/swaps
	echo "debugfs mounts: $(grep -c " /sys/kernel/debug debugfs " /proc/mounts)"
	echo "memcgs: $(ls /sys/fs/cgroup/memory 2> /dev/null | grep -c libzs-record)"
	echo "state file: $(ls /run/libzs-kernel-zswap.state 2> /dev/null)"
}
# The whole test holds the project's zswap lock (fd 9; the recorder runs with
# --lock-fd 9), so no other user's run falls between a snapshot and a check.
exec 9> "$LOCK"
flock -w "$wait_s" 9 || skip "$LOCK busy for ${wait_s}s (another user of the kernel's zswap)"
[ -e "$STATE" ] && skip "$STATE exists: an earlier run was killed; run zs record --zswap once to restore"
for f in /run/libzs-*.state; do
	[ -e "$f" ] && skip "$f exists: another tool's run did not restore its settings"
done
[ "$(cat /sys/kernel/debug/zswap/stored_pages 2> /dev/null || echo 0)" = 0 ] ||
	skip "zswap holds pages already (another swap user): the recorder would refuse"
before=$(snapshot)
# same CASE: the settings read as before
same() {
	local now
	now=$(snapshot)
	if [ "$now" = "$before" ]; then ok "$1: every setting as before"
	else bad "$1: settings differ" "$(diff <(echo "$before") <(echo "$now"))"; fi
}

libs=/usr/lib/x86_64-linux-gnu
[ -d "$libs" ] || libs=/usr/lib
# A long run (the mix alone would take minutes): stopped by the cases below.
long=(--pages 3000 --ops 100000000 --lock-fd 9 "$libs")

# started CASE PID TRACE: wait until the recorder has written 20 state records
# (it is past the setup: swap on, zswap enabled); 0, or 1 if it ended first.
started() {
	local i n
	for ((i = 0; i < wait_s * 10; i++)); do
		n=$(grep -c '^= ' "$3" 2> /dev/null)
		[ "${n:-0}" -ge 20 ] && return 0
		if ! kill -0 "$2" 2> /dev/null; then
			if grep -q "something else on this machine" "$3.log"; then
				echo "skip $1: every attempt was spoilt by another process swapping (not this test's)"
			else
				bad "$1: the recorder ended before recording" "$(cat "$3.log")"
			fi
			return 1
		fi
		sleep 0.1
	done
	bad "$1: no records after ${wait_s}s" "$(cat "$3.log")"
	return 1
}

# --- setup errors ---
out=$("$zs" record --zswap -o "$tmp/e1.trace" --lock-fd 9 --swap-file /dev/shm/zs-record-test.swap --pages 50 "$libs" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "tmpfs" <<< "$out" && [ ! -e /dev/shm/zs-record-test.swap ]; then
	ok "swap file on tmpfs: exit 2: $(head -1 <<< "$out")"
else
	bad "swap file on tmpfs (exit $rc, want 2 and a message naming tmpfs)" "$out"
fi
same "swap file on tmpfs"

echo "not a swap file" > "$tmp/exists.swap"
out=$("$zs" record --zswap -o "$tmp/e2.trace" --lock-fd 9 --swap-file "$tmp/exists.swap" --pages 50 "$libs" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "exists already" <<< "$out" && [ "$(cat "$tmp/exists.swap")" = "not a swap file" ]; then
	ok "swap file exists: exit 2, the file untouched: $(grep exists <<< "$out")"
else
	bad "swap file exists (exit $rc, want 2, 'exists already', the file as it was)" "$out"
fi
same "swap file exists"

# --- another process swapping during the run ---
# A rogue that pages its own memory out all the time (MADV_PAGEOUT = 21); a
# no-op until the recorder's swap is on, then every page-out goes to zswap.
if command -v python3 > /dev/null; then
	python3 -c '
import mmap, time
m = mmap.mmap(-1, 4096 * 64)
while True:
    for i in range(64):
        m[i * 4096] = (m[i * 4096] + 1) % 256
    m.madvise(21)
    time.sleep(0.002)
' &
	rogue=$!
	pids+=("$rogue")
	out=$("$zs" record --zswap -o "$tmp/rogue.trace" --attempts 2 "${long[@]}" 2>&1); rc=$?
	kill -KILL "$rogue"; wait "$rogue" 2> /dev/null
	if [ $rc -eq 2 ] && grep -q "attempt 1 of 2" <<< "$out" && grep -q "something else" <<< "$out" &&
		grep -q "^# ended early: " "$tmp/rogue.trace"; then
		ok "another process swapping: started over once, then exit 2: $(grep -m1 'the trace ends' <<< "$out" | cut -c1-150)"
	else
		bad "another process swapping (exit $rc, want 2, 'attempt 1 of 2', '# ended early')" "$out"
	fi
	same "another process swapping"
else
	echo "skip another process swapping: no python3 for the rogue"
fi

# --- signals mid-run ---
for sig in TERM INT; do
	"$zs" record --zswap -o "$tmp/$sig.trace" "${long[@]}" > "$tmp/$sig.trace.log" 2>&1 &
	p=$!
	pids+=("$p")
	if started "SIG$sig" $p "$tmp/$sig.trace"; then
		kill -"$sig" $p
		wait $p; rc=$?
		want=$((128 + $(kill -l "$sig")))
		if [ $rc -eq $want ] && grep -q "^# ended early: interrupted" "$tmp/$sig.trace" &&
			grep -q "settings restored" "$tmp/$sig.trace.log"; then
			ok "SIG$sig mid-run: died of it (exit $rc) after $(grep -c '^= ' "$tmp/$sig.trace") records, trace marked"
		else
			bad "SIG$sig mid-run (exit $rc, want $want, '# ended early', 'settings restored')" "$(cat "$tmp/$sig.trace.log")" "$(tail -2 "$tmp/$sig.trace")"
		fi
	fi
	same "SIG$sig mid-run"
done

# --- while waiting for the lock (which this test holds on fd 9) ---
out=$("$zs" record --zswap -o "$tmp/lw.trace" --lock-wait 1 --pages 50 "$libs" 9>&- 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "still held after 1 s" <<< "$out" && [ ! -s "$tmp/lw.trace" ]; then
	ok "--lock-wait 1 with the lock held: exit 2, nothing written"
else
	bad "--lock-wait 1 with the lock held (exit $rc, want 2 and 'still held')" "$out"
fi
"$zs" record --zswap -o "$tmp/lt.trace" --pages 50 "$libs" > "$tmp/lt.log" 2>&1 9>&- &
p=$!
pids+=("$p")
for ((i = 0; i < 50; i++)); do grep -qs "waiting for" "$tmp/lt.log" && break; sleep 0.1; done
kill -TERM $p; wait $p; rc=$?
if [ $rc -eq 143 ] && grep -q "waiting for" "$tmp/lt.log" && [ ! -e "$STATE" ]; then
	ok "SIGTERM while waiting for the lock: exit 143, nothing changed"
else
	bad "SIGTERM while waiting for the lock (exit $rc, want 143)" "$(cat "$tmp/lt.log")"
fi
same "waiting for the lock"

# --- SIGKILL mid-run: the state file, and the next run restores ---
"$zs" record --zswap -o "$tmp/kill.trace" "${long[@]}" > "$tmp/kill.trace.log" 2>&1 &
p=$!
pids+=("$p")
if started "SIGKILL" $p "$tmp/kill.trace"; then
	kill -KILL $p; wait $p 2> /dev/null
	left=no
	[ -e "$STATE" ] && grep -q '^swap_file=/' "$STATE" && left=yes
	# (This test still holds the lock: nobody else can come in between.)
	out=$("$zs" record --zswap -o "$tmp/after.trace" --pages 50 --lock-fd 9 "$libs" 2>&1); rc=$?
	if [ $left = yes ]; then ok "SIGKILL mid-run: $STATE names what to restore"
	else bad "SIGKILL mid-run: no $STATE naming the swap file"; fi
	if [ $rc -eq 0 ] && grep -q "did not restore the settings" <<< "$out" && [ ! -e "$STATE" ]; then
		ok "SIGKILL mid-run: the next run restored the settings first: $(grep -m1 'did not restore' <<< "$out" | cut -c1-120)"
	else
		bad "SIGKILL mid-run: the next run (exit $rc) should restore from $STATE" "$out"
	fi
fi
same "SIGKILL mid-run, then a run"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
