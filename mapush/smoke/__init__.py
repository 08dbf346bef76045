"""``mapush smoke``: the short end-to-end check behind ``make smoke-test`` and the CI GPU job.

Runs the stages of :mod:`mapush.smoke.stages` in order (doctor, env, train_ppo,
train_happo, eval, memory, clean_exit), each under a time limit, and writes a JSON report
plus ``junit.xml`` beside it. Exit status 0 only when every stage passed; otherwise the
last line on stderr names the first stage that failed and why.
"""
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mapush.errors import UsageError
from mapush.smoke.report import now, verdict, write_report
from mapush.smoke.runner import Stage, StageContext, StageResult, log, run_stages

MARKER = ".mapush-smoke"
# What a smoke run writes next to its report (removed at the start of the next run).
WORK_DIRS = ("logs", "env", "ppo", "happo")


def prepare_workdir(workdir: Path) -> None:
    """Empty the folders a previous smoke run left (stale checkpoints must not pass the eval
    stage), refusing to touch folders that a smoke run did not make."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in WORK_DIRS:
        path = workdir / name
        if path.exists() and not (path / MARKER).exists():
            raise UsageError("--report: %s exists and was not made by mapush smoke; pick a "
                             "--report path in an empty folder" % path)
    for name in WORK_DIRS:
        path = workdir / name
        if path.exists():
            shutil.rmtree(str(path))
        path.mkdir()
        (path / MARKER).write_text("made by mapush smoke; emptied by the next run\n")


def _provenance() -> Dict[str, Any]:
    try:
        from mapush.provenance import provenance

        return provenance()
    except Exception as exc:  # noqa: BLE001 - the report must still be written
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def run_smoke(report_path: Path, stages: Sequence[Stage], ctx: StageContext,
              meta: Optional[Dict[str, Any]] = None) -> int:
    """Run ``stages``, rewriting the report after each; the exit status of ``mapush smoke``."""
    start = time.monotonic()
    planned = [s.name for s in stages]
    meta = dict(meta or {}, started=now(), sim_device=ctx.sim_device, rl_device=ctx.rl_device,
                report=str(report_path), workdir=str(ctx.workdir),
                timeouts={s.name: s.timeout_s for s in stages},
                needs={s.name: list(s.needs) for s in stages})
    done = []  # type: List[StageResult]

    def on_result(result: StageResult) -> None:
        done.append(result)
        text = "%s %s (%.1f s)" % (result.name, result.status, result.duration_s)
        if result.message:
            text += ": " + result.message
        log(text)
        write_report(report_path, done, planned, ctx.children, meta, False,
                     time.monotonic() - start)

    write_report(report_path, done, planned, ctx.children, meta, False, 0.0)
    log("%d stages, report %s" % (len(planned), report_path))
    results = run_stages(stages, ctx, on_result)
    report = write_report(report_path, results, planned, ctx.children, meta, True,
                          time.monotonic() - start)
    print(verdict(report, report_path), file=sys.stderr, flush=True)
    if ctx.interrupted is not None:
        return 128 + ctx.interrupted
    return 0 if report["passed"] else 1


def main(args: Any) -> int:
    from mapush.smoke.stages import default_settings, default_stages

    report_path = Path(args.report)
    if report_path.exists() and report_path.is_dir():
        raise UsageError("--report %s is a folder; give a file name such as %s"
                         % (report_path, report_path / "report.json"))
    workdir = report_path.parent
    prepare_workdir(workdir)
    ctx = StageContext(workdir, args.sim_device, args.rl_device, settings=default_settings(args.num_envs))
    meta = {"command": sys.argv, "settings": ctx.settings, "provenance": _provenance()}
    return run_smoke(report_path, default_stages(), ctx, meta)
