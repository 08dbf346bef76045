#!/usr/bin/env bash
# Checks make runs on the host before Docker does anything long, each failure one `error:`
# line that names what is wrong and what to install or fix, exit status 2.
#
# usage: docker/host-check.sh buildkit
#        docker/host-check.sh compose
#        docker/host-check.sh tarball PATH [SHA256]
#        docker/host-check.sh runs-dir DIR CONTAINER_UID
#        docker/host-check.sh prereqs COMPOSE BUILD IMAGE TARBALL [SHA256]
#        docker/host-check.sh host IMAGE TARBALL [SHA256]
#        docker/host-check.sh tensorboard-base IMAGE
#
# prereqs   every prerequisite of a make target in one pass: the NVIDIA driver and a GPU
#           (nvidia-smi) and the NVIDIA Container Toolkit (NEEDS_GPU=1 in the environment: the
#           targets that start the training container), Compose v2 (COMPOSE=1), a running
#           Docker daemon, and when the image must be built (BUILD=always, or BUILD=if-missing
#           and IMAGE does not exist or cannot be asked for) the tarball, BuildKit and the
#           disk space a build takes. One `error:` line on stderr for each that is missing,
#           except the last, which goes to stdout for make to print with $(error); exit 2.
# host      make doctor before (and besides) the image: one line per check of the host
#           (`ok: ...` or `error: ...` with its fix): driver and GPUs, Container Toolkit,
#           Docker daemon, Docker Engine 23.0 or newer, BuildKit, Compose v2, the tarball, disk free for a build. Exit 2
#           if any failed; 3 if all passed and IMAGE is not built yet; else 0.
#
# buildkit  `docker build --build-context` (make build) needs BuildKit, i.e. the buildx
#           plugin; Debian's docker.io 20.10 has neither and fails with "unknown flag".
# compose   Compose v2 (`docker compose`); without it docker prints "unknown flag:
#           --env-file" and its usage.
# tarball   the Isaac Gym Preview 4 tarball: a readable gzip holding what the image build
#           takes from it (docker/install-isaacgym.sh), and the pinned sha256 when one is
#           given; checked before the build spends its first long layers.
# runs-dir  runs/ exists, made by the invoking user (under sudo: the user who ran sudo,
#           never root or a guessed id), and the container user (CONTAINER_UID) can write
#           to it; one line when the ids cannot be matched.
# tensorboard-base  the base image of docker/tensorboard.Dockerfile is here or can be
#           pulled; without a registry, one line names TENSORBOARD_BASE_IMAGE and
#           docker/scripts/debian-base.sh instead of BuildKit's dump.
# DOCKER (default docker) is the docker command; NVIDIA_SMI (default nvidia-smi) the driver's
# tool; BUILD_DISK_GB (default 30) the free space a build of the image takes.
set -euo pipefail

docker_cmd=${DOCKER:-docker}
nvidia_smi=${NVIDIA_SMI:-nvidia-smi}
build_disk_gb=${BUILD_DISK_GB:-30}
fail() {
    echo "error: $*" >&2
    exit 2
}

BUILDKIT_MSG="make build needs Docker BuildKit ('docker buildx version' failed): install docker-buildx-plugin from Docker's apt repository (README, 'What you need') and retry"
COMPOSE_MSG="Docker Compose v2 is missing ('docker compose version' failed): install docker-compose-plugin from Docker's apt repository (README, 'What you need'); the old docker-compose v1 is not enough"
DAEMON_MSG="the Docker daemon does not answer ('docker info' failed): start it (sudo systemctl start docker), or check DOCKER_HOST and that you may use it (the docker group)"
ENGINE_MSG="is older than 23.0, which this project needs (BuildKit by default, the Buildx and Compose v2 plugins): install docker-ce from Docker's apt repository (README, 'What you need')"
GPU_MSG="no NVIDIA driver answers ('nvidia-smi -L' failed or lists no GPU): install the NVIDIA driver, R510 (510.39.01) or newer, on a machine with an NVIDIA GPU"
PODMAN_CONTEXT_MSG="make build needs named build contexts ('podman build --build-context'), which podman has from 4.2: install a newer podman, or use Docker with BuildKit (DOCKER=docker)"
PODMAN_COMPOSE_MSG="this podman has no 'podman compose' (podman 4.7 and later run Docker Compose through it): install podman 4.7+ with docker-compose, or use Docker (DOCKER=docker); make build and the podman commands themselves work without it"
CDI_MSG="podman sees no NVIDIA CDI spec (/etc/cdi/nvidia.yaml or /var/run/cdi/nvidia.yaml), so --device nvidia.com/gpu=all gives no GPU: install nvidia-container-toolkit and run 'sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml'"
TOOLKIT_MSG="the NVIDIA Container Toolkit is missing (no nvidia-ctk, no nvidia runtime in 'docker info'): install nvidia-container-toolkit, run 'sudo nvidia-ctk runtime configure --runtime=docker' and restart Docker"

