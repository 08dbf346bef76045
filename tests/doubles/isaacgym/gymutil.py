"""Stand-in for ``isaacgym.gymutil``."""


def parse_device_str(device_str):
    if device_str in ("cpu", "cuda"):
        return device_str, 0
    kind, _, index = device_str.partition(":")
    if kind not in ("cpu", "cuda") or not index.isdigit():
        raise ValueError("Invalid device string %r" % device_str)
    return kind, int(index)
