#!/usr/bin/env bash
# Build the training image for the GPU CI job, reusing layers from earlier jobs.
#
# The runner's Docker daemon keeps BuildKit's layer cache between jobs (a self-hosted runner
# is a persistent machine), so `make build` after a change to mapush/ or a patch rebuilds
# seconds, not the torch layer. With MAPUSH_BUILD_CACHE_DIR set (and docker buildx present)
# the cache is also exported to / imported from that folder, which survives
# `docker system prune` and can be shared by runners on one host.
set -euo pipefail

cd "$(dirname "$0")/.."
export DOCKER_BUILDKIT=1
cache=${MAPUSH_BUILD_CACHE_DIR:-}
if [[ -n "$cache" ]] && docker buildx version >/dev/null 2>&1; then
  mkdir -p "$cache"
  flags="--cache-to type=local,dest=$cache.new,mode=max"
  if [[ -f "$cache/index.json" ]]; then
    flags="--cache-from type=local,src=$cache $flags"
  fi
  make build DOCKER_BUILD_FLAGS="$flags"
  # Swap in the new cache only after a successful build (buildx never prunes a local
  # cache, so exporting to a fresh folder keeps it from growing without bound).
  if [[ -f "$cache.new/index.json" ]]; then
    rm -rf "$cache.old"
    mv "$cache" "$cache.old"
    mv "$cache.new" "$cache"
    rm -rf "$cache.old"
  fi
else
  make build
fi
docker builder du 2>/dev/null | tail -n 1 || true
