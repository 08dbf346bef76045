#!/usr/bin/env bash
# TensorBoard over /runs (the service's command line), announcing the address the host
# publishes (TENSORBOARD_URL, set by compose.yaml) instead of the container's own name,
# which --bind_all shows and which no browser on the host reaches. TensorBoard itself
# becomes the container's main process (exec); only its stderr passes through sed.
set -euo pipefail
url="${TENSORBOARD_URL:-http://127.0.0.1:6006/}"
exec /opt/tensorboard/bin/tensorboard "$@" 2> >(exec sed -u "s#http://[^ ]*:6006/#${url}#" >&2)
