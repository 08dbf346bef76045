"""The Makefile: every target documented, options reaching `mapush train`, bad options and
a missing Isaac Gym tarball stopped with one line before Docker starts, pins passed to the
image build. Docker itself is replaced by a stub that records its argv."""
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from mapush.objects import KNOWN_OBJECTS
from mapush.pins import parse_pins
from mapush.spec import ALGOS, TASKS

REPO = Path(__file__).resolve().parent.parent
PINS = parse_pins((REPO / "env" / "pins.env").read_text())
REQUIRED = ("build", "train", "tensorboard", "smoke-test", "test", "test-image", "doctor",
            "shell", "eval", "clean", "bench")

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$DOCKER_LOG"
if [ "$1 $2" = "image inspect" ]; then exit "${STUB_INSPECT_RC:-0}"; fi
exit 0
"""


@pytest.fixture
def sandbox(tmp_path):
    """A copy of the Makefile and env/ with a docker stub: make runs for real, Docker not."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    shutil.copytree(REPO / "env", tmp_path / "env")
    stub = tmp_path / "docker-stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    return tmp_path


def make(args: List[str], cwd: Path = REPO, env: Optional[Dict[str, str]] = None,
         ) -> subprocess.CompletedProcess:
    full = dict(os.environ, **(env or {}))
    for name in ("NUM_ENVS", "ALGO", "TASK", "OBJECT", "SEED", "STEPS", "GPU", "RUN_DIR",
                 "EXTRA", "RUN", "IMAGE", "MAKEFLAGS", "MAKELEVEL"):
        if not (env and name in env):
            full.pop(name, None)
    return subprocess.run(["make", "--no-print-directory"] + args, cwd=str(cwd), env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


def stubbed(sandbox: Path, args: List[str], **env: str) -> subprocess.CompletedProcess:
    log = sandbox / "docker.log"
    return make(args + ["DOCKER=%s" % (sandbox / "docker-stub")], cwd=sandbox,
                env=dict({"DOCKER_LOG": str(log)}, **env))


def docker_calls(sandbox: Path) -> List[str]:
    log = sandbox / "docker.log"
    return log.read_text().splitlines() if log.exists() else []


def targets() -> Dict[str, str]:
    """``{target: help}`` of every rule the Makefile defines (help '' when it has none)."""
    found = {}
    for line in (REPO / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.$()/-]+):(?!=)([^#]*)(?:## (.*))?$", line)
        if match and match.group(1) != ".PHONY" and "=" not in match.group(2):
            found[match.group(1)] = (match.group(3) or "").strip()
    return found


def test_every_target_has_a_help_line_and_make_help_lists_it():
    rules = {t: h for t, h in targets().items() if not t.startswith("$(VENV)")}
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
    assert words("OBJECTS") == list(KNOWN_OBJECTS)


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
    ("TASK", "go1push_upper", "TASK='go1push_upper' is not one of"),
    ("SEED", "-1", "SEED='-1' is not a non-negative integer"),
    ("STEPS", "1e6", "STEPS='1e6' is not a positive integer"),
    ("GPU", "cuda:1", "GPU='cuda:1' is not a non-negative integer"),
    ("RUN_DIR", "/tmp/elsewhere", "RUN_DIR='/tmp/elsewhere' must be a path under runs/"),
])
def test_a_bad_option_stops_with_one_line_before_docker(sandbox, option, value, expect):
    proc = stubbed(sandbox, ["train", "%s=%s" % (option, value)])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error: " + expect in lines[0], proc.stderr
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


