#!/usr/bin/env bash
# Owner: the compression and writeback options of `zs zram` (--level,
# --dict, --backing, --writeback, --wb-*, --group, --matrix) and
# `zs dict train`: bad values are one clear message and exit 2; a small
# end-to-end run trains a dictionary, uses it, writes back to a file and
# reads everything back (exit 0).
# Kept apart from cli_errors.sh so the shared option parser can move there.
# Usage: bash tests/cli/cli_zram_ext.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/cli_zram_ext.sh BUILD_DIR}
zs=$build/zs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib/cli.sh"   # expect_any, check, cli_done


expect_any 2 "bad level 'x'" zram --level x /usr/bin/ls
expect_any 2 "bad level ' 5'" zram --level ' 5' /usr/bin/ls   # strtol took a leading space
expect_any 2 "bad level '.5'" zram --level +5 /usr/bin/ls
expect_any 2 "check --level/--dict" zram --comp zstd --level 99 /usr/bin/ls
expect_any 2 "check --level/--dict" zram --comp lzo --level 2 /usr/bin/ls
expect_any 2 "No such file" zram --dict /nonexistent/d /usr/bin/ls
expect_any 2 "need --backing" zram --writeback idle /usr/bin/ls
expect_any 2 "unknown type 'cold'" zram --backing /dev/null --writeback cold /usr/bin/ls
expect_any 2 "--wb-batch: '0' is not a whole number in 1\.\." zram --backing /dev/null --wb-batch 0 /usr/bin/ls
expect_any 2 "--group: '32' is not a whole number in 0\.\.16" zram --group 32 /usr/bin/ls
expect_any 2 "Invalid argument" zram --group 3 /usr/bin/ls
expect_any 2 "usage: zs dict train" dict
expect_any 2 "usage: zs dict train" dict train /usr/bin
expect_any 2 "--size: '10' is not a size .* in 256\.\." dict train -o "$tmp/d" --size 10 /usr/bin
expect_any 2 "--size: '2M' is not a size .* in 256\.\.1048576" dict train -o "$tmp/d" --size 2M /usr/bin
expect_any 2 "--samples: '7' is not a whole number in 8\.\.1048576" dict train -o "$tmp/d" --samples 7 /usr/bin
expect_any 2 "unrecognized option '--bogus'" dict train -o "$tmp/d" --bogus /usr/bin
expect_any 2 "option requires an argument -- 'o'" dict train -o
# A missing input is named and refused (it was "no pages loaded (empty)", or skipped
# with exit 0 next to a good one); a failed write leaves no partial dictionary.
expect_any 2 "FILE /nonexistent: No such file or directory" dict train -o "$tmp/d" /nonexistent
expect_any 2 "FILE /nonexistent: No such file or directory" dict train -o "$tmp/d" /usr/bin/ls /nonexistent
check "refused dict train leaves no -o file" test ! -e "$tmp/d"
bash -c "trap '' XFSZ; ulimit -f 8; '$zs' dict train -o '$tmp/big' --max 1M /usr/bin" >/dev/null 2>"$tmp/err"
rc=$?
check "dict train: failed write -> exit 1, no partial file" \
	bash -c "[ $rc = 1 ] && grep -q 'File too large' '$tmp/err' && test ! -e '$tmp/big'"
nopid=4194303
while [ -e "/proc/$nopid" ]; do nopid=$((nopid - 1)); done
expect_any 2 "--pid $nopid: no pages loaded \(no such process\)" zram --pid "$nopid" --max 64K
expect_any 2 "--group: '17' is not a whole number in 0\.\.16" zram --group 17 /usr/bin/ls
expect_any 0 "mismatches +0" zram --group 1 --max 64K /usr/bin/ls
: >"$tmp/back2"
# --wb-limit PAGES: writeback stops at the budget, as the kernel's writeback_limit does; that
# is what was asked for, not a failure (it was exit 1, "Input/output error")
expect_any 0 "writeback: 10 of [0-9]+ pages .*stopped at --wb-limit" zram --backing "$tmp/back2" \
	--writeback idle --wb-limit 10 --max 256K /usr/bin
check "zram --json --wb-limit: writeback.limit_reached, 10 written" bash -c "'$zs' zram --json \
	--backing '$tmp/back2' --writeback idle --wb-limit 10 --max 256K /usr/bin | python3 -c '
import json, sys; w = json.load(sys.stdin)[\"writeback\"]; assert w[\"limit_reached\"] and w[\"written\"] == 10, w'"
expect_any 0 "mismatches +0" zram --backing "$tmp/back2" --writeback huge --wb-drop-cache \
	--max 256K /usr/bin
expect_any 0 "ok +delta\+shuffle:8$" zram --matrix --filter all --max 64K /usr/bin/ls
expect_any 2 "--filter all needs --matrix" zram --filter all --max 64K /usr/bin/ls
expect_any 2 "--kernel-comp needs --vs-kernel" zram --kernel-comp lz4 --max 64K /usr/bin/ls
expect_any 2 "--agree needs --vs-kernel" zram --agree --max 64K /usr/bin/ls

# End to end: train, use the dictionary, write back compressed, read back from the file.
expect_any 0 "dictionary from" dict train -o "$tmp/d" --size 4096 --max 4194304 /usr/bin
: >"$tmp/back"
expect_any 0 "writeback: [1-9][0-9]* of" zram --comp zstd --dict "$tmp/d" --level 5 \
	--backing "$tmp/back" --writeback idle --wb-compressed --max 2M /usr/bin
expect_any 0 "mismatches +0" zram --group 16 --comp lz4 --max 2M /usr/bin
expect_any 0 "zstd:3 +64K" zram --matrix --max 1M /usr/bin

cli_done
