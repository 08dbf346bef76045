#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49): patches/openrl/03 on the GPU. The GPU equivalence (openrl_equivalence.py),
# the device traffic per vector step (openrl_profile.py) and the PPO timing at 500 envs
# (run.py --sections train), OpenRL 01 only, 01 + 02 and 01 + 02 + 03, alternated.
# Needs .whl and .bench_site/{site,records,pristine-openrl,openrl-02} (benchmarks/README.md).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
echo "device_rollout: false" > /tmp/off.yaml
B=.bench_site
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT"/gpu.txt
python3 -c "import torch,sys;print(torch.__version__, sys.version)" >> "$OUT"/gpu.txt
timeout 120 python3 benchmarks/openrl_equivalence.py --site $B/site --records $B/records --envs 500 --updates 3 --out "$OUT"/equivalence.json 2>&1 | tail -3
BENCH_PPO_CONFIG=/tmp/off.yaml timeout 120 python3 benchmarks/openrl_profile.py --site $B/pristine-openrl/site --records $B/pristine-openrl/records --label "01 only" --site $B/openrl-02/site --records $B/openrl-02/records --label "01 + 02" --out "$OUT"/profile-off.json 2>&1 | tail -3
timeout 90 python3 benchmarks/openrl_profile.py --site $B/site --records $B/records --label "01 + 02 + 03" --out "$OUT"/profile-03.json 2>&1 | tail -3
n=0
for v in 01 02 03 03 02 01; do
  n=$((n+1))
  case $v in 01) s=$B/pristine-openrl; c=/tmp/off.yaml;; 02) s=$B/openrl-02; c=/tmp/off.yaml;; 03) s=$B; c=;; esac
  BENCH_PPO_CONFIG="$c" timeout 100 python3 benchmarks/run.py --sections train --train-algos ppo --train-sizes 500 --train-physics-sizes "" --train-updates 5 --site "$s/site" --records "$s/records" --out /tmp/bench-ppo --tag "ppo-$v-$n" > "/tmp/bench-ppo-$v-$n.log" 2>&1
  echo "$v $n rc=$?"; python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print([(r.get(\"exit\"), r.get(\"env_steps_per_s\",{}).get(\"median\"), r.get(\"layer_ms_per_step\",{}).get(\"median\")) for r in d[\"sections\"][\"train\"][\"runs\"]])" /tmp/bench-ppo/ppo-$v-$n.json 2>&1 | tail -1 | tee -a "$OUT/timing.txt"
done
