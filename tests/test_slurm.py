"""``mapush sweep --executor slurm`` on a real one-node Slurm cluster started here.

Debian's ``slurmctld``, ``slurmd`` and ``munge`` (``.ci/run`` installs them) run a cluster in
a temporary folder on this machine, on free local ports. Apptainer cannot be installed here,
so the job script's runner (``MAPUSH_RUNNER``) is bare ``mapush``, over the double. One task
is requeued while it trains (``scontrol requeue``): it must resume from its checkpoint, not
start over. Every daemon started is stopped at the end.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, double_env, run_mapush

TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "scontrol", "squeue", "sinfo")


def _missing(reason):
    if os.environ.get("CI"):
        pytest.fail("CI must provide this (see .ci/run): " + reason)
    pytest.skip(reason)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError("timed out after %ds waiting for %s" % (timeout, what))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        _missing("no %s (apt-get install slurmctld slurmd munge)" % ", ".join(missing))
    if os.geteuid() != 0:
        _missing("a one-node Slurm cluster needs root here (slurmd starts the jobs)")
    tmp = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (tmp / sub).mkdir()
    key = tmp / "munge.key"
    subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    conf = tmp / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=mapushtest", "SlurmctldHost=%s(127.0.0.1)" % host,
        "SlurmUser=root", "SlurmdUser=root",
        "SlurmctldPort=%d" % _free_port(), "SlurmdPort=%d" % _free_port(),
        "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % (tmp / "munge.sock"),
        "StateSaveLocation=%s" % (tmp / "state"), "SlurmdSpoolDir=%s" % (tmp / "spool"),
        "SlurmctldPidFile=%s" % (tmp / "slurmctld.pid"),
        "SlurmdPidFile=%s" % (tmp / "slurmd.pid"),
        "SlurmctldLogFile=%s" % (tmp / "log" / "slurmctld.log"),
        "SlurmdLogFile=%s" % (tmp / "log" / "slurmd.log"),
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "ReturnToService=2", "JobRequeue=1", "KillWait=30",
        "MpiDefault=none",
        "NodeName=%s NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN" % host,
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = dict(os.environ, SLURM_CONF=str(conf))
    daemons = [subprocess.Popen(
        ["munged", "-F", "--key-file=%s" % key, "--socket=%s" % (tmp / "munge.sock"),
         "--pid-file=%s" % (tmp / "munged.pid"), "--log-file=%s" % (tmp / "log" / "munged.log"),
         "--seed-file=%s" % (tmp / "munge.seed"), "--force"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    _wait(lambda: (tmp / "munge.sock").exists(), 30, "munged")
    for daemon in ("slurmctld", "slurmd"):
        daemons.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def idle():
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                             text=True)
        return out.returncode == 0 and out.stdout.strip() == "idle"

    try:
        _wait(idle, 60, "the node to be idle")
        yield {"env": {"SLURM_CONF": str(conf)}, "dir": tmp}
    finally:
        subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True)
        for proc in reversed(daemons):
            proc.terminate()
        for proc in reversed(daemons):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def scontrol(slurm, *args):
    return subprocess.run(["scontrol"] + list(args), env=dict(os.environ, **slurm["env"]),
                          capture_output=True, text=True)


def cell_state(run):
    path = Path(run) / "cell.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def test_a_sweep_on_slurm_runs_every_cell_and_a_requeued_task_resumes(upstream, slurm,
                                                                     tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    env = double_env(upstream, MAPUSH_RUNNER="%s -m mapush" % sys.executable,
                     MAPUSH_SLURM_GRES="", MAPUSH_SLURM_OPTIONS="--cpus-per-task=1",
                     MQE_DOUBLE_STEP_SLEEP="0.01", **slurm["env"])
    args = ["sweep", "--executor", "slurm", "--seeds", "1,2", "--objects", "cuboid", "--steps",
            2000, "--num-envs", 4, "--config", config, "--root", tmp_path / "sweeps",
            "--name", "cluster", "--sim-device", "cpu", "--rl-device", "cpu"]
    proc = run_mapush(args, env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweeps" / "cluster"
    record = json.loads((sweep / "sweep.json").read_text())
    job = record["slurm_jobs"][0]["job_id"]
    runs = {c["seed"]: Path(c["run_dir"]) for c in record["cells"]}
    phases = runs[1] / "phases.log"
    _wait(lambda: phases.is_file() and "training" in phases.read_text()
          and list((runs[1] / "checkpoints").glob("*")) == [], 180, "task 0 to train")
    requeued = scontrol(slurm, "requeue", "%s_0" % job)
    assert requeued.returncode == 0, requeued.stderr
    _wait(lambda: cell_state(runs[1]).get("state") == "stopped", 120,
          "task 0 to stop with its checkpoint")
    assert list((runs[1] / "checkpoints").iterdir())  # the stop's checkpoint
    # a requeued job waits ~2 minutes before it may start again: once it is pending, let it
    # start now
    def started_again():
        shown = scontrol(slurm, "show", "job", "%s_0" % job).stdout
        if "JobState=PENDING" in shown:
            scontrol(slurm, "update", "JobId=%s_0" % job, "StartTime=now")
        return "JobState=RUNNING" in shown or "JobState=COMPLETED" in shown

    _wait(started_again, 120, "the requeued task to start again")
    _wait(lambda: all(cell_state(r).get("state") == "done" for r in runs.values()), 300,
          "every cell to finish")
    for seed, run in runs.items():
        config_json = json.loads((run / "config.json").read_text())
        assert config_json["spec"]["seed"] == seed and config_json["spec"]["steps"] == 2000
        final = max(json.loads(p.read_text())["step"] for p in
                    (run / "checkpoints").glob("*/meta.json"))
        assert final == 2000
    resumed = json.loads((runs[1] / "config.json").read_text())
    assert resumed["resumes"], "task 0 started over instead of resuming"
    assert resumed["resumes"][-1]["from"].startswith(str(runs[1] / "checkpoints"))
    assert cell_state(runs[1])["restarts"] >= 1
    log = (sweep / ("slurm-%s_0.out" % job)).read_text()
    assert "resuming %s" % runs[1] in log
    status = run_mapush(["sweep", "--status", "--name", "cluster", "--root",
                         tmp_path / "sweeps"], env, cwd=tmp_path)
    assert status.returncode == 0 and status.stdout.strip().endswith("2 done"), status.stdout
    from mapush.sweep import SBATCH  # the job script the sweep submits is the repository's

    assert SBATCH == REPO / "cluster" / "sweep.sbatch" and SBATCH.is_file()
