#!/bin/bash
# One device call (#80 item 2): `make try`'s whole tour on the CPU, pinned to two cores
# (taskset -c 0,1) as a 2-core laptop has them: does the mid level's curve rise, and in how
# many minutes? Over real MQE and the Isaac Gym stand-in, the patched site carried
# (try_site.sh). Writes $OUT/try-cpu.log, the pipeline's record, the mid run's log.txt and
# progress.txt, and both reports.
set -u
W=$(mktemp -d /tmp/try-cpu.XXXXXX) || exit 1
OUT=${OUT:-/tmp/try-cpu-out}; mkdir -p "$OUT"
# shellcheck source=benchmarks/try_site.sh
source benchmarks/try_site.sh
start=$(date +%s)
MAPUSH_SRC=$W/MAPush taskset -c 0,1 python3 tests/standin/try.py --dir "$W/try" \
    --work "$W/work" --no-open > "$OUT/try-cpu.log" 2>&1
rc=$?
echo "try-cpu: exit $rc after $(( $(date +%s) - start )) s on 2 cores" | tee -a "$OUT/try-cpu.log"
cp "$W/try/pipeline.json" "$OUT/" 2>/dev/null
cp "$W/try/mid/log.txt" "$W/try/mid/progress.txt" "$OUT/" 2>/dev/null
for level in mid upper; do
    mkdir -p "$OUT/$level" && cp -r "$W/try/$level/report" "$OUT/$level/" 2>/dev/null
done
exit "$rc"
