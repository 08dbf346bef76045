#!/usr/bin/env bash
# MAPush at the pin from a shared snapshot (CI cannot reach GitHub), for the real_mqe tests.
# usage: ci/unpack-shared-upstream.sh SHARED_DIR DEST
# SHARED_DIR holds mapush-<commit>.tar.gz and mapush-<commit>.SHA256SUMS. The tarball is
# unpacked into DEST, every file is checked against the sums, and the tree's path
# (DEST/MAPush) is printed on stdout. Exit 1 when a file does not match; exit 3 when
# SHARED_DIR holds no snapshot (nothing printed).
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: ci/unpack-shared-upstream.sh SHARED_DIR DEST" >&2
    exit 2
fi
[ -d "$1" ] || exit 3
shared=$(cd "$1" && pwd)
dest=$2
tarball=$(find "$shared" -maxdepth 1 -name 'mapush-*.tar.gz' | sort | head -n 1)
[ -n "$tarball" ] || exit 3
sums=${tarball%.tar.gz}.SHA256SUMS
rm -rf "$dest" && mkdir -p "$dest"
tar -xzf "$tarball" -C "$dest"
if ! (cd "$dest/MAPush" && sha256sum --quiet --check "$sums" >&2); then
    echo "ci/unpack-shared-upstream.sh: $tarball does not match $sums" >&2
    exit 1
fi
cd "$dest/MAPush" && pwd
