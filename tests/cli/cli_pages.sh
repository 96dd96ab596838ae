#!/usr/bin/env bash
# Owner: `zs pages`, the tools' one page loader as a file (report.py reads its pages through
# it): each file from a page boundary, its last page zero padded, directories walked,
# symlinks not followed, --max honoured; bad options are one message and exit 2.
# Usage: bash tests/cli/cli_pages.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli/cli_pages.sh BUILD_DIR}
zs=$build/zs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib/cli.sh"   # expect, expect_any, check, cli_done

mkdir -p "$tmp/in/sub"
head -c 5000 /dev/urandom >"$tmp/in/a"        # 2 pages, the second padded
head -c 100 /dev/urandom >"$tmp/in/sub/b"     # 1 page
ln -s /usr/bin/ls "$tmp/in/link"               # not followed
expect_any 0 "^3 pages of 4096 bytes from 2 files" pages -o "$tmp/p.bin" "$tmp/in"
check "3 pages written" test "$(stat -c %s "$tmp/p.bin")" -eq 12288
# each file's bytes, then zeros to the page end, in either walk order
{ cat "$tmp/in/a"; head -c 3192 /dev/zero; } >"$tmp/a.want"
{ cat "$tmp/in/sub/b"; head -c 3996 /dev/zero; } >"$tmp/b.want"
cat "$tmp/a.want" "$tmp/b.want" >"$tmp/ab.want"
cat "$tmp/b.want" "$tmp/a.want" >"$tmp/ba.want"
check "pages hold each file padded to a page" \
	bash -c "cmp -s '$tmp/p.bin' '$tmp/ab.want' || cmp -s '$tmp/p.bin' '$tmp/ba.want'"
expect_any 0 "^2 pages of 4096 bytes from 1 files" pages -o "$tmp/q.bin" --max 8K "$tmp/in/a"
expect_any 0 "^1 pages of 16384 bytes" pages -o "$tmp/r.bin" --page-size 16384 "$tmp/in/a"
expect 2 "no -o FILE given" pages "$tmp/in"
expect 2 "no input FILE\|DIR given" pages -o "$tmp/p.bin"
expect 2 "--page-size 5000 is not a power of two" pages -o "$tmp/p.bin" --page-size 5000 "$tmp/in"
expect 2 "--max: '4x' is not a size" pages -o "$tmp/p.bin" --max 4x "$tmp/in"
expect 1 "No such file or directory" pages -o "$tmp/nodir/p.bin" "$tmp/in"
expect 2 "unrecognized option '--bogus'" pages -o "$tmp/p.bin" --bogus "$tmp/in"
expect 2 "--page-size: '128K' is not a size .* in 4096..65536" pages -o "$tmp/p.bin" --page-size 128K "$tmp/in"
expect_any 0 "^1 pages of 16384 bytes" pages -o "$tmp/r.bin" --page-size 16K "$tmp/in/a"
expect 2 "--max: '1000' is not a size .* in 4096\.\." pages -o "$tmp/p.bin" --max 1000 "$tmp/in"
# A missing or empty input is refused, and no -o file is made (they used to give
# "0 pages" and an empty file with exit 0, or skip the missing one silently).
: >"$tmp/empty"
expect 2 "FILE /nonexistent: No such file or directory" pages -o "$tmp/n.bin" /nonexistent
expect 2 "FILE /nonexistent: No such file or directory" pages -o "$tmp/n.bin" "$tmp/in/a" /nonexistent
expect 2 "FILE .*/empty: empty file" pages -o "$tmp/n.bin" "$tmp/empty"
check "refused inputs leave no -o file" test ! -e "$tmp/n.bin"
# A write that fails part way (a file size limit, SIGXFSZ ignored) leaves no partial file.
bash -c "trap '' XFSZ; ulimit -f 4; '$zs' pages -o '$tmp/big.bin' '$tmp/in'" >/dev/null 2>"$tmp/err"
rc=$?
check "failed write: exit 1, 'write failed', no partial file" \
	bash -c "[ $rc = 1 ] && grep -q 'write failed' '$tmp/err' && test ! -e '$tmp/big.bin'"
cli_done cli_pages
