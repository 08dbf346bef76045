#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49): `mapush train` PPO over real MQE and the stand-in, ours (MQE patched,
# OpenRL 01-06) against upstream (MQE as shipped, OpenRL 01 only), alternated: E2E_BLOCKS
# blocks of upstream, ours, ours, upstream (two pairs each). E2E_TIMED=1 adds one run of each
# with the stand-in's calls timed (its share of the step; not in the pairs). Needs .whl and
# .bench_site/{site,records,pristine-openrl,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
# Writes one file, $OUT/e2e-summary.json (benchmarks/e2e_summary.py): every run's env steps/s
# per update, each pair's ratio, their median and IQR. Runs and logs stay in a fresh folder
# of this call's own under /tmp (a machine still warm keeps /tmp, and learning.py resumes a run
# it finds).
set -u
W=$(mktemp -d /tmp/e2e.XXXXXX) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" .whl/*.whl || exit 1
export PYTHONPATH=$W/site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p "$W/src" && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C "$W/src" || exit 1
echo "device_rollout: false" > "$W/off.yaml"
B=.bench_site; n=0; runs=(); timed=()
TASK=${E2E_TASK:-go1push_mid}; STEPS=${E2E_STEPS:-700000}  # E2E_TASK=go1push_upper: the high level
UP_S=${E2E_UP_TIMEOUT:-150}; OURS_S=${E2E_OURS_TIMEOUT:-100}; BLOCKS=${E2E_BLOCKS:-1}

train() {  # train up|ours RUN [learning.py's options...]
  local v=$1 run=$2 a t; shift 2
  if [ "$v" = up ]; then a="--pristine --site $B/pristine-openrl/site --records $B/pristine-openrl/records --config $W/off.yaml"; t=$UP_S
  else a="--site $PWD/$B/site --records $PWD/$B/records"; t=$OURS_S; fi
  # shellcheck disable=SC2086
  python3 benchmarks/learning.py --src "$W/src/MAPush" $a --task "$TASK" --steps "$STEPS" --checkpoint-interval 100000000 --timeout "$t" --run "$run" --out "$W/out/${run##*/}" "$@" > "$run.log" 2>&1
  echo "${run##*/} rc=$?"; tail -2 "$run.log"
}

order=()
for _ in $(seq 1 "$BLOCKS"); do order+=(up ours ours up); done
for v in "${order[@]}"; do
  n=$((n+1))
  train "$v" "$W/r-$v-$n"
  runs+=("$W/r-$v-$n")
done
if [ "${E2E_TIMED:-0}" = 1 ]; then
  for v in ours up; do
    train "$v" "$W/t-$v" --standin-times "$W/t-$v.jsonl"
    timed+=(--timed "$W/t-$v=$W/t-$v.jsonl")
  done
fi
cat "$W/r-ours-2/step.json" "$W/t-ours/step.json" 2>/dev/null; echo
python3 benchmarks/e2e_summary.py "${runs[@]}" "${timed[@]}" --out "$OUT"/e2e-summary.json \
  --what "mapush train --algo ppo --task $TASK --num-envs 500, $STEPS env steps a run, over real MQE and the Isaac Gym stand-in (not PhysX): ours against upstream, $BLOCKS block(s) of upstream, ours, ours, upstream; timed runs: ${E2E_TIMED:-0}"
