"""The trainer registry: the one answer to "which library trains this algorithm". A trainer
is a module of :mod:`mapush.trainers` with ``train``, ``load_policy`` and ``init_weights``,
and one (the same, or a light one) with ``planned_updates`` and ``resolved_config``
(docs/architecture.md, "Adding a trainer"). Nothing here imports a training library: the
parent stays light."""
import functools
import importlib
from pathlib import Path
from typing import Any, Dict, NamedTuple, Tuple

import yaml

from mapush.errors import UsageError
from mapush.schema import SCHEMA

CONFIG_DIR = Path(__file__).resolve().parent / "trainers" / "configs"


class Trainer(NamedTuple):
    library: str            # recorded as config.json's spec.trainer and checkpoint meta
    module: str             # the module that trains
    algos: Tuple[str, ...]  # its algorithms: --algo, configs/<algo>.yaml
    label: str              # in messages: "an OpenRL PPO checkpoint"
    teams: bool             # trains several agents (no single centralized agent)
    checks: str = ""        # the light module of the parent's checks, if not ``module``


TRAINERS = (
    Trainer("openrl", "mapush.trainers.openrl_trainer", ("ppo",), "OpenRL PPO", False,
            "mapush.trainers.openrl_config"),
    Trainer("harl", "mapush.trainers.harl_trainer", ("happo", "mappo", "hatrpo"), "HARL", True),
)
ALGOS = tuple(algo for trainer in TRAINERS for algo in trainer.algos)
# What trains across ranks (--gpus, --ranks): patches/openrl/05 and harl/06 pool the batch
RANKED_ALGOS = ("ppo", "happo", "mappo")
# MAPush's own recipe: the default algorithm, the one the hierarchy and the pipeline train.
DEFAULT_ALGO = ALGOS[0]


def for_algo(algo: str) -> Trainer:
    for trainer in TRAINERS:
        if algo in trainer.algos:
            return trainer
    raise UsageError("--algo %s: not one of %s" % (algo, ", ".join(ALGOS)))


def by_library(library: str) -> Trainer:
    return next(t for t in TRAINERS if t.library == library)


def load(algo: str, checks: bool = False) -> Any:
    """The trainer module of ``algo``, or with ``checks`` its config checks' (no torch)."""
    trainer = for_algo(algo)
    return importlib.import_module(checks and trainer.checks or trainer.module)


def shipped_config(algo: str) -> Dict[str, Any]:
    """configs/<algo>.yaml as the run starts from it: one that names ``based_on: OTHER`` is
    OTHER's with its keys set over it, less the dotted keys of its ``remove:`` list."""
    config = yaml.safe_load((CONFIG_DIR / ("%s.yaml" % algo)).read_text()) or {}
    base = config.pop("based_on", None)
    if base is None:
        return config
    merged = shipped_config(base)
    for key in config.pop("remove", []):
        parts = key.split(".")
        del functools.reduce(dict.__getitem__, parts[:-1], merged)[parts[-1]]
    return _over(merged, config)


def _over(base: Dict[str, Any], top: Dict[str, Any]) -> Dict[str, Any]:
    for key, value in top.items():
        base[key] = _over(base.get(key, {}), value) if isinstance(value, dict) else value
    return base


def episode_length(algo: str) -> int:
    """Steps per env in one update of the shipped config of ``algo`` (``episode_length``,
    top level in OpenRL's ppo.yaml, under ``train`` in HARL's)."""
    config = shipped_config(algo)
    return int(config.get("episode_length") or config["train"]["episode_length"])


# The config key that runs MQE's step as upstream ships it instead of the fast step
# (patches/mapush/06-12): top level in OpenRL's ppo.yaml, under ``env`` in HARL's configs.
FAST_STEP_KEY = {"openrl": "mqe_fast_step", "harl": "env.mqe_fast_step"}
_MISSING = object()


def config_value(algo: str, config: Any, key: str) -> Any:
    """The dotted ``key`` of a run's trainer config: from ``config`` (the run's --config and
    --set YAML) where it sets it, else from the shipped configs/<algo>.yaml; None if neither."""
    for node in ([yaml.safe_load(Path(config).read_text())] if config else []) + [
            shipped_config(algo)]:  # type: Any
        for part in key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            return node
    return None


# Config keys that mapush decides ({library or "task": {key: what decides it}}): schema.yaml
OWNED_KEYS = SCHEMA["owned"]


def check_owned(library: str, flat_config: Any, label: str) -> None:
    """A user config that sets a key of :data:`OWNED_KEYS`: one UsageError naming it."""
    for key, decider in OWNED_KEYS[library].items():
        if key in flat_config:
            raise UsageError("%s sets %s, which mapush decides from %s: leave it out%s"
                             % (label, key, decider, " and pass %s" % decider.split()[0]
                                if decider.startswith("--") else ""))
