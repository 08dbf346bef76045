#!/usr/bin/env bash
# Make a Debian base image from Debian's archive with debootstrap + docker import, for
# machines where no image registry answers (the tests and .ci/run use it as the base of
# docker/tensorboard.Dockerfile). Python 3 with venv and the CA bundle are included; the
# host's extra CA certificates (/usr/local/share/ca-certificates) are trusted too, so pip
# works behind the same TLS proxy as the host.
#
# usage: docker/scripts/debian-base.sh [TAG] [CACHE_TARBALL]
#   TAG            image to make (default mapush-debian-base:bookworm); nothing is done if
#                  it exists already
#   CACHE_TARBALL  root file system tarball: imported when present, written when made
# Needs root, debootstrap and a Docker daemon. Env: DEBIAN_SUITE (bookworm), DEBIAN_MIRROR.
set -euo pipefail

tag=${1:-mapush-debian-base:bookworm}
cache=${2:-}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "debian-base: $tag exists"
    exit 0
fi

import_tarball() {
    docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
        --message "debootstrap $suite from $mirror" "$1" "$tag" >/dev/null
    echo "debian-base: imported $tag from $1"
}

if [ -n "$cache" ] && [ -s "$cache" ]; then
    import_tarball "$cache"
    exit 0
fi

command -v debootstrap >/dev/null || {
    echo "error: debootstrap not found: apt-get install debootstrap (needed to make $tag)" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || { echo "error: debootstrap needs root" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    echo "error: debootstrap $suite from $mirror failed" >&2
    exit 1
}

shopt -s nullglob
extra=(/usr/local/share/ca-certificates/*.crt)
if [ "${#extra[@]}" -gt 0 ]; then
    cp "${extra[@]}" "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null
fi
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*

tarball=${cache:-$work/rootfs.tar}
[ -z "$cache" ] || mkdir -p "$(dirname "$cache")"
tar --numeric-owner -C "$root" -cf "$tarball" .
import_tarball "$tarball"
