#!/bin/bash
# patches/harl/06 (and openrl/05 at 4 ranks) on NCCL, one device call on nvidia-h100-x4 or
# -x2 (benchmarks/README.md): N ranks of E envs against one process of N x E (one update,
# weights), for N = 2 and, with 4 GPUs, 4; then HAPPO's update (happo.yaml's 5 epochs, 200
# steps, 500 envs per rank) at 1, 2 (and 4) ranks, alternated. Needs .whl and
# .bench_ranks/{harl06,harl-without06}/harl (HARL patched 01-06 and 01-05) and
# .bench_ranks/with05/openrl (OpenRL patched 01-05). One argument, timing, runs the timings
# only. What comes back: $OUT/summary.json (benchmarks/ranks_summary.py), errors.txt, gpu.txt.
set -u
cd "$(dirname "$0")/.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bs .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bs PYTHONWARNINGS=ignore
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt"
python3 -c "import torch,sys;print(torch.__version__,sys.version)" >> "$OUT/gpu.txt"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
worlds=(2); [ "$gpus" -ge 4 ] && worlds=(2 4)
run() {  # tag script site args...: one launch (a taken rendezvous port is the launcher's
  # to retry: launch_workers), its record to /tmp/rec
  local tag=$1 script=$2 site=$3; shift 3
  python3 "benchmarks/$script" --site "$PWD/.bench_ranks/$site" --device cuda \
    --out "/tmp/rec/$tag.json" "$@" > /dev/null 2>> "$OUT/errors.txt"
  echo "$tag rc=$?"
}
mkdir -p /tmp/rec
trap 'python3 benchmarks/ranks_summary.py /tmp/rec > "$OUT/summary.json"' EXIT
part=${1:-all}
# one update (2 epochs of one minibatch, 200 steps): N ranks x 1000/N envs against 1 x 1,000
[ "$part" = timing ] || for algo in happo mappo; do
  run "$algo-eq-1" harl_ranks.py harl06 --algo "$algo" --ranks 1 --no-group --envs-per-rank 1000 --steps 200 --weights
  for n in "${worlds[@]}"; do
    run "$algo-eq-$n" harl_ranks.py harl06 --algo "$algo" --ranks "$n" --envs-per-rank $((1000 / n)) --steps 200 --weights
  done
done
[ "$part" = timing ] || run happo-eq-2-without06 harl_ranks.py harl-without06 --ranks 2 --envs-per-rank 500 --steps 200 --weights
if [ "$gpus" -ge 4 ] && [ "$part" != timing ]; then  # openrl/05 at 4 ranks (2 are in openrl-05-ranks-h100x2.json)
  run ppo-eq-1 openrl_ranks.py with05 --ranks 1 --no-group --envs-per-rank 1000 --steps 200 --tensors 1 --epochs 3 --minibatches 1 --weights
  run ppo-eq-4 openrl_ranks.py with05 --ranks 4 --envs-per-rank 250 --steps 200 --tensors 1 --epochs 3 --minibatches 1 --weights
fi
# HAPPO's update as happo.yaml trains it, 500 envs per rank: 1, 2 (and 4) ranks, alternated
for i in 1 2; do
  order=(1 "${worlds[@]}"); [ "$i" = 2 ] && order=("${worlds[@]}" 1) && [ "${#worlds[@]}" = 2 ] && order=(4 2 1)
  for n in "${order[@]}"; do
    group=(); [ "$n" = 1 ] && group=(--no-group)
    run "t-happo-$n-$i" harl_ranks.py harl06 --ranks "$n" --envs-per-rank 500 --steps 200 --epochs 5 --updates 4 "${group[@]}"
  done
done
