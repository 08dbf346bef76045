"""Read the pins of ``env/pins.env``, the single source of every version and commit."""
import os
from pathlib import Path
from typing import Dict, Optional

PINS_FILE = "pins.env"
_PACKAGED = Path(__file__).resolve().parent / PINS_FILE
# Where the image installs env/ (see docker/Dockerfile).
_IMAGE_ENV = Path("/opt/mapush-env/env")


def pins_path() -> Optional[Path]:
    """$MAPUSH_ENV_DIR/pins.env when set, else the packaged copy, else the image's."""
    override = os.environ.get("MAPUSH_ENV_DIR")
    candidates = [Path(override) / PINS_FILE] if override else []
    for candidate in candidates + [_PACKAGED, _IMAGE_ENV / PINS_FILE]:
        if candidate.is_file():
            return candidate
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
    """All pins, or an empty dict when no pins file can be found."""
    path = pins_path()
    if path is None:
        return {}
    return parse_pins(path.read_text())
