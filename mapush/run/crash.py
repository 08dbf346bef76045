"""Turn a dead training child into a diagnosis: where it died, and what to do about it."""
import json
import signal
import sys
from pathlib import Path

import yaml

from mapush.proc import signal_name
from mapush.common.phases import read_phases
from mapush.diagnostics.gpu import free_mb_now
from mapush.physx_budget import BUDGET_FILE
from mapush.spec import RunSpec

PHASE_LOG = "phases.log"  # the phases the child reached (mapush.common.phases)

# What a dead child most likely died of: crash.yaml (causes by phase, SIGKILL, exceptions).
_TEXT = yaml.safe_load((Path(__file__).resolve().parent / "crash.yaml").read_text())
CAUSES = {phase: [tuple(c) for c in causes] for phase, causes in _TEXT["causes"].items()}
_SIGKILL_CAUSE, _EXCEPTION_HINTS = tuple(_TEXT["sigkill"]), [tuple(h) for h in _TEXT["exceptions"]]


def report_crash(spec: RunSpec, signum: int) -> int:
    """Print the diagnosis of a child killed by ``signum``; return the exit status
    (128 + signum). The last line on stderr is the one-line diagnosis."""
    run_dir = Path(spec.run_dir)
    reached = read_phases(str(run_dir / PHASE_LOG))
    phase = (reached or ["start"])[-1]
    name = signal_name(signum)
    try:
        free = free_mb_now(spec.sim_device)
    except Exception:  # noqa: BLE001 - a diagnosis must not crash
        free = None
    free_text = ("%.0f MiB free on %s now" % (free, spec.sim_device) if free is not None
                 else "GPU memory free unknown (%s)" % (
                     "CPU simulation" if not str(spec.sim_device).startswith("cuda")
                     else "nvidia-smi unavailable"))
    causes = ([_SIGKILL_CAUSE] if signum == signal.SIGKILL else []) + \
        CAUSES.get(phase, CAUSES["training"])
    err = sys.stderr
    print("", file=err)
    print("mapush: the training process died from %s in phase '%s'" % (name, phase), file=err)
    print("mapush: %s" % free_text, file=err)
    try:
        budget = json.loads((run_dir / BUDGET_FILE).read_text())
        print("mapush: the child chose max_gpu_contact_pairs=%s (%.0f MiB, %s) with %s free on %s"
              % (budget.get("pairs"), budget.get("bytes", 0) / 1048576.0, budget.get("source"),
                 "%.0f MiB" % (budget["free_bytes"] / 1048576.0) if budget.get("free_bytes")
                 else "unknown memory", budget.get("device")), file=err)
    except (OSError, ValueError):
        pass  # no budget recorded: the sim never sized one
    print("mapush: likely causes, most likely first:", file=err)
    for number, (cause, fix) in enumerate(causes, 1):
        print("  %d. %s\n     fix: %s" % (number, cause, fix), file=err)
    print("mapush: phases reached: %s (%s)" % (", ".join(reached) or "none",
                                              run_dir / PHASE_LOG), file=err)
    print("error: training died from %s in phase %s (%s); most likely %s: %s"
          % (name, phase, free_text, causes[0][0], causes[0][1]), file=err, flush=True)
    return 128 + signum


def diagnose_exception(exc: BaseException) -> str:
    """The one-line ``error:`` diagnosis of an exception that ended the child."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else ""
    lowered = text.lower()
    if isinstance(exc, KeyboardInterrupt):
        return "error: interrupted before the stop handlers were installed"
    for needle, hint in _EXCEPTION_HINTS:
        if needle in lowered:
            return "error: training failed: %s: %s -- %s" % (type(exc).__name__, first, hint)
    return "error: training failed: %s: %s" % (type(exc).__name__, first)
