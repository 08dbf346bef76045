#!/usr/bin/env bash
# Entry point of the training image: `mapush` subcommands run as the mapush command
# (`docker run IMAGE train ...` is `mapush train ...`); anything else runs as given
# (`docker run IMAGE bash`, `... python -c ...`).
set -euo pipefail

case "${1:-}" in
    train | doctor | smoke | eval | -*) set -- mapush "$@" ;;
    "") set -- mapush doctor ;;
esac

# runs/ is the host's folder: a uid mismatch would surface later as "permission denied".
if [ "$1" = mapush ] && [ -d runs ] && [ ! -w runs ]; then
    echo "warning: runs/ is not writable by uid $(id -u); rebuild the image with make build" \
        "(it passes your id -u as HOST_UID) or give runs/ to uid $(id -u)" >&2
fi
exec "$@"
