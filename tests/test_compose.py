"""compose.yaml as Docker Compose v2 reads it (`docker compose config`, offline): the GPU
reservation, TensorBoard read-only on 127.0.0.1 and independent of the GPU image, nothing
privileged or on the host network, defaults equal to the Makefile's."""
import json
import os
import re
import subprocess
from typing import Any, Dict, Optional

import pytest

from tests.image.support import REPO, compose_cli, pins

GPU_SERVICES = ("train", "smoke-test", "doctor")
CLEAN_ENV = ("GPU", "TENSORBOARD_PORT", "RUNS_DIR", "MAPUSH_IMAGE", "TENSORBOARD_IMAGE",
             "NUM_ENVS", "ALGO", "TASK", "OBJECT", "SEED", "SHM_SIZE", "HOST_UID", "HOST_GID",
             "COMPOSE_PROFILES", "COMPOSE_FILE", "COMPOSE_PROJECT_NAME", "TENSORBOARD_BASE_IMAGE",
             "TENSORBOARD_INPUTS")


def config(*args: str, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    full = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    full.update(env or {})
    proc = subprocess.run(compose_cli() + ["--project-directory", str(REPO), "-f",
                                           str(REPO / "compose.yaml")] + list(args)
                          + ["config", "--format", "json"], cwd=str(REPO), env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def full():
    return config("--profile", "gpu", "--env-file", str(REPO / "env" / "pins.env"))["services"]


def test_compose_accepts_the_file_and_plain_up_starts_only_tensorboard():
    services = config()["services"]
    assert list(services) == ["tensorboard"]


def test_gpu_services_reserve_the_selected_gpu():
    services = config("--profile", "gpu", env={"GPU": "2"})["services"]
    for name in GPU_SERVICES:
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "device_ids": ["2"],
                            "capabilities": ["gpu", "compute", "utility", "graphics"]}], name
        # the video camera renders through Vulkan: the graphics driver capability
        assert services[name]["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "all", name
    assert config("--profile", "gpu")["services"]["train"]["deploy"]["resources"][
        "reservations"]["devices"][0]["device_ids"] == ["0"]


def test_gpu_services_mount_runs_and_can_stop_gracefully(full):
    for name in GPU_SERVICES:
        service = full[name]
        [mount] = service["volumes"]
        assert mount["type"] == "bind" and mount["target"] == "/work/runs"
        assert mount["source"] == str(REPO / "runs") and not mount.get("read_only")
        assert service["working_dir"] == "/work" and service["init"] is True
        assert int(service["shm_size"]) >= 2 ** 30
        assert service["pull_policy"] == "never"  # built by make build, never pulled
    seconds = {"s": 1, "m": 60, "h": 3600}
    grace = sum(int(n) * seconds[u] for n, u in re.findall(r"(\d+)([hms])", full["train"]["stop_grace_period"]))
    assert grace >= 60, full["train"]["stop_grace_period"]


def test_train_defaults_match_the_makefile(full):
    makefile = (REPO / "Makefile").read_text()

    def default(name: str) -> str:
        value = re.search(r"^%s \?= (.*)$" % name, makefile, re.M).group(1).strip()
        # NUM_ENVS: $(if $(filter go1push_upper,$(TASK)),500,200) -> the default TASK's 200
        conditional = re.match(r"^\$\(if \$\(filter \S+,\$\(TASK\)\),(\w+),(\w+)\)$", value)
        return conditional.group(2) if conditional else value

    command = full["train"]["command"]
    assert command[:2] == ["mapush", "train"]
    for option, var in (("--algo", "ALGO"), ("--task", "TASK"), ("--object", "OBJECT"),
                        ("--num-envs", "NUM_ENVS"), ("--seed", "SEED")):
        assert "%s=%s" % (option, default(var)) in command, (option, command)
    # IMAGE depends on STACK: the tag make resolves for the default stack
    helped = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=str(REPO),
                            capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items()
                                 if k not in ("IMAGE", "STACK", "MAKEFLAGS")}).stdout
    assert full["train"]["image"] == re.search(r"\bIMAGE=(\S+)", helped).group(1)
    assert full["smoke-test"]["command"] == ["mapush", "smoke", "--report", "runs/smoke/report.json"]


def test_tensorboard_reads_runs_read_only_on_localhost(full):
    services = config(env={"TENSORBOARD_PORT": "16006", "RUNS_DIR": "/tmp/some-runs"})["services"]
    service = services["tensorboard"]
    [mount] = service["volumes"]
    assert mount == {"type": "bind", "source": "/tmp/some-runs", "target": "/runs",
                     "read_only": True}
    [port] = service["ports"]
    assert port["host_ip"] == "127.0.0.1" and port["published"] == "16006"
    assert port["target"] == 6006
    assert full["tensorboard"]["ports"][0]["published"] == "6006"
    # it reads runs/ as the host user that make passes
    users = config(env={"HOST_UID": "1234", "HOST_GID": "99"})["services"]["tensorboard"]
    assert users["user"] == "1234:99"


