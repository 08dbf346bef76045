#!/usr/bin/env bash
# Build the training image for the GPU CI job with `make build`, reusing cached layers.
#
# The layer cache is the runner's own Docker daemon: a self-hosted runner is a persistent
# machine, and BuildKit keeps every layer it built between jobs. The Dockerfile orders its
# layers so that a change to mapush/ or a patch rebuilds in seconds and the torch layer is
# reused; a change to a pin rebuilds from that pin's layer on. Keep the cache by never
# running `docker system prune -a` / `docker builder prune -a` on the runner; bound it with
# `docker builder prune --keep-storage` (docs/ci-gpu-runner.md).
# Always `make build` (not `make image`): an image left by an earlier job must not stand in
# for this commit's.
set -euo pipefail

cd "$(dirname "$0")/.."
name=$(sed -n 's/^ISAACGYM_TARBALL=//p' env/pins.env)
export DOCKER_BUILDKIT=1
start=$(date +%s)
make build ISAACGYM_TARBALL_PATH="vendor/$name"
echo "ci: image built in $(( $(date +%s) - start ))s (a warm layer cache makes this seconds)"
docker system df 2>/dev/null | sed -n '1p;/Build Cache/p' || true
