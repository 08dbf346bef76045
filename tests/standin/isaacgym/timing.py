"""The stand-in's own time, for benchmarks (tests only; not a module of the real Isaac Gym).

With ``ISAACGYM_STANDIN_TIMES=FILE`` set, every call into the stand-in's ``Gym`` is timed,
the device synchronized before and after it (so that its kernels count as its own), a call
made from within another counted once. Every ``EVERY_S`` seconds of wall time
(``ISAACGYM_STANDIN_TIMES_EVERY_S``, default 2; and at the first call) the process appends
one JSON line to FILE: ``wall`` (seconds since its first call), ``total`` (seconds inside
the stand-in), and the calls and seconds per method.
Isaac Gym's own ``Gym`` has no such thing: PhysX's step is not the stand-in's, and a figure
of this module is the stand-in's cost, to be subtracted from a run's, never PhysX's.
"""
import functools
import json
import os
import time

EVERY_S = float(os.environ.get("ISAACGYM_STANDIN_TIMES_EVERY_S") or 2.0)


def install(gym_class, path):
    """Wraps each public method of ``gym_class`` to time it into ``path``."""
    state = {"depth": 0, "start": None, "written": None, "total": 0.0, "calls": {},
             "seconds": {}}

    def sync():
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def write(now):
        line = {"pid": os.getpid(), "wall": round(now - state["start"], 4),
                "total": round(state["total"], 4), "calls": state["calls"],
                "seconds": {k: round(v, 4) for k, v in state["seconds"].items()}}
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        state["written"] = now

    def timed(name, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            if state["depth"]:
                return method(*args, **kwargs)
            sync()
            start = time.perf_counter()
            state["start"] = start if state["start"] is None else state["start"]
            state["depth"] += 1
            try:
                return method(*args, **kwargs)
            finally:
                state["depth"] -= 1
                sync()
                end = time.perf_counter()
                state["total"] += end - start
                state["calls"][name] = state["calls"].get(name, 0) + 1
                state["seconds"][name] = state["seconds"].get(name, 0.0) + end - start
                if state["written"] is None or end - state["written"] >= EVERY_S:
                    write(end)
        return wrapper

    for name, method in list(vars(gym_class).items()):
        if callable(method) and not name.startswith("_"):
            setattr(gym_class, name, timed(name, method))
