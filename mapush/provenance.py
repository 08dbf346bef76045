"""What a run was made of: versions, upstream commits and applied patches."""
import hashlib
import json
import os
import platform
import sys
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List

from mapush import __version__
from mapush.pins import load_pins

# patches/apply writes one record per component here in the image (docker/Dockerfile).
DEFAULT_PATCH_RECORD_DIR = "/opt/mapush-env/patch-records"
_DISTRIBUTIONS = ("torch", "torchvision", "openrl", "gymnasium", "gym", "numpy", "isaacgym",
                  "jsonargparse", "harl", "tensorboard", "onnx", "onnxruntime")


def patch_record_dir() -> Path:
    return Path(os.environ.get("MAPUSH_PATCH_RECORDS", DEFAULT_PATCH_RECORD_DIR))


def patch_records() -> List[Dict[str, Any]]:
    """The records ``patches/apply`` wrote (one JSON per component), sorted by component."""
    folder = patch_record_dir()
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            records.append({"component": path.stem, "error": "unreadable record %s" % path})
    return records


def installed_versions() -> Dict[str, str]:
    """Installed versions of the stack's distributions, read from metadata (no imports)."""
    versions = {}
    for name in _DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def world(versions: Dict[str, Any]) -> str:
    """``stand-in`` where the recorded Isaac Gym is the tests' stand-in (tests/standin,
    make try, make image-check), else ``isaacgym``: what a run's numbers come from."""
    return "stand-in" if "stand" in str(versions.get("isaacgym", "")) else "isaacgym"


def world_note() -> str:
    """What a run's TensorBoard text says of the Isaac Gym its numbers come from."""
    version = installed_versions().get("isaacgym", "(not installed)")
    if world({"isaacgym": version}) == "stand-in":
        return ("Isaac Gym: the tests' stand-in %s (no PhysX): no number of this run is a "
                "result of MAPush" % version)
    return "Isaac Gym %s" % version


# What a complete record holds (docker/check_stack.py checks the same stack in the image).
PIN_KEYS = ("MAPUSH_COMMIT", "HARL_COMMIT", "OPENRL_VERSION", "TORCH_VERSION",
            "ISAACGYM_VERSION", "PYTHON_VERSION")
RECORDED_VERSIONS = ("torch", "openrl", "gym", "numpy", "isaacgym", "harl")
PATCH_COMPONENTS = ("openrl", "harl", "mapush")


def gaps(record: Dict[str, Any]) -> List[str]:
    """What the record lacks, one phrase each: an empty list means complete."""
    missing = []  # type: List[str]
    if not record.get("stack"):
        missing.append("stack (MAPUSH_STACK is unset: the image sets it)")
    pins = record.get("pins") or {}
    if not pins:
        missing.append("pins (no pins.env: reinstall mapush-env from its source tree)")
    else:
        missing += ["pin %s" % key for key in PIN_KEYS if not pins.get(key)]
    versions = record.get("versions") or {}
    missing += ["version of %s (not installed as a distribution)" % name
                for name in RECORDED_VERSIONS if name not in versions]
    recorded = {r.get("component"): r for r in record.get("patches") or []}
    for component in PATCH_COMPONENTS:
        entry = recorded.get(component)
        if entry is None:
            missing.append("patch record of %s (none in %s; set MAPUSH_PATCH_RECORDS)"
                           % (component, patch_record_dir()))
        elif entry.get("error"):
            missing.append("patch record of %s (%s)" % (component, entry["error"]))
    return missing


def provenance() -> Dict[str, Any]:
    """The record, with ``incomplete`` listing what it lacks (empty when complete)."""
    record = {
        "mapush_env": __version__,
        # the image's stack (cu116 or cu121; docker/Dockerfile sets it)
        "stack": os.environ.get("MAPUSH_STACK"),
        "python": platform.python_version(),
        "executable": sys.executable,
        "pins": load_pins(),
        "versions": installed_versions(),
        "patches": patch_records(),
        "mapush_root": os.environ.get("MAPUSH_ROOT", "/opt/mapush"),
        "contact_pairs_multiplier_env": os.environ.get("MAPUSH_CONTACT_PAIRS_MULTIPLIER"),
        # the GPUs this run was given (a sweep cell gets exactly one)
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }  # type: Dict[str, Any]
    record["incomplete"] = gaps(record)
    return record


def warn_if_incomplete(record: Dict[str, Any], where: str) -> None:
    """One stderr line when the record could not be completed: never quietly partial. Each
    set of gaps is told once per user (a mark under $XDG_CACHE_HOME/mapush), not on every
    command; every run's config.json still lists them under provenance.incomplete."""
    missing = record.get("incomplete") or []
    if not missing:
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    mark = cache / "mapush" / "incomplete-stack" / hashlib.sha256(
        "\n".join(sorted(missing)).encode()).hexdigest()[:16]
    if mark.exists():
        return
    print("mapush: warning: %s records an incomplete stack (see provenance.incomplete): "
          "missing %s (said once; every run records it)" % (where, "; ".join(missing)),
          file=sys.stderr, flush=True)
    with suppress(OSError):  # an unwritable home: the warning comes again next time
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
