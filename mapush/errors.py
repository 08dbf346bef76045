"""Errors that carry their exit status, so every layer fails the same way."""


class MapushError(Exception):
    """A failure with a one-line message for the user and an exit status."""

    exit_code = 1


class UsageError(MapushError):
    """Bad options: reported as one ``error:`` line, exit status 2."""

    exit_code = 2


# What a missing Isaac Gym is, with the fix (mapush.sim raises it, the doctor quotes it).
ISAACGYM_HINT = ("Isaac Gym Preview 4 is not importable: download IsaacGym_Preview_4_Package.tar.gz "
                 "from https://developer.nvidia.com/isaac-gym, put it in vendor/ and run "
                 "'make build' (training runs inside the image: 'make train')")
