"""Measurements (a) adapter cost per env step and (c) memory over many steps.

(a) For each size, every variant gets its own double; after a warm-up the variants are
timed in turn, ``reps`` times each (interleaved, so drift hits all alike), ``steps`` calls
per timing, synchronized with the device before and after. Adapter cost of a rep is its
time per step minus the time per step of the double alone plus one device sync in the same
rep (the least any consumer of the double must pay).

(c) One variant at a time: warm up, then ``steps`` steps with the trainer's logging path
every ``log_every`` steps, sampling the device allocator and process RSS ``samples`` times.
"""
import time
import traceback
from typing import Any, Dict, List, Sequence

from benchmarks import adapters
from benchmarks.timing import device_memory_mb, growth, host_rss_mb, summarize, time_steps


def _build_all(names: Sequence[str], num_envs: int, device: Any,
               physics_us: float) -> Dict[str, Any]:
    built, skipped = {}, {}
    for name in names:
        try:
            built[name] = adapters.build(name, num_envs, device, physics_us)
        except Exception as exc:  # noqa: BLE001 - a missing adapter is reported, not fatal
            skipped[name] = "%s: %s" % (type(exc).__name__, exc)
    return {"built": built, "skipped": skipped}


def adapter_cost(sizes: Sequence[int], device: Any, reps: int, steps: int, warmup: int,
                 physics_us: float = 0.0) -> Dict[str, Any]:
    names = ["double", "double_sync"] + list(adapters.ADAPTERS)
    out = {"sizes": {}, "reps": reps, "steps": steps, "warmup": warmup,
           "physics_us": physics_us}  # type: Dict[str, Any]
    for n in sizes:
        got = _build_all(names, n, device, physics_us)
        built = got["built"]
        for step, _log in built.values():
            for _ in range(warmup):
                step()
        per_step = {name: [] for name in built}  # type: Dict[str, List[float]]
        for _ in range(reps):
            for name, (step, _log) in built.items():
                per_step[name].append(time_steps(step, steps, device))
        row = {"skipped": got["skipped"], "step_ms": {}, "cost_ms": {}}  # type: Dict[str, Any]
        for name, vals in per_step.items():
            row["step_ms"][name] = summarize(vals, 1e3)
            if name not in ("double", "double_sync") and "double_sync" in per_step:
                floor = per_step["double_sync"]
                row["cost_ms"][name] = summarize([v - f for v, f in zip(vals, floor)], 1e3)
        seed = row["cost_ms"].get("seed", {}).get("median")
        row["speedup_vs_seed"] = {
            name: (seed / c["median"] if seed and c.get("median", 0) > 0 else None)
            for name, c in row["cost_ms"].items() if name != "seed"}
        out["sizes"][str(n)] = row
        del got, built
    return out


