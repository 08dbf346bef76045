"""``mapush doctor --check-step [--task T]``: one level's fast step (patches/mapush/06-12, its
CUDA graphs: 07 or 12, 08, 09) against upstream's step, on this GPU with its real PhysX.

Three children (Isaac Gym allows one simulation per process) run the same seeded scenario:
A as shipped (the fast step, graphs on), B with ``mqe_fast_step`` false (upstream's step) and
C = B again, which measures PhysX's own run-to-run spread. Each records, every step, the
observations, rewards, dones, ``finished_buf``, the joints' positions and the robots' and
NPCs' root states. A passes where it equals B (within float32 rounding: RTOL, ATOL below)
wherever B equals C, and stays within B-C's spread where they part. The verdict, its cost
and A's graphs (which were captured) are printed and cached per machine (GPU, driver, torch,
image, patches, level), under ``MAPUSH_CACHE_DIR`` (default ``~/.cache/mapush``)."""
import contextlib
import fcntl
import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mapush.common.atomic import write_json
from mapush.common.files import read_regular
from mapush.diagnostics.gpu import GpuFacts, device_index
from mapush.proc import Supervisor
from mapush.spec import MID, UPPER, UPPER_OBJECT

ENVS, STEPS, SEED, ACTION_SEED = 64, 150, 3, 7
VARIANTS = (("A", True), ("B", False), ("C", False))  # (name, fast step)
TRACED = ("obs", "reward", "done", "finished", "dof_pos", "root_states", "root_states_npc")
CACHE_ENV = "MAPUSH_CACHE_DIR"
# The verdict's schema: a cached verdict of another version (or none) is ignored and redone.
VERDICT_VERSION = 2
# "Equal": within float32 rounding. The fast step computes Isaac Gym's Euler angles eagerly
# (patch 07's get_euler_xyz_in_graph), while upstream's step calls Isaac Gym's TorchScript,
# which torch 1.13 fuses after its first calls: its own values then move by a few ulps
# (1.5e-6 rad at most, measured on the CPU; tests/test_real_mqe_equivalence.py). On torch 2
# over the stand-in the two are bit-identical (benchmarks/README.md); a wrong binding or a
# stale input differs by far more (1.2e-3 in the joints at step 3 on an H100).
RTOL, ATOL = 1e-5, 1e-6


# --------------------------------------------------------------------------- child
# In A, the first replays of each captured graph also run its region eagerly on the same
# state (cloned first, restored after) and the two results are compared: a stale input or a
# race shows there whatever PhysX does. The RNG state is restored too, so A's run is the
# run it would have been without the check. 07, 12 and 08 replay once a step, 09 once a
# physics substep (4 a step): 12 replays span 3 steps of 09, whose first replays share the
# step (and so the actions) of its capture.
SHADOW_REPLAYS = 12


