#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call on a machine of two GPUs (kind nvidia-h200-x2; #52): the envs' own weak
# scaling over real MQE and the Isaac Gym stand-in (not PhysX). `mapush train` PPO (ours: MQE
# patched, OpenRL 01-06), 500 envs a process, alone on GPU 0 ("one") against two at once, one
# on each GPU ("two", as `mapush sweep` runs its cells; each with half the host's cores, as a
# rank of `mapush train --gpus` would get). SCALING_BLOCKS blocks of one, two, two, one. No
# collective: the ceiling of one run across the GPUs before its all-reduces (openrl_ranks.py).
# Needs .whl and .bench_site/{site,records,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
# Writes one file, $OUT/scaling-summary.json (benchmarks/scaling_summary.py).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p /tmp/src && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C /tmp/src || exit 1
B=.bench_site; n=0; runs=()
STEPS=${SCALING_STEPS:-800000}; LIMIT=${SCALING_TIMEOUT:-120}; BLOCKS=${SCALING_BLOCKS:-1}
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "error: this call needs two GPUs (kind nvidia-h200-x2)"; exit 2; }
half=$(( $(nproc) / 2 ))

train() {  # train GPU RUN: ours on GPU alone in its sight
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/learning.py --src /tmp/src/MAPush \
    --site "$PWD/$B/site" --records "$PWD/$B/records" --steps "$STEPS" \
    --checkpoint-interval 100000000 --timeout "$LIMIT" --run "$2" \
    --out "/tmp/scaling-out/${2##*/}" > "$2.log" 2>&1
  echo "${2##*/} rc=$?"; tail -2 "$2.log"
}

nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -l 5 > /tmp/memory.csv &
sampler=$!
order=()
for _ in $(seq 1 "$BLOCKS"); do order+=(one two two one); done
for slot in "${order[@]}"; do
  n=$((n+1))
  if [ "$slot" = one ]; then
    train 0 "/tmp/one-$n"; runs+=("/tmp/one-$n")
  else
    OMP_NUM_THREADS=$half train 0 "/tmp/two-$n-0" & first=$!
    OMP_NUM_THREADS=$half train 1 "/tmp/two-$n-1"
    wait "$first"
    runs+=("/tmp/two-$n-0" "/tmp/two-$n-1")
  fi
done
kill "$sampler"
python3 benchmarks/scaling_summary.py "${runs[@]}" --memory /tmp/memory.csv \
  --out "$OUT"/scaling-summary.json \
  --what "mapush train --algo ppo --task go1push_mid --num-envs 500 a process, $STEPS env steps a run, over real MQE and the Isaac Gym stand-in (not PhysX): one process on GPU 0 against two at once (one a GPU, OMP_NUM_THREADS=$half each), $BLOCKS block(s) of one, two, two, one; no collective"
