#!/bin/bash
# One device call (#80 item 2): which mid-level training shows learning in `make try`'s
# minutes? `mapush train` over real MQE and the Isaac Gym stand-in on the CPU, each variant
# pinned to two cores (taskset) as a 2-core laptop has them, run side by side: the tour's
# default task config with 5 s episodes and the target 1.2-1.6 m from the box (the learning
# test's two settings), each variant's envs, rollout length and steps (40 updates), a log
# line every update. Writes $OUT/try-curve.jsonl: per variant its wall time and push_reward and
# success_rate per update (the run's log.txt and progress.txt, as learning.py reads them).
set -u
W=$(mktemp -d /tmp/try-curve.XXXXXX) || exit 1
OUT=${OUT:-/tmp/try-curve-out}; mkdir -p "$OUT"
# shellcheck source=benchmarks/try_site.sh
source benchmarks/try_site.sh
SETS="--set task.env.episode_length_s=5 --set task.goal.random_goal_distance_from_init=[1.2,1.6] --set log_interval=1"
one() {  # a variant: its name, its cores, then mapush train's own options
    local name=$1 cores=$2; shift 2
    local start; start=$(date +%s)
    MAPUSH_SRC=$W/MAPush taskset -c "$cores" python3 tests/standin/try.py --work "$W/work" \
        --cmd "mapush train --object cuboid --seed 1 --run-dir $W/$name --no-preflight $SETS $*" \
        > "$W/$name.log" 2>&1
    local rc=$?
    python3 - "$name" "$W/$name" "$rc" "$(( $(date +%s) - start ))" "$*" >> "$OUT/try-curve.jsonl" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, ".")
from benchmarks.learning import curves
name, run, rc, took, options = sys.argv[1:]
try:
    got = curves(Path(run))
    rows = {"push_reward": [u.get("reward/push_reward") for u in got["updates"]
                            if "reward/push_reward" in u],
            "success": [s[1] for s in got["success"]]}
except Exception as exc:  # noqa: BLE001 (a record of what failed)
    rows = {"error": str(exc)}
print(json.dumps({"variant": name, "options": options, "exit": int(rc), "seconds": int(took),
                  **rows}))
PY
}
# the first call prepares the tree and the site, alone
MAPUSH_SRC=$W/MAPush python3 tests/standin/try.py --work "$W/work" --cmd "mapush doctor" > /dev/null 2>&1
one envs32-ep200 0,1 --num-envs 32 --steps 256000 &
one envs16-ep100 2,3 --num-envs 16 --steps 64000 --set episode_length=100 &
one envs32-ep50 4,5 --num-envs 32 --steps 64000 --set episode_length=50 &
one envs32-ep100 6,7 --num-envs 32 --steps 128000 --set episode_length=100 &
wait
cat "$OUT/try-curve.jsonl"
