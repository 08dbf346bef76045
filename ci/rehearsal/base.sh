#!/usr/bin/env bash
# The rehearsal's stand-in for the CUDA base image: Debian bookworm from Debian's archive
# (debootstrap, minbase) with this machine's Python 3.8 build (pyenv's, a shared-library
# build: Isaac Gym links libpython3.8.so) copied to /usr/local. No CUDA: nothing in the
# rehearsal runs on a GPU. The host's extra CA certificates are trusted inside, so apt and
# pip in the build work behind the same TLS proxy as the host.
#
# usage: ci/rehearsal/base.sh ENGINE TAG PYTHON38 CACHE_TARBALL
#   nothing is done when TAG exists; the root file system is cached in CACHE_TARBALL.
# Env: DEBIAN_SUITE (bookworm), DEBIAN_MIRROR (http://deb.debian.org/debian).
set -euo pipefail

if [ "$#" -ne 4 ]; then
    echo "usage: $0 ENGINE TAG PYTHON38 CACHE_TARBALL" >&2
    exit 2
fi
engine=$1 tag=$2 python=$3 cache=$4
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if "$engine" image inspect "$tag" >/dev/null 2>&1; then
    echo "rehearsal-base: $tag exists"
    exit 0
fi
if [ ! -s "$cache" ]; then
    prefix=$("$python" -c 'import sys; print(sys.prefix)')
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    root=$work/rootfs
    # the libraries pyenv's Python 3.8 links (ssl, ffi, sqlite, bz2, lzma, readline, zlib)
    debootstrap --variant=minbase \
        --include=ca-certificates,libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,libreadline8,zlib1g,libncursesw6,libuuid1,libexpat1 \
        "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 20 "$work/debootstrap.log" >&2
        echo "error: debootstrap $suite from $mirror failed" >&2
        exit 1
    }
    cp -a "$prefix/." "$root/usr/local/"
    rm -rf "$root/usr/local/lib/python3.8/test" "$root/usr/local/lib/python3.8/site-packages"/*
    mkdir -p "$root/usr/local/lib/python3.8/site-packages"
    chroot "$root" ldconfig
    chroot "$root" /usr/local/bin/python3.8 -c 'import ssl, sqlite3, bz2, lzma, ctypes, venv, ensurepip'
    shopt -s nullglob
    extra=(/usr/local/share/ca-certificates/*.crt)
    if [ "${#extra[@]}" -gt 0 ]; then
        cp "${extra[@]}" "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates >/dev/null
    fi
    # pip (the build's) trusts the system's CA store, the host's extra certificates included
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
        "$root"/usr/share/man/* "$root"/usr/share/locale/*
    mkdir -p "$(dirname "$cache")"
    tar --numeric-owner -C "$root" -cf "$cache.part" .
    mv "$cache.part" "$cache"
fi
"$engine" import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "debootstrap $suite from $mirror + Python 3.8 (rehearsal base)" "$cache" "$tag" >/dev/null
echo "rehearsal-base: imported $tag from $cache"
