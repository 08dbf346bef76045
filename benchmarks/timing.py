"""Timing and memory helpers: device-synchronized clocks, summaries, process memory.

Device work is asynchronous, so every timed region starts and ends with a synchronize of
the device under test; on the CPU that is a no-op.
"""
import os
import statistics
import time
from typing import Any, Callable, Dict, List, Sequence

import torch


def synchronize(device: Any) -> None:
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(fn: Callable[[], Any], steps: int, device: Any) -> float:
    """Seconds per call of ``fn`` over ``steps`` calls, synchronized before and after."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / steps


def summarize(values: Sequence[float], scale: float = 1.0) -> Dict[str, Any]:
    """Median and spread (min, max, interquartile range) of ``values`` x ``scale``."""
    vals = sorted(float(v) * scale for v in values)
    if not vals:
        return {"n": 0}
    quart = statistics.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1],
            "q1": quart[0], "q3": quart[2], "n": len(vals)}


def host_rss_mb() -> float:
    """Resident set size of this process (``/proc/self/statm``; 0 where it is missing)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20


def device_memory_mb(device: Any) -> Dict[str, float]:
    device = torch.device(device)
    if device.type != "cuda":
        return {"allocated": 0.0, "reserved": 0.0}
    return {"allocated": torch.cuda.memory_allocated(device) / 2.0 ** 20,
            "reserved": torch.cuda.memory_reserved(device) / 2.0 ** 20}


def growth(samples: List[float]) -> Dict[str, float]:
    """Growth from the first to the last sample, absolute and in percent of the first."""
    if not samples:
        return {"first": 0.0, "last": 0.0, "max": 0.0, "growth": 0.0, "growth_pct": 0.0}
    first, last = samples[0], samples[-1]
    pct = 100.0 * (last - first) / first if first > 0 else (0.0 if last == first else float("inf"))
    return {"first": first, "last": last, "max": max(samples), "growth": last - first,
            "growth_pct": pct}
