#!/usr/bin/env bash
# Owner: the zs tool's handling of bad input.  Every command must turn a bad
# option, value or path into one clear message and a non-zero exit status
# (2 for usage errors), never a crash, a traceback or a silent run that
# does nothing (a misspelt workload used to run nothing and exit 0).
# Usage: bash tests/cli_errors.sh BUILD_DIR   (from the repository root)
set -u
build=${1:?usage: tests/cli_errors.sh BUILD_DIR}
zs=$build/zs
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect STATUS PATTERN ARGS...: exit status STATUS and stderr matching PATTERN (grep -E).
expect() {
	local want=$1 pat=$2
	shift 2
	timeout 120 "$zs" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$tmp/err" && ! grep -q Traceback "$tmp/err"; then
		pass=$((pass + 1))
		echo "ok   zs $* -> $rc: $(grep -E -m1 -- "$pat" "$tmp/err")"
	else
		fail=$((fail + 1))
		echo "FAIL zs $* -> exit $rc (want $want, stderr matching '$pat'):"
		head -5 "$tmp/err" | sed 's/^/    /'
	fi
}

expect 2 "unknown command 'bogus'" bogus
expect 2 "usage: zs COMMAND"
expect 2 "No such file or directory" replay /nonexistent/trace
expect 2 "not a zram-trace" replay /dev/null
expect 2 "bad value for --chain: '0'" classes --chain 0
expect 2 "bad value for --chain: '17'" testmod --chain 17
expect 2 "bad value for --free-mode: 'x'" classes --free-mode x
expect 2 "cannot create a pool with this configuration" classes --page-size 3000
expect 2 "cannot create a pool with this configuration" classes --delta 7
expect 2 "needs a value" classes --chain
expect 2 "compressor 'bogus'" zram --comp bogus /usr/bin/ls
expect 2 "/nonexistent: No such file or directory" zram /nonexistent
expect 2 "bad number 'abc'" zram --limit abc /usr/bin/ls
expect 2 "unknown workload 'hep'" compare --workloads mix,hep
expect 2 "unknown backend 'jemaloc'" compare --backends zsmalloc,jemaloc
expect 2 "empty workload list" compare --workloads ""
expect 2 "bad page size 5" compare --page-size 5
expect 2 "sizes must be positive" compare --max-mib 0
expect 2 "bad value for --threads: '0'" soak --threads 0
expect 2 "bad value for --seconds: 'x'" soak --seconds x
expect 2 "cannot create the zram store" soak --comp bogus --seconds 1
# zs report needs Python with matplotlib, as the report itself does.
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	expect 1 "cannot write to --out /proc/nope" report --quick --out /proc/nope
else
	expect 2 "no Python 3 with matplotlib" report --quick --out /proc/nope
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
