#!/usr/bin/env bash
# timeline.sh LABEL: run.sh with `perf trace` of read, write, pwrite64 and
# fsync on the three nodes and the bench for 2 s of the measured window,
# then chain.py: the median time of every stage of one request
# (docs/RUNS.md, "One pair at one client: the hand-offs measured").
# Same environment as run.sh; output in $WORK/trace-LABEL.txt.
set -u
L=$1; shift
WORK=${WORK:-/tmp/onepair}; mkdir -p "$WORK"; export WORK
HOOK='perf trace -p ${PIDS[0]},${PIDS[1]},${PIDS[2]},$BP -e read,write,pwrite64,fsync -o '"$WORK/trace-$L.txt"' -- sleep 2 >/dev/null 2>&1 &
(sleep 2.5; for p in ${PIDS[0]} ${PIDS[1]} ${PIDS[2]} $BP; do echo $p $LEADER $(ls /proc/$p/task); done >'"$WORK/tasks-$L.txt"') &' \
PERF= "$(dirname "$0")/run.sh" "$L" "$@"
python3 "$(dirname "$0")/chain.py" "$WORK/trace-$L.txt" "$WORK/tasks-$L.txt"
