"""``mapush train`` over MAPush's real MQE (its envs, wrappers and our patches), with Isaac
Gym stood in (tests/standin), on the CPU: PPO and HAPPO/MAPPO/HATRPO on the cuboid, the
T-block and the 3-robot cylinder, stop and resume, and the high level with the published
command net. Rollouts are shortened with ``--config`` so a run is seconds; what the
stand-in cannot give (PhysX's contacts, so any success) is not asserted."""
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import one_error, real_env, run_mapush

pytestmark = pytest.mark.real_mqe

NUM_ENVS = 4
AGENTS = {"cuboid": 2, "Tblock": 2, "cylinder": 3}  # task/<object>/config.py: num_agents


def ppo_config(tmp, episode_length=20):
    path = tmp / "ppo.yaml"
    path.write_text("episode_length: %d\nppo_epoch: 1\n" % episode_length)
    return path


def harl_config(tmp, episode_length=10):
    path = tmp / "harl.yaml"
    path.write_text(yaml.safe_dump({"train": {"episode_length": episode_length,
                                              "log_interval": 1},
                                    "device": {"torch_threads": 1}}))
    return path


def train(real, tmp, algo, obj, steps, config, *extra, **env):
    run = tmp / ("%s-%s" % (algo, obj))
    args = ["train", "--algo", algo, "--object", obj, "--sim-device", "cpu", "--rl-device",
            "cpu", "--num-envs", NUM_ENVS, "--steps", steps, "--seed", 5, "--run-dir", run,
            "--config", config] + list(extra)
    return run, run_mapush(args, real_env(real, **env), cwd=tmp, timeout=300)


def checkpoint_metas(run):
    return sorted((json.loads(p.read_text()) for p in (run / "checkpoints").glob("*/meta.json")),
                  key=lambda m: m["step"])


def recorded(run):
    return json.loads((run / "config.json").read_text())


