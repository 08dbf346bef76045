#!/usr/bin/env bash
# Install Isaac Gym Preview 4 from the user's tarball into the image's venv.
# usage: install-isaacgym.sh TARBALL VERSION [SHA256]   (SHA256: the file's, checked when given)
# Only the installed package stays: the tarball is bind-mounted (never in a layer) and the
# extracted tree is deleted. Like NVIDIA's own Isaac Gym Dockerfile, it installs the tarball's
# Vulkan ICD and EGL vendor files and removes Mesa's EGL (its eglReleaseThread crashes at
# interpreter shutdown).
set -euo pipefail

tarball=$1
version=$2
if [ ! -f "$tarball" ]; then
    echo "error: Isaac Gym tarball $(basename "$tarball") is not in the isaacgym build context; build with make build (it stages vendor/$(basename "$tarball"))" >&2
    exit 2
fi
if [ -n "${3:-}" ] && [ "$(sha256sum "$tarball" | cut -d' ' -f1)" != "$3" ]; then
    echo "error: the mounted $(basename "$tarball") is not the file make staged (sha256 $3): build with make build" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" isaacgym/python isaacgym/docker
src=$work/isaacgym/python

pip install --no-deps --no-build-isolation "$src"
installed=$(python -c 'from importlib.metadata import version; print(version("isaacgym"))')
if [ "$installed" != "$version" ]; then
    echo "error: the tarball holds isaacgym $installed; the pin is $version (Preview 4)" >&2
    exit 1
fi

# setup.py's package data leaves out gymtorch's C++ sources, which gymtorch.py compiles.
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/isaacgym/_bindings/src"
cp -r "$src/isaacgym/_bindings/src/gymtorch" "$site/isaacgym/_bindings/src/"

install -D -m 0644 "$work/isaacgym/docker/nvidia_icd.json" /usr/share/vulkan/icd.d/nvidia_icd.json
install -D -m 0644 "$work/isaacgym/docker/10_nvidia.json" /usr/share/glvnd/egl_vendor.d/10_nvidia.json
rm -f /usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0* /usr/share/glvnd/egl_vendor.d/50_mesa.json
echo "isaacgym $installed installed in $site"
