#!/bin/bash
# The layering of libzs, checked on what the compiler produced rather than on
# #include lines (a declaration copied into a file, or a call through a header
# of another layer, shows up here all the same): the defined and undefined
# symbols of each object of the library (nm) give a file -> file graph, and
#   1. a call or data reference from one layer into another must be an edge
#      of the map below (dependencies point down, README.md "Layout");
#   2. only the page provider and the region map memory: no other object
#      references mmap, munmap, madvise or mremap;
#   3. no two files of one layer depend on each other, directly or through
#      others (the cycle is printed with the symbols that make each edge).
# Usage: tests/package/layering.sh BUILD_DIR (run from the source root).  Exit 77: no nm.
set -u

# The map: LAYER: the layers its files may reference.  The one place the
# allowed edges are written down; README.md's Layout table says why each is
# there.  Levels, bottom up: common and compress (beside everything), pages,
# zsmalloc and zblock, backend, then zram, zswap and blob, then region.
# Layers of one level never reference each other.
MAP='
common:
api:      common
compress: common
pages:    common
zsmalloc: pages common
zblock:   pages common
backend:  zsmalloc zblock pages common
blob:     zsmalloc pages compress common
zram:     backend zsmalloc zblock pages compress common
zswap:    backend zsmalloc zblock pages compress common
region:   zram backend zsmalloc zblock pages compress common
'
# The layers that may map, unmap or advise memory themselves.
MAPPERS='pages region'

B=${1:-build}
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 77; }
O=$B/CMakeFiles/zs_obj.dir
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# One object per source that exists now (a deleted source's stale object in an
# old build dir must not count, and a missing one means the build is stale).
rc=0
n=0
for src in src/*/*.c; do
	obj=$O/$src.o
	if [ ! -e "$obj" ]; then
		echo "FAIL: $obj not built (build the library first)"
		rc=1
		continue
	fi
	f=${src#src/}
	# "FILE U sym" for each reference, "FILE D sym" for each global definition.
	nm "$obj" | awk -v f="$f" '$1 == "U" { print f, "U", $2; next }
		$2 ~ /^[TDBRVWCGS]$/ { print f, "D", $3 }' >> "$tmp/syms"
	n=$((n + 1))
done
[ "$n" -gt 50 ] || { echo "FAIL: only $n objects found under $O"; exit 1; }

echo "$MAP" | awk 'NF { sub(":", "", $1); printf "A"; for (i = 1; i <= NF; i++) printf " %s", $i; print "" }' > "$tmp/map"
echo "M $MAPPERS" >> "$tmp/map"

cat "$tmp/map" "$tmp/syms" | awk -v nobj="$n" '
function layer(f) { return substr(f, 1, index(f, "/") - 1) }
# Depth-first walk of one layer'"'"'s file graph: a reference to a file still on
# the walk'"'"'s stack closes a cycle, printed from that file round to itself.
function walk(u, prefix,    k, i, v, e) {
	state[u] = 1
	stack[++depth] = u
	k = split(adj[u], e, " ")
	for (i = 1; i <= k; i++) {
		v = e[i]
		if (state[v] == 1) {
			line = ""
			for (j = depth; stack[j] != v; j--)
				;
			for (; j <= depth; j++)
				line = line stack[j] " -(" fedge[stack[j] " " (j < depth ? stack[j + 1] : v)] ")-> "
			print prefix line v
			cycles++
		} else if (!state[v])
			walk(v, prefix)
	}
	depth--
	state[u] = 2
}
$1 == "A" { known[$2] = 1; for (i = 3; i <= NF; i++) allow[$2 " " $i] = 1; next }
$1 == "M" { for (i = 2; i <= NF; i++) mapper[$i] = 1; next }
$2 == "D" { def[$3] = $1; next }
$2 == "U" { nu++; uf[nu] = $1; us[nu] = $3; if (!seen[$1]++) files[++nf] = $1 }
END {
	# The map itself must point down: a cycle of layers would allow file cycles across them.
	for (k in allow) { split(k, p, " "); if (!known[p[2]]) { print "FAIL: the map names unknown layer " p[2]; bad++ } }
	for (l in known) for (m in known) if (l < m && allow[l " " m] && allow[m " " l]) {
		print "FAIL: the map lets " l " and " m " reference each other"; bad++
	}
	for (i = 1; i <= nu; i++) {
		f = uf[i]; s = us[i]; lf = layer(f)
		if (!known[lf] && !warned[lf]++) { print "FAIL: src/" lf "/ is not in the layer map (tests/package/layering.sh)"; bad++ }
		if (s ~ /^(mmap|mmap64|munmap|madvise|mremap)$/ && !mapper[lf]) {
			print "FAIL: src/" f " calls " s " (only the page provider and the region map memory: use src/pages/pages.h)"
			bad++
		}
		if (!(s in def) || def[s] == f)
			continue
		g = def[s]; lg = layer(g)
		if (lf == lg) {
			if (!((f " " g) in fedge)) { fedge[f " " g] = s; adj[f] = adj[f] " " g; intra++ }
			else if (length(fedge[f " " g]) < 60) fedge[f " " g] = fedge[f " " g] "," s
		} else {
			cross++
			if (known[lf] && !allow[lf " " lg]) {
				print "FAIL: src/" f " -> src/" g " (" s "): " lf " may not reference " lg; bad++
			}
		}
	}
	for (i = 1; i <= nf; i++)
		if (!state[files[i]])
			walk(files[i], "FAIL: file cycle in src/" layer(files[i]) "/: ")
	bad += cycles
	if (bad) { print bad " layering violation(s)"; exit 1 }
	print "ok: " nobj " objects, " cross " cross-layer references all on the map, " intra " file edges inside layers without a cycle, memory mapped only in " "src/pages and src/region"
}' || rc=1
exit $rc
