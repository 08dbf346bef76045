"""The Dockerfiles and the scripts they run: linted (hadolint, shellcheck), pins only as
build arguments, the layer order that keeps rebuilds short, the Isaac Gym tarball never in
a layer; the build scripts run for real where they can (here, or in a Debian container)."""
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import List

import pytest

from mapush.pins import parse_pins
from tests.image.support import REPO, debian_base, run

PINS = parse_pins((REPO / "env" / "pins.env").read_text())
BIN = REPO / ".venv" / "bin"
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()


def repo_files() -> List[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                         cwd=str(REPO), stdout=subprocess.PIPE, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name and (REPO / name).is_file()]


def shell_scripts() -> List[Path]:
    scripts = []
    for path in repo_files():
        if path.suffix == ".sh":
            scripts.append(path)
            continue
        with open(str(path), "rb") as handle:
            first = handle.readline(200)
        if re.match(rb"#!\s*\S*(/|env )(ba|da)?sh\b", first):
            scripts.append(path)
    return scripts


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail("%s missing: make venv installs it (env/requirements-test.txt)" % path)
    return str(path)


def test_hadolint_passes_on_every_dockerfile():
    dockerfiles = [p for p in repo_files() if "Dockerfile" in p.name]
    assert {p.name for p in dockerfiles} >= {"Dockerfile", "tensorboard.Dockerfile"}
    proc = subprocess.run([_tool("hadolint")] + [str(p) for p in dockerfiles],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout


def test_shellcheck_passes_on_every_shell_script():
    scripts = shell_scripts()
    names = {str(p.relative_to(REPO)) for p in scripts}
    assert {".ci/run", "docker/entrypoint.sh", "docker/scripts/debian-base.sh"} <= names
    proc = subprocess.run([_tool("shellcheck"), "-x"] + [str(p) for p in scripts],
                          cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    assert proc.returncode == 0, proc.stdout


def test_no_pin_is_restated_outside_pins_env():
    # Longer values only: "3.8" or "11.6" also appear in prose.
    values = {k: v for k, v in PINS.items() if len(v) >= 6}
    for rel in ("docker/Dockerfile", "docker/tensorboard.Dockerfile", "compose.yaml", "Makefile",
                ".ci/run", "docker/install-isaacgym.sh", "docker/fetch-upstream.sh"):
        text = (REPO / rel).read_text()
        restated = [k for k, v in values.items() if v in text]
        assert restated == [], "%s restates %s" % (rel, restated)


def _index(pattern: str) -> int:
    match = re.search(pattern, DOCKERFILE, re.M)
    assert match, pattern
    return match.start()


def test_pins_enter_the_image_only_as_build_arguments():
    args = set(re.findall(r"^ARG (\w+)\s*$", DOCKERFILE, re.M))
    # no default: make passes env/pins.env; and the staged tarball's sha256, which make
    # computes (the Isaac Gym layer's cache key)
    assert args - {"ISAACGYM_TARBALL_DIGEST"} <= set(PINS), args - set(PINS)
    for name in ("CUDA_BASE_IMAGE", "PYTHON_VERSION", "TORCH_VERSION", "TORCHVISION_VERSION",
                 "TORCH_INDEX_URL", "CUDA_VERSION", "MAPUSH_COMMIT", "HARL_COMMIT"):
        assert name in args, name
    assert re.search(r"^FROM \$\{CUDA_BASE_IMAGE\} AS base$", DOCKERFILE, re.M)
    labels = DOCKERFILE[_index(r"^LABEL "):]
    for name in ("TORCH_VERSION", "CUDA_VERSION", "MAPUSH_COMMIT", "HARL_COMMIT",
                 "OPENRL_VERSION", "ISAACGYM_VERSION", "CUDA_BASE_IMAGE"):
        assert "${%s}" % name in labels.split("\nUSER")[0], name


def test_layers_run_from_slow_to_fast_changing():
    order = [
        _index(r'^RUN pip install --no-deps --index-url "\$\{TORCH_INDEX_URL\}"'),  # torch
        _index(r"^COPY \$\{LOCK_FILE\} /opt/mapush-env/stack.lock"),
        _index(r"^        -r /opt/mapush-env/stack.lock"),
        _index(r"^RUN python /opt/mapush-env/bin/check_stack.py"),
        _index(r"^RUN --mount=type=bind,from=isaacgym"),
        _index(r"^RUN python /opt/mapush-env/bin/prebuild_gymtorch.py"),
        _index(r"^COPY --from=sources /opt/mapush"),
        _index(r"^COPY patches/"),
        _index(r"patches/apply mapush /opt/mapush"),
        _index(r"^COPY mapush/"),
        _index(r"^RUN python /opt/mapush-env/bin/selfcheck.py"),
        _index(r"^ARG HOST_UID"),
        _index(r"^USER mapush$"),
    ]
    assert order == sorted(order)
    # the torch layer depends on nothing from the build context
    assert "COPY" not in DOCKERFILE[_index(r"^FROM base AS runtime"):order[0]]


def test_isaac_gym_tarball_never_enters_a_layer():
    for line in re.findall(r"^(?:COPY|ADD)\b.*$", DOCKERFILE, re.M):
        assert "ISAACGYM_TARBALL" not in line and "tar.gz" not in line and "vendor" not in line, line
        assert "from=isaacgym" not in line, line
    assert re.search(r"^RUN --mount=type=bind,from=isaacgym,", DOCKERFILE, re.M)
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore and not any(l.startswith("!vendor") for l in ignore)
    assert "!runs" not in ignore and "!.venv" not in ignore


def test_image_environment_and_user():
    for needle in ("MAPUSH_ROOT=/opt/mapush", "MAPUSH_PATCH_RECORDS=/opt/mapush-env/patch-records",
                   "MAPUSH_ENV_DIR=/opt/mapush-env/env", "TORCH_EXTENSIONS_DIR=/opt/torch_extensions",
                   "NVIDIA_DRIVER_CAPABILITIES=all", "COPY env/ /opt/mapush-env/env/"):
        assert needle in DOCKERFILE, needle
    # Ubuntu's Python packages: the default of PYTHON_APT_PACKAGES (make image-check passes it
    # empty, as its Debian base brings Python 3.8), installed with g++
    packages = re.search(r'^ARG PYTHON_APT_PACKAGES="([^"]*)"$', DOCKERFILE, re.M).group(1).split()
    assert packages == ["python${PYTHON_VERSION}", "python${PYTHON_VERSION}-dev",
                        "python${PYTHON_VERSION}-venv", "libpython${PYTHON_VERSION}"]
    assert "${PYTHON_APT_PACKAGES} g++ " in DOCKERFILE
    assert re.search(r"^USER mapush$", DOCKERFILE, re.M)
    assert re.search(r'^ENTRYPOINT \["/opt/mapush-env/bin/entrypoint.sh"\]$', DOCKERFILE, re.M)
    for component in ("openrl", "harl", "mapush"):
        assert "patches/apply %s " % component in DOCKERFILE


def _script(name: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "docker" / name)] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120, **kwargs)


