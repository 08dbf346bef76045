#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49) for patches/openrl/03 on the GPU; OpenRL 01 only, 01 + 02 and
# 01 + 02 + 03 over the GPU double. Needs .whl and .bench_site/{site,records,pristine-openrl,
# openrl-02} (benchmarks/README.md).
#   bash benchmarks/openrl_device_call.sh        the GPU equivalence (openrl_equivalence.py),
#       the device traffic per vector step (openrl_profile.py) and the PPO timing at 500 envs,
#       alternated 01 02 03 03 02 01
#   bash benchmarks/openrl_device_call.sh sizes  03's memory over 20,000 vector steps (500 envs,
#       100 updates); the timing at 200 envs (alternated) and at 4,096 envs (once each, 3 updates)
#   bash benchmarks/openrl_device_call.sh graph  patches/openrl/04 (act_graph): its GPU
#       equivalence against act_graph off, the device traffic per vector step with it off and
#       on, and the timing at 500 envs, 01 only / 01-04 act_graph off / on, alternated
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
echo "device_rollout: false" > /tmp/off.yaml
echo "act_graph: false" > /tmp/eager-act.yaml
B=.bench_site
one() {  # variant envs updates tag timeout: one run.py train run, its summary to $OUT
  case $1 in 01) s=$B/pristine-openrl; c=/tmp/off.yaml;; 02) s=$B/openrl-02; c=/tmp/off.yaml;; 03) s=$B; c=;;
    03e) s=$B; c=/tmp/eager-act.yaml;; 04) s=$B; c=;; esac
  BENCH_PPO_CONFIG="$c" timeout "$5" python3 benchmarks/run.py --sections train --train-algos ppo --train-sizes "$2" --train-physics-sizes "" --train-updates "$3" --site "$s/site" --records "$s/records" --out /tmp/bench-ppo --tag "$4" > "/tmp/$4.log" 2>&1
  echo "$4 rc=$?"
  python3 -c "
import json,sys;d=json.load(open(sys.argv[1]))
for r in d['sections']['train']['runs']: print(json.dumps({'tag': sys.argv[2], 'exit': r.get('exit'), 'envs': r.get('num_envs'), 'env_steps_per_s': r.get('env_steps_per_s'), 'memory_growth': r.get('memory_growth'), 'memory_last': (r.get('memory') or [None])[-1], 'memory_first': (r.get('memory') or [None])[0], 'n_memory': len(r.get('memory') or [])}))" "/tmp/bench-ppo/$4.json" "$4" 2>&1 | tail -2 | tee -a "$OUT/runs.jsonl"
}
if [ "${1:-}" = sizes ]; then
  one 03 500 100 mem-03-500 200
  n=0; for v in 01 02 03 03 02 01; do n=$((n+1)); one $v 200 5 "t200-$v-$n" 200; done
  for v in 01 02 03; do one $v 4096 3 "t4096-$v" 200; done
  exit 0
fi
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT"/gpu.txt
python3 -c "import torch,sys;print(torch.__version__, sys.version)" >> "$OUT"/gpu.txt
if [ "${1:-}" = graph ]; then  # .bench_site/site has 01-04; 03e is it with act_graph: false
  timeout 150 python3 benchmarks/openrl_equivalence.py --key act_graph --site $B/site --records $B/records --envs 500 --updates 3 --out "$OUT"/equivalence-04.json 2>&1 | tail -3
  BENCH_PPO_CONFIG=/tmp/eager-act.yaml timeout 90 python3 benchmarks/openrl_profile.py --site $B/site --records $B/records --label "01-04, act_graph false" --out "$OUT"/profile-04-off.json 2>&1 | tail -2
  timeout 90 python3 benchmarks/openrl_profile.py --site $B/site --records $B/records --label "01-04" --out "$OUT"/profile-04.json 2>&1 | tail -2
  n=0; for v in 01 03e 04 04 03e 01; do n=$((n+1)); one $v 500 5 "ppo-$v-$n" 100; done
  exit 0
fi
timeout 120 python3 benchmarks/openrl_equivalence.py --site $B/site --records $B/records --envs 500 --updates 3 --out "$OUT"/equivalence.json 2>&1 | tail -3
BENCH_PPO_CONFIG=/tmp/off.yaml timeout 120 python3 benchmarks/openrl_profile.py --site $B/pristine-openrl/site --records $B/pristine-openrl/records --label "01 only" --site $B/openrl-02/site --records $B/openrl-02/records --label "01 + 02" --out "$OUT"/profile-off.json 2>&1 | tail -3
timeout 90 python3 benchmarks/openrl_profile.py --site $B/site --records $B/records --label "01 + 02 + 03" --out "$OUT"/profile-03.json 2>&1 | tail -3
n=0; for v in 01 02 03 03 02 01; do n=$((n+1)); one $v 500 5 "ppo-$v-$n" 100; done
