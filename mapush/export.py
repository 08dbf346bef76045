"""``mapush export``: a checkpoint as a self-contained policy, TorchScript and ONNX.

The policy is what ``mapush eval`` acts with: the network's deterministic action (the mean
of its Gaussian, OpenRL's and HARL's ``act(..., deterministic=True)``), obs ``(batch, dim)``
in, action out, any input normalisation (OpenRL's and HARL's feature LayerNorm) inside.
Each file is checked against the source network on 1,000 random observations before the
folder appears (atomically); ``policy.json`` says what every number means
(``export_layout.yaml``, cited at the pin), and the locomotion policy rides along.
"""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from mapush import __version__
from mapush.checkpoints.command_net import resolve_command_net
from mapush.checkpoints.policy import HARL_ACTOR, checkpoint_sha256, kind, load_module, \
    module_path
from mapush.checkpoints.source import RUN_CONFIG, describe, resolve
from mapush.common.atomic import write_json, write_text
from mapush.common.hashing import sha256
from mapush.errors import MapushError, UsageError
from mapush.objects import mapush_root
from mapush.spec import MID, UPPER, UPPER_OBJECT, UPPER_OBS_DIM

EXPORT_DIR = "export"
TOLERANCE = 1e-5
SAMPLES = 1000
LAYOUT = yaml.safe_load((Path(__file__).parent / "export_layout.yaml").read_text())
HARL_CONFIG = "harl_config.json"


def _wrap(net: Any) -> Any:
    """``obs -> deterministic action`` of an OpenRL PolicyNetwork or a HARL
    StochasticPolicy: both are ``base`` then ``act(features, None, True)``."""
    import torch

    if any(getattr(net, flag, False) for flag in (
            "_use_recurrent_policy", "_use_naive_recurrent_policy", "_use_influence_policy",
            "_mixed_obs", "use_recurrent_policy", "use_naive_recurrent_policy")):
        raise UsageError("a recurrent or mixed-input policy cannot be exported as obs -> action")

    class Deterministic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base, self.act = net.base, net.act

        def forward(self, obs: Any) -> Any:
            return self.act(self.base(obs), None, True)[0]

    return Deterministic().eval()


def _openrl(file: Path) -> Tuple[Any, Any]:
    import numpy as np
    import torch

    module = load_module(file, "cpu", "--checkpoint", lenient=True)

    def reference(obs: Any) -> Any:
        n = obs.shape[0]
        rnn = np.zeros((n, 1, module.models["policy"].hidden_size), np.float32)
        with torch.no_grad():
            return module.act(obs, rnn, np.ones((n, 1), np.float32), deterministic=True)[0]

    return _wrap(module.models["policy"]), reference


def _harl(folder: Path) -> List[Tuple[Any, Any]]:
    import numpy as np
    import torch
    from gym import spaces
    from harl.algorithms.actors import ALGO_REGISTRY

    found = [c for c in (folder / HARL_CONFIG, folder.parent.parent / HARL_CONFIG) if c.is_file()]
    if not found:
        raise UsageError("--checkpoint %s: a HARL checkpoint without its run's %s; export it "
                         "from its run folder (--run RUN)" % (folder, HARL_CONFIG))
    config = json.loads(found[0].read_text())
    args = dict(config["algo_args"]["model"], **config["algo_args"]["algo"])
    out = []
    for i in range(len(list(folder.glob("actor_agent*.pt")))):
        state = torch.load(str(folder / ("actor_agent%d.pt" % i)), map_location="cpu")
        obs_dim = next(t.shape[1] for n, t in state.items() if n.endswith("weight") and t.dim() == 2)
        act_dim = next(t.shape[0] for n, t in state.items() if n.endswith("fc_mean.weight"))
        actor = ALGO_REGISTRY[config["main_args"]["algo"]](
            args, spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
            spaces.Box(-1.0, 1.0, (act_dim,), np.float32), device=torch.device("cpu"))
        actor.actor.load_state_dict(state)
        actor.prep_rollout()

        def reference(obs: Any, actor: Any = actor) -> Any:
            rnn = np.zeros((obs.shape[0], int(args["recurrent_n"]), int(args["hidden_sizes"][-1])),
                           np.float32)
            with torch.no_grad():
                return actor.act(obs, rnn, np.ones((obs.shape[0], 1), np.float32), None,
                                 deterministic=True)[0]

        out.append((_wrap(actor.actor), reference))
    return out


def _write(name: str, net: Any, reference: Any, formats: List[str], folder: Path,
           seed: int) -> Dict[str, Any]:
    """``name.pt`` / ``name.onnx`` of ``net``, each checked against ``reference``."""
    import inspect

    import numpy as np
    import torch

    obs_dim = int(next(m for m in net.modules() if isinstance(m, torch.nn.Linear)).in_features)
    obs = np.random.RandomState(seed).standard_normal((SAMPLES, obs_dim)).astype(np.float32)
    expected = np.asarray(torch.as_tensor(reference(obs)).cpu(), np.float32)
    example = torch.zeros(2, obs_dim)
    produced = {}  # type: Dict[str, Any]
    if "torchscript" in formats:
        with torch.no_grad():
            torch.jit.save(torch.jit.trace(net, example), str(folder / (name + ".pt")))
        loaded = torch.jit.load(str(folder / (name + ".pt")))
        with torch.no_grad():
            produced[name + ".pt"] = loaded(torch.from_numpy(obs)).numpy()
    if "onnx" in formats:
        import onnxruntime

        kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters \
            else {}
        torch.onnx.export(net, example, str(folder / (name + ".onnx")), input_names=["obs"],
                          output_names=["action"], opset_version=17,
                          dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}}, **kwargs)
        session = onnxruntime.InferenceSession(str(folder / (name + ".onnx")),
                                               providers=["CPUExecutionProvider"])
        produced[name + ".onnx"] = session.run(None, {"obs": obs})[0]
    files = {}
    for file, actions in produced.items():
        # float32 keeps ~7 digits: an action of 100 differs by 1e-5 with any change of the
        # order of the sums, so the tolerance is relative beyond 1 (numpy's allclose)
        excess = float((np.abs(actions - expected) - TOLERANCE * (1 + np.abs(expected))).max())
        if not excess <= 0:
            raise MapushError("%s gives actions beyond the tolerance (%g, relative above 1) of "
                              "the checkpoint's by %.3g; nothing was exported"
                              % (file, TOLERANCE, excess))
        files[file] = {"sha256": sha256(folder / file),
                       "max_abs_error": float(np.abs(actions - expected).max())}
    return {"obs_dim": obs_dim, "action_dim": int(expected.shape[1]), "files": files,
            "parity": {"observations": SAMPLES, "distribution": "standard normal, seed %d" % seed,
                       "tolerance": "|a - b| <= %g * (1 + |b|)" % TOLERANCE}}


def mid_observation(agents: int) -> List[Dict[str, str]]:
    spec = LAYOUT["mid"]["observation"]
    rows = [{"name": n, "unit": u, "meaning": m} for n, u, m in spec["own"]]
    for k in range(1, agents):
        rows += [{"name": "other%d_%s" % (k, n), "unit": u,
                  "meaning": "%s (agent (i - %d) mod %d)" % (m, k, agents)}
                 for n, u, m in spec["other"]]
    return rows


