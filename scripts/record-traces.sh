#!/usr/bin/env bash
# Owner: trace replay.  Re-records kernel traces like the ones
# committed under tests/data/: builds the data files (a tar of shared
# libraries, a tar of text docs, an anonymous-memory dump of a live python3
# process) and records them with the project's own recorder (`zs record`,
# docs/trace-format.md), then xz-compresses them.  (The committed traces were
# recorded with an earlier, external recorder of the same format.)  The data is whatever this machine has, so a re-recording matches the
# committed traces in kind, not byte for byte.  Needs root and zram.
#
# Usage: scripts/record-traces.sh [OUTDIR]   (default tests/data; ZS_BIN=path/to/zs,
#        default build/zs)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/tests/data}
zs=${ZS_BIN:-$here/build/zs}
[ -x "$zs" ] || { echo "record-traces: $zs not built (cmake --build build)" >&2; exit 1; }
work=$(mktemp -d /tmp/zs-record.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

if [ "$(id -u)" != 0 ] || [ ! -e /sys/class/zram-control ]; then
	echo "record-traces: needs root and zram (/sys/class/zram-control)" >&2
	exit 1
fi

# File pages 1: shared-library binaries (code + data, mixed compressibility).
(cd /usr/lib/x86_64-linux-gnu && ls | grep -E '^lib[a-z].*\.so\.[0-9.]+$' | sort | head -400 |
	tar -cf "$work/usrlib.tar" -T - 2>/dev/null) || true
truncate -s 48M "$work/usrlib.tar"   # whole pages; tail zero pages are same-filled

# File pages 2: plain text (C headers and uncompressed docs; compresses
# well, so it fills many small classes).  .gz files are left out on purpose.
(cd /usr && find include share/doc -type f ! -name '*.gz' | sort | head -8000 |
	tar -cf "$work/text.tar" -T - 2>/dev/null) || true
truncate -s 32M "$work/text.tar"

# Anonymous memory: heap + anonymous rw-p mappings of a live python3 that
# builds dicts, strings, lists and a bytearray with some zero runs.
cat > "$work/heapproc.py" <<'PY'
import os, random, sys, time
rng = random.Random(7)
words = ["alpha", "beta", "gamma", "delta", "zram", "page", "slot", "class", "zspage"]
d = {("k%d" % i): " ".join(rng.choice(words) for _ in range(rng.randrange(1, 40))) for i in range(120000)}
nums = [rng.random() * i for i in range(300000)]
ints = {i: i * i for i in range(200000)}
blob = bytearray(8 << 20)
for i in range(0, len(blob), 4096 * 3):
    blob[i:i + 1500] = os.urandom(1500)
sys.stdout.write("ready\n"); sys.stdout.flush()
time.sleep(600)
PY
cat > "$work/dumpanon.py" <<'PY'
import sys, re
pid, out = sys.argv[1], sys.argv[2]
total = 0
with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem, open(out, "wb") as o:
    for line in maps:
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        name = f[5] if len(f) > 5 else ""
        if f[1] != "rw-p" or name not in ("", "[heap]"):
            continue
        try:
            mem.seek(lo); buf = mem.read(hi - lo)
        except OSError:
            continue
        o.write(buf); total += len(buf)
print("dumped %d bytes (%d pages) from pid %s" % (total, total // 4096, pid))
PY
coproc HP { exec python3 "$work/heapproc.py"; }
read -r _ <&"${HP[0]}"
python3 "$work/dumpanon.py" "$HP_PID" "$work/heap.bin"
kill "$HP_PID"; wait "$HP_PID" 2>/dev/null || true

rec() { # NAME DATA ARGS...
	local name=$1 data=$2; shift 2
	echo "+ zs record -o $name $* $(basename "$data")"
	"$zs" record -o "$work/$name" "$@" "$data"
	xz -9 -c "$work/$name" > "$out/$name.xz"
}
rec usrlib-lz4.trace            "$work/usrlib.tar" --comp lz4     --pages 8000 --seed 11
rec heap-lzorle.trace           "$work/heap.bin"   --comp lzo-rle --pages 6000 --seed 12 --discard 0.4 --overwrite 0.5
rec text-lzorle.trace           "$work/text.tar"   --comp lzo-rle --pages 6000 --seed 13
rec mix-text-lz4.trace          "$work/text.tar"   --comp lz4     --workload mix --pages 3000 --ops 20000 --seed 21
rec mix-heap-lzorle.trace       "$work/heap.bin"   --comp lzo-rle --workload mix --pages 3000 --ops 20000 --seed 22 --p-compact 0.02
rec mix-usrlib-lzorle.trace     "$work/usrlib.tar" --comp lzo-rle --workload mix --pages 3000 --ops 20000 --seed 23 --p-compact 0.05 --p-discard 0.6
ls -l "$out"/*.xz
