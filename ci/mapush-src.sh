#!/usr/bin/env bash
# MAPush at the pin for the real-MQE tests (tests/standin, the real_mqe marker).
# usage: ci/mapush-src.sh REPO COMMIT DEST
# Prints the tree's path on stdout, or nothing with the reason on stderr (the tests then
# skip with it). MAPUSH_SRC wins; else DEST, fetched once with docker/fetch-upstream.sh as
# the image fetches MAPush, when the network allows (at most 120 s).
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: ci/mapush-src.sh REPO COMMIT DEST" >&2
    exit 2
fi
repo=$1
commit=$2
dest=$3
if [ -n "${MAPUSH_SRC:-}" ]; then
    echo "$MAPUSH_SRC"
    exit 0
fi
if [ -f "$dest/.upstream-commit" ]; then
    echo "$dest"
    exit 0
fi
partial="$dest.partial"
rm -rf "$partial"
mkdir -p "$(dirname "$dest")"
if timeout 120 bash "$(dirname "$0")/../docker/fetch-upstream.sh" "$repo" "$commit" "$partial" \
        >/dev/null 2>&1; then
    mv "$partial" "$dest"
    echo "$dest"
else
    rm -rf "$partial"
    echo "$repo at $commit could not be fetched (no network?); set MAPUSH_SRC to a" \
         "MAPush checkout at the pin" >&2
fi
