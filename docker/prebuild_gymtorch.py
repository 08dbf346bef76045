#!/usr/bin/env python3
"""Compile Isaac Gym's gymtorch extension at image build time.

``isaacgym.gymtorch`` compiles ``_bindings/src/gymtorch/gymtorch.cpp`` with
``torch.utils.cpp_extension.load(name="gymtorch", ...)`` on first import, into
``$TORCH_EXTENSIONS_DIR/gymtorch``; an ephemeral container would pay that on every start.
This calls ``load`` with the same name, source path and flags, without importing isaacgym
(which may need a GPU driver; compiling does not), so a container finds the build up to
date and only loads it. Python 3.8.
"""
import importlib.util
import os
import sys


def main() -> int:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        print("error: set TORCH_EXTENSIONS_DIR (the folder baked into the image)", file=sys.stderr)
        return 2
    spec = importlib.util.find_spec("isaacgym")
    if spec is None or not spec.submodule_search_locations:
        print("error: isaacgym is not installed", file=sys.stderr)
        return 1
    package_dir = list(spec.submodule_search_locations)[0]
    # Same strings as isaacgym/gymtorch.py builds them, so the ninja file matches at run time.
    srcdir = os.path.join(package_dir, "_bindings/src/gymtorch")
    sources = [os.path.join(srcdir, "gymtorch.cpp")]
    if not os.path.isfile(sources[0]):
        print("error: %s missing (install-isaacgym.sh copies it)" % sources[0], file=sys.stderr)
        return 1

    import torch
    import torch.utils.cpp_extension

    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    cflags = ["-DTORCH_MAJOR=%d" % major, "-DTORCH_MINOR=%d" % minor]
    torch.utils.cpp_extension.load(name="gymtorch", sources=sources, extra_cflags=cflags,
                                   verbose=True)
    built = os.path.join(root, "gymtorch", "gymtorch.so")
    if not os.path.isfile(built):
        print("error: %s was not built" % built, file=sys.stderr)
        return 1
    print("gymtorch prebuilt: %s" % built)
    return 0


if __name__ == "__main__":
    sys.exit(main())
