"""``mapush train --algo ppo``: real OpenRL PPO (patched openrl 0.2.0) on the MQE double, CPU.

One training run (module fixture) serves the checks of the run directory; resume, stop and
bad resumes work on copies of it. The OpenRL config is shrunk to 25 steps per env and update
(``--config``) so that 2000 steps are 10 updates."""
import json
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import tree_hash, double_env, run_mapush

NUM_ENVS, EPISODE_LENGTH, PPO_EPOCH = 8, 25, 2
PER_UPDATE = NUM_ENVS * EPISODE_LENGTH
SMALL = "episode_length: %d\nppo_epoch: %d\n" % (EPISODE_LENGTH, PPO_EPOCH)


def train_args(run_dir, config, steps, *extra):
    return ["train", "--algo", "ppo", "--sim-device", "cpu", "--rl-device", "cpu",
            "--num-envs", NUM_ENVS, "--steps", steps, "--checkpoint-interval", 1000,
            "--config", config, "--run-dir", run_dir, "--seed", 3] + list(extra)


def checkpoint_steps(run_dir):
    return sorted(json.loads(p.read_text())["step"]
                  for p in (Path(run_dir) / "checkpoints").glob("*/meta.json"))


def scalars(run_dir):
    """``{tag: [(step, value), ...]}`` from every event file of the run."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = {}
    for events in sorted((Path(run_dir) / "logs").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.fixture(scope="module")
def trained(upstream, tmp_path_factory):
    """2000 steps of PPO where any CUDA use fails the run (MQE_DOUBLE_FORBID_CUDA)."""
    tmp = tmp_path_factory.mktemp("ppo")
    config = tmp / "small.yaml"
    config.write_text(SMALL)
    run = tmp / "run"
    proc = run_mapush(train_args(run, config, 2000),
                      double_env(upstream, MQE_DOUBLE_FORBID_CUDA=1), cwd=tmp)
    return {"proc": proc, "run": run, "config": config, "cwd": tmp}


def test_ppo_trains_into_the_run_directory_on_cpu_without_cuda(trained):
    proc, run = trained["proc"], trained["run"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    # quiet by default (#38 item 10): each update's losses go to log.txt, not the terminal
    assert "] step " not in proc.stderr and "] step " in (run / "log.txt").read_text()
    spec = json.loads((run / "config.json").read_text())["spec"]
    assert (spec["algo"], spec["num_envs"], spec["rl_device"]) == ("ppo", NUM_ENVS, "cpu")
    # the recipe (lr 5e-4) under the user's --config (episode length, epochs)
    resolved = json.loads((run / "openrl_config.json").read_text())
    assert (resolved["lr"], resolved["critic_lr"]) == (5e-4, 5e-4)
    assert (resolved["episode_length"], resolved["ppo_epoch"]) == (EPISODE_LENGTH, PPO_EPOCH)
    assert checkpoint_steps(run) == [1000, 2000]
    for name in ("rl_model_1000_steps", "rl_model_2000_steps"):
        meta = json.loads((run / "checkpoints" / name / "meta.json").read_text())
        assert meta["algo"] == "ppo" and meta["update"] == meta["step"] // PER_UPDATE
        assert (run / "checkpoints" / name / "module.pt").is_file()
    found = scalars(run)
    assert "metrics/collision_degree" not in found  # MQE counts first episodes only
    assert "metrics/collaboration_degree" not in found
    for tag in ("metrics/success_rate", "metrics/finished_time",
                "metrics/first_episode/collaboration_degree", "metrics/first_episode/envs_done",
                "reward/average_step_reward",
                "reward/distance_to_target_reward", "train/value_loss", "train/policy_loss",
                "perf/env_steps_per_s", "memory/host_rss_mb"):
        assert tag in found, sorted(found)
    assert max(step for step, _ in found["perf/env_steps_per_s"]) == 2000
    # the double: even envs succeed after 5 steps, odd ones time out -> rate in (0, 1)
    assert all(0.0 < value < 1.0 for _, value in found["metrics/success_rate"])
    phases = [line.split()[1] for line in (run / "phases.log").read_text().splitlines()]
    assert phases.index("first_step") < phases.index("training") < phases.index("checkpoint")
    assert phases[-1] == "shutdown"
    # nothing outside the run directory (upstream wrote ./log and ./results)
    assert sorted(p.name for p in trained["cwd"].iterdir()) == ["run", "small.yaml"]


LOAD = textwrap.dedent("""
    import json, sys
    from mapush import sim
    sim.import_isaacgym()
    from openrl.modules.common import PPONet
    from openrl.runners.common import PPOAgent
    from mapush.envs.openrl_env import OpenRLEnv
    from mapush.trainers.openrl_config import openrl_config
    from mapush.spec import RunSpec
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=%d, steps=1,
                   seed=1, run_dir=".", sim_device="cpu", rl_device="cpu", config=sys.argv[1])
    env = OpenRLEnv(sim.make_env(spec)[0])
    agent = PPOAgent(PPONet(env, cfg=openrl_config(spec, sys.argv[1]), device="cpu"))
    out = {}
    for path in sys.argv[2:]:
        agent.load(path)  # OpenRL's own loader
        actions, _ = agent.act(env.reset())
        optim = agent.net.module.optimizers["policy"]
        out[path] = {"actions": list(actions.shape),
                     "optimizer_steps": max(int(s["step"]) for s in optim.state.values())}
    print(json.dumps(out))
