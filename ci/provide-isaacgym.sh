#!/usr/bin/env bash
# Put the user's Isaac Gym Preview 4 tarball where `make build` reads it
# (vendor/<ISAACGYM_TARBALL from env/pins.env>), for the GPU CI job.
#
# Source, first found:
#   ISAACGYM_TARBALL_PATH  a file on the runner (set in the runner's .env, see
#                          docs/ci-gpu-runner.md); default /opt/ci/isaacgym/<tarball name>
#   ISAACGYM_TARBALL_URL   a private download URL, given as a repository secret
# Optional check: ISAACGYM_TARBALL_SHA256.
# The tarball is not redistributable: this script never prints the URL or the tarball, the
# copy is hard-linked (or copied) into the git-ignored vendor/ folder, and `--remove` deletes
# it (and make's staged link) again at the end of the job. Nothing here uploads anything.
set -euo pipefail

cd "$(dirname "$0")/.."
name=$(sed -n 's/^ISAACGYM_TARBALL=//p' env/pins.env)
if [[ -z "$name" ]]; then
  echo "error: ISAACGYM_TARBALL is not set in env/pins.env" >&2
  exit 1
fi
dest="vendor/$name"
marker="vendor/.$name.provided-by-ci"
# Where `make build` stages the tarball as its own build context.
staged="build/isaacgym-context/$name"

if [[ "${1:-}" == "--remove" ]]; then
  if [[ -f "$marker" ]]; then
    rm -f "$dest" "$marker" "$staged"
    echo "isaacgym: removed the tarball from the workspace"
  fi
  exit 0
fi

src=${ISAACGYM_TARBALL_PATH:-/opt/ci/isaacgym/$name}
url=${ISAACGYM_TARBALL_URL:-}
mkdir -p vendor
if [[ -f "$src" ]]; then
  # A hard link costs nothing on the same file system; otherwise copy.
  ln -f "$src" "$dest" 2>/dev/null || cp -f "$src" "$dest"
  echo "isaacgym: $dest provided from the runner's file $src"
elif [[ -n "$url" ]]; then
  tmp="$dest.part"
  if ! curl --fail --silent --show-error --location --retry 3 --output "$tmp" "$url" 2>/dev/null; then
    rm -f "$tmp"
    echo "error: downloading the Isaac Gym tarball from ISAACGYM_TARBALL_URL failed" >&2
    exit 1
  fi
  mv -f "$tmp" "$dest"
  echo "isaacgym: $dest downloaded from the ISAACGYM_TARBALL_URL secret"
else
  echo "error: no Isaac Gym tarball for this job: put $name on the runner and set" \
       "ISAACGYM_TARBALL_PATH in the runner's .env (or place it at $src), or add the" \
       "repository secret ISAACGYM_TARBALL_URL; see docs/ci-gpu-runner.md" >&2
  exit 1
fi
touch "$marker"

if [[ "$(head -c 2 "$dest" | od -An -tx1 | tr -d ' \n')" != "1f8b" ]]; then
  echo "error: $dest is not a gzip file; expected NVIDIA's $name" >&2
  exit 1
fi
if [[ -n "${ISAACGYM_TARBALL_SHA256:-}" ]]; then
  if ! echo "$ISAACGYM_TARBALL_SHA256  $dest" | sha256sum --check --status; then
    echo "error: $dest does not match ISAACGYM_TARBALL_SHA256" >&2
    exit 1
  fi
  echo "isaacgym: sha256 verified"
fi
