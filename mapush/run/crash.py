"""Turn a dead child into a diagnosis. (Minimal: extended by the lifecycle work.)"""
import signal
import sys
from pathlib import Path

from mapush.run.phases import read_phases
from mapush.run.train import PHASE_LOG
from mapush.spec import RunSpec


def report_crash(spec: RunSpec, signum: int) -> int:
    seen = read_phases(str(Path(spec.run_dir) / PHASE_LOG))
    phase = seen[-1] if seen else "before start"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "signal %d" % signum
    print("error: the training process died from %s in phase %s" % (name, phase), file=sys.stderr)
    return 128 + signum


def diagnose_exception(exc: BaseException) -> str:
    return "error: training failed: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
