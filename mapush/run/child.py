"""The training child: import Isaac Gym first, run the trainer, leave without teardown.

``python -m mapush.run.child CONFIG_JSON``. After logs and checkpoints are flushed the
process ends with ``os._exit``: Python's interpreter teardown is where Isaac Gym segfaults
(seed 002), and nothing is left to clean up by then.
"""
import importlib
import json
import os
import sys
import traceback
from pathlib import Path

from mapush.errors import MapushError
from mapush.run import phases
from mapush.run.checkpoints import read_meta
from mapush.run.context import RunContext
from mapush.spec import RunSpec

TRAINERS = {"openrl": "mapush.trainers.openrl_trainer", "harl": "mapush.trainers.harl_trainer"}


def _leave(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass
    os._exit(code)


def run(config_path: str) -> int:
    phases.mark("start")
    spec = RunSpec.from_dict(json.loads(Path(config_path).read_text())["spec"])
    from mapush import sim

    sim.import_isaacgym()  # before anything imports torch
    ctx = RunContext(spec)
    ctx.stop.install()
    if spec.resume:
        ctx.resume_path = Path(spec.resume)
        ctx.resume_meta = read_meta(ctx.resume_path) or {}
    trainer = importlib.import_module(TRAINERS[spec.trainer])
    code = trainer.train(ctx)
    phases.mark("shutdown")
    return int(code)


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m mapush.run.child CONFIG_JSON", file=sys.stderr)
        _leave(2)
    try:
        code = run(sys.argv[1])
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        code = exc.exit_code
    except BaseException as exc:  # noqa: BLE001 - the last line must be the diagnosis
        traceback.print_exc()
        from mapush.run.crash import diagnose_exception

        print(diagnose_exception(exc), file=sys.stderr)
        code = 1
    _leave(code)


if __name__ == "__main__":
    main()
