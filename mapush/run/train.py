"""``mapush train`` in the parent process: preflight, run directory, child, exit status."""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from mapush import schema, registry
from mapush.checkpoints.policy import checkpoint_sha256, lenient_load
from mapush.checkpoints.source import OBJECT_CONFIG, OVERRIDES, RUN_CONFIG
from mapush.checkpoints.store import latest_checkpoint, read_meta
from mapush.common.atomic import DISK_FULL, writable, write_json, write_text
from mapush.common.clock import now
from mapush.common.hashing import sha256
from mapush.diagnostics.doctor import preflight as run_preflight, step_verdict
from mapush.diagnostics.gpu import GpuFacts, device_index
from mapush.diagnostics.step_check import line as step_line
from mapush.errors import FIXES, ISAACGYM_HINT, MapushError, UsageError
from mapush.objects import mapush_root, object_config_path
from mapush.proc import Supervisor, signal_name
from mapush.provenance import provenance, warn_if_incomplete
from mapush.run import ranks
from mapush.run.crash import PHASE_LOG, report_crash
from mapush.run.lock import RunLock
from mapush.run.resume import holds_run
from mapush.spec import UPPER, RunSpec

UPPER_CONFIG = Path("mqe") / "envs" / "configs" / "go1_push_upper_config.py"


def _stage(spec: RunSpec, source: Path, copy: Path) -> Tuple[Path, Dict[str, Any]]:
    """Copy ``source`` into the run directory at ``copy`` (relative to it): what the run,
    its resumes and its evaluation read, whatever later happens to the original. Returns
    the copy's absolute path and its record for config.json."""
    target = Path(spec.run_dir) / copy
    write_text(target, source.read_text())
    return target.resolve(), {"source": str(source.resolve()), "copy": str(copy),
                              "sha256": sha256(target)}


def stage_object_config(spec: RunSpec) -> Tuple[RunSpec, Dict[str, Any]]:
    """The run's object config as ``<run_dir>/task/config.py`` (as upstream's train.py
    copies it into its results folder), the spec pointed at the copy (the high level: MQE's
    installed upper config, copied for the record only)."""
    if spec.task == UPPER:
        source = mapush_root() / UPPER_CONFIG
        if not source.is_file():
            return spec, {"source": None, "copy": None, "sha256": None,
                          "note": "no %s under MAPUSH_ROOT to copy" % UPPER_CONFIG}
        return spec, _stage(spec, source, OBJECT_CONFIG)[1]
    source = Path(spec.object_config) if spec.object_config else object_config_path(spec.object)
    copy, record = _stage(spec, source, OBJECT_CONFIG)
    return spec.with_changes(object_config=str(copy)), record


def check_step(spec: RunSpec, facts: Optional[GpuFacts], preflight: bool
               ) -> Tuple[RunSpec, Dict[str, Any]]:
    """A new run on a GPU with MQE's fast step on (patches/mapush/06-12) runs it only where
    this machine's verdict on its level passed (``mapush doctor --check-step``, cached, run
    here the first time). A failed verdict turns it off for the run (``spec.fast_step``
    false, kept by a resume); a verdict that could not be reached leaves it on. The
    record (config.json's ``step_check``) says which, and why."""
    key = registry.FAST_STEP_KEY[spec.trainer]
    if not registry.config_value(spec.algo, spec.config, key):
        return spec, {"ran": False, "fast_step": False,
                      "line": "not needed: %s is false in the run's config" % key}
    if device_index(spec.sim_device) is None:
        return spec, {"ran": False, "fast_step": True,
                      "line": "not run: no CUDA graphs on the CPU pipeline"}
    if not preflight:
        return spec, {"ran": False, "fast_step": True, "line": "not run: --no-preflight"}
    verdict = step_verdict(spec.sim_device, facts, spec.task)
    said = step_line(verdict)
    found = {"ran": True, "passed": verdict.get("passed"), "line": said, "fast_step": True,
             "cache": verdict.get("cache"), "checked": verdict.get("checked"),
             "key": verdict.get("key")}
    if verdict.get("passed") is False:
        spec = spec.with_changes(fast_step=False)
        found.update(fast_step=False)
        print("mapush: MQE's fast step is off for this run (its spec's fast_step is false, as "
              "if %s=false): on this machine %s; slower and right. `mapush doctor --check-step` "
              "rechecks" % (key, said), file=sys.stderr)
    elif verdict.get("passed") is None:
        print("mapush: warning: MQE's fast step could not be checked here (%s); it stays on"
              % verdict.get("error"), file=sys.stderr)
    else:
        print("mapush: step check (this machine): %s" % said, file=sys.stderr)
    return spec, found


def write_config(spec: RunSpec, record: Optional[Dict[str, Any]] = None,
                 step: Optional[Dict[str, Any]] = None) -> Tuple[Path, RunSpec]:
    """``<run_dir>/config.json``: the options and the stack's provenance; a resume appends
    (docs/architecture.md, "Modules")."""
    run_dir = Path(spec.run_dir)
    path = run_dir / RUN_CONFIG
    stack = provenance()
    warn_if_incomplete(stack, str(path))
    if record is not None:
        resumes = list(record.get("resumes", []))  # type: List[Any]
        resumes.append({"at": now(), "from": spec.resume, "steps": spec.steps,
                        "num_envs": spec.num_envs, "command": sys.argv,
                        "spec": spec.to_dict(), "provenance": stack})
        write_json(path, dict(record, spec=spec.to_dict(), resumes=resumes))
        return path, spec
    run_dir.mkdir(parents=True, exist_ok=True)
    spec, object_config = stage_object_config(spec)
    overrides = None
    if spec.config:
        copy, overrides = _stage(spec, Path(spec.config), Path(OVERRIDES))
        spec = spec.with_changes(config=str(copy))
    new = {"spec": spec.to_dict(), "provenance": stack, "created": now(),
           "command": sys.argv, "object_config": object_config,
           "start": {"steps": spec.steps, "num_envs": spec.num_envs}}  # type: Dict[str, Any]
    if overrides:
        new["config_override"] = overrides
    if step is not None:
        new["step_check"] = step
    if spec.command_net:
        new["command_net"] = {"path": spec.command_net, "sha256": sha256(spec.command_net)}
    if spec.init_from:
        new["init_from"] = {"checkpoint": spec.init_from,
                            "sha256": checkpoint_sha256(spec.init_from)}
    write_json(path, new)
    return path, spec


NETRC = Path.home() / ".netrc"  # where `wandb login` keeps the W&B API key
STOP_GRACE_ENV = "MAPUSH_STOP_GRACE_S"
# How long the child may take, after the first SIGINT/SIGTERM, to write its final checkpoint
# and leave before the parent kills it. Below compose's stop_grace_period (60 s), so that the
# parent still reports what happened before Docker's SIGKILL.
DEFAULT_STOP_GRACE_S = 50.0


def stop_grace_s() -> float:
    return float(schema.environ().get(STOP_GRACE_ENV, DEFAULT_STOP_GRACE_S))


@dataclass
class ChildOutcome:
    status: int                        # as subprocess reports it: negative for a signal
    stop_signal: Optional[int] = None  # the first SIGINT/SIGTERM the parent forwarded
    killed: bool = False               # the parent killed it after the grace period


def supervise(argv: List[str], grace: float, forward: Any = None, **popen: Any) -> ChildOutcome:
    """Run the child (:class:`mapush.proc.Supervisor`): the first SIGINT/SIGTERM is
    forwarded, the child writes a final checkpoint and exits 0; it is killed if still
    running ``grace`` seconds later."""
    with Supervisor("mapush", "the trainer writes a final checkpoint and stops (the child "
                    "is killed if it has not left within %.0f s)" % grace, grace,
                    again="already stopping, waiting for the final checkpoint") as sup:
        sup.forward = forward or sup.forward
        status = sup.wait(sup.start(argv, **popen))
    return ChildOutcome(status, sup.stop_signal, sup.killed)


def start_child(spec: RunSpec, config_path: Path, lock_fd: int) -> ChildOutcome:
    """The training child, holding the run's lock (``lock_fd``) with the parent."""
    phase_file = Path(spec.run_dir) / PHASE_LOG
    write_text(phase_file, "")
    argv, env, options = ranks.launch(spec, [sys.executable, "-m", "mapush.run.child",
                                             str(config_path)])
    return supervise(argv, stop_grace_s(), pass_fds=(lock_fd,),
                     env=dict(os.environ, MAPUSH_PHASE_FILE=str(phase_file),
                              PYTHONUNBUFFERED="1", **env), **options)


def _newest_checkpoint(spec: RunSpec) -> str:
    latest = latest_checkpoint(Path(spec.run_dir))
    return "%s (step %d)" % (latest[1], latest[0]) if latest else "none"


def check_writable(spec: RunSpec, resuming: bool) -> None:
    """A read-only run folder (or parent) is one UsageError before anything starts."""
    run_dir = Path(spec.run_dir)
    folders = [run_dir] + [run_dir / sub for sub in ("checkpoints", "logs", "task")
                           if (run_dir / sub).is_dir()] if resuming else [run_dir]
    for folder in folders:
        if not writable(folder):
            raise UsageError(FIXES["read_only"]["resume" if resuming else "run_dir"]
                             % {"folder": folder})


def load_trainer(spec: RunSpec) -> Any:
    """The spec's trainer's config checks (no torch, no training stack: the child's)."""
    try:
        return registry.load(spec.algo, checks=True)
    except ImportError as exc:
        raise MapushError("cannot check --algo %s's config: %s (the training image has it; "
                          "run mapush train there)" % (spec.algo, exc))


def task_config(spec: RunSpec) -> Dict[str, Any]:
    """The task config the run's env will get (``--set task.*`` checked against it), from a
    child that imports Isaac Gym and MQE (this process may have torch); its error, if any."""
    with tempfile.TemporaryDirectory(prefix="mapush-task-") as tmp, \
            Supervisor("mapush", "stopping the task config's check", 10.0) as sup:
        job, out, err = (Path(tmp) / name for name in ("job.json", "task.json", "stderr"))
        write_json(job, {"spec": spec.to_dict(), "task_config_to": str(out)})
        with open(str(err), "w") as stream:
            code = sup.wait(sup.start([sys.executable, "-m", "mapush.run.child", str(job)],
                                      stdout=subprocess.DEVNULL, stderr=stream))
        said = [line[7:] for line in err.read_text().splitlines() if line.startswith("error: ")]
        if code == 0 and out.is_file():
            return json.loads(out.read_text())
    raise (UsageError if code == 2 else MapushError)(said[-1] if said else "reading the task "
                                                     "config failed with status %d" % code)


def print_config(spec: RunSpec) -> int:
    """``mapush train --print-config``: the resolved spec, trainer config and task config
    as one JSON object on stdout; nothing starts and nothing is written."""
    trainer = load_trainer(spec).resolved_config(spec)
    shown = {"spec": spec.to_dict(), "trainer_config": trainer, "task_config": None}
    if importlib.util.find_spec("isaacgym") is None:  # MQE's task configs import it (#81)
        shown["task_config_not_read"] = "%s; the spec and trainer config need no Isaac Gym, " \
            "MQE's task config (and --set task.*) does" % ISAACGYM_HINT
        print("mapush: --print-config without Isaac Gym: the task config is not read",
              file=sys.stderr)
    else:
        shown["task_config"] = task_config(spec)
    print(json.dumps(shown, indent=1, sort_keys=True))
    return 0


