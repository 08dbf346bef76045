"""Errors that carry their exit status, so every layer fails the same way."""


class MapushError(Exception):
    """A failure with a one-line message for the user and an exit status."""

    exit_code = 1


class UsageError(MapushError):
    """Bad options: reported as one ``error:`` line, exit status 2."""

    exit_code = 2
