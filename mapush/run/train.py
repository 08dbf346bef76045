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
from pathlib import Path
from typing import Any, Dict, List

from mapush.provenance import provenance
from mapush.run.atomic import write_json
from mapush.spec import RunSpec

CONFIG = "config.json"
PHASE_LOG = "phases.log"


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def write_config(spec: RunSpec) -> Path:
    """``<run_dir>/config.json``: the resolved options plus the provenance of the stack.
    Resuming into an existing run keeps its history under ``resumes``."""
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CONFIG
    record = {"spec": spec.to_dict(), "provenance": provenance(), "created": _now(),
              "command": sys.argv}  # type: Dict[str, Any]
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
        except ValueError:
            previous = {}
        resumes = list(previous.get("resumes", []))  # type: List[Any]
        resumes.append({"at": _now(), "from": spec.resume, "spec": spec.to_dict()})
        record = dict(previous, spec=spec.to_dict(), resumes=resumes)
    write_json(path, record)
    return path


def child_command(config_path: Path) -> List[str]:
    return [sys.executable, "-m", "mapush.run.child", str(config_path)]


def run_child(spec: RunSpec, config_path: Path) -> int:
    """Start the child, forward SIGINT/SIGTERM to it, return its exit status (negative for
    a signal, as ``subprocess`` reports it)."""
    run_dir = Path(spec.run_dir)
    phase_file = run_dir / PHASE_LOG
    phase_file.write_text("")
    env = dict(os.environ, MAPUSH_PHASE_FILE=str(phase_file), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(child_command(config_path), env=env)

    def forward(signum: int, _frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # pragma: no cover - handler replaced above
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def train(spec: RunSpec, preflight: bool = True) -> int:
    if preflight:
        from mapush.diagnostics.doctor import preflight as run_preflight

        run_preflight(spec)
    config_path = write_config(spec)
    print("mapush: run directory %s" % spec.run_dir, file=sys.stderr)
    status = run_child(spec, config_path)
    if status < 0:
        from mapush.run.crash import report_crash

        return report_crash(spec, -status)
    return status
