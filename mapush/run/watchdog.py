"""GPU memory watchdog: log memory in use and warn once when it creeps up (incident 001)."""
import os
import sys
from typing import Any, Callable, List, Optional, TextIO, Tuple

LogScalar = Callable[[str, float, int], Any]
MB = 1024.0 * 1024.0
OVERRIDE_ENV = "MAPUSH_WATCHDOG"


def host_rss_mb() -> float:
    """Resident set size of this process in MB (``/proc/self/statm``: Linux, as Isaac Gym)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def slope(xs: List[float], ys: List[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (0 when ``xs`` do not vary)."""
    import numpy as np

    return float(np.polyfit(xs, ys, 1)[0]) if len(set(xs)) > 1 else 0.0


class MemoryWatchdog(object):
    """Sample memory every ``every`` updates; warn once on steady growth after warm-up."""

    def __init__(self, device: Any, log_scalar: LogScalar, every: int = 10, warmup: int = 5,
                 window: int = 8, threshold_mb: float = 64.0, min_positive: float = 0.75,
                 stream: Optional[TextIO] = None,
                 sampler: Optional[Callable[[], dict]] = None) -> None:
        knobs = dict(every=every, warmup=warmup, window=window, threshold_mb=threshold_mb,
                     min_positive=min_positive)
        # MAPUSH_WATCHDOG="every=1,warmup=2,window=4,threshold_mb=16" wins: the watchdog of a
        # run tuned without code changes (short test runs, a noisier machine)
        for part in os.environ.get(OVERRIDE_ENV, "").split(","):
            key, _, value = part.strip().partition("=")
            if not key:
                continue
            try:
                if key not in knobs or not 0 <= float(value) < float("inf"):  # nan, inf, < 0
                    raise ValueError(key)
                knobs[key] = float(value)
            except ValueError:
                print("warning: %s: ignoring %r (knobs: %s)"
                      % (OVERRIDE_ENV, part, ", ".join(knobs)), file=sys.stderr)
        self.device, self.log_scalar = device, log_scalar
        self.every = max(1, int(knobs["every"]))
        self.warmup = max(0, int(knobs["warmup"]))
        self.window = max(3, int(knobs["window"]))
        self.threshold_mb = float(knobs["threshold_mb"])
        self.min_positive = float(knobs["min_positive"])
        self.stream, self._sampler, self.cuda = stream, sampler, str(device).startswith("cuda")
        self.track = "memory/gpu_allocated_mb" if self.cuda else "memory/host_rss_mb"
        self.samples = []  # type: List[Tuple[int, int, float]]  # (update, env_step, MB)
        self.seen, self.warned = 0, False
        self.warning = None  # type: Optional[str]

    def measure(self) -> dict:
        """Memory in use now, as ``tag -> MB``."""
        if self._sampler is not None:
            return dict(self._sampler())
        if self.cuda:
            import torch

            return {"memory/gpu_allocated_mb": torch.cuda.memory_allocated(self.device) / MB,
                    "memory/gpu_reserved_mb": torch.cuda.memory_reserved(self.device) / MB}
        return {"memory/host_rss_mb": host_rss_mb()}

    def sample(self, update: int, env_step: int) -> Optional[dict]:
        """Call after each update; measures and logs every ``every`` updates. Returns the
        measurement when one was taken."""
        if int(update) % self.every != 0:
            return None
        values = self.measure()
        for tag, value in sorted(values.items()):
            self.log_scalar(tag, float(value), int(env_step))
        self.seen += 1
        if self.seen > self.warmup and self.track in values:
            self.samples.append((int(update), int(env_step), float(values[self.track])))
            self.samples = self.samples[-self.window:]
            if not self.warned:
                self._check(env_step)
        return values

    def growth(self) -> Optional[Tuple[float, float]]:
        """``(MB per 1000 updates, MB per million env steps)`` when the last ``window``
        samples grow steadily, else None."""
        if len(self.samples) < self.window:
            return None
        updates = [float(s[0]) for s in self.samples]
        steps = [float(s[1]) for s in self.samples]
        mem = [s[2] for s in self.samples]
        deltas = [b - a for a, b in zip(mem, mem[1:])]
        positive = sum(1 for d in deltas if d > 0) / float(len(deltas))
        per_update = slope(updates, mem)
        if per_update <= 0 or positive < self.min_positive:
            return None
        if mem[-1] - mem[0] < self.threshold_mb:
            return None
        return per_update * 1000.0, slope(steps, mem) * 1e6

    def _check(self, env_step: int) -> None:
        found = self.growth()
        if found is None:
            return
        per_k, per_m = found
        what = "GPU allocated memory" if self.cuda else "host memory (RSS)"
        self.warning = (
            "warning: %s grows steadily after warm-up: +%.1f MB per 1000 updates "
            "(+%.1f MB per million env steps; %.0f MB now). Something keeps tensors alive "
            "across updates (the incident 001 leak pattern: e.g. appending to a list every step, "
            "or logging tensors instead of floats); a long run will run out of memory."
            % (what, per_k, per_m, self.samples[-1][2]))
        self.warned = True
        print(self.warning, file=self.stream or sys.stderr, flush=True)
        self.log_scalar("memory/growth_mb_per_1k_updates", per_k, int(env_step))
        self.log_scalar("memory/growth_mb_per_1m_steps", per_m, int(env_step))
