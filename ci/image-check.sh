#!/usr/bin/env bash
# make image-check: the rehearsal build of docker/Dockerfile, as committed, with podman on a
# machine like CI's (root, 2 cores, no GPU, no image registry, no GitHub), then the image
# run: its self-check at build, `mapush doctor` and `mapush smoke` in it, the stack's tests
# inside it, and a training run through compose that eval, report and TensorBoard read.
# Every difference from a user's `make build` is a build argument or a named build context
# (the REHEARSAL_* pins of env/pins.env), listed in docs/image-check.md.
#
# usage: ci/image-check.sh [all|build|test|train]      (all: the three in order)
# Env: IMAGE_CHECK_TAG (mapush-env:rehearsal), MAPUSH_SRC (MAPush at the pin) or
#      MAPUSH_SHARED (a folder with its snapshot, mapush-*.tar.gz and its SHA256SUMS),
#      PYTHON38, VENV (.venv: make venv's harl-aht wheel and pristine OpenRL),
#      IMAGE_CHECK_PYTEST (the stack tests' pytest arguments), IMAGE_CHECK_DISK_GB (25).
# Times go to build/rehearsal/times.txt; a missing prerequisite is one `error:` line each,
# exit 2, before anything is built.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
what=${1:-all}
case "$what" in all | build | test | train) ;; *)
    echo "error: '$what' is not one of: all build test train (e.g. make image-check)" >&2; exit 2 ;;
esac

pin() { sed -n "s/^$1=//p" env/pins.env; }
tag=${IMAGE_CHECK_TAG:-mapush-env:rehearsal}
out=build/rehearsal
venv=${VENV:-.venv}
python38=${PYTHON38:-$(find "${PYENV_ROOT:-$HOME/.pyenv}/versions" -maxdepth 3 \
    -path '*/versions/3.8.*/bin/python' 2>/dev/null | sort -V | tail -n 1)}
[ -n "$python38" ] || python38=$(command -v python3.8 || true)
base=$(pin REHEARSAL_CUDA_BASE_IMAGE)
tarball_name=$(pin ISAACGYM_TARBALL)
harl_wheel=$venv/wheels/harl_aht-$(pin HARL_AHT_VERSION)-py3-none-any.whl
# podman's runtime here: runc (Debian 12's crun refuses this machine's hybrid cgroups)
export CONTAINERS_CONF=$repo/ci/rehearsal/containers.conf

# --- prerequisites: all of them in one pass, one line each, before anything is made -----
problems=()
need() { command -v "$1" >/dev/null || problems+=("$1 is not installed: $2"); }
need podman "apt-get install podman (Debian 12's 4.3.1 builds the Dockerfile's named contexts)"
need runc "apt-get install runc (podman's runtime for the rehearsal)"
if ! podman image inspect "$base" >/dev/null 2>&1 && [ ! -s "$out/base-rootfs.tar" ]; then
    need debootstrap "apt-get install debootstrap (makes the rehearsal's Debian base)"
    [ "$(id -u)" = 0 ] || problems+=("the rehearsal base is made as root (debootstrap): run make image-check as root")
fi
if [ -z "$python38" ] || ! "$python38" -c 'import sys, sysconfig
sys.exit(sys.version_info[:2] != (3, 8) or not sysconfig.get_config_var("Py_ENABLE_SHARED"))' 2>/dev/null; then
    problems+=("PYTHON38='$python38' is not a shared-library Python 3.8 (Isaac Gym links libpython3.8.so): pyenv install 3.8 with PYTHON_CONFIGURE_OPTS=--enable-shared, then PYTHON38=/path/to/python3.8")
fi
[ -f "$harl_wheel" ] || problems+=("$harl_wheel is missing (HARL's files at the pin): run make venv")
snapshot=${MAPUSH_SHARED:-}
if [ -z "${MAPUSH_SRC:-}" ] && ! compgen -G "$snapshot/mapush-*.tar.gz" >/dev/null; then
    problems+=("no MAPush tree: set MAPUSH_SRC to MAPush at $(pin MAPUSH_COMMIT) (or MAPUSH_SHARED to a folder with its mapush-*.tar.gz and SHA256SUMS)")
fi
if command -v podman >/dev/null; then
    graph=$(podman info --format '{{.Store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers)
    while [ ! -d "$graph" ]; do graph=$(dirname "$graph"); done
    free=$(df -Pk "$graph" | awk 'NR == 2 {print int($4 / 1048576)}')
    [ "$free" -ge "${IMAGE_CHECK_DISK_GB:-25}" ] ||
        problems+=("only $free GB free on $graph (podman's storage): the rehearsal takes about ${IMAGE_CHECK_DISK_GB:-25} GB; free space there")
fi
if [ "${#problems[@]}" -gt 0 ]; then
    printf 'error: %s\n' "${problems[@]}" >&2
    exit 2
fi

mkdir -p "$out"
times=$out/times.txt
timed() {  # timed LABEL CMD...: runs CMD, appends "LABEL SECONDS" to times.txt
    local label=$1 start rc=0
    shift
    start=$(date +%s)
    "$@" || rc=$?
    echo "$label $(( $(date +%s) - start ))" | tee -a "$times"
    return "$rc"
}

# --- the inputs: base, Isaac Gym tarball, upstream trees, lock ------------------------
inputs() {
    bash ci/rehearsal/base.sh podman "$base" "$python38" "$out/base-rootfs.tar"
    bash ci/rehearsal/isaacgym-tarball.sh "$python38" "$(pin REHEARSAL_ISAACGYM_VERSION)" \
        "$out/isaacgym/$tarball_name"
    if [ -z "${MAPUSH_SRC:-}" ]; then
        MAPUSH_SRC=$(ci/unpack-shared-upstream.sh "$snapshot" "$out/upstream")
    fi
    export MAPUSH_SRC
    "$venv/bin/python" ci/rehearsal/sources.py "$MAPUSH_SRC" "$harl_wheel" "$out/sources"
    cat "$(pin LOCK_FILE)" "$(pin REHEARSAL_LOCK_EXTRA)" >"$out/stack.lock"
}

build() {
    # make build itself, with podman: the pins it passes, then the REHEARSAL_* ones over them
    make build DOCKER=podman IMAGE="$tag" ISAACGYM_TARBALL_PATH="$out/isaacgym/$tarball_name" \
        CUDA_BASE_IMAGE="$base" CUDA_VERSION="$(pin REHEARSAL_CUDA_VERSION)" \
        TORCH_VERSION="$(pin TORCH_PYPI_VERSION)" TORCHVISION_VERSION="$(pin TORCHVISION_PYPI_VERSION)" \
        TORCH_INDEX_URL="$(pin REHEARSAL_TORCH_INDEX_URL)" LOCK_FILE="$out/stack.lock" \
        ISAACGYM_VERSION="$(pin REHEARSAL_ISAACGYM_VERSION)" \
        BUILD_ARGS="--build-arg PYTHON_APT_PACKAGES= --build-context sources=$out/sources"
}

case "$what" in
    all | build)
        timed inputs inputs
        timed build build
        podman history --format '{{.Size}}\t{{.CreatedBy}}' "$tag" | cut -c1-160 >"$out/history.txt"
        podman image inspect --format '{{.Size}}' "$tag" | awk '{printf "image-size-mb %.0f\n", $1 / 1e6}' | tee -a "$times"
        ;;
esac
case "$what" in
    all | test) timed tests bash ci/rehearsal/in-image.sh "$tag" ;;
esac
case "$what" in
    all | train) timed train bash ci/rehearsal/train.sh "$tag" ;;
esac
