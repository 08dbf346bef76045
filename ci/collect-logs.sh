#!/usr/bin/env bash
# Gather what a failed GPU job needs for a diagnosis into $CI_LOG_DIR (default runs/ci):
# host, GPU, driver and Docker facts, and a summary of the smoke report for the job page.
# Never fails the job: every probe is best effort.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 0
dir=${CI_LOG_DIR:-runs/ci}
mkdir -p "$dir"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null)"
  echo "kernel: $(uname -srm)"
  echo "runner: ${RUNNER_NAME:-unknown}"
} > "$dir/host.txt"
nvidia-smi > "$dir/nvidia-smi.txt" 2>&1
docker version > "$dir/docker-version.txt" 2>&1
docker info > "$dir/docker-info.txt" 2>&1
docker image ls > "$dir/docker-images.txt" 2>&1
df -h . /var/lib/docker > "$dir/disk.txt" 2>&1

report=runs/smoke/report.json
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$report" ]] && command -v python3 >/dev/null; then
  python3 - "$report" >> "$GITHUB_STEP_SUMMARY" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("### mapush smoke: %s (%.0f s)\n" % (report["status"], report["duration_s"]))
print("| stage | status | seconds | message |\n|---|---|---|---|")
for s in report["stages"]:
    message = s["message"].replace("|", "\\|")[:300]
    print("| %s | %s | %.1f | %s |" % (s["name"], s["status"], s["duration_s"], message))
PY
fi
exit 0
