"""Real upstream OpenRL and HARL code, patched by ``patches/apply``, in a throwaway folder.

Tests and the trainer helpers run the real upstream code, not a mock, so that a patch
that stops applying or a behaviour that the patches break shows up here. The venv's own
openrl stays pristine (tests copy it); HARL's upstream files come from the harl-aht wheel
(see docs/upstream.md), verified against the pinned hashes before they are patched.
"""
import hashlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Tuple, Union

REPO = Path(__file__).resolve().parent.parent
APPLY = REPO / "patches" / "apply"
ENV = REPO / "env"
WHEELS = REPO / ".venv" / "wheels"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pins() -> Dict[str, str]:
    values = {}
    for line in (ENV / "pins.env").read_text().splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def pinned_hashes(component: str) -> Dict[str, str]:
    """``{path relative to the component DIR: sha256}`` from env/upstream.sha256."""
    result = {}
    for line in (ENV / "upstream.sha256").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(None, 1)
            owner, rel = name.strip().split("/", 1)
            if owner == component:
                result[rel] = digest
    return result


def pristine_openrl_dir() -> Path:
    """The venv's openrl package folder, found without importing it (the import is broken).
    ``make test-stack`` patches its venv's OpenRL as the image does and keeps the pristine
    copy in ``MAPUSH_PRISTINE_OPENRL``."""
    if os.environ.get("MAPUSH_PRISTINE_OPENRL"):
        return Path(os.environ["MAPUSH_PRISTINE_OPENRL"])
    # sys.path's, not sys.modules': a test that imported a patched copy in this process
    # (tests/test_schema.py) leaves it in sys.modules, where importlib.util.find_spec looks
    spec = importlib.machinery.PathFinder.find_spec("openrl", sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("openrl is not installed in this interpreter; run `make venv`")
    return Path(list(spec.submodule_search_locations)[0])


def harl_wheel() -> Path:
    """The harl-aht wheel `make venv` downloaded, checked against its pinned sha256."""
    values = pins()
    wheel = WHEELS / ("harl_aht-%s-py3-none-any.whl" % values["HARL_AHT_VERSION"])
    if not wheel.is_file():
        raise RuntimeError("%s is missing; run `make venv` (it downloads env/harl-carrier.txt)"
                           % wheel)
    if sha256(wheel) != values["HARL_AHT_WHEEL_SHA256"]:
        raise RuntimeError("%s: sha256 %s, pinned %s" % (wheel, sha256(wheel),
                                                         values["HARL_AHT_WHEEL_SHA256"]))
    return wheel


def copy_openrl(site: Path) -> Path:
    dest = site / "openrl"
    shutil.copytree(str(pristine_openrl_dir()), str(dest),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def extract_harl(site: Path) -> Path:
    """Extract only ``harl/`` from the carrier wheel and verify the pinned upstream files."""
    return extract_harl_from(harl_wheel(), site)


def extract_harl_from(wheel: Path, site: Path) -> Path:
    with zipfile.ZipFile(str(wheel)) as archive:
        members = [name for name in archive.namelist() if name.startswith("harl/")]
        archive.extractall(str(site), members)
    for rel, digest in pinned_hashes("harl").items():
        actual = sha256(site / rel)
        if actual != digest:
            raise RuntimeError("harl-aht's %s is not HARL at the pin: sha256 %s, pinned %s"
                               % (rel, actual, digest))
    return site / "harl"


def apply(component: str, target: Path, records: Path) -> str:
    """Run the real ``patches/apply`` executable; returns its output, raises on failure."""
    proc = subprocess.run([str(APPLY), component, str(target), "--record-dir", str(records)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError("patches/apply %s failed (%d): %s%s"
                           % (component, proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


def build_patched_site(tmp: Path) -> Dict[str, Path]:
    """``<tmp>/site`` with patched ``openrl/`` and ``harl/``; records in ``<tmp>/records``."""
    site, records = Path(tmp) / "site", Path(tmp) / "records"
    site.mkdir(parents=True)
    copy_openrl(site)
    extract_harl(site)
    apply("openrl", site, records)
    apply("harl", site, records)
    return {"site": compiled(site), "records": records}


def compiled(tree: Path) -> Path:
    """Byte-compile a tree the tests made, once: with PYTHONDONTWRITEBYTECODE (set on CI's
    machines) each child would compile it again at every import."""
    import compileall

    compileall.compile_dir(str(tree), quiet=1)
    return tree


def site_without(tmp: Path, skipped: Union[str, Tuple[str, ...]], component: str = "harl"
                 ) -> Path:
    """``<tmp>/site`` with ``openrl/`` and ``harl/`` patched but for ``component``'s patches
    whose names start with ``skipped`` (a prefix or a tuple of them, e.g. ``"05-"``: HARL as
    it is without the device rollout), each applied with ``patch -p1`` as ``patches/apply``
    applies it."""
    site, records = Path(tmp) / "site", Path(tmp) / "records"
    site.mkdir(parents=True)
    copy_openrl(site)
    extract_harl(site)
    for name in ("openrl", "harl"):
        if name != component:
            apply(name, site, records)
            continue
        for patch in sorted((APPLY.parent / name).glob("*.patch")):
            if not patch.name.startswith(skipped):
                subprocess.run(["patch", "-p1", "-s", "-d", str(site), "-i", str(patch)],
                               check=True, timeout=60)
    return site


def patched_mapush(src: Path, *roots: Path) -> None:
    """Copy MAPush's pinned files from the checkout ``src`` into each of ``roots`` (checked
    against env/upstream.sha256), then apply patches/mapush to the last one."""
    for rel, digest in pinned_hashes("mapush").items():
        assert (src / rel).is_file(), "MAPUSH_SRC=%s is not a MAPush checkout: no %s" % (src, rel)
        assert sha256(src / rel) == digest, "%s is not MAPush at the pin" % (src / rel)
        for root in roots:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(str(src / rel), str(root / rel))
    proc = subprocess.run([str(APPLY), "mapush", str(roots[-1])], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert proc.returncode == 0, proc.stderr

