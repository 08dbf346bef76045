"""The smoke test's pytest plugin: stage order and dependencies, child processes, the JSON
verdict.

``mapush smoke`` runs ``pytest tests/gpu/test_stages.py --junitxml ...`` with this folder's
options. Each test is one stage, run in file order under ``pytest.mark.timeout`` (pytest-
timeout); ``pytest.mark.needs(...)`` skips a stage whose dependencies did not pass, naming
the one that failed. After every stage the JSON report beside the JUnit file is rewritten
atomically, so a smoke run killed half-way still says how far it got (``complete: false``).
Children run in their own session: when a stage is cut short the whole process group is
killed, and after a normal exit what the child left behind is recorded (and killed) for the
``clean_exit`` stage. SIGTERM stops the run as Ctrl-C does.
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest
from _pytest.junitxml import xml_key

from mapush.common.atomic import write_json
from mapush.proc import signal_name
from mapush.spec import SMOKE_NUM_ENVS
from mapush.registry import episode_length

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
REPORT_VERSION = 1
# Sizes: tiny, so the whole run takes minutes on a mid-range GPU (and a minute or two on the
# CPU test double). Each training run does UPDATES updates of the shipped config (episode
# length x envs steps each) and saves a checkpoint after CHECKPOINT_AFTER of them, plus the
# final one.
NUM_ENVS = SMOKE_NUM_ENVS
UPDATES = 3
CHECKPOINT_AFTER = 2
# Time limits in seconds (pytest-timeout). Their sum (590 s) keeps the whole run under ten
# minutes even when every stage runs to its limit. The step check's three simulations took
# 26 s on an H100 over the Isaac Gym stand-in (benchmarks/results/step-check.json).
TIMEOUTS = {"doctor": 45, "env": 75, "step": 90, "train_ppo": 140, "train_happo": 140,
            "eval": 80, "memory": 10, "clean_exit": 10}
# Seconds a process group gets between SIGTERM and SIGKILL when a stage is cut short, and a
# child's leftover processes get to finish after the child itself exited.
# On the CPU (mapush smoke --sim-device cpu: make image-check, a machine without a GPU) each
# of the stages' TIMEOUTS is this many times longer: they are hang guards sized on a GPU, and
# the eval stage's whole episode took over 80 s on CI's 2 cores. Other limits stay.
CPU_TIMEOUT_FACTOR = 5
KILL_GRACE_S = 5.0
LEFTOVER_GRACE_S = 2.0


class StageFailure(Exception):
    """A stage's check failed; the message is the one-line reason shown in the report."""

    def __init__(self, message: str, **details: Any) -> None:
        Exception.__init__(self, message)
        self.details = details


@dataclass
class ChildRecord:
    """One child process a stage started, as ``clean_exit`` judges it."""

    stage: str
    label: str
    argv: List[str]
    stdout: str
    stderr: str
    pid: int = 0
    returncode: Optional[int] = None
    duration_s: float = 0.0
    killed: bool = False
    leftover: List[int] = field(default_factory=list)


@dataclass
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    record: ChildRecord

    def last_line(self) -> str:
        """The last non-empty line of stderr (the CLI's one-line diagnosis), else stdout."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return ""


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def group_members(pgid: int) -> List[int]:
    """Live (non-zombie) processes of a process group, read from ``/proc``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # comm may hold spaces and parentheses
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return sorted(members)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except OSError:
        pass


def kill_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after a grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_members(proc.pid):
            return
        time.sleep(0.05)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def reap_group(pgid: int, grace_s: float) -> List[int]:
    """Processes still alive in the group ``grace_s`` after its leader exited (then killed)."""
    deadline = time.monotonic() + grace_s
    members = group_members(pgid)
    while members and time.monotonic() < deadline:
        time.sleep(0.05)
        members = group_members(pgid)
    if members:
        _signal_group(pgid, signal.SIGKILL)
    return members


