#!/usr/bin/env bash
# Owner: the kernel developer's loop inside the repository.
# Records fresh traces on this machine's kernel with `zs record` (the
# project's own recorder: pages of /usr/bin and shared libraries, lz4 and
# lzo-rle, both workloads, a random seed) and replays them with `zs replay`:
# with the kernel's own policy (exhaustive chain search, delta 16) on the
# bare pool, with deferred free and through the zram store, libzs must
# match the running kernel record for record; with the heuristic chain
# policy the replay must say the records differ because the policy is not
# the kernel's (exit 0), and --strict must turn that into exit 1.
# Exits 77 (ctest: skipped) when not root or without zram.
# Usage: bash tests/cli/record_replay.sh BUILD_DIR
set -u
build=${1:?usage: tests/cli/record_replay.sh BUILD_DIR}
zs=$build/zs
skip() { echo "SKIP record_replay: $*"; exit 77; }
[ -x "$zs" ] || { echo "record_replay: $zs not built"; echo "0 passed, 1 failed"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to create zram devices"
[ -e /sys/class/zram-control/hot_add ] || skip "no zram on this kernel (/sys/class/zram-control missing)"

tmp=$(mktemp -d /tmp/zs-record-replay.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
seed=${ZS_SEED:-$(( $(date +%s) % 100000 ))}
echo "record_replay: seed $seed (ZS_SEED=$seed repeats the operation mix)"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() {
	fail=$((fail + 1)); echo "FAIL $1"; shift
	printf '%s\n' "$@" | head -30 | sed 's/^/    /'
}
keep() { mkdir -p "$build/record_replay-failed" && cp "$1" "$build/record_replay-failed/" &&
	echo "    trace kept in $build/record_replay-failed/$(basename "$1")"; }

# rec NAME ARGS...: zs record into $tmp/NAME
rec() {
	local name=$1; shift
	if "$zs" record -o "$tmp/$name" --seed "$seed" "$@" > "$tmp/rec.log" 2>&1; then
		ok "record $name: $(tail -1 "$tmp/rec.log")"
		return 0
	fi
	if grep -q "comp_algorithm" "$tmp/rec.log"; then # the kernel lacks this compressor
		echo "skip $name: $(tail -1 "$tmp/rec.log")"
		return 1
	fi
	bad "record $name" "$(cat "$tmp/rec.log")"
	return 1
}

# replay_all NAME: every parity mode must give 0 mismatches; heuristic must differ, exit 0.
replay_all() {
	local t=$tmp/$1 mode out rc
	for mode in "--chain-policy exhaustive --delta 16" "--deferred" "--free-mode class" \
		"--store --verify"; do
		# shellcheck disable=SC2086
		out=$("$zs" replay "$t" $mode 2>&1); rc=$?
		if [ $rc -eq 0 ] && [[ $(head -1 <<< "$out") == *" mismatches 0" ]]; then
			ok "$1 $mode: $(head -1 <<< "$out")"
		else
			bad "$1 $mode (exit $rc)" "$out"; keep "$t"
		fi
	done
	out=$("$zs" replay "$t" --chain-policy heuristic --delta 16 2>&1); rc=$?
	if [ $rc -eq 0 ] && grep -q "expected: not the kernel's policy: chain policy heuristic" <<< "$out" &&
		grep -q "^  this policy" <<< "$out"; then
		ok "$1 --chain-policy heuristic --delta 16: $(head -1 <<< "$out")"
	else
		bad "$1 heuristic (exit $rc, want 0 and 'not the kernel's policy')" "$out"
	fi
	out=$("$zs" replay "$t" --chain-policy heuristic --strict 2>&1); rc=$?
	if [ $rc -eq 1 ] || { [ $rc -eq 0 ] && [[ $(head -1 <<< "$out") == *" mismatches 0" ]]; }; then
		ok "$1 heuristic --strict: exit $rc: $(head -1 <<< "$out")"
	else
		bad "$1 heuristic --strict (exit $rc)" "$out"
	fi
}

libs=/usr/lib/x86_64-linux-gnu
[ -d "$libs" ] || libs=/usr/lib
rec usrbin-lz4.trace --comp lz4 --pages 1500 /usr/bin && replay_all usrbin-lz4.trace
rec mix-lzorle.trace --comp lzo-rle --workload mix --pages 800 --ops 5000 --p-compact 0.03 \
	"$libs" && replay_all mix-lzorle.trace
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
