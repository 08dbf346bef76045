"""What the child hands a trainer: the spec, where to write, and when to stop."""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from tqdm import tqdm

from mapush import schema
from mapush.spec import RunSpec

PROGRESS_FILE, PROGRESS_HEADER = "progress.txt", "steps,success_rate,steps_per_s\n"


class StopFlag:
    """Set by SIGINT/SIGTERM in the child; trainers poll it, then write a final checkpoint
    (docs/architecture.md, "Modules")."""

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


def training_videos(spec: RunSpec, env: Any, step: int) -> Any:
    """``--record-video``: env 0 filmed into RUN/videos (None without the flag)."""
    if not spec.record_video:
        return None
    from mapush.video import TrainingVideos

    return TrainingVideos(env, Path(spec.run_dir) / "videos", int(spec.checkpoint_interval),
                          step, quiet=not schema.verbose())


def start_wandb(spec: RunSpec, config: Dict[str, Any], **extra: Any) -> None:
    """``--wandb``: one W&B run per run folder (its id is the folder's name, so a resume
    continues it) in the project MAPush, under no one's entity."""
    import wandb

    run_dir = Path(spec.run_dir).resolve()
    wandb.init(project="MAPush", entity=None, dir=str(run_dir), config=config,
               name="%s_%s_seed%d" % (spec.task, spec.object, spec.seed), job_type="training",
               resume="allow", id=re.sub(r"[^A-Za-z0-9_-]", "-", run_dir.name)[:64], **extra)


def report_progress(log: Any, head: str, update: int, updates: int, step: int, total: int,
                    fps: float, success: Optional[float]) -> None:
    """Every trainer's progress line on stdout, and its row of ``progress.txt`` (``log``,
    open for appending: a new file gets the header first)."""
    eta = tqdm.format_interval((total - step) / fps) if fps > 0 and total >= step else "?"
    print("[%s] update %d/%d | steps %d/%d | %.0f steps/s | success %s | ETA %s"
          % (head, update, updates, step, total, fps, "-" if success is None
             else "%.3f" % success, eta), flush=True)
    log.write(("" if log.tell() else PROGRESS_HEADER) + "%d,%s,%.1f\n"
              % (step, "" if success is None else success, fps))
    log.flush()
