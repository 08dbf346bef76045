"""``pip install .`` on a host: a ``mapush`` whose run readers work without the image, and
``make report`` through it, with no Docker and no GPU.

The fixture installs this checkout into a fresh virtualenv with pip, from PyPI, as a user
would (pyproject.toml's dependencies), and puts a run made over the test double in it.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, double_env, run_mapush

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


@pytest.fixture(scope="module")
def host(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("host")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           str(REPO)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    run = tmp / "runs" / "ppo"
    proc = run_mapush(["train", "--num-envs", 8, "--steps", 400, "--checkpoint-interval", 200,
                       "--config", config, "--run-dir", run] + CPU, double_env(upstream),
                      cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run / "eval.jsonl").write_text(json.dumps(
        {"checkpoint": str(run / "checkpoints" / "rl_model_400_steps"), "step": 400,
         "success_rate": 0.5, "finished_time": 3.0, "collision_degree": None,
         "collaboration_degree": 0.2}) + "\n")
    return {"venv": venv, "run": run, "tmp": tmp}


def host_env():
    """No PYTHONPATH, no MAPUSH_ROOT: only what the venv has."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "MAPUSH_ROOT", "VIRTUAL_ENV")}


def test_pip_install_brings_the_readers_dependencies(host):
    py = str(host["venv"] / "bin" / "python")
    proc = subprocess.run([py, "-c", "import matplotlib, tqdm, yaml, numpy, mapush; "
                           "print(mapush.__file__)"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, env=host_env(),
                          cwd=str(host["tmp"]))
    assert proc.returncode == 0, proc.stderr
    assert str(host["venv"]) in proc.stdout  # the installed copy, not this checkout
    proc = subprocess.run([str(host["venv"] / "bin" / "mapush"), "report", "--help"],
                          stdout=subprocess.PIPE, universal_newlines=True, env=host_env())
    assert proc.returncode == 0 and "RUN" in proc.stdout


def test_the_host_mapush_reports_a_run(host):
    """torch is not in the host venv: the report reads the run without it."""
    proc = subprocess.run([str(host["venv"] / "bin" / "python"), "-c", "import torch"],
                          stderr=subprocess.PIPE, universal_newlines=True, env=host_env())
    assert proc.returncode != 0
    proc = subprocess.run([str(host["venv"] / "bin" / "mapush"), "report", str(host["run"])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=host_env(), cwd=str(host["tmp"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (host["run"] / "report" / "index.html").read_text()
    assert "eval.png" in page and (host["run"] / "report" / "eval.png").is_file()


def test_make_report_runs_on_the_host_without_docker(host, tmp_path):
    """make report: the host venv's mapush; Docker is never called (DOCKER=false)."""
    sandbox = tmp_path / "checkout"
    sandbox.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(str(REPO / name), str(sandbox / name))
    for name in ("env", "docker"):
        shutil.copytree(str(REPO / name), str(sandbox / name))
    shutil.copytree(str(host["run"]), str(sandbox / "runs" / "ppo"))
    shutil.rmtree(str(sandbox / "runs" / "ppo" / "report"), ignore_errors=True)
    (host["venv"] / ".stamp").touch()  # built by the fixture: make must not rebuild it
    env = dict(host_env(), MAKEFLAGS="")
    proc = subprocess.run(["make", "--no-print-directory", "report", "RUN=runs/ppo",
                           "HOST_VENV=%s" % host["venv"], "DOCKER=false"], cwd=str(sandbox),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (sandbox / "runs" / "ppo" / "report" / "index.html").is_file()


def test_every_subcommand_on_the_host_ends_in_a_line_not_a_traceback(host, tmp_path):
    """#38 item 4: after `pip install .` (no torch, no Isaac Gym), `mapush eval` ended in a
    20-line ModuleNotFoundError. Each subcommand now ends in its own output or one line
    naming what is missing and where it runs."""
    checkpoint = host["run"] / "checkpoints" / "rl_model_400_steps"
    commands = {
        "train": ["train", "--sim-device", "cpu", "--rl-device", "cpu", "--no-preflight",
                  "--run-dir", tmp_path / "run"],
        "doctor": ["doctor", "--sim-device", "cpu", "--rl-device", "cpu"],
        "eval": ["eval", "--checkpoint", checkpoint, "--num-envs", 2, "--sim-device", "cpu",
                 "--rl-device", "cpu"],
        "export": ["export", "--checkpoint", checkpoint, "--out", tmp_path / "export"],
        "reproduce": ["reproduce", "--results", tmp_path],
        "pipeline": ["pipeline", "--dir", tmp_path / "pipe", "--sim-device", "cpu",
                     "--rl-device", "cpu", "--mid-steps", 100],
        "sweep": ["sweep", "--status", "--name", "none", "--root", tmp_path],
        "report": ["report", host["run"], "--out", tmp_path / "report"],
    }
    for name, argv in commands.items():
        proc = subprocess.run([str(host["venv"] / "bin" / "mapush")] + [str(a) for a in argv],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, env=host_env(), cwd=str(tmp_path),
                              timeout=300)
        assert "Traceback" not in proc.stderr, (name, proc.stderr[-3000:])
        last = (proc.stdout if name == "doctor" else proc.stderr).strip().splitlines()[-1:]
        verdict = "doctor: " if name == "doctor" else "error: "  # the doctor's last line
        assert proc.returncode == 0 or last[0].startswith(verdict), (name, proc.stderr[-3000:])
    proc = subprocess.run([str(host["venv"] / "bin" / "mapush")] + [str(a) for a in
                                                                     commands["eval"]],
                          stderr=subprocess.PIPE, universal_newlines=True, env=host_env(),
                          cwd=str(tmp_path), timeout=300)
    assert proc.stderr.strip() == (
        "error: mapush eval needs the Python package torch, which is not installed here: run "
        "it in the image (make shell), or pip install '.[train]' ('.[export]' for export)")
