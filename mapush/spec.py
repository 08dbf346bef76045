"""The run spec: every option of ``mapush train`` validated into one immutable record."""
import atexit
import json
import os
import re
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Type, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from typing_extensions import Annotated, Literal

from mapush.common.files import read_regular
from mapush.errors import UsageError
from mapush.schema import usage_error

MID, UPPER = "go1push_mid", "go1push_upper"
TASKS = (MID, UPPER)
DEFAULT_STEPS = 100_000_000
DEFAULT_CHECKPOINT_INTERVAL = 10_000_000
# The calculator's seed: upstream's test.py takes OpenRL's default seed, 0
# (openrl/configs/config.py:32), with which MQE's make_env seeds (mqe/utils/helpers.py:255;
# the published success_rate.txt files say "Setting seed: 0").
CALCULATOR_SEED = 0
# Envs, by what they are for (each default of every command is one of these):
# - training, by task: the mid level's `make train` default, and the high level as upstream
#   trains it (openrl_ws/train.py --num_envs 500; docs/upstream.md); the doctor sizes for the
#   mid level's;
# - MAPush's calculator (mapush eval, reproduce, a sweep's report): task/<object>/train.sh;
# - the smoke test: a handful.
TRAIN_NUM_ENVS = {MID: 200, UPPER: 500}
CALCULATOR_NUM_ENVS = 300
SMOKE_NUM_ENVS = 8
# The high level's observation: hard-coded for 2 robots and 2 obstacles
# (go1_push_upper_wrapper.py:89); the mid-level policy it drives takes 8 (line 291).
UPPER_OBS_DIM = 26
UPPER_MID_OBS_DIM = 8
# The object the high level pushes: MQE's upper config loads MiddleBox.urdf, a 1.2 x 1.2 x 0.5
# box (go1_push_upper_config.py:20), whatever the mid level pushed; of the objects, the
# cuboid is that box (task/cuboid/config.py:18, SmallBox.urdf: the same 1.2 x 1.2 x 0.5).
UPPER_OBJECT = "cuboid"


def check_upper_object(obj: str, object_config: Optional[str] = None) -> None:
    """The high level pushes the cuboid only: any other object, or an object config, is
    refused with the reason (a T-block policy driven on a box would measure nothing)."""
    if object_config:
        raise UsageError("--object-config %s: the high level (%s) builds its object from MQE's "
                         "upper config (MiddleBox.urdf, go1_push_upper_config.py:20), not "
                         "from an object config; leave --object-config out"
                         % (object_config, UPPER))
    if obj != UPPER_OBJECT:
        raise UsageError("--object %s: the high level (%s) pushes MQE's 1.2 x 1.2 box "
                         "(MiddleBox.urdf, go1_push_upper_config.py:20) whatever the mid level "
                         "pushed, so it runs on --object %s only; train the %s mid level "
                         "with `mapush train --object %s`" % (obj, UPPER, UPPER_OBJECT,
                                                              obj, obj))


DEVICE = r"^(cpu|cuda(:\d+)?)$"
Device = Annotated[str, Field(pattern=DEVICE, description="cpu, cuda or cuda:N")]
Count = Annotated[int, Field(ge=1)]
SpecT = TypeVar("SpecT", bound="SpecFile")


