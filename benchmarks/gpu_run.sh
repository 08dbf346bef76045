#!/usr/bin/env bash
# The whole GPU benchmark in one `device` call (see benchmarks/README.md):
#   run(command="BENCH_COMMIT=<sha> BENCH_SUFFIX=-after bash benchmarks/gpu_run.sh",
#       carry=[".whl", ".bench_site"], timeout_s=600)
# Installs the carried wheels (packages the device image lacks), runs benchmarks/run.py
# with the carried patched openrl/harl site, and leaves <tag>.json, <tag>.md, the log,
# the per-run logs and nvidia-smi's report in $OUT (default /tmp/bench-out). The tag is
# BENCH_TAG, else <gpu>-<date><BENCH_SUFFIX> with <gpu> as nvidia-smi names it (h100,
# h200, ...). Extra arguments go to run.py; the exit status is run.py's.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
if [ -d .whl ] && [ -z "${BENCH_NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/bench-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/bench-site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 \
      | grep -o -i -E '\b[a-z][0-9]{2,4}\b' | head -n 1 | tr '[:upper:]' '[:lower:]')
tag=${BENCH_TAG:-${gpu:-gpu}-$(date -u +%Y%m%d)${BENCH_SUFFIX:-}}
export BENCH_CALL="${BENCH_CALL:-BENCH_COMMIT=${BENCH_COMMIT:-?} bash benchmarks/gpu_run.sh $*}"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
python3 benchmarks/run.py --site .bench_site/site --records .bench_site/records \
    --out "$OUT" --tag "$tag" --logs-tar "$OUT/logs.tgz" "$@" 2>&1 \
    | tee "$OUT/log.txt"
