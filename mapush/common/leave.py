"""Leaving a process that holds an Isaac Gym simulation."""
import logging
import os
import sys
import tempfile
import warnings
import weakref
from contextlib import suppress


def leave(code: int) -> None:
    """Flush logs and streams, then end the process without Python's interpreter teardown,
    which is where Isaac Gym segfaults (incident 002). Everything worth keeping must already be
    written (checkpoints and logs are, atomically)."""
    with suppress(Exception):  # leaving anyway
        logging.shutdown()
    with suppress(Exception):
        remove_temporary_directories()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)


def remove_temporary_directories() -> None:
    """Remove the ``tempfile.TemporaryDirectory`` folders still alive, as the finalizers of a
    normal exit would (``os._exit`` skips them): wandb makes two at import,
    ``tmp*wandb-media`` and ``tmp*wandb-artifacts``, and OpenRL imports wandb."""
    cleanup = getattr(tempfile.TemporaryDirectory._cleanup, "__func__", None)
    registry = getattr(weakref.finalize, "_registry", {})  # CPython's, 3.8 to 3.13
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Implicitly cleaning up": that is the point
        for finalizer in list(registry):
            found = finalizer.peek()
            if found and getattr(found[1], "__func__", None) is cleanup:
                finalizer()
