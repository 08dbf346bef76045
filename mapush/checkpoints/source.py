"""Which checkpoint a path means, and what it was trained on: ours or the authors'."""
import json
import re
from contextlib import suppress
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from mapush.common.files import read_regular
from mapush.errors import UsageError
from mapush.schema import flat
from mapush.registry import DEFAULT_ALGO
from mapush.objects import read_object_name
from mapush.checkpoints.policy import HARL_ACTOR, MODULE_FILE
from mapush.checkpoints.store import checkpoints_dir, latest_checkpoint, list_checkpoints, \
    passed_over, read_meta, refuse_damaged

RUN_CONFIG = "config.json"
OVERRIDES = "overrides.yaml"  # the run's copy of --config and --set (OpenRL reads only *.yaml)
OBJECT_CONFIG = Path("task") / "config.py"  # the run's object config, as upstream keeps it
APPLIED = Path("task") / "applied.json"  # that config as the env got it, --set task.* applied
SUCCESS_FILE = "success_rate.txt"
_UPSTREAM_NAME = re.compile(r"^rl_model_(\d+)_steps$")


def refuse_inside_run(option: str, out: Path, own: Optional[Path]) -> None:
    """A reader's ``--out`` may lie in the run it reads (``own``), never in another run,
    whose record and checkpoints it would replace (#36)."""
    for parent in [out.resolve()] + list(out.resolve().parents):
        if (parent / RUN_CONFIG).is_file() and (own is None or parent != own.resolve()):
            raise UsageError("%s %s is inside the run %s; write into the run it reads or "
                             "outside any run" % (option, out, parent))


def is_upstream_run(path: Path) -> bool:
    """An authors' results folder: checkpoints named ``rl_model_<N>_steps`` holding a
    ``module.pt``, and no ``config.json`` of ours."""
    path = Path(path)
    return (path.is_dir() and not (path / RUN_CONFIG).is_file()
            and bool(upstream_checkpoints(path)))


def upstream_checkpoints(run: Path) -> List[Tuple[int, Path]]:
    """``(step, folder)`` of an authors' results folder, oldest first; the step is the
    ``<N>`` of ``rl_model_<N>_steps``."""
    root = checkpoints_dir(Path(run))
    found = []
    if root.is_dir():
        for path in root.iterdir():
            match = _UPSTREAM_NAME.match(path.name)
            if match and (path / MODULE_FILE).is_file() and read_meta(path) is None:
                found.append((int(match.group(1)), path))
    return sorted(found)


def run_checkpoints(run: Path) -> List[Tuple[Optional[int], Path]]:
    """``(step, folder)`` of every complete checkpoint of a run, ours or the authors'."""
    if is_upstream_run(run):
        return [(step, path) for step, path in upstream_checkpoints(run)]
    return [(step, path) for step, path, meta in list_checkpoints(run)
            if not passed_over(path, meta, "skipped")]


def resolve_resume(target: str) -> Tuple[Path, Optional[Path], Dict[str, Any]]:
    """``--resume RUN_DIR_OR_CHECKPOINT`` -> ``(run_dir, checkpoint or None, meta)``
    (docs/architecture.md, "Modules")."""
    path = Path(target)
    if not path.exists():
        raise UsageError("--resume %s: no such run directory or checkpoint" % target)
    if is_upstream_run(path) or is_upstream_run(path.parent.parent):
        raise UsageError("--resume %s is an authors' results folder, not a run of ours: "
                         "--resume continues our runs; start a new run from its weights "
                         "with --init-from %s" % (target, target))
    meta = read_meta(path) if path.is_dir() else None
    if meta is not None:
        return path.parent.parent, refuse_damaged(path, meta, "--resume"), meta
    if path.is_dir() and (path / RUN_CONFIG).is_file():
        latest = latest_checkpoint(path)
        return (path, latest[1], latest[2]) if latest else (path, None, {})
    raise UsageError("--resume %s: not a run directory (config.json) nor a complete checkpoint"
                     " (meta.json); pass a run directory or one of its checkpoints/ folders"
                     % target)


def resolve(target: str, what: str) -> Path:
    """A checkpoint folder (or file) from ``target``: a checkpoint folder, its ``module.pt``,
    our run directory or an authors' results folder (their newest checkpoint)."""
    path = Path(target)
    if not path.exists():
        raise UsageError("%s %s: no such checkpoint folder or file" % (what, target))
    if path.is_file():
        return path.parent if path.name == MODULE_FILE else path
    if read_meta(path) is not None or (path / MODULE_FILE).is_file() or \
            (path / HARL_ACTOR).is_file():
        return refuse_damaged(path, read_meta(path) or {}, what)
    if (path / RUN_CONFIG).is_file():
        latest = latest_checkpoint(path)
        if latest is None:
            raise UsageError("%s %s: the run has no complete checkpoint in %s"
                             % (what, target, checkpoints_dir(path)))
        return latest[1]
    if is_upstream_run(path):
        return upstream_checkpoints(path)[-1][1]
    raise UsageError("%s %s: not a checkpoint (no meta.json or %s), nor a run directory (no "
                     "config.json), nor an authors' results folder (no checkpoints/"
                     "rl_model_<N>_steps/)" % (what, target, MODULE_FILE))


