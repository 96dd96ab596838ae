#!/bin/bash
# The region's pageout copies where UFFDIO_MOVE cannot be used (kernels before
# 6.8, or a run the kernel refuses to move).  With the move on, that path only
# runs on partial moves, so run the region tests again with it off
# (ZS_REGION_MOVE=0, src/region/region.c) to keep it tested.  Its pages
# still leave the range by UFFDIO_MOVE where the kernel has it (pinned pages
# stay); ZS_REGION_MOVE=zap, below, runs the zap that older kernels use.
# Usage: region_nomove.sh BUILD_DIR
set -u
b=${1:?build dir}
export ZS_REGION_MOVE=0
export ZS_RACE_SECONDS=${ZS_RACE_SECONDS:-3}   # test_mt_region_move_race, per mode
# Its munmap mode too: the copy path's own zap, split by a concurrent munmap, used
# to take the kernel's repeated remove event for the application's drop
# (docs/reliability.md, "Pageout by UFFDIO_MOVE").
export ZS_RACE_MODE=${ZS_RACE_MODE:-dontneed,touch,munmap}
rc=0 ran=0
for t in test_mt_region test_region_misuse test_mt_repro_region_madvise test_mt_repro_region_wbread \
	 test_mt_region_stress test_mt_region_move_race; do
	[ -x "$b/$t" ] || { echo "missing $b/$t"; exit 1; }
	"$b/$t" >"$b/$t.nomove.log" 2>&1
	r=$?
	case $r in
	0) ran=$((ran + 1)); echo "ok   $t (ZS_REGION_MOVE=0)" ;;
	77) echo "skip $t: $(tail -1 "$b/$t.nomove.log")" ;;
	*) echo "FAIL $t (ZS_REGION_MOVE=0): exit $r"; tail -20 "$b/$t.nomove.log"; rc=1 ;;
	esac
done
# ZS_REGION_MOVE=zap: the copy path's pages zapped, not moved out (what a kernel
# before 6.8 does, where pageout cannot see pinned pages): the drop-and-event part.
for t in test_region_misuse test_mt_region_move_race; do
	ZS_REGION_MOVE=zap "$b/$t" >"$b/$t.zap.log" 2>&1
	r=$?
	case $r in
	0) ran=$((ran + 1)); echo "ok   $t (ZS_REGION_MOVE=zap)" ;;
	77) echo "skip $t: $(tail -1 "$b/$t.zap.log")" ;;
	*) echo "FAIL $t (ZS_REGION_MOVE=zap): exit $r"; tail -20 "$b/$t.zap.log"; rc=1 ;;
	esac
done
[ $rc = 0 ] && [ $ran = 0 ] && exit 77
exit $rc
