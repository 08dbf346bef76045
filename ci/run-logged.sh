#!/usr/bin/env bash
# ci/run-logged.sh NAME COMMAND...: run COMMAND, keep its output in $CI_LOG_DIR/NAME.log
# (default runs/ci, uploaded as an artifact) and its duration in $CI_LOG_DIR/timings.tsv;
# exit with COMMAND's status.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: ci/run-logged.sh NAME COMMAND..." >&2
  exit 2
fi
name=$1
shift
dir=${CI_LOG_DIR:-runs/ci}
mkdir -p "$dir"
start=$(date +%s)
set +e
"$@" 2>&1 | tee "$dir/$name.log"
status=${PIPESTATUS[0]}
set -e
elapsed=$(( $(date +%s) - start ))
printf '%s\t%s\t%s\n' "$name" "$status" "$elapsed" >> "$dir/timings.tsv"
echo "ci: $name exited $status after ${elapsed}s"
exit "$status"