def test_build_without_the_tarball_says_where_to_get_it_and_where_to_put_it(sandbox):
    proc = stubbed(sandbox, ["build"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert PINS["ISAACGYM_DOWNLOAD_URL"] in lines[0]
    assert "vendor/" + PINS["ISAACGYM_TARBALL"] in lines[0]
    assert "ISAACGYM_TARBALL_PATH=" in lines[0]
    assert docker_calls(sandbox) == []


def test_train_without_image_and_tarball_stops_before_building(sandbox):
    proc = stubbed(sandbox, ["train"], STUB_INSPECT_RC="1")
    assert proc.returncode != 0
    assert PINS["ISAACGYM_DOWNLOAD_URL"] in proc.stderr
    assert [c.split()[0:2] for c in docker_calls(sandbox)] == [["image", "inspect"]]


def test_build_passes_every_pin_and_stages_only_the_tarball(sandbox, tmp_path):
    real = tmp_path / "elsewhere" / "isaacgym.tgz"
    real.parent.mkdir()
    real.write_bytes(b"not really Isaac Gym")
    tarball = tmp_path / "link.tgz"  # a symlink is staged as the file it points to
    tarball.symlink_to(real)
    proc = stubbed(sandbox, ["build", "ISAACGYM_TARBALL_PATH=%s" % tarball,
                             "HOST_UID=1234", "HOST_GID=567"])
    assert proc.returncode == 0, proc.stderr
    [call] = docker_calls(sandbox)
    args = call.split()
    assert args[0] == "build" and "--file" in args and "docker/Dockerfile" in args
    dockerfile_args = set(re.findall(r"^ARG (\w+)", (REPO / "docker" / "Dockerfile").read_text(), re.M))
    build_args = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--build-arg")
    assert build_args.pop("HOST_UID") == "1234" and build_args.pop("HOST_GID") == "567"
    # every ARG of the Dockerfile that is a pin gets the pins.env value, and nothing else
    assert set(build_args) == dockerfile_args - {"HOST_UID", "HOST_GID"}
    for name, value in build_args.items():
        assert PINS[name] == value, name
    assert args[args.index("--tag") + 1] == "mapush-env:latest" and args[-1] == "."
    context = sandbox / "build" / "isaacgym-context"
    assert "--build-context" in args and "isaacgym=build/isaacgym-context" in args
    assert sorted(p.name for p in context.iterdir()) == [PINS["ISAACGYM_TARBALL"]]
    staged = context / PINS["ISAACGYM_TARBALL"]
    assert not staged.is_symlink() and staged.read_bytes() == real.read_bytes()


def test_train_builds_only_a_missing_image_then_runs_compose(sandbox, tmp_path):
    proc = stubbed(sandbox, ["train", "NUM_ENVS=16"])  # the stub says the image exists
    assert proc.returncode == 0, proc.stderr
    calls = docker_calls(sandbox)
    assert calls[0].startswith("image inspect mapush-env:latest")
    assert calls[1].startswith("compose --env-file env/pins.env run --rm train mapush train ")
    assert "--num-envs 16" in calls[1] and len(calls) == 2
    assert (sandbox / "runs").is_dir()
    (sandbox / "docker.log").unlink()
    tarball = tmp_path / "ig.tar.gz"
    tarball.write_bytes(b"x")
    proc = stubbed(sandbox, ["train", "ISAACGYM_TARBALL_PATH=%s" % tarball], STUB_INSPECT_RC="1")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[0] for c in docker_calls(sandbox)] == ["image", "build", "compose"]


@pytest.mark.parametrize("target, expect", [
    ("doctor", "compose --env-file env/pins.env run --rm doctor mapush doctor --num-envs 200"),
    ("smoke-test", "compose --env-file env/pins.env run --rm smoke-test"),
    ("shell", "compose --env-file env/pins.env run --rm train bash"),
    ("tensorboard", "compose --env-file env/pins.env up --detach --build tensorboard"),
])
def test_gpu_and_tensorboard_targets_run_their_compose_service(sandbox, target, expect):
    proc = stubbed(sandbox, [target])
    assert proc.returncode == 0, proc.stderr
    assert expect in docker_calls(sandbox)


def test_tensorboard_target_needs_no_image_and_no_tarball(sandbox):
    proc = stubbed(sandbox, ["tensorboard"], STUB_INSPECT_RC="1")
    assert proc.returncode == 0, proc.stderr
    assert not any(c.startswith(("image", "build")) for c in docker_calls(sandbox))


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
