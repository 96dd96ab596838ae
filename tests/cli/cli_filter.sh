#!/usr/bin/env bash
# Owner: `zs zram --filter` and `--synth`: a bad spec or kind is one
# clear message and exit 2; every filter round-trips generated int32 pages and real files
# (mismatches 0, writeback and groups included); shuffle:4 meets the 1.45x pool target on
# --synth int32-trend; --matrix --filter prints that filter's rows.
# Usage: bash tests/cli/cli_filter.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/cli_filter.sh BUILD_DIR}
zs=$build/zs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib/cli.sh"   # expect_any, check, cli_done


for bad in shuffle:3 shuffle delta:16 bitshuffle:4 "shuffle:4 " delta+shuffle; do
	expect_any 2 "--filter '${bad//+/\\+}': not none, shuffle:N, delta:N or delta\+shuffle:N" \
		zram --filter "$bad" /usr/bin/ls
done
expect_any 2 "--synth 'floats': the kinds are" zram --synth floats
expect_any 2 "--synth takes no FILE" zram --synth int32-trend /usr/bin/ls
for f in none shuffle:2 shuffle:4 shuffle:8 delta:2 delta:4 delta:8 delta+shuffle:2 \
	delta+shuffle:4 delta+shuffle:8; do
	expect_any 0 "mismatches +0" zram --comp zstd --filter "$f" --synth int32-trend --max 1M
	expect_any 0 "mismatches +0" zram --comp lz4 --filter "$f" --max 1M /usr/bin
done
: >"$tmp/back"
expect_any 0 "writeback: [1-9][0-9]* of" zram --comp zstd --filter shuffle:4 --synth int32-sorted \
	--backing "$tmp/back" --writeback idle --wb-compressed --max 1M
expect_any 0 "mismatches +0" zram --group 4 --comp zstd --filter delta+shuffle:4 --max 1M /usr/bin
expect_any 0 "zstd:3 +64K .* ok +delta\+shuffle:8" zram --matrix --filter delta+shuffle:8 \
	--synth int32-trend --max 1M

# The density target: pool memory with shuffle:4 <= 1/1.45 of plain zstd's (32 MiB, 4 KiB pages).
mem() {
	"$zs" zram --json --quiet --comp zstd ${1:+--filter "$1"} --synth int32-trend --max 32M |
		sed -n 's/.*"mem_used_total": \([0-9]*\).*/\1/p'
}
plain=$(mem "") shuf=$(mem shuffle:4)
if [ -n "$plain" ] && [ -n "$shuf" ] && [ $((shuf * 145)) -le $((plain * 100)) ]; then
	pass=$((pass + 1))
	echo "ok   int32-trend pool: zstd $plain, zstd+shuffle:4 $shuf"
else
	fail=$((fail + 1))
	echo "FAIL int32-trend pool: zstd '$plain', zstd+shuffle:4 '$shuf' (want <= 1/1.45)"
fi

cli_done cli_filter
