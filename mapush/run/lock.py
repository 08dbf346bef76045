"""One writer per run: an OS lock on ``<run_dir>/.lock``. (docs/architecture.md, "Modules")."""
import errno
import fcntl
import os
from pathlib import Path
from typing import Optional

from mapush.errors import UsageError

LOCK_FILE = ".lock"


class RunLock:
    """An exclusive, non-blocking lock on a run directory (``fd`` is the descriptor)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self.fd = None  # type: Optional[int]

    def acquire(self) -> "RunLock":
        fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UsageError("%s is being written by another mapush train (it holds %s): "
                                 "wait for it to end, or stop it first"
                                 % (self.path.parent, self.path))
            raise
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