""" % NUM_ENVS)


def test_verbose_shows_the_losses_and_the_import_warnings_of_both_processes(trained, upstream,
                                                                          tmp_path):
    """#38 item 10: ``--verbose`` silences nothing. The parent imports no training stack
    (its checks are ``trainers.load(algo, checks=True)``), so each import warning is the
    child's, shown once. Without it gym's notice is not shown at all (#81)."""
    assert trained["proc"].returncode == 0
    proc = run_mapush(train_args(tmp_path / "run", trained["config"], 400, "--verbose"),
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"\[INFO\] step \d+: .*train/value_loss", proc.stderr)
    notice = "Gym has been unmaintained"
    assert proc.stderr.count(notice) == 1 and notice not in trained["proc"].stderr, \
        proc.stderr[-3000:]
    warned = {line for line in proc.stderr.splitlines() if "Warning: " in line}
    assert all(proc.stderr.count(line) == 1 for line in warned), proc.stderr[-3000:]


def test_resume_continues_step_count_axis_and_optimizer(trained, upstream, tmp_path):
    assert trained["proc"].returncode == 0
    run = tmp_path / "run"
    shutil.copytree(str(trained["run"]), str(run))
    proc = run_mapush(train_args(run, trained["config"], 4000, "--resume", run),
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert checkpoint_steps(run) == [1000, 2000, 3000, 4000]
    events = sorted((run / "logs").glob("events.out.tfevents.*"))
    assert len(events) == 2
    resumed = scalars(run)["perf/env_steps_per_s"]
    assert sorted(step for step, _ in resumed) == [s for s in range(200, 4001, 200)]
    assert len(json.loads((run / "config.json").read_text())["resumes"]) == 1
    # #38 item 9: the episode count goes on from the checkpoint's
    episodes = [json.loads((run / "checkpoints" / ("rl_model_%d_steps" % s) / "meta.json")
                           .read_text())["episodes"] for s in (1000, 2000, 3000, 4000)]
    assert 0 < episodes[0] < episodes[1] < episodes[2] < episodes[3], episodes

    # OpenRL's PPOAgent.load accepts the checkpoints; the optimizer kept counting across the
    # resume (a fresh optimizer would restart at one run's worth of steps).
    ckpts = [str(run / "checkpoints" / n) for n in ("rl_model_1000_steps",
                                                    "rl_model_4000_steps")]
    env = double_env(upstream, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1)  # torch >= 2.6 only
    out = subprocess.run([sys.executable, "-c", LOAD, str(trained["config"])] + ckpts, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    per_update = PPO_EPOCH  # one optimizer step per epoch and mini-batch (1)
    assert loaded[ckpts[0]] == {"actions": [NUM_ENVS, 2, 3],
                                "optimizer_steps": 1000 // PER_UPDATE * per_update}
    assert loaded[ckpts[1]]["optimizer_steps"] == 4000 // PER_UPDATE * per_update


@pytest.mark.faults
def test_resume_from_a_missing_or_corrupt_checkpoint_changes_nothing(trained, upstream,
                                                                    tmp_path):
    assert trained["proc"].returncode == 0
    run = tmp_path / "run"
    shutil.copytree(str(trained["run"]), str(run))
    env = double_env(upstream)
    ckpt = run / "checkpoints" / "rl_model_1000_steps"
    (ckpt / "meta.json").write_text("{not json")  # corrupt: torn meta.json
    before = tree_hash(run)
    for target in (run / "checkpoints" / "rl_model_3000_steps", ckpt):
        proc = run_mapush(train_args(run, trained["config"], 4000, "--resume", target), env,
                          cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert len(error_lines(proc.stderr)) == 1, proc.stderr[-2000:]
        assert str(target) in error_lines(proc.stderr)[0]
        assert tree_hash(run) == before

    # module.pt altered behind a valid meta.json: refused, checkpoints and logs untouched
    module = run / "checkpoints" / "rl_model_2000_steps" / "module.pt"
    module.write_bytes(module.read_bytes()[:1000])
    kept = (tree_hash(run / "checkpoints"), tree_hash(run / "logs"))
    proc = run_mapush(train_args(run, trained["config"], 4000, "--resume",
                                 module.parent), env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and "its module.pt does not match" in errors[0], errors
    assert "damaged" in errors[0]
    assert (tree_hash(run / "checkpoints"), tree_hash(run / "logs")) == kept

    # #36: the run folder passes over its damaged newest checkpoint for the one before it
    # (here rl_model_1000_steps, its meta.json mended as one written before the file record)
    (ckpt / "meta.json").write_text(json.dumps({"step": 1000}))
    proc = run_mapush(train_args(run, trained["config"], 3000, "--resume", run), env,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "%s is damaged (its module.pt does not match meta.json): using the checkpoint " \
        "before it" % module.parent in proc.stderr, proc.stderr[-3000:]
    assert json.loads((run / "config.json").read_text())["resumes"][-1]["from"] == str(ckpt)
    assert checkpoint_steps(run) == [1000, 2000, 3000]


def test_sigterm_ends_the_run_with_a_final_checkpoint_and_status_0(trained, upstream,
                                                                  tmp_path):
    run = tmp_path / "run"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP=0.005)
    cmd = [sys.executable, "-m", "mapush"] + [str(a) for a in train_args(
        run, trained["config"], 10 ** 7)]
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        phases = run / "phases.log"
        while time.time() < deadline and proc.poll() is None:
            if phases.is_file() and "training" in phases.read_text():
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(1.0)  # inside the rollout of a later update
        sent = time.time()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        took = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert took < 60, "stopping took %.1f s: hung?" % took  # a hang guard (#80)
    steps = checkpoint_steps(run)
    assert steps and steps[-1] > 0 and steps[-1] % PER_UPDATE == 0, steps
    assert "SIGTERM" in err


def test_unknown_key_in_config_is_one_error_line_naming_it(upstream, tmp_path):
    config = tmp_path / "typo.yaml"
    config.write_text("episode_lenght: 25\n")
    proc = run_mapush(train_args(tmp_path / "run", config, 400), double_env(upstream),
                      cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (error,) = error_lines(proc.stderr)
    assert str(config) in error and "episode_lenght" in error
    assert not (tmp_path / "run" / "checkpoints").exists()


INIT_FROM_NORMALIZER = r'''
import json, sys
from types import SimpleNamespace

import isaacgym  # noqa: F401 - the module's pickle names the env's classes; before torch
import torch
from openrl.modules.utils.valuenorm import ValueNorm

from mapush.trainers.openrl_trainer import init_weights

STATS = ("running_mean", "running_mean_sq", "debiasing_term")
load = lambda: torch.load(sys.argv[1], map_location="cpu", weights_only=False)
source, cuda_like, as_loaded = load(), load(), load()
# The layout of a module built on CUDA: ValueNorm's nn.Parameter(...).to(**tpdv)
# (valuenorm.py:27-35) returns a plain tensor when the device or dtype changes. A float64
# default dtype takes that same path on the CPU.
torch.set_default_dtype(torch.float64)
for module in (source, cuda_like):
    module.models["critic"].value_normalizer = ValueNorm(1, device=torch.device("cpu"))
torch.set_default_dtype(torch.float32)
norm = source.models["critic"].value_normalizer
norm.update(torch.tensor([[3.0], [5.0], [7.0]]))
out = {"outside_state_dict": not any("running_mean" in key for key in
                                     source.models["critic"].state_dict())}
for name, target in (("cuda_like", cuda_like), ("as_loaded", as_loaded)):
    init_weights(SimpleNamespace(net=SimpleNamespace(module=target)), source)
    mine = target.models["critic"].value_normalizer
    out[name] = {stat: [getattr(norm, stat).tolist(), getattr(mine, stat).tolist()]
                 for stat in STATS}
    weights, copied = source.models["critic"].state_dict(), target.models["critic"].state_dict()
    out[name + "_weights"] = all(torch.equal(value, copied[key])
                                 for key, value in weights.items())
print(json.dumps(out))
'''


def test_init_from_copies_the_value_normalizer_statistics(trained, upstream):
    """``--init-from`` copies ValueNorm's running statistics, which a module built on CUDA
    keeps outside ``state_dict()`` (openrl valuenorm.py:27-35), into a CUDA-like module and
    into one as a CPU run loads it."""
    module = sorted((trained["run"] / "checkpoints").glob("*/module.pt"))[-1]
    proc = subprocess.run([sys.executable, "-c", INIT_FROM_NORMALIZER, str(module)],
                          env=double_env(upstream), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["outside_state_dict"]
    for name in ("cuda_like", "as_loaded"):
        for stat, (source, copied) in out[name].items():
            assert copied == pytest.approx(source), (name, stat)
        assert out[name]["debiasing_term"][0] != 0  # the source's statistics, not fresh ones
        assert out[name + "_weights"]


def test_ppo_prints_the_progress_line_every_trainer_prints(trained):
    """#38 item 9: PPO printed no progress line or ETA; now each update prints the line HARL's
    trainers print, progress.txt gets its header and a row per update, and the run ends
    naming its checkpoints."""
    proc = trained["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    updates = 2000 // PER_UPDATE
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[ppo go1push_mid] ")]
    assert len(lines) == updates, proc.stdout[-3000:]
    assert re.match(r"^\[ppo go1push_mid\] update %d/%d \| steps 2000/2000 \| \d+ steps/s \| "
                    r"success (-|\d\.\d{3}) \| ETA " % (updates, updates), lines[-1]), lines[-1]
    header, *rows = (trained["run"] / "progress.txt").read_text().splitlines()
    assert header == "steps,success_rate,steps_per_s"
    assert [int(row.split(",")[0]) for row in rows] == list(range(PER_UPDATE, 2001, PER_UPDATE))
    assert "mapush: training finished at step 2000; checkpoints in %s" % (
        trained["run"] / "checkpoints") in proc.stderr
    # #38 item 10: the training stack's import warnings come once (the child's), not twice
    warned = [line for line in proc.stderr.splitlines()
              if "Warning: " in line or "Gym has been unmaintained" in line]
    assert len(warned) == len(set(warned)), warned
