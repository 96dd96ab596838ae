#!/usr/bin/env bash
# Owner: trace replay (issue 2 §4-5).  Records a fresh trace on this machine's
# kernel (../shared/tools/zram-trace and zram-trace-mix, small, random seed)
# and replays it with BUILD_DIR/zs replay, on the bare pool and through the
# zram store (--store): libzs must match the running kernel record for record.  Skips (exit 0, "SKIP ...") when not root, when there is
# no zram (/sys/class/zram-control) or no recorder tools or python3.
# Usage: bash tests/record_replay.sh BUILD_DIR   (ZS_TRACE_TOOLS=DIR overrides the tools dir)
set -u
build=${1:?usage: tests/record_replay.sh BUILD_DIR}
zs=$build/zs
root=$(cd "$(dirname "$0")/.." && pwd)
tools=${ZS_TRACE_TOOLS:-$root/../shared/tools}
skip() { echo "SKIP record_replay: $*"; echo "0 passed, 0 failed (skipped)"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to create zram devices"
[ -e /sys/class/zram-control/hot_add ] || skip "no zram on this kernel (/sys/class/zram-control missing)"
[ -x "$tools/zram-trace" ] && [ -x "$tools/zram-trace-mix" ] || skip "recorder tools not found in $tools"
command -v python3 > /dev/null || skip "python3 not found"
[ -x "$zs" ] || { echo "record_replay: $zs not built"; echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d /tmp/zs-record-replay.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Random bytes (incompressible: huge objects) and zeros (same-filled pages)
# first, then system binaries and text.
head -c 400000 /dev/urandom > "$tmp/data"
head -c 65536 /dev/zero >> "$tmp/data"
for f in /usr/bin/bash /etc/services /usr/share/common-licenses/GPL-3 /usr/bin/ls \
	/usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
	/usr/share/dict/words /usr/bin/perl; do
	[ -r "$f" ] && cat "$f" >> "$tmp/data"
done
size=$(stat -c %s "$tmp/data")
truncate -s $(( (size / 4096 + 1) * 4096 )) "$tmp/data"
seed=${ZS_SEED:-$(( $(date +%s) % 100000 ))}
comps=(lz4 lzo-rle)
comp=${comps[$((seed % 2))]}
echo "record_replay: seed $seed, comp $comp (ZS_SEED=$seed repeats the operation mix)"
pass=0 fail=0
run() { # NAME TOOL ARGS...
	local name=$1 tool=$2; shift 2
	if ! "$tools/$tool" "$tmp/data" "$tmp/$name" "$@" > "$tmp/rec.log" 2>&1; then
		if grep -qi "no zram\|permission\|No such file" "$tmp/rec.log"; then
			skip "recording failed: $(tail -1 "$tmp/rec.log")"
		fi
		fail=$((fail + 1)); echo "FAIL record $name:"; sed 's/^/    /' "$tmp/rec.log"; return
	fi
	local mode
	for mode in "" "--store --verify"; do
		# shellcheck disable=SC2086
		out=$("$zs" replay "$tmp/$name" $mode 2>&1)
		rc=$?
		if [ $rc -eq 0 ]; then
			pass=$((pass + 1)); echo "ok   $name ${mode:+$mode }($tool $*): $(head -1 <<< "$out")"
		else
			fail=$((fail + 1)); echo "FAIL $name ${mode:+$mode }($tool $*) exit $rc:"
			head -40 <<< "$out" | sed 's/^/    /'
			mkdir -p "$build/record_replay-failed" && cp "$tmp/$name" "$build/record_replay-failed/" &&
				echo "    trace kept in $build/record_replay-failed/$name"
		fi
	done
}
run fresh.trace zram-trace --comp "$comp" --pages 1500 --seed "$seed"
run fresh-mix.trace zram-trace-mix --comp "$comp" --pages 800 --ops 6000 --seed "$seed" --p-compact 0.03
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
