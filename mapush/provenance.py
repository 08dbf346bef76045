"""What a run was made of: versions, upstream commits and applied patches.

Recorded in every run's ``config.json`` so that a result can be traced to its exact stack.
"""
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Dict, List

from mapush import __version__
from mapush.pins import load_pins

# patches/apply writes one record per component here in the image (docker/Dockerfile).
DEFAULT_PATCH_RECORD_DIR = "/opt/mapush-env/patch-records"
_DISTRIBUTIONS = ("torch", "torchvision", "openrl", "gymnasium", "gym", "numpy", "isaacgym",
                  "jsonargparse", "harl", "tensorboard")


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
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return {}
    versions = {}
    for name in _DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def provenance() -> Dict[str, Any]:
    return {
        "mapush_env": __version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "pins": load_pins(),
        "versions": installed_versions(),
        "patches": patch_records(),
        "mapush_root": os.environ.get("MAPUSH_ROOT", "/opt/mapush"),
        "contact_pairs_multiplier_env": os.environ.get("MAPUSH_CONTACT_PAIRS_MULTIPLIER"),
    }
