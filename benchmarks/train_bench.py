"""Measurements (b) training-loop throughput and our layer's share, (d) time to first update.

(b) runs in a child process per (algo, num_envs): the real trainer
(``mapush.trainers.<harl|openrl>_trainer.train``) over the GPU double, reached through
``mapush.sim.make_env`` and the benchmark's ``mqe`` shim. Before the trainer is imported,
every method of every class in ``mapush.envs.*`` and every function of those modules is
wrapped with an outermost-call timer ("our layer"); the double's ``step`` is wrapped too,
synchronized with the device before and after, so that its time (and only its time) is
taken out of our layer's. Per env step the child records (time, layer seconds, env
seconds, device memory) and derives, per training iteration (rollout + update, split where
the gap between two env steps exceeds 5x the median gap): env steps/s and layer share.

(d) runs ``python -m mapush train`` (preflight, config, child, trainer): seconds from
starting the command to the first ``train/*`` scalar in the run's TensorBoard events (the
trainers log their losses right after each update, so this is the first update done), and
to each phase of ``<run_dir>/phases.log``.
"""
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
SHIM = REPO / "benchmarks" / "shim"
DOUBLES = REPO / "tests" / "doubles"
OBJECT_ROOT = DOUBLES / "mapush_root"


def child_env(site: Optional[str], records: Optional[str], physics_us: float = 0.0,
              episode_steps: int = 100) -> Dict[str, str]:
    """Environment of a process that runs the product over the GPU double."""
    paths = [str(SHIM), str(REPO / "tests" / "standin"), str(DOUBLES), str(REPO)]
    if site:
        paths.insert(0, str(site))
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env.update(PYTHONPATH=os.pathsep.join(paths + ([old] if old else [])),
               MAPUSH_ROOT=str(OBJECT_ROOT), PYTHONUNBUFFERED="1",
               BENCH_DOUBLE_PHYSICS_US=str(physics_us),
               BENCH_DOUBLE_EPISODE_STEPS=str(episode_steps))
    if records:
        env["MAPUSH_PATCH_RECORDS"] = str(records)
    return env


# --------------------------------------------------------------------------- (b) child
class LayerClock(object):
    """Outermost-call timer for our layer, and the double's own time inside it."""

    def __init__(self) -> None:
        self.depth = 0
        self.layer = 0.0
        self.env_inside = 0.0
        self.env_outside = 0.0
        self.calls = {}  # type: Dict[str, int]
        # per outermost function: seconds in our layer, the double's own time taken out
        self.seconds = {}  # type: Dict[str, float]
        self.steady = {}  # type: Dict[str, float]  # ``seconds`` when warm-up ended
        self.trace = []  # type: List[List[float]]  # per env step: t, layer, env_inside
        self.memory = []  # type: List[List[float]]  # every mem_every steps: step, alloc, rss


def _wrap_layer(clock: LayerClock, fn: Any, name: str) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        if clock.depth:
            return fn(*args, **kwargs)
        clock.calls[name] = clock.calls.get(name, 0) + 1
        clock.depth += 1
        env_before = clock.env_inside
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.perf_counter() - start
            clock.layer += took
            clock.seconds[name] = (clock.seconds.get(name, 0.0) + took
                                   - (clock.env_inside - env_before))
            clock.depth -= 1

    timed.__wrapped__ = fn  # type: ignore[attr-defined]
    timed.__name__ = getattr(fn, "__name__", name)
    return timed


