"""The one module that imports ``isaacgym`` and ``mqe``. (docs/architecture.md, "Modules")."""
import argparse
import contextlib
import difflib
import importlib.util
import inspect
import io
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from mapush import schema
from mapush.physx_budget import TaskBodies, for_sim
from mapush.errors import FIXES, ISAACGYM_HINT, MapushError, UsageError
from mapush.objects import ObjectFacts, find_objects, mapush_root, object_config_path
from mapush.common import phases
from mapush.spec import MID, TASK_SET, UPPER, RunSpec
from mapush.registry import check_owned


class MissingDependency(MapushError):
    exit_code = 3


def headless_figures(folder: Optional[Path]) -> None:
    """matplotlib never opens a window (the high level's RRT figures): the Agg backend;
    the figures go to ``folder``, none without one (patches/mapush/04)."""
    os.environ["MPLBACKEND"] = "Agg"
    if folder is not None:
        os.environ["MAPUSH_FIGURE_DIR"] = str(folder.resolve())
    else:
        os.environ.pop("MAPUSH_FIGURE_DIR", None)


def import_isaacgym() -> Any:
    """Import isaacgym (before torch, as it demands); a clear error when it is missing."""
    if "torch" in sys.modules and "isaacgym" not in sys.modules:
        raise MapushError("internal: torch was imported before isaacgym; Isaac Gym refuses "
                          "to load in that order")
    try:
        import isaacgym  # noqa: F401
    except ImportError as exc:
        raise MissingDependency("%s (%s)" % (ISAACGYM_HINT, exc))
    schema.quiet_imports()  # every child comes here first
    return sys.modules["isaacgym"]


def _import_mqe_utils() -> Any:
    root = str(mapush_root())
    if root not in sys.path:
        sys.path.append(root)
    try:
        from mqe.envs import utils as mqe_utils
    except ImportError as exc:
        raise MissingDependency("%s (%s)" % (FIXES["mqe"], exc))
    return mqe_utils


