"""``mapush smoke``: the short end-to-end check behind ``make smoke-test`` and the CI GPU job."""
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict

from mapush.errors import MapushError, UsageError
from mapush.proc import Supervisor
from mapush.registry import TRAINERS

MARKER = ".mapush-smoke"
# What a smoke run writes next to its report (removed at the start of the next run): its
# logs, the env stage's folder, and a run of each trainer's first algorithm.
WORK_DIRS = ("logs", "env") + tuple(trainer.algos[0] for trainer in TRAINERS)
JUNIT = "junit.xml"


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


def verdict(report: Dict[str, Any], report_path: Path) -> str:
    where = " (report %s)" % report_path
    if report["passed"]:
        return "smoke: passed, %d stages in %.1f s%s" % (len(report["stages"]),
                                                        report["duration_s"], where)
    name = report["failed_stage"]
    message = next((s["message"] for s in report["stages"] if s["name"] == name), "")
    return "error: smoke test failed at stage %s: %s%s" % (name, message, where)


def main(args: Any) -> int:
    report_path = Path(args.report)
    if report_path.exists() and report_path.is_dir():
        raise UsageError("--report %s is a folder; give a file name such as %s"
                         % (report_path, report_path / "report.json"))
    # the smoke tests: MAPUSH_SMOKE_TESTS (the image sets it), else this checkout's
    tests = Path(os.environ.get("MAPUSH_SMOKE_TESTS") or
                 Path(__file__).resolve().parent.parent / "tests" / "gpu") / "test_stages.py"
    if not tests.is_file():
        raise MapushError("the smoke tests are missing (%s): run mapush smoke from a checkout "
                          "of mapush-env or in its image" % tests)
    prepare_workdir(report_path.parent)
    meta = {"command": sys.argv, "provenance": _provenance()}
    argv = [sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider",
            "--smoke-report", str(report_path), "--junitxml", str(report_path.parent / JUNIT),
            "-o", "junit_suite_name=mapush-smoke", "--sim-device", args.sim_device,
            "--rl-device", args.rl_device, "--num-envs", str(args.num_envs)]
    with Supervisor("mapush smoke", "the running stage is stopped; the report says how far "
                    "the run got") as sup:
        # its own session: a Ctrl-C at the terminal reaches pytest once, through us
        code = sup.wait(sup.start(argv, start_new_session=True,
                                  env=dict(os.environ, MAPUSH_SMOKE_META=json.dumps(meta))))
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        raise MapushError("pytest exited %d without a smoke report at %s (its output is above)"
                          % (code, report_path))
    print(verdict(report, report_path), file=sys.stderr, flush=True)
    if sup.stop_signal is not None or report.get("interrupted"):
        return 128 + int(sup.stop_signal or report["interrupted"])
    return 0 if report["passed"] else 1
