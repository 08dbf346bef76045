"""Errors that carry their exit status (every layer fails the same way) and the fixes."""
from pathlib import Path

import yaml


class MapushError(Exception):
    """A failure with a one-line message for the user and an exit status."""

    exit_code = 1


class UsageError(MapushError):
    """Bad options: reported as one ``error:`` line, exit status 2."""

    exit_code = 2


# What mapush tells a user to do (fixes.yaml): texts, not code
FIXES = yaml.safe_load((Path(__file__).resolve().parent / "fixes.yaml").read_text())
ISAACGYM_HINT = FIXES["isaacgym"]  # mapush.sim raises it, the doctor and reproduce quote it