def memory(num_envs: int, device: Any, steps: int, warmup: int, samples: int = 20,
           log_every: int = 200, physics_us: float = 0.0) -> Dict[str, Any]:
    out = {"num_envs": num_envs, "steps": steps, "warmup": warmup,
           "log_every": log_every, "variants": {}}  # type: Dict[str, Any]
    every = max(1, steps // samples)
    for name in adapters.ADAPTERS:
        try:
            step, log = adapters.build(name, num_envs, device, physics_us)
        except Exception as exc:  # noqa: BLE001
            out["variants"][name] = {"skipped": "%s: %s" % (type(exc).__name__, exc)}
            continue
        try:
            for i in range(warmup):
                step()
                if (i + 1) % log_every == 0:
                    log()
            alloc, reserved, rss = [], [], []
            for i in range(steps):
                step()
                if (i + 1) % log_every == 0:
                    log()
                if i % every == 0 or i == steps - 1:
                    mem = device_memory_mb(device)
                    alloc.append(mem["allocated"])
                    reserved.append(mem["reserved"])
                    rss.append(host_rss_mb())
            out["variants"][name] = {"device_allocated_mb": growth(alloc),
                                     "device_reserved_mb": growth(reserved),
                                     "host_rss_mb": growth(rss),
                                     "samples": {"allocated": alloc, "reserved": reserved,
                                                 "rss": rss}}
        except Exception as exc:  # noqa: BLE001
            out["variants"][name] = {"error": traceback.format_exc(limit=3),
                                     "skipped": "%s: %s" % (type(exc).__name__, exc)}
        del step, log
    return out


def profile(num_envs: int, device: Any, steps: int = 100, warmup: int = 20,
            physics_us: float = 0.0) -> Dict[str, Any]:
    """Where each adapter's time goes: torch.profiler over ``steps`` steps (top ops by
    self CPU time, kernel launches, host copies and syncs per step), and the cost of the
    episode statistics both of our adapters keep (``EpisodeStats``, synchronized): one
    ``update`` (a step's record), one ``flush`` of a full buffer, and the two together
    per step over two buffers' worth of steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from benchmarks.timing import synchronize

    acts = [ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    out = {"num_envs": num_envs, "steps": steps, "adapters": {}}  # type: Dict[str, Any]
    names = ["double_sync"] + list(adapters.ADAPTERS)
    for name in names:
        try:
            step, _log = adapters.build(name, num_envs, device, physics_us)
            for _ in range(warmup):
                step()
            synchronize(device)
            with torch_profile(activities=acts) as prof:
                for _ in range(steps):
                    step()
                synchronize(device)
        except Exception as exc:  # noqa: BLE001
            out["adapters"][name] = {"skipped": "%s: %s" % (type(exc).__name__, exc)}
            continue
        events = prof.key_averages()
        count = {e.key: e.count for e in events}
        aten = sum(c for k, c in count.items() if k.startswith("aten::"))
        out["adapters"][name] = {
            "launches_per_step": sum(c for k, c in count.items()
                                     if k in ("cudaLaunchKernel", "cuLaunchKernel",
                                              "cudaLaunchKernelExC")) / steps,
            # copies as the device runs them ("Memcpy HtoD (Pageable -> Device)", ...)
            "h2d_per_step": sum(c for k, c in count.items() if "Memcpy HtoD" in k) / steps,
            "d2h_per_step": sum(c for k, c in count.items() if "Memcpy DtoH" in k) / steps,
            "d2d_per_step": sum(c for k, c in count.items() if "Memcpy DtoD" in k) / steps,
            "syncs_per_step": sum(c for k, c in count.items()
                                  if "Synchronize" in k) / steps,
            "aten_ops_per_step": aten / steps,
            "table": events.table(sort_by="self_cpu_time_total", row_limit=25),
        }
        del step, _log, prof
    try:
        out.update(stats_cost(num_envs, device, warmup))
    except Exception as exc:  # noqa: BLE001
        out["stats_update_ms"] = {"n": 0, "skipped": "%s: %s" % (type(exc).__name__, exc)}
    return out


def stats_cost(num_envs: int, device: Any, warmup: int = 20) -> Dict[str, Any]:
    """``EpisodeStats`` alone over the double, each call synchronized: ``update`` per step
    (the record), ``flush`` of a full buffer (the fold, once per ``capacity`` steps), and
    the two per step (mean update + median fold / capacity)."""
    import torch

    from benchmarks.gpu_double import GpuMqeDouble
    from benchmarks.timing import synchronize
    from mapush.envs.stats import EpisodeStats

    env = GpuMqeDouble(num_envs, device)
    env.reset()
    stats = EpisodeStats.for_env(env)
    act = torch.zeros(num_envs, env.num_agents, 3, device=env.device)
    for _ in range(warmup):  # warm both paths (record and fold)
        stats.update(env, env.step(act)[2])
    stats.flush()
    updates, flushes = [], []
    for i in range(2 * stats.capacity):
        if i == stats.capacity:  # the buffer is full: time the fold on its own
            synchronize(device)
            start = time.perf_counter()
            stats.flush()
            synchronize(device)
            flushes.append(time.perf_counter() - start)
        done = env.step(act)[2]
        synchronize(device)
        start = time.perf_counter()
        stats.update(env, done)
        synchronize(device)
        updates.append(time.perf_counter() - start)
    stats.flush()
    while len(flushes) < 5:
        for _ in range(stats.capacity):
            stats.update(env, env.step(act)[2])
        synchronize(device)
        start = time.perf_counter()
        stats.flush()
        synchronize(device)
        flushes.append(time.perf_counter() - start)
    update, fold = summarize(updates, 1e3), summarize(flushes, 1e3)
    return {"stats_update_ms": update, "stats_flush_ms": fold,
            "stats_amortized_ms": sum(updates) * 1e3 / len(updates)
            + fold["median"] / stats.capacity,
            "stats_capacity": stats.capacity}
