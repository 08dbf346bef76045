"""``mapush export``: a checkpoint as a self-contained policy, TorchScript and ONNX."""
import argparse
import importlib.util
import inspect
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import yaml

from mapush.checkpoints.command_net import resolve_command_net
from mapush.checkpoints.policy import checkpoint_sha256, kind, load_module, module_path
from mapush.checkpoints.source import RUN_CONFIG, describe, refuse_inside_run, resolve
from mapush.common import outputs
from mapush.common.files import read_regular
from mapush.common.atomic import write_bytes, write_json, write_text
from mapush.common.hashing import sha256
from mapush.diagnostics.doctor import require_devices
from mapush.errors import MapushError, UsageError
from mapush.objects import check_object_name, mapush_root
from mapush.proc import Supervisor, signal_name
from mapush.provenance import provenance
from mapush.spec import MID, UPPER, UPPER_OBJECT, UPPER_OBS_DIM
from mapush.registry import by_library

HERE = Path(__file__).resolve().parent
LAYOUT = yaml.safe_load((HERE / "export_layout.yaml").read_text())
TOLERANCE, SAMPLES = 1e-5, 1000
Net = Tuple[Any, Callable[[Any], Any]]  # (obs -> action module, the checkpoint's own act)


def _wrap(net: Any) -> Any:
    """OpenRL's PolicyNetwork and HARL's StochasticPolicy alike: ``base`` then
    ``act(features, None, deterministic=True)``."""
    if hasattr(net, "rnn") or getattr(net, "_mixed_obs", 0) or getattr(net, "_use_influence_policy", 0):
        raise UsageError("a recurrent or mixed-input policy cannot be exported as obs -> action")

    class Deterministic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base, self.act = net.base, net.act

        def forward(self, obs: Any) -> Any:
            return self.act(self.base(obs), None, True)[0]

    return Deterministic().eval()


def _net(net: Any, act: Callable[..., Any], rnn: Tuple[int, ...]) -> Net:
    """OpenRL's ``module.act`` and HARL's ``actor.act`` take the same positional arguments."""
    return _wrap(net), lambda obs: act(obs, np.zeros((len(obs),) + rnn, np.float32), np.ones(
        (len(obs), 1), np.float32), None, deterministic=True)[0]


def _openrl(file: Path) -> Net:
    module = load_module(file, "cpu", "--checkpoint", lenient=True)  # no Isaac Gym needed
    return _net(module.models["policy"], module.act, (1, module.models["policy"].hidden_size))


def _harl(folder: Path) -> List[Net]:
    from mapush.trainers.harl_trainer import harl_actors

    actors, model = harl_actors(folder, "cpu")
    rnn = (int(model["recurrent_n"]), int(model["hidden_sizes"][-1]))
    return [_net(actor.actor, actor.act, rnn) for actor in actors]


def _write(name: str, pair: Net, formats: str, folder: Path, seed: int,
           seen: Any) -> Dict[str, Any]:
    """``name.pt``/``.onnx``, loaded back and checked on random and rollout (``seen``) obs."""
    net, reference = pair
    obs_dim = next(m for m in net.modules() if isinstance(m, torch.nn.Linear)).in_features
    rollout = seen.reshape(-1, obs_dim).astype(np.float32) if not isinstance(seen, str) else \
        np.zeros((0, obs_dim), np.float32)
    obs = np.concatenate([np.random.RandomState(seed).standard_normal(
        (SAMPLES, obs_dim)).astype(np.float32), rollout])
    with torch.no_grad():
        expected = torch.as_tensor(reference(obs)).cpu().numpy()
        example, produced = torch.zeros(2, obs_dim), {}  # type: Any, Dict[str, Any]
        if formats in ("torchscript", "both"):
            # through memory: on a full disk torch's zip writer aborts the process
            buffer = io.BytesIO()
            torch.jit.save(torch.jit.trace(net, example), buffer)
            write_bytes(folder / (name + ".pt"), buffer.getvalue())
            loaded = torch.jit.load(str(folder / (name + ".pt")))
            produced[name + ".pt"] = loaded(torch.from_numpy(obs)).numpy()
    if formats in ("onnx", "both"):
        import onnxruntime  # checked by plan()
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters \
            else {}  # torch >= 2.9 defaults to the dynamo exporter
        buffer = io.BytesIO()
        torch.onnx.export(net, example, buffer, input_names=["obs"], output_names=["action"],
                          opset_version=13, dynamic_axes={"obs": {0: "batch"},
                                                          "action": {0: "batch"}}, **legacy)
        write_bytes(folder / (name + ".onnx"), buffer.getvalue())
        session = onnxruntime.InferenceSession(str(folder / (name + ".onnx")),
                                               providers=["CPUExecutionProvider"])
        produced[name + ".onnx"] = session.run(None, {"obs": obs})[0]
    # relative to each observation's largest action above 1: float32 keeps ~7 digits of the
    # hidden layer all actions share (docs/export.md); one scale for every file
    files, scale = {}, 1 + np.abs(expected).max(axis=1, keepdims=True)
    for file, actions in produced.items():
        excess = float((np.abs(actions - expected) - TOLERANCE * scale).max())
        if not excess <= 0:
            raise MapushError("%s: its actions miss the checkpoint's by %.3g beyond the "
                              "tolerance; nothing was exported" % (file, excess))
        files[file] = {"sha256": sha256(folder / file),
                       "max_abs_error": float(np.abs(actions - expected).max())}
    return {"obs_dim": obs_dim, "action_dim": int(expected.shape[1]), "files": files,
            "parity": {"observations": SAMPLES, "of": "standard normal, seed %d" % seed,
                       "rollout": len(rollout) if len(rollout) else seen,
                       "tolerance": "|a - b| <= %g * (1 + max |b| of its row)" % TOLERANCE}}


