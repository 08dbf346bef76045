#!/usr/bin/env bash
# The whole GPU benchmark in one `device` call (see benchmarks/README.md):
#   run(command="bash benchmarks/gpu_run.sh", carry=[".whl", ".bench_site"], timeout_s=600)
# Installs the carried wheels (packages the device image lacks), runs benchmarks/run.py
# with the carried patched openrl/harl site, and leaves the JSON, the Markdown table, the
# log and nvidia-smi's report in $OUT (default /tmp/bench-out). Extra arguments go to run.py.
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
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
python3 benchmarks/run.py --site .bench_site/site --records .bench_site/records \
    --out "$OUT" --tag "${BENCH_TAG:-gpu}" --logs-tar "$OUT/logs.tgz" "$@" 2>&1 \
    | tee "$OUT/log.txt"
