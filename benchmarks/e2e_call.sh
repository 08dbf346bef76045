#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49): `mapush train` PPO over real MQE and the stand-in, ours (MQE patched,
# OpenRL 01-06) against upstream (MQE as shipped, OpenRL 01 only), alternated: E2E_BLOCKS
# blocks of upstream, ours, ours, upstream (two pairs each). E2E_TIMED=1 adds one run of each
# with the stand-in's calls timed (its share of the step; not in the pairs). Needs .whl and
# .bench_site/{site,records,pristine-openrl,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
# Writes one file, $OUT/e2e-summary.json (benchmarks/e2e_summary.py): every run's env steps/s
# per update, each pair's ratio, their median and IQR; runs and logs stay in /tmp.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p /tmp/src && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C /tmp/src || exit 1
echo "device_rollout: false" > /tmp/off.yaml
B=.bench_site; n=0; runs=(); timed=()
TASK=${E2E_TASK:-go1push_mid}; STEPS=${E2E_STEPS:-700000}  # E2E_TASK=go1push_upper: the high level
UP_S=${E2E_UP_TIMEOUT:-150}; OURS_S=${E2E_OURS_TIMEOUT:-100}; BLOCKS=${E2E_BLOCKS:-1}

train() {  # train up|ours RUN [learning.py's options...]
  local v=$1 run=$2 a t; shift 2
  if [ "$v" = up ]; then a="--pristine --site $B/pristine-openrl/site --records $B/pristine-openrl/records --config /tmp/off.yaml"; t=$UP_S
  else a="--site $PWD/$B/site --records $PWD/$B/records"; t=$OURS_S; fi
  # shellcheck disable=SC2086
  python3 benchmarks/learning.py --src /tmp/src/MAPush $a --task "$TASK" --steps "$STEPS" --checkpoint-interval 100000000 --timeout "$t" --run "$run" --out "/tmp/e2e-out/${run##*/}" "$@" > "$run.log" 2>&1
  echo "${run##*/} rc=$?"; tail -2 "$run.log"
}

order=()
for _ in $(seq 1 "$BLOCKS"); do order+=(up ours ours up); done
for v in "${order[@]}"; do
  n=$((n+1))
  train "$v" "/tmp/r-$v-$n"
  runs+=("/tmp/r-$v-$n")
done
if [ "${E2E_TIMED:-0}" = 1 ]; then
  for v in ours up; do
    train "$v" "/tmp/t-$v" --standin-times "/tmp/t-$v.jsonl"
    timed+=(--timed "/tmp/t-$v=/tmp/t-$v.jsonl")
  done
fi
cat /tmp/r-ours-2/step.json /tmp/t-ours/step.json 2>/dev/null; echo
python3 benchmarks/e2e_summary.py "${runs[@]}" "${timed[@]}" --out "$OUT"/e2e-summary.json \
  --what "mapush train --algo ppo --task $TASK --num-envs 500, $STEPS env steps a run, over real MQE and the Isaac Gym stand-in (not PhysX): ours against upstream, $BLOCKS block(s) of upstream, ours, ours, upstream; timed runs: ${E2E_TIMED:-0}"