def test_tensorboard_needs_no_gpu_no_training_image_and_no_tarball(full):
    service = full["tensorboard"]
    assert "deploy" not in service and "profiles" not in service
    assert "depends_on" not in service
    assert service["build"]["dockerfile"] == "docker/tensorboard.Dockerfile"
    assert service["image"] != full["train"]["image"]
    assert "additional_contexts" not in service["build"]
    dockerfile = (REPO / "docker" / "tensorboard.Dockerfile").read_text()
    assert "isaacgym" not in dockerfile.lower() and "cuda" not in dockerfile.lower().replace(
        "no cuda", "")
    # an unset base leaves the Dockerfile's default; a set one reaches the build
    assert "args" not in service["build"]
    base = config(env={"TENSORBOARD_BASE_IMAGE": "local/base:1"})["services"]["tensorboard"]
    assert base["build"]["args"] == {"TENSORBOARD_BASE_IMAGE": "local/base:1"}


def test_no_service_is_privileged_or_on_host_namespaces(full):
    for name, service in full.items():
        assert not service.get("privileged"), name
        for key in ("network_mode", "pid", "ipc", "uts", "userns_mode"):
            assert service.get(key) != "host", (name, key)
        assert not service.get("cap_add"), name
        assert not service.get("devices"), name  # GPUs only through the reservation
        for mount in service.get("volumes", []):
            assert not mount["source"].startswith("/var/run/docker"), name


def test_compose_reads_the_pins_file():
    # every pin is a valid compose env-file entry (make passes --env-file env/pins.env)
    services = config("--env-file", str(REPO / "env" / "pins.env"), "--profile", "gpu",
                      env={})["services"]
    assert set(services) == {"train", "smoke-test", "doctor", "tensorboard"}
    assert pins()["CUDA_BASE_IMAGE"]


def test_the_step_checks_verdict_outlives_the_container(full):
    """#77: with `docker compose run --rm` only runs/ persists, so the step check's cache is
    under it; in the container's ~/.cache every train, resume and sweep cell checked again."""
    for name in GPU_SERVICES:
        cache = full[name]["environment"]["MAPUSH_CACHE_DIR"]
        [mount] = full[name]["volumes"]
        assert cache.startswith(mount["target"] + "/"), name


def test_contact_buffer_is_budgeted_unless_the_user_sets_a_multiplier():
    """An always-set multiplier would switch off mapush's PhysX budget (issue 6)."""
    services = config("--profile", "gpu", env={"MAPUSH_CONTACT_PAIRS_MULTIPLIER": ""})["services"]
    for name in GPU_SERVICES:
        assert services[name]["environment"]["MAPUSH_CONTACT_PAIRS_MULTIPLIER"] == "", name
    chosen = config("--profile", "gpu", env={"MAPUSH_CONTACT_PAIRS_MULTIPLIER": "2"})["services"]
    assert chosen["train"]["environment"]["MAPUSH_CONTACT_PAIRS_MULTIPLIER"] == "2"


def test_each_checkout_is_its_own_compose_project(tmp_path):
    """Two clones must not stop each other's services: the project is the checkout's folder
    name (compose.yaml fixes none), and COMPOSE_PROJECT_NAME picks another."""
    import shutil

    names = {}
    for clone in ("mapush-a", "mapush-b"):
        folder = tmp_path / clone
        folder.mkdir()
        shutil.copy(str(REPO / "compose.yaml"), str(folder / "compose.yaml"))
        env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
        proc = subprocess.run(compose_cli() + ["config", "--format", "json"], cwd=str(folder),
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        names[clone] = json.loads(proc.stdout)["name"]
    assert names == {"mapush-a": "mapush-a", "mapush-b": "mapush-b"}
    mine = config(env={"COMPOSE_PROJECT_NAME": "my-mapush"})
    assert mine["name"] == "my-mapush"


def test_the_training_services_forward_wandbs_settings():
    """#51 item 3: only WANDB_API_KEY reached the container, so WANDB_MODE=offline make train
    EXTRA=--wandb could not work."""
    given = {"WANDB_MODE": "offline", "WANDB_PROJECT": "mine", "WANDB_ENTITY": "lab",
             "WANDB_DIR": "/work/runs/wandb"}
    services = config("--profile", "gpu", env=given)["services"]
    for name in GPU_SERVICES:
        for key, value in given.items():
            assert services[name]["environment"][key] == value, (name, key)
