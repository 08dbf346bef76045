"""Leaving a process that holds an Isaac Gym simulation."""
import os
import sys


def leave(code: int) -> None:
    """Flush logs and streams, then end the process without Python's interpreter teardown,
    which is where Isaac Gym segfaults (incident 002). Everything worth keeping must already be
    written (checkpoints and logs are, atomically)."""
    try:
        import logging

        logging.shutdown()
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - leaving anyway
            pass
    os._exit(code)
