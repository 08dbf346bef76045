#!/bin/bash
# One device call on a machine of two GPUs (kind nvidia-h200-x2; #78): `mapush train --gpus 0,1`
# over real MQE and the Isaac Gym stand-in (not PhysX), PPO and HAPPO, through torchrun and
# NCCL, against the same run on one GPU at equal env steps; then a run across both GPUs sent
# SIGTERM after two updates, which must stop both ranks with a final checkpoint and exit 0.
# Needs .whl and .bench_site/{site,records,mapush-0e61e1b.tar.gz} (benchmarks/README.md).
# Writes $OUT/ranks-train.json (each run's learning.json) and each run's log.
set -u
W=$(mktemp -d /tmp/ranks.XXXXXX) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" .whl/*.whl || exit 1
export PYTHONPATH=$W/site PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
mkdir -p "$W/src" && tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C "$W/src" || exit 1
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "error: this call needs 2 GPUs (kind nvidia-h200-x2)"; exit 2; }
B=.bench_site
STEPS=${RANKS_STEPS:-800000}; LIMIT=${RANKS_TIMEOUT:-130}
OUT=${OUT:-/tmp/ranks-out}; mkdir -p "$OUT"
failed=0
train() {  # train NAME [learning.py options]
  local name=$1; shift
  python3 benchmarks/learning.py --src "$W/src/MAPush" --site "$PWD/$B/site" \
    --records "$PWD/$B/records" --num-envs 500 --checkpoint-interval 100000000 \
    --timeout "$LIMIT" --run "$W/$name" --out "$W/out/$name" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(tail -n 1 "$OUT/$name.log")"
  [ "$rc" = 0 ] || failed=1
}
train ppo-two --gpus 0,1 --steps "$STEPS"
train ppo-one --steps "$STEPS"
train happo-two --algo happo --gpus 0,1 --steps "$STEPS"
train ppo-stop --gpus 0,1 --steps $((STEPS * 10)) --stop-after 2
python3 - "$W/out" "$OUT/ranks-train.json" <<'EOF'
import json, sys
from pathlib import Path
runs = {p.name: json.loads((p / "learning.json").read_text()) for p in sorted(Path(sys.argv[1]).iterdir())}
Path(sys.argv[2]).write_text(json.dumps(runs, indent=1) + "\n")
for name, r in runs.items():
    print(name, "rc", r["returncode"], "s", r["seconds"], "checkpoints", r["checkpoints"][-2:],
          "success", [row[1] for row in r.get("success", [])][-3:])
EOF
exit "$failed"