class Shadow(object):
    """Wraps the graphed entry points of an env's layers (the wrapper's 07 or 12, MQE's
    env's 08 and 09) so that their first ``replays`` replays are each compared with an eager
    run of the same region on the same state. ``checked``: replays checked per graph;
    ``found``: the first difference, if any."""

    def __init__(self, env: Any, replays: int = SHADOW_REPLAYS) -> None:
        from mapush.sim import GRAPHS  # (graph, in MQE's env, its attribute, the method)

        self.layers = [layer for layer in (env, getattr(env, "env", None)) if layer is not None]
        self.replays, self.checked = replays, {}  # type: int, Dict[str, int]
        self.found = None  # type: Optional[Dict[str, Any]]
        for graph, in_env, _attr, region in GRAPHS:  # patch 07 (mid) or 12 (high level)
            if not in_env and "_graphed" + region in dir(env) and "graph_step" in vars(env):
                self._wrap(env, graph, region)
        inner = getattr(env, "env", None)
        if inner is not None and "_graphed" in dir(inner):  # patches 08 and 09
            region, names = inner._graphed, {attr: g for g, in_env, attr, _ in GRAPHS if in_env}
            self.checked.update(dict.fromkeys(names.values(), 0))

            def hooked(key: str, *rest: Any) -> Any:  # key: LeggedRobot._graphed's
                return self.check(names.get(key, key), getattr(inner, key, None) is not None,
                                  rest[1], lambda: region(key, *rest))
            inner._graphed = hooked

    def _wrap(self, env: Any, graph: str, region: str) -> None:
        self.checked[graph] = 0
        graphed = getattr(env, "_graphed" + region)
        setattr(env, "_graphed" + region, lambda *a: self.check(
            graph, vars(env).get("_graph") is not None, lambda: getattr(env, region)(*a),
            lambda: graphed(*a)))

    def check(self, graph: str, captured: bool, eager: Any, replay: Any) -> Any:
        if not captured or self.checked.get(graph, self.replays) >= self.replays:
            return replay()
        self.checked[graph] += 1
        import torch

        saved = [(layer, dict(vars(layer)), self._values(layer)) for layer in self.layers]
        rng = torch.get_rng_state(), (torch.cuda.get_rng_state_all()
                                      if torch.cuda.is_available() else None)
        expected = (eager(), [self._values(layer) for layer in self.layers])
        for layer, bindings, values in saved:  # the state the eager run found, back
            vars(layer).clear()
            vars(layer).update(bindings)
            self._put(bindings, values)
        torch.set_rng_state(rng[0])
        if rng[1] is not None:
            torch.cuda.set_rng_state_all(rng[1])
        result = replay()
        got = (result, [self._values(layer) for layer in self.layers])
        if self.found is None:
            self.found = self._first_difference(graph, [v for _, _, v in saved], expected, got)
        return result

    @staticmethod
    def _values(layer: Any) -> Dict[Tuple[str, Any], Any]:
        """Clones of a layer's tensors and of the tensors and numbers in its dicts."""
        import torch

        out = {}  # type: Dict[Tuple[str, Any], Any]
        for name, value in vars(layer).items():
            if isinstance(value, torch.Tensor):
                out[(name, None)] = value.detach().clone()
            elif isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(item, torch.Tensor):
                        out[(name, key)] = item.detach().clone()
                    elif isinstance(item, (int, float)) and not isinstance(item, bool):
                        out[(name, key)] = item
        return out

    @staticmethod
    def _put(bindings: Dict[str, Any], values: Dict[Tuple[str, Any], Any]) -> None:
        import torch

        with torch.no_grad():
            for (name, key), value in values.items():
                if key is None:
                    bindings[name].copy_(value)
                elif isinstance(value, torch.Tensor) and isinstance(bindings[name].get(key),
                                                                   torch.Tensor):
                    bindings[name][key].copy_(value)
                else:
                    bindings[name][key] = value

    def _first_difference(self, graph: str, before: List[Dict[Tuple[str, Any], Any]],
                          expected: Any, got: Any) -> Optional[Dict[str, Any]]:
        """The region's result and what its eager run changed (a tensor a graph's output
        merely aliases, as ``torques`` does 09's, changes on replay only, and is left out)."""
        import torch

        def changed(old: Any, new: Any) -> bool:
            if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
                return old.shape != new.shape or old.dtype != new.dtype or \
                    not torch.equal(old, new)
            return old is not new and old != new

        pairs = [("result[%d]" % i, e, g) for i, (e, g) in enumerate(
            zip(*(r if isinstance(r, tuple) else (r,) for r in (expected[0], got[0]))))]
        for b_layer, e_layer, g_layer in zip(before, expected[1], got[1]):
            pairs += [(name if key is None else "%s[%s]" % (name, key), value, g_layer[(name, key)])
                      for (name, key), value in e_layer.items() if (name, key) in g_layer
                      and ((name, key) not in b_layer or changed(b_layer[(name, key)], value))]
        for name, e, g in pairs:
            if not isinstance(e, torch.Tensor) and not isinstance(g, torch.Tensor):
                continue
            e, g = (torch.as_tensor(x).detach().cpu().double() for x in (e, g))
            if e.shape != g.shape:
                return {"graph": graph, "replay": self.checked[graph], "array": name,
                        "elements": -1, "max_abs_diff": float("inf")}
            off = ~torch.isclose(e, g, rtol=RTOL, atol=ATOL, equal_nan=True)
            if bool(off.any()):
                return {"graph": graph, "replay": self.checked[graph], "array": name,
                        "elements": int(off.sum()),
                        "max_abs_diff": float((e - g).abs()[off].nan_to_num(float("inf")).max())}
        return None