gpus() {  # the GPUs nvidia-smi lists, one per line (fails without a driver or a GPU)
    local out
    out=$("$nvidia_smi" -L 2>/dev/null) && [ -n "$out" ] && echo "$out"
}

is_podman() {  # the engine is podman (DOCKER=podman), whose build, compose and GPU differ
    [[ $(basename "$docker_cmd") == podman* ]]
}

has_toolkit() {
    if is_podman; then  # podman reaches the GPU through CDI, not a Docker runtime
        [ -f /etc/cdi/nvidia.yaml ] || [ -f /var/run/cdi/nvidia.yaml ]
        return
    fi
    command -v nvidia-ctk >/dev/null 2>&1 && return 0
    command -v nvidia-container-runtime >/dev/null 2>&1 && return 0
    "$docker_cmd" info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"nvidia"'
}

disk_problem() {  # one line when the folder Docker builds into has less free than a build takes
    local root free
    if is_podman; then
        root=$("$docker_cmd" info --format '{{.Store.GraphRoot}}' 2>/dev/null || true)
    else
        root=$("$docker_cmd" info --format '{{.DockerRootDir}}' 2>/dev/null || true)
    fi
    while [ -n "$root" ] && [ ! -d "$root" ]; do root=$(dirname "$root"); done
    free=$(df -Pk "${root:-/}" 2>/dev/null | awk 'NR == 2 {print int($4 / 1048576)}')
    if [ -n "$free" ] && [ "$free" -lt "$build_disk_gb" ]; then
        echo "only ${free} GB free on ${root:-/} (Docker's data root): building the image takes about ${build_disk_gb} GB (README, 'What you need'); free space there, or move Docker's data-root"
    fi
}

# The engine's named build contexts: BuildKit (docker buildx) or podman 4.2+; else the line.
build_context_problem() {
    if is_podman; then
        "$docker_cmd" build --help 2>/dev/null | grep -q -- --build-context || echo "$PODMAN_CONTEXT_MSG"
    else
        "$docker_cmd" buildx version >/dev/null 2>&1 || echo "$BUILDKIT_MSG"
    fi
}

compose_problem() {
    "$docker_cmd" compose version >/dev/null 2>&1 && return 0
    if is_podman; then echo "$PODMAN_COMPOSE_MSG"; else echo "$COMPOSE_MSG"; fi
}

toolkit_msg() { if is_podman; then echo "$CDI_MSG"; else echo "$TOOLKIT_MSG"; fi; }

check_buildkit() {
    local msg
    msg=$(build_context_problem)
    [ -z "$msg" ] || fail "$msg"
}

check_compose() {
    local msg
    msg=$(compose_problem) || true
    [ -z "$msg" ] || fail "$msg"
}

# What docker/install-isaacgym.sh extracts and uses, and the Python 3.8 bindings.
TARBALL_LAYOUT=(
    isaacgym/python/setup.py
    isaacgym/python/isaacgym/_bindings/linux-x86_64/gym_38.so
    isaacgym/docker/nvidia_icd.json
    isaacgym/docker/10_nvidia.json
)

