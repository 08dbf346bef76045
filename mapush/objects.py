"""Find MAPush and its object tasks without importing it. (docs/architecture.md, "Modules")."""
import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from mapush.errors import UsageError

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


def check_object_name(name: str) -> None:
    """An ``--object`` that names no object under MAPUSH_ROOT: one line listing those found."""
    objects = find_objects() or list(KNOWN_OBJECTS)
    if name not in objects:
        raise UsageError("argument --object: unknown object %r; objects found: %s"
                         % (name, ", ".join(objects)))


def object_config_path(name: str, root: Optional[Path] = None) -> Path:
    return (root or mapush_root()) / "task" / name / "config.py"


@dataclass(frozen=True)
class ObjectFacts:
    """What an object's config fixes about each env (``go1_push_mid_wrapper.py`` and
    ``mqe/envs/npc/go1_object.py`` at the pin read the same settings)."""
    num_agents: int                 # env.num_agents: 2 cuboid/Tblock, 3 cylinder (line 10)
    num_obs: int = 0                # env.num_obs: obstacles, upper task only (getattr(.., 0))
    general_dist: bool = False      # goal.general_dist: one more obs dim
    target_collides: bool = False   # asset._npc_collision: the target area is an illusion
    final_target: bool = False      # asset.file_npc_final: the upper task's final target actor
    final_target_collides: bool = False
    obstacles_collide: bool = True  # asset.obs_npc_collision

    @property
    def obs_dim(self) -> int:
        """Per-agent obs: target xy, box xy and yaw, then x, y, yaw of each other robot
        (``go1_push_mid_wrapper.py:53-57``: ``2 + 3 * num_agents``, 3 + with general_dist)."""
        return (3 if self.general_dist else 2) + 3 * self.num_agents

    @property
    def actors(self) -> int:
        """Actors per env: robots, the object, the target area, the final target, obstacles
        (``mqe/envs/npc/go1_object.py:95-120``)."""
        return self.num_agents + 2 + int(self.final_target) + self.num_obs

    @classmethod
    def from_settings(cls, get: Any) -> "ObjectFacts":
        """From ``get(section, name, default)``."""
        return cls(num_agents=int(get("env", "num_agents", 0)),
                   num_obs=int(get("env", "num_obs", 0) or 0),
                   general_dist=bool(get("goal", "general_dist", False)),
                   target_collides=bool(get("asset", "_npc_collision", False)),
                   final_target=get("asset", "file_npc_final", None) is not None,
                   final_target_collides=bool(get("asset", "npc_collision_final", False)),
                   obstacles_collide=bool(get("asset", "obs_npc_collision", True)))

    @classmethod
    def from_config(cls, cfg: Any) -> "ObjectFacts":
        """From a loaded config class (or instance)."""
        return cls.from_settings(lambda section, name, default: getattr(
            getattr(cfg, section, None), name, default))


class ConfigReadError(ValueError):
    """The object config cannot be read without importing it."""


def _class_settings(node: ast.ClassDef) -> Dict[str, Any]:
    """Literal settings of a class body, in order; a later one may use an earlier one
    (``num_npcs = 3 + num_obs``)."""
    scope = {}  # type: Dict[str, Any]
    for stmt in node.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        try:
            scope[stmt.targets[0].id] = _evaluate(stmt.value, scope)
        except ValueError:
            continue  # not a literal (e.g. merge_dict(...)): not a fact we read
    return scope


def _evaluate(node: ast.AST, scope: Dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in scope:
        return scope[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _evaluate(node.left, scope), _evaluate(node.right, scope)
        if isinstance(node.op, ast.Add):
            return left + right
        return left - right if isinstance(node.op, ast.Sub) else left * right
    return ast.literal_eval(node)


def read_object_facts(path: Path) -> ObjectFacts:
    """:class:`ObjectFacts` of an object config file, parsed, not imported. Settings the
    file does not make take upstream's ``getattr`` defaults; ``env.num_agents`` must be
    there (every object config at the pin sets it)."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, SyntaxError) as exc:
        raise ConfigReadError("cannot read object config %s: %s" % (path, exc))
    top = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    cfg = next((n for n in top if n.name.startswith("Go1Push")), top[-1] if top else None)
    if cfg is None:
        raise ConfigReadError("object config %s defines no config class" % path)
    sections = {n.name: _class_settings(n) for n in cfg.body if isinstance(n, ast.ClassDef)}
    if not isinstance(sections.get("env", {}).get("num_agents"), int):
        raise ConfigReadError("object config %s: no literal env.num_agents in class %s"
                              % (path, cfg.name))
    return ObjectFacts.from_settings(
        lambda section, name, default: sections.get(section, {}).get(name, default))


def object_facts(name: str, root: Optional[Path] = None) -> ObjectFacts:
    return read_object_facts(object_config_path(name, root))


_OBJECT_ASSET = re.compile(r"resources/objects/([^/]+)/")


def read_object_name(path: Path) -> Optional[str]:
    """The object an object config is for, from the URDF it loads; None if unsaid
    (docs/architecture.md, "Modules")."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "file_npc"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            match = _OBJECT_ASSET.search(node.value.value)
            if match:
                return match.group(1)
    return None


def objects_with_obs_dim(dim: int, root: Optional[Path] = None) -> List[str]:
    """The objects under MAPUSH_ROOT whose env has this per-agent obs dim."""
    fits = []
    for name in find_objects(root):
        try:
            if object_facts(name, root).obs_dim == int(dim):
                fits.append(name)
        except ConfigReadError:
            continue
    return fits
