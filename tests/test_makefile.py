"""The Makefile: every target documented, options reaching `mapush train`, bad options and
a missing Isaac Gym tarball stopped with one line before Docker starts, pins passed to the
image build. Docker itself is replaced by a stub that records its argv."""
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from mapush.objects import KNOWN_OBJECTS
from mapush.pins import parse_pins
from mapush.spec import TASKS
from mapush.registry import ALGOS

REPO = Path(__file__).resolve().parent.parent
PINS = parse_pins((REPO / "env" / "pins.env").read_text())
REQUIRED = ("build", "train", "tensorboard", "smoke-test", "test", "test-image", "doctor",
            "shell", "eval", "clean", "bench")

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$DOCKER_LOG"
if [ "$1 $2" = "buildx version" ] && [ -n "${STUB_NO_BUILDX:-}" ]; then
    echo "docker: 'buildx' is not a docker command." >&2; exit 1; fi
if [ "$1 $2" = "compose version" ] && [ -n "${STUB_NO_COMPOSE:-}" ]; then
    echo "docker: 'compose' is not a docker command." >&2; exit 1; fi
if [ "$1" = "info" ] && [ -n "${STUB_NO_DAEMON:-}" ]; then
    echo "Cannot connect to the Docker daemon" >&2; exit 1; fi
if [ "$1 $2 $3" = "info --format {{json .Runtimes}}" ] && [ -z "${STUB_NO_TOOLKIT:-}" ]; then
    echo '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'; exit 0; fi
if [ "$1 $2" = "version --format" ]; then echo "${STUB_ENGINE:-27.3.1}"; exit 0; fi
if [ "$1" = "pull" ] && [ -n "${STUB_NO_PULL:-}" ]; then
    echo "Error response from daemon: Get https://registry-1.docker.io/v2/: dial tcp" >&2; exit 1; fi
if [ "$1 $2" = "image inspect" ]; then
    case "$4" in *org.mapush.base*) echo "${STUB_BASE_LABEL:-}"; exit "${STUB_INSPECT_RC:-0}";; esac
    if [ "$3" = "--format" ] && [ -n "${STUB_LABEL:-}" ]; then echo "$STUB_LABEL"; fi
    exit "${STUB_INSPECT_RC:-0}"; fi
exit 0
"""


def fake_tarball(path: Path, leave_out: str = "") -> Path:
    """A tar.gz with the layout the image build takes from Isaac Gym Preview 4."""
    import io
    import tarfile

    with tarfile.open(str(path), "w:gz") as archive:
        for name in ("isaacgym/python/setup.py",
                     "isaacgym/python/isaacgym/_bindings/linux-x86_64/gym_38.so",
                     "isaacgym/docker/nvidia_icd.json", "isaacgym/docker/10_nvidia.json"):
            if name == leave_out:
                continue
            data = b"stand-in"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def sandbox(tmp_path):
    """A copy of the Makefile and env/ with a docker stub: make runs for real, Docker not."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    shutil.copytree(REPO / "env", tmp_path / "env")
    shutil.copytree(REPO / "docker", tmp_path / "docker")
    stub = tmp_path / "docker-stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    return tmp_path


