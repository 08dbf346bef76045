#!/bin/bash
cd "$(dirname "$0")/.." || exit 1
# One device call (#49): `mapush train` PPO over real MQE and the stand-in, ours (MQE patched,
# OpenRL 01-04) against upstream (MQE as shipped, OpenRL 01 only), alternated. Needs .whl and
# .bench_site/{site,records,pristine-openrl,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench-site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/bench-site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p /tmp/src && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C /tmp/src || exit 1
echo "device_rollout: false" > /tmp/off.yaml
B=.bench_site; n=0
TASK=${E2E_TASK:-go1push_mid}; STEPS=${E2E_STEPS:-700000}  # E2E_TASK=go1push_upper: the high level
UP_S=${E2E_UP_TIMEOUT:-150}; OURS_S=${E2E_OURS_TIMEOUT:-100}
for v in up ours ours up; do
  n=$((n+1))
  if [ $v = up ]; then a="--pristine --site $B/pristine-openrl/site --records $B/pristine-openrl/records --config /tmp/off.yaml"; t=$UP_S
  else a="--site $PWD/$B/site --records $PWD/$B/records"; t=$OURS_S; fi
  # shellcheck disable=SC2086
  python3 benchmarks/learning.py --src /tmp/src/MAPush $a --task "$TASK" --steps "$STEPS" --checkpoint-interval 100000000 --timeout "$t" --run /tmp/r-$v-$n --out "$OUT"/$v-$n > /tmp/log-$v-$n.txt 2>&1
  echo "$v $n rc=$?"; tail -2 /tmp/log-$v-$n.txt
  cp /tmp/r-$v-$n/progress.txt /tmp/r-$v-$n/step.json "$OUT"/$v-$n/ 2>/dev/null  # env steps/s per update
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(d.get('returncode'), d.get('seconds'), [k for k in d])" "$OUT"/$v-$n/learning.json
done