def _dist(site: Path, name: str, version: str) -> None:
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))


def _check_stack(*paths: Path) -> subprocess.CompletedProcess:
    args = ["--torch", PINS["TORCH_VERSION"], "--torchvision", PINS["TORCHVISION_VERSION"],
            "--cuda", PINS["CUDA_VERSION"], "--no-import"]
    for path in paths:
        args += ["--path", str(path)]
    return subprocess.run([sys.executable, str(REPO / "docker" / "check_stack.py")] + args,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_check_stack_accepts_the_pinned_stack_and_refuses_cuda_wheels_and_second_torch(tmp_path):
    site = tmp_path / "site"
    _dist(site, "torch", PINS["TORCH_VERSION"])
    _dist(site, "torchvision", PINS["TORCHVISION_VERSION"])
    _dist(site, "numpy", PINS["NUMPY_VERSION"])
    proc = _check_stack(site)
    assert proc.returncode == 0, proc.stderr
    assert "stack ok" in proc.stdout

    _dist(site, "nvidia-cublas-cu11", "11.10.3.66")
    proc = _check_stack(site)
    assert proc.returncode == 1 and "nvidia-cublas-cu11 11.10.3.66 is installed" in proc.stderr

    other = tmp_path / "user-site"
    _dist(other, "torch", "2.0.1")
    proc = _check_stack(tmp_path / "site2", other)
    assert proc.returncode == 1 and "torch 2.0.1 is installed; the pin is" in proc.stderr
    (site / "nvidia_cublas_cu11-11.10.3.66.dist-info" / "METADATA").unlink()
    (site / "nvidia_cublas_cu11-11.10.3.66.dist-info").rmdir()
    proc = _check_stack(site, other)
    assert proc.returncode == 1 and "2 torch distributions installed" in proc.stderr


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git"] + list(args), cwd=str(cwd), env=env, check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()


def test_fetch_upstream_checks_out_exactly_the_pinned_commit(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "-q")
    (origin / "f.txt").write_text("pinned\n")
    _git(origin, "add", "f.txt")
    _git(origin, "commit", "-qm", "one")
    pinned = _git(origin, "rev-parse", "HEAD")
    (origin / "f.txt").write_text("newer\n")
    _git(origin, "commit", "-qam", "two")

    dest = tmp_path / "checkout"
    proc = _script("fetch-upstream.sh", str(origin), pinned, str(dest))
    assert proc.returncode == 0, proc.stderr
    assert (dest / "f.txt").read_text() == "pinned\n"
    assert (dest / ".upstream-commit").read_text().split() == [str(origin), pinned]
    assert not (dest / ".git").exists()

    proc = _script("fetch-upstream.sh", str(origin), "0" * 40, str(tmp_path / "bad"))
    assert proc.returncode != 0 and "has no commit" in proc.stderr
    proc = _script("fetch-upstream.sh", str(origin), pinned[:12], str(tmp_path / "short"))
    assert proc.returncode == 2 and "not a full 40-hex commit id" in proc.stderr


def test_entrypoint_runs_mapush_subcommands_and_other_commands(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "mapush").write_text('#!/bin/sh\necho "mapush $*"\n')
    (fake_bin / "mapush").chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ["PATH"]))
    for args, expect in ((["train", "--algo", "ppo"], "mapush train --algo ppo"),
                         (["eval", "--run", "runs/x"], "mapush eval --run runs/x"),
                         (["mapush", "smoke"], "mapush smoke"),
                         ([], "mapush doctor"),
                         (["echo", "plain"], "plain")):
        proc = _script("entrypoint.sh", *args, env=env, cwd=str(tmp_path))
        assert proc.returncode == 0 and proc.stdout.strip() == expect, (args, proc.stderr)


