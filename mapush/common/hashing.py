"""sha256 of a file, read in blocks (checkpoints, configs, the command net)."""
import hashlib
from typing import Any


def sha256(path: Any) -> str:
    digest = hashlib.sha256()
    with open(str(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
