"""Reading a file from a folder the user controls without trusting what it is: only a regular
file is read, and it is opened without blocking (a FIFO named config.json would otherwise
hang a reader such as ``mapush runs`` forever)."""
import errno
import os
import stat
from typing import Any


def read_regular(path: Any) -> str:
    """The text of ``path``; OSError when it is missing, unreadable or not a regular file,
    ValueError (UnicodeDecodeError) when it is not text."""
    return read_regular_bytes(path).decode("utf-8")


def read_regular_bytes(path: Any) -> bytes:
    """The bytes of ``path``, read once; OSError as :func:`read_regular`."""
    fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)
