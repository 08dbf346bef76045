"""Leaving a process that holds an Isaac Gym simulation."""
import logging
import os
import sys
from contextlib import suppress


def leave(code: int) -> None:
    """Flush logs and streams, then end the process without Python's interpreter teardown,
    which is where Isaac Gym segfaults (incident 002). Everything worth keeping must already be
    written (checkpoints and logs are, atomically)."""
    with suppress(Exception):  # leaving anyway
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)
