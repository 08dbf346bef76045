#!/usr/bin/env python3
"""Self-check of the training image, run as the last build step and by tests/image.

Proves, without a GPU, that what the seeds broke on is fixed inside the image: the patched
OpenRL import works in a fresh interpreter, HARL knows the ``mapush`` env, every patch is
recorded and still in place (file hashes equal the records), MAPush and Isaac Gym are
installed, and ``pip check`` is clean. Prints one JSON object with the versions.
Exit status 0 when every check passes, 1 otherwise (one ``error:`` line per failure).
"""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Callable, Dict, List

COMPONENTS = ("openrl", "harl", "mapush")


def _sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def check_openrl() -> str:
    import openrl.utils.callbacks.checkpoint_callback  # noqa: F401  (the import cycle)

    return "openrl.utils.callbacks.checkpoint_callback imports"


def check_harl() -> str:
    from harl.envs import LOGGER_REGISTRY

    logger = LOGGER_REGISTRY.get("mapush")
    if logger is None or not logger.__module__.startswith("mapush."):
        raise AssertionError("harl.envs.LOGGER_REGISTRY has no 'mapush' logger of ours: %r"
                             % (logger,))
    return "harl LOGGER_REGISTRY['mapush'] = %s.%s" % (logger.__module__, logger.__name__)


def check_patches() -> str:
    from mapush.provenance import patch_record_dir, patch_records

    records = {r.get("component"): r for r in patch_records()}
    missing = [c for c in COMPONENTS if c not in records]
    if missing:
        raise AssertionError("no patch record for %s in %s" % (", ".join(missing),
                                                                patch_record_dir()))
    for component in COMPONENTS:
        record = records[component]
        if record.get("status") not in ("applied", "already-applied"):
            raise AssertionError("%s record: status %r" % (component, record.get("status")))
        for entry in record.get("files", []):
            path = os.path.join(record["dir"], entry["path"])
            if _sha256(path) != entry["after"]:
                raise AssertionError("%s: %s differs from the patched file recorded"
                                     % (component, path))
    return "patches recorded and in place: %s" % ", ".join(
        "%s (%d)" % (c, len(records[c].get("patches", []))) for c in COMPONENTS)


def check_installed() -> str:
    for module in ("isaacgym", "mqe", "harl", "mapush"):
        if importlib.util.find_spec(module) is None:
            raise AssertionError("module %s is not installed" % module)
    root = os.environ.get("MAPUSH_ROOT", "/opt/mapush")
    from mapush.objects import find_objects

    objects = find_objects()
    if not objects:
        raise AssertionError("no task/<object>/config.py under MAPUSH_ROOT=%s" % root)
    return "isaacgym, mqe, harl, mapush installed; objects: %s" % ", ".join(objects)


def check_pip() -> str:
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.returncode != 0:
        raise AssertionError("pip check: %s" % proc.stdout.strip().replace("\n", "; "))
    return "pip check clean"


def check_run_record() -> str:
    """What every run's config.json will record: complete, with the pins the package ships
    equal to the image's env/pins.env."""
    from mapush import pins
    from mapush.provenance import provenance

    packaged = os.path.join(os.path.dirname(pins.__file__), pins.PINS_FILE)
    if not os.path.isfile(packaged):
        raise AssertionError("the mapush package ships no %s" % pins.PINS_FILE)
    with open(packaged) as handle:
        if pins.parse_pins(handle.read()) != pins.load_pins():
            raise AssertionError("%s differs from %s" % (packaged, pins.pins_path()))
    missing = provenance()["incomplete"]
    if missing:
        raise AssertionError("runs would record an incomplete stack: %s" % "; ".join(missing))
    return "runs record every pin, version and patch"


def check_smoke() -> str:
    """``mapush smoke``'s stages are where it looks, and pytest (with pytest-timeout, from
    the lock) collects them."""
    folder = os.environ.get("MAPUSH_SMOKE_TESTS", "")
    tests = os.path.join(folder, "test_stages.py")
    if not os.path.isfile(tests):
        raise AssertionError("no smoke stages at MAPUSH_SMOKE_TESTS=%s" % folder)
    if importlib.util.find_spec("pytest_timeout") is None:
        raise AssertionError("pytest-timeout is not installed: the stages' time limits need it")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                           "no:cacheprovider", tests],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    stages = [line for line in proc.stdout.splitlines() if "::test_" in line]
    if proc.returncode != 0 or not stages:
        raise AssertionError("pytest does not collect %s: %s"
                             % (tests, proc.stdout.strip().splitlines()[-1:]))
    return "mapush smoke: %d stages collected from %s" % (len(stages), folder)


CHECKS = [check_openrl, check_harl, check_patches, check_installed, check_pip,
          check_run_record, check_smoke]  # type: List[Callable[[], str]]


def main() -> int:
    failures = 0
    for check in CHECKS:
        try:
            print("ok: %s" % check(), file=sys.stderr)
        except Exception as exc:  # every failure is reported, then the build stops
            failures += 1
            print("error: %s: %s: %s" % (check.__name__, type(exc).__name__, exc),
                  file=sys.stderr)
    from mapush.provenance import installed_versions

    report = {"python": sys.version.split()[0], "versions": installed_versions(),
              "failures": failures}  # type: Dict[str, Any]
    print(json.dumps(report, sort_keys=True))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
