"""The training child: import Isaac Gym first, run the trainer, leave without teardown."""
import json
import sys
import traceback
from pathlib import Path

from mapush import registry
from mapush.errors import MapushError
from mapush.proc import signal_name, stop_signals
from mapush.common import phases
from mapush.common.atomic import DISK_FULL, write_json
from mapush.checkpoints.source import APPLIED
from mapush.checkpoints.store import read_meta
from mapush.run.context import RunContext, StopFlag
from mapush.run import ranks
from mapush.run.crash import diagnose_exception
from mapush.common.leave import leave
from mapush.spec import RunSpec


def run(config_path: str, stop: StopFlag) -> int:
    phases.mark("start")
    job = json.loads(Path(config_path).read_text())
    spec, rank = ranks.join(RunSpec.from_dict(job["spec"]))
    from mapush import sim

    if "task_config_to" in job:  # no run: mapush train --print-config, or its --set task.* check
        write_json(job["task_config_to"], sim.task_config(spec))
        return 0
    sim.headless_figures(Path(spec.run_dir) / "figures")
    sim.import_isaacgym()  # before anything imports torch
    ranks.start(spec)
    if rank == 0 and spec.task_sets:  # config.py no longer says it all: the task config as
        write_json(Path(spec.run_dir) / APPLIED, sim.task_config(spec))  # the env gets it
    ctx = RunContext(spec, stop=stop)
    if spec.resume:
        ctx.resume_path = Path(spec.resume)
        ctx.resume_meta = read_meta(ctx.resume_path) or {}
    trainer = registry.load(spec.algo)
    code = trainer.train(ctx)
    phases.mark("shutdown")
    if stop.requested:
        print("mapush: stopped by %s after the final checkpoint" % signal_name(stop.signum),
              file=sys.stderr)
    return int(code)


def main() -> None:
    # Stop handlers first: a SIGTERM while Isaac Gym loads must not kill the child (the
    # trainer sees the flag at its first poll and leaves with a checkpoint).
    stop = StopFlag()
    with stop_signals(stop.handle):  # the process leaves by os._exit inside
        if len(sys.argv) != 2:
            print("usage: python -m mapush.run.child CONFIG_JSON", file=sys.stderr)
            leave(2)
        try:
            code = run(sys.argv[1], stop)
        except MapushError as exc:
            print("error: %s" % exc, file=sys.stderr)
            # leave while the exception still holds the frames: torch 1.13's zip writer, left
            # behind by a failed torch.save, aborts the process from its destructor
            leave(exc.exit_code)
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            print("error: disk full (%s) while writing %s: checkpoints and config.json are "
                  "written whole or not at all, so the newest complete checkpoint is intact; "
                  "free space, then resume with --resume"
                  % (exc.strerror, exc.filename or "a file"), file=sys.stderr)
            leave(1)
        except BaseException as exc:  # noqa: BLE001 - the last line must be the diagnosis
            traceback.print_exc()
            print(diagnose_exception(exc), file=sys.stderr)
            code = 1
        leave(code)


if __name__ == "__main__":
    main()