def trace(job: Dict[str, Any], made: Any = None) -> Dict[str, Any]:
    """One variant's run: ``job["steps"]`` steps from one seed with seeded actions (drawn on
    the CPU, then moved), each step's arrays into ``job["out"]`` (.npz); with the fast step,
    the first replays of each graph checked against eager runs (:class:`Shadow`). ``made``,
    if given, is called with the env once it exists (the tests emulate CUDA graphs on the
    CPU there)."""
    from mapush import sim

    sim.import_isaacgym()
    import numpy as np
    import torch

    from mapush.spec import RunSpec
    from mapush.registry import DEFAULT_ALGO

    task = job.get("task", MID)  # the high level's episode: 50 steps here, not 8,000 (160 s)
    spec = RunSpec(algo=DEFAULT_ALGO, task=task, object=job["object"] if task == MID else
                   UPPER_OBJECT, num_envs=job["envs"], steps=1, seed=SEED, run_dir=job["run_dir"],
                   sim_device=job["device"], rl_device=job["device"],
                   task_sets=None if task == MID else {"env.episode_length_s": 1.0})
    env, _ = sim.make_env(spec, fast_step=job["fast_step"])
    if made is not None:
        made(env)
    shadow = Shadow(env) if job["fast_step"] else None
    inner = env.env
    gen = torch.Generator().manual_seed(ACTION_SEED)
    env.reset()
    found = {name: [] for name in TRACED}  # type: Dict[str, List[Any]]
    for _ in range(job["steps"]):
        action = torch.rand(job["envs"], env.num_agents if task == MID else 1,  # sub-goals
                            env.action_space.shape[0], generator=gen) * 2 - 1
        obs, reward, done, _info = env.step(action.to(job["device"]))
        for name, value in (("obs", obs), ("reward", reward), ("done", done),
                            ("finished", inner.finished_buf), ("dof_pos", inner.dof_pos),
                            ("root_states", inner.root_states),
                            ("root_states_npc", inner.root_states_npc)):
            found[name].append(value.detach().cpu().numpy().copy())
    stacked = {name: np.stack(values) for name, values in found.items()}
    np.savez(job["out"], **stacked)
    return {"graphs": sim.graph_report(env), "resets": int(stacked["done"].sum()),
            "replays_checked": shadow.checked if shadow else {},
            "replay_difference": shadow.found if shadow else None}


# --------------------------------------------------------------------------- parent
def machine(device: str, facts: Optional[GpuFacts]) -> Dict[str, Any]:
    """What the verdict holds for: the GPU of ``device``, the driver, torch."""
    index = device_index(device)
    dev = facts.device(index) if facts is not None and index is not None else None
    return {"gpu": dev.name if dev else device,
            "driver": facts.driver_version if facts else None,
            "torch": facts.torch_version if facts else None}


def machine_key(facts: Dict[str, Any], task: str) -> Tuple[str, Dict[str, Any]]:
    """The cache key of this machine and stack: GPU, driver, torch (whose TorchScript fuser
    decides Isaac Gym's rounding), image digest, patches applied; and the level checked."""
    from mapush.provenance import provenance

    patches = [{"component": p.get("component"), "patches": p.get("patches")}
               for p in provenance().get("patches", []) if isinstance(p, dict)]
    what = {"gpu": facts.get("gpu"), "driver": facts.get("driver"), "torch": facts.get("torch"),
            "image": os.environ.get("MAPUSH_IMAGE_DIGEST"), "patches": patches, "task": task}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16], what


def cache_file(key: str) -> Path:
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mapush")
    return root / "step-check" / ("%s.json" % key)


def warn(what: str, exc: Exception) -> None:
    """The cache can never stop a run: what failed, in one line that names its folder."""
    print("mapush: warning: the step check's cache cannot be %s (%s); the check goes on "
          "without it (set %s to a writable folder to keep its verdict)"
          % (what, exc, CACHE_ENV), file=sys.stderr, flush=True)


