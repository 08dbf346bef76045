#!/bin/bash
# One device call (kind nvidia-h200; #79 item 2): why did the authors' 100M cuboid policy
# succeed 0.281 in `mapush eval` (CPU, 32 envs) and 0.527 in `mapush reproduce` (GPU, 300
# envs)? Over real MQE and the Isaac Gym stand-in, the same checkpoint and seed 0, one factor
# at a time: the device (cpu, cuda:0), the env count (32, 300) and the command (eval,
# reproduce). Writes $OUT/oracle.log and one JSON line a case to $OUT/oracle.jsonl.
# ORACLE_STEPS (the checkpoints' steps; ORACLE_STEP one), ORACLE_ENVS, ORACLE_DEVICES and
# ORACLE_REPRODUCE=0 (no reproduce) narrow it.
set -u
W=$(mktemp -d /tmp/oracle.XXXXXX) || exit 1
OUT=${OUT:-/tmp/oracle-out}; mkdir -p "$OUT"
# shellcheck source=benchmarks/try_site.sh
source benchmarks/try_site.sh
LOG=$OUT/oracle.log
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee "$LOG"
CKS=$W/work/MAPush/results/10-15-23_cuboid/checkpoints
one() {  # a case: its name, then the mapush command (run over the stand-in by try.py --cmd)
    local name=$1; shift
    local start; start=$(date +%s)
    MAPUSH_SRC=$W/MAPush python3 tests/standin/try.py --work "$W/work" --device "${DEVICE:-cpu}" \
        --cmd "$*" > "$W/$name.out" 2> "$W/$name.err"
    local rc=$?
    echo "== $name (exit $rc, $(( $(date +%s) - start )) s): $*" >> "$LOG"
    tail -n 5 "$W/$name.err" >> "$LOG"
    python3 - "$name" "$W/$name.out" "$rc" "$(( $(date +%s) - start ))" >> "$OUT/oracle.jsonl" <<'PY'
import json, sys
name, out, rc, took = sys.argv[1:]
lines = [l for l in open(out).read().splitlines() if l.startswith("{")]
print(json.dumps({"case": name, "exit": int(rc), "seconds": int(took),
                  "result": json.loads(lines[-1]) if lines else None}))
PY
}
for step in ${ORACLE_STEPS:-${ORACLE_STEP:-100000000}}; do
    for envs in ${ORACLE_ENVS:-32 300}; do
        for dev in ${ORACLE_DEVICES:-cuda:0 cpu}; do
            DEVICE=$dev one "eval-$step-$dev-$envs" mapush eval --num-envs "$envs" \
                --checkpoint "$CKS/rl_model_${step}_steps" --seed 0 --sim-device "$dev" \
                --rl-device "$dev"
        done
    done
done
if [ "${ORACLE_REPRODUCE:-1}" = 1 ]; then
    DEVICE=cuda:0 one "reproduce-cuda-300" mapush reproduce --objects cuboid --checkpoints last3 \
        --num-envs 300 --seed 0 --out "$W/reproduce" --sim-device cuda:0 --rl-device cuda:0
    cp "$W/reproduce/table.json" "$OUT/reproduce-table.json" 2>/dev/null
fi
exit 0