def test_prebuild_gymtorch_needs_its_folder_and_isaacgym(tmp_path):
    env = dict(os.environ)
    env.pop("TORCH_EXTENSIONS_DIR", None)
    proc = subprocess.run([sys.executable, str(REPO / "docker" / "prebuild_gymtorch.py")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and "TORCH_EXTENSIONS_DIR" in proc.stderr
    env.update(TORCH_EXTENSIONS_DIR=str(tmp_path), PYTHONPATH=str(tmp_path))
    proc = subprocess.run([sys.executable, "-S", str(REPO / "docker" / "prebuild_gymtorch.py")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 1 and "isaacgym is not installed" in proc.stderr


# --- the build scripts for real, in a Debian container (Docker daemon needed) -------------

FAKE_SETUP = """from setuptools import setup
setup(name="isaacgym", version="%s", packages=["isaacgym"],
      package_data={"isaacgym": ["_bindings/linux-x86_64/*"]})
"""


def _fake_isaacgym_tarball(path: Path, version: str) -> None:
    """A tarball laid out like NVIDIA's: isaacgym/{python,docker,docs}; the package data
    leaves _bindings/src out, as the real setup.py does."""
    root = path.parent / "tree" / "isaacgym"
    files = {
        "python/setup.py": FAKE_SETUP % version,
        "python/isaacgym/__init__.py": "",
        "python/isaacgym/_bindings/linux-x86_64/gym_38.so": "not really a library",
        "python/isaacgym/_bindings/src/gymtorch/gymtorch.cpp": "// gymtorch",
        "python/examples/joint_monkey.py": "",
        "docker/nvidia_icd.json": json.dumps({"ICD": {"library_path": "libGLX_nvidia.so.0"}}),
        "docker/10_nvidia.json": json.dumps({"ICD": {"library_path": "libEGL_nvidia.so.0"}}),
        "docs/index.html": "<html></html>",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    with tarfile.open(str(path), "w:gz") as tar:
        tar.add(str(root), arcname="isaacgym")


# Run as root in a throwaway container with a venv, as the Dockerfile does.
CONTAINER_SCRIPT = r"""
set -e
python3 -m venv /opt/venv
export PATH=/opt/venv/bin:$PATH
mkdir -p /usr/lib/x86_64-linux-gnu /usr/share/glvnd/egl_vendor.d
touch /usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0 /usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0.0.0 \
      /usr/share/glvnd/egl_vendor.d/50_mesa.json
/src/docker/install-isaacgym.sh /ctx/old.tar.gz "$WANT" > /out/old.log 2>&1 || echo $? > /out/old.rc
/src/docker/install-isaacgym.sh /ctx/ig.tar.gz "$WANT" > /out/install.log 2>&1 || echo $? > /out/install.rc
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ls "$site/isaacgym/_bindings/src/gymtorch" > /out/gymtorch-src.txt 2>/dev/null || true
ls /usr/share/vulkan/icd.d /usr/share/glvnd/egl_vendor.d /usr/lib/x86_64-linux-gnu/ > /out/gl.txt 2>&1 || true
ls -d /tmp/* 2>/dev/null > /out/tmp.txt || true
/src/docker/add-user.sh mapush 0 0 /work > /out/user.log 2>&1
id -u mapush > /out/uid.txt
stat -c %u /work/runs > /out/runs-owner.txt
/src/docker/add-user.sh other 12345 4321 /w2 > /dev/null
id other > /out/other.txt
"""


@pytest.mark.docker
def test_install_isaacgym_and_add_user_in_a_debian_container(tmp_path):
    image = debian_base()
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    _fake_isaacgym_tarball(ctx / "old.tar.gz", "1.0rc3")
    _fake_isaacgym_tarball(ctx / "ig.tar.gz", PINS["ISAACGYM_VERSION"])
    out = tmp_path / "out"
    out.mkdir()
    run(["docker", "run", "--rm", "--network", "none", "-e", "WANT=" + PINS["ISAACGYM_VERSION"],
         "-v", "%s:/src:ro" % REPO, "-v", "%s:/ctx:ro" % ctx, "-v", "%s:/out" % out,
         image, "bash", "-c", CONTAINER_SCRIPT], timeout=300)
    old = (out / "old.log").read_text()
    assert (out / "old.rc").read_text().strip() == "1", old
    assert "the tarball holds isaacgym 1.0rc3; the pin is %s" % PINS["ISAACGYM_VERSION"] in old
    log = (out / "install.log").read_text()
    assert not (out / "install.rc").exists(), log
    assert (out / "gymtorch-src.txt").read_text().split() == ["gymtorch.cpp"]
    listing = (out / "gl.txt").read_text()
    assert "nvidia_icd.json" in listing and "10_nvidia.json" in listing
    assert "libEGL_mesa" not in listing and "50_mesa.json" not in listing
    assert (out / "tmp.txt").read_text().strip() == ""  # the extracted tree is gone
    # uid 0 never becomes the image user; other ids are taken as given
    assert (out / "uid.txt").read_text().strip() == "1000"
    assert (out / "runs-owner.txt").read_text().strip() == "1000"
    assert "uid=12345(other) gid=4321" in (out / "other.txt").read_text()


def _selfcheck(env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "docker" / "selfcheck.py")], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def test_selfcheck_on_real_patched_openrl_and_harl(upstream, tmp_path):
    import hashlib
    import shutil

    from tests.conftest import double_env

    records = tmp_path / "records"
    shutil.copytree(str(upstream["records"]), str(records))
    env = double_env(upstream, MAPUSH_PATCH_RECORDS=records)
    proc = _selfcheck(env)
    assert "ok: openrl.utils.callbacks.checkpoint_callback imports" in proc.stderr, proc.stderr
    assert "ok: harl LOGGER_REGISTRY['mapush'] = mapush.envs.harl_logger." in proc.stderr
    assert "ok: isaacgym, mqe, harl, mapush installed; objects: Tblock, cuboid, cylinder" in proc.stderr
    assert "error: check_patches: AssertionError: no patch record for mapush" in proc.stderr
    # (the stand-in's isaacgym has a version, 0+stand-in; the mapush patch record is missing)
    assert "error: check_run_record: AssertionError: runs would record an incomplete stack: " \
        in proc.stderr and "patch record of mapush" in proc.stderr
    assert proc.returncode == 1 and json.loads(proc.stdout)["failures"] >= 1

    patched = tmp_path / "mapush-tree" / "mqe" / "base_task.py"
    patched.parent.mkdir(parents=True)
    patched.write_text("patched\n")
    (records / "mapush.json").write_text(json.dumps({
        "component": "mapush", "status": "applied", "dir": str(tmp_path / "mapush-tree"),
        "patches": [], "files": [{"path": "mqe/base_task.py", "before": "0" * 64,
                                  "after": hashlib.sha256(b"patched\n").hexdigest()}]}))
    proc = _selfcheck(env)
    assert "ok: patches recorded and in place: openrl" in proc.stderr, proc.stderr
    assert "error: check_smoke: AssertionError: no smoke stages at MAPUSH_SMOKE_TESTS=" \
        in proc.stderr
    proc = _selfcheck(dict(env, MAPUSH_SMOKE_TESTS=str(REPO / "tests" / "gpu")))
    assert "ok: mapush smoke: 8 stages collected from %s" % (REPO / "tests" / "gpu") \
        in proc.stderr, proc.stderr
    patched.write_text("edited by hand\n")
    proc = _selfcheck(env)
    assert "mqe/base_task.py differs from the patched file recorded" in proc.stderr
    other = tmp_path / "env"  # pins that differ from those the package ships: the file named
    other.mkdir()
    (other / "pins.env").write_text("MAPUSH_COMMIT=elsewhere\n")
    proc = _selfcheck(dict(env, MAPUSH_ENV_DIR=str(other)))
    assert "error: check_run_record: AssertionError: " in proc.stderr and \
        "pins.env differs from %s" % (other / "pins.env") in proc.stderr, proc.stderr


def test_image_scripts_run_on_the_images_python():
    scripts = sorted(str(p) for p in (REPO / "docker").glob("*.py"))
    assert len(scripts) >= 4
    proc = subprocess.run([_tool("vermin"), "-q", "--no-tips", "--violations",
                           "-t=%s-" % PINS["PYTHON_VERSION"]] + scripts,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout
