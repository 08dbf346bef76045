"""``mapush doctor --check-step``: MQE's fast step (patches/mapush/06-09, their CUDA graphs
included) against upstream's step, on this machine's GPU with its real PhysX.

Three children (Isaac Gym allows one simulation per process) run the same seeded scenario:
A as shipped (the fast step, graphs on), B with ``mqe_fast_step`` false (upstream's step) and
C = B again, which measures PhysX's own run-to-run spread. Each records, every step, the
observations, rewards, dones, ``finished_buf``, the joints' positions and the robots' and
NPCs' root states. A passes where it equals B (within float32 rounding: RTOL, ATOL below)
wherever B equals C, and stays within B-C's spread where they part. The verdict, its cost
and A's graphs (which were captured) are printed and cached per machine (GPU, driver, torch,
image, patches), under ``MAPUSH_CACHE_DIR`` (default ``~/.cache/mapush``)."""
import contextlib
import fcntl
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mapush.common.atomic import write_json
from mapush.common.files import read_regular
from mapush.diagnostics.gpu import GpuFacts, device_index
from mapush.proc import Supervisor

ENVS, STEPS, SEED, ACTION_SEED = 64, 150, 3, 7
VARIANTS = (("A", True), ("B", False), ("C", False))  # (name, fast step)
TRACED = ("obs", "reward", "done", "finished", "dof_pos", "root_states", "root_states_npc")
CACHE_ENV = "MAPUSH_CACHE_DIR"
# "Equal": within float32 rounding. The fast step computes Isaac Gym's Euler angles eagerly
# (patch 07's get_euler_xyz_in_graph), while upstream's step calls Isaac Gym's TorchScript,
# which torch 1.13 fuses after its first calls: its own values then move by a few ulps
# (1.5e-6 rad at most, measured on the CPU; tests/test_real_mqe_equivalence.py). On torch 2
# over the stand-in the two are bit-identical (benchmarks/README.md); a wrong binding or a
# stale input differs by far more (1.2e-3 in the joints at step 3 on an H100).
RTOL, ATOL = 1e-5, 1e-6


# --------------------------------------------------------------------------- child
def trace(job: Dict[str, Any]) -> Dict[str, Any]:
    """One variant's run: ``job["steps"]`` steps from one seed with seeded actions (drawn on
    the CPU, then moved), each step's arrays into ``job["out"]`` (.npz)."""
    from mapush import sim

    sim.import_isaacgym()
    import numpy as np
    import torch

    from mapush.spec import MID, RunSpec
    from mapush.trainers import DEFAULT_ALGO

    spec = RunSpec(algo=DEFAULT_ALGO, task=MID, object=job["object"], num_envs=job["envs"], steps=1,
                   seed=SEED, run_dir=job["run_dir"], sim_device=job["device"],
                   rl_device=job["device"])
    env, _ = sim.make_env(spec, fast_step=job["fast_step"])
    inner = env.env
    gen = torch.Generator().manual_seed(ACTION_SEED)
    env.reset()
    found = {name: [] for name in TRACED}  # type: Dict[str, List[Any]]
    for _ in range(job["steps"]):
        action = torch.rand(job["envs"], env.num_agents, env.action_space.shape[0],
                            generator=gen) * 2 - 1
        obs, reward, done, _info = env.step(action.to(job["device"]))
        for name, value in (("obs", obs), ("reward", reward), ("done", done),
                            ("finished", inner.finished_buf), ("dof_pos", inner.dof_pos),
                            ("root_states", inner.root_states),
                            ("root_states_npc", inner.root_states_npc)):
            found[name].append(value.detach().cpu().numpy().copy())
    stacked = {name: np.stack(values) for name, values in found.items()}
    np.savez(job["out"], **stacked)
    return {"graphs": sim.graph_report(env), "resets": int(stacked["done"].sum())}


# --------------------------------------------------------------------------- parent
def machine(device: str, facts: Optional[GpuFacts]) -> Dict[str, Any]:
    """What the verdict holds for: the GPU of ``device``, the driver, torch."""
    index = device_index(device)
    dev = facts.device(index) if facts is not None and index is not None else None
    return {"gpu": dev.name if dev else device,
            "driver": facts.driver_version if facts else None,
            "torch": facts.torch_version if facts else None}


def machine_key(facts: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """The cache key of this machine and stack: GPU, driver, torch (whose TorchScript fuser
    decides Isaac Gym's rounding), image digest, patches applied."""
    from mapush.provenance import provenance

    patches = [{"component": p.get("component"), "patches": p.get("patches")}
               for p in provenance().get("patches", []) if isinstance(p, dict)]
    what = {"gpu": facts.get("gpu"), "driver": facts.get("driver"), "torch": facts.get("torch"),
            "image": os.environ.get("MAPUSH_IMAGE_DIGEST"), "patches": patches}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16], what


def cache_file(key: str) -> Path:
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mapush")
    return root / "step-check" / ("%s.json" % key)


def cached(key: str) -> Optional[Dict[str, Any]]:
    """This machine's verdict (passed or failed) from an earlier check; None when there is
    none or it cannot be read (the check then runs again)."""
    try:
        record = json.loads(read_regular(cache_file(key)))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("passed"), bool) \
        else None


@contextlib.contextmanager
def held(key: str) -> Iterator[None]:
    """One check of a machine at a time: runs that start together (a sweep's cells) wait for
    the first one's verdict instead of each running their own."""
    path = cache_file(key).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path), "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def compare(a: Dict[str, Any], b: Dict[str, Any], c: Dict[str, Any]) -> Dict[str, Any]:
    """A against B: equal wherever B equals C (PhysX repeated itself), and within the B-C
    spread of that array and step where it did not. The first step that fails, if any."""
    import numpy as np

    spread_steps, rounding = 0, 0.0
    for name in TRACED:
        for t in range(len(b[name])):
            ai, bi, ci = (np.asarray(x[name][t], dtype=np.float64) for x in (a, b, c))
            same = (bi == ci) | (np.isnan(bi) & np.isnan(ci))
            equal = np.isclose(ai, bi, rtol=RTOL, atol=ATOL, equal_nan=True)
            if not same.all():
                spread_steps += 1
            spread = float(np.nanmax(np.abs(bi - ci))) if not same.all() else 0.0
            off = ~equal & (same | (np.abs(ai - bi) > spread))
            if off.any():
                return {"array": name, "step": t, "elements": int(off.sum()),
                        "max_abs_diff": float(np.nanmax(np.abs(ai - bi)[off])),
                        "spread_steps": spread_steps}
            if equal.any():
                rounding = max(rounding, float(np.nanmax(np.abs(ai - bi)[equal], initial=0.0)))
    return {"array": None, "spread_steps": spread_steps, "max_abs_diff_within_rounding": rounding}


def run(device: str, facts: Dict[str, Any], obj: str = "cuboid", envs: int = ENVS,
        steps: int = STEPS) -> Dict[str, Any]:
    """The three children, their comparison, the verdict (cached)."""
    import numpy as np

    key, what = machine_key(facts)
    started = time.monotonic()
    results, traces = {}, {}
    with tempfile.TemporaryDirectory(prefix="mapush-step-check-") as tmp, \
            Supervisor("doctor --check-step", "stopping the check", grace_s=10) as sup:
        for name, fast in VARIANTS:
            job = {"object": obj, "envs": envs, "steps": steps, "device": device,
                   "fast_step": fast, "run_dir": tmp, "out": os.path.join(tmp, name + ".npz")}
            job_file = os.path.join(tmp, name + ".json")
            with open(job_file, "w") as fh:
                json.dump(job, fh)
            out_file = os.path.join(tmp, name + ".result.json")
            code = sup.wait(sup.start([sys.executable, "-m", "mapush.diagnostics.step_check",
                                       job_file, out_file]))
            if code != 0 or not os.path.isfile(out_file):
                return {"passed": None, "error": "child %s (%s) failed with status %d"
                        % (name, "fast step" if fast else "upstream's step", code)}
            results[name] = json.loads(Path(out_file).read_text())
            with np.load(job["out"]) as data:
                traces[name] = {k: data[k] for k in data.files}
    first = compare(traces["A"], traces["B"], traces["C"])
    record = {"passed": first["array"] is None, "first_difference": first
              if first["array"] else None, "graphs": results["A"]["graphs"],
              "resets": results["A"]["resets"], "envs": envs, "steps": steps, "object": obj,
              "device": device, "seconds": round(time.monotonic() - started, 1),
              "physx_repeats_itself": first["spread_steps"] == 0, "key": key,
              "max_abs_diff_within_rounding": first.get("max_abs_diff_within_rounding"),
              "tolerance": {"rtol": RTOL, "atol": ATOL},
              "machine": what, "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(cache_file(key), record)
    return record


def line(record: Dict[str, Any]) -> str:
    """The verdict in one line."""
    if record.get("passed") is None:
        return "could not run: %s" % record.get("error")
    graphs = record.get("graphs") or {}
    captured = [k for k, v in graphs.items() if v == "captured"]
    where = "graphs %s captured" % ", ".join(captured) if captured else \
        "no step graph captured"
    if record["passed"]:
        return ("the fast step equals upstream's over %d steps at %d envs (%s; %d episode "
                "ends) in %.0f s" % (record["steps"], record["envs"], where, record["resets"],
                                     record["seconds"]))
    diff = record["first_difference"]
    return ("the fast step differs from upstream's: %s at step %d (%d elements, by up to %.3g; "
            "%s)" % (diff["array"], diff["step"], diff["elements"], diff["max_abs_diff"], where))


if __name__ == "__main__":  # the child: python -m mapush.diagnostics.step_check JOB OUT
    from mapush.common.leave import leave

    job_spec = json.loads(Path(sys.argv[1]).read_text())
    write_json(sys.argv[2], trace(job_spec))
    sys.stdout.flush()
    sys.stderr.flush()
    leave(0)
