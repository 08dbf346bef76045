"""The smoke test's stages, one pytest test each, run in this order by ``mapush smoke``:
doctor, env, step, train_ppo, train_happo, eval, memory, clean_exit (``conftest.py`` is the
plugin: dependencies, time limits, the JSON report).

Every stage that touches Isaac Gym or torch runs the product's own commands in a fresh
child process (``python -m mapush ...``), with the devices the smoke run was given, so the
smoke test proves the commands users run, not a copy of them.
"""
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from mapush.events import event_files, read_scalars
from mapush.proc import signal_name
from mapush.checkpoints.store import list_checkpoints
from mapush.common.phases import read_phases
from tests.gpu.conftest import TIMEOUTS, ChildResult, Smoke, StageFailure

ENV_STEPS = 20
SEED = 1
ENV_CHECK = Path(__file__).resolve().parent / "env_check.py"
# Memory may grow across the training updates by at most max(MB, FRACTION * first sample).
GPU_GROWTH_BOUND = (64.0, 0.10)
HOST_GROWTH_BOUND = (256.0, 0.25)
GPU_MEMORY_TAG = "memory/gpu_allocated_mb"
HOST_MEMORY_TAG = "memory/host_rss_mb"
# The trainers' watchdog samples every 10 updates; a smoke run has a handful, so its
# children sample after every update (mapush.run.watchdog reads this knob).
WATCHDOG_ENV = {"MAPUSH_WATCHDOG": "every=1"}
GROWTH_TAG = "memory/growth_mb_per_1k_updates"
EVAL_METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree")


def mapush_command(*args: Any) -> List[str]:
    return [sys.executable, "-m", "mapush"] + [str(a) for a in args]


def _devices(ctx: Smoke) -> List[str]:
    return ["--sim-device", ctx.sim_device, "--rl-device", ctx.rl_device]


def _exit_text(result: ChildResult) -> str:
    if result.returncode < 0:
        return "died from %s" % signal_name(-result.returncode)
    return "exited %d" % result.returncode


def _fail_child(what: str, result: ChildResult, **details: Any) -> StageFailure:
    line = result.last_line()
    message = "%s %s" % (what, _exit_text(result))
    if line:
        message += ": %s" % line
    details.setdefault("stderr_log", result.record.stderr)
    return StageFailure(message, **details)


def _json_object(text: str) -> Optional[Dict[str, Any]]:
    """The whole text as one JSON object, else its last line that is one."""
    try:
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


# -- doctor -----------------------------------------------------------------------------

def _doctor_failures(report: Dict[str, Any]) -> List[str]:
    checks = report.get("checks", [])
    if isinstance(checks, dict):
        checks = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "status": v}
                  for k, v in checks.items()]
    lines = []
    for check in checks:
        if not isinstance(check, dict) or check.get("status") not in ("fail", "failed", "error"):
            continue
        text = "%s: %s" % (check.get("name", "?"), check.get("message") or check.get("detail", ""))
        if check.get("fix"):
            text += " (fix: %s)" % check["fix"]
        lines.append(text)
    return lines


def doctor(ctx: Smoke) -> Dict[str, Any]:
    """``mapush doctor --json``: GPU, driver, architecture, memory, Isaac Gym, patches."""
    result = ctx.run_child(mapush_command("doctor", "--num-envs", ctx.settings["num_envs"],
                                          "--json", *_devices(ctx)))
    report = _json_object(result.stdout)
    details = {"doctor": report} if report is not None else {}
    if result.returncode != 0:
        failures = _doctor_failures(report or {})
        if failures:
            raise StageFailure("doctor: " + "; ".join(failures), **details)
        raise _fail_child("mapush doctor", result, **details)
    if report is None:
        raise StageFailure("mapush doctor --json printed no JSON object on stdout",
                           stdout_log=result.record.stdout)
    return details


# -- env --------------------------------------------------------------------------------

def env(ctx: Smoke) -> Dict[str, Any]:
    """Create go1push_mid through mapush.sim.make_env in a child and step it at random."""
    phase_file = ctx.logs / "env.phases.log"
    phase_file.parent.mkdir(parents=True, exist_ok=True)
    phase_file.write_text("")
    argv = [sys.executable, str(ENV_CHECK),
            "--num-envs", str(ctx.settings["num_envs"]), "--steps", str(ENV_STEPS),
            "--seed", str(SEED), "--run-dir", str(ctx.workdir / "env")] + _devices(ctx)
    result = ctx.run_child(argv, extra_env={"MAPUSH_PHASE_FILE": str(phase_file)})
    seen = read_phases(str(phase_file))
    if result.returncode != 0:
        what = "the env check"
        if result.returncode < 0:
            what += " (last phase %s)" % (seen[-1] if seen else "before start")
        raise _fail_child(what, result, phases=seen)
    report = _json_object(result.stdout)
    if not report or not report.get("ok"):
        raise StageFailure("the env check printed no verdict", stdout_log=result.record.stdout)
    report["phases"] = seen
    return report


# -- step -------------------------------------------------------------------------------

def step(ctx: Smoke) -> Dict[str, Any]:
    """``mapush doctor --check-step --json``: MQE's fast step (patches 06-09, their CUDA
    graphs) against upstream's step on the smoke run's device, step by step."""
    result = ctx.run_child(mapush_command(
        "doctor", "--check-step", "--check-step-envs", ctx.settings["num_envs"], "--json",
        "--num-envs", ctx.settings["num_envs"], *_devices(ctx)))
    report = _json_object(result.stdout) or {}
    found = [c for c in report.get("checks", []) if isinstance(c, dict) and
             c.get("name") == "step"]
    if not found:
        raise _fail_child("mapush doctor --check-step", result)
    check = found[0]
    if check.get("status") != "ok":
        raise StageFailure("step: %s (fix: %s)" % (check.get("message"), check.get("fix")),
                           check=check)
    return {"check": check}


# -- training ---------------------------------------------------------------------------

def run_dir(ctx: Smoke, algo: str) -> Path:
    return ctx.workdir / algo


def train(algo: str):  # type: ignore[no-untyped-def]
    """A stage that runs ``mapush train --algo ALGO`` for a few updates in a fresh child."""

    def stage(ctx: Smoke) -> Dict[str, Any]:
        folder = run_dir(ctx, algo)
        steps = ctx.settings["train_steps"][algo]
        interval = ctx.settings["checkpoint_interval"][algo]
        result = ctx.run_child(mapush_command(
            "train", "--algo", algo, "--task", "go1push_mid", "--object", "cuboid",
            "--num-envs", ctx.settings["num_envs"], "--steps", steps, "--seed", SEED,
            "--run-dir", folder, "--checkpoint-interval", interval,
            *_devices(ctx)), extra_env=WATCHDOG_ENV)
        details = {"run_dir": str(folder)}  # type: Dict[str, Any]
        if result.returncode != 0:
            raise _fail_child("mapush train --algo %s" % algo, result, **details)
        checkpoints = list_checkpoints(folder)
        details["checkpoints"] = [{"step": step, "path": str(path)}
                                  for step, path, _meta in checkpoints]
        if not checkpoints:
            raise StageFailure("mapush train --algo %s exited 0 but wrote no complete checkpoint"
                               " under %s" % (algo, folder / "checkpoints"), **details)
        events = event_files(folder / "logs")
        details["event_files"] = [str(p) for p in events]
        if not events:
            raise StageFailure("mapush train --algo %s exited 0 but wrote no TensorBoard event"
                               " file under %s" % (algo, folder / "logs"), **details)
        details["final_step"] = checkpoints[-1][0]
        return details

    stage.__name__ = "train_%s" % algo
    stage.__doc__ = "mapush train --algo %s for a few updates" % algo
    return stage


# -- eval -------------------------------------------------------------------------------

def evaluate(ctx: Smoke) -> Dict[str, Any]:
    """``mapush eval`` on a checkpoint of the PPO run: the checkpoint reloads and evaluates."""
    checkpoints = list_checkpoints(run_dir(ctx, "ppo"))
    if not checkpoints:
        raise StageFailure("the PPO run left no checkpoint to evaluate")
    step, path, _meta = checkpoints[0]
    result = ctx.run_child(mapush_command("eval", "--checkpoint", path, "--num-envs",
                                          ctx.settings["num_envs"], "--seed", SEED,
                                          *_devices(ctx)))
    details = {"checkpoint": str(path), "step": step}  # type: Dict[str, Any]
    if result.returncode != 0:
        raise _fail_child("mapush eval", result, **details)
    metrics = _json_object(result.stdout)
    if metrics is None:
        raise StageFailure("mapush eval printed no JSON object on stdout",
                           stdout_log=result.record.stdout, **details)
    missing = [m for m in EVAL_METRICS if m not in metrics]
    if missing:
        raise StageFailure("mapush eval printed no %s" % ", ".join(missing), metrics=metrics,
                           **details)
    rate = metrics["success_rate"]
    if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise StageFailure("mapush eval: success_rate %r is not in [0, 1]" % (rate,),
                           metrics=metrics, **details)
    details["metrics"] = metrics
    return details


# -- memory -----------------------------------------------------------------------------

def memory_growth(series: Sequence[Any], bound: Sequence[float]) -> Dict[str, Any]:
    """Growth of a memory series across the updates against its bound.

    The first sample is the baseline (the watchdog logs after the first update, once the
    rollout buffers exist); growth is the largest later sample minus it.
    """
    values = [float(v) for _step, v in series if math.isfinite(float(v))]
    first = values[0]
    growth = max(values) - first
    allowed = max(bound[0], bound[1] * first)
    return {"samples": len(values), "first_mb": round(first, 1), "last_mb": round(values[-1], 1),
            "max_mb": round(max(values), 1), "growth_mb": round(growth, 1),
            "bound_mb": round(allowed, 1), "ok": growth <= allowed}


