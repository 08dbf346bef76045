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
