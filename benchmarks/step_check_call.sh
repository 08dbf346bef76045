#!/bin/bash
# `mapush doctor --check-step` on a GPU over the Isaac Gym stand-in, one device call
# (benchmarks/README.md, "The step check on a GPU"): each level as shipped, and the high level
# with patch 12's copy of the step's action into its graph dropped (a stale input), each
# verdict and line into $OUT. Needs .whl and .bench_site/{site,records,mapush-*.tar.gz}.
set -u
cd "$(dirname "$0")/.." || exit 1
rm -rf /tmp/bs /tmp/tree /tmp/broken12 /tmp/cache-* /tmp/records-*  # a warm machine's last call
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/bs .whl/*.whl || exit 1
mkdir -p /tmp/src && tar xzf .bench_site/mapush-*.tar.gz -C /tmp/src || exit 1
python3 tests/standin/prepare_tree.py /tmp/src/MAPush /tmp/tree > /dev/null || exit 1
cp -r /tmp/tree /tmp/broken12
wrapper=mqe/envs/wrappers/go1_push_upper_wrapper.py
echo "lines dropped from broken12's wrapper: $(grep -c 'g\["in"\]\["action"\].copy_(action)' \
  /tmp/broken12/$wrapper)" > "$OUT/gpu.txt"
sed -i '/g\["in"\]\["action"\].copy_(action)/d' /tmp/broken12/$wrapper
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/gpu.txt"
python3 -c "import torch,sys;print(torch.__version__,sys.version)" >> "$OUT/gpu.txt"
check() {  # tag tree task: one doctor --check-step, its JSON report to $OUT
  local tag=$1 tree=$2 task=$3
  mkdir -p "/tmp/records-$tag" && cp .bench_site/records/*.json /tmp/"$tree"/.mapush-patches/*.json \
    "/tmp/records-$tag/"
  PYTHONPATH="/tmp/bs:$PWD/.bench_site/site:$PWD/tests/standin:/tmp/$tree:$PWD" \
    MAPUSH_ROOT=/tmp/$tree MAPUSH_PATCH_RECORDS="/tmp/records-$tag" \
    MAPUSH_CACHE_DIR="/tmp/cache-$tag" PYTHONWARNINGS=ignore TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 \
    python3 -m mapush doctor --check-step --task "$task" --sim-device cuda:0 --rl-device cuda:0 \
    --json > "$OUT/$tag.json" 2> "/tmp/$tag.err"
  echo "$tag rc=$?"; tail -n 3 "/tmp/$tag.err"
  cp /tmp/cache-"$tag"/step-check/*.json "$OUT/$tag-verdict.json" 2>/dev/null
}
check upper tree go1push_upper
check mid tree go1push_mid
check upper-broken12 broken12 go1push_upper