class Smoke(object):
    """What a stage works with: where to write, the devices, the children it started."""

    def __init__(self, workdir: Path, sim_device: str, rl_device: str,
                 settings: Dict[str, Any]) -> None:
        self.workdir = Path(workdir)
        self.logs = self.workdir / "logs"
        self.sim_device, self.rl_device = sim_device, rl_device
        self.settings = settings
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.children = []  # type: List[ChildRecord]
        self.stage = ""
        self.details = {}  # type: Dict[str, Any]

    def run_child(self, argv: Sequence[Any], label: Optional[str] = None,
                  extra_env: Optional[Mapping[str, str]] = None) -> ChildResult:
        """Run ``argv`` with its output in ``logs/<label>.{stdout,stderr}.log``; whatever
        interrupts the wait (the stage's time limit, Ctrl-C) kills its process group."""
        label = label or self.stage
        self.logs.mkdir(parents=True, exist_ok=True)
        out_path = self.logs / ("%s.stdout.log" % label)
        err_path = self.logs / ("%s.stderr.log" % label)
        record = ChildRecord(stage=self.stage, label=label, argv=[str(a) for a in argv],
                             stdout=str(out_path), stderr=str(err_path))
        self.children.append(record)
        start = time.monotonic()
        with open(str(out_path), "wb") as out, open(str(err_path), "wb") as err:
            proc = subprocess.Popen(record.argv, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=dict(self.env, **(extra_env or {})))
            record.pid = proc.pid
            try:
                proc.wait()
            finally:
                if proc.poll() is None:
                    record.killed = True
                    kill_group(proc)
                record.returncode = proc.returncode
                record.duration_s = round(time.monotonic() - start, 3)
                record.leftover = reap_group(proc.pid, LEFTOVER_GRACE_S)
        read = lambda path: path.read_bytes().decode("utf-8", "replace")  # noqa: E731
        return ChildResult(proc.returncode, read(out_path), read(err_path), record)


def settings(num_envs: int = NUM_ENVS) -> Dict[str, Any]:
    per_update = {algo: episode_length(algo) * num_envs for algo in ("ppo", "happo")}
    return {"num_envs": num_envs, "updates": UPDATES,
            "train_steps": {a: n * UPDATES for a, n in per_update.items()},
            "checkpoint_interval": {a: n * CHECKPOINT_AFTER for a, n in per_update.items()}}


# -- options and the fixture ------------------------------------------------------------

def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mapush smoke")
    group.addoption("--smoke-report", help="the JSON report (its folder is the work folder)")
    group.addoption("--sim-device", default="cuda:0")
    group.addoption("--rl-device", default="cuda:0")
    group.addoption("--num-envs", type=int, default=NUM_ENVS)


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "needs(*stages): skipped unless these stages passed")
    if config.getoption("--smoke-report"):
        config.pluginmanager.register(Verdict(config), "mapush-smoke-verdict")
        # SIGTERM (docker stop, CI's cancel) ends the run as Ctrl-C does: report, children killed
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    if config.getoption("--sim-device") != "cpu":
        return
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is not None and marker.args and \
                TIMEOUTS.get(item.name[len("test_"):]) == marker.args[0]:
            item.add_marker(pytest.mark.timeout(marker.args[0] * CPU_TIMEOUT_FACTOR),
                            append=False)


def _interrupt(signum: int, _frame: Any) -> None:
    Verdict.interrupted = signum
    raise KeyboardInterrupt()


@pytest.fixture(scope="session")
def smoke(pytestconfig: Any) -> Smoke:
    verdict = pytestconfig.pluginmanager.get_plugin("mapush-smoke-verdict")
    if verdict is None:
        pytest.skip("the smoke stages run through mapush smoke (--smoke-report)")
    return verdict.smoke