check_tarball() {
    local path=$1 want=${2:-} listing missing=() entry actual
    [ -f "$path" ] || fail "Isaac Gym tarball $path does not exist"
    if ! gzip -t "$path" 2>/dev/null; then
        fail "Isaac Gym tarball $path is not a readable gzip (truncated or not the download): download IsaacGym_Preview_4_Package.tar.gz again"
    fi
    if ! listing=$(tar -tzf "$path" 2>/dev/null); then
        fail "Isaac Gym tarball $path is not a tar archive: download IsaacGym_Preview_4_Package.tar.gz again"
    fi
    for entry in "${TARBALL_LAYOUT[@]}"; do
        grep -qxF "$entry" <<<"$listing" || missing+=("$entry")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        fail "Isaac Gym tarball $path lacks ${missing[*]}: it is not Isaac Gym Preview 4 (download IsaacGym_Preview_4_Package.tar.gz)"
    fi
    if [ -n "$want" ]; then
        actual=$(sha256sum "$path" | cut -d' ' -f1)
        [ "$actual" = "$want" ] || fail "Isaac Gym tarball $path has sha256 $actual, the pin (ISAACGYM_TARBALL_SHA256 in env/pins.env) is $want: download Preview 4 again"
    fi
}

check_runs_dir() {
    local dir=$1 container_uid=$2 owner_uid owner_gid
    # Under sudo, runs/ belongs to the user who ran sudo, never to root or a guessed id.
    owner_uid=${SUDO_UID:-$(id -u)}
    owner_gid=${SUDO_GID:-$(id -g)}
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        if [ "$owner_uid" != "$(id -u)" ]; then chown "$owner_uid:$owner_gid" "$dir"; fi
    fi
    owner_uid=$(stat -c %u "$dir")
    if [ "$container_uid" != "$owner_uid" ]; then
        # The ids cannot be matched (root without sudo: the container user is never root).
        # Like /tmp: everyone may add files, nobody may remove another's.
        chmod 1777 "$dir" 2>/dev/null || true
        if [ "$owner_uid" = 0 ]; then
            echo "mapush: $dir belongs to root but the container never runs as root (it runs as uid $container_uid), so $dir is made writable for all (mode 1777); to keep it private, run make as a non-root user (or through sudo from one)" >&2
        else
            echo "mapush: $dir belongs to uid $owner_uid but the container runs as uid $container_uid, so $dir is made writable for all (mode 1777); to keep it yours, run make as uid $container_uid or set HOST_UID=$owner_uid HOST_GID=$(stat -c %g "$dir")" >&2
        fi
    fi
}

