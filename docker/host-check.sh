#!/usr/bin/env bash
# Checks make runs on the host before Docker does anything long, each failure one `error:`
# line that names what is wrong and what to install or fix, exit status 2.
#
# usage: docker/host-check.sh buildkit
#        docker/host-check.sh compose
#        docker/host-check.sh tarball PATH [SHA256]
#        docker/host-check.sh runs-dir DIR CONTAINER_UID
#        docker/host-check.sh prereqs COMPOSE BUILD IMAGE TARBALL [SHA256]
#        docker/host-check.sh tensorboard-base IMAGE
#
# prereqs   every prerequisite of a make target in one pass: Compose v2 (COMPOSE=1), a
#           running Docker daemon, and when the image must be built (BUILD=always, or
#           BUILD=if-missing and IMAGE does not exist or cannot be asked for) the tarball
#           and BuildKit. One `error:` line on stderr for each that is missing, except the
#           last, which goes to stdout for make to print with $(error); exit 2 if any.
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
# DOCKER (default docker) is the docker command.
set -euo pipefail

docker_cmd=${DOCKER:-docker}
fail() {
    echo "error: $*" >&2
    exit 2
}

BUILDKIT_MSG="make build needs Docker BuildKit ('docker buildx version' failed): install the buildx plugin (Docker's docker-buildx-plugin package, or docker-buildx on Debian/Ubuntu) and retry"
COMPOSE_MSG="Docker Compose v2 is missing ('docker compose version' failed): install the compose plugin (Docker's docker-compose-plugin package, or docker-compose-v2 on Debian/Ubuntu); the old docker-compose v1 is not enough"
DAEMON_MSG="the Docker daemon does not answer ('docker info' failed): start it (sudo systemctl start docker), or check DOCKER_HOST and that you may use it (the docker group)"

check_buildkit() {
    "$docker_cmd" buildx version >/dev/null 2>&1 || fail "$BUILDKIT_MSG"
}

check_compose() {
    "$docker_cmd" compose version >/dev/null 2>&1 || fail "$COMPOSE_MSG"
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
    if [ "$compose" = 1 ] && ! "$docker_cmd" compose version >/dev/null 2>&1; then
        problems+=("$COMPOSE_MSG")
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
        "$docker_cmd" buildx version >/dev/null 2>&1 || problems+=("$BUILDKIT_MSG")
    fi
    [ "${#problems[@]}" -eq 0 ] && return 0
    for ((i = 0; i < ${#problems[@]} - 1; i++)); do
        echo "error: ${problems[i]}" >&2
    done
    echo "error: ${problems[${#problems[@]} - 1]}"
    exit 2
}

check_tensorboard_base() {
    local image=$1
    "$docker_cmd" image inspect "$image" >/dev/null 2>&1 && return 0
    "$docker_cmd" pull --quiet "$image" >/dev/null 2>&1 && return 0
    fail "TensorBoard's base image $image is not here and cannot be pulled (no registry answers?): pass TENSORBOARD_BASE_IMAGE=<a local Debian or Python image>, or make one from Debian's archive with: sudo docker/scripts/debian-base.sh mapush-debian-base:bookworm, then make tensorboard TENSORBOARD_BASE_IMAGE=mapush-debian-base:bookworm"
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
    *) fail "usage: docker/host-check.sh {buildkit|compose|tarball PATH [SHA256]|runs-dir DIR UID|prereqs ...|tensorboard-base IMAGE}" ;;
esac
