"""The stage engine of ``mapush smoke``: time limits, dependencies, child processes.

Each stage gets a wall-clock limit (enforced with ``SIGALRM``, so a stage blocked waiting on
a hung child is interrupted too), a status and a duration. A stage whose dependencies did
not pass is skipped, naming the one that failed. Children run in their own session: on a
time limit or an interruption the whole process group is killed, and after a normal exit
any process the child left behind is recorded (and killed) for the ``clean_exit`` stage.
"""
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"

# Seconds a process group gets between SIGTERM and SIGKILL when a stage is cut short.
KILL_GRACE_S = 5.0
# Seconds a child's leftover processes get to finish after the child itself exited.
LEFTOVER_GRACE_S = 2.0


class StageFailure(Exception):
    """A stage's check failed; the message is the one-line reason shown in the report."""

    def __init__(self, message: str, **details: Any) -> None:
        Exception.__init__(self, message)
        self.details = details


class StageTimeout(BaseException):
    """Raised by the alarm when a stage runs past its limit (a BaseException, so stage code
    catching ``Exception`` cannot swallow it)."""


class Interrupted(BaseException):
    """SIGINT/SIGTERM reached ``mapush smoke`` itself."""

    def __init__(self, signum: int) -> None:
        BaseException.__init__(self, signum)
        self.signum = signum


@dataclass
class Stage:
    name: str
    run: Callable[["StageContext"], Optional[Dict[str, Any]]]
    timeout_s: float
    needs: Sequence[str] = ()
    description: str = ""


@dataclass
class StageResult:
    name: str
    status: str
    description: str = ""
    duration_s: float = 0.0
    timeout_s: float = 0.0
    timed_out: bool = False
    message: str = ""
    needs: List[str] = field(default_factory=list)
    details: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


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

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


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


class StageContext:
    """What a stage works with: where to write, the devices, the children's environment,
    and the results of the stages before it."""

    def __init__(self, workdir: Path, sim_device: str, rl_device: str,
                 env: Optional[Mapping[str, str]] = None, settings: Optional[Dict[str, Any]] = None
                 ) -> None:
        self.workdir = Path(workdir)
        self.logs = self.workdir / "logs"
        self.sim_device = sim_device
        self.rl_device = rl_device
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.settings = dict(settings or {})
        self.results = {}  # type: Dict[str, StageResult]
        self.children = []  # type: List[ChildRecord]
        self.stage = ""
        self.interrupted = None  # type: Optional[int]

    def run_child(self, argv: Sequence[str], label: Optional[str] = None,
                  extra_env: Optional[Mapping[str, str]] = None) -> ChildResult:
        """Run ``argv`` to completion with its output in ``logs/<label>.{stdout,stderr}.log``.

        The stage's alarm bounds the wait; whatever interrupts it kills the child's whole
        process group before the exception goes on.
        """
        label = label or self.stage
        self.logs.mkdir(parents=True, exist_ok=True)
        out_path = self.logs / ("%s.stdout.log" % label)
        err_path = self.logs / ("%s.stderr.log" % label)
        env = dict(self.env)
        env.update(extra_env or {})
        record = ChildRecord(stage=self.stage, label=label, argv=[str(a) for a in argv],
                             stdout=str(out_path), stderr=str(err_path))
        self.children.append(record)
        start = time.monotonic()
        with open(str(out_path), "wb") as out, open(str(err_path), "wb") as err:
            proc = subprocess.Popen(record.argv, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=env, cwd=str(Path.cwd()),
                                    start_new_session=True)
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
        return ChildResult(proc.returncode, _read(out_path), _read(err_path), record)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def group_members(pgid: int) -> List[int]:
    """Live (non-zombie) processes of a process group, read from ``/proc``."""
    members = []
    proc = Path("/proc")
    if not proc.is_dir():  # pragma: no cover - Linux only in practice
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except OSError:
            return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
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


class _Alarm(object):
    """``with _Alarm(seconds):`` raises StageTimeout in the main thread when time is up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _fire(self, _signum: int, _frame: Any) -> None:
        raise StageTimeout()

    def __enter__(self) -> "_Alarm":
        self._previous = signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 0.001))
        return self

    def __exit__(self, *_exc: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)


class _Signals(object):
    """SIGINT/SIGTERM handling while stages run: inside a stage the signal raises
    Interrupted (the running child is killed on the way out); between stages it is noted."""

    def __init__(self) -> None:
        self.signum = None  # type: Optional[int]
        self.in_stage = False

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self.in_stage:
            raise Interrupted(signum)

    def __enter__(self) -> "_Signals":
        self._previous = {s: signal.signal(s, self._handle)
                          for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *_exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def run_stage(stage: Stage, ctx: StageContext) -> StageResult:
    """Run one stage under its time limit (dependencies are the caller's business)."""
    result = StageResult(name=stage.name, status=FAILED, description=stage.description,
                         timeout_s=stage.timeout_s, needs=list(stage.needs))
    ctx.stage = stage.name
    start = time.monotonic()
    try:
        with _Alarm(stage.timeout_s):
            details = stage.run(ctx)
        result.status = PASSED
        result.details = dict(details or {})
    except StageFailure as exc:
        result.message = str(exc)
        result.details = dict(exc.details)
    except StageTimeout:
        result.timed_out = True
        result.message = "timed out after %g s (limit of the %s stage)" % (stage.timeout_s,
                                                                          stage.name)
    except Exception as exc:  # noqa: BLE001 - a bug in a stage is that stage's failure
        result.message = "%s: %s" % (type(exc).__name__, exc)
        result.details = {"traceback": traceback.format_exc()}
    finally:
        result.duration_s = round(time.monotonic() - start, 3)
    return result


def blocking_stage(stage: Stage, results: Mapping[str, StageResult]) -> Optional[str]:
    """The first dependency of ``stage`` that did not pass, or None."""
    for need in stage.needs:
        got = results.get(need)
        if got is None or got.status != PASSED:
            return need
    return None


def _not_run(stage: Stage, message: str) -> StageResult:
    return StageResult(name=stage.name, status=SKIPPED, description=stage.description,
                       timeout_s=stage.timeout_s, needs=list(stage.needs), message=message)


def run_stages(stages: Iterable[Stage], ctx: StageContext,
               on_result: Optional[Callable[[StageResult], None]] = None) -> List[StageResult]:
    """Run the stages in order; SIGINT/SIGTERM ends the current stage as failed and skips the
    rest (``ctx.interrupted`` holds the signal). Calls ``on_result`` after each stage."""
    results = []  # type: List[StageResult]
    with _Signals() as signals:
        for stage in stages:
            blocker = blocking_stage(stage, ctx.results)
            if signals.signum is not None:
                result = _not_run(stage, "the smoke run was interrupted")
            elif blocker is not None:
                result = _not_run(stage, "needs stage %s, which did not pass" % blocker)
            else:
                try:
                    signals.in_stage = True
                    result = run_stage(stage, ctx)
                except Interrupted as exc:
                    result = StageResult(
                        name=stage.name, status=FAILED, description=stage.description,
                        timeout_s=stage.timeout_s, needs=list(stage.needs),
                        message="interrupted by %s" % signal.Signals(exc.signum).name)
                finally:
                    signals.in_stage = False
            ctx.results[stage.name] = result
            results.append(result)
            if on_result is not None:
                on_result(result)
        ctx.interrupted = signals.signum
    return results


def log(message: str) -> None:
    print("smoke: %s" % message, file=sys.stderr, flush=True)
