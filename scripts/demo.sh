#!/usr/bin/env bash
# The README's first command: install what libzs needs, build it, and run the
# quick report (the seed experiments on the embedded corpus) into ./report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "built build/zs"
./build/zs report --quick --out report "$@"
