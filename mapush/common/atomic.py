"""Crash-safe writes: temporary file, fsync, rename. A kill at any moment leaves either the
old file or the new one, never a torn one."""
import errno
import json
import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, Path]
# errno values of a full disk or quota
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def fsync_path(path: PathLike) -> None:
    """fsync a file or a folder (a folder: its entries, e.g. a rename into it)."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".%s.tmp-%d" % (path.name, os.getpid()))
    try:
        with open(str(tmp), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(str(tmp), str(path))
    except BaseException as exc:
        with suppress(OSError):  # a full disk must not keep the partial copy
            os.unlink(str(tmp))
        if isinstance(exc, OSError) and exc.filename is None:  # name it in the CLI's line
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    fsync_path(path.parent)


def write_text(path: PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def fsync_tree(root: PathLike) -> None:
    """fsync every file and folder under ``root`` (bottom-up)."""
    for dirpath, _dirnames, filenames in os.walk(str(root), topdown=False):
        for name in filenames:
            fsync_path(os.path.join(dirpath, name))
        fsync_path(dirpath)


def writable(folder: Path) -> bool:
    """Whether ``folder`` can be written, or made in its nearest existing parent folder."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(str(probe), os.W_OK):
        return False
    try:  # root passes access() on /proc, say: a folder made and removed is the proof
        os.rmdir(tempfile.mkdtemp(prefix=".mapush-probe-", dir=str(probe)))
    except OSError:
        return False
    return True


def disk_full(exc: BaseException, folder: PathLike, margin: int = 4 << 20) -> bool:
    """Whether ``exc`` came from a full disk: ENOSPC/EDQUOT, or any error (torch.save's
    RuntimeError says only "file write failed") while ``folder``'s file system has less
    than ``margin`` bytes left."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        return True
    try:
        st = os.statvfs(str(folder))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin
