"""``mapush train --resume RUN``: the run continued with everything its ``config.json`` recorded."""
import argparse
import json
from pathlib import Path
from typing import Any, Dict, Optional, Set, Tuple

import yaml

from mapush.checkpoints.source import RUN_CONFIG, resolve, resolve_resume
from mapush.common.hashing import sha256
from mapush.errors import UsageError
from mapush.run.ranks import ranks_from_args
from mapush.spec import RunSpec

# options of `mapush train` that --resume may change: {option: (argparse dest, spec field)}
ADJUSTABLE = {"--steps": ("steps", "steps"), "--sim-device": ("sim_device", "sim_device"),
              "--rl-device": ("rl_device", "rl_device"),
              "--checkpoint-interval": ("checkpoint_interval", "checkpoint_interval"),
              "--wandb": ("wandb", "use_wandb"), "--record-video": ("record_video", "record_video")}
# options that never touch the record (how the command runs, not what it trains)
NEUTRAL = ("--no-preflight", "--resume", "--spec", "--verbose", "--print-config")


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` already holds a run (its record or its checkpoints)."""
    folder = Path(folder)
    return (folder / RUN_CONFIG).exists() or (folder / "checkpoints").exists()


def _same_path(a: Optional[str], b: Optional[str]) -> bool:
    if a is None or b is None:
        return a is b
    return Path(a).resolve() == Path(b).resolve()


def _sha(path: Optional[str]) -> Optional[str]:
    return sha256(path) if path and Path(path).is_file() else None


def _yaml(path: Optional[str]) -> Any:
    if not path or not Path(path).is_file():
        return None
    return yaml.safe_load(Path(path).read_text()) or {}


def _compare(option: str, recorded: Any, given: Any, shown: Any = None) -> None:
    if recorded != given:
        raise UsageError("%s: the run was recorded with %s, this command gives %s; --resume "
                         "continues the run as recorded: drop %s (or start a new run)"
                         % (option, _show(recorded), _show(shown if shown is not None
                                                             else given), option))


def _show(value: Any) -> str:
    return "(none)" if value is None else repr(value) if isinstance(value, str) else str(value)


def recorded_spec(record: Dict[str, Any], run_dir: Path) -> RunSpec:
    """The record's spec, its copies of the object config and ``--config`` found in
    ``run_dir`` (a run moved or copied elsewhere, or seen from inside the container, still
    reads its own files)."""
    spec = RunSpec.from_dict(record["spec"])
    for key, field in (("object_config", "object_config"), ("config_override", "config")):
        copy = (record.get(key) or {}).get("copy")
        if copy and getattr(spec, field):
            spec = spec.with_changes(**{field: str((Path(run_dir) / copy).resolve())})
    return spec.with_changes(run_dir=str(run_dir))


def check_against_record(args: argparse.Namespace, given: Set[str], record: Dict[str, Any],
                         spec: RunSpec, run_dir: Path) -> None:
    """Every identity option given with ``--resume`` must equal the record (``spec``: its
    :func:`recorded_spec`)."""
    plain = {"--algo": "algo", "--task": "task", "--num-envs": "num_envs", "--seed": "seed",
             "--object": "object"}
    for option, field in plain.items():
        if option in given:
            _compare(option, getattr(spec, field), getattr(args, field))
    if "--run-dir" in given and not _same_path(str(run_dir), args.run_dir):
        _compare("--run-dir", str(run_dir), str(args.run_dir))
    if "--object-config" in given and _sha(args.object_config) != _sha(spec.object_config):
        _compare("--object-config", (record.get("object_config") or {}).get("source"),
                 args.object_config)
    if "--config" in given and _yaml(args.config) != _yaml(spec.config):
        _compare("--config", (record.get("config_override") or {}).get("source", spec.config),
                 args.config)
    if "--command-net" in given:
        from mapush.checkpoints.command_net import command_net_from_args

        net = command_net_from_args(argparse.Namespace(**dict(vars(args), task=spec.task,
                                                              algo=spec.algo)))
        if not _same_path(net, spec.command_net) and _sha(net) != _sha(spec.command_net):
            _compare("--command-net", spec.command_net, net, args.command_net)
    if "--init-from" in given:
        init_from = str(resolve(args.init_from, "--init-from").resolve())
        if not _same_path(init_from, spec.init_from):
            _compare("--init-from", spec.init_from, init_from, args.init_from)
    if "--set" in given:  # the run's overrides.yaml holds what --set gave it
        _compare("--set", "its overrides.yaml", " ".join(args.set))
    if {"--ranks", "--gpus"} & given:  # the world size stays; the GPUs may be others
        ranks, _gpus = ranks_from_args(argparse.Namespace(**dict(
            vars(args), algo=spec.algo, sim_device=spec.sim_device, rl_device=spec.rl_device)))
        if ranks != spec.ranks:
            raise UsageError("--resume %s trained across %d rank(s); it continues across as "
                             "many (%s)" % (run_dir, spec.ranks, "pass --gpus with %d GPUs"
                                            % spec.ranks if spec.gpus else "--ranks %d"
                                            % spec.ranks))
    checked = {"--run-dir", "--object-config", "--config", "--command-net", "--init-from",
               "--set", "--ranks", "--gpus"}
    unknown = sorted(given - set(plain) - checked - set(ADJUSTABLE) - set(NEUTRAL))
    if unknown:  # pragma: no cover - a new option of `mapush train` must be classified here
        raise UsageError("%s: not known to --resume (mapush.run.resume)" % ", ".join(unknown))


def resume_spec(args: argparse.Namespace, given: Set[str]) -> Tuple[RunSpec, Dict[str, Any]]:
    """The spec that continues ``--resume``'s run, and the run's record."""
    run_dir, checkpoint, _meta = resolve_resume(args.resume)
    try:
        record = json.loads((Path(run_dir) / RUN_CONFIG).read_text())
        spec = recorded_spec(record, run_dir)
    except (OSError, ValueError, KeyError, TypeError, UsageError) as exc:
        raise UsageError("--resume %s: the run's %s is damaged or not mapush train's (%s): "
                         "restore it from a backup" % (run_dir, RUN_CONFIG, exc))
    check_against_record(args, given, record, spec, run_dir)
    for path, what in ((spec.config, "--config copy"), (spec.object_config, "object config")):
        if path and not Path(path).is_file():
            raise UsageError("--resume %s: the run's %s %s is gone: the run cannot continue "
                             "as recorded" % (args.resume, what, path))
    changes = {field: getattr(args, dest)
               for option, (dest, field) in ADJUSTABLE.items() if option in given}
    if "--gpus" in given:
        changes["gpus"] = ranks_from_args(argparse.Namespace(**dict(
            vars(args), algo=spec.algo, sim_device="cuda:0", rl_device="cuda:0")))[1]
    # a target already reached is refused with the trainer's own count of what is left
    # (mapush.run.train.check_spec)
    return spec.with_changes(resume=str(checkpoint) if checkpoint else None, **changes), record
