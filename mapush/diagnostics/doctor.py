"""``mapush doctor`` and the preflight of ``mapush train``. (Minimal: extended by the
diagnostics work.)"""
import importlib.util
from typing import Any

from mapush.errors import MapushError
from mapush.spec import RunSpec


def preflight(spec: RunSpec) -> None:
    if importlib.util.find_spec("isaacgym") is None:
        from mapush.sim import ISAACGYM_HINT

        raise MapushError(ISAACGYM_HINT)


def main(args: Any) -> int:
    raise MapushError("doctor: not implemented yet")
