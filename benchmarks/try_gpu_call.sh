#!/bin/bash
# One device call (kind nvidia-h200; #80 item 3): `make try DEVICE=cuda:0`'s tour on a GPU host
# with a current torch and no Isaac Gym, without any environment variable of ours: the
# pipeline (mid level, its eval, the high level over the best checkpoint, its eval with RRT)
# and both reports, over real MQE and the Isaac Gym stand-in. The device has no network, so
# the patched OpenRL/HARL site that make try would build is carried (.bench_site, as
# benchmarks/README.md makes it) and stamped as try.py stamps its own.
# Writes $OUT/try-gpu.log, the pipeline's record and both reports (HTML, PNG).
set -u
W=$(mktemp -d /tmp/try-gpu.XXXXXX) || exit 1
OUT=${OUT:-/tmp/try-gpu-out}; mkdir -p "$OUT"
# shellcheck source=benchmarks/try_site.sh
source benchmarks/try_site.sh
nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee "$OUT/try-gpu.log"
start=$(date +%s)
MAPUSH_SRC=$W/MAPush python3 tests/standin/try.py --dir "$W/try" --work "$W/work" \
    --device cuda:0 --envs "${TRY_ENVS:-64}" --no-open >> "$OUT/try-gpu.log" 2>&1
rc=$?
echo "try-gpu: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/try-gpu.log"
cp "$W/try/pipeline.json" "$OUT/" 2>/dev/null
for level in mid upper; do
    mkdir -p "$OUT/$level" && cp -r "$W/try/$level/report" "$OUT/$level/" 2>/dev/null
    cp "$W/try/$level/config.json" "$OUT/$level/" 2>/dev/null
done
exit "$rc"
