"""``mapush train`` in the parent process: preflight, run directory, child, exit status.

The simulation runs in a child process so that a crash inside Isaac Gym/PhysX (a bare
SIGSEGV) can be reported with the phase it happened in, and so that SIGINT/SIGTERM reach a
process that can still write its final checkpoint.
"""
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from mapush.common.clock import now
from mapush.common.hashing import sha256
from mapush.errors import MapushError, UsageError
from mapush.proc import Supervisor, signal_name
from mapush.provenance import provenance, warn_if_incomplete
from mapush.common.atomic import DISK_FULL, write_json, write_text
from mapush.spec import UPPER, RunSpec

if TYPE_CHECKING:  # pragma: no cover
    from mapush.run.lock import RunLock

UPPER_CONFIG = Path("mqe") / "envs" / "configs" / "go1_push_upper_config.py"

CONFIG = "config.json"
PHASE_LOG = "phases.log"


def stage_object_config(spec: RunSpec) -> Tuple[RunSpec, Dict[str, Any]]:
    """Copy the run's object config into ``<run_dir>/task/config.py`` (as upstream's
    train.py copies it into its results folder) and point the spec at the copy, so the run,
    its resumes and its evaluation use the same file (a resume does not stage again)."""
    from mapush.checkpoints.source import OBJECT_CONFIG
    from mapush.objects import mapush_root, object_config_path

    copy = Path(spec.run_dir) / OBJECT_CONFIG
    if spec.task == UPPER:
        # The high level runs MQE's installed upper config, not an object's.
        source = mapush_root() / UPPER_CONFIG
        if not source.is_file():
            return spec, {"source": None, "copy": None, "sha256": None,
                          "note": "no %s under MAPUSH_ROOT to copy" % UPPER_CONFIG}
        write_text(copy, source.read_text())
        return spec, {"source": str(source.resolve()), "copy": str(OBJECT_CONFIG),
                      "sha256": sha256(copy)}
    source = Path(spec.object_config) if spec.object_config else object_config_path(spec.object)
    write_text(copy, source.read_text())
    record = {"source": str(source.resolve()), "copy": str(OBJECT_CONFIG),
              "sha256": sha256(copy)}
    return spec.with_changes(object_config=str(copy.resolve())), record


OVERRIDES = "overrides.yaml"  # the run's copy of --config (OpenRL reads only *.yaml)


def stage_overrides(spec: RunSpec) -> Tuple[RunSpec, Optional[Dict[str, Any]]]:
    """Copy ``--config`` into ``<run_dir>/overrides.yaml`` and point the spec at the copy:
    the run, its resumes and its evaluation read what it was started with, whatever later
    happens to the user's file."""
    if not spec.config:
        return spec, None
    copy = Path(spec.run_dir) / OVERRIDES
    write_text(copy, Path(spec.config).read_text())
    return spec.with_changes(config=str(copy.resolve())), {
        "source": str(Path(spec.config).resolve()), "copy": OVERRIDES, "sha256": sha256(copy)}


def write_config(spec: RunSpec, record: Optional[Dict[str, Any]] = None
                 ) -> Tuple[Path, RunSpec]:
    """``<run_dir>/config.json``: the resolved options plus the provenance of the stack, the
    object config's and ``--config``'s copies and sha256, and the checkpoint a new run starts
    from. ``record``: the run's config.json when resuming; the new record keeps it and
    appends the resume (its spec, stack and command) under ``resumes``."""
    run_dir = Path(spec.run_dir)
    path = run_dir / CONFIG
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
    spec, overrides = stage_overrides(spec)
    new = {"spec": spec.to_dict(), "provenance": stack, "created": now(),
           "command": sys.argv, "object_config": object_config,
           "start": {"steps": spec.steps, "num_envs": spec.num_envs}}  # type: Dict[str, Any]
    if overrides:
        new["config_override"] = overrides
    if spec.command_net:
        new["command_net"] = {"path": spec.command_net, "sha256": sha256(spec.command_net)}
    if spec.init_from:
        from mapush.checkpoints.policy import checkpoint_sha256

        new["init_from"] = {"checkpoint": spec.init_from,
                            "sha256": checkpoint_sha256(spec.init_from)}
    write_json(path, new)
    return path, spec


def child_command(config_path: Path) -> List[str]:
    return [sys.executable, "-m", "mapush.run.child", str(config_path)]


STOP_GRACE_ENV = "MAPUSH_STOP_GRACE_S"
# How long the child may take, after the first SIGINT/SIGTERM, to write its final checkpoint
# and leave before the parent kills it. Below compose's stop_grace_period (60 s), so that the
# parent still reports what happened before Docker's SIGKILL.
DEFAULT_STOP_GRACE_S = 50.0