def make(args: List[str], cwd: Path = REPO, env: Optional[Dict[str, str]] = None,
         ) -> subprocess.CompletedProcess:
    full = dict(os.environ, **(env or {}))
    for name in ("NUM_ENVS", "ALGO", "TASK", "OBJECT", "SEED", "STEPS", "GPU", "RUN_DIR",
                 "EXTRA", "RUN", "IMAGE", "MAKEFLAGS", "MAKELEVEL", "SUDO_UID", "SUDO_GID",
                 "HOST_UID", "HOST_GID", "COMPOSE_PROJECT_NAME", "TENSORBOARD_BASE_IMAGE",
                 "VENV", "HOST_VENV"):
        if not (env and name in env):
            full.pop(name, None)
    return subprocess.run(["make", "--no-print-directory"] + args, cwd=str(cwd), env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


NVIDIA_SMI_STUB = """#!/usr/bin/env bash
if [ -n "${STUB_NO_GPU:-}" ]; then echo "NVIDIA-SMI has failed" >&2; exit 9; fi
case "$1" in -L) echo "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0)" ;; *) echo "550.54" ;; esac
"""


STOP = "*** nothing was started: the error lines above say what to fix.  Stop."


def refused(proc: subprocess.CompletedProcess) -> List[str]:
    """The ``error:`` lines of a refused make (exit 2), then GNU make's own closing line
    (#38 item 1: no problem is printed in make's ``Makefile:N: *** error: ...`` form)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines and lines[-1].endswith(STOP), proc.stderr
    assert all(line.startswith("error: ") for line in lines[:-1]), proc.stderr
    return lines[:-1]


def stubbed(sandbox: Path, args: List[str], **env: str) -> subprocess.CompletedProcess:
    """make with Docker and nvidia-smi stubbed (a GPU and the Container Toolkit present,
    unless STUB_NO_GPU / STUB_NO_TOOLKIT), no nvidia-ctk on PATH, and a build's disk need
    of 0 GB unless BUILD_DISK_GB says otherwise."""
    log = sandbox / "docker.log"
    smi = sandbox / "nvidia-smi-stub"
    smi.write_text(NVIDIA_SMI_STUB)
    smi.chmod(0o755)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if not (Path(p) / "nvidia-ctk").exists())
    return make(args + ["DOCKER=%s" % (sandbox / "docker-stub"), "NVIDIA_SMI=%s" % smi],
                cwd=sandbox, env=dict({"DOCKER_LOG": str(log), "BUILD_DISK_GB": "0",
                                       "PATH": path}, **env))


def docker_calls(sandbox: Path) -> List[str]:
    """What make asked Docker, but the read-only queries of facts (``docker info --format``:
    the runtimes, the data root; the TensorBoard image's base label)."""
    log = sandbox / "docker.log"
    return [line for line in (log.read_text().splitlines() if log.exists() else [])
            if not line.startswith("info --format") and "org.mapush.base" not in line]


def targets() -> Dict[str, str]:
    """``{target: help}`` of every rule the Makefile defines (help '' when it has none)."""
    found = {}
    for line in (REPO / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.$()/-]+):(?!=)([^#]*)(?:## (.*))?$", line)
        if match and match.group(1) != ".PHONY" and "=" not in match.group(2):
            found[match.group(1)] = (match.group(3) or "").strip()
    return found


def test_every_target_has_a_help_line_and_make_help_lists_it():
    rules = {t: h for t, h in targets().items() if not t.startswith("$(")}  # file rules
    assert set(REQUIRED) <= set(rules), set(REQUIRED) - set(rules)
    assert [t for t, h in rules.items() if not h] == []
    listing = make(["help"])
    assert listing.returncode == 0, listing.stderr
    for target, text in rules.items():
        assert re.search(r"make %s\s+%s" % (re.escape(target), re.escape(text)), listing.stdout), target
    assert "$(" not in listing.stdout


def test_option_choices_match_the_mapush_command():
    text = (REPO / "Makefile").read_text()

    def words(name: str) -> List[str]:
        return re.search(r"^%s := (.*)$" % name, text, re.M).group(1).split()

    assert words("ALGOS") == list(ALGOS)
    assert words("TASKS") == list(TASKS)
    assert words("OBJECT_CHOICES") == list(KNOWN_OBJECTS)


def _train_line(stdout: str) -> str:
    joined = stdout.replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if " mapush train " in line]
    assert len(lines) == 1, stdout
    return re.sub(r"\s+", " ", lines[0])


def test_dry_run_train_passes_the_options_to_mapush_train():
    proc = make(["-n", "train", "NUM_ENVS=200", "ALGO=happo"])
    assert proc.returncode == 0, proc.stderr
    line = _train_line(proc.stdout)
    assert "compose --env-file env/pins.env run --rm train mapush train" in line
    assert "--algo happo --task go1push_mid --object cuboid --num-envs 200 --seed 1" in line
    assert "--steps" not in line and "--run-dir" not in line


def test_dry_run_train_with_every_option():
    proc = make(["-n", "train", "NUM_ENVS=64", "ALGO=hatrpo", "OBJECT=Tblock", "SEED=0",
                 "STEPS=5000", "RUN_DIR=runs/mine", "EXTRA=--record-video --checkpoint-interval 100"])
    assert proc.returncode == 0, proc.stderr
    line = _train_line(proc.stdout)
    assert ("mapush train --algo hatrpo --task go1push_mid --object Tblock --num-envs 64 "
            "--seed 0 --steps 5000 --run-dir runs/mine --record-video --checkpoint-interval 100"
            ) in line


def test_dry_run_train_across_gpus_gives_the_container_those_gpus_numbered_from_0():
    """#78: make train GPUS="2 3": the container gets host GPUs 2 and 3 (compose's GPU), and
    inside, where they are cuda:0 and cuda:1, mapush train runs across --gpus 0,1."""
    proc = make(["-n", "train", "GPUS=2 3"])
    assert proc.returncode == 0, proc.stderr
    line = _train_line(proc.stdout)
    assert line.startswith("GPU=2,3 ") and line.strip().endswith("--seed 1 --gpus 0,1"), line


def test_options_from_the_environment_are_used_too():
    proc = make(["-n", "train"], env={"ALGO": "mappo", "NUM_ENVS": "8"})
    assert proc.returncode == 0, proc.stderr
    assert "--algo mappo" in _train_line(proc.stdout)
    assert "--num-envs 8" in _train_line(proc.stdout)


@pytest.mark.parametrize("option, value, expect", [
    ("NUM_ENVS", "abc", "NUM_ENVS='abc' is not a positive integer"),
    ("NUM_ENVS", "0", "NUM_ENVS='0' is not a positive integer"),
    ("NUM_ENVS", "2 00", "NUM_ENVS='2 00' is not a positive integer"),
    ("ALGO", "foo", "ALGO='foo' is not one of: ppo happo mappo hatrpo"),
    ("OBJECT", "sphere", "OBJECT='sphere' is not one of: cuboid Tblock cylinder"),
    ("TASK", "go1push_top", "TASK='go1push_top' is not one of"),
    ("SEED", "-1", "SEED='-1' is not a non-negative integer"),
    ("STEPS", "1e6", "STEPS='1e6' is not a positive integer"),
    ("GPU", "cuda:1", "GPU='cuda:1' is not a non-negative integer"),
    ("RUN_DIR", "/tmp/elsewhere", "RUN_DIR='/tmp/elsewhere' must be a path under runs/"),
])
def test_a_bad_option_stops_with_one_line_before_docker(sandbox, option, value, expect):
    proc = stubbed(sandbox, ["train", "%s=%s" % (option, value)])
    lines = refused(proc)
    assert len(lines) == 1 and lines[0].startswith("error: " + expect), proc.stderr
    assert docker_calls(sandbox) == []


def test_eval_needs_an_existing_run_under_runs(sandbox):
    proc = stubbed(sandbox, ["eval"])
    assert proc.returncode == 2 and "error: RUN is not set" in proc.stderr
    proc = stubbed(sandbox, ["eval", "RUN=runs/nope"])
    assert proc.returncode == 2 and "RUN='runs/nope' does not exist" in proc.stderr
    assert docker_calls(sandbox) == []
    (sandbox / "runs" / "a").mkdir(parents=True)
    proc = stubbed(sandbox, ["eval", "RUN=runs/a"])
    assert proc.returncode == 0, proc.stderr
    assert docker_calls(sandbox)[-1] == \
        "compose --env-file env/pins.env run --rm train mapush eval --run runs/a"


def test_export_needs_a_run_and_passes_it_or_the_checkpoint(sandbox):
    proc = stubbed(sandbox, ["export"])
    assert proc.returncode == 2 and "error: RUN is not set" in proc.stderr
    assert docker_calls(sandbox) == []
    (sandbox / "runs" / "a").mkdir(parents=True)
    proc = stubbed(sandbox, ["export", "RUN=runs/a"])
    assert proc.returncode == 0, proc.stderr
    assert docker_calls(sandbox)[-1] == \
        "compose --env-file env/pins.env run --rm train mapush export --run runs/a"
    proc = stubbed(sandbox, ["export", "RUN=runs/a", "CHECKPOINT=runs/a/checkpoints/c"])
    assert docker_calls(sandbox)[-1] == "compose --env-file env/pins.env run --rm train " \
        "mapush export --checkpoint runs/a/checkpoints/c"


def test_build_without_the_tarball_says_where_to_get_it_and_where_to_put_it(sandbox):
    lines = refused(stubbed(sandbox, ["build"]))
    assert len(lines) == 1, lines
    assert PINS["ISAACGYM_DOWNLOAD_URL"] in lines[0]
    assert "vendor/" + PINS["ISAACGYM_TARBALL"] in lines[0]
    assert "ISAACGYM_TARBALL_PATH=" in lines[0]
    assert docker_calls(sandbox) == CHECKS_ONLY


def test_train_without_image_and_tarball_stops_before_building(sandbox):
    proc = stubbed(sandbox, ["train"], STUB_INSPECT_RC="1")
    assert proc.returncode != 0
    assert PINS["ISAACGYM_DOWNLOAD_URL"] in proc.stderr
    assert [c.split()[0:2] for c in docker_calls(sandbox)] == [
        ["compose", "version"], ["info"], ["image", "inspect"], ["buildx", "version"]]


# The checks of a build (docker/host-check.sh prereqs): the daemon, then BuildKit; no build.
CHECKS_ONLY = ["info", "buildx version"]


@pytest.mark.parametrize("daemon", [True, False])
def test_every_missing_prerequisite_is_named_in_one_pass(sandbox, daemon):
    """No GPU, no Container Toolkit, no Compose, no BuildKit, no tarball (and no daemon):
    one make train names each, one line apiece with its fix, exit 2, before anything runs
    (#38: the GPU and the toolkit went unmentioned until the long build was done)."""
    env = {"STUB_NO_COMPOSE": "1", "STUB_NO_BUILDX": "1", "STUB_INSPECT_RC": "1",
           "STUB_NO_GPU": "1", "STUB_NO_TOOLKIT": "1"}
    if not daemon:
        env["STUB_NO_DAEMON"] = "1"
    proc = stubbed(sandbox, ["train"], **env)
    lines = refused(proc)
    assert len(lines) == (5 if daemon else 6), proc.stderr
    assert all("error: " in line for line in lines)
    assert "no NVIDIA driver answers" in lines[0] and "R510" in lines[0]
    assert "NVIDIA Container Toolkit is missing" in lines[1] and "nvidia-ctk runtime " \
        "configure" in lines[1]
    assert "Compose v2" in lines[2]
    if not daemon:
        assert "Docker daemon does not answer" in lines[3]
    assert "Isaac Gym tarball not found" in lines[-2] and "BuildKit" in lines[-1]
    assert not [c for c in docker_calls(sandbox) if c.startswith(("compose run", "build "))]


def test_build_passes_every_pin_and_stages_only_the_tarball(sandbox, tmp_path):
    real = tmp_path / "elsewhere" / "isaacgym.tgz"
    real.parent.mkdir()
    fake_tarball(real)
    tarball = tmp_path / "link.tgz"  # a symlink is staged as the file it points to
    tarball.symlink_to(real)
    proc = stubbed(sandbox, ["build", "ISAACGYM_TARBALL_PATH=%s" % tarball,
                             "HOST_UID=1234", "HOST_GID=567"])
    assert proc.returncode == 0, proc.stderr
    assert docker_calls(sandbox)[:2] == CHECKS_ONLY  # the daemon and BuildKit checked first
    [call] = docker_calls(sandbox)[2:]
    args = call.split()
    assert args[0] == "build" and "--file" in args and "docker/Dockerfile" in args
    dockerfile_args = set(re.findall(r"^ARG (\w+)", (REPO / "docker" / "Dockerfile").read_text(), re.M))
    build_args = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--build-arg")
    assert build_args.pop("HOST_UID") == "1234" and build_args.pop("HOST_GID") == "567"
    # the staged file's sha256: install-isaacgym.sh checks the mount against it, and it keys
    # the Isaac Gym layer's cache (podman's cache does not look into mounts)
    digest = build_args.pop("ISAACGYM_TARBALL_DIGEST")
    assert digest == hashlib.sha256(real.read_bytes()).hexdigest()
    assert build_args["STACK"] == "cu116"
    PINS["STACK"] = "cu116"  # the default stack: the pins without a CU121_ prefix
    # every ARG of the Dockerfile that is a pin gets the pins.env value, and nothing else;
    # PYTHON_APT_PACKAGES keeps its default, derived from PYTHON_VERSION in the Dockerfile
    assert set(build_args) == dockerfile_args - {"HOST_UID", "HOST_GID",
                                                 "ISAACGYM_TARBALL_DIGEST", "PYTHON_APT_PACKAGES"}
    for name, value in build_args.items():
        assert PINS[name] == value, name
    assert args[args.index("--tag") + 1] == "mapush-env:latest" and args[-1] == "."
    context = sandbox / "build" / "isaacgym-context"
    assert "--build-context" in args and "isaacgym=build/isaacgym-context" in args
    assert sorted(p.name for p in context.iterdir()) == [PINS["ISAACGYM_TARBALL"]]
    staged = context / PINS["ISAACGYM_TARBALL"]
    assert not staged.is_symlink() and staged.read_bytes() == real.read_bytes()


def test_the_cu121_stack_builds_its_own_image_from_its_own_pins(sandbox, tmp_path):
    tarball = fake_tarball(tmp_path / "isaacgym.tgz")
    proc = stubbed(sandbox, ["build", "STACK=cu121", "ISAACGYM_TARBALL_PATH=%s" % tarball])
    assert proc.returncode == 0, proc.stderr
    args = docker_calls(sandbox)[-1].split()
    build_args = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--build-arg")
    assert build_args["STACK"] == "cu121" and build_args["TORCH_VERSION"] == "2.3.1+cu121"
    for key in ("CUDA_BASE_IMAGE", "CUDA_VERSION", "TORCH_VERSION", "TORCHVISION_VERSION",
                "TORCH_INDEX_URL", "LOCK_FILE"):
        assert build_args[key] == PINS["CU121_" + key], key
    assert build_args["OPENRL_VERSION"] == PINS["OPENRL_VERSION"]  # shared pins stay
    assert args[args.index("--tag") + 1] == "mapush-env:cu121"
    assert (REPO / PINS["CU121_LOCK_FILE"]).is_file()
    proc = stubbed(sandbox, ["-n", "train", "STACK=cu121"])
    assert "mapush-env:cu121" in make(["-n", "help", "STACK=cu121"]).stdout


def test_a_bogus_stack_is_one_line(sandbox):
    proc = stubbed(sandbox, ["build", "STACK=bogus"])
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2 and len(errors) == 1 and "STACK='bogus'" in errors[0]
    assert docker_calls(sandbox) == []


def test_train_builds_only_a_missing_image_then_runs_compose(sandbox, tmp_path):
    proc = stubbed(sandbox, ["train", "NUM_ENVS=16"])  # the stub says the image exists
    assert proc.returncode == 0, proc.stderr
    calls = docker_calls(sandbox)
    assert calls[:2] == ["compose version", "info"]  # Compose v2 and the daemon first
    assert calls[2].startswith("image inspect mapush-env:latest")  # the checks' own
    assert calls[3].startswith("image inspect mapush-env:latest")  # make image's
    assert calls[4].startswith("compose --env-file env/pins.env run --rm train mapush train ")
    assert "--num-envs 16" in calls[4] and len(calls) == 5
    assert (sandbox / "runs").is_dir()
    (sandbox / "docker.log").unlink()
    tarball = fake_tarball(tmp_path / "ig.tar.gz")
    proc = stubbed(sandbox, ["train", "ISAACGYM_TARBALL_PATH=%s" % tarball], STUB_INSPECT_RC="1")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[0] for c in docker_calls(sandbox)] == \
        ["compose", "info", "image", "buildx", "image", "buildx", "build", "compose"]


@pytest.mark.parametrize("target, expect", [
    ("doctor", "compose --env-file env/pins.env run --rm doctor mapush doctor --num-envs 200"),
    ("smoke-test", "compose --env-file env/pins.env run --rm smoke-test"),
    ("shell", "compose --env-file env/pins.env run --rm train bash"),
    ("tensorboard", "compose --env-file env/pins.env up --detach --no-build tensorboard"),
])
def test_gpu_and_tensorboard_targets_run_their_compose_service(sandbox, target, expect):
    proc = stubbed(sandbox, [target])
    assert proc.returncode == 0, proc.stderr
    assert expect in docker_calls(sandbox)


def test_tensorboard_target_needs_no_image_and_no_tarball(sandbox):
    proc = stubbed(sandbox, ["tensorboard"], STUB_INSPECT_RC="1")
    assert proc.returncode == 0, proc.stderr
    assert not any(c.startswith(("image inspect mapush-env", "build"))
                   for c in docker_calls(sandbox))


def test_compose_gets_the_gpu_and_the_image_from_make(sandbox):
    env_dump = sandbox / "env.txt"
    stub = sandbox / "docker-stub"
    stub.write_text(STUB.replace('exit 0\n', 'env > "%s"\nexit 0\n' % env_dump, 1))
    proc = stubbed(sandbox, ["doctor", "GPU=3", "IMAGE=mine:1"])
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in env_dump.read_text().splitlines() if "=" in line)
    assert seen["GPU"] == "3" and seen["MAPUSH_IMAGE"] == "mine:1"
    assert seen["HOST_UID"].isdigit() and seen["HOST_UID"] != "0"


