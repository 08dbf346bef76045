"""Invariants of a built training image (`make test-image`, or IMAGE=tag pytest tests/image).

Skipped unless IMAGE names a built image. Needs no GPU, except the gymtorch load test, which
runs when MAPUSH_TEST_GPU=1 (the GPU runner sets it).
"""
import hashlib
import json
import os
import subprocess
from typing import Any, Dict

import pytest

from tests.image.support import REPO, daemon, pins, run

IMAGE = os.environ.get("IMAGE", "")
if not IMAGE:
    pytest.skip("IMAGE is not set (make test-image sets it)", allow_module_level=True)
pytestmark = pytest.mark.image

# Runs inside the image as its own user; prints one JSON object of facts.
PROBE = r"""
import json, os, pwd, sys
from importlib import metadata
import torch
from mapush.provenance import patch_records
facts = {"python": list(sys.version_info[:2]), "torch": torch.__version__,
         "cuda": torch.version.cuda, "uid": os.getuid(),
         "user": pwd.getpwuid(os.getuid()).pw_name,
         "dists": sorted("%s==%s" % (d.metadata["Name"], d.version) for d in metadata.distributions()),
         "records": patch_records(), "env": dict(os.environ)}
ext = os.environ.get("TORCH_EXTENSIONS_DIR", "")
so = os.path.join(ext, "gymtorch", "gymtorch.so")
facts["gymtorch"] = {"dir": ext, "so": os.path.isfile(so),
                     "writable": os.access(os.path.join(ext, "gymtorch"), os.W_OK)}
ninja = os.path.join(ext, "gymtorch", "build.ninja")
facts["gymtorch"]["ninja"] = open(ninja).read() if os.path.isfile(ninja) else ""
def read(path):
    return open(path).read() if os.path.isfile(path) else None
facts["files"] = {p: read(p) for p in ("/opt/mapush/.upstream-commit", "/opt/harl/.upstream-commit",
                                       "/opt/mapush-env/env/pins.env")}
facts["exists"] = {p: os.path.exists(p) for p in (
    "/usr/share/vulkan/icd.d/nvidia_icd.json", "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
    "/usr/share/glvnd/egl_vendor.d/50_mesa.json", "/usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0")}
tarballs = []
for top in ("/opt", "/tmp", "/root", "/home", "/work", "/usr/local", "/var/tmp", "/srv"):
    for folder, dirs, names in os.walk(top):
        tarballs += [os.path.join(folder, n) for n in names if n.startswith("IsaacGym") or n.endswith((".tar.gz", ".tgz"))]
facts["tarballs"] = tarballs
import importlib.util
spec = importlib.util.find_spec("isaacgym")
facts["isaacgym_dir"] = list(spec.submodule_search_locations)[0] if spec else None
print(json.dumps(facts))
"""


def docker_run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run([daemon(), "run", "--rm"] + list(args), timeout=timeout, check=False)


@pytest.fixture(scope="module")
def facts() -> Dict[str, Any]:
    proc = docker_run("--entrypoint", "python", IMAGE, "-c", PROBE)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def inspect() -> Dict[str, Any]:
    proc = run([daemon(), "image", "inspect", IMAGE])
    return json.loads(proc.stdout)[0]


def test_python_and_torch_are_the_pinned_cuda_build(facts):
    assert ".".join(map(str, facts["python"])) == pins()["PYTHON_VERSION"]
    assert facts["torch"] == pins()["TORCH_VERSION"]
    assert facts["cuda"] == pins()["CUDA_VERSION"]


def test_no_nvidia_wheels_and_exactly_one_torch(facts):
    names = [d.split("==")[0].lower() for d in facts["dists"]]
    assert [n for n in names if n.startswith("nvidia-") or n == "triton"] == []
    assert names.count("torch") == 1 and names.count("torchvision") == 1
    assert "torchvision==%s" % pins()["TORCHVISION_VERSION"] in facts["dists"]
    for name, key in (("openrl", "OPENRL_VERSION"), ("gymnasium", "GYMNASIUM_VERSION"),
                      ("numpy", "NUMPY_VERSION"), ("jsonargparse", "JSONARGPARSE_VERSION"),
                      ("isaacgym", "ISAACGYM_VERSION")):
        assert "%s==%s" % (name, pins()[key]) in facts["dists"], name


