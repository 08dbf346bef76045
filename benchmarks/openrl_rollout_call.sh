#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49) for patches/openrl/06 and OpenRL's non-physics time per vector step
# (benchmarks/rollout_non_physics.py: wall time minus the double's own step, 10 iterations of
# warm-up, 21 timed, median and IQR). Needs .whl, .bench_site/{site,records} (every patch),
# .bench_site/pristine-openrl/{site,records} (OpenRL 01 only) and .bench_site/before06/
# {site,records} (01-05): benchmarks/README.md, "OpenRL's non-physics time".
#   1. the GPU equivalence of the whole patched site: device_rollout off against on (within
#      1e-3), act_graph off against on (bit for bit);
#   2. OpenRL as shipped against everything on, at 500 envs;
#   3. 01-05 against 01-06, at 500 envs (the baseline with the device rollout on too).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
B=.bench_site
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT"/gpu.txt
python3 -c "import torch,sys;print(torch.__version__, sys.version)" >> "$OUT"/gpu.txt
for key in device_rollout act_graph; do
  timeout 110 python3 benchmarks/openrl_equivalence.py --key $key --site $B/site --records $B/records --envs 500 --updates 3 --out "$OUT/equivalence-$key.json" 2>&1 | tail -2
done
timeout 300 python3 benchmarks/rollout_non_physics.py --algos ppo --sizes 500 --site $B/site --records $B/records --pristine-site $B/pristine-openrl/site --pristine-records $B/pristine-openrl/records --out "$OUT"/pristine-vs-06.json 2>&1 | tail -3
timeout 150 python3 benchmarks/rollout_non_physics.py --algos ppo --sizes 500 --site $B/site --records $B/records --pristine-site $B/before06/site --pristine-records $B/before06/records --baseline-rollout --baseline-label before06 --out "$OUT"/before06-vs-06.json 2>&1 | tail -3