class SpecFile(BaseModel):
    """A spec as the file that crosses a process boundary: typed and checked by pydantic in
    strict mode (``"200"`` is no integer), immutable, JSON-ready, read back ignoring keys it
    does not know (a newer writer's, or a caller's extra facts)."""
    model_config = ConfigDict(frozen=True, strict=True, extra="ignore", allow_inf_nan=False)

    def to_dict(self) -> Dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls: Type[SpecT], data: Dict[str, Any], where: str = "spec",
                  options: bool = False) -> SpecT:
        """``data`` checked: a violation is one UsageError naming the key (as its option,
        ``--num-envs``, with ``options``), the value and the rule."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise usage_error(exc, where, options, {
                key: field.description for key, field in cls.model_fields.items()})

    @classmethod
    def check_fields(cls, values: Dict[str, Any], where: str) -> None:
        """The keys of ``values`` that are fields, checked as :meth:`from_dict` checks them."""
        known = {k: v for k, v in values.items() if k in cls.model_fields}
        _fields(cls, tuple(sorted(known))).from_dict(known, where)

    def with_changes(self: SpecT, **changes: Any) -> SpecT:
        return type(self).model_validate(dict(self.model_dump(), **changes))


@lru_cache(maxsize=None)
def _fields(cls: Any, names: Tuple[str, ...]) -> Any:
    return create_model(cls.__name__, __base__=SpecFile, **{
        name: (cls.model_fields[name].annotation, cls.model_fields[name]) for name in names})


class RunSpec(SpecFile):
    """Every option of ``mapush train``, typed and ranged: the one check of the command
    line, a ``--spec`` file and config.json's spec on ``--resume``."""
    algo: str
    task: Literal[MID, UPPER]  # type: ignore[valid-type]
    object: str = Field(min_length=1)
    num_envs: int = Field(ge=1, le=65536)
    steps: Count
    seed: int = Field(ge=0, lt=2 ** 32)  # numpy's range
    run_dir: str = Field(pattern=r"\S", description="a folder name (not blank)")
    sim_device: Device = "cuda:0"
    rl_device: Device = "cuda:0"
    resume: Optional[str] = None
    checkpoint_interval: Count = DEFAULT_CHECKPOINT_INTERVAL
    record_video: bool = False
    config: Optional[str] = None
    use_wandb: bool = False
    # The object config the env is built from (absolute; the run's own copy,
    # <run_dir>/task/config.py); None: $MAPUSH_ROOT/task/<object>/config.py.
    object_config: Optional[str] = None
    # A checkpoint whose policy and value weights start the run (a new run: fresh optimizer
    # and step count).
    init_from: Optional[str] = None
    # go1push_upper: the mid-level policy's module.pt the high level drives (absolute).
    command_net: Optional[str] = None
    # --set task.KEY=VALUE: {KEY: VALUE} set on the task's MQE config (mapush.sim).
    task_sets: Optional[Dict[str, Any]] = None
    # One run in ``ranks`` processes (torchrun; mapush.run.ranks): on the CPU over gloo, or
    # one rank a GPU of ``gpus`` over NCCL. A resume keeps them.
    ranks: int = Field(1, ge=1, le=64)
    gpus: Optional[List[int]] = None
    # False where this machine's step check failed (mapush.run.train.check_step): MQE's step
    # as upstream ships it, whatever the trainer config's mqe_fast_step says.
    fast_step: bool = True

    @property
    def trainer(self) -> str:
        """The library that trains ``algo`` (:mod:`mapush.registry`)."""
        from mapush.registry import for_algo

        return for_algo(self.algo).library


class EvalSpec(SpecFile):
    """What one evaluation child runs (``mapush eval``): a checkpoint, what rebuilds its
    env, and where figures and videos go."""
    checkpoint: str
    algo: str
    task: str
    object: str
    num_envs: int
    seed: int
    sim_device: str
    rl_device: str
    # What the simulation writes (the PhysX budget) goes here, never into the run it reads:
    # a folder of the parent's, which removes it however the child ended (mapush.eval).
    scratch: str
    step: Optional[int] = None
    origin: Optional[str] = None
    config: Optional[str] = None
    object_config: Optional[str] = None
    command_net: Optional[str] = None
    figures: Optional[str] = None
    video: Optional[Dict[str, Any]] = None
    progress: bool = False
    observations: Optional[str] = None  # mapush export: a short rollout's observations (.npy)
    task_sets: Optional[Dict[str, Any]] = None  # the run's --set task.* (RunSpec.task_sets)


