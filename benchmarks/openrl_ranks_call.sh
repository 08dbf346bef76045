#!/bin/bash
# patches/openrl/05 on NCCL, one device call on nvidia-h100-x2 (benchmarks/README.md): two ranks
# of 500 envs against one process of 1,000 (one update, weights), then the update's time and
# its all-reduces at 500 envs per rank against one process, alternated. Needs .whl and
# .bench_ranks/{with05,without05}/openrl (OpenRL patched 01-05 and 01-04).
set -u
cd "$(dirname "$0")/.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bs .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bs PYTHONWARNINGS=ignore
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt"
python3 -c "import torch,sys;print(torch.__version__,sys.version)" >> "$OUT/gpu.txt"
ranks() {  # tag site args...: one benchmarks/openrl_ranks.py launch, its record to $OUT
  local tag=$1 site=$2; shift 2
  python3 benchmarks/openrl_ranks.py --site "$PWD/.bench_ranks/$site" --device cuda --tensors 1 \
    --steps 200 --out "$OUT/$tag.json" "$@" > /dev/null 2>> "$OUT/errors.txt"
  echo "$tag rc=$?"
}
if [ "${1:-}" != timing ]; then  # timing: the timings only
# one update (3 epochs of one minibatch): 2 ranks x 500 envs against 1 process x 1,000
ranks eq-1 with05 --ranks 1 --no-group --envs-per-rank 1000 --epochs 3 --minibatches 1 --weights
ranks eq-2 with05 --ranks 2 --envs-per-rank 500 --epochs 3 --minibatches 1 --weights
ranks eq-2-without05 without05 --ranks 2 --envs-per-rank 500 --epochs 3 --minibatches 1 --weights
fi
# the update as ppo.yaml trains it, 500 envs per rank, 6 updates each: one process against two
# ranks, alternated
for i in 1 2; do
  ranks "t-1-$i" with05 --ranks 1 --no-group --envs-per-rank 500 --updates 6
  ranks "t-2-$i" with05 --ranks 2 --envs-per-rank 500 --updates 6
  ranks "u-2-$i" with05 --ranks 2 --envs-per-rank 500 --updates 6 --time-reduces 0
done
