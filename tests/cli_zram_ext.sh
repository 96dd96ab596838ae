#!/usr/bin/env bash
# Owner: the issue-13 options of `zs zram` (--level, --dict, --backing,
# --writeback, --wb-*, --group, --matrix) and `zs dict train`: bad values are
# one clear message and exit 2; a small end-to-end run trains a dictionary,
# uses it, writes back to a file and reads everything back (exit 0).
# Kept apart from cli_errors.sh so the shared option parser can move there.
# Usage: bash tests/cli_zram_ext.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli_zram_ext.sh BUILD_DIR}
zs=$build/zs
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() {
	local want=$1 pat=$2
	shift 2
	timeout 120 "$zs" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$tmp/err" "$tmp/out"; then
		pass=$((pass + 1))
		echo "ok   zs $* -> $rc"
	else
		fail=$((fail + 1))
		echo "FAIL zs $* -> exit $rc (want $want, output matching '$pat'):"
		head -5 "$tmp/err" | sed 's/^/    /'
	fi
}

expect 2 "bad level 'x'" zram --level x /usr/bin/ls
expect 2 "bad level ' 5'" zram --level ' 5' /usr/bin/ls   # strtol took a leading space (issue 22)
expect 2 "bad level '.5'" zram --level +5 /usr/bin/ls
expect 2 "check --level/--dict" zram --comp zstd --level 99 /usr/bin/ls
expect 2 "check --level/--dict" zram --comp lzo --level 2 /usr/bin/ls
expect 2 "No such file" zram --dict /nonexistent/d /usr/bin/ls
expect 2 "need --backing" zram --writeback idle /usr/bin/ls
expect 2 "unknown type 'cold'" zram --backing /dev/null --writeback cold /usr/bin/ls
expect 2 "--wb-batch: '0' is not a whole number in 1\.\." zram --backing /dev/null --wb-batch 0 /usr/bin/ls
expect 2 "--group: '32' is not a whole number in 0\.\.16" zram --group 32 /usr/bin/ls
expect 2 "Invalid argument" zram --group 3 /usr/bin/ls
expect 2 "usage: zs dict train" dict
expect 2 "usage: zs dict train" dict train /usr/bin
expect 2 "--size: '10' is not a size .* in 256\.\." dict train -o "$tmp/d" --size 10 /usr/bin

# End to end: train, use the dictionary, write back compressed, read back from the file.
expect 0 "dictionary from" dict train -o "$tmp/d" --size 4096 --max 4194304 /usr/bin
: >"$tmp/back"
expect 0 "writeback: [1-9][0-9]* of" zram --comp zstd --dict "$tmp/d" --level 5 \
	--backing "$tmp/back" --writeback idle --wb-compressed --max 2M /usr/bin
expect 0 "mismatches +0" zram --group 16 --comp lz4 --max 2M /usr/bin
expect 0 "zstd:3 +64K" zram --matrix --max 1M /usr/bin

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
