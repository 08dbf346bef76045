#!/usr/bin/env python3
"""The rehearsal's `sources` build context (make image-check): what the Dockerfile's `sources`
stage fetches from GitHub, from the copies this machine holds instead.

usage: ci/rehearsal/sources.py MAPUSH_SRC HARL_WHEEL DEST

- DEST/opt/mapush: MAPush at the pin (MAPUSH_SRC, the shared snapshot checked against its
  sums), pristine: the build patches it. What the snapshot lacks, walk-these-ways' body, is
  the tests' stand-in (tests/standin/prepare_tree.py), listed in STANDIN.json.
- DEST/opt/harl: HARL's package from the harl-aht wheel, every pinned file checked against
  env/upstream.sha256 (tests/upstream.py), with a setup.py of ours (HARL's own is not in the
  wheel) so that the build's `pip install -e /opt/harl` takes it.
- each tree's .upstream-commit says where it came from and the pinned commit.
A DEST made before is replaced, so that the build's COPY sees exactly these files.
"""
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "standin"))

from prepare_tree import prepare  # noqa: E402
from tests.upstream import extract_harl_from, pins  # noqa: E402

STAMP = 946684800  # 2000-01-01T00:00:00Z
HARL_SETUP = '''"""HARL at the pin from the harl-aht wheel (make image-check's sources; not HARL's file)."""
from setuptools import find_packages, setup

setup(name="harl", version="1.0.0", packages=find_packages(include=["harl", "harl.*"]),
      package_data={"harl": ["configs/**/*.yaml", "configs/*/*/*.yaml"]})
'''


def main(argv):
    if len(argv) != 3:
        print("usage: ci/rehearsal/sources.py MAPUSH_SRC HARL_WHEEL DEST", file=sys.stderr)
        return 2
    src, wheel, dest = Path(argv[0]), Path(argv[1]), Path(argv[2])
    values = pins()
    if dest.exists():
        shutil.rmtree(str(dest))
    opt = dest / "opt"
    opt.mkdir(parents=True)
    mapush = opt / "mapush"
    prepare(str(src), str(mapush), pristine=True)
    (mapush / ".upstream-commit").write_text(
        "shared-snapshot:%s %s\n" % (src.name, values["MAPUSH_COMMIT"]))
    harl = opt / "harl"
    extract_harl_from(wheel, harl)
    (harl / "setup.py").write_text(HARL_SETUP)
    (harl / ".upstream-commit").write_text(
        "harl-aht-wheel:%s %s\n" % (wheel.name, values["HARL_COMMIT"]))
    for folder, dirs, files in os.walk(str(dest)):
        if "__pycache__" in dirs:
            shutil.rmtree(os.path.join(folder, "__pycache__"))
            dirs.remove("__pycache__")
        # readable by the image's user, as git's checkout is (the stand-in body is 0600)
        for name in files:
            path = os.path.join(folder, name)
            os.chmod(path, os.stat(path).st_mode | 0o444)
    # one time stamp for all: podman's cache of a COPY reads the files' times too, so the
    # same trees made again (each run, each clone) keep the layers built on them
    for folder, dirs, files in os.walk(str(dest)):
        for name in files + dirs + ["."]:
            os.utime(os.path.join(folder, name), (STAMP, STAMP), follow_symlinks=False)
    print("rehearsal: sources in %s (MAPush from %s, HARL from %s)" % (dest, src, wheel.name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
