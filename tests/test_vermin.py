"""``mapush/``, ``tests/gpu`` and ``patches/apply`` run on the image's Python 3.8: vermin must agree.

``--eval-annotations`` because Python 3.8 evaluates annotations at definition time, so a
``dict[str, int]`` annotation breaks the import there.
"""
import shutil
import subprocess
import sys
from pathlib import Path

from tests.upstream import APPLY, REPO

# the console script beside this interpreter (vermin has no ``python -m vermin``), else the
# test venv's (make test-stack runs on the image's stack, which has no linters)
_SCRIPTS = [Path(sys.executable).parent / "vermin", REPO / ".venv" / "bin" / "vermin"]
_SCRIPT = next((p for p in _SCRIPTS if p.exists()), None)
VERMIN = [str(_SCRIPT) if _SCRIPT else shutil.which("vermin") or "vermin",
          "-t=3.8-", "--violations", "--eval-annotations", "--no-tips"]


def vermin(*paths):
    return subprocess.run(VERMIN + [str(p) for p in paths], capture_output=True, text=True,
                          timeout=300, cwd=str(REPO))


def test_mapush_and_patches_apply_run_on_python_3_8():
    # tests/gpu: the smoke stages run in the image too
    proc = vermin(REPO / "mapush", APPLY, REPO / "tests" / "gpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_check_catches_newer_python(tmp_path: Path):
    sample = tmp_path / "newer.py"
    sample.write_text("from functools import cache\n\n\n"
                      "def f(x: dict[str, int]) -> list[int]:\n    return list(x.values())\n")
    proc = vermin(sample)
    assert proc.returncode != 0
    assert "3.9" in proc.stdout
