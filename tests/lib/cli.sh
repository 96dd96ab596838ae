# Sourced by the zs tool's CLI tests (tests/cli/cli_*.sh), which used to carry
# their own copies of these: run `zs` with arguments and assert its exit
# status and a message.  A library, not a test: it sits in tests/lib/, which
# no test glob (each file in tests/cli/ and tests/package/ a ctest test) reads.
# Needs $zs (the binary) and $tmp (a scratch directory) set by the caller;
# counts into $pass and $fail, which cli_done reports.
pass=0 fail=0

# _expect WHERE STATUS PATTERN ARGS...: run zs; exit status STATUS, PATTERN (grep -E) in the
# files WHERE names ("err", or "err out"), and no Python traceback (zs report runs one).
_expect() {
	local where=$1 want=$2 pat=$3 f files=()
	shift 3
	for f in $where; do files+=("$tmp/$f"); done
	timeout 120 "$zs" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "${files[@]}" && ! grep -q Traceback "$tmp/err"; then
		pass=$((pass + 1))
		echo "ok   zs $* -> $rc: $(grep -hE -m1 -- "$pat" "${files[@]}" | head -1)"
	else
		fail=$((fail + 1))
		echo "FAIL zs $* -> exit $rc (want $want, ${where// / or } matching '$pat'):"
		head -5 "$tmp/err" | sed 's/^/    /'
	fi
}

# expect STATUS PATTERN ARGS...: the message on stderr.
expect() { _expect err "$@"; }
# expect_any STATUS PATTERN ARGS...: the message on stderr or stdout.
expect_any() { _expect "err out" "$@"; }

# expect_out STATUS PATTERN ARGS...: exit status STATUS and stdout matching PATTERN.
expect_out() {
	local want=$1 pat=$2
	shift 2
	timeout 300 "$zs" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$tmp/out"; then
		pass=$((pass + 1))
		echo "ok   zs $* -> $rc: $(grep -E -m1 -- "$pat" "$tmp/out")"
	else
		fail=$((fail + 1))
		echo "FAIL zs $* -> exit $rc (want $want, stdout matching '$pat'):"
		head -5 "$tmp/out" "$tmp/err" | sed 's/^/    /'
	fi
}

# check NAME COMMAND...: a shell condition that must hold.
check() {
	local name=$1
	shift
	if "$@"; then
		pass=$((pass + 1)); echo "ok   $name"
	else
		fail=$((fail + 1)); echo "FAIL $name"
	fi
}

# cli_done [NAME]: the "N passed, M failed" line ctest and doc-counts read; the status.
cli_done() {
	echo "${1:+$1: }$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
