#!/usr/bin/env bash
# The image's Python stack as a virtualenv, for `make test-stack`: Python 3.8, the stack's
# hashed lock installed as docker/Dockerfile installs it (pip, setuptools and wheel first,
# then every pin --no-deps --require-hashes --no-build-isolation), and our patches applied
# by patches/apply to the installed OpenRL and to HARL's files, as the image build does.
#
# Two substitutions, printed on every run:
#   - torch and torchvision come from PyPI (TORCH_PYPI, TORCHVISION_PYPI), with the CUDA
#     wheels PyPI's build needs, instead of the PyTorch index's build the image installs;
#   - no Isaac Gym and no MAPush tree: the tests' double stands in, as in `make test`.
#
# usage: ci/stack-venv.sh PYTHON DIR LOCK TORCH_PYPI TORCHVISION_PYPI HARL_WHEEL
set -euo pipefail

if [ "$#" -ne 6 ]; then
    echo "usage: $0 PYTHON DIR LOCK TORCH_PYPI TORCHVISION_PYPI HARL_WHEEL" >&2
    exit 2
fi
python=$1 dir=$2 lock=$3 torch=$4 torchvision=$5 harl_wheel=$6
repo=$(cd "$(dirname "$0")/.." && pwd)

if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 8))' 2>/dev/null; then
    echo "error: PYTHON38='$python' is not a Python 3.8 interpreter (the image's); install" \
         "one (e.g. pyenv install 3.8) and pass PYTHON38=/path/to/python3.8" >&2
    exit 2
fi

rm -rf "$dir"
"$python" -m venv "$dir"
py="$dir/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

# 1. pip, setuptools and wheel from the lock (the Dockerfile's bootstrap)
"$py" "$repo/docker/lock_subset.py" "$lock" pip setuptools wheel > "$dir/bootstrap.txt"
pip install --no-deps --require-hashes -r "$dir/bootstrap.txt"
# 2. the lock, hashed, --no-deps: nothing outside it enters
pip install --no-deps --no-build-isolation --require-hashes -r "$lock"
# 3. substitution: torch and torchvision from PyPI; everything they need that the lock
#    already pins stays at the lock's version (a constraint), only PyPI's CUDA wheels add
grep -E '^[A-Za-z0-9_.-]+==' "$lock" | sed 's/ .*//' > "$dir/lock-pins.txt"
before=$(pip freeze | sort)
pip install "torch==$torch" "torchvision==$torchvision" -c "$dir/lock-pins.txt"
echo "test-stack: substituted: torch $torch and torchvision $torchvision from PyPI, with:" \
     "$(comm -13 <(echo "$before") <(pip freeze | sort) | grep -v -E '^torch(vision)?==' |
        tr '\n' ' ')"
# 4. (the test runner, pytest and pytest-timeout, is in the lock: mapush smoke runs them);
#    the test-only additions, not in the image: coverage.py (CI's figure of MQE's coverage by
#    the real-MQE tests, tests/mqe_coverage.py) and pytest-xdist
pip install --no-deps --require-hashes -r "$repo/env/requirements-stack-test.txt"
# 5. our patches on the installed OpenRL, and on HARL's files at the pin (from the harl-aht
#    carrier, checked against env/upstream.sha256 by the tests' helper), as the image
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$dir/pristine"
cp -a "$site/openrl" "$dir/pristine/openrl"
(cd "$repo" && "$py" -c 'import sys; from pathlib import Path
from tests.upstream import extract_harl_from
extract_harl_from(Path(sys.argv[1]), Path(sys.argv[2]))' "$harl_wheel" "$site")
"$py" "$repo/patches/apply" openrl "$site" --record-dir "$dir/patch-records"
"$py" "$repo/patches/apply" harl "$site" --record-dir "$dir/patch-records"
# 6. our package, as the image installs it (here editable: the tests run this checkout)
pip install --no-deps --no-build-isolation -e "$repo"
echo "test-stack: substituted: no Isaac Gym, no MAPush tree: the tests' double stands in"
"$py" -c 'import platform, torch, numpy, openrl
print("test-stack: Python %s, torch %s, numpy %s, openrl %s" % (platform.python_version(),
      torch.__version__, numpy.__version__, openrl.__version__))'