def describe(checkpoint: Path, obj: Optional[str] = None,
             object_config: Optional[str] = None) -> Dict[str, Any]:
    """What rebuilds the checkpoint's env: algo, task, object, the object config and the
    run's ``--config``. ``obj`` / ``object_config`` (the command line) win; otherwise they
    come from the checkpoint's run; never silently a default object."""
    checkpoint = Path(checkpoint)
    meta = read_meta(checkpoint) or {}
    folder = checkpoint if checkpoint.is_dir() else checkpoint.parent
    run = folder.parent.parent if folder.parent.name == "checkpoints" else None
    run_spec = {}  # type: Dict[str, Any]
    if run is not None and (run / RUN_CONFIG).is_file():
        try:
            run_spec = json.loads((run / RUN_CONFIG).read_text()).get("spec", {}) or {}
        except ValueError:
            run_spec = {}
    step = meta.get("step")
    origin = "ours" if (meta or run_spec) else "upstream"
    match = _UPSTREAM_NAME.match(checkpoint.name)
    if step is None and match:
        step = int(match.group(1))
    run_object_config = run / OBJECT_CONFIG if run is not None else None
    if object_config is None and run_object_config is not None and run_object_config.is_file():
        named = read_object_name(run_object_config)
        if obj is None or named in (None, obj):  # --object naming another: its own config
            object_config = str(run_object_config.resolve())
    name = obj or meta.get("object") or run_spec.get("object")
    if not name and object_config:
        name = read_object_name(Path(object_config))
    if not name:
        raise UsageError("%s: cannot tell which object it was trained on (no config.json or "
                         "meta.json of ours, no %s beside its checkpoints/ naming the object's "
                         "URDF): pass --object" % (checkpoint, OBJECT_CONFIG))
    return {
        "checkpoint": str(checkpoint), "step": step, "origin": origin,
        "algo": meta.get("algo") or run_spec.get("algo") or DEFAULT_ALGO,
        "task": meta.get("task") or run_spec.get("task") or "go1push_mid",
        "trained_task": meta.get("task") or run_spec.get("task"),
        "object": name, "object_config": object_config, "config": run_spec.get("config"),
        "command_net": run_spec.get("command_net"), "task_sets": run_spec.get("task_sets"),
    }


# -- the authors' calculator output -----------------------------------------------------
_LOADED = re.compile(r"Loaded checkpoint from:\s*\S*rl_model_(\d+)_steps")
_FIGURES = (("success_rate", "success rate"), ("finished_time", "finished time"),
            ("collision_degree", "collision degree"),
            ("collaboration_degree", "collaboration degree"))


def parse_success_rate(text: str) -> Dict[int, Dict[str, float]]:
    """``{step: {figure: value}}`` of the authors' ``success_rate.txt``
    (docs/architecture.md, "Modules")."""
    table = {}  # type: Dict[int, Dict[str, float]]
    step = None  # type: Optional[int]
    for line in text.splitlines():
        loaded = _LOADED.search(line)
        if loaded:
            step = int(loaded.group(1))
            table[step] = {}
            continue
        if step is None:
            continue
        for key, label in _FIGURES:
            if line.strip().startswith(label + ":") and key not in table[step]:
                with suppress(ValueError):
                    table[step][key] = float(line.split(":", 1)[1])
    return {s: figures for s, figures in table.items() if "success_rate" in figures}


def run_settings(run: Path, spec: Dict[str, Any]) -> Dict[str, str]:
    """What a run changed, ``{key: value as JSON}`` sorted: its trainer settings over the
    shipped config (``--config`` and ``--set``, as its overrides.yaml holds them), then its
    ``--set task.*`` (config.json's ``spec.task_sets``) as ``task.KEY``."""
    try:
        tree = yaml.safe_load(read_regular(Path(run) / OVERRIDES))
    except (OSError, ValueError, yaml.YAMLError):
        tree = None
    trainer = {key: value for key, value in flat(tree).items() if not isinstance(value, dict)} \
        if isinstance(tree, dict) else {}
    trainer.update(("task." + k, v) for k, v in (spec.get("task_sets") or {}).items())
    return {key: json.dumps(value) for key, value in sorted(trainer.items())}
