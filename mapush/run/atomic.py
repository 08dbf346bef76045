"""Crash-safe writes: temporary file, fsync, rename. A kill at any moment leaves either the
old file or the new one, never a torn one."""
import json
import os
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, Path]


def fsync_dir(path: PathLike) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".%s.tmp-%d" % (path.name, os.getpid()))
    with open(str(tmp), "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(str(tmp), str(path))
    fsync_dir(path.parent)


def write_text(path: PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def fsync_tree(root: PathLike) -> None:
    """fsync every file and folder under ``root`` (bottom-up)."""
    for dirpath, _dirnames, filenames in os.walk(str(root), topdown=False):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def writable(folder: Path) -> bool:
    """Whether ``folder`` can be written, or created in its nearest existing parent."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return os.access(str(probe), os.W_OK)