def stop_grace_s() -> float:
    raw = os.environ.get(STOP_GRACE_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_STOP_GRACE_S
    except ValueError:
        value = DEFAULT_STOP_GRACE_S
    return value if value > 0 else DEFAULT_STOP_GRACE_S


@dataclass
class ChildOutcome:
    status: int                        # as subprocess reports it: negative for a signal
    stop_signal: Optional[int] = None  # the first SIGINT/SIGTERM the parent forwarded
    killed: bool = False               # the parent killed it after the grace period


def _supervisor(grace: float) -> Supervisor:
    return Supervisor("mapush", "the trainer writes a final checkpoint and stops (the child "
                      "is killed if it has not left within %.0f s)" % grace, grace,
                      again="already stopping, waiting for the final checkpoint")


def supervise(proc: "subprocess.Popen[bytes]", grace: float) -> ChildOutcome:
    """Wait for the child (:class:`mapush.proc.Supervisor`): the first SIGINT/SIGTERM is
    forwarded, the child writes a final checkpoint and exits 0; it is killed if still
    running ``grace`` seconds later."""
    sup = _supervisor(grace)
    sup.children.append(proc)
    with sup:
        status = sup.wait(proc)
    return ChildOutcome(status, sup.stop_signal, sup.killed)


def start_child(spec: RunSpec, config_path: Path, lock_fd: Optional[int] = None
                ) -> ChildOutcome:
    """The training child, holding the run's lock (``lock_fd``) with the parent."""
    run_dir = Path(spec.run_dir)
    phase_file = run_dir / PHASE_LOG
    write_text(phase_file, "")
    env = dict(os.environ, MAPUSH_PHASE_FILE=str(phase_file), PYTHONUNBUFFERED="1")
    with _supervisor(stop_grace_s()) as sup:
        proc = sup.start(child_command(config_path), env=env,
                         pass_fds=() if lock_fd is None else (lock_fd,))
        status = sup.wait(proc)
    return ChildOutcome(status, sup.stop_signal, sup.killed)


def _newest_checkpoint(spec: RunSpec) -> str:
    from mapush.checkpoints.store import latest_checkpoint

    latest = latest_checkpoint(Path(spec.run_dir))
    return "%s (step %d)" % (latest[1], latest[0]) if latest else "none"


def check_writable(spec: RunSpec, resuming: bool) -> None:
    """A read-only run folder (or parent) is one UsageError before anything starts."""
    from mapush.common.atomic import writable

    run_dir = Path(spec.run_dir)
    folders = [run_dir] + [run_dir / sub for sub in ("checkpoints", "logs", "task")
                           if (run_dir / sub).is_dir()] if resuming else [run_dir]
    for folder in folders:
        if not writable(folder):
            raise UsageError("%s is read-only: %s cannot write its checkpoints and logs there; "
                             "make it writable (chmod u+w, or mount it read-write), or %s"
                             % (folder, "--resume" if resuming else "--run-dir",
                                "copy the run and resume the copy" if resuming
                                else "pick another --run-dir"))


def check_spec(spec: RunSpec, record: Optional[Dict[str, Any]]) -> None:
    """Every refusal that needs no simulation, before the run folder exists or changes: the
    trainer's config (keys, values, steps), a resume with nothing left to train, a
    read-only folder."""
    from mapush import trainers
    from mapush.checkpoints.store import read_meta

    resume_meta = (read_meta(Path(spec.resume)) or {}) if spec.resume else {}
    try:
        trainer = trainers.load(spec.algo)
    except ImportError as exc:
        raise MapushError("cannot check --algo %s's config: %s (the training image has it; "
                          "run mapush train there)" % (spec.algo, exc))
    updates = trainer.planned_updates(spec, resume_meta)
    if record is not None and updates <= 0:
        raise UsageError("--resume %s: the run has trained %s env steps and its target "
                         "(--steps) is %d, less than one update away: pass --steps N with N "
                         "larger to train further"
                         % (spec.run_dir, resume_meta.get("step", 0), spec.steps))
    check_writable(spec, record is not None)


def open_run(spec: RunSpec, record: Optional[Dict[str, Any]]) -> "RunLock":
    """Create the run folder (a new run) and take its lock; a new run into a folder that
    another command filled meanwhile is refused."""
    from mapush.run.lock import RunLock
    from mapush.run.resume import holds_run

    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir).acquire()
    if record is None and holds_run(run_dir):
        lock.release()
        raise UsageError("%s already holds a run: continue it with --resume %s"
                         % (run_dir, run_dir))
    return lock


def _disk_full(exc: OSError, what: Path) -> MapushError:
    return MapushError("disk full (%s) while writing %s: the previous one is intact; free "
                       "space and run the command again" % (os.strerror(exc.errno), what))


def train(spec: RunSpec, preflight: bool = True, record: Optional[Dict[str, Any]] = None
          ) -> int:
    """``mapush train``: 0 after a completed run or one stopped by SIGINT/SIGTERM after its
    final checkpoint; the child's status on a failure; 128 + signal with a diagnosis when
    the child died from a signal. ``record``: the config.json of the run a resume
    continues (None: a new run). Nothing is written before every check passed."""
    if preflight:
        from mapush.diagnostics.doctor import preflight as run_preflight

        run_preflight(spec)
    check_spec(spec, record)
    lock = open_run(spec, record)
    try:
        try:
            config_path, spec = write_config(spec, record)
        except OSError as exc:
            if exc.errno in DISK_FULL:
                raise _disk_full(exc, Path(spec.run_dir) / CONFIG)
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
        from mapush.run.crash import report_crash

        return report_crash(spec, -status)
    if status == 0 and ended.stop_signal is not None:
        print("mapush: stopped by %s; newest checkpoint: %s (resume with --resume %s)"
              % (signal_name(ended.stop_signal), _newest_checkpoint(spec),
                 spec.run_dir), file=sys.stderr)
    return status