def _layout(task: str, obs_dim: int) -> Dict[str, Any]:
    if task == UPPER:
        spec = LAYOUT["upper"]
        names = spec["observation"]["names"]
        return {"observation": [{"name": n, "unit": u, "meaning": m} for n, u, m in names],
                "observation_source": spec["observation"]["cite"],
                "action": {"names": [dict(zip(("name", "unit", "meaning"), r))
                                     for r in spec["action"]["names"]],
                           "clip": spec["action"]["clip"], "source": spec["action"]["cite"]}}
    spec = LAYOUT["mid"]
    act = spec["action"]
    return {"observation": mid_observation((obs_dim - 2) // 3),
            "observation_source": [spec["observation"]["cite"], spec["observation"]["other_cite"]],
            "action": {"names": [dict(zip(("name", "unit", "meaning"), r)) for r in act["names"]],
                       "clip": act["clip"], "scale": act["scale"],
                       "applied": "env action = clip(action, -1, 1) * scale",
                       "source": [act["clip_cite"], act["scale_cite"], act["cite"],
                                  act["command_cite"]]}}


def _locomotion(folder: Path) -> Dict[str, Any]:
    spec = LAYOUT["locomotion"]
    source = mapush_root() / spec["folder"]
    files = {}  # type: Dict[str, Any]
    (folder / "locomotion").mkdir()
    for name in spec["files"]:
        if (source / name).is_file():
            shutil.copy2(str(source / name), str(folder / "locomotion" / name))
            files[name] = {"sha256": sha256(folder / "locomotion" / name)}
        else:
            files[name] = {"missing": str(source / name)}
            print("mapush export: warning: %s is missing; the folder lacks the locomotion "
                  "policy's %s" % (source / name, name), file=sys.stderr)
    return {"files": files, "io": spec["io"], "sources": [spec["cite"], spec["body_cite"],
                                                          spec["history_cite"]],
            "frame": [{"slice": [a, b], "meaning": m, "source": c}
                      for a, b, m, c in spec["frame"]]}


def _versions() -> Dict[str, Optional[str]]:
    from importlib import import_module

    out = {"mapush": __version__}  # type: Dict[str, Optional[str]]
    for name in ("torch", "onnx", "onnxruntime", "openrl", "numpy"):
        try:
            out[name] = str(import_module(name).__version__)
        except Exception:  # noqa: BLE001 - not installed
            out[name] = None
    return out


def plan(args: argparse.Namespace) -> Tuple[Path, Path, Optional[Path]]:
    """``(checkpoint, out, run)``, every bad input refused before anything is written."""
    checkpoint = resolve(args.run or args.checkpoint, "--run" if args.run else "--checkpoint")
    if kind(checkpoint) is None:
        raise UsageError("--checkpoint %s: not a checkpoint (no module.pt, *.pt file or %s)"
                         % (checkpoint, HARL_ACTOR))
    folder = checkpoint if checkpoint.is_dir() else checkpoint.parent
    run = folder.parent.parent if (folder.parent.parent / RUN_CONFIG).is_file() else None
    name = checkpoint.stem if checkpoint.is_file() and checkpoint.name != "module.pt" \
        else folder.name
    out = Path(args.out) if args.out else (run / EXPORT_DIR / name if run
                                           else Path("runs") / EXPORT_DIR / name)
    for parent in [out.resolve()] + list(out.resolve().parents):
        if (parent / RUN_CONFIG).is_file() and (run is None or parent != run.resolve()):
            raise UsageError("--out %s is inside the run %s; export into the source's own "
                             "run or outside any run" % (args.out, parent))
    return checkpoint, out, run


def export(args: argparse.Namespace) -> Dict[str, Any]:
    checkpoint, out, run = plan(args)
    formats = ["torchscript", "onnx"] if args.format == "both" else [args.format]
    library = kind(checkpoint)
    if library == "harl":
        nets = [("agent%d" % i, pair) for i, pair in enumerate(_harl(checkpoint))]
    else:
        nets = [("policy", _openrl(module_path(checkpoint)))]
    obs_dim = int(next(m for m in nets[0][1][0].modules() if hasattr(m, "in_features")).in_features)
    try:
        source = describe(checkpoint, getattr(args, "object", None))
    except UsageError:  # a bare module.pt (a goals net, a command net): read its input
        source = {"task": UPPER if obs_dim == UPPER_OBS_DIM else MID, "object": None,
                  "algo": "ppo", "command_net": None}
    task = UPPER if obs_dim == UPPER_OBS_DIM else MID
    if task == UPPER:
        command_net = Path(resolve_command_net(source.get("command_net")))
        nets.append(("command_net", _openrl(module_path(command_net))))
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(str(partial), ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        exported = {name: _write(name, net, ref, formats, partial, seed)
                    for seed, (name, (net, ref)) in enumerate(nets)}
        control = LAYOUT["control"]
        record = {
            "task": task, "object": source.get("object") or (
                UPPER_OBJECT if task == UPPER else "unknown (not recorded with it)"),
            "agents": len(nets) if library == "harl" else (
                2 if task == UPPER else (obs_dim - 2) // 3),
            "algo": source.get("algo"), "library": library,
            "source": {"checkpoint": str(checkpoint.resolve()),
                       "sha256": checkpoint_sha256(checkpoint), "run": str(run) if run else None},
            "versions": _versions(), "networks": exported,
            "layout": _layout(task, obs_dim),
            "control_period_s": control["sim_dt"] * control["decimation"],
            "control_period_source": [control["sim_dt_cite"], control["decimation_cite"]],
            "locomotion": _locomotion(partial),
        }
        if task == UPPER:
            record["chain"] = {
                "command_net": str(command_net), "source": LAYOUT["upper"]["command_cite"],
                "how": "policy's action -> sub-goal (layout.action) -> the command net's target; "
                       "command_net's observation is the mid level's (%d values) with that "
                       "target; its action x 0.5, clipped to [-1, 1], then x the mid level's "
                       "scale 0.5 -> velocity commands" % exported["command_net"]["obs_dim"],
                "command_net_layout": _layout(MID, exported["command_net"]["obs_dim"])}
        write_json(partial / "policy.json", record)
        write_text(partial / "README.md", readme(record, nets[0][0]))
        if out.exists():
            shutil.rmtree(str(out))
        os.replace(str(partial), str(out))
    finally:
        shutil.rmtree(str(partial), ignore_errors=True)
    return dict(record, out=str(out))


def readme(record: Dict[str, Any], first: str) -> str:
    obs = record["networks"][first]["obs_dim"]
    return """# Exported policy ({task}, {object})

`{first}.onnx` (ONNX) and `{first}.pt` (TorchScript) map observations `(batch, {obs})` to
the deterministic action. `policy.json` says what each number means, the control period
({period} s), and the sha256 of every file; `locomotion/` holds walk-these-ways, which
turns the velocity command into joint targets.

```python
import numpy as np
import onnxruntime as ort

policy = ort.InferenceSession("{first}.onnx", providers=["CPUExecutionProvider"])


def observe():
    # build the observation as policy.json's layout.observation lists it
    return np.zeros((1, {obs}), np.float32)


for step in range(100):
    action = policy.run(None, {{"obs": observe()}})[0]
    command = np.clip(action, -1.0, 1.0)  # then x layout.action.scale, see policy.json
    print(step, command)
```

TorchScript: `torch.jit.load("{first}.pt")(torch.zeros(1, {obs}))`.
""".format(task=record["task"], object=record["object"], first=first, obs=obs,
           period=record["control_period_s"])


def main(args: argparse.Namespace) -> int:
    result = export(args)
    print(json.dumps({"out": result["out"], "task": result["task"],
                      "files": sorted(f for n in result["networks"].values() for f in n["files"])}))
    return 0
