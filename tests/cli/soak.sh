#!/usr/bin/env bash
# Short run of `zs soak` (threads on one pool and one zram store with a
# concurrent compactor, deferred free, idle marking and recompression): it
# must lose no byte and leave 0 pages after freeing everything.  The long
# runs and their figures are in docs/reliability.md.
set -euo pipefail
bin=${1:-build}/zs
"$bin" soak --seconds 3 --threads 3 --objects 8192 --slots 2048 --report 0
"$bin" soak --seconds 2 --threads 2 --objects 4096 --slots 1024 --page-size 16K --checked \
	--free-mode class-unlocked --comp zstd --recomp lz4hc --mem-limit 2M --report 0
"$bin" soak --seconds 2 --threads 2 --objects 4096 --slots 1024 --class-shards auto --free-mode class-unlocked \
	--report 0
