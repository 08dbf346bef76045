#!/usr/bin/env bash
# make image-check, inside the built image (podman, CPU, the Isaac Gym stand-in):
#   1. `mapush doctor` names the stand-in and the missing GPU;
#   2. `mapush smoke` runs its stages on the CPU;
#   3. the stack's tests (CI's make test-stack set, real_mqe included) run on the image's own
#      Python, torch, lock, patched OpenRL/HARL/MAPush and installed `mapush`, as the image's
#      user. The checkout's tests/ and files are copied into the container without
#      mapush/'s Python files (its YAML stays, which benchmarks/ reads), so `import mapush`
#      is the image's. Test-only additions, never in the image: MAPush at
#      the pin (MAPUSH_SRC, read-only), pristine OpenRL (make venv's), the harl-aht wheel,
#      coverage.py (for MQE's coverage figure), and the test venv's Python (tests/astcompat.py),
#      all mounted.
# usage: ci/rehearsal/in-image.sh IMAGE       (env: IMAGE_CHECK_PYTEST, MAPUSH_SRC)
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=$1
out=build/rehearsal
venv=${VENV:-.venv}
export CONTAINERS_CONF=$PWD/ci/rehearsal/containers.conf
src=${MAPUSH_SRC:-$PWD/$out/upstream/MAPush}
[ -d "$src/mqe" ] || { echo "error: MAPUSH_SRC='$src' is no MAPush tree: run ci/image-check.sh build first" >&2; exit 2; }
pristine=$("$venv/bin/python" -c 'import importlib.util, os
print(os.path.dirname(importlib.util.find_spec("openrl").origin))')
# the test venv's newer Python, for the tests that unparse upstream's source (tests/astcompat.py:
# Python 3.8 has no ast.unparse); a pyenv build, so it runs from another folder with its lib/
dev=$(readlink -f "$venv/bin/python")
dev_prefix=$(dirname "$(dirname "$dev")")
uid=$(podman image inspect --format '{{.Config.User}}' "$tag")

# 1. doctor: one line for the stand-in, one for the GPU
doctor=$(podman run --rm "$tag" mapush doctor 2>&1) || true
while IFS= read -r line; do echo "image-check: doctor: $line"; done <<<"$doctor"
grep -q "stand-in" <<<"$doctor" || { echo "error: mapush doctor in the image does not name the stand-in" >&2; exit 1; }
grep -qi "no GPU" <<<"$doctor" || { echo "error: mapush doctor in the image does not say that no GPU is visible" >&2; exit 1; }

# 2. smoke on the CPU, its report in a folder of ours
smoke=$out/smoke
rm -rf "$smoke" && mkdir -p "$smoke" && chmod 0777 "$smoke"
podman run --rm -v "$PWD/$smoke:/work/runs" "$tag" mapush smoke --sim-device cpu \
    --rl-device cpu --report runs/smoke/report.json
echo "image-check: smoke passed on the CPU ($smoke/smoke/report.json)"

# 3. the stack's tests in the image
deps=$out/testdeps
if ! cmp -s env/requirements-stack-test.txt "$deps/.stamp"; then
    rm -rf "$deps"
    podman run --rm -v "$PWD/$out:/out" -v "$PWD/env:/env:ro" --user 0 --entrypoint pip "$tag" \
        install -q --no-deps --require-hashes --target /out/testdeps \
        -r /env/requirements-stack-test.txt
    cp env/requirements-stack-test.txt "$deps/.stamp"
fi
coverage=$out/coverage
rm -rf "$coverage" && mkdir -p "$coverage" && chmod 0777 "$coverage"
mapfile -t stack_files < ci/stack-files.txt  # .ci/run's make test leaves them to the image
# a test file to a worker, one per core (pytest-xdist, as make test): about half the time on 2,
# each process on one thread (OMP_NUM_THREADS=1 below): torch's OpenMP threads spin while they
# wait, and 3 processes of 2 threads on 2 cores took 15 s for what 1 took in 1.2 s (1 thread
# each: 3 s); without it, evals of 2 envs ran past their 300 s guard
args=${IMAGE_CHECK_PYTEST:-"--durations=30 -n auto --dist loadfile -m 'not docker' $(echo tests/test_real_mqe_*.py) ${stack_files[*]}"}
echo "image-check: the stack's tests in $tag as uid $uid: pytest $args"
# shellcheck disable=SC2016  # expanded in the container
podman run --rm --init -v "$PWD:/src:ro" -v "$src:/mapush-src:ro" -v "$pristine:/pristine/openrl:ro" \
    -v "$PWD/$deps:/testdeps:ro" -v "$PWD/$coverage:/coverage" -v "$dev_prefix:/devpython:ro" \
    -e MAPUSH_DEV_PYTHON="/devpython/bin/$(basename "$dev")" -e LD_LIBRARY_PATH=/devpython/lib \
    -e MAPUSH_SRC=/mapush-src -e MAPUSH_PRISTINE_OPENRL=/pristine/openrl -e MAPUSH_STACK=cu116 \
    -e MAPUSH_MQE_COVERAGE=/coverage -e PYTHONPATH=/testdeps -e ARGS="$args" \
    -e OMP_NUM_THREADS=1 \
    --entrypoint bash "$tag" -c '
set -euo pipefail
mkdir -p /tmp/src/.venv
tar -C /src --exclude=./.venv --exclude=./build --exclude=./runs --exclude="./mapush/*.py" \
    --exclude=./.git --exclude=./vendor -cf - . | tar -C /tmp/src -xf -
cp -r /src/.venv/wheels /tmp/src/.venv/wheels
cd /tmp/src
python -c "import mapush, sys; assert mapush.__file__.startswith(\"/opt/venv/\"), mapush.__file__"
eval "pytest -p no:cacheprovider $ARGS"
python tests/mqe_coverage.py /coverage'