def test_test_image_bench_and_clean(sandbox):
    proc = make(["-n", "test-image", "IMAGE=x:y"])
    assert "IMAGE=x:y .venv/bin/python -m pytest tests/image -m image" in proc.stdout
    proc = make(["-n", "bench"])
    assert ".venv/bin/python benchmarks/run.py --quick" in proc.stdout
    (sandbox / "build").mkdir()
    (sandbox / "runs").mkdir()
    proc = stubbed(sandbox, ["clean"])
    assert proc.returncode == 0, proc.stderr
    assert not (sandbox / "build").exists() and (sandbox / "runs").is_dir()


# ------------------------------------------------------------------ first contact (issue 17)
def one_error(proc: subprocess.CompletedProcess) -> str:
    lines = refused(proc)
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_build_without_buildkit_says_what_to_install_before_building(sandbox, tmp_path):
    tarball = fake_tarball(tmp_path / "ig.tar.gz")
    proc = stubbed(sandbox, ["build", "ISAACGYM_TARBALL_PATH=%s" % tarball], STUB_NO_BUILDX="1")
    line = one_error(proc)
    assert "BuildKit" in line and "buildx" in line and "docker-buildx-plugin" in line
    assert "unknown flag" not in proc.stderr
    assert docker_calls(sandbox) == CHECKS_ONLY


