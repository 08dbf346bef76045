#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49) for OpenRL's non-physics time per vector step at 500 envs
# (benchmarks/rollout_non_physics.py: wall time minus the double's own step, 10 iterations of
# warm-up, 20 timed, median and IQR), the patched site against an earlier one.
#   bash benchmarks/openrl_rollout_call.sh BEFORE [PAIRS]
# BEFORE: the folder under .bench_site that holds the earlier site and its records (before06:
# patches 01-05; before07: 01-06); PAIRS (default 4): BEFORE against the patched site that
# many times, the order alternated. Needs .whl, .bench_site/{site,records} (every patch) and
# .bench_site/BEFORE/{site,records}; with PRISTINE=1 also .bench_site/pristine-openrl/
# {site,records} (OpenRL 01 only), for one pair OpenRL as shipped against the patched site
# (about 4 minutes). EQUIVALENCE=0 skips the patched site's GPU equivalence (device_rollout
# off against on, within 1e-3; act_graph off against on, bit for bit); ITERATIONS (default 31:
# 10 of warm-up, 20 timed) sets the pairs' length. benchmarks/README.md,
# "OpenRL's rollout step without unread work".
set -u
BEFORE=${1:?usage: openrl_rollout_call.sh BEFORE [PAIRS]}; PAIRS=${2:-4}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
B=.bench_site
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT"/gpu.txt
python3 -c "import torch,sys;print(torch.__version__, sys.version)" >> "$OUT"/gpu.txt
if [ "${EQUIVALENCE:-1}" = 1 ]; then
  for key in device_rollout act_graph; do
    timeout 110 python3 benchmarks/openrl_equivalence.py --key $key --site $B/site --records $B/records --envs 500 --updates 3 --out "$OUT/equivalence-$key.json" 2>&1 | tail -2
  done
fi
if [ "${PRISTINE:-0}" = 1 ]; then
  timeout 300 python3 benchmarks/rollout_non_physics.py --algos ppo --sizes 500 --site $B/site --records $B/records --pristine-site $B/pristine-openrl/site --pristine-records $B/pristine-openrl/records --out "$OUT"/pristine-vs-patched.json 2>&1 | tail -3
fi
sizes=$(python3 -c "print(','.join(['500'] * int('$PAIRS')))")
timeout 540 python3 benchmarks/rollout_non_physics.py --algos ppo --sizes "$sizes" --site $B/site --records $B/records --pristine-site "$B/$BEFORE/site" --pristine-records "$B/$BEFORE/records" --baseline-rollout --baseline-label "$BEFORE" --iterations "${ITERATIONS:-31}" --out "$OUT/$BEFORE-vs-patched.json" 2>&1 | tail -$((PAIRS * 2 + 1))