def memory(ctx: Smoke) -> Dict[str, Any]:
    """Memory did not grow across the training updates beyond a bound, in either run."""
    on_gpu = ctx.rl_device.startswith("cuda")
    tag = GPU_MEMORY_TAG if on_gpu else HOST_MEMORY_TAG
    bound = GPU_GROWTH_BOUND if on_gpu else HOST_GROWTH_BOUND
    details = {"tag": tag}  # type: Dict[str, Any]
    problems = []
    for algo in ("ppo", "happo"):
        logs = run_dir(ctx, algo) / "logs"
        scalars = read_scalars(logs)
        series = scalars.get(tag, [])
        if scalars.get(GROWTH_TAG):
            problems.append("the %s run's memory watchdog reported steady growth (%s = %.1f)"
                            % (algo, GROWTH_TAG, scalars[GROWTH_TAG][-1][1]))
        if not series:
            problems.append("the %s run logged no %s under %s" % (algo, tag, logs))
            continue
        verdict = memory_growth(series, bound)
        details[algo] = verdict
        if not verdict["ok"]:
            problems.append("%s: %s grew by %.1f MB over %d samples (bound %.1f MB)"
                            % (algo, tag, verdict["growth_mb"], verdict["samples"],
                               verdict["bound_mb"]))
    if problems:
        raise StageFailure("; ".join(problems), **details)
    return details


# -- clean exit -------------------------------------------------------------------------

def clean_exit(ctx: Smoke) -> Dict[str, Any]:
    """Every child exited 0 by itself, left no process behind, and each training run's
    child reached its shutdown phase (it did not die in Isaac Gym's teardown)."""
    problems = []
    for child in ctx.children:
        if child.stage == "clean_exit":
            continue
        if child.returncode is None or child.returncode != 0:
            code = child.returncode
            text = ("died from %s" % signal_name(-code) if code is not None and code < 0
                    else "exited %s" % code)
            problems.append("%s %s" % (child.label, text))
        if child.killed:
            problems.append("%s had to be killed" % child.label)
        if child.leftover:
            problems.append("%s left processes %s running" % (child.label, child.leftover))
    runs = {}
    for algo in ("ppo", "happo"):
        phase_log = run_dir(ctx, algo) / "phases.log"
        seen = read_phases(str(phase_log))
        runs[algo] = seen[-1] if seen else None
        if not seen or seen[-1] != "shutdown":
            problems.append("the %s training child ended in phase %s, not shutdown"
                            % (algo, seen[-1] if seen else "(none recorded)"))
    if problems:
        raise StageFailure("; ".join(problems), last_phase=runs)
    return {"children": len(ctx.children), "last_phase": runs}


# -- the stages, in order ---------------------------------------------------------------

@pytest.mark.timeout(TIMEOUTS["doctor"])
def test_doctor(smoke: Smoke) -> None:
    """mapush doctor: GPU, driver, architecture, free memory, Isaac Gym, patches"""
    smoke.details = doctor(smoke)


@pytest.mark.timeout(TIMEOUTS["env"])
@pytest.mark.needs("doctor")
def test_env(smoke: Smoke) -> None:
    """create go1push_mid through mapush.sim.make_env and step it with random actions"""
    smoke.details = env(smoke)


@pytest.mark.timeout(TIMEOUTS["step"])
@pytest.mark.needs("env")
def test_step(smoke: Smoke) -> None:
    """mapush doctor --check-step: MQE's fast step equals upstream's on this device"""
    smoke.details = step(smoke)


@pytest.mark.timeout(TIMEOUTS["train_ppo"])
@pytest.mark.needs("env")
def test_train_ppo(smoke: Smoke) -> None:
    """mapush train --algo ppo (OpenRL) for a few updates, with a checkpoint"""
    smoke.details = train("ppo")(smoke)


@pytest.mark.timeout(TIMEOUTS["train_happo"])
@pytest.mark.needs("env")
def test_train_happo(smoke: Smoke) -> None:
    """mapush train --algo happo (HARL) for a few updates, with a checkpoint"""
    smoke.details = train("happo")(smoke)


@pytest.mark.timeout(TIMEOUTS["eval"])
@pytest.mark.needs("train_ppo")
def test_eval(smoke: Smoke) -> None:
    """mapush eval reloads a PPO checkpoint and computes the paper's metrics"""
    smoke.details = evaluate(smoke)


@pytest.mark.timeout(TIMEOUTS["memory"])
@pytest.mark.needs("train_ppo", "train_happo")
def test_memory(smoke: Smoke) -> None:
    """memory logged by the trainers' watchdog did not grow beyond a bound"""
    smoke.details = memory(smoke)


@pytest.mark.timeout(TIMEOUTS["clean_exit"])
@pytest.mark.needs("doctor", "env", "step", "train_ppo", "train_happo", "eval")
def test_clean_exit(smoke: Smoke) -> None:
    """every child exited 0 without a signal and left nothing running"""
    smoke.details = clean_exit(smoke)

