"""A run starts from any working directory, and the object's config decides the agents.

MQE loads its locomotion policy and actuator network by paths relative to the working
directory (go1_config.py:122-123, go1.py:366,396-397); the double loads its stand-in files
by the same paths, so a simulation started from the wrong place fails here as it would in
the image (cwd /work, MAPush in /opt/mapush). The cylinder has 3 robots (obs 11), cuboid and
Tblock 2 (obs 8): PPO and HAPPO train on the cylinder from a directory that is neither the
repository nor MAPUSH_ROOT, runs land in ./runs there, and a cylinder checkpoint evaluates.
"""
import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import DOUBLE_ROOT, double_env, run_mapush, tree_hash

STEPS = 400
NUM_ENVS = 8

UNRESOLVED = r"""
import sys
from mapush import sim
sim.import_isaacgym()
mqe_utils = sim._import_mqe_utils()
from mapush.spec import RunSpec
spec = RunSpec(algo="ppo", task="go1push_mid", object="cylinder", num_envs=2, steps=1, seed=1,
               run_dir=".", sim_device="cpu", rl_device="cpu")
cfg = sim.load_object_config("cylinder")   # relative model paths left as upstream has them
args = sim.build_args(spec)
try:
    env, _ = mqe_utils.make_mqe_env("go1push_mid", args,
                                    custom_cfg=sim.object_custom_cfg(spec, cfg, args))
    print("created", env.num_agents)
except ValueError as exc:
    print("failed", exc)
"""


@pytest.mark.parametrize("where", ["elsewhere", "mapush_root"])
def test_the_double_loads_its_models_relative_to_the_working_directory(tmp_path, where):
    """Without the product's resolution, the double works from MAPUSH_ROOT only, as MQE."""
    cwd = tmp_path if where == "elsewhere" else DOUBLE_ROOT
    out = subprocess.run([sys.executable, "-c", UNRESOLVED], env=double_env(), cwd=str(cwd),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    if where == "elsewhere":
        assert out.stdout.startswith("failed The provided filename ./resources/actuator_nets/"
                                     "unitree_go1.pt does not exist"), out.stdout
    else:
        assert out.stdout.strip() == "created 3"


def test_make_env_resolves_the_model_paths_under_mapush_root(tmp_path):
    script = UNRESOLVED.replace(
        'cfg = sim.load_object_config("cylinder")',
        'cfg = sim.load_object_config("cylinder")\n'
        'print(sorted(sim.resolve_relative_paths(cfg, sim.mapush_root()).items()))')
    out = subprocess.run([sys.executable, "-c", script], env=double_env(), cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = out.stdout.strip().splitlines()
    assert first == str(sorted({
        "control.actuator_network_path": str(DOUBLE_ROOT / "resources" / "actuator_nets"),
        "control.locomotion_policy_dir": str(DOUBLE_ROOT / "mqe" / "utils" /
                                             "locomotion_checkpoints" / "walk_these_ways"),
    }.items()))
    assert second == "created 3"


@pytest.fixture(scope="module")
def cylinder_runs(upstream, tmp_path_factory):
    """PPO and HAPPO on the cylinder, each started in a fresh folder with no --run-dir."""
    tmp = tmp_path_factory.mktemp("cylinder")
    before = tree_hash(DOUBLE_ROOT)
    ppo_cfg = tmp / "ppo.yaml"
    ppo_cfg.write_text("episode_length: 25\nppo_epoch: 1\n")
    harl_cfg = tmp / "happo.yaml"
    harl_cfg.write_text(yaml.safe_dump({"train": {"episode_length": 25, "log_interval": 1},
                                        "device": {"torch_threads": 1}}))
    runs = {}
    for algo, config in (("ppo", ppo_cfg), ("happo", harl_cfg)):
        cwd = tmp / ("user-" + algo)
        cwd.mkdir()
        log = tmp / (algo + ".jsonl")
        proc = run_mapush(["train", "--algo", algo, "--object", "cylinder", "--sim-device",
                           "cpu", "--rl-device", "cpu", "--num-envs", NUM_ENVS, "--steps",
                           STEPS, "--config", config],
                          double_env(upstream, MQE_DOUBLE_LOG=log), cwd=cwd)
        assert proc.returncode == 0, proc.stderr[-4000:]
        (run,) = sorted((cwd / "runs" / "go1push_mid" / "cylinder" / algo).iterdir())
        runs[algo] = {"cwd": cwd, "run": run, "created": [
            json.loads(line) for line in log.read_text().splitlines()]}
    runs["untouched"] = tree_hash(DOUBLE_ROOT) == before
    return runs


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_cylinder_trains_with_three_agents_from_any_directory(cylinder_runs, algo):
    found = cylinder_runs[algo]
    (created,) = found["created"]
    assert created["num_agents"] == 3 and created["object"] == "cylinder"
    assert created["cwd"] == str(found["cwd"])  # the simulation ran where the user started
    assert (found["run"] / "config.json").is_file()
    assert any((found["run"] / "checkpoints").iterdir())
    assert cylinder_runs["untouched"]  # nothing written under MAPUSH_ROOT


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_a_cylinder_checkpoint_evaluates(upstream, cylinder_runs, algo, tmp_path):
    run = cylinder_runs[algo]["run"]
    log = tmp_path / "eval.jsonl"
    proc = run_mapush(["eval", "--checkpoint", run, "--num-envs", NUM_ENVS, "--sim-device",
                       "cpu", "--rl-device", "cpu"],
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["object"] == "cylinder" and result["algo"] == algo
    assert 0.0 <= result["success_rate"] <= 1.0
    (created,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert created["num_agents"] == 3
