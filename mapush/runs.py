"""``mapush runs [DIR]``: one line per run under DIR: what it trains, how far it got, its
state, which of MQE's step graphs it replays and its last evaluation. Reads config.json, the
checkpoints, the lock, phases.log, step.json and eval.jsonl; writes nothing (not even the
lock file)."""
import argparse
import fcntl
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

from mapush.checkpoints.source import RUN_CONFIG, run_settings
from mapush.checkpoints.store import latest_checkpoint
from mapush.common.files import read_regular
from mapush.common.phases import read_phases
from mapush.envs.step_record import STEP_RECORD, short
from mapush.errors import UsageError
from mapush.provenance import world
from mapush.eval import read_evaluated
from mapush.run.crash import PHASE_LOG
from mapush.run.lock import LOCK_FILE

COLUMNS = ("run", "task", "object", "algo", "steps", "checkpoint", "state", "graphs", "success",
           "world", "variant")


def locked(run: Path) -> bool:
    """Whether a ``mapush train`` holds the run's lock (tried for a moment, never created)."""
    if not (run / LOCK_FILE).is_file():
        return False
    with open(str(run / LOCK_FILE)) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
    return False


def row(run: Path, root: Path) -> List[Any]:
    """A run's line; a record it cannot read is listed as damaged, with one line on stderr
    that says why (one bad run never hides the others)."""
    try:
        return _row(run, root)
    except (OSError, ValueError, TypeError, KeyError, OverflowError) as exc:
        print("mapush runs: %s: damaged record (%s)" % (run, exc), file=sys.stderr)
        return [run.relative_to(root), "-", "-", "-", "-", "-", "damaged record", "-", "-", "-",
                "-"]


def _json(path: Path) -> Any:
    return json.loads(read_regular(path))


def _row(run: Path, root: Path) -> List[Any]:
    """Running (its lock is held), done (its target reached), stopped (the child ended its
    loop), else crashed; the success rate of eval.jsonl's last line."""
    record = _json(run / RUN_CONFIG)
    spec = record["spec"]
    if not isinstance(spec, dict):
        raise TypeError("its spec is %s, not an object" % type(spec).__name__)
    target = int(spec.get("steps") or 1)
    latest = latest_checkpoint(run)
    step = latest[0] if latest else 0
    state = "running" if locked(run) else "done" if step >= target else \
        "stopped" if read_phases(str(run / PHASE_LOG))[-1:] == ["shutdown"] else "crashed"
    success = (read_evaluated(run) or [{}])[-1].get("success_rate")
    try:
        graphs = short(_json(run / STEP_RECORD))
    except (OSError, ValueError, AttributeError):
        graphs = "-"
    return [run.relative_to(root), spec.get("task"), spec.get("object"), spec.get("algo"),
            "%d/%d" % (step, target), latest[1].name if latest else "-", state, graphs,
            "-" if success is None else "%.3f" % float(success),
            world((record.get("provenance") or {}).get("versions") or {}), variant(run, spec)]


def variant(run: Path, spec: Dict[str, Any]) -> str:
    """A short form of :func:`run_settings`; ``-`` for none."""
    text = " ".join("%s=%s" % item for item in run_settings(run, spec).items())
    return (text[:57] + "...") if len(text) > 60 else text or "-"


def main(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if args.dir == "runs" and not root.exists():  # before the first run: nothing to list
        print("0 run(s): no runs/ folder here yet (mapush train makes it)")
        return 0
    if not root.is_dir():
        raise UsageError("DIR %s: no such folder (runs are written under runs/ by default)"
                         % root)
    rows = [row(path.parent, root) for path in sorted(root.rglob(RUN_CONFIG))
            if (path.parent / PHASE_LOG).exists() or (path.parent / "checkpoints").is_dir()]
    table = [list(COLUMNS)] + [[str(cell) for cell in r] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    for r in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(r, widths)).rstrip())
    print("%d run(s) under %s" % (len(rows), root))
    return 0