def test_every_patch_of_this_checkout_is_recorded_as_applied(facts):
    records = {r["component"]: r for r in facts["records"]}
    assert set(records) == {"openrl", "harl", "mapush"}
    for component, record in records.items():
        assert record["status"] in ("applied", "already-applied"), record
        ours = sorted((REPO / "patches" / component).glob("*.patch"))
        assert [p["name"] for p in record["patches"]] == [p.name for p in ours]
        assert [p["sha256"] for p in record["patches"]] == [
            hashlib.sha256(p.read_bytes()).hexdigest() for p in ours]


def test_runs_as_a_non_root_user(facts, inspect):
    assert facts["uid"] != 0 and facts["user"] == "mapush"
    assert inspect["Config"]["User"] == "mapush"
    assert inspect["Config"]["WorkingDir"] == "/work"


def test_gymtorch_is_prebuilt_and_loadable_by_the_user(facts):
    gymtorch = facts["gymtorch"]
    assert gymtorch["dir"] == "/opt/torch_extensions"
    assert gymtorch["so"] and gymtorch["writable"]
    assert facts["isaacgym_dir"], "isaacgym is not installed"
    source = os.path.join(facts["isaacgym_dir"], "_bindings/src/gymtorch", "gymtorch.cpp")
    assert source in gymtorch["ninja"]  # the same source path gymtorch.py compiles


def test_self_check_passes():
    proc = docker_run("--entrypoint", "python", IMAGE, "/opt/mapush-env/bin/selfcheck.py")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["failures"] == 0
    for line in ("checkpoint_callback imports", "LOGGER_REGISTRY['mapush']", "pip check clean"):
        assert line in proc.stderr


def test_upstream_sources_are_the_pinned_commits_and_env_is_this_checkout(facts):
    assert facts["files"]["/opt/mapush/.upstream-commit"].split() == [
        pins()["MAPUSH_REPO"], pins()["MAPUSH_COMMIT"]]
    assert facts["files"]["/opt/harl/.upstream-commit"].split() == [
        pins()["HARL_REPO"], pins()["HARL_COMMIT"]]
    assert facts["files"]["/opt/mapush-env/env/pins.env"] == (REPO / "env" / "pins.env").read_text()
    env = facts["env"]
    assert env["MAPUSH_ROOT"] == "/opt/mapush"
    assert env["MAPUSH_PATCH_RECORDS"] == "/opt/mapush-env/patch-records"
    assert "graphics" in env["NVIDIA_DRIVER_CAPABILITIES"] or env["NVIDIA_DRIVER_CAPABILITIES"] == "all"


def test_labels_record_the_pins(inspect):
    labels = inspect["Config"]["Labels"] or {}
    for label, key in (("io.mapush.torch", "TORCH_VERSION"), ("io.mapush.cuda", "CUDA_VERSION"),
                       ("io.mapush.openrl", "OPENRL_VERSION"),
                       ("io.mapush.mapush-commit", "MAPUSH_COMMIT"),
                       ("io.mapush.harl-commit", "HARL_COMMIT"),
                       ("io.mapush.isaacgym", "ISAACGYM_VERSION"),
                       ("org.opencontainers.image.base.name", "CUDA_BASE_IMAGE")):
        assert labels.get(label) == pins()[key], label


def test_no_isaac_gym_tarball_in_the_image(facts, inspect):
    assert facts["tarballs"] == []
    history = run([daemon(), "history", "--no-trunc", "--format", "{{.CreatedBy}}", IMAGE]).stdout
    assert pins()["ISAACGYM_TARBALL"] not in history.replace("${ISAACGYM_TARBALL}", "")


def test_vulkan_and_egl_set_up_as_nvidia_does(facts):
    exists = facts["exists"]
    assert exists["/usr/share/vulkan/icd.d/nvidia_icd.json"]
    assert exists["/usr/share/glvnd/egl_vendor.d/10_nvidia.json"]
    assert not exists["/usr/share/glvnd/egl_vendor.d/50_mesa.json"]
    assert not exists["/usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0"]


def test_entrypoint_runs_mapush():
    proc = docker_run(IMAGE, "mapush", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("mapush-env "), proc.stderr


@pytest.mark.skipif(os.environ.get("MAPUSH_TEST_GPU") != "1", reason="needs a GPU: MAPUSH_TEST_GPU=1")
def test_gymtorch_loads_without_recompiling_on_a_gpu():
    proc = docker_run("--gpus", "all", "--entrypoint", "python", IMAGE, "-c",
                      "import isaacgym\nfrom isaacgym import gymtorch\nprint('loaded', gymtorch.wrap_tensor)")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "ninja: no work to do" in out and "loaded" in out, out[-4000:]
