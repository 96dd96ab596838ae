#!/usr/bin/env bash
# Owner: `zs record --zswap` (tools/record/record_zswap.c), the happy path.
# Records two small zswap-traces on this machine's kernel -- ops mode on 300
# pages (random, zero and library pages, so stores of all three kinds, loads
# and invalidates appear) and --memcg-fill on 1500 -- checks what the traces
# hold, replays them with `zs replay` (0 mismatches: libzs's zsmalloc holds
# the kernel's pool pages record by record), and checks that every setting
# the recorder touches (/sys/module/zswap/parameters/*, vm.page-cluster,
# /proc/swaps, the debugfs mount, memcgs, the state file) reads as before.
# The test holds the project's zswap lock throughout (the recorder gets it
# with --lock-fd), so another user's run (which holds the lock while its own
# settings are in place) cannot show up as a difference.  Exits 77 (ctest: skipped) without root or zswap, or
# when the lock stays busy for ZS_LOCK_WAIT seconds (default 600).
# Usage: bash tests/cli/test_record_zswap.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/test_record_zswap.sh BUILD_DIR}
zs=$build/zs
LOCK=/run/libzs-kernel-zswap.lock
wait_s=${ZS_LOCK_WAIT:-600}
skip() { echo "SKIP test_record_zswap: $*"; exit 77; }
[ -x "$zs" ] || { echo "test_record_zswap: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (swap file, zswap parameters, debugfs)"
[ -e /sys/module/zswap/parameters/enabled ] || skip "no zswap in this kernel (CONFIG_ZSWAP)"

tmp=$(mktemp -d /tmp/zs-record-zswap.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() {
	fail=$((fail + 1)); echo "FAIL $1"; shift
	printf '%s\n' "$@" | head -40 | sed 's/^/    /'
}

# Every setting `zs record --zswap` may change.
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

libs=/usr/lib/x86_64-linux-gnu
[ -d "$libs" ] || libs=/usr/lib
mkdir "$tmp/data"
head -c $((4096 * 40)) /dev/urandom > "$tmp/data/a_random"   # raw ('h') stores
head -c $((4096 * 20)) /dev/zero > "$tmp/data/b_zero"        # zero pages ('z')

before=$(snapshot)

# rec NAME ARGS...: the recorder into $tmp/NAME; 0 when it worked.
rec() {
	local name=$1; shift
	local t0=$SECONDS
	"$zs" record --zswap -o "$tmp/$name" --lock-fd 9 "$@" > "$tmp/$name.log" 2>&1
	local rc=$?
	# The recorder did its job, but the machine was not quiet enough to record on.
	[ $rc -ne 0 ] && grep -q "something else on this machine" "$tmp/$name.log" &&
		skip "every attempt of $name was spoilt by another process swapping: $(tail -2 "$tmp/$name.log" | head -1)"
	[ $rc -ne 0 ] && grep -Eq "zswap already holds|another tool's run" "$tmp/$name.log" &&
		skip "the kernel's zswap is not ours to record on: $(head -1 "$tmp/$name.log")"
	if [ $rc -eq 0 ]; then
		ok "record $name ($((SECONDS - t0)) s): $(tail -1 "$tmp/$name.log")"
		return 0
	fi
	bad "record $name (exit $rc)" "$(cat "$tmp/$name.log")"
	return 1
}

# count PATTERN FILE: lines matching
count() { grep -c -- "$1" "$2"; }

if rec ops.trace --pages 300 --seed 7 "$tmp/data" "$libs"; then
	t=$tmp/ops.trace
	n=$(count '^s .* n$' "$t") h=$(count '^s .* h$' "$t") z=$(count '^s .* z$' "$t")
	l=$(count '^l ' "$t") i=$(count '^i ' "$t") eq=$(count '^= ' "$t")
	summary="stores n $n h $h z $z, loads $l, invalidates $i, states $eq"
	if [ "$n" -gt 0 ] && [ "$h" -gt 0 ] && [ "$z" -gt 0 ] && [ "$l" -gt 0 ] && [ "$i" -gt 0 ] &&
		[ "$eq" -eq $((n + h + z + l + i)) ]; then
		ok "ops trace: $summary"
	else
		bad "ops trace: want every kind and one '=' per operation" "$summary"
	fi
	hdr=$(grep -c -E '^# (zswap-trace 1|page_size 4096|comp lzo|kernel .+|chain_size .+|max_pool_percent [0-9]+|totalram_pages [0-9]+|mode ops|data .+)$' "$t")
	if [ "$hdr" -eq 9 ] && ! grep -q "ended early" "$t"; then
		ok "ops trace: header complete, not ended early"
	else
		bad "ops trace header ($hdr of 9 lines)" "$(grep '^#' "$t")"
	fi
	# The mix ends by invalidating every page: the kernel's pool is empty again.
	last=$(grep '^= ' "$t" | tail -1)
	if [[ $last == "= 0 0 0 "* ]]; then ok "ops trace ends with an empty pool: $last"
	else bad "ops trace's last state is not an empty pool" "$last"; fi
	out=$("$zs" replay "$t" 2>&1); rc=$?
	if [ $rc -eq 0 ] && [[ $(head -1 <<< "$out") == *" mismatches 0" ]]; then
		ok "replay ops: $(head -1 <<< "$out")"
	else
		bad "replay ops (exit $rc)" "$out"
	fi
fi

if rec fill.trace --memcg-fill --pages 1500 --memcg-limit 2M "$tmp/data" "$libs"; then
	t=$tmp/fill.trace
	s=$(count '^s ' "$t")
	read -r _ pool stored incomp zout zin <<< "$(grep '^= ' "$t")"
	h=$(count '^s .* h$' "$t")
	if grep -q '^# mode fill$' "$t" && [ "$(count '^= ' "$t")" -eq 1 ] && [ "$s" -gt 0 ] &&
		[ "$s" -eq "$stored" ] && [ "$h" -eq "$incomp" ] && [ "$zout" -eq "$s" ] &&
		[ "$zin" -eq 0 ] && [ "$(count '^[li] ' "$t")" -eq 0 ]; then
		ok "fill trace: $s stores ($h raw) = stored_pages, pool $pool pages"
	else
		bad "fill trace: want one '=' whose stored/incompressible/zswpout match the 's' lines" \
			"s $s h $h; = $pool $stored $incomp $zout $zin"
	fi
	out=$("$zs" replay "$t" 2>&1); rc=$?
	if [ $rc -eq 0 ] && [[ $(head -1 <<< "$out") == *" mismatches 0" ]]; then
		ok "replay fill: $(head -1 <<< "$out")"
	else
		bad "replay fill (exit $rc)" "$out"
	fi
fi

after=$(snapshot)
if [ "$before" = "$after" ]; then
	ok "every setting as before ($(grep -c . <<< "$before") lines: zswap parameters, page-cluster, swaps, debugfs, memcgs, state file)"
else
	bad "settings differ after the runs" "$(diff <(echo "$before") <(echo "$after"))"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
