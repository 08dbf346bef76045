"""Child processes and stop signals: the one place that installs SIGINT/SIGTERM handlers and
starts children. What a stop signal does (forwarded once, a grace period, then a kill) and
why children die with their parent: docs/lifecycle.md, "Stop and resume"."""
import ctypes
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_S = 0.2


def signal_name(signum: Optional[int]) -> str:
    try:
        return signal.Signals(signum).name if signum else "request"  # type: ignore[arg-type]
    except ValueError:
        return "signal %s" % signum


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """``preexec_fn`` of every child: the stop signal (SIGTERM: a final checkpoint) when the
    parent dies, even by SIGKILL (Linux's prctl PR_SET_PDEATHSIG), so no child runs on alone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, int(signum))  # 1: PR_SET_PDEATHSIG


@contextmanager
def stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call ``handler`` inside the block (the previous handlers after)."""
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class Supervisor(object):
    """``with Supervisor(who, on_stop, grace_s) as sup: sup.wait(sup.start(argv))``
    (docs/architecture.md, "Modules")."""

    def __init__(self, who: str, on_stop: str, grace_s: Optional[float] = None,
                 again: str = "") -> None:
        self.who, self.on_stop, self.grace_s, self.again = who, on_stop, grace_s, again
        self.stop_signal = None  # type: Optional[int]
        self.killed = False
        self.children = []  # type: List[subprocess.Popen]
        self._pending = []  # type: List[int]
        self._deadline = None  # type: Optional[float]
        self._block = None  # type: Any
        # how a stop signal reaches a child: to it, or (torchrun's) to its own children
        self.forward = lambda proc, signum: proc.send_signal(signum)  # type: Callable[..., Any]

    def __enter__(self) -> "Supervisor":
        self._block = stop_signals(self.stop)
        self._block.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._block.__exit__(*exc)

    def stop(self, signum: int, _frame: Any = None) -> None:
        """A stop signal (the handler inside the block): forwarded to the running children
        the first time, and said by the next :meth:`poll`."""
        self._pending.append(signum)
        if self.stop_signal is None:
            self.stop_signal = signum
            for proc in self.running():
                self.forward(proc, signum)

    @property
    def stopping(self) -> bool:
        return self.stop_signal is not None

    def running(self) -> List["subprocess.Popen[bytes]"]:
        return [p for p in self.children if p.poll() is None]

    def start(self, argv: List[str], **popen: Any) -> "subprocess.Popen[bytes]":
        proc = subprocess.Popen(argv, preexec_fn=die_with_parent, **popen)
        self.children.append(proc)
        if self.stop_signal is not None:  # a signal between the check and the start
            self.forward(proc, self.stop_signal)
        return proc

    def _say(self, text: str) -> None:
        print("%s: %s" % (self.who, text), file=sys.stderr, flush=True)

    def poll(self) -> None:
        """Say what each signal received does; kill what outlived the grace period."""
        while self._pending:
            name = signal_name(self._pending.pop(0))
            if self._deadline is None:
                self._deadline = time.monotonic() + (self.grace_s or float("inf"))
                self._say("%s: %s" % (name, self.on_stop))
            elif self.again:
                self._say("%s again: %s (%.0f s left)" % (
                    name, self.again, max(0.0, self._deadline - time.monotonic())))
        if (self._deadline is not None and not self.killed
                and time.monotonic() > self._deadline and self.running()):
            self._say("the %s did not stop within %.0f s; killing it"
                      % ("training process" if len(self.running()) == 1 else "children",
                         self.grace_s or 0))
            self.killed = True
            for proc in self.running():
                proc.kill()

    def wait(self, proc: "subprocess.Popen[bytes]") -> int:
        """``proc``'s exit status (negative for a signal), handling signals meanwhile."""
        while True:
            try:
                code = proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                self.poll()
                continue
            self.poll()
            self.children.remove(proc)
            return code
