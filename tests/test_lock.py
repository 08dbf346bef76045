"""The image's hashed locks: every requirement hashed, torch and CUDA wheels kept out, the
versions of env/pins.env locked, and the TensorBoard image at the training image's version."""
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from mapush.pins import parse_pins

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "env" / "requirements.lock"
TB_LOCK = REPO / "env" / "tensorboard.lock"
PINS = parse_pins((REPO / "env" / "pins.env").read_text())


def entries(path: Path) -> Dict[str, Dict[str, object]]:
    """``{name: {"version": str, "hashes": [sha256...]}}`` of a pip-compile style lock."""
    found = {}  # type: Dict[str, Dict[str, object]]
    current = None
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ \\;]+)", line)
            assert match, "%s: not a name==version requirement: %r" % (path.name, line)
            current = {"version": match.group(2), "hashes": []}
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = current
        else:
            assert current is not None, line
            for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
                current["hashes"].append(digest)  # type: ignore[attr-defined]
    return found


def test_every_requirement_is_pinned_and_hashed():
    for path in (LOCK, TB_LOCK):
        table = entries(path)
        assert len(table) > 10, path
        unhashed = [name for name, entry in table.items() if not entry["hashes"]]
        assert unhashed == [], "%s: no --hash for %s" % (path.name, unhashed)


def test_no_torch_and_no_cuda_wheels_in_the_locks():
    for path in (LOCK, TB_LOCK):
        names = set(entries(path))
        forbidden = sorted(n for n in names
                           if n in ("torch", "torchvision", "torchaudio", "triton")
                           or n.startswith("nvidia-"))
        assert forbidden == [], "%s must not lock %s" % (path.name, forbidden)


def test_lock_pins_the_versions_of_pins_env():
    table = entries(LOCK)
    for name, key in (("openrl", "OPENRL_VERSION"), ("gymnasium", "GYMNASIUM_VERSION"),
                      ("numpy", "NUMPY_VERSION"), ("jsonargparse", "JSONARGPARSE_VERSION")):
        assert table[name]["version"] == PINS[key], (name, table[name], PINS[key])
    assert PINS["OPENRL_WHEEL_SHA256"] in table["openrl"]["hashes"]


def test_lock_is_for_the_pinned_python_and_has_what_the_image_installs():
    header = LOCK.read_text().split("\n", 3)[:3]
    assert any("make lock" in line for line in header), header
    table = entries(LOCK)
    # image bootstrap + --no-build-isolation installs, gymtorch's ninja, HARL's absl
    for name in ("pip", "setuptools", "wheel", "ninja", "absl-py", "pettingzoo", "gym",
                 "tensorboard", "tensorboardx", "setproctitle", "pyyaml", "imageio", "scipy",
                 "pillow", "treelib", "matplotlib", "debugpy", "requests", "typing-extensions"):
        assert name in table, name
    # the Makefile's lock recipe resolves for the pinned Python and no torch
    recipe = (REPO / "Makefile").read_text()
    assert "--python-version $(PYTHON_VERSION)" in recipe
    assert "--no-emit-package torch" in recipe and "sys_platform == 'never'" in recipe


def test_tensorboard_image_locks_the_training_images_tensorboard():
    assert entries(TB_LOCK)["tensorboard"]["version"] == entries(LOCK)["tensorboard"]["version"]
    # the slim image's Python is the one the TensorBoard lock was made for
    dockerfile = (REPO / "docker" / "tensorboard.Dockerfile").read_text()
    base = re.search(r"^ARG TENSORBOARD_BASE_IMAGE=python:(\d+\.\d+)", dockerfile, re.M)
    assert base, "docker/tensorboard.Dockerfile: default base is not a python:X.Y image"
    assert "--python-version %s" % base.group(1) in (REPO / "Makefile").read_text()


def _subset(*names: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "docker" / "lock_subset.py"), str(LOCK)]
                          + list(names), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def test_lock_subset_bootstraps_pip_with_the_locks_hashes():
    proc = _subset("pip", "setuptools", "Wheel")
    assert proc.returncode == 0, proc.stderr
    table = entries(LOCK)
    got = {}  # type: Dict[str, List[str]]
    for block in re.split(r"\n(?=\S)", proc.stdout.strip()):
        name = block.split("==", 1)[0]
        got[name] = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
        assert not block.rstrip().endswith("\\"), "a dangling line continuation: %r" % block
    assert set(got) == {"pip", "setuptools", "wheel"}
    for name, hashes in got.items():
        assert hashes == table[name]["hashes"], name


def test_lock_subset_refuses_a_name_not_in_the_lock():
    proc = _subset("pip", "torch")
    assert proc.returncode == 1
    assert "no entry for torch" in proc.stderr
