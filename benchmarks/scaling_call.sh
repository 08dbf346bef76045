#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call on a machine of two or four GPUs (kind nvidia-h200-x2 or -x4; #52): the envs'
# own weak scaling over real MQE and the Isaac Gym stand-in (not PhysX). `mapush train` PPO
# (ours: MQE patched, OpenRL 01-06), 500 envs a process, alone on GPU 0 ("one") against two
# or four at once, one on each GPU ("two", "four", as `mapush sweep` runs its cells; each with
# its share of the host's cores, as a rank of `mapush train --gpus` would get). SCALING_GPUS=2
# (the default): SCALING_BLOCKS blocks of one, two, two, one. SCALING_GPUS=4: blocks of one,
# four, two, one and one, two, four, one in turn. No collective: the ceiling of one run across
# the GPUs before its all-reduces (openrl_ranks.py).
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
GPUS=${SCALING_GPUS:-2}
case $GPUS in
  2|4) ;;
  *) echo "error: SCALING_GPUS=$GPUS: use 2 or 4"; exit 2 ;;
esac
[ "$(nvidia-smi -L | wc -l)" -ge "$GPUS" ] || { echo "error: this call needs $GPUS GPUs (kind nvidia-h200-x$GPUS)"; exit 2; }
ONE_THREADS=${SCALING_ONE_THREADS:-}  # the one process's OMP_NUM_THREADS; unset: torch's default
threads() {  # threads K: OMP_NUM_THREADS of each of K processes at once (the cores shared)
  local t=$(( $(nproc) / $1 )); [ "$t" -ge 1 ] || t=1; echo "$t"
}
if [ "$GPUS" = 2 ]; then
  others="two at once (one a GPU, OMP_NUM_THREADS=$(threads 2) each"
  shape="one, two, two, one"
else
  others="two and four at once (one a GPU, OMP_NUM_THREADS=$(threads 2) and $(threads 4) each"
  shape="one, four, two, one and one, two, four, one in turn"
fi

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
for b in $(seq 1 "$BLOCKS"); do
  if [ "$GPUS" = 2 ]; then order+=(one two two one)
  elif [ $((b % 2)) = 1 ]; then order+=(one four two one)
  else order+=(one two four one); fi
done
for slot in "${order[@]}"; do
  n=$((n+1))
  if [ "$slot" = one ]; then
    if [ -n "$ONE_THREADS" ]; then OMP_NUM_THREADS=$ONE_THREADS train 0 "$W/one-$n"
    else train 0 "$W/one-$n"; fi
    runs+=("$W/one-$n")
  else
    k=2; [ "$slot" = four ] && k=4
    pids=()
    for g in $(seq 0 $((k - 1))); do
      OMP_NUM_THREADS=$(threads "$k") train "$g" "$W/$slot-$n-$g" & pids+=($!)
      runs+=("$W/$slot-$n-$g")
    done
    wait "${pids[@]}"
  fi
done
kill "$sampler"
[ -s "$W/failed" ] && { echo "scaling: FAILED $(tr '\n' ' ' < "$W/failed")(logs in $W)"; exit 1; }
python3 benchmarks/scaling_summary.py "${runs[@]}" --memory "$W/memory.csv" \
  --out "$OUT"/scaling-summary.json \
  --what "mapush train --algo ppo --task go1push_mid --num-envs 500 a process, $STEPS env steps a run, over real MQE and the Isaac Gym stand-in (not PhysX): one process on GPU 0 against $others; the one: ${ONE_THREADS:-torch default}), $BLOCKS block(s) of $shape; no collective"
