#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call on a machine of two GPUs (kind nvidia-h200-x2; #52): the envs' own weak
# scaling over real MQE and the Isaac Gym stand-in (not PhysX). `mapush train` PPO (ours: MQE
# patched, OpenRL 01-06), 500 envs a process, alone on GPU 0 ("one") against two at once, one
# on each GPU ("two", as `mapush sweep` runs its cells; each with half the host's cores, as a
# rank of `mapush train --gpus` would get). SCALING_BLOCKS blocks of one, two, two, one. No
# collective: the ceiling of one run across the GPUs before its all-reduces (openrl_ranks.py).
# Needs .whl and .bench_site/{site,records,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
# Writes one file, $OUT/scaling-summary.json (benchmarks/scaling_summary.py). Everything else
# goes to a fresh folder of its own: a machine still warm from an earlier call keeps /tmp, and
# learning.py resumes a run it finds. A run that fails fails the call (exit 1, no summary).
set -u
W=$(mktemp -d /tmp/scaling.XXXXXX) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" .whl/*.whl || exit 1
export PYTHONPATH=$W/site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p "$W/src" && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C "$W/src" || exit 1
B=.bench_site; n=0; runs=()
STEPS=${SCALING_STEPS:-800000}; LIMIT=${SCALING_TIMEOUT:-120}; BLOCKS=${SCALING_BLOCKS:-1}
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "error: this call needs two GPUs (kind nvidia-h200-x2)"; exit 2; }
half=$(( $(nproc) / 2 ))
ONE_THREADS=${SCALING_ONE_THREADS:-}  # the one process's OMP_NUM_THREADS; unset: torch's default

train() {  # train GPU RUN: ours on GPU alone in its sight
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/learning.py --src "$W/src/MAPush" \
    --site "$PWD/$B/site" --records "$PWD/$B/records" --steps "$STEPS" \
    --checkpoint-interval 100000000 --timeout "$LIMIT" --run "$2" \
    --out "$W/out/${2##*/}" > "$2.log" 2>&1
  local rc=$?
  echo "${2##*/} rc=$rc"; tail -2 "$2.log"
  [ "$rc" = 0 ] || echo "${2##*/}" >> "$W/failed"
}

nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -l 5 > "$W/memory.csv" &
sampler=$!
order=()
for _ in $(seq 1 "$BLOCKS"); do order+=(one two two one); done
for slot in "${order[@]}"; do
  n=$((n+1))
  if [ "$slot" = one ]; then
    if [ -n "$ONE_THREADS" ]; then OMP_NUM_THREADS=$ONE_THREADS train 0 "$W/one-$n"
    else train 0 "$W/one-$n"; fi
    runs+=("$W/one-$n")
  else
    OMP_NUM_THREADS=$half train 0 "$W/two-$n-0" & first=$!
    OMP_NUM_THREADS=$half train 1 "$W/two-$n-1"
    wait "$first"
    runs+=("$W/two-$n-0" "$W/two-$n-1")
  fi
done
kill "$sampler"
[ -s "$W/failed" ] && { echo "scaling: FAILED $(tr '\n' ' ' < "$W/failed")(logs in $W)"; exit 1; }
python3 benchmarks/scaling_summary.py "${runs[@]}" --memory "$W/memory.csv" \
  --out "$OUT"/scaling-summary.json \
  --what "mapush train --algo ppo --task go1push_mid --num-envs 500 a process, $STEPS env steps a run, over real MQE and the Isaac Gym stand-in (not PhysX): one process on GPU 0 against two at once (one a GPU, OMP_NUM_THREADS=$half each; the one: ${ONE_THREADS:-torch default}), $BLOCKS block(s) of one, two, two, one; no collective"
