"""``mapush train`` in the parent process: preflight, run directory, child, exit status.

The simulation runs in a child process so that a crash inside Isaac Gym/PhysX (a bare
SIGSEGV) can be reported with the phase it happened in, and so that SIGINT/SIGTERM reach a
process that can still write its final checkpoint.
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from mapush.provenance import provenance, warn_if_incomplete
from mapush.run.atomic import write_json, write_text
from mapush.spec import UPPER, RunSpec

UPPER_CONFIG = Path("mqe") / "envs" / "configs" / "go1_push_upper_config.py"

CONFIG = "config.json"
PHASE_LOG = "phases.log"


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def stage_object_config(spec: RunSpec) -> Tuple[RunSpec, Dict[str, Any]]:
    """Copy the run's object config into ``<run_dir>/task/config.py`` (as upstream's
    train.py copies it into its results folder) and point the spec at the copy, so the run,
    its resumes and its evaluation use the same file. A resumed run keeps its copy."""
    from mapush.checkpoint_source import OBJECT_CONFIG
    from mapush.objects import mapush_root, object_config_path
    from mapush.policy_file import sha256

    copy = Path(spec.run_dir) / OBJECT_CONFIG
    if spec.task == UPPER:
        # The high level runs MQE's installed upper config, not an object's.
        source = mapush_root() / UPPER_CONFIG
        if not source.is_file():
            return spec, {"source": None, "copy": None, "sha256": None,
                          "note": "no %s under MAPUSH_ROOT to copy" % UPPER_CONFIG}
        copy.parent.mkdir(parents=True, exist_ok=True)
        write_text(copy, source.read_text())
        return spec, {"source": str(source.resolve()), "copy": str(OBJECT_CONFIG),
                      "sha256": sha256(copy)}
    if spec.resume and copy.is_file():
        source = copy
    else:
        source = Path(spec.object_config) if spec.object_config else \
            object_config_path(spec.object)
        copy.parent.mkdir(parents=True, exist_ok=True)
        write_text(copy, source.read_text())
    record = {"source": str(source.resolve()), "copy": str(OBJECT_CONFIG),
              "sha256": sha256(copy)}
    return spec.with_changes(object_config=str(copy.resolve())), record


def write_config(spec: RunSpec) -> Tuple[Path, RunSpec]:
    """``<run_dir>/config.json``: the resolved options plus the provenance of the stack, the
    object config's copy and sha256, and the checkpoint a new run starts from. Resuming into
    an existing run keeps its history under ``resumes``."""
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CONFIG
    spec, object_config = stage_object_config(spec)
    stack = provenance()
    warn_if_incomplete(stack, str(path))
    record = {"spec": spec.to_dict(), "provenance": stack, "created": _now(),
              "command": sys.argv, "object_config": object_config}  # type: Dict[str, Any]
    if spec.command_net:
        from mapush.policy_file import sha256

        record["command_net"] = {"path": spec.command_net, "sha256": sha256(spec.command_net)}
    if spec.init_from:
        from mapush.policy_file import checkpoint_sha256

        record["init_from"] = {"checkpoint": spec.init_from,
                               "sha256": checkpoint_sha256(spec.init_from)}
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
        except ValueError:
            previous = {}
        resumes = list(previous.get("resumes", []))  # type: List[Any]
        resumes.append({"at": _now(), "from": spec.resume, "spec": spec.to_dict()})
        record = dict(previous, spec=spec.to_dict(), resumes=resumes)
        record.setdefault("object_config", object_config)
    write_json(path, record)
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


def supervise(proc: "subprocess.Popen[bytes]", grace: float) -> ChildOutcome:
    """Wait for the child. The first SIGINT/SIGTERM is forwarded (the child writes a final
    checkpoint and exits 0); later ones are not, so a second Ctrl-C or a repeated stop does
    not cut a checkpoint short. If the child is still running ``grace`` seconds after the
    first signal it is killed (atomic checkpoints leave the previous one intact)."""
    outcome = ChildOutcome(status=0)
    pending = []  # type: List[int]

    def on_signal(signum: int, _frame: Any) -> None:
        pending.append(signum)
        if outcome.stop_signal is None:
            outcome.stop_signal = signum
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    deadline = None  # type: Optional[float]
    try:
        while True:
            try:
                outcome.status = proc.wait(timeout=0.2)
                return outcome
            except subprocess.TimeoutExpired:
                pass
            while pending:
                signum = pending.pop(0)
                name = signal.Signals(signum).name
                if deadline is None:
                    deadline = time.monotonic() + grace
                    print("mapush: %s: the trainer writes a final checkpoint and stops (the child "
                          "is killed if it has not left within %.0f s)" % (name, grace),
                          file=sys.stderr, flush=True)
                else:
                    print("mapush: %s again: already stopping, waiting for the final checkpoint "
                          "(%.0f s left)" % (name, max(0.0, deadline - time.monotonic())),
                          file=sys.stderr, flush=True)
            if deadline is not None and not outcome.killed and time.monotonic() > deadline:
                print("mapush: the training process did not stop within %.0f s; killing it"
                      % grace, file=sys.stderr, flush=True)
                outcome.killed = True
                proc.kill()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def start_child(spec: RunSpec, config_path: Path) -> ChildOutcome:
    run_dir = Path(spec.run_dir)
    phase_file = run_dir / PHASE_LOG
    phase_file.write_text("")
    env = dict(os.environ, MAPUSH_PHASE_FILE=str(phase_file), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(child_command(config_path), env=env)
    return supervise(proc, stop_grace_s())


def run_child(spec: RunSpec, config_path: Path) -> int:
    """Start the child, forward SIGINT/SIGTERM to it, return its exit status (negative for
    a signal, as ``subprocess`` reports it)."""
    return start_child(spec, config_path).status


def _newest_checkpoint(spec: RunSpec) -> str:
    from mapush.run.checkpoints import latest_checkpoint

    latest = latest_checkpoint(Path(spec.run_dir))
    return "%s (step %d)" % (latest[1], latest[0]) if latest else "none"


def train(spec: RunSpec, preflight: bool = True) -> int:
    """``mapush train``: 0 after a completed run or one stopped by SIGINT/SIGTERM after its
    final checkpoint; the child's status on a failure; 128 + signal with a diagnosis when
    the child died from a signal."""
    if preflight:
        from mapush.diagnostics.doctor import preflight as run_preflight

        run_preflight(spec)
    config_path, spec = write_config(spec)
    print("mapush: run directory %s" % spec.run_dir, file=sys.stderr)
    outcome = start_child(spec, config_path)
    status = outcome.status
    if outcome.killed:
        print("error: the training process did not stop within %.0f s of %s and was killed; "
              "newest complete checkpoint: %s (resume with --resume %s)"
              % (stop_grace_s(), signal.Signals(outcome.stop_signal or signal.SIGTERM).name,
                 _newest_checkpoint(spec), spec.run_dir), file=sys.stderr)
        return 128 + signal.SIGKILL
    if status < 0:
        from mapush.run.crash import report_crash

        return report_crash(spec, -status)
    if status == 0 and outcome.stop_signal is not None:
        print("mapush: stopped by %s; newest checkpoint: %s (resume with --resume %s)"
              % (signal.Signals(outcome.stop_signal).name, _newest_checkpoint(spec),
                 spec.run_dir), file=sys.stderr)
    return status
