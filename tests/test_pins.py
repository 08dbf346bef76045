"""env/pins.env is the single, complete source of pins, and the package reads it."""
import re

import pytest

from mapush.pins import load_pins, parse_pins
from tests.conftest import REPO

PINS = parse_pins((REPO / "env" / "pins.env").read_text())
UPSTREAM_SHA = (REPO / "env" / "upstream.sha256").read_text().split("\n")


@pytest.mark.parametrize("key,pattern", [
    ("CUDA_BASE_IMAGE", r"^nvidia/cuda:11\.6\.\d+-.*ubuntu20\.04$"),
    ("PYTHON_VERSION", r"^3\.8$"),
    ("TORCH_VERSION", r"^1\.13\.1\+cu116$"),
    ("TORCHVISION_VERSION", r"^0\.14\.1\+cu116$"),
    ("TORCH_INDEX_URL", r"/whl/cu116$"),
    ("OPENRL_VERSION", r"^0\.2\.0$"),
    ("GYMNASIUM_VERSION", r"^0\.29\.1$"),
    ("NUMPY_VERSION", r"^1\.23\.\d+$"),
    ("MAPUSH_COMMIT", r"^0e61e1bac03ed42300b48bb988d4a5b87cdee13b$"),
    ("HARL_COMMIT", r"^d539bad20f677bc4ce9fa200fa5de31b5f0b9d37$"),
    ("ISAACGYM_TARBALL", r"^IsaacGym_Preview_4_Package\.tar\.gz$"),
])
def test_every_pin_is_present_and_well_formed(key, pattern):
    assert re.search(pattern, PINS[key]), (key, PINS.get(key))


def test_upstream_hashes_cover_the_three_components():
    rows = [line.split() for line in UPSTREAM_SHA if line.strip()]
    assert all(len(h) == 64 and int(h, 16) >= 0 for h, _ in rows)
    assert {path.split("/", 1)[0] for _, path in rows} == {"openrl", "harl", "mapush"}


def test_parse_pins_rejects_garbage():
    assert parse_pins("# c\n\nA=1\nB = two\n") == {"A": "1", "B": "two"}
    with pytest.raises(ValueError):
        parse_pins("NOT A PIN\n")


def test_package_finds_pins_in_the_checkout_and_by_env(tmp_path, monkeypatch):
    assert load_pins() == PINS
    (tmp_path / "pins.env").write_text("ONLY=1\n")
    monkeypatch.setenv("MAPUSH_ENV_DIR", str(tmp_path))
    assert load_pins() == {"ONLY": "1"}


def test_a_pip_installed_mapush_records_every_pin(tmp_path):
    """Outside the image and the checkout: the wheel carries pins.env itself."""
    import subprocess
    import sys
    import zipfile

    import shutil

    # The source as the image's build gets it (docker/Dockerfile), outside the checkout.
    src = tmp_path / "src"
    (src / "env").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(str(REPO / name), str(src / name))
    shutil.copy(str(REPO / "env" / "pins.env"), str(src / "env" / "pins.env"))
    shutil.copytree(str(REPO / "mapush"), str(src / "mapush"), symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert (src / "mapush" / "pins.env").is_symlink()
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(wheels), str(src)], check=True,
                   timeout=300, capture_output=True)
    (wheel,) = wheels.glob("mapush_env-*.whl")
    with zipfile.ZipFile(str(wheel)) as archive:
        shipped = archive.read("mapush/pins.env").decode()
    assert parse_pins(shipped) == PINS
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, timeout=300, capture_output=True)
    assert not (site / "mapush" / "pins.env").is_symlink()
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", "import json; from mapush.provenance import "
                          "provenance; print(json.dumps(provenance()))"], env=env,
                         cwd=str(tmp_path), check=True, capture_output=True, text=True,
                         timeout=120)
    import json

    record = json.loads(out.stdout)
    assert record["pins"] == PINS
    assert not any(gap.startswith("pin") for gap in record["incomplete"])


def test_an_incomplete_record_says_so_on_stderr(upstream, tmp_path):
    """No patch records and no Isaac Gym here: config.json lists what it lacks, and the run
    says so on stderr instead of writing a quietly partial record."""
    import json
    import subprocess
    import sys

    from tests.conftest import double_env

    env = double_env(upstream, MAPUSH_PATCH_RECORDS=tmp_path / "none",
                     XDG_CACHE_HOME=tmp_path / "cache")
    (tmp_path / "tiny.yaml").write_text("episode_length: 2\nppo_epoch: 1\n")

    def train(run):
        return subprocess.run([sys.executable, "-m", "mapush", "train", "--sim-device", "cpu",
                               "--rl-device", "cpu", "--run-dir", str(tmp_path / run),
                               "--no-preflight", "--steps", "4", "--num-envs", "2", "--config",
                               str(tmp_path / "tiny.yaml")], env=env, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=300)

    proc = train("run")
    record = json.loads((tmp_path / "run" / "config.json").read_text())["provenance"]
    assert record["pins"] == PINS
    gaps = record["incomplete"]
    assert "patch record of harl (none in %s; set MAPUSH_PATCH_RECORDS)" % (tmp_path / "none") \
        in gaps
    # the stand-in's isaacgym is recorded as what it is (its metadata: tests/standin)
    assert not any(g.startswith("version of isaacgym") for g in gaps)
    assert record["versions"]["isaacgym"] == "0+stand-in"
    (line,) = [l for l in proc.stderr.splitlines() if "incomplete stack" in l]
    assert line.startswith("mapush: warning: ") and "patch record of openrl" in line
    again = train("run2")  # the same gaps: said once, still recorded
    assert again.returncode == 0, again.stderr[-2000:]
    assert "incomplete stack" not in again.stderr
    assert json.loads((tmp_path / "run2" / "config.json").read_text())[
        "provenance"]["incomplete"] == gaps
