#!/usr/bin/env bash
# Entry point of the training image: `mapush` subcommands run as the mapush command
# (`docker run IMAGE train ...` is `mapush train ...`); anything else runs as given
# (`docker run IMAGE bash`, `... python -c ...`).
set -euo pipefail

case "${1:-}" in
    train | doctor | smoke | eval | -*) set -- mapush "$@" ;;
    "") set -- mapush doctor ;;
esac

# make dev: the user's MAPush checkout (mounted read-only at MAPUSH_DEV_SRC), copied into
# the container and patched (docker/dev-tree.py), stands in for the image's /opt/mapush;
# a patch that does not apply is one error line and nothing runs.
if [ -n "${MAPUSH_DEV_SRC:-}" ]; then
    dev=${MAPUSH_DEV_DIR:-/tmp/mapush-dev}
    here=$(dirname "$0")  # /opt/mapush-env/bin in the image, beside ../patches
    python3 "$here/dev-tree.py" "$MAPUSH_DEV_SRC" "$dev/MAPush" "$here/../patches" \
        "$dev/patch-records" "${MAPUSH_PATCH_RECORDS:-}" || exit 2
    export MAPUSH_ROOT="$dev/MAPush" MAPUSH_PATCH_RECORDS="$dev/patch-records"
    export PYTHONPATH="$dev/MAPush${PYTHONPATH:+:$PYTHONPATH}"
fi

# runs/ is the host's folder: a uid mismatch would surface later as "permission denied".
if [ "$1" = mapush ] && [ -d runs ] && [ ! -w runs ]; then
    echo "warning: runs/ is not writable by uid $(id -u); rebuild the image with make build" \
        "(it passes your id -u as HOST_UID) or give runs/ to uid $(id -u)" >&2
fi
exec "$@"