check_prereqs() {
    local compose=$1 build=$2 image=$3 tarball=$4 sha=${5:-} problems=() daemon=1 msg i
    if [ "${NEEDS_GPU:-0}" = 1 ]; then
        gpus >/dev/null || problems+=("$GPU_MSG")
        has_toolkit || problems+=("$(toolkit_msg)")
    fi
    if [ "$compose" = 1 ] && msg=$(compose_problem) && [ -n "$msg" ]; then
        problems+=("$msg")
    fi
    if ! "$docker_cmd" info >/dev/null 2>&1; then
        daemon=0
        problems+=("$DAEMON_MSG")
    fi
    if [ "$build" = if-missing ] && [ "$daemon" = 1 ] &&
        "$docker_cmd" image inspect "$image" >/dev/null 2>&1; then
        build=never
    fi
    if [ "$build" != never ]; then
        if [ ! -f "$tarball" ]; then
            problems+=("${TARBALL_MISSING_MSG:-Isaac Gym tarball $tarball does not exist}")
        elif ! msg=$(check_tarball "$tarball" "$sha" 2>&1); then
            problems+=("${msg#error: }")
        fi
        msg=$(build_context_problem) && [ -n "$msg" ] && problems+=("$msg")
        msg=$(disk_problem) && [ -n "$msg" ] && problems+=("$msg")
    fi
    [ "${#problems[@]}" -eq 0 ] && return 0
    for ((i = 0; i < ${#problems[@]} - 1; i++)); do
        echo "error: ${problems[i]}" >&2
    done
    echo "error: ${problems[${#problems[@]} - 1]}"
    exit 2
}

check_host() {
    local image=$1 tarball=$2 sha=${3:-} bad=0 list msg engine
    say() { if [ "$1" = ok ]; then echo "ok: $2"; else echo "error: $2"; bad=1; fi; }
    if list=$(gpus); then
        say ok "NVIDIA driver $("$nvidia_smi" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1), $(wc -l <<<"$list") GPU(s): $(head -n 1 <<<"$list")"
    else say error "$GPU_MSG"; fi
    if is_podman; then
        if has_toolkit; then say ok "NVIDIA CDI spec for podman"; else say error "$CDI_MSG"; fi
    elif has_toolkit; then say ok "NVIDIA Container Toolkit"; else say error "$TOOLKIT_MSG"; fi
    if "$docker_cmd" info >/dev/null 2>&1; then
        if is_podman; then say ok "$("$docker_cmd" --version | head -n 1) answers"; else say ok "Docker daemon answers"; fi
        engine=$("$docker_cmd" version --format '{{.Server.Version}}' 2>/dev/null || true)
        if is_podman || [[ ! "$engine" =~ ^[0-9]+\. ]]; then :  # podman: its own build check below
        elif [ "${engine%%.*}" -ge 23 ]; then say ok "Docker Engine $engine"
        else say error "Docker Engine $engine $ENGINE_MSG"; fi
    else say error "$DAEMON_MSG"; fi
    if msg=$(build_context_problem) && [ -n "$msg" ]; then say error "$msg"; else say ok "named build contexts (make build)"; fi
    if msg=$(compose_problem) && [ -n "$msg" ]; then say error "$msg"; else say ok "Compose v2"; fi
    if "$docker_cmd" image inspect "$image" >/dev/null 2>&1; then
        say ok "image $image is built (the tarball and disk checks are for building it)"
        [ "$bad" = 0 ] || exit 2
        return 0
    fi
    if [ ! -f "$tarball" ]; then say error "${TARBALL_MISSING_MSG:-Isaac Gym tarball $tarball does not exist}"
    elif msg=$(check_tarball "$tarball" "$sha" 2>&1); then say ok "Isaac Gym tarball $tarball"
    else say error "${msg#error: }"; fi
    if msg=$(disk_problem) && [ -n "$msg" ]; then say error "$msg"; else say ok "disk: at least ${build_disk_gb} GB free for the build"; fi
    [ "$bad" = 0 ] || exit 2
    echo "mapush: the host is ready; the image $image is not built yet: make build (then make doctor also checks inside it)"
    exit 3
}

check_tensorboard_base() {
    local image=$1
    "$docker_cmd" image inspect "$image" >/dev/null 2>&1 && return 0
    "$docker_cmd" pull --quiet "$image" >/dev/null 2>&1 && return 0
    fail "TensorBoard's base image $image is not here and cannot be pulled (no registry answers?): pass TENSORBOARD_BASE_IMAGE=<a local Debian or Python image>, or make one from Debian's archive (as root, with debootstrap installed): docker/scripts/debian-base.sh mapush-debian-base:bookworm, then make tensorboard TENSORBOARD_BASE_IMAGE=mapush-debian-base:bookworm (later plain make tensorboard keeps that base)"
}

case "${1:-}" in
    buildkit) check_buildkit ;;
    compose) check_compose ;;
    tarball) [ $# -ge 2 ] || fail "usage: docker/host-check.sh tarball PATH [SHA256]"
             check_tarball "$2" "${3:-}" ;;
    runs-dir) [ $# -eq 3 ] || fail "usage: docker/host-check.sh runs-dir DIR CONTAINER_UID"
              check_runs_dir "$2" "$3" ;;
    tensorboard-base) [ $# -eq 2 ] || fail "usage: docker/host-check.sh tensorboard-base IMAGE"
                      check_tensorboard_base "$2" ;;
    prereqs) [ $# -ge 5 ] || fail "usage: docker/host-check.sh prereqs COMPOSE BUILD IMAGE TARBALL [SHA256]"
             check_prereqs "$2" "$3" "$4" "$5" "${6:-}" ;;
    host) [ $# -ge 3 ] || fail "usage: docker/host-check.sh host IMAGE TARBALL [SHA256]"
          check_host "$2" "$3" "${4:-}" ;;
    *) fail "usage: docker/host-check.sh {buildkit|compose|tarball PATH [SHA256]|runs-dir DIR UID|prereqs ...|host ...|tensorboard-base IMAGE}" ;;
esac