@pytest.mark.parametrize("case, needle", [
    ("junk", "is not a readable gzip"),
    ("truncated", "is not a readable gzip"),
    ("not-a-tar", "is not a tar archive"),
    ("no-bindings", "lacks isaacgym/python/isaacgym/_bindings/linux-x86_64/gym_38.so"),
    ("wrong-sha", "has sha256"),
])
def test_a_bad_tarball_is_one_line_before_the_build(sandbox, tmp_path, case, needle):
    import gzip

    tarball = tmp_path / "ig.tar.gz"
    extra = []
    if case == "junk":
        tarball.write_bytes(b"<html>Please log in</html>")
    elif case == "truncated":
        data = fake_tarball(tmp_path / "whole.tar.gz").read_bytes()
        tarball.write_bytes(data[: len(data) // 2])
    elif case == "not-a-tar":
        tarball.write_bytes(gzip.compress(b"just text, no tar header" * 40))
    elif case == "no-bindings":
        fake_tarball(tarball, leave_out="isaacgym/python/isaacgym/_bindings/linux-x86_64/gym_38.so")
    else:
        fake_tarball(tarball)
        extra = ["ISAACGYM_TARBALL_SHA256=" + "0" * 64]
    proc = stubbed(sandbox, ["build", "ISAACGYM_TARBALL_PATH=%s" % tarball] + extra)
    line = one_error(proc)
    assert needle in line and str(tarball) in line
    assert docker_calls(sandbox) == CHECKS_ONLY


def test_the_pinned_tarball_hash_is_checked_when_set(sandbox, tmp_path):
    import hashlib

    tarball = fake_tarball(tmp_path / "ig.tar.gz")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    proc = stubbed(sandbox, ["build", "ISAACGYM_TARBALL_PATH=%s" % tarball,
                             "ISAACGYM_TARBALL_SHA256=%s" % digest])
    assert proc.returncode == 0, proc.stderr
    assert "ISAACGYM_TARBALL_SHA256" in PINS  # the pin exists (empty until a user fills it)


@pytest.mark.parametrize("target", ["train", "eval", "smoke-test", "shell", "tensorboard",
                                    "tensorboard-stop"])
def test_missing_compose_v2_is_named_before_anything_runs(sandbox, target):
    (sandbox / "runs" / "a").mkdir(parents=True)
    proc = stubbed(sandbox, [target, "RUN=runs/a"], STUB_NO_COMPOSE="1")
    line = one_error(proc)
    assert "Compose v2" in line and "docker-compose-plugin" in line
    calls = docker_calls(sandbox)
    assert calls[0] == "compose version" and set(calls) <= {
        "compose version", "info", "image inspect mapush-env:latest"}, calls


def test_tensorboard_builds_only_when_missing_or_its_inputs_changed(sandbox):
    env_dump = sandbox / "env.txt"
    stub = sandbox / "docker-stub"
    stub.write_text(STUB.replace('exit 0\n', 'case "$*" in *" build tensorboard") env > "%s";; esac\nexit 0\n'
                                 % env_dump, 1))
    proc = stubbed(sandbox, ["tensorboard"], STUB_INSPECT_RC="1")  # no image yet
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in env_dump.read_text().splitlines() if "=" in line)
    # the build gets the inputs' hash for its label, and no empty base image argument
    assert len(seen["TENSORBOARD_INPUTS"]) == 16 and "TENSORBOARD_BASE_IMAGE" not in seen
    calls = docker_calls(sandbox)
    assert "compose --env-file env/pins.env build tensorboard" in calls
    assert calls[-1] == "compose --env-file env/pins.env up --detach --no-build tensorboard"
    inputs = make(["-s", "--eval=print-inputs: ; @echo $(TENSORBOARD_INPUTS)", "print-inputs"],
                  cwd=sandbox).stdout.strip()
    assert len(inputs) == 16
    (sandbox / "docker.log").unlink()
    proc = stubbed(sandbox, ["tensorboard"], STUB_LABEL=inputs)  # built from these inputs
    assert proc.returncode == 0, proc.stderr
    assert not any(" build" in c for c in docker_calls(sandbox)), docker_calls(sandbox)
    (sandbox / "docker.log").unlink()
    proc = stubbed(sandbox, ["tensorboard", "TENSORBOARD_BASE_IMAGE=local/python:3.11"],
                   STUB_LABEL=inputs)  # another base: rebuild
    assert "compose --env-file env/pins.env build tensorboard" in docker_calls(sandbox)
    (sandbox / "docker.log").unlink()
    lock = sandbox / "env" / "tensorboard.lock"
    lock.write_text(lock.read_text() + "\n# changed\n")
    proc = stubbed(sandbox, ["tensorboard"], STUB_LABEL=inputs)  # the lock changed: rebuild
    assert "compose --env-file env/pins.env build tensorboard" in docker_calls(sandbox)


def test_the_tensorboard_image_carries_its_inputs_label():
    dockerfile = (REPO / "docker" / "tensorboard.Dockerfile").read_text()
    assert dockerfile.rstrip().endswith('LABEL org.mapush.inputs="${TENSORBOARD_INPUTS}" \\\n'
                                        '      org.mapush.base="${TENSORBOARD_BASE_IMAGE}"')
    import yaml

    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    assert "TENSORBOARD_INPUTS" in compose["services"]["tensorboard"]["build"]["args"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it checks make run by root and sudo")
def test_runs_dir_belongs_to_the_invoking_user(sandbox):
    proc = stubbed(sandbox, ["runs-dir"], SUDO_UID="4321", SUDO_GID="4322")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    stat = (sandbox / "runs").stat()
    assert (stat.st_uid, stat.st_gid) == (4321, 4322)  # the sudo user's, not 1000's
    assert make(["-s", "--eval=p: ; @echo $(HOST_UID):$(HOST_GID)", "p"], cwd=sandbox,
                env={"SUDO_UID": "4321", "SUDO_GID": "4322"}).stdout.strip() == "4321:4322"
    shutil.rmtree(str(sandbox / "runs"))
    proc = stubbed(sandbox, ["runs-dir"])  # root without sudo: the ids cannot be matched
    stat = (sandbox / "runs").stat()
    assert stat.st_uid == 0 and stat.st_mode & 0o1777 == 0o1777
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "belongs to root but the container never runs as root" in lines[0]
    assert "HOST_UID=0" not in lines[0] and "non-root user" in lines[0]


def test_a_fresh_clone_has_runs_owned_by_whoever_cloned_it(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    assert (clone / "runs").is_dir() and (clone / "runs").stat().st_uid == os.geteuid()
    ignored = subprocess.run(["git", "check-ignore", "runs/x/events"], cwd=str(clone),
                             capture_output=True, text=True)
    assert ignored.returncode == 0  # runs themselves stay out of git


def test_make_help_shows_every_variable_with_its_default():
    out = make(["help"]).stdout
    text = (REPO / "Makefile").read_text()
    variables = re.findall(r"^([A-Z][A-Z_]+) \?=", text, re.M)
    assert {"NUM_ENVS", "ALGO", "OBJECT", "STEPS", "GPU", "IMAGE", "TENSORBOARD_BASE_IMAGE",
            "HOST_UID"} <= set(variables)
    for name in variables:
        if name in ("PYTHON", "PYTEST_ARGS", "DOCKER"):
            continue
        assert re.search(r"\b%s=\S" % name, out), name
    assert "NUM_ENVS=200" in out and "STEPS=(empty: mapush train's 100000000 env steps)" in out


def test_compose_has_no_fixed_project_name():
    import yaml

    assert "name" not in yaml.safe_load((REPO / "compose.yaml").read_text())


@pytest.mark.parametrize("args, expect", [
    (["video", "RUN=runs/a"], "run --rm train mapush eval --checkpoint runs/a --video"),
    (["video", "RUN=runs/a", "CHECKPOINT=runs/a/checkpoints/x"],
     "run --rm train mapush eval --checkpoint runs/a/checkpoints/x --video"),
    (["pipeline", "NUM_ENVS=64"],
     "run --rm train mapush pipeline --object cuboid --num-envs 64 --seed 1"),
    (["reproduce", "EXTRA=--checkpoints all"], "run --rm train mapush reproduce --checkpoints all"),
    (["train", "TASK=go1push_upper", "MID=runs/a"],
     "mapush train --algo ppo --task go1push_upper --object cuboid --num-envs 500 --seed 1 "
     "--command-net runs/a"),
])
def test_the_targets_of_the_method_and_of_seeing_it(sandbox, args, expect):
    (sandbox / "runs" / "a").mkdir(parents=True)
    proc = stubbed(sandbox, args)
    assert proc.returncode == 0, proc.stderr
    calls = [re.sub(r"\s+", " ", c) for c in docker_calls(sandbox)]
    assert any(expect in c for c in calls), calls


@pytest.mark.parametrize("args, needle", [
    (["video"], "RUN is not set"),
    (["report", "RUN=runs/nope"], "RUN='runs/nope' does not exist"),
    (["pipeline", "OBJECT=sphere"], "OBJECT='sphere': the pipeline's high level pushes"),
    (["pipeline", "OBJECT=Tblock"], "runs on OBJECT=cuboid only"),
    (["train", "MID=runs/a"], "MID='runs/a' is for TASK=go1push_upper"),
])
def test_their_bad_options_stop_before_docker(sandbox, args, needle):
    (sandbox / "runs" / "a").mkdir(parents=True)
    proc = stubbed(sandbox, args)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert docker_calls(sandbox) == []


def test_sweep_runs_on_the_host_with_one_container_per_cell(sandbox):
    proc = make(["-n", "sweep", "SEEDS=1 2 3", "OBJECTS=cuboid Tblock cylinder", "ALGO=ppo",
                 "GPUS=0 1"], cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if "-m mapush sweep" in l][0]
    assert '--seeds "1 2 3" --objects "cuboid Tblock cylinder" --algo "ppo" --gpus "0 1"' in line
    assert "--runner 'env GPU={gpu} docker compose --env-file env/pins.env run --rm train " \
           "mapush'" in line


@pytest.mark.parametrize("args, needle", [
    (["sweep", "SEEDS=1 x"], "SEEDS='1 x': 'x' is not a non-negative integer"),
    (["sweep", "SEEDS="], "SEEDS is empty"),
    (["sweep", "OBJECTS=cuboid sphere"], "'sphere' is not one of: cuboid Tblock cylinder"),
    (["sweep", "GPUS=0 one"], "GPUS='0 one': 'one' is not a non-negative integer"),
    (["sweep", "EXECUTOR=pbs"], "EXECUTOR='pbs' is not one of: local slurm"),
    (["sweep-report"], "NAME is not set"),
    (["sweep-report", "NAME=nope"], "no runs/sweeps/nope/sweep.json"),
])
def test_sweep_options_stop_before_anything_runs(sandbox, args, needle):
    proc = stubbed(sandbox, args)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert docker_calls(sandbox) == []


def test_sif_without_apptainer_says_what_to_install(sandbox):
    proc = stubbed(sandbox, ["sif", "APPTAINER=no-such-apptainer"])
    assert proc.returncode != 0
    assert "error: no-such-apptainer is not installed" in proc.stderr
    assert not any(c.startswith("build") for c in docker_calls(sandbox))


def test_tensorboard_without_a_registry_names_the_base_and_the_script(sandbox):
    """The TensorBoard image must be built, its base is not here and cannot be pulled: one
    line naming TENSORBOARD_BASE_IMAGE and docker/scripts/debian-base.sh, no build."""
    proc = stubbed(sandbox, ["tensorboard"], STUB_INSPECT_RC="1", STUB_NO_PULL="1")
    line = one_error(proc)
    assert "TENSORBOARD_BASE_IMAGE=" in line and "docker/scripts/debian-base.sh" in line
    assert "python:3.11-slim-bookworm" in line  # the Dockerfile's default base
    calls = docker_calls(sandbox)
    assert "pull --quiet python:3.11-slim-bookworm" in calls
    assert not [c for c in calls if " build " in " %s " % c or c.startswith("compose --env")]
    proc = stubbed(sandbox, ["tensorboard", "TENSORBOARD_BASE_IMAGE=my-base:1"],
                   STUB_INSPECT_RC="1", STUB_NO_PULL="1")
    assert "my-base:1 is not here" in one_error(proc)



def test_make_venv_finds_a_python_by_name_or_says_it_is_missing(tmp_path):
    """PYTHON=python3.X works where only pyenv has that version (its shims run the global
    one only); an interpreter found nowhere is one error line, exit 2."""
    root = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "versions"
    for version in ("3.10", "3.13"):
        builds = sorted(root.glob(version + ".*/bin/python"))
        if not builds and not shutil.which("python" + version):
            continue
        proc = make(["-n", "venv", "PYTHON=python" + version, "VENV=%s" % (tmp_path / "v")])
        assert proc.returncode == 0, proc.stderr
        created = [l for l in proc.stdout.splitlines() if l.endswith(" -m venv %s" % (tmp_path / "v"))]
        assert len(created) == 1 and "python" in created[0]
    proc = make(["venv", "PYTHON=python9.9", "VENV=%s" % (tmp_path / "v")])
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "PYTHON=python9.9" in errors[0]
    assert not (tmp_path / "v").exists()


def test_make_venv_refuses_a_python_outside_3_10_to_3_13_before_pip(tmp_path):
    """#51: make venv PYTHON=python3.8 failed deep in pip; now one error line, exit 2,
    nothing created."""
    python38 = make(["-s", "-f", "Makefile", "--eval", "p38: ; @echo $(PYTHON38)",
                     "p38"]).stdout.strip()
    assert python38 and shutil.which(python38), "no Python 3.8 here: make test-stack needs one"
    proc = make(["venv", "PYTHON=%s" % python38, "VENV=%s" % (tmp_path / "v")])
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert "is Python 3.8." in errors[0] and "3.10 to 3.13" in errors[0]
    assert not (tmp_path / "v").exists()


def test_doctor_checks_the_host_before_the_image_exists(sandbox, tmp_path):
    """#38 item 1: make doctor ran only inside the image, so it checked nothing before the
    long build. On a host with no GPU, toolkit, BuildKit or tarball it now prints one line
    per check, each failure with its fix, and exits 2 without starting a container; on a
    ready host without the image it says to build it; with the image, the container's
    doctor runs after the host's checks."""
    proc = stubbed(sandbox, ["doctor"], STUB_NO_GPU="1", STUB_NO_TOOLKIT="1",
                   STUB_NO_BUILDX="1", STUB_INSPECT_RC="1", BUILD_DISK_GB="100000000")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stdout.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert [line.split(":", 1)[0] for line in lines] == ["error", "error", "ok", "ok", "error",
                                                         "ok", "error", "error"], lines
    assert "ok: Docker Engine 27.3.1" in lines
    for needle in ("no NVIDIA driver answers", "NVIDIA Container Toolkit is missing",
                   "BuildKit", "Isaac Gym tarball", "GB free"):
        assert [e for e in errors if needle in e], needle
    assert not [c for c in docker_calls(sandbox) if c.startswith(("compose run", "build "))]
    tarball = fake_tarball(tmp_path / "isaacgym.tgz")
    proc = stubbed(sandbox, ["doctor", "ISAACGYM_TARBALL_PATH=%s" % tarball],
                   STUB_INSPECT_RC="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: NVIDIA driver 550.54, 1 GPU(s): GPU 0: NVIDIA GeForce")
    assert "the image mapush-env:latest is not built yet: make build" in proc.stdout
    assert not [c for c in docker_calls(sandbox) if c.startswith(("compose run", "build "))]
    (sandbox / "docker.log").unlink()
    proc = stubbed(sandbox, ["doctor"])  # the image exists: then the container's doctor
    assert proc.returncode == 0, proc.stderr
    assert "ok: image mapush-env:latest is built" in proc.stdout
    assert [c for c in docker_calls(sandbox) if c.startswith("compose")][-1].endswith(
        "run --rm doctor mapush doctor --num-envs 200")


def test_doctor_refuses_a_docker_engine_older_than_23(sandbox, tmp_path):
    """#51: the README requires Docker Engine 23.0 or newer; make doctor says so, with the
    version found and the fix, before any container starts."""
    proc = stubbed(sandbox, ["doctor"], STUB_ENGINE="20.10.24+dfsg1")
    assert proc.returncode == 2, proc.stderr
    errors = [l for l in proc.stdout.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1 and "Docker Engine 20.10.24+dfsg1 is older than 23.0" in errors[0]
    assert "docker-ce" in errors[0]
    assert not [c for c in docker_calls(sandbox) if c.startswith(("compose run", "build "))]


def test_demo_evaluates_records_and_reports_the_authors_cuboid_policy(sandbox):
    """#38 item 2: a first success within minutes of the build: the authors' published
    cuboid policy evaluated on a few envs, a video of env 0 and the report, and where to
    open it with how long it took."""
    from tests.conftest import MAPUSH_SRC

    proc = stubbed(sandbox, ["demo"])
    assert proc.returncode == 0, proc.stderr
    runs = [c.split(" run --rm ", 1)[1] for c in docker_calls(sandbox) if " run --rm " in c]
    ckpt = "/opt/mapush/results/10-15-23_cuboid"
    assert runs == ["train mapush eval --checkpoint %s --num-envs 20" % ckpt,
                    "train mapush eval --checkpoint %s --video --episodes 2 --out "
                    "runs/demo/videos" % ckpt,
                    "train mapush report %s --out runs/demo/report" % ckpt]
    assert re.search(r"^demo: open runs/demo/report/index.html \(took \d+ s\)$", proc.stdout,
                     re.M), proc.stdout
    assert (sandbox / "runs" / "demo" / "eval.json").is_file()
    if MAPUSH_SRC:  # the authors' run the demo names is in MAPush at the pin
        assert (Path(MAPUSH_SRC) / "results" / "10-15-23_cuboid" / "checkpoints").is_dir()


def test_a_plain_make_tensorboard_keeps_the_base_it_was_built_with(sandbox):
    """#38 item 7: after a build with TENSORBOARD_BASE_IMAGE=..., a plain make tensorboard
    computed other inputs and rebuilt from the default base (refused without a registry).
    The image's label org.mapush.base now gives the base back."""
    env_dump = sandbox / "env.txt"
    stub = sandbox / "docker-stub"
    stub.write_text(STUB.replace('exit 0\n', 'case "$*" in *" build tensorboard") env > "%s";; esac\nexit 0\n'
                                 % env_dump, 1))
    proc = stubbed(sandbox, ["tensorboard", "TENSORBOARD_BASE_IMAGE=my.registry/python:3.11"],
                   STUB_INSPECT_RC="1")  # no image yet: built on the given base
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in env_dump.read_text().splitlines() if "=" in line)
    assert seen["TENSORBOARD_BASE_IMAGE"] == "my.registry/python:3.11"
    env_dump.unlink()
    (sandbox / "docker.log").unlink()
    proc = stubbed(sandbox, ["tensorboard"], STUB_LABEL=seen["TENSORBOARD_INPUTS"],
                   STUB_BASE_LABEL="my.registry/python:3.11")
    assert proc.returncode == 0, proc.stderr
    assert not env_dump.exists(), "rebuilt although nothing changed"
    assert [c for c in docker_calls(sandbox) if "up --detach" in c]


def test_tensorboard_keeps_its_base_with_docker_from_path(sandbox):
    """#51 item 3: DOCKER was set (?=) after an immediate assignment that ran it, so a plain
    `make tensorboard`, with docker found on PATH and no DOCKER= given, never read the
    image's base label. Here docker is only on PATH."""
    stub = sandbox / "docker-stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    bin_dir = sandbox / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").symlink_to(stub)
    smi = sandbox / "nvidia-smi-stub"
    smi.write_text(NVIDIA_SMI_STUB)
    smi.chmod(0o755)
    path = os.pathsep.join([str(bin_dir)] + [p for p in os.environ.get("PATH", "").split(
        os.pathsep) if not (Path(p) / "nvidia-ctk").exists()])
    env = {"DOCKER_LOG": str(sandbox / "docker.log"), "BUILD_DISK_GB": "0", "PATH": path,
           "STUB_BASE_LABEL": "my.registry/python:3.11"}
    proc = make(["-n", "tensorboard", "NVIDIA_SMI=%s" % smi], cwd=sandbox, env=env)
    assert proc.returncode == 0, proc.stderr
    log = (sandbox / "docker.log").read_text()
    assert "org.mapush.base" in log  # the label was asked for, through docker on PATH


def test_dev_needs_a_mapush_checkout_and_mounts_it_read_only(sandbox):
    """#51 item 5: make dev MAPUSH_DIR=... runs the training service with the user's MAPush
    checkout mounted read-only (docker/entrypoint.sh copies and patches it)."""
    assert refused(stubbed(sandbox, ["dev"])) == [
        "error: MAPUSH_DIR is not set: make dev MAPUSH_DIR=<your MAPush checkout> (e.g. "
        "../MAPush)"]
    (sandbox / "notmapush").mkdir()
    assert refused(stubbed(sandbox, ["dev", "MAPUSH_DIR=notmapush"])) == [
        "error: MAPUSH_DIR='notmapush' is no MAPush checkout (no mqe/__init__.py): pass the "
        "folder git clone made"]
    assert docker_calls(sandbox) == []
    (sandbox / "mine" / "mqe").mkdir(parents=True)
    (sandbox / "mine" / "mqe" / "__init__.py").write_text("")
    proc = stubbed(sandbox, ["dev", "MAPUSH_DIR=mine"])
    assert proc.returncode == 0, proc.stderr
    assert docker_calls(sandbox)[-1] == "compose --env-file env/pins.env run --rm -v " \
        "%s:/mnt/mapush-src:ro -e MAPUSH_DEV_SRC=/mnt/mapush-src train bash" % (sandbox / "mine")
    proc = stubbed(sandbox, ["dev", "MAPUSH_DIR=mine", "CMD=mapush train --steps 1000"])
    assert docker_calls(sandbox)[-1].endswith("train mapush train --steps 1000")


@pytest.mark.security
@pytest.mark.parametrize("name", ["it's; touch PWNED; echo '", 'a "b" `touch PWNED` |touch PWNED',
                                  "with space;touch PWNED"])
def test_dev_takes_any_path_and_runs_nothing_from_its_name(sandbox, name):
    """#77 item 5: MAPUSH_DIR with quotes, semicolons, pipes and backquotes is a path, never
    code (the recipe's quotes used to end at its first quote: `id` ran). ($ is Make's own
    syntax in any variable, expanded by make before a shell sees it.)"""
    mine = sandbox / name / "MAPush"
    (mine / "mqe").mkdir(parents=True)
    (mine / "mqe" / "__init__.py").write_text("")
    proc = stubbed(sandbox, ["dev", "MAPUSH_DIR=%s" % mine])
    assert proc.returncode == 0, proc.stderr
    assert not list(sandbox.rglob("PWNED")) and not (REPO / "PWNED").exists()
    assert docker_calls(sandbox)[-1] == "compose --env-file env/pins.env run --rm -v " \
        "%s:/mnt/mapush-src:ro -e MAPUSH_DEV_SRC=/mnt/mapush-src train bash" % mine
    # a path that is no checkout is refused by its name, and nothing runs either
    proc = stubbed(sandbox, ["dev", "MAPUSH_DIR=%s" % (sandbox / name)])
    assert proc.returncode == 2 and not list(sandbox.rglob("PWNED"))


def podman_stub(sandbox: Path, build_context: bool = True) -> Path:
    """A podman (its name is what tells the host checks it is podman): no `compose`, and a
    `build --help` that lists --build-context only when ``build_context``."""
    stub = sandbox / "podman"
    stub.write_text("""#!/usr/bin/env bash
printf '%%s\\n' "$*" >> "$DOCKER_LOG"
if [ "$1" = compose ]; then echo "Error: unrecognized command \\`podman compose\\`" >&2; exit 125; fi
if [ "$1 $2" = "build --help" ]; then echo "  --build-arg"; %s exit 0; fi
exit 0
""" % ('echo "  --build-context stringArray";' if build_context else ""))
    stub.chmod(0o755)
    return stub


def test_podman_builds_and_its_missing_compose_is_one_line(sandbox, tmp_path):
    """#76 item 1: make build DOCKER=podman checks podman's named build contexts (not
    BuildKit) and builds in Docker's format (OCI's drops the Dockerfile's SHELL); a compose
    target on a podman without `podman compose` is one line that says so."""
    stub = podman_stub(sandbox)
    tarball = tmp_path / "isaacgym.tgz"
    fake_tarball(tarball)
    env = {"DOCKER_LOG": str(sandbox / "docker.log"), "BUILD_DISK_GB": "0"}
    proc = make(["build", "DOCKER=%s" % stub, "ISAACGYM_TARBALL_PATH=%s" % tarball],
                cwd=sandbox, env=env)
    assert proc.returncode == 0, proc.stderr
    build = [c for c in docker_calls(sandbox) if c.startswith("build --file")]
    assert len(build) == 1 and "--format docker" in build[0]
    assert not [c for c in docker_calls(sandbox) if c.startswith("buildx")]
    proc = make(["tensorboard", "DOCKER=%s" % stub], cwd=sandbox, env=env)
    line = one_error(proc)
    assert "no 'podman compose'" in line and "podman 4.7" in line, line
    # a podman without named build contexts (before 4.2) is named before any build
    podman_stub(sandbox, build_context=False)
    (sandbox / "docker.log").unlink()
    proc = make(["build", "DOCKER=%s" % stub, "ISAACGYM_TARBALL_PATH=%s" % tarball],
                cwd=sandbox, env=env)
    assert "named build contexts" in one_error(proc) and "podman has from 4.2" in one_error(proc)
    assert not [c for c in docker_calls(sandbox) if c.startswith("build --file")]


def test_doctor_names_podmans_missing_cdi_spec(sandbox, tmp_path):
    """#76 item 1: make doctor with podman names the NVIDIA CDI spec, with its fix, where
    Docker's check names the Container Toolkit's runtime."""
    stub = podman_stub(sandbox)
    smi = sandbox / "nvidia-smi-stub"
    smi.write_text(NVIDIA_SMI_STUB)
    smi.chmod(0o755)
    if Path("/etc/cdi/nvidia.yaml").exists() or Path("/var/run/cdi/nvidia.yaml").exists():
        pytest.skip("this machine has an NVIDIA CDI spec")
    proc = make(["doctor", "DOCKER=%s" % stub, "NVIDIA_SMI=%s" % smi], cwd=sandbox,
                env={"DOCKER_LOG": str(sandbox / "docker.log"), "BUILD_DISK_GB": "0"})
    assert "error: podman sees no NVIDIA CDI spec" in proc.stdout, proc.stdout
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in proc.stdout
