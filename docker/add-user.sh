#!/usr/bin/env bash
# Create the image's non-root user with the host user's ids, so that what the container
# writes to the bind-mounted runs/ belongs to the host user.
# usage: add-user.sh NAME UID GID WORKDIR   (uid/gid 0 become 1000: never root)
set -euo pipefail

name=$1
uid=$2
gid=$3
workdir=$4
if ! [[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]]; then
    echo "error: HOST_UID='$uid' and HOST_GID='$gid' must be numeric ids (id -u, id -g)" >&2
    exit 2
fi
[ "$uid" != 0 ] || uid=1000
[ "$gid" != 0 ] || gid=1000

getent group "$gid" >/dev/null || groupadd --gid "$gid" "$name"
useradd --uid "$uid" --gid "$gid" --non-unique --create-home --shell /bin/bash "$name"
mkdir -p "$workdir/runs"
chown -R "$uid:$gid" "$workdir"
echo "user $name: uid $uid, gid $gid"
