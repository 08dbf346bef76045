"""Phase markers the child leaves for the parent, so a bare segfault can be placed."""
import os
import time
from typing import Any, Dict, List

from mapush.common.files import read_regular

PHASE_ENV = "MAPUSH_PHASE_FILE"
# In the order a run reaches them; the names are printed in crash diagnoses.
PHASES = ("start", "create_sim", "terrain", "envs", "prepare_sim", "first_step",
          "training", "checkpoint", "shutdown")
_last = {}  # type: Dict[str, Any]  # this process's phase file descriptor and phase


def mark(phase: str) -> None:
    """Append ``<time> <phase>`` to ``$MAPUSH_PHASE_FILE`` when the phase changes (nothing
    without the variable); the file is opened once, at the first mark. Marking the current
    phase again is one comparison (the HARL loop marks every env step)."""
    if phase == _last.get("phase"):
        return
    if phase not in PHASES:
        raise ValueError("unknown phase %r" % phase)
    if "fd" not in _last:
        path = os.environ.get(PHASE_ENV)
        _last["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path \
            else None
    _last["phase"] = phase
    if _last["fd"] is not None:
        os.write(_last["fd"], ("%.3f %s\n" % (time.time(), phase)).encode())


def read_phases(path: str) -> List[str]:
    """Phases recorded in ``path``, oldest first (empty when the file is missing)."""
    try:
        lines = read_regular(path).splitlines()
    except (OSError, ValueError):  # missing, not a regular file (a FIFO), not text
        return []
    return [line.split(" ", 1)[1] for line in lines if " " in line]
