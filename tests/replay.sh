#!/usr/bin/env bash
# Owner: trace replay (issue 2 §4-5).  Replays every committed kernel trace
# (tests/data/*.xz, recorded with zram-trace / zram-trace-mix on Linux 6.18)
# with BUILD_DIR/zs replay, under each zs_free policy, deferred free, checked
# mode, and through the zram store (--store, contents read back): all of them
# must give the kernel's page counts record for record.  Also checks
# that replay rejects bad input with exit status 2.
# Usage: bash tests/replay.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/replay.sh BUILD_DIR}
zs=$build/zs
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
if [ ! -x "$zs" ]; then
	echo "replay: $zs not built"
	echo "0 passed, 1 failed"
	exit 1
fi
shopt -s nullglob
traces=("$here"/data/*.xz)
if [ ${#traces[@]} -lt 4 ]; then
	echo "replay: expected at least 4 traces in tests/data, found ${#traces[@]}"
	fail=$((fail + 1))
fi
for t in "${traces[@]}"; do
	for mode in "" "--free-mode class" "--free-mode class-unlocked" "--deferred" "--checked" \
		"--store --verify"; do
		# shellcheck disable=SC2086
		out=$("$zs" replay "$t" $mode 2>&1)
		rc=$?
		first=$(printf '%s\n' "$out" | head -1)
		if [ $rc -eq 0 ] && [[ $first == *" mismatches 0" ]]; then
			pass=$((pass + 1))
			echo "ok   $(basename "$t") ${mode:-(pool)}: $first"
		else
			fail=$((fail + 1))
			echo "FAIL $(basename "$t") ${mode:-(pool)} (exit $rc):"
			printf '%s\n' "$out" | head -40 | sed 's/^/    /'
		fi
	done
done

# Bad input: each must exit 2 with a message, never crash.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '# zram-trace 1\n# page_size 4096\nw 1 100 n\n= 1 0 1 100 0 0\nw 2 x n\n' > "$tmp/parse"
printf '# zram-trace 1\n# page_size 4096\n= 1 0 1 100 0 0\n' > "$tmp/orphan"
printf '# zram-trace 1\n# page_size 5000\nw 1 100 n\n= 1 0 1 100 0 0\n' > "$tmp/pagesize"
printf '# zram-trace 1\n# page_size 4096\nw 1 4097 n\n= 1 0 1 4097 0 0\n' > "$tmp/size"
: > "$tmp/empty"
head -c 4000 /dev/urandom > "$tmp/random"
if [ ${#traces[@]} -gt 0 ]; then
	head -c 20000 "${traces[0]}" > "$tmp/truncated.xz"
fi
for f in "$tmp"/* /nonexistent/trace; do
	"$zs" replay "$f" > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 2 ] && [ -s "$tmp/out.txt" ]; then
		pass=$((pass + 1))
		echo "ok   bad input $(basename "$f"): $(tail -1 "$tmp/out.txt")"
	else
		fail=$((fail + 1))
		echo "FAIL bad input $(basename "$f"): exit $rc (want 2)"
	fi
done
# A mismatch must be reported with exit 1 when parity is demanded (--strict:
# replaying chain-8 traces at chain 4); without --strict a non-kernel policy
# is an experiment: exit 0 and a line saying why the records differ.
if [ ${#traces[@]} -gt 0 ]; then
	"$zs" replay "${traces[0]}" --chain 4 --strict > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q "^mismatch at record" "$tmp/out.txt"; then
		pass=$((pass + 1))
		echo "ok   mismatches detected: $(head -1 "$tmp/out.txt") (--chain 4 --strict)"
	else
		fail=$((fail + 1))
		echo "FAIL --chain 4 --strict replay: exit $rc, want 1 with a mismatch report"
	fi
	"$zs" replay "${traces[0]}" --chain 4 > "$tmp/out.txt" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q "expected: not the kernel's policy: chain 4" "$tmp/out.txt" &&
		grep -q "^  this policy" "$tmp/out.txt"; then
		pass=$((pass + 1))
		echo "ok   policy experiment: $(head -1 "$tmp/out.txt")"
	else
		fail=$((fail + 1))
		echo "FAIL --chain 4 replay: exit $rc, want 0 and 'not the kernel's policy'"
		head -5 "$tmp/out.txt" | sed 's/^/    /'
	fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