def instrument(clock: LayerClock, mem_every: int = 100, steady_from: int = 0) -> List[str]:
    """Wrap ``mapush.envs.*`` (stats first, so modules that import its functions by name
    get the wrapped ones) and the double's ``step``; ``clock.steady`` is taken at env step
    ``steady_from``. Returns what was wrapped."""
    import torch

    import mapush.envs as envs_pkg
    from benchmarks.gpu_double import GpuMqeDouble
    from benchmarks.timing import host_rss_mb

    names = ["mapush.envs.stats"] + sorted(
        "mapush.envs." + m.name for m in pkgutil.iter_modules(envs_pkg.__path__)
        if m.name != "stats")
    wrapped = []
    for modname in names:
        try:
            module = importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001 - e.g. openrl_env without openrl
            wrapped.append("%s: not importable (%s)" % (modname, exc))
            continue
        for attr, obj in list(vars(module).items()):
            if getattr(obj, "__module__", None) != modname or attr.startswith("__"):
                continue
            if inspect.isfunction(obj):
                setattr(module, attr, _wrap_layer(clock, obj, "%s.%s" % (modname, attr)))
                wrapped.append("%s.%s" % (modname, attr))
            elif inspect.isclass(obj):
                for meth, fn in list(vars(obj).items()):
                    if inspect.isfunction(fn) and (not meth.startswith("__") or
                                                   meth in ("__init__", "__getattr__")):
                        setattr(obj, meth, _wrap_layer(clock, fn, "%s.%s" % (attr, meth)))
                        wrapped.append("%s.%s.%s" % (modname, attr, meth))

    original = GpuMqeDouble.step
    counter = {"n": 0}

    def env_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        out = original(self, *args, **kwargs)
        if cuda:
            torch.cuda.synchronize(self.device)
        end = time.perf_counter()
        if clock.depth:
            clock.env_inside += end - start
        else:
            clock.env_outside += end - start
        clock.trace.append([end, clock.layer, clock.env_inside])
        if counter["n"] % mem_every == 0:
            alloc = torch.cuda.memory_allocated(self.device) if cuda else 0
            reserved = torch.cuda.memory_reserved(self.device) if cuda else 0
            clock.memory.append([counter["n"], alloc / 2.0 ** 20, reserved / 2.0 ** 20,
                                 host_rss_mb()])
        counter["n"] += 1
        if counter["n"] == steady_from:
            clock.steady = dict(clock.seconds)
        return out

    GpuMqeDouble.step = env_step
    return wrapped


def iterations(trace: List[List[float]], num_envs: int,
               episode_length: int) -> List[Dict[str, float]]:
    """Training iterations (a rollout of ``episode_length`` env steps and the update after
    it): from the end of a rollout's first step to the end of the next rollout's first."""
    out = []
    for a in range(0, len(trace) - episode_length, episode_length):
        b = a + episode_length
        wall = trace[b][0] - trace[a][0]
        layer = (trace[b][1] - trace[a][1]) - (trace[b][2] - trace[a][2])
        out.append({"steps": episode_length, "wall_s": wall,
                    "env_steps_per_s": episode_length * num_envs / wall,
                    "layer_s": layer, "layer_share_pct": 100.0 * layer / wall})
    return out


def memory_growth(samples: List[List[float]], after_step: int) -> Dict[str, Any]:
    """Growth of device allocated/reserved and host RSS from the first sample at or after
    ``after_step`` (warm-up done) to the last."""
    from benchmarks.timing import growth

    late = [m for m in samples if m[0] >= after_step] or samples[-1:]
    return {"from_step": late[0][0] if late else None,
            "device_allocated_mb": growth([m[1] for m in late]),
            "device_reserved_mb": growth([m[2] for m in late]),
            "host_rss_mb": growth([m[3] for m in late])}


def child_train(algo: str, num_envs: int, steps: int, device: str, out: str,
                episode_length: int = 200) -> None:
    """Entry of the (b) child process: run the real trainer, write the JSON result."""
    from mapush import sim

    sim.import_isaacgym()  # the stand-in; before torch, as the product demands
    clock = LayerClock()
    # the first iteration (a rollout and its update) is warm-up, as in ``iterations``
    wrapped = instrument(clock, steady_from=episode_length + 1)
    from mapush.run.context import RunContext
    from mapush.spec import RunSpec

    from mapush import registry as trainers

    trainer = trainers.load(algo)  # the registry's answer, as the training child asks it
    run_dir = tempfile.mkdtemp(prefix="bench-%s-%d-" % (algo, num_envs))
    spec = RunSpec(algo=algo, task="go1push_mid", object="cuboid", num_envs=num_envs,
                   steps=steps, seed=1, run_dir=run_dir, sim_device=device, rl_device=device,
                   checkpoint_interval=10 ** 12,
                   config=os.environ.get("BENCH_PPO_CONFIG") or None)  # e.g. device_rollout: false
    start = time.perf_counter()
    code = trainer.train(RunContext(spec))
    end = time.perf_counter()
    trace = clock.trace
    its = iterations(trace, num_envs, episode_length)
    steady = its[1:] if len(its) > 1 else its
    result = {
        "algo": algo, "num_envs": num_envs, "steps": steps, "device": device, "exit": code,
        "total_s": end - start, "env_steps": len(trace) * num_envs,
        "iterations": its,
        "env_steps_per_s": {k: v for k, v in _summ([i["env_steps_per_s"] for i in steady]).items()},
        "layer_share_pct": _summ([i["layer_share_pct"] for i in steady]),
        "layer_ms_per_step": _summ([1e3 * i["layer_s"] / i["steps"] for i in steady]),
        "layer_calls": clock.calls, "env_outside_layer_s": clock.env_outside,
        "memory": clock.memory, "wrapped": wrapped,
        "memory_growth": memory_growth(clock.memory, 2 * episode_length),
        "physics_us": float(os.environ.get("BENCH_DOUBLE_PHYSICS_US", "0")),
        "layer_by_function_ms_per_step": by_function(clock, len(trace) - episode_length - 1),
        "trace": [[round(t - trace[0][0], 6), round(l, 6), round(e, 6)] for t, l, e in trace],
    }
    if trace:
        window = trace[-1][0] - trace[0][0]
        layer = (trace[-1][1] - trace[0][1]) - (trace[-1][2] - trace[0][2])
        result["whole_run"] = {"wall_s": window, "layer_s": layer,
                               "layer_share_pct": 100.0 * layer / window if window else None,
                               "env_steps_per_s": (len(trace) - 1) * num_envs / window
                               if window else None}
    Path(out).write_text(json.dumps(result, indent=1))