def _rows(rows: List[List[str]], prefix: str = "", note: str = "") -> List[Dict[str, str]]:
    return [{"name": prefix + n, "unit": u, "meaning": m + note} for n, u, m in rows]


def _cited(spec: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    return dict({k: v for k, v in spec.items() if k != "sources"}, **extra,
                source=[s["cite"] for s in spec["sources"]])


def layout(task: str, obs_dim: int) -> Dict[str, Any]:
    """What each observation and action index of ``task``'s policy means."""
    spec, agents = LAYOUT[task], (obs_dim - 2) // 3
    rows = _rows(spec["observation"])
    for k in range(1, agents if task == MID else 1):
        rows += _rows(spec["other"], "other%d_" % k, " (agent (i - %d) mod %d)" % (k, agents))
    return _cited({k: v for k, v in spec.items() if k != "other"}, observation=rows,
                  action=dict(spec["action"], names=_rows(spec["action"]["names"])))


STOOD_IN = "STANDIN.json"  # a tree prepared for the stand-in lists the files it stood in


def _locomotion(folder: Path) -> Dict[str, Any]:
    """The locomotion files, copied; a file the tree's STANDIN.json lists (with its sha256)
    as stood in is said to be the stand-in's, never walk-these-ways."""
    spec = LAYOUT["locomotion"]
    source, files = mapush_root() / spec["folder"], {}  # type: Path, Dict[str, Any]
    try:
        mark = json.loads(read_regular(mapush_root() / STOOD_IN))
    except (OSError, ValueError):
        mark = {}
    (folder / "locomotion").mkdir()
    for name in spec["files"]:
        if (source / name).is_file():
            shutil.copy2(str(source / name), str(folder / "locomotion" / name))
            files[name] = {"sha256": sha256(folder / "locomotion" / name)}
            rel = "%s/%s" % (spec["folder"], name)
            if rel in (mark.get("stood_in") or {}) and \
                    (mark.get("sha256") or {}).get(rel) == files[name]["sha256"]:
                files[name]["stand_in"] = mark["stood_in"][rel]
        else:
            files[name] = {"missing": str(source / name)}
            print("mapush export: warning: %s is missing; the export lacks it (MAPUSH_ROOT=%s%s)"
                  % (source / name, mapush_root(), "" if "MAPUSH_ROOT" in os.environ else
                     ", the image's: set MAPUSH_ROOT to your MAPush checkout"), file=sys.stderr)
    stood_in = [name for name, f in files.items() if "stand_in" in f]
    return _cited(spec, files=files, **({"stand_in": "%s: the Isaac Gym stand-in's, not "
                                         "walk-these-ways" % ", ".join(stood_in)}
                                        if stood_in else {}))


class Stopped(Exception):
    """SIGINT/SIGTERM during an export: it ends with nothing written (its scratch removed)."""


def _check(sup: Optional[Supervisor]) -> None:
    if sup is not None and sup.stopping:
        raise Stopped()


def _rollout(checkpoint: Path, task: str, args: argparse.Namespace,
             sup: Optional[Supervisor] = None) -> Any:
    """What the policy sees in a short evaluation rollout (``mapush eval``'s child), or why
    there is none: no simulation here, or an object the checkpoint does not name."""
    from mapush.eval import describe_checkpoint, evaluate

    if importlib.util.find_spec("isaacgym") is None:
        return "no simulation here (Isaac Gym is not installed)"
    require_devices(args.sim_device, args.rl_device)  # one line, before a simulation
    options = argparse.Namespace(task=task, object=args.object, object_config=None, seed=0,
                                 command_net=None, num_envs=4, sim_device=args.sim_device,
                                 rl_device=args.rl_device)
    try:
        info = describe_checkpoint(checkpoint, options)
    except UsageError as exc:
        return "no rollout: %s" % exc
    with tempfile.TemporaryDirectory(prefix="mapush-export-") as folder:
        info["observations"] = str(Path(folder) / "obs.npy")
        code, _result, last = evaluate(info, options, sup=sup)
        _check(sup)
        if code != 0:
            raise MapushError("the rollout for the parity check failed: %s" % last)
        return np.load(info["observations"])


def is_export(folder: Path) -> bool:
    """A previous result of ``mapush export``: its own manifest, policy.json."""
    try:
        record = json.loads((folder / "policy.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {"networks", "exported_with", "source"} <= set(record)


def plan(args: argparse.Namespace) -> Tuple[Path, Path, Any]:
    """``(checkpoint, out, run or None)``; every bad input is refused here, before a write."""
    if args.object is not None:  # as eval refuses it: before the rollout (#77)
        check_object_name(args.object)
    checkpoint = resolve(args.run or args.checkpoint, "--run" if args.run else "--checkpoint")
    folder = checkpoint if checkpoint.is_dir() else checkpoint.parent
    run = folder.parent.parent if (folder.parent.parent / RUN_CONFIG).is_file() else None
    name = checkpoint.stem if checkpoint.is_file() else folder.name
    out = Path(args.out) if args.out else (run or Path("runs")) / "export" / name
    refuse_inside_run("--out", out, run)
    outputs.refuse_foreign(out, is_export, "mapush export", run, manifest=True)  # its own
    if args.format != "torchscript" and importlib.util.find_spec("onnxruntime") is None:
        raise UsageError("--format %s needs onnxruntime: pip install '.[export]'" % args.format)
    return checkpoint, out, run


def export(args: argparse.Namespace, sup: Optional[Supervisor] = None) -> Dict[str, Any]:
    checkpoint, out, run = plan(args)
    library = kind(checkpoint)
    nets = [("agent%d" % i, n) for i, n in enumerate(_harl(checkpoint))] if library == "harl" \
        else [("policy", _openrl(module_path(checkpoint)))]
    obs_dim = next(m for m in nets[0][1][0].modules() if hasattr(m, "in_features")).in_features
    task = UPPER if obs_dim == UPPER_OBS_DIM else MID
    try:
        source = describe(checkpoint, args.object)
    except UsageError:  # a bare policy file (a goals net, a command net) records nothing
        source = {"object": args.object or (UPPER_OBJECT if task == UPPER else None)}
    if task == UPPER:
        command_net = Path(resolve_command_net(source.get("command_net")))
        nets.append(("command_net", _openrl(module_path(command_net))))
    seen = _rollout(checkpoint, task, args, sup)
    _check(sup)
    with outputs.scratch_beside(out) as partial:
        views = [seen if isinstance(seen, str) or library != "harl" else seen[:, :, i]
                 for i in range(len(nets))]
        if task == UPPER:
            views[-1] = "the upper wrapper keeps the command net's observations inside"
        networks = {}
        for seed, (name, net) in enumerate(nets):
            networks[name] = _write(name, net, args.format, partial, seed, views[seed])
            _check(sup)
        record = {
            "task": task, "object": source.get("object") or "unknown: pass --object",
            "agents": len(nets) if library == "harl" else 2 if task == UPPER else (obs_dim - 2) // 3,
            "algo": source.get("algo", by_library(library).algos[0]), "library": library,
            "source": {"checkpoint": str(checkpoint.resolve()), "run": str(run) if run else None,
                       "sha256": checkpoint_sha256(checkpoint)},
            "exported_with": provenance(), "networks": networks,
            "layout": layout(task, obs_dim), "control": _cited(LAYOUT["control"]),
            "locomotion": _locomotion(partial)}
        if task == UPPER:
            record["chain"] = _cited(LAYOUT["chain"], command_net=str(command_net),
                                     layout=layout(MID, networks["command_net"]["obs_dim"]))
        write_json(partial / "policy.json", record)
        write_text(partial / "README.md", (HERE / "templates" / "export_README.md").read_text()
                   .format(task=task, object=record["object"], first=nets[0][0], obs=obs_dim,
                           locomotion="walk-these-ways" if "stand_in" not in record["locomotion"]
                           else "**not walk-these-ways** but the Isaac Gym stand-in's body (%s)"
                           % record["locomotion"]["stand_in"].split(":")[0],
                           period=LAYOUT["control"]["period_s"], chain=LAYOUT["chain"]["readme"]
                           if task == UPPER else ""))
        _check(sup)
        outputs.replace(partial, out, is_export, "mapush export")
    return dict(record, out=str(out))


def main(args: argparse.Namespace) -> int:
    with Supervisor("mapush export", "the export stops; nothing is written") as sup:
        try:
            result = export(args, sup)
        except Stopped:
            print("mapush export: stopped by %s; nothing written" % signal_name(sup.stop_signal),
                  file=sys.stderr)
            return 130
    print(json.dumps({"out": result["out"], "task": result["task"], "files": sorted(
        f for n in result["networks"].values() for f in n["files"])}))
    return 0