def cached(key: str) -> Optional[Dict[str, Any]]:
    """This machine's verdict (passed or failed) from an earlier check; None when there is
    none, it cannot be read, or it is of another schema (the check then runs again)."""
    path = cache_file(key)
    try:
        record = json.loads(read_regular(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        warn("read", exc)
        return None
    if (not isinstance(record, dict) or record.get("version") != VERDICT_VERSION
            or not isinstance(record.get("passed"), bool) or record.get("key") != key):
        return None
    return record


def store(record: Dict[str, Any]) -> None:
    try:
        write_json(cache_file(record["key"]), record)
    except OSError as exc:
        warn("written", exc)


@contextlib.contextmanager
def held(key: str) -> Iterator[None]:
    """One check of a machine at a time: runs that start together (a sweep's cells) wait for
    the first one's verdict instead of each running their own. The lock is a regular file
    opened without blocking; where it cannot be (a read-only cache, a FIFO in its place),
    the check runs unlocked, with a warning."""
    path = cache_file(key).with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        warn("locked", exc)
        yield
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            warn("locked", OSError("%s is not a regular file" % path))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed
        yield
    finally:
        os.close(fd)


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


def run(device: str, facts: Dict[str, Any], task: str, obj: str = "cuboid", envs: int = ENVS,
        steps: int = STEPS) -> Dict[str, Any]:
    """The three children, their comparison, the verdict (cached)."""
    import numpy as np

    key, what = machine_key(facts, task)
    started = time.monotonic()
    results, traces = {}, {}
    with tempfile.TemporaryDirectory(prefix="mapush-step-check-") as tmp, \
            Supervisor("doctor --check-step", "stopping the check", grace_s=10) as sup:
        for name, fast in VARIANTS:
            job = {"task": task, "object": obj, "envs": envs, "steps": steps, "device": device,
                   "fast_step": fast, "run_dir": tmp, "out": os.path.join(tmp, name + ".npz")}
            job_file = os.path.join(tmp, name + ".json")
            write_json(job_file, job)
            out_file = os.path.join(tmp, name + ".result.json")
            code = sup.wait(sup.start([sys.executable, "-m", "mapush.diagnostics.step_check",
                                       job_file, out_file], stdout=sys.stderr))  # MQE's prints
            if code != 0 or not os.path.isfile(out_file):
                return {"passed": None, "error": "child %s (%s) failed with status %d"
                        % (name, "fast step" if fast else "upstream's step", code)}
            results[name] = json.loads(Path(out_file).read_text())
            with np.load(job["out"]) as data:
                traces[name] = {k: data[k] for k in data.files}
    first = compare(traces["A"], traces["B"], traces["C"])
    replayed = results["A"].get("replay_difference")
    record = {"version": VERDICT_VERSION,
              "passed": first["array"] is None and replayed is None, "first_difference": first
              if first["array"] else None, "replay_difference": replayed,
              "replays_checked": results["A"].get("replays_checked"),
              "graphs": results["A"]["graphs"],
              "resets": results["A"]["resets"], "envs": envs, "steps": steps, "object": obj,
              "task": task, "device": device, "seconds": round(time.monotonic() - started, 1),
              "physx_repeats_itself": first["spread_steps"] == 0, "key": key,
              "max_abs_diff_within_rounding": first.get("max_abs_diff_within_rounding"),
              "tolerance": {"rtol": RTOL, "atol": ATOL},
              "machine": what, "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    store(record)
    return record


def line(record: Dict[str, Any]) -> str:
    """The verdict in one line."""
    if record.get("passed") is None:
        return "could not run: %s" % record.get("error")
    graphs = record.get("graphs") or {}
    level = "the high level's fast step" if record.get("task") == UPPER else "the fast step"
    captured = [k for k, v in graphs.items() if v == "captured"]
    where = "graphs %s captured" % ", ".join(captured) if captured else "no step graph captured"
    checked = sorted(k for k, v in (record.get("replays_checked") or {}).items() if v)
    if checked:
        where += ", each of the first replays of %s equal to its eager run" % ", ".join(checked)
    if record["passed"]:
        return ("%s equals upstream's over %d steps at %d envs (%s; %d episode ends) in "
                "%.0f s" % (level, record["steps"], record["envs"], where, record["resets"],
                            record["seconds"]))
    replayed = record.get("replay_difference")
    if replayed:
        return ("graph %s's replay %d differs from an eager run of its region on the same "
                "state: %s (%d elements, by up to %.3g): a stale input or a race in the graph"
                % (replayed["graph"], replayed["replay"], replayed["array"],
                   replayed["elements"], replayed["max_abs_diff"]))
    diff = record["first_difference"]
    return ("%s differs from upstream's: %s at step %d (%d elements, by up to %.3g; %s)"
            % (level, diff["array"], diff["step"], diff["elements"], diff["max_abs_diff"], where))


if __name__ == "__main__":  # the child: python -m mapush.diagnostics.step_check JOB OUT
    from mapush.common.leave import leave

    job_spec = json.loads(Path(sys.argv[1]).read_text())
    write_json(sys.argv[2], trace(job_spec))
    leave(0)  # (it flushes stdout and stderr)
