"""make image-check's own checks (ci/image-check.sh, docs/image-check.md): a missing
prerequisite is one `error:` line each, exit 2, before anything is built; the rehearsal's
Isaac Gym tarball is laid out as Preview 4's, as make build's host check reads it, and its
gym_38 serves the stand-in's SimType under Isaac Gym's own module name. The build and the
image's run themselves are CI's (.ci/run: ci/image-check.sh build, test, train)."""
import glob
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYENV38 = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8.*/bin/python")))


def image_check(*args, **env):
    return subprocess.run(["bash", str(REPO / "ci" / "image-check.sh")] + list(args),
                          env=dict(os.environ, **env), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


def test_missing_prerequisites_are_one_line_each_before_anything_is_built(tmp_path):
    times = REPO / "build" / "rehearsal" / "times.txt"
    before = times.read_text() if times.exists() else None
    proc = image_check("build", PYTHON38=str(tmp_path / "no-python3.8"), VENV=str(tmp_path),
                       IMAGE_CHECK_DISK_GB="100000000")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines and all(line.startswith("error: ") for line in lines), lines
    text = "\n".join(lines)
    assert "PYTHON38='%s' is not a shared-library Python 3.8" % (tmp_path / "no-python3.8") in text
    assert "harl_aht-" in text and "run make venv" in text
    assert "GB free" in text or "podman is not installed" in text
    assert (times.read_text() if times.exists() else None) == before  # nothing ran


def test_an_unknown_stage_is_one_line():
    proc = image_check("bake")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: 'bake' is not one of: all build test train (e.g. make image-check)"


@pytest.mark.skipif(not PYENV38, reason="needs pyenv's Python 3.8 (as CI's machine has)")
def test_the_rehearsal_tarball_is_laid_out_as_preview_4(tmp_path):
    tarball = tmp_path / "IsaacGym_Preview_4_Package.tar.gz"
    subprocess.run(["bash", str(REPO / "ci" / "rehearsal" / "isaacgym-tarball.sh"), PYENV38[-1],
                    "0+stand.in", str(tarball)], check=True, timeout=120)
    check = subprocess.run(["bash", str(REPO / "docker" / "host-check.sh"), "tarball",
                            str(tarball)], stderr=subprocess.PIPE, universal_newlines=True)
    assert check.returncode == 0, check.stderr
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(tmp_path)], check=True)
    probe = ("import importlib, pickle, sys; m = importlib.import_module("
             "'isaacgym._bindings.linux-x86_64.gym_38'); "
             "print(m.__file__); print(pickle.dumps(m.SIM_PHYSX, protocol=0).decode())")
    out = subprocess.run([PYENV38[-1], "-c", probe], cwd=str(tmp_path / "isaacgym" / "python"),
                         stdout=subprocess.PIPE, universal_newlines=True, check=True,
                         timeout=60).stdout
    assert out.splitlines()[0].endswith("gym_38.so")  # the compiled module, by Isaac Gym's name
    # SimType pickles as the authors' checkpoints name it
    assert "cisaacgym._bindings.linux-x86_64.gym_38\nSimType" in out, out
