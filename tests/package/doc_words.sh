#!/usr/bin/env bash
# Owner: the rule that the tree describes the product as it is now.  Files
# must not point at the project's tracker (a numbered issue), at work
# sessions, or at paths outside the repository (the reference material
# beside it), since none of those travel with the source; and no line of
# README.md or docs/*.md may run past 400 characters (long lines hide in
# diffs and break review); README.md stays under 350 lines (the front page
# points into docs/ rather than growing into a manual).  The patterns are
# assembled from pieces so this
# file, which is scanned like any other, does not match itself.
# Checks:
#   1. the scanner finds each pattern and a 401-character line in a
#      throwaway fixture tree, and passes a clean one (so a broken regex
#      cannot make the real check pass vacuously);
#   2. the tracked files under README.md docs include src tools tests bench
#      python scripts examples (git ls-files in a checkout, find otherwise)
#      hold none of the patterns;
#   3. no line of README.md or docs/*.md is over 400 characters;
#   4. README.md has fewer than 350 lines.
# Usage: bash tests/package/doc_words.sh BUILD_DIR   (from the repository root; the
# build dir is not used)
set -u
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ord='(first|second|third|fourth|fifth|sixth|seventh|eighth|this|last|next)'
ses='sess''ion'
iss='iss''ue'
up='\.\.''/shared'
ref='shared''/(repro|reference|seeds)'
words="$ord $ses|$iss [0-9]+|$iss-[0-9]+|$up|$ref"
maxlen=400
maxreadme=349
dirs="README.md docs include src tools tests bench python scripts examples"

list_files() { # list_files ROOT: the files to scan, one a line, relative to ROOT
	(
		cd "$1" || exit 1
		# shellcheck disable=SC2086
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
			[ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
			git ls-files -- $dirs
		else
			find $dirs -type f 2>/dev/null
		fi
	)
}

scan_words() { # scan_words ROOT: print every matching line; fail if any
	(
		cd "$1" || exit 1
		list_files . | while IFS= read -r f; do
			[ -f "$f" ] && grep -HinIE -e "$words" -- "$f"
		done
	) >"$tmp/hits"
	[ ! -s "$tmp/hits" ]
}

scan_long() { # scan_long ROOT: print every over-long doc line; fail if any
	(
		cd "$1" || exit 1
		for f in README.md docs/*.md; do
			[ -f "$f" ] && awk -v m="$maxlen" \
				'length > m {print FILENAME ":" FNR ": " length " characters"}' "$f"
		done
	) >"$tmp/long"
	[ ! -s "$tmp/long" ]
}

scan_readme() { # scan_readme ROOT: fail if README.md is too long
	local n
	n=$(wc -l <"$1/README.md" 2>/dev/null || echo 0)
	echo "README.md: $n lines (at most $maxreadme)" >"$tmp/readme"
	[ "$n" -le "$maxreadme" ]
}

report() { # report OK DESCRIPTION [HITS_FILE]
	if [ "$1" = 0 ]; then
		pass=$((pass + 1))
		echo "ok   $2"
	else
		fail=$((fail + 1))
		echo "FAIL $2"
		[ -n "${3:-}" ] && sed 's/^/    /' "$3"
	fi
}

# 1. The scanner on fixtures.
fx=$tmp/fx
mkdir -p "$fx/docs" "$fx/src"
echo "a clean line" >"$fx/README.md"
echo "also clean: sessions of work, shared memory, issues" >"$fx/docs/a.md"
scan_words "$fx" && scan_long "$fx"
report $? "fixture: a clean tree passes"
dots='..' sh='shared'
for bad in "the Seventh $ses found it" "see ${iss^} 18 (R1)" "$iss-10 provider" \
	"in $dots/$sh/repro/x.c" "$sh/reference/zsmalloc.md" "$sh/seeds/000"; do
	echo "$bad" >"$fx/src/bad.c"
	scan_words "$fx"
	report $((! $?)) "fixture: a file with \"$bad\" is caught"
done
rm -f "$fx/src/bad.c"
printf '%*s\n' $((maxlen + 1)) x | tr ' ' y >"$fx/docs/long.md"
scan_long "$fx"
report $((! $?)) "fixture: a $((maxlen + 1))-character line in docs/ is caught"
printf '%*s\n' $maxlen x | tr ' ' y >"$fx/docs/long.md"
scan_long "$fx"
report $? "fixture: a $maxlen-character line passes"
seq $((maxreadme + 1)) >"$fx/README.md"
scan_readme "$fx"
report $((! $?)) "fixture: a README.md of $((maxreadme + 1)) lines is caught"
seq $maxreadme >"$fx/README.md"
scan_readme "$fx"
report $? "fixture: a README.md of $maxreadme lines passes"

# 2 and 3. The tree.
n=$(list_files . | wc -l)
if [ "$n" -lt 10 ]; then
	report 1 "found the files to scan (only $n: run from the repository root)"
else
	scan_words .
	report $? "no tracker, $ses or outside-path references in $n files" "$tmp/hits"
	scan_long .
	report $? "no line over $maxlen characters in README.md and docs/*.md" "$tmp/long"
	scan_readme .
	report $? "README.md under $((maxreadme + 1)) lines" "$tmp/readme"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
