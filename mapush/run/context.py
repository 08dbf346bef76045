"""What the child hands a trainer: the spec, where to write, and when to stop."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from mapush.spec import RunSpec


class StopFlag:
    """Set by SIGINT/SIGTERM in the child; trainers poll it between updates and then write
    a final checkpoint. A second signal is not fatal either: the checkpoint must finish.

    The handler takes no lock: Ctrl-C reaches the child from the terminal and again from
    its parent, and a second handler that runs while the first holds a lock (a
    ``threading.Event``'s) waits for it forever."""

    def __init__(self) -> None:
        self.signum = None  # type: Optional[int]

    def handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None


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
