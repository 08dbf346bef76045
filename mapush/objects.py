"""Find MAPush and its object tasks without importing it.

An object is a folder ``$MAPUSH_ROOT/task/<object>/`` holding ``config.py`` (which defines
``Go1PushMidCfg``). Listing them needs no Isaac Gym, so the CLI validates ``--object``
before anything heavy starts.
"""
import os
from pathlib import Path
from typing import List, Optional

DEFAULT_MAPUSH_ROOT = "/opt/mapush"
KNOWN_OBJECTS = ("cuboid", "Tblock", "cylinder")


def mapush_root() -> Path:
    return Path(os.environ.get("MAPUSH_ROOT", DEFAULT_MAPUSH_ROOT))


def find_objects(root: Optional[Path] = None) -> List[str]:
    """Object names with a ``task/<object>/config.py`` under the MAPush root."""
    task_dir = (root or mapush_root()) / "task"
    if not task_dir.is_dir():
        return []
    return sorted(p.parent.name for p in task_dir.glob("*/config.py"))


def object_config_path(name: str, root: Optional[Path] = None) -> Path:
    return (root or mapush_root()) / "task" / name / "config.py"