def check_spec(spec: RunSpec, record: Optional[Dict[str, Any]]) -> None:
    """Every refusal that needs no simulation, before the run folder exists or changes: the
    trainer's config (keys, values, steps), a resume with nothing left to train or from a
    checkpoint the loader refuses, a read-only folder."""
    resume_meta = (read_meta(Path(spec.resume)) or {}) if spec.resume else {}
    for file in sorted(Path(spec.resume).glob("*.pt")) if spec.resume else ():
        lenient_load(file, "--resume")  # what the child would refuse, before the record changes
    updates = load_trainer(spec).planned_updates(spec, resume_meta)
    if record is not None and updates <= 0:
        raise UsageError(FIXES["nothing_to_train"] % {
            "run": spec.run_dir, "step": resume_meta.get("step", 0), "steps": spec.steps})
    check_writable(spec, record is not None)
    if spec.use_wandb:
        check_wandb()
    if spec.task_sets and record is None:  # a bad --set task.* is one line, before the folder
        task_config(spec)


def check_wandb() -> None:
    """``--wandb`` needs an API key (``WANDB_API_KEY`` or ``wandb login``'s ~/.netrc) unless
    W&B runs offline, which is said in one line."""
    mode = os.environ.get("WANDB_MODE", "")
    if mode in ("offline", "dryrun", "disabled"):
        print("mapush: --wandb with WANDB_MODE=%s: %s" % (mode, FIXES["wandb_offline"][
            mode == "disabled"]), file=sys.stderr)
    elif not os.environ.get("WANDB_API_KEY") and "api.wandb.ai" not in (
            NETRC.read_text(errors="replace") if NETRC.is_file() else ""):  # `wandb login`'s
        raise UsageError(FIXES["wandb_key"])


def open_run(spec: RunSpec, record: Optional[Dict[str, Any]]) -> RunLock:
    """Create the run folder (a new run) and take its lock; a new run into a folder that
    another command filled meanwhile is refused."""
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir).acquire()
    if record is None and holds_run(run_dir):
        lock.release()
        raise UsageError("%s already holds a run: continue it with --resume %s"
                         % (run_dir, run_dir))
    return lock


def train(spec: RunSpec, preflight: bool = True, record: Optional[Dict[str, Any]] = None,
          show_config: bool = False) -> int:
    """``mapush train`` in the parent: checks, run folder, child, exit status
    (docs/architecture.md, "Modules")."""
    schema.environ()  # the MAPUSH_* numbers, before anything else
    if show_config:
        return print_config(spec)
    facts = None  # type: Optional[GpuFacts]
    if preflight:
        facts = run_preflight(spec)[1]
    check_spec(spec, record)
    step = None
    if record is None:
        spec, step = check_step(spec, facts, preflight)
    new_folder = not Path(spec.run_dir).exists()
    lock = open_run(spec, record)
    try:
        try:
            config_path, spec = write_config(spec, record, step)
        except OSError as exc:
            if new_folder:  # a new run that could not start leaves no folder behind
                shutil.rmtree(spec.run_dir, ignore_errors=True)
            if exc.errno in DISK_FULL:
                raise MapushError("disk full (%s) while writing %s: %s; free space and run the "
                                  "command again" % (os.strerror(exc.errno), Path(spec.run_dir)
                                                     / RUN_CONFIG, "the previous one is intact"
                                                     if record else "no run was started"))
            raise
        print("mapush: run directory %s" % spec.run_dir, file=sys.stderr)
        ended = start_child(spec, config_path, lock.fd)
    finally:
        lock.release()
    status = ended.status
    if ended.killed:
        print("error: the training process did not stop within %.0f s of %s and was killed; "
              "newest complete checkpoint: %s (resume with --resume %s)"
              % (stop_grace_s(), signal_name(ended.stop_signal or signal.SIGTERM),
                 _newest_checkpoint(spec), spec.run_dir), file=sys.stderr)
        return 128 + signal.SIGKILL
    if status < 0:
        return report_crash(spec, -status)
    if status == 0 and ended.stop_signal is not None:
        print("mapush: stopped by %s; newest checkpoint: %s (resume with --resume %s)"
              % (signal_name(ended.stop_signal), _newest_checkpoint(spec),
                 spec.run_dir), file=sys.stderr)
    return status
