#!/usr/bin/env bash
# Owner: the rule that the documentation only points at files that exist.
# Every `tests/...` and `tools/...` path in the tracked Markdown files
# (README.md, docs/*.md, the folders' README.md) must name a file or folder of
# the tree, or, when it holds a '*', match at least one; a file moved
# without its mentions being updated leaves a reader at a dead path.
# Checks:
#   1. the scanner passes a clean fixture tree and catches a missing file, a
#      missing folder and a glob that matches nothing in another (so a broken
#      pattern cannot make the real check pass vacuously);
#   2. the tree's own Markdown files.
# Usage: bash tests/package/doc_paths.sh BUILD_DIR   (from the repository root;
# the build dir is not used)
set -u
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

list_docs() { # list_docs ROOT: the Markdown files to scan, relative to ROOT
	(
		cd "$1" || exit 1
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
			[ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
			git ls-files -- '*.md'
		else
			find . -name '*.md' -type f | sed 's|^\./||'
		fi
	)
}

scan() { # scan ROOT: print "FILE: PATH" for every dead path; fail if any
	(
		cd "$1" || exit 1
		list_docs . | while IFS= read -r f; do
			[ -f "$f" ] || continue
			# a path is what follows tests/ or tools/ at a word start, up to a
			# character no file name here uses; trailing punctuation is prose
			grep -oE '(^|[^A-Za-z0-9_./-])(tests|tools)/[A-Za-z0-9_.*/-]*' -- "$f" |
				sed -E 's/^[^a-z]//; s/[.,:;-]+$//' | sort -u |
				while IFS= read -r p; do
					if [[ $p == *'*'* ]]; then
						# shellcheck disable=SC2086
						compgen -G "$p" >/dev/null || echo "$f: $p (matches nothing)"
					elif [ ! -e "$p" ]; then
						echo "$f: $p"
					fi
				done
		done
	) >"$tmp/dead"
	[ ! -s "$tmp/dead" ]
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
mkdir -p "$fx/docs" "$fx/tests/unit" "$fx/tools/lib"
: >"$fx/tests/unit/test_a.c"
: >"$fx/tools/lib/json.c"
printf '%s\n' 'Run `tests/unit/test_a.c` (tools/lib/json.c, tools/lib/).' \
	'Every tests/unit/test_*.c; see tests/, tools.' >"$fx/README.md"
scan "$fx"
report $? "fixture: a tree whose paths all exist passes" "$tmp/dead"
for bad in "tests/test_a.c" "(tools/json.c)" "tools/replay/" "tests/mt/test_mt_*.c"; do
	echo "see $bad here" >"$fx/docs/bad.md"
	scan "$fx"
	report $((! $?)) "fixture: a doc naming \"$bad\" is caught"
	grep -q . "$tmp/dead" || echo "    (nothing printed)"
done
rm -f "$fx/docs/bad.md"

# 2. The tree.
scan .
report $? "every tests/ and tools/ path in the Markdown files exists" "$tmp/dead"

echo "doc_paths: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
