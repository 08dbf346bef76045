"""What the child hands a trainer: the spec, where to write, and when to stop."""
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from mapush.spec import RunSpec


class StopFlag:
    """Set by SIGINT/SIGTERM in the child; trainers poll it between updates and then write
    a final checkpoint. A second signal is not fatal either: the checkpoint must finish."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signum = None  # type: Optional[int]

    def handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        self._event.set()

    def set(self) -> None:
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()


@dataclass
class RunContext:
    spec: RunSpec
    stop: StopFlag = field(default_factory=StopFlag)
    # Set when resuming: the checkpoint folder and its meta.json content.
    resume_path: Optional[Path] = None
    resume_meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.spec.run_dir)

    @property
    def start_step(self) -> int:
        return int(self.resume_meta.get("step", 0))