def default_run_dir(task: str, obj: str, algo: str, seed: int, now: Optional[float] = None) -> str:
    """``runs/<task>/<object>/<algo>/seed<seed>-<YYYYmmdd-HHMMSS>`` (docs/cli.md)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return str(Path("runs") / task / obj / algo / ("seed%d-%s" % (seed, stamp)))


def parse_list(option: str, raw: Optional[str], kind: Any = str) -> List[Any]:
    """``1,2,3`` or ``1 2 3`` (Make passes words); empty or malformed: one UsageError."""
    words = [w for w in re.split(r"[,\s]+", (raw or "").strip()) if w]
    if not words:
        raise UsageError("%s: empty list; give values separated by commas, e.g. %s"
                         % (option, "1,2,3" if kind is int else "cuboid,Tblock"))
    values = []
    for word in words:
        try:
            values.append(kind(word))
        except ValueError:
            raise UsageError("%s: %r in %r is not %s" % (option, word, raw,
                                                        "an integer" if kind is int else kind))
        if kind is int and values[-1] < 0:
            raise UsageError("%s: %r is negative" % (option, word))
    if len(set(values)) != len(values):
        raise UsageError("%s: %r names a value twice" % (option, raw))
    return values


def check_path(option: str, path: Any) -> None:
    """A path Linux can hold: each part at most 255 bytes (NAME_MAX), the whole at most
    4,095 (PATH_MAX); else one UsageError before anything is created."""
    raw = os.fsencode(str(path))
    if len(raw) > 4095 or any(len(part) > 255 for part in raw.split(b"/")):
        raise UsageError("%s %s...: a name in it is longer than 255 bytes, or the whole longer "
                         "than 4,095: pass a shorter path" % (option, str(path)[:60]))


SET_PREFIX = "mapush-set-"  # the folder of the file --set writes (config_with_sets)


def config_label(config: Any) -> str:
    """How messages name a trainer config file: ``--config PATH``, or ``--set/--config`` for
    the file :func:`config_with_sets` wrote."""
    if Path(str(config)).parent.name.startswith(SET_PREFIX):
        return "--set/--config"
    return "--config %s" % config


def user_yaml(path: Any, what: str = "--config") -> Any:
    """A YAML file the user named, read as data only: a missing file, one that is not a
    regular file, not YAML, or YAML with a python tag is one UsageError naming it."""
    try:
        return yaml.safe_load(read_regular(path))
    except (OSError, ValueError) as exc:
        raise UsageError("%s %s: cannot be read (%s): name a readable YAML file"
                         % (what, path, getattr(exc, "strerror", None) or exc))
    except yaml.YAMLError as exc:  # python tags too (safe_load's ConstructorError)
        raise UsageError("%s %s: not YAML data (%s); python tags are never read"
                         % (what, path, " ".join(str(exc).split())[:200]))


TASK_SET = "task."  # --set task.KEY=VALUE: a setting of the task's MQE config, not the trainer's


def set_value(item: str) -> Any:
    """``--set KEY=VALUE``'s VALUE, as JSON, else YAML: ``1e-4``, ``true``, ``[1, 2]``, ``FP``."""
    text = item.partition("=")[2]
    try:
        return json.loads(text)
    except ValueError:
        try:
            return yaml.safe_load(text) if text.strip() else text
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int of >4300 digits
            raise UsageError("--set %r: its value is neither JSON nor YAML (%s); quote a "
                             "string, e.g. --set 'key=[1, 2]'" % (
                                 item[:80], " ".join(str(exc).split())[:120]))


def task_sets(sets: List[str]) -> Optional[Dict[str, Any]]:
    """``{KEY: VALUE}`` of the ``--set task.KEY=VALUE`` among ``sets`` (None: none);
    :func:`mapush.sim.apply_task_sets` checks each against the task's config."""
    found = {}
    for item in (item for item in sets if item.strip().startswith(TASK_SET)):
        key, sep, _ = item.partition("=")
        if not sep or not key.strip()[len(TASK_SET):]:
            raise UsageError("--set %r is not task.KEY=VALUE (e.g. --set task.env."
                             "episode_length_s=10)" % item)
        found[key.strip()[len(TASK_SET):]] = set_value(item)
    return found or None


def config_with_sets(algo: str, config: Optional[str], sets: List[str]) -> Optional[str]:
    """``--set KEY=VALUE`` over ``--config``'s YAML, as one file the run copies into its
    overrides.yaml. KEY is dotted into sections (a leading ``<algo>.`` is dropped); VALUE as
    :func:`set_value` reads it; ``task.*`` keys are :func:`task_sets`' (none else: ``config``)."""
    sets = [item for item in sets if not item.strip().startswith(TASK_SET)]
    if not sets:
        return config
    merged = (user_yaml(config) or {}) if config else {}
    for item in sets:
        key, sep, _ = item.partition("=")
        parts = [part for part in key.strip().split(".") if part]
        parts = parts[1:] if parts[:1] == [algo] and len(parts) > 1 else parts
        node = merged
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else None
        if not sep or not parts or not isinstance(node, dict):
            raise UsageError("--set %r is not KEY=VALUE into the config's sections (e.g. --set "
                             "lr=1e-4, --set env.state_type=FP)" % item)
        node[parts[-1]] = set_value(item)
    folder = tempfile.mkdtemp(prefix=SET_PREFIX)
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / "set-and-config.yaml"  # OpenRL reads only *.yaml
    path.write_text(yaml.safe_dump(merged))
    return str(path)
