#!/usr/bin/env bash
# Stop the dockerd that ci/install-docker.sh started, by the PID it recorded.
# usage: ci/stop-dockerd.sh PIDFILE
# Nothing to do when PIDFILE is absent (the daemon was already running, or none was
# started). SIGTERM lets dockerd stop its containers and containerd; after 30 s, SIGKILL.
set -euo pipefail

pidfile=${1:?usage: ci/stop-dockerd.sh PIDFILE}
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
rm -f "$pidfile"
case "$pid" in
    ''|*[!0-9]*) echo "ci/stop-dockerd: $pidfile holds no PID ('$pid')" >&2; exit 1 ;;
esac
kill -0 "$pid" 2>/dev/null || exit 0
echo "ci/stop-dockerd: stopping dockerd (pid $pid)"
kill -TERM "$pid"
for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || exit 0
    sleep 0.5
done
echo "ci/stop-dockerd: dockerd (pid $pid) still running after 30 s: SIGKILL" >&2
kill -KILL "$pid" 2>/dev/null || true
