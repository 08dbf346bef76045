"""The trainer registry: the one answer to "which library trains this algorithm". A trainer
is a module of :mod:`mapush.trainers` with ``train``, ``load_policy`` and ``init_weights``, and one (the same, or
a light one) with ``planned_updates`` and ``resolved_config`` (docs/architecture.md, "Adding a
trainer"). Nothing here imports a training library: the parent stays light."""
import importlib
from pathlib import Path
from typing import Any, NamedTuple, Tuple

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


def episode_length(algo: str) -> int:
    """Steps per env in one update of the shipped config of ``algo`` (``episode_length``,
    top level in OpenRL's ppo.yaml, under ``train`` in HARL's)."""
    config = yaml.safe_load((CONFIG_DIR / ("%s.yaml" % algo)).read_text()) or {}
    return int(config.get("episode_length") or config["train"]["episode_length"])


# The config key that runs MQE's step as upstream ships it instead of the fast step
# (patches/mapush/06-12): top level in OpenRL's ppo.yaml, under ``env`` in HARL's configs.
FAST_STEP_KEY = {"openrl": "mqe_fast_step", "harl": "env.mqe_fast_step"}
_MISSING = object()


def config_value(algo: str, config: Any, key: str) -> Any:
    """The dotted ``key`` of a run's trainer config: from ``config`` (the run's --config and
    --set YAML) where it sets it, else from the shipped configs/<algo>.yaml; None if neither."""
    sources = ([Path(config)] if config else []) + [CONFIG_DIR / ("%s.yaml" % algo)]
    for source in sources:
        node = yaml.safe_load(source.read_text()) or {}  # type: Any
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
