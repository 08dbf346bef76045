"""``mapush train --algo happo|mappo|hatrpo``: real HARL (patched by patches/apply) on the
MQE double, on CPU, through the CLI, the parent process and the training child.

Rollouts are shortened with ``--config`` (episode_length 10-20, 8 envs) so a run is a few
seconds. Expected metrics are derived from the double's knobs and its object config.
"""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from tests.conftest import double_config, REPO, double_env, one_error, run_mapush

NUM_ENVS = 8
SUCCESS_ENVS = (0, 3, 5)
SUCCESS_STEP = 4


def events(run_dir):
    """``tag -> [(step, value)]`` of all event files under ``<run_dir>/logs``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found = {}
    for path in sorted((run_dir / "logs").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return found


def double_timing():
    """(dt, max_episode_length) of the double's cuboid config, as MQE computes them."""
    cfg = double_config("cuboid")
    dt = cfg.control.decimation * cfg.sim.dt
    return dt, int(math.ceil(cfg.env.episode_length_s / dt))


def expected_metrics(env_steps):
    """Success rate and finished time after ``env_steps`` (all envs) on the double."""
    dt, max_len = double_timing()
    per_env = env_steps // NUM_ENVS
    wins = len(SUCCESS_ENVS) * (per_env // SUCCESS_STEP)
    # a time-out ends when episode_length_buf > max_episode_length (MQE's legged_robot.py:196)
    losses = (NUM_ENVS - len(SUCCESS_ENVS)) * (per_env // (max_len + 1))
    return (wins / float(wins + losses),
            (wins * SUCCESS_STEP * dt + losses * max_len * dt) / float(wins + losses))


def small_config(tmp_path, name, episode_length, env=None, **train):
    path = tmp_path / name
    config = {"train": dict({"episode_length": episode_length, "log_interval": 1}, **train),
              "device": {"torch_threads": 1}}
    if env:
        config["env"] = env
    path.write_text(yaml.safe_dump(config))
    return path


def train_args(algo, run_dir, steps, config, *extra):
    return ["train", "--algo", algo, "--object", "cuboid", "--sim-device", "cpu",
            "--rl-device", "cpu", "--num-envs", NUM_ENVS, "--steps", steps, "--seed", 3,
            "--run-dir", run_dir, "--config", config] + list(extra)


def run_env(upstream, **extra):
    return double_env(upstream, MQE_DOUBLE_SUCCESS_ENVS=",".join(map(str, SUCCESS_ENVS)),
                      MQE_DOUBLE_SUCCESS_STEP=SUCCESS_STEP, **extra)


def checkpoint_meta(run_dir):
    found = {}
    for meta in (run_dir / "checkpoints").glob("*/meta.json"):
        data = json.loads(meta.read_text())
        found[data["step"]] = (meta.parent, data)
    return found


LOAD_BACK = r"""
import json, sys, types
from pathlib import Path
import numpy as np, torch
from gym import spaces
from harl.algorithms.actors import ALGO_REGISTRY
from harl.algorithms.critics.v_critic import VCritic
from mapush.trainers.harl_trainer import load_actor

ckpt = Path(sys.argv[1])
cfg = json.loads((ckpt / "harl_config.json").read_text())
algo, a = cfg["main_args"]["algo"], cfg["algo_args"]
args = dict(a["model"], **a["algo"])
obs_space = spaces.Box(-np.inf, np.inf, (8,), np.float32)
act_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
fresh = []
for i in range(2):
    actor = ALGO_REGISTRY[algo](args, obs_space, act_space, device=torch.device("cpu"))
    actor.actor.load_state_dict(torch.load(str(ckpt / ("actor_agent%d.pt" % i))))
    fresh.append(actor)
critic = VCritic(args, spaces.Box(-np.inf, np.inf, (16,), np.float32), device=torch.device("cpu"))
critic.critic.load_state_dict(torch.load(str(ckpt / "critic_agent.pt")))
env = types.SimpleNamespace(num_agents=2, observation_space=obs_space, action_space=act_space)
act = load_actor(ckpt, "cpu")
obs = np.random.RandomState(0).randn(5, 2, 8).astype(np.float32)
ours = act(obs)
theirs = np.stack([fresh[i].act(obs[:, i], np.zeros((5, 1, args["hidden_sizes"][-1]), np.float32),
                                 np.ones((5, 1), np.float32), None, deterministic=True)[0]
                   .detach().numpy() for i in range(2)], axis=1)
print(json.dumps({"shape": list(ours.shape), "same": bool(np.allclose(ours, theirs))}))
"""


def load_back(upstream, checkpoint):
    proc = subprocess.run([sys.executable, "-c", LOAD_BACK, str(checkpoint)],
                          env=double_env(upstream), cwd=str(REPO), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def happo(upstream, tmp_path_factory):
    """HAPPO for 4 updates (160 steps each) with checkpoints every 320 steps and a linear
    LR schedule; then a copy of it, without its last checkpoint and its logs, resumed from
    its middle checkpoint."""
    tmp = tmp_path_factory.mktemp("happo")
    config = small_config(tmp, "happo.yaml", 20, use_linear_lr_decay=True)
    run_dir = tmp / "run"
    actions = tmp / "actions.npy"
    proc = run_mapush(train_args("happo", run_dir, 640, config, "--checkpoint-interval", 320),
                      env=run_env(upstream, MQE_DOUBLE_RECORD_ACTIONS=actions), cwd=tmp)
    resumed_dir = tmp / "resumed"
    resumed = None
    if proc.returncode == 0:
        shutil.copytree(str(run_dir), str(resumed_dir))
        shutil.rmtree(str(resumed_dir / "checkpoints" / ("step-%012d" % 640)))
        shutil.rmtree(str(resumed_dir / "logs"))
        resumed = run_mapush(
            train_args("happo", resumed_dir, 640, config, "--checkpoint-interval", 160,
                       "--resume", resumed_dir / "checkpoints" / ("step-%012d" % 320)),
            env=run_env(upstream), cwd=tmp)
    return {"proc": proc, "run_dir": run_dir, "actions": actions, "config": config,
            "resumed": resumed, "resumed_dir": resumed_dir}


def test_happo_trains_and_exits_zero(happo):
    proc = happo["proc"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    assert "update 4/4" in proc.stdout and "success" in proc.stdout  # the progress line
    assert "observation_space" not in proc.stdout + proc.stderr  # #38: HARL's raw prints


def test_verbose_shows_harls_own_prints(happo, upstream, tmp_path):
    assert happo["proc"].returncode == 0
    proc = run_mapush(train_args("happo", tmp_path / "run", 160, happo["config"], "--verbose"),
                      env=run_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "share_observation_space" in proc.stdout


def test_happo_logs_the_papers_metrics(happo):
    found = events(happo["run_dir"])
    steps = [s for s, _ in found["metrics/success_rate"]]
    assert steps == [160, 320, 480, 640]
    for step, value in found["metrics/success_rate"]:
        assert value == pytest.approx(expected_metrics(step)[0])
    for step, value in found["metrics/finished_time"]:
        assert value == pytest.approx(expected_metrics(step)[1])
    assert "metrics/collision_degree" not in found  # MQE counts first episodes only
    assert "metrics/collaboration_degree" not in found
    for tag in ("metrics/first_episode/collaboration_degree", "metrics/first_episode/envs_done",
                "reward/distance_to_target_reward", "reward/approach_to_box_reward",
                "reward/average_step_reward", "perf/env_steps_per_s", "train/policy_loss",
                "train/value_loss"):
        assert [s for s, _ in found[tag]] == steps, tag


def test_happo_run_dir_has_config_with_pins_and_patches(happo):
    config = json.loads((happo["run_dir"] / "config.json").read_text())
    assert config["spec"]["algo"] == "happo" and config["spec"]["num_envs"] == NUM_ENVS
    pins = config["provenance"]["pins"]
    assert pins["HARL_COMMIT"] and pins["MAPUSH_COMMIT"]
    components = [r.get("component") for r in config["provenance"]["patches"]]
    assert "harl" in components
    harl_config = json.loads((happo["run_dir"] / "harl_config.json").read_text())
    assert harl_config["algo_args"]["train"]["n_rollout_threads"] == NUM_ENVS
    assert not (REPO / "results").exists() and not (happo["run_dir"].parent / "results").exists()


def test_happo_phases_in_order(happo):
    from mapush.common.phases import read_phases

    seen = read_phases(str(happo["run_dir"] / "phases.log"))
    order = [seen.index(p) for p in ("start", "first_step", "training", "checkpoint",
                                     "shutdown")]
    assert order == sorted(order), seen


def test_happo_checkpoints_every_interval_and_load_back(happo, upstream):
    metas = checkpoint_meta(happo["run_dir"])
    assert sorted(metas) == [320, 640]
    path, meta = metas[640]
    assert meta["algo"] == "happo" and meta["update"] == 4
    for name in ("actor_agent0.pt", "actor_agent1.pt", "critic_agent.pt",
                 "value_normalizer.pt"):
        assert (path / name).is_file()
    loaded = load_back(upstream, path)
    assert loaded == {"shape": [5, 2, 3], "same": True}


def test_happo_actions_reach_the_env_untransposed(happo):
    recorded = np.load(str(happo["actions"]))
    assert recorded.shape == (NUM_ENVS, 2, 3)


def test_resume_continues_steps_axis_and_lr_schedule(happo):
    resumed = happo["resumed"]
    assert resumed is not None and resumed.returncode == 0, \
        (resumed.stderr[-4000:] if resumed else "first run failed")
    metas = checkpoint_meta(happo["resumed_dir"])
    assert sorted(metas) == [320, 480, 640]  # the copy's 320, then the resumed ones
    lr0 = 0.0005
    # 4 updates in all: update 3 of the same schedule (HARL: lr0 * (1 - (u - 1) / total)),
    # not update 1 of a new one; at the end the same LR as the uninterrupted run
    assert metas[480][1]["update"] == 3
    assert metas[480][1]["lr"]["actor0"] == pytest.approx(lr0 * (1 - 2 / 4.0))
    assert metas[640][1]["lr"] == checkpoint_meta(happo["run_dir"])[640][1]["lr"]
    found = events(happo["resumed_dir"])
    assert [s for s, _ in found["metrics/success_rate"]] == [480, 640]
    # #38 item 9: the episode count goes on from the checkpoint's, in meta.json and TensorBoard
    before = metas[320][1]["episodes"]
    assert 0 < before < metas[480][1]["episodes"] < metas[640][1]["episodes"]
    assert [v for _, v in found["metrics/episodes"]] == [metas[480][1]["episodes"],
                                                        metas[640][1]["episodes"]]


@pytest.mark.faults
def test_a_damaged_harl_checkpoint_is_refused_by_name_and_passed_over_in_its_run(
        happo, upstream, tmp_path):
    """#36: HARL checkpoints record each file's size and sha256 in meta.json, as PPO's do. A
    damaged one named directly is one line (eval and --resume, nothing changed); a run whose
    newest checkpoint is damaged resumes from the one before it, saying so."""
    assert happo["proc"].returncode == 0, happo["proc"].stderr[-3000:]
    run = tmp_path / "run"
    shutil.copytree(str(happo["run_dir"]), str(run))
    newest = run / "checkpoints" / ("step-%012d" % 640)
    files = json.loads((newest / "meta.json").read_text())["files"]
    assert {"actor_agent0.pt", "actor_agent1.pt", "critic_agent.pt", "optimizers.pt",
            "harl_config.json"} <= set(files)
    actor = newest / "actor_agent0.pt"
    actor.write_bytes(actor.read_bytes()[:100])
    record = (run / "config.json").read_text()
    for argv in (["eval", "--checkpoint", newest, "--num-envs", 2, "--sim-device", "cpu",
                  "--rl-device", "cpu"],
                 train_args("happo", run, 960, happo["config"], "--resume", newest)):
        error = one_error(run_mapush(argv, env=run_env(upstream), cwd=tmp_path))
        assert "%s: its actor_agent0.pt does not match" % newest in error, error
        assert (run / "config.json").read_text() == record
    proc = run_mapush(train_args("happo", run, 960, happo["config"], "--resume", run),
                      env=run_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "%s is damaged (its actor_agent0.pt does not match meta.json): using the " \
        "checkpoint before it" % newest in proc.stderr
    resumed = json.loads((run / "config.json").read_text())["resumes"][-1]
    assert resumed["from"] == str(run / "checkpoints" / ("step-%012d" % 320))


def test_mappo_trains_and_samples_memory(upstream, tmp_path):
    """MAPPO (shared actor) with per-agent (FP) critic states; 10 updates so the memory
    watchdog samples once."""
    config = small_config(tmp_path, "mappo.yaml", 10, env={"state_type": "FP"})
    run_dir = tmp_path / "run"
    steps = NUM_ENVS * 10 * 10
    proc = run_mapush(train_args("mappo", run_dir, steps, config), env=run_env(upstream),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = events(run_dir)
    assert found["metrics/success_rate"][-1] == (steps, pytest.approx(
        expected_metrics(steps)[0]))
    assert "reward/distance_to_target_reward" in found
    assert [s for s, _ in found["memory/host_rss_mb"]] == [steps]
    assert sorted(checkpoint_meta(run_dir)) == [steps]
    harl_config = json.loads((run_dir / "harl_config.json").read_text())
    assert harl_config["env_args"]["state_type"] == "FP"
    assert harl_config["algo_args"]["algo"]["share_param"] is True


def test_hatrpo_stops_on_sigint_with_a_final_checkpoint(upstream, tmp_path):
    config = small_config(tmp_path, "hatrpo.yaml", 10)
    run_dir = tmp_path / "run"
    env = run_env(upstream, MQE_DOUBLE_STEP_SLEEP=0.01)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mapush"] + [str(a) for a in train_args(
            "hatrpo", run_dir, 10 ** 7, config)],
        env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        progress = run_dir / "progress.txt"
        while time.time() < deadline and proc.poll() is None:
            if progress.is_file() and len(progress.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        proc.send_signal(signal.SIGINT)
        sent = time.time()
        out, err = proc.communicate(timeout=60)
        took = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-4000:]
    assert took < 60, "took %.1f s to stop: hung?" % took  # a hang guard, not a figure (#80)
    metas = checkpoint_meta(run_dir)
    assert len(metas) == 1
    step = list(metas)[0]
    assert "mapush: training stopped at step %d; checkpoints in" % step in err, err
    header, *rows = progress.read_text().splitlines()  # #38: progress.txt has a header
    assert header == "steps,success_rate,steps_per_s"
    logged = [int(line.split(",")[0]) for line in rows]
    assert step >= logged[-1] >= 2 * NUM_ENVS * 10
    assert step % (NUM_ENVS * 10) == 0  # whole updates only
    found = events(run_dir)
    assert "train/kl" in found and "metrics/success_rate" in found
    for name in ("actor_agent0.pt", "actor_agent1.pt", "critic_agent.pt", "optimizers.pt"):
        assert (metas[step][0] / name).is_file()


@pytest.mark.parametrize("override,steps,needle", [
    ({"train": {"episode_lenght": 20}}, 1000, "'train.episode_lenght'"),
    ({"train": {"episode_length": 200}}, 1000, "--steps 1000 is less than one rollout"),
    ({"env": {"team_reward": "max"}}, 1000, "env.team_reward 'max': input should be 'mean' or"),
    ({"env": {"state_type": "XP"}}, 1000, "env.state_type 'XP': input should be 'EP' or 'FP'"),
], ids=["unknown-key", "steps-below-one-rollout", "team-reward", "state-type"])
def test_bad_harl_config_is_one_error_line(upstream, tmp_path, override, steps, needle):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(override))
    run_dir = tmp_path / "run"
    proc = run_mapush(train_args("happo", run_dir, steps, config), env=run_env(upstream),
                      cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr[-3000:]
    assert not (run_dir / "checkpoints").exists()


def test_the_parent_checks_a_harl_config_without_the_training_stack(tmp_path):
    """Before it starts the child, mapush train checks the config's keys, values and steps:
    for HARL's algorithms without importing torch, gym or HARL (the child's to import)."""
    probe = ("import sys\n"
             "from mapush.run.train import check_spec\n"
             "from mapush.spec import RunSpec\n"
             "check_spec(RunSpec(algo='mappo', task='go1push_mid', object='cuboid', num_envs=2, "
             "steps=1000, seed=1, run_dir=sys.argv[1]), None)\n"
             "print('loaded:', *[m for m in ('torch', 'gym', 'numpy', 'harl') "
             "if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "run")],
                          env=double_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "loaded:", proc.stdout


def test_missing_harl_is_named_with_the_fix(tmp_path):
    config = small_config(tmp_path, "c.yaml", 20)
    # the preflight would stop this first (no patch records): skip it to reach the trainer.
    # A HARL installed beside (make test-stack's, as the image's) is hidden by a package
    # that cannot be imported, as when none is installed.
    hide = tmp_path / "hide" / "harl"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('No module named harl')\n")
    env = double_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "hide"), env["PYTHONPATH"]])
    proc = run_mapush(train_args("happo", tmp_path / "run", 320, config, "--no-preflight"),
                      env=env, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "HARL is not importable" in last and "patches/apply harl" in last


def _no_wandb_key(env, tmp_path, **extra):
    env = {k: v for k, v in env.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), **extra)  # no ~/.netrc of `wandb login` either
    return env


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_wandb_without_an_api_key_is_one_line_before_the_run_folder(upstream, tmp_path, algo):
    """#38: PPO's --wandb without a key failed after the env was built (a 25-line traceback
    and a half-made run folder); HAPPO's was accepted and dropped."""
    run_dir = tmp_path / "run"
    env = _no_wandb_key(double_env(upstream), tmp_path)
    error = one_error(run_mapush(["train", "--algo", algo, "--num-envs", 8, "--steps", 100000,
                                  "--run-dir", run_dir, "--sim-device", "cpu", "--rl-device",
                                  "cpu", "--wandb"], env=env, cwd=tmp_path))
    assert error.startswith("error: --wandb: no W&B API key here: set WANDB_API_KEY"), error
    assert not run_dir.exists()


def test_happo_logs_to_wandb_offline_with_the_run(upstream, tmp_path):
    """#38: --wandb is wired for HARL: TensorBoard's scalars are mirrored into a W&B run
    (offline here: kept in the run folder), and config.json's use_wandb is what ran."""
    run_dir = tmp_path / "run"
    env = _no_wandb_key(run_env(upstream), tmp_path, WANDB_MODE="offline", WANDB_SILENT="true")
    proc = run_mapush(train_args("happo", run_dir, 320, small_config(tmp_path, "happo.yaml", 20),
                                 "--wandb"), env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mapush: --wandb with WANDB_MODE=offline: the W&B run stays in the run folder's " \
        "wandb/" in proc.stderr
    logs = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(logs) == 1, sorted(p.name for p in (run_dir / "wandb").rglob("*"))
    assert b"metrics/success_rate" in logs[0].read_bytes()
    assert json.loads((run_dir / "config.json").read_text())["spec"]["use_wandb"] is True