def by_function(clock: LayerClock, steady_steps: int) -> Dict[str, float]:
    """Milliseconds per env step of each outermost function of our layer after warm-up
    (the double's own time taken out), largest first."""
    if steady_steps <= 0:
        return {}
    rows = {name: 1e3 * (sec - clock.steady.get(name, 0.0)) / steady_steps
            for name, sec in clock.seconds.items()}
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]))


def _summ(values: List[float]) -> Dict[str, Any]:
    from benchmarks.timing import summarize

    return summarize(values)


def run_train(algo: str, num_envs: int, steps: int, device: str, site: Optional[str],
              records: Optional[str], log_dir: Path, timeout: float = 240.0,
              physics_us: float = 0.0, episode_length: int = 200) -> Dict[str, Any]:
    """(b) in a child process; the child's output goes to ``log_dir``."""
    name = "train-%s-%d-p%d" % (algo, num_envs, physics_us)
    out = log_dir / (name + ".json")
    log = log_dir / (name + ".log")
    cmd = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--child-train", algo,
           str(num_envs), str(steps), device, str(out), str(episode_length)]
    start = time.time()
    code = run_logged(cmd, child_env(site, records, physics_us), log, timeout)
    if code == 0 and out.is_file():
        result = json.loads(out.read_text())
        result.pop("trace", None)  # kept in the log dir's JSON
        return result
    return {"algo": algo, "num_envs": num_envs, "physics_us": physics_us, "error": "exit %s after %.1fs; log tail: %s"
            % (code, time.time() - start, _tail(log))}


def run_logged(cmd: List[str], env: Dict[str, str], log: Path, timeout: float) -> Any:
    """Run ``cmd`` from the checkout with its output in ``log``: its exit status, or
    "timeout after Ns"."""
    with open(str(log), "w") as fh:
        try:
            return subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=timeout, cwd=str(REPO)).returncode
        except subprocess.TimeoutExpired:
            return "timeout after %ds" % timeout


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text()[-n:]
    except OSError:
        return ""


# --------------------------------------------------------------------------- (d)
def startup(algo: str, num_envs: int, steps: int, device: str, site: Optional[str],
            records: Optional[str], log_dir: Path, timeout: float = 120.0) -> Dict[str, Any]:
    """Seconds from starting ``mapush train`` to each phase; the run is left to finish."""
    run_dir = Path(tempfile.mkdtemp(prefix="bench-start-%s-" % algo)) / "run"
    log = log_dir / ("startup-%s-%d.log" % (algo, num_envs))
    cmd = [sys.executable, "-m", "mapush", "train", "--algo", algo, "--task", "go1push_mid",
           "--object", "cuboid", "--num-envs", str(num_envs), "--steps", str(steps),
           "--seed", "1", "--run-dir", str(run_dir), "--sim-device", device,
           "--rl-device", device]
    start = time.time()
    code = run_logged(cmd, child_env(site, records), log, timeout)
    phases = {}  # type: Dict[str, float]
    try:
        for line in (run_dir / "phases.log").read_text().splitlines():
            stamp, _, name = line.partition(" ")
            phases.setdefault(name, round(float(stamp) - start, 3))
    except OSError:
        pass
    first = first_update_time(run_dir)
    result = {"algo": algo, "num_envs": num_envs, "exit": code, "phases_s": phases,
              "to_first_update_s": round(first - start, 3) if first else None,
              "total_s": round(time.time() - start, 3)}  # type: Dict[str, Any]
    if code != 0 or first is None:
        result["error"] = _tail(log)
    return result


def first_update_time(run_dir: Path) -> Optional[float]:
    """Wall time of the earliest ``train/*`` scalar in the run's event files."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return None
    times = []
    for path in Path(run_dir).rglob("events.out.tfevents*"):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            if tag.startswith("train/"):
                times += [e.wall_time for e in acc.Scalars(tag)]
    return min(times) if times else None