class Verdict(object):
    """Results per stage, the dependency skips, and the JSON report after each stage."""

    interrupted = None  # type: Optional[int]

    def __init__(self, config: Any) -> None:
        self.path = Path(config.getoption("--smoke-report"))
        self.smoke = Smoke(self.path.parent, config.getoption("--sim-device"),
                           config.getoption("--rl-device"),
                           settings(config.getoption("--num-envs")))
        self.start = time.monotonic()
        self.results = []  # type: List[Dict[str, Any]]
        self.planned = []  # type: List[Any]
        self.meta = json.loads(os.environ.get("MAPUSH_SMOKE_META", "{}"))
        self.meta.update(started=now(), sim_device=self.smoke.sim_device,
                         rl_device=self.smoke.rl_device, report=str(self.path),
                         workdir=str(self.smoke.workdir), settings=self.smoke.settings)

    def pytest_collection_modifyitems(self, items: List[Any]) -> None:
        self.planned = list(items)
        self.meta["timeouts"] = {i.name[5:]: _timeout(i) for i in items}
        self.meta["needs"] = {i.name[5:]: list(_needs(i)) for i in items}
        self.write(False)

    def _result(self, item: Any, status: str, message: str = "", **extra: Any) -> None:
        result = dict(name=item.name[5:], status=status, description=_doc(item),
                      duration_s=0.0, timeout_s=_timeout(item), timed_out=False,
                      message=message, needs=list(_needs(item)), details={})
        result.update(extra)
        self.results.append(result)
        line = "%s %s (%.1f s)" % (result["name"], status, result["duration_s"])
        print("smoke: %s%s" % (line, ": " + message if message else ""), file=sys.stderr,
              flush=True)
        self.write(False)

    def pytest_runtest_setup(self, item: Any) -> None:
        self.smoke.stage, self.smoke.details = item.name[5:], {}
        xml = item.config.stash.get(xml_key, None)
        if xml is not None:  # JUnit names the stages as the JSON report does
            reporter = xml.node_reporter(item.nodeid)
            reporter.add_attribute("name", item.name[5:])
            reporter.add_attribute("classname", "mapush.smoke")
        self.stage_start = time.monotonic()
        passed = {r["name"] for r in self.results if r["status"] == PASSED}
        for need in _needs(item):
            if need not in passed:
                pytest.skip("needs stage %s, which did not pass" % need)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        report = outcome.get_result()
        if call.when == "setup" and report.skipped:
            self._result(item, SKIPPED, call.excinfo.value.msg)
        elif call.when == "setup" and report.failed:
            self._result(item, FAILED, _message(item, call.excinfo))
        elif call.when == "call":
            extra = dict(duration_s=round(time.monotonic() - self.stage_start, 3),
                         details=dict(self.smoke.details))
            if report.passed:
                self._result(item, PASSED, **extra)
                return
            exc = call.excinfo.value
            if isinstance(exc, StageFailure):
                extra["details"].update(exc.details)
            elif "Timeout" not in str(exc):
                extra["details"]["traceback"] = "".join(traceback.format_exception(
                    call.excinfo.type, exc, call.excinfo.tb))
            self._result(item, FAILED, _message(item, call.excinfo),
                         timed_out="Timeout" in str(exc) and not isinstance(exc, StageFailure),
                         **extra)

    def pytest_sessionfinish(self) -> None:
        done = {r["name"] for r in self.results}
        if Verdict.interrupted is None and len(done) < len(self.planned):
            Verdict.interrupted = signal.SIGINT  # a Ctrl-C reached pytest itself
        for item in self.planned:
            if item.name[5:] in done:
                continue
            if item.name[5:] == self.smoke.stage and Verdict.interrupted:
                message = "interrupted by %s" % signal_name(Verdict.interrupted)
                self._result(item, FAILED, message,
                             duration_s=round(time.monotonic() - self.stage_start, 3))
            else:
                self._result(item, SKIPPED, "the smoke run was interrupted")
        report = self.write(True)
        report["interrupted"] = Verdict.interrupted
        write_json(self.path, report)

    def write(self, complete: bool) -> Dict[str, Any]:
        failed = [r["name"] for r in self.results if r["status"] == FAILED]
        passed = complete and bool(self.results) and not failed and all(
            r["status"] == PASSED for r in self.results)
        done = {r["name"] for r in self.results}
        report = dict(self.meta, **{
            "version": REPORT_VERSION,
            "status": PASSED if passed else (FAILED if complete or failed else "running"),
            "passed": passed, "complete": complete,
            "failed_stage": failed[0] if failed else None, "failed_stages": failed,
            "duration_s": round(time.monotonic() - self.start, 3), "updated": now(),
            "stages": self.results,
            "pending": [i.name[5:] for i in self.planned if i.name[5:] not in done],
            "children": [asdict(c) for c in self.smoke.children],
            "junit": str(self.path.parent / "junit.xml")})
        write_json(self.path, report)
        return report


def _needs(item: Any) -> Sequence[str]:
    mark = item.get_closest_marker("needs")
    return mark.args if mark else ()


def _timeout(item: Any) -> float:
    mark = item.get_closest_marker("timeout")
    return float(mark.args[0]) if mark else 0.0


def _doc(item: Any) -> str:
    return " ".join((item.function.__doc__ or "").split())


def _message(item: Any, excinfo: Any) -> str:
    exc = excinfo.value
    if isinstance(exc, StageFailure):
        return str(exc)
    if "Timeout" in str(exc):
        return "timed out after %g s (limit of the %s stage)" % (_timeout(item), item.name[5:])
    return "%s: %s" % (excinfo.type.__name__, exc)
