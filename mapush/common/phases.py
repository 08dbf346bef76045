"""Phase markers the child leaves for the parent, so a bare segfault can be placed.

The child appends ``<unix time> <phase>`` lines to the file named by ``MAPUSH_PHASE_FILE``
with unbuffered ``os.write`` calls: the kernel keeps what was written even when the process
dies from a signal a microsecond later.
"""
import os
import time
from typing import List, Optional

PHASE_ENV = "MAPUSH_PHASE_FILE"
# In the order a run reaches them; the names are printed in crash diagnoses.
PHASES = ("start", "create_sim", "terrain", "envs", "prepare_sim", "first_step",
          "training", "checkpoint", "shutdown")


class PhaseReporter:
    def __init__(self, path: Optional[str] = None) -> None:
        path = path if path is not None else os.environ.get(PHASE_ENV)
        self._fd = None
        self.current = None  # type: Optional[str]
        if path:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def mark(self, phase: str) -> None:
        if phase not in PHASES:
            raise ValueError("unknown phase %r" % phase)
        if phase == self.current:
            return
        self.current = phase
        if self._fd is not None:
            os.write(self._fd, ("%.3f %s\n" % (time.time(), phase)).encode())


_reporter = None  # type: Optional[PhaseReporter]


def reporter() -> PhaseReporter:
    """The process-wide reporter (reads ``MAPUSH_PHASE_FILE`` once)."""
    global _reporter
    if _reporter is None:
        _reporter = PhaseReporter()
    return _reporter


def mark(phase: str) -> None:
    reporter().mark(phase)


def read_phases(path: str) -> List[str]:
    """Phases recorded in ``path``, oldest first (empty when the file is missing)."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    return [line.split(" ", 1)[1] for line in lines if " " in line]