@pytest.mark.parametrize("obj", ["cuboid", "Tblock", "cylinder"])
def test_ppo_trains_each_object_over_real_mqe(real_mqe, tmp_path, obj):
    steps = NUM_ENVS * 20 * 2
    run, proc = train(real_mqe, tmp_path, "ppo", obj, steps, ppo_config(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    metas = checkpoint_metas(run)
    assert metas and metas[-1]["step"] == steps
    spec = recorded(run)["spec"]
    assert (spec["object"], spec["algo"]) == (obj, "ppo")
    # MQE's own wrapper built the env: each agent observes 2 + 3 * agents numbers
    # (go1_push_mid_wrapper.py), and the policy took that many inputs
    probe = ("import sys\nfrom mapush.checkpoints.policy import input_dim\n"
             "print(input_dim(sys.argv[1]))\n")
    newest = sorted((run / "checkpoints").iterdir())[-1]
    out = subprocess.run([sys.executable, "-c", probe, str(newest)], capture_output=True,
                         text=True, env=real_env(real_mqe), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == 2 + 3 * AGENTS[obj]
    # the run's record names MAPush's patches as applied to the tree it ran
    patched = {p["component"]: p for p in recorded(run)["provenance"]["patches"]}
    assert Path(patched["mapush"]["dir"]) == real_mqe["tree"]
    # patches/mapush/06's switch at its default (true): the patched step, said by nothing
    assert UPSTREAM_STEP not in proc.stderr
    assert json.loads((run / "openrl_config.json").read_text())["mqe_fast_step"] is True
    assert_step_recorded(run, proc, "eager: no CUDA graphs on the CPU pipeline")
    # the fast-step check runs before a GPU run only; the record says why not here
    assert recorded(run)["step_check"] == {"ran": False, "fast_step": True,
                                           "line": "not run: no CUDA graphs on the CPU pipeline"}


def assert_step_recorded(run, proc, state):
    """step.json (mapush/envs/step_record.py): patches 07-09's graphs as the run had them,
    its line said once on stderr; no CUDA graph runs on the CPU pipeline"""
    saved = json.loads((run / "step.json").read_text())
    assert saved["graphs"] == dict.fromkeys(["07", "08", "09"], state), saved
    assert proc.stderr.count("mapush: " + saved["line"]) == 1
    assert saved["line"] == "MQE's step: " + "; ".join("%s %s" % (g, state)
                                                      for g in ("07", "08", "09"))


@pytest.mark.parametrize("algo", ["happo", "mappo", "hatrpo"])
@pytest.mark.parametrize("obj", ["cuboid", "Tblock", "cylinder"])
def test_harl_trains_each_object_over_real_mqe(real_mqe, tmp_path, obj, algo):
    steps = NUM_ENVS * 10 * 2
    run, proc = train(real_mqe, tmp_path, algo, obj, steps, harl_config(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    metas = checkpoint_metas(run)
    assert metas and metas[-1]["step"] == steps and metas[-1]["algo"] == algo
    newest = sorted((run / "checkpoints").iterdir())[-1]
    actors = sorted(p.name for p in newest.glob("actor_agent*.pt"))
    # HARL saves one actor per robot that MQE's wrapper reports (MAPPO's are one shared
    # network, saved once per agent)
    assert len(actors) == AGENTS[obj], sorted(p.name for p in newest.iterdir())
    assert UPSTREAM_STEP not in proc.stderr  # patches/mapush/06's switch at its default
    assert json.loads((run / "harl_config.json").read_text())["env_args"]["mqe_fast_step"] \
        is True
    assert_step_recorded(run, proc, "eager: no CUDA graphs on the CPU pipeline")


def test_ppo_films_env_0_while_training_over_real_mqe(real_mqe, tmp_path):
    """#38 item 6 through MQE's own camera and recording calls (``legged_robot.py:1171-1212``):
    ``--record-video`` films env 0's next whole episode, here of 1 s (the cuboid's config
    with ``episode_length_s = 1``), the film beginning after env 0's first reset."""
    text = (real_mqe["tree"] / "task" / "cuboid" / "config.py").read_text()
    short = tmp_path / "cuboid_1s.py"
    short.write_text(re.sub(r"episode_length_s = [0-9.]+", "episode_length_s = 1", text, 1))
    assert short.read_text() != text
    icd = tmp_path / "nvidia_icd.json"  # the rendering check's file; the stand-in renders
    icd.write_text('{"ICD": {"library_path": "libGLX_nvidia.so.0"}}')
    run = tmp_path / "run"
    proc = run_mapush(["train", "--object-config", short, "--num-envs", 2, "--steps", 240,
                       "--checkpoint-interval", 120, "--record-video", "--run-dir", run,
                       "--config", ppo_config(tmp_path), "--sim-device", "cpu", "--rl-device",
                       "cpu"], real_env(real_mqe, VK_ICD_FILENAMES=icd, MAPUSH_WHERE="host"),
                      cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    videos = sorted((run / "videos").iterdir())
    assert len(videos) == 1 and re.match(r"train-\d+-ep1-fail\.mp4$", videos[0].name), videos
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(videos[0]))
    meta = next(reader)
    frames = sum(1 for _ in reader)
    # MQE's recording camera; a 1 s episode at MQE's dt (decimation x sim.dt) is 50 steps
    assert meta["size"][0] > 0 and 40 <= frames <= 52, (meta, frames)
    assert "recording" not in proc.stdout  # MQE's prints at each start and pause


def test_ppo_stops_and_resumes_over_real_mqe(real_mqe, tmp_path):
    config = ppo_config(tmp_path, episode_length=10)
    per_update = NUM_ENVS * 10
    run = tmp_path / "run"
    args = ["train", "--algo", "ppo", "--object", "cuboid", "--sim-device", "cpu",
            "--rl-device", "cpu", "--num-envs", NUM_ENVS, "--steps", per_update * 400,
            "--checkpoint-interval", per_update, "--seed", 5, "--run-dir", run,
            "--config", config]
    proc = subprocess.Popen([sys.executable, "-m", "mapush"] + [str(a) for a in args],
                            env=real_env(real_mqe), cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(list((run / "checkpoints").glob("*/meta.json"))
                                         if (run / "checkpoints").is_dir() else []) < 2:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 or "stopped" in err, err[-3000:]
    stopped_at = checkpoint_metas(run)[-1]["step"]
    assert 0 < stopped_at < per_update * 400
    target = stopped_at + 2 * per_update
    resumed = run_mapush(["train", "--resume", run, "--steps", target],
                         real_env(real_mqe), cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    steps = [m["step"] for m in checkpoint_metas(run)]
    assert steps[-1] == target and stopped_at in steps
    record = recorded(run)
    assert record["spec"]["steps"] == target and len(record.get("resumes", [])) == 1


def test_upper_trains_with_the_published_command_net_over_real_mqe(real_mqe, tmp_path):
    command_net = real_mqe["tree"] / "resources" / "command_nets" / "1.2x1.2.pt"
    run = tmp_path / "upper"
    steps = NUM_ENVS * 5 * 2
    proc = run_mapush(["train", "--task", "go1push_upper", "--algo", "ppo", "--sim-device",
                       "cpu", "--rl-device", "cpu", "--num-envs", NUM_ENVS, "--steps", steps,
                       "--seed", 2, "--run-dir", run, "--command-net", command_net,
                       "--config", ppo_config(tmp_path, episode_length=5)],
                      real_env(real_mqe), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    spec = recorded(run)["spec"]
    assert spec["task"] == "go1push_upper"
    assert Path(spec["command_net"]) == command_net.resolve()
    assert checkpoint_metas(run)[-1]["step"] == steps
    # training never plans with RRT (patches/mapush/04: only evaluation asks)
    assert "RRT: planned" not in proc.stderr
    # the record names the high level's wrapper graph (patches/mapush/12), not the mid one's
    assert json.loads((run / "step.json").read_text())["graphs"] == dict.fromkeys(
        ["12", "08", "09"], "eager: no CUDA graphs on the CPU pipeline")


def test_command_net_of_another_object_is_refused_for_the_upper_task(real_mqe, tmp_path):
    """The upper task pushes MQE's 1.2 x 1.2 box: a T-block policy is refused, in one line."""
    run, proc = train(real_mqe, tmp_path, "ppo", "Tblock", NUM_ENVS * 20,
                      ppo_config(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    module = next((run / "checkpoints").glob("*/module.pt"))
    upper = tmp_path / "upper"
    refused = run_mapush(["train", "--task", "go1push_upper", "--algo", "ppo",
                          "--sim-device", "cpu", "--rl-device", "cpu", "--num-envs", 4,
                          "--steps", 100, "--run-dir", upper, "--command-net", module],
                         real_env(real_mqe), cwd=tmp_path)
    line = one_error(refused)
    assert "Tblock" in line and "cuboid" in line, line
    assert not upper.exists()


UPSTREAM_STEP = "mqe_fast_step is false: MQE's mid step as upstream ships it"


def fast_step_config(folder, algo, value):
    folder.mkdir(parents=True, exist_ok=True)
    if algo == "ppo":
        config = ppo_config(folder)
        config.write_text(config.read_text() + "mqe_fast_step: %s\n" % value)
    else:
        config = harl_config(folder)
        config.write_text(config.read_text() + "env:\n  mqe_fast_step: %s\n" % value)
    return config


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_the_config_key_mqe_fast_step_runs_upstreams_step(real_mqe, tmp_path, algo):
    """patches/mapush/06's one switch is a --config key of either trainer: false reaches
    the mid wrapper (the line) and the run's resolved config records it, and a value that
    is not a boolean is refused in one line before the run folder exists. (True, the
    default, is checked by the default runs above: no line, recorded true.)"""
    steps = NUM_ENVS * (20 if algo == "ppo" else 10)
    run, proc = train(real_mqe, tmp_path / "false", algo, "cuboid", steps,
                      fast_step_config(tmp_path / "false", algo, "false"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert UPSTREAM_STEP in proc.stderr
    resolved = json.loads((run / ("openrl_config.json" if algo == "ppo" else
                                  "harl_config.json")).read_text())
    assert (resolved["mqe_fast_step"] if algo == "ppo" else
            resolved["env_args"]["mqe_fast_step"]) is False
    assert_step_recorded(run, proc, "eager: mqe_fast_step is false")
    run, proc = train(real_mqe, tmp_path / "bad", algo, "cuboid", steps,
                      fast_step_config(tmp_path / "bad", algo, '"no"'))
    assert "mqe_fast_step" in one_error(proc)
    assert not run.exists()
