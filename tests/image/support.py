"""Finding Docker, Compose and the test base image for the docker-marked tests.

A missing tool skips the test with the reason, except under CI (``CI`` set), where
.ci/run installs Docker, Compose v2 and debootstrap: there a missing tool fails the test,
so a CI run cannot pass by skipping them.
"""
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
# Made by docker/scripts/debian-base.sh from Debian's archive (no registry needed).
DEBIAN_BASE = os.environ.get("MAPUSH_TEST_BASE_IMAGE", "mapush-debian-base:bookworm")
BASE_CACHE = os.environ.get("MAPUSH_TEST_BASE_CACHE", "")


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail("CI must provide this (see .ci/run): " + reason)
    pytest.skip(reason)


def pins() -> Dict[str, str]:
    from mapush.pins import parse_pins

    return parse_pins((REPO / "env" / "pins.env").read_text())


def docker_cli() -> str:
    path = shutil.which("docker")
    if not path:
        _missing("no docker command")
    return path  # type: ignore[return-value]


def run(args: List[str], timeout: float = 120, check: bool = True, **kwargs):  # type: ignore[no-untyped-def]
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError("%s exited %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), proc.returncode, proc.stdout[-4000:],
                                proc.stderr[-4000:]))
    return proc


def compose_cli() -> List[str]:
    """``docker compose`` (v2) as an argv prefix."""
    docker = docker_cli()
    try:
        proc = run([docker, "compose", "version"], timeout=30, check=False)
    except subprocess.TimeoutExpired:
        proc = None
    if proc is None or proc.returncode != 0 or "v2." not in proc.stdout:
        _missing("no Docker Compose v2 (`docker compose version` failed; ci/install-docker.sh "
                 "installs it)")
    return [docker, "compose"]


def daemon() -> str:
    """The docker command, when a daemon answers."""
    docker = docker_cli()
    try:
        proc = run([docker, "info", "--format", "{{.ServerVersion}}"], timeout=20, check=False)
    except subprocess.TimeoutExpired:
        proc = None
    if proc is None or proc.returncode != 0:
        _missing("no Docker daemon answers (`docker info` failed)")
    return docker


def debian_base() -> str:
    """The local Debian base image, made from Debian's archive when it does not exist."""
    docker = daemon()
    if run([docker, "image", "inspect", DEBIAN_BASE], check=False).returncode == 0:
        return DEBIAN_BASE
    if not shutil.which("debootstrap") or os.geteuid() != 0:
        _missing("no %s image and no way to make it (docker/scripts/debian-base.sh needs "
                 "root and debootstrap)" % DEBIAN_BASE)
    args = [str(REPO / "docker" / "scripts" / "debian-base.sh"), DEBIAN_BASE]
    if BASE_CACHE:
        args.append(BASE_CACHE)
    run(args, timeout=1200)
    return DEBIAN_BASE
