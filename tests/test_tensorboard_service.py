"""`docker compose up tensorboard` for real: the slim image builds (on a Debian base made
from Debian's archive when no registry answers), the service answers HTTP on the published
127.0.0.1 port, lists a run whose event file the test wrote under a runs/ folder and shows
its scalars, cannot write to runs/, and is torn down. No GPU, no Isaac Gym tarball and no
training image are involved."""
import json
import os
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tests.image.support import REPO, compose_cli, debian_base, run

pytestmark = pytest.mark.docker
TAG = "metrics/success_rate"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read().decode())


def _write_run(runs: Path) -> str:
    from tensorboardX import SummaryWriter

    name = "go1push_mid/cuboid/happo/seed1-test"
    writer = SummaryWriter(str(runs / name / "logs"))
    for step in range(5):
        writer.add_scalar(TAG, step / 10.0, step * 1000)
    writer.close()
    for folder, dirs, files in os.walk(str(runs)):  # as a default umask leaves them
        os.chmod(folder, 0o755)
        for item in files:
            os.chmod(os.path.join(folder, item), 0o644)
    return name + "/logs"


@pytest.fixture
def service(tmp_path):
    base = os.environ.get("TENSORBOARD_BASE_IMAGE") or debian_base()
    runs = tmp_path / "runs"
    runs.mkdir()
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOST_UID", "HOST_GID", "COMPOSE_PROFILES", "GPU")}
    env.update(TENSORBOARD_BASE_IMAGE=base, TENSORBOARD_IMAGE="mapush-tensorboard:test",
               RUNS_DIR=str(runs), TENSORBOARD_PORT=str(port))
    compose = compose_cli() + ["--project-directory", str(REPO), "-f", str(REPO / "compose.yaml"),
                               "-p", "mapush-test-%d" % os.getpid()]

    def call(*args: str, **kwargs: Any):  # type: ignore[no-untyped-def]
        return run(compose + list(args), env=env, cwd=str(REPO), **kwargs)

    call("build", "tensorboard", timeout=900)
    try:
        yield {"call": call, "port": port, "runs": runs}
    finally:
        call("down", "--volumes", "--remove-orphans", timeout=120, check=False)


def test_tensorboard_service_serves_runs_read_only_on_localhost(service):
    run_name = _write_run(service["runs"])
    service["call"]("up", "--detach", "--no-build", "tensorboard", timeout=120)
    port = service["port"]
    published = service["call"]("port", "tensorboard", "6006").stdout.strip()
    assert published == "127.0.0.1:%d" % port

    url = "http://127.0.0.1:%d" % port
    runs = []  # type: List[str]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            runs = _get(url + "/data/runs")
            if run_name in runs:
                break
        except OSError:
            pass
        time.sleep(1)
    logs = service["call"]("logs", "tensorboard", check=False).stdout
    assert run_name in runs, "runs %r; logs:\n%s" % (runs, logs[-3000:])
    # #38 item 7: the announcement names the published address, not the container's name
    announced = [line for line in logs.splitlines() if "(Press CTRL+C to quit)" in line]
    assert len(announced) == 1 and " at %s/ (Press" % url in announced[0], logs[-3000:]

    tags = {}  # type: Dict[str, Any]
    while time.monotonic() < deadline:
        tags = _get(url + "/data/plugin/scalars/tags")
        if TAG in tags.get(run_name, {}):
            break
        time.sleep(1)
    assert TAG in tags.get(run_name, {}), tags

    write = service["call"]("exec", "-T", "tensorboard", "/opt/tensorboard/bin/python", "-c",
                            "open('/runs/probe', 'w')", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr + write.stdout
    uid = service["call"]("exec", "-T", "tensorboard", "id", "-u").stdout.strip()
    assert uid != "0"