def load_object_config(obj: str, root: Optional[Path] = None, path: Optional[str] = None) -> type:
    """``Go1PushMidCfg`` of ``$MAPUSH_ROOT/task/<obj>/config.py`` (or of the file ``path``,
    ``--object-config``), loaded under a private module name: nothing under MAPUSH_ROOT is
    written, so runs of different objects can share one installation at the same time."""
    if path is not None:
        config_path = Path(path)
        if not config_path.is_file():
            raise UsageError("--object-config %s: no such file" % path)
    else:
        config_path = object_config_path(obj, root)
    if not config_path.is_file():
        found = find_objects(root) or ["none found"]
        raise UsageError("--object %s: no %s; objects found: %s"
                         % (obj, config_path, ", ".join(found)))
    name = "mapush_task_%s_config_%x" % (obj, abs(hash(str(config_path.resolve()))))
    spec = importlib.util.spec_from_file_location(name, str(config_path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # No __pycache__/*.pyc next to the object's config: nothing under MAPUSH_ROOT is written.
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        sys.dont_write_bytecode = dont_write
    cfg = getattr(module, "Go1PushMidCfg", None)
    if cfg is None:
        raise UsageError("--object %s: %s defines no Go1PushMidCfg" % (obj, config_path))
    return cfg


def resolve_relative_paths(cfg: type, root: Path) -> Dict[str, str]:
    """Make every ``"./..."`` setting of the config tree absolute under ``root``; returns
    ``{setting: new value}``. MQE loads its models by paths relative to the working directory
    (docs/upstream.md says which): so a run starts anywhere and writes nothing under root."""
    changed = {}  # type: Dict[str, str]
    seen = set()

    def walk(node: type, prefix: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for name in dir(node):
            if name.startswith("__"):
                continue
            value = getattr(node, name)
            if isinstance(value, str) and value.startswith("./"):
                resolved = str(Path(root).resolve() / value[2:])
                setattr(node, name, resolved)
                changed[prefix + name] = resolved
            elif inspect.isclass(value):
                walk(value, prefix + name + ".")

    walk(cfg, "")
    return changed


def build_args(spec: RunSpec, num_envs: Optional[int] = None) -> argparse.Namespace:
    """Upstream's argument namespace (``openrl_ws/utils.py:get_args``), from the spec."""
    from isaacgym import gymapi
    from isaacgym.gymutil import parse_device_str

    args = argparse.Namespace(
        task=spec.task, algo=spec.algo, resume=False, run_name=None, load_run=None,
        checkpoint=None, headless=True, horovod=False, rl_device=spec.rl_device,
        num_envs=num_envs if num_envs is not None else spec.num_envs,
        max_iterations=None, train_timesteps=spec.steps, use_wandb=spec.use_wandb,
        use_tensorboard=True, exp_name=spec.object, record_video=spec.record_video,
        hie=False, sim_device=spec.sim_device, pipeline="gpu", graphics_device_id=0,
        flex=False, physx=True, num_threads=0, subscenes=0, slices=0, actor_lr=3e-4,
        test_mode=None, seed=spec.seed, experiment_name=None,
    )
    args.hie = spec.task == UPPER  # openrl_ws/utils.py: --hie, the high level
    args.sim_device_type, args.compute_device_id = parse_device_str(args.sim_device)
    args.use_gpu_pipeline = args.sim_device_type == "cuda"
    if not args.use_gpu_pipeline:
        args.pipeline = "cpu"
    args.physics_engine = gymapi.SIM_PHYSX
    args.use_gpu = args.sim_device_type == "cuda"
    args.sim_device_id = args.compute_device_id
    if args.graphics_device_id != args.compute_device_id and args.use_gpu:
        args.graphics_device_id = args.compute_device_id
    return args


def _kind(value: Any) -> type:
    return bool if isinstance(value, bool) else float if isinstance(value, (int, float)) \
        else type(value)


def apply_task_sets(cfg: type, sets: Dict[str, Any]) -> None:
    """``--set task.KEY=VALUE`` on the task's config classes: KEY names a setting the
    config has (``env.episode_length_s``, ``rewards.scales.push_reward``), VALUE of its kind."""
    check_owned("task", {TASK_SET + key: value for key, value in sets.items()}, "--set")
    for key, value in sorted(sets.items()):
        parts, node = key.split("."), cfg
        for part in parts[:-1]:
            node = getattr(node, part, None)
        old = getattr(node, parts[-1], None) if inspect.isclass(node) else None
        if not inspect.isclass(node) or not hasattr(node, parts[-1]) or callable(old):
            near = difflib.get_close_matches(key, list(_setting_keys(cfg)), 1, 0.6)
            raise UsageError("--set task.%s: MQE's task config has no such setting%s; mapush "
                             "train --print-config shows them all"
                             % (key, " (nearest: task.%s)" % near[0] if near else ""))
        _check_like(key, old, value)
        setattr(node, parts[-1], value)


def _setting_keys(node: type, prefix: str = "") -> Iterator[str]:
    for name in dir(node):
        value = getattr(node, name)
        if inspect.isclass(value) and not name.startswith("__"):
            yield from _setting_keys(value, prefix + name + ".")
        elif not name.startswith("_") and not callable(value):
            yield prefix + name


def _check_like(key: str, old: Any, value: Any) -> None:
    """VALUE of the kind, finiteness and sign of MQE's default OLD (list items each): a
    positive setting stays positive, a negative one negative; a reward scale may be 0 (off)."""
    shown = json.dumps(value, default=str)[:60]
    if isinstance(old, (list, tuple)) and isinstance(value, (list, tuple)) and old:
        if len(value) != len(old):
            raise UsageError("--set task.%s=%s: that setting holds %d values, not %d"
                             % (key, shown, len(old), len(value)))
        for before, after in zip(old, value):
            _check_like(key, before, after)
        return
    if old is not None and _kind(old) != _kind(value):
        raise UsageError("--set task.%s=%s: that setting is a %s, not a %s"
                         % (key, shown, _kind(old).__name__, _kind(value).__name__))
    if _kind(old) is not float:
        return
    off = key.startswith("rewards.scales.")  # 0 turns a reward term off
    need = "a finite number" + ("" if not old else " %s 0" % (">" if old > 0 else "<")) + \
        (" or 0" if off and old else "")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int of 100,000 digits (Python 3.8 reads it)
        finite = False
    if not finite or (old > 0 and not (value > 0 or off and value == 0)) or \
            (old < 0 and not (value < 0 or off and value == 0)):
        raise UsageError("--set task.%s=%s: that setting must be %s (MQE's default: %s)"
                         % (key, shown, need, old))


def object_custom_cfg(spec: RunSpec, obj_cfg: Optional[type], args: argparse.Namespace,
                      contact_pairs: Optional[int] = None, resolve_paths: bool = False,
                      budget: bool = False) -> Callable[[type], type]:
    """The ``custom_cfg`` ``make_mqe_env`` applies: our object, env count, video, budget
    (docs/architecture.md, "Modules")."""

    def apply(installed_cfg: type) -> type:
        cfg = obj_cfg if obj_cfg is not None else installed_cfg
        apply_task_sets(cfg, spec.task_sets or {})
        if resolve_paths:
            resolve_relative_paths(cfg, mapush_root())
        if spec.command_net:  # loaded with torch.load in go1_push_upper_wrapper.py:127
            cfg.control.command_network_path = str(Path(spec.command_net).resolve())
        cfg.env.num_envs = args.num_envs
        cfg.env.record_video = args.record_video
        pairs = contact_pairs
        if pairs is None and budget:
            pairs = for_sim(spec, TaskBodies.of(ObjectFacts.from_config(cfg)), args.num_envs)
        if pairs is not None:
            cfg.sim.physx.max_gpu_contact_pairs = int(pairs)
        return cfg

    return apply


def task_config(spec: RunSpec) -> Dict[str, Any]:
    """The task's MQE config as the run's env gets it, ``--set task.*`` applied, as values."""
    import_isaacgym()
    mqe_utils = _import_mqe_utils()
    from mqe.utils.helpers import class_to_dict

    obj_cfg = load_object_config(spec.object, path=spec.object_config) \
        if spec.task == MID else None
    args = argparse.Namespace(num_envs=spec.num_envs, record_video=spec.record_video)
    cfg = object_custom_cfg(spec, obj_cfg, args)(mqe_utils.ENV_DICT[spec.task]["config"])
    return json.loads(json.dumps(class_to_dict(cfg), default=str))


class _PhaseGym(object):
    """Forwards to Isaac Gym's gym object and marks the phase of the calls that allocate
    (create_sim, terrain, envs, prepare_sim), so a crash inside PhysX can be placed."""

    _PHASE_OF = {
        "create_sim": "create_sim",
        "add_ground": "terrain", "add_heightfield": "terrain", "add_triangle_mesh": "terrain",
        "create_env": "envs",
        "prepare_sim": "prepare_sim",
    }

    def __init__(self, gym: Any) -> None:
        object.__setattr__(self, "_gym", gym)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._gym, name)
        phase = self._PHASE_OF.get(name)
        if phase is None:
            return attr

        def marked(*a: Any, **kw: Any) -> Any:
            phases.mark(phase)
            return attr(*a, **kw)

        return marked


def make_env(spec: RunSpec, num_envs: Optional[int] = None, contact_pairs: Optional[int] = None,
             fast_step: bool = True) -> Tuple[Any, Any]:
    """Create the MQE env of the spec: ``(env, env_cfg)`` as ``make_mqe_env`` returns them;
    ``fast_step`` False (the ``--config`` key ``mqe_fast_step``), or a spec whose step check
    failed (``spec.fast_step``), runs upstream's mid step."""
    import_isaacgym()
    from isaacgym import gymapi

    if not getattr(gymapi.acquire_gym, "_mapush_phase", False):  # once: gym objects mark phases
        original = gymapi.acquire_gym
        gymapi.acquire_gym = lambda *a, **kw: _PhaseGym(original(*a, **kw))
        gymapi.acquire_gym._mapush_phase = True  # type: ignore[attr-defined]
    mqe_utils = _import_mqe_utils()
    # The mid level runs the object's config; the high level MQE's installed upper config
    # (mqe/envs/configs/go1_push_upper_config.py), with the run's mid-level policy.
    obj_cfg = load_object_config(spec.object, path=spec.object_config) \
        if spec.task == MID else None
    args = build_args(spec, num_envs)
    env, env_cfg = mqe_utils.make_mqe_env(spec.task, args, custom_cfg=object_custom_cfg(
        spec, obj_cfg, args, contact_pairs, resolve_paths=True, budget=True))
    # the switch: on the wrappers (patches/mapush/06, 07, 10, 12) and MQE's env (08)
    if not (fast_step and spec.fast_step):
        for layer in (env, getattr(env, "env", None)):
            if "fast_step" in getattr(layer, "__dict__", {}):
                layer.fast_step = False
        print("mapush: mqe_fast_step is false: MQE's mid step as upstream ships it", file=sys.stderr)
    if spec.record_video and not schema.verbose():
        _quiet_recording(getattr(env, "env", env))
    return env, env_cfg


def _quiet_recording(inner: Any) -> None:
    """MQE's recording methods print on stdout ("Successfully store the video of last episode"
    at every reset of env 0, whether a film was made or not: legged_robot.py:1189-1211); the
    film mapush writes is said by mapush. They say it again with --verbose (#81)."""
    for name in ("start_recording", "pause_recording", "store_recording"):
        method = getattr(inner, name, None)
        if method is not None:
            setattr(inner, name, lambda *a, _method=method: _silent(_method, *a))


def _silent(method: Callable[..., Any], *args: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return method(*args)


# -- which of MQE's step graphs (patches/mapush/07-09, 12) this env replays ---------------
# the graphs: where each lives (a wrapper, or MQE's env under it), its attribute, and the
# wrapper's method it replays (07: the mid one's, 12: the high level's) or the env's method
# saying whether this task's path allows it (08: no pushed robots or sequential goals; 09)
GRAPHS = (("07", False, "_graph", "_step_tail"), ("12", False, "_graph", "_step_head"),
          ("08", True, "_core_graph", "_core_graph_allowed"),
          ("09", True, "_torques_graph", "_torques_graph_allowed"))


def _plain(failure: str) -> str:
    """``what failed (in which function)`` from a patch's record of a failed capture: its
    first line names the graph, the rest is the exception's traceback."""
    text = failure.partition("\n")[2]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    syncing = re.search(r"synchroniz|stream is capturing|not permitted", text, re.I)
    kind = "a host sync or copy inside the capture" if syncing else (lines or ["?"])[-1]
    script = text.partition("Traceback of TorchScript")[2]
    if script:  # the outermost TorchScript function (Isaac Gym's torch_utils, say)
        frames = re.findall(r", in (\w+)\s*$", script, re.M)[:1]
    else:  # the innermost frame in MQE's code
        frames = [name for path, name in re.findall(r'File "([^"]+)", line \d+, in (\w+)', text)
                  if "/mqe/" in path][-1:]
    return kind + (" (%s)" % frames[0] if frames else "")


def graph_report(env: Any) -> Dict[str, str]:
    """``{graph: state}`` of the patches' graphs in this env: ``captured``, ``waiting`` (not
    captured yet), ``eager: <why>`` or ``off: <what failed>``; a graph that is not in this
    tree or task (the high level has no mid wrapper) is left out."""
    report = {}
    for name, inner, attr, allowed in GRAPHS:
        layer = getattr(env, "env", None) if inner else env
        attrs = getattr(layer, "__dict__", {})
        if "graph_step" not in attrs or not (inner or hasattr(type(layer), allowed)):
            continue
        failure = attrs.get("_graph_failure")
        if attrs.get(attr) is not None:
            report[name] = "captured"
        elif not attrs.get("fast_step", True):
            report[name] = "eager: mqe_fast_step is false"
        elif failure:
            report[name] = "off: " + _plain(failure)
        elif not attrs["graph_step"]:
            report[name] = "eager: no CUDA graphs on the CPU pipeline"
        elif inner and not getattr(layer, allowed)():
            report[name] = "eager: this task's path is not capturable"
        else:
            report[name] = "waiting"
    return report

