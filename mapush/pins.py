"""Read the pins of ``env/pins.env``, the single source of every version and commit."""
import os
from pathlib import Path
from typing import Dict, Optional

_REPO_ENV = Path(__file__).resolve().parent.parent / "env"
# Where the image installs env/ (see docker/Dockerfile).
_IMAGE_ENV = Path("/opt/mapush-env/env")


def env_dir() -> Optional[Path]:
    """The env/ folder: $MAPUSH_ENV_DIR, the source checkout, or the image's copy."""
    for candidate in (os.environ.get("MAPUSH_ENV_DIR"), _REPO_ENV, _IMAGE_ENV):
        if candidate and (Path(candidate) / "pins.env").is_file():
            return Path(candidate)
    return None


def parse_pins(text: str) -> Dict[str, str]:
    """KEY=VALUE lines; blank lines and ``#`` comments ignored."""
    pins = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError("pins.env: not KEY=VALUE: %r" % raw)
        pins[key.strip()] = value.strip()
    return pins


def load_pins() -> Dict[str, str]:
    """All pins, or an empty dict when no env/ folder can be found."""
    folder = env_dir()
    if folder is None:
        return {}
    return parse_pins((folder / "pins.env").read_text())
