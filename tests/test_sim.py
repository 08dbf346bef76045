"""The isaacgym boundary: object configs, the argument namespace, phases, failing fast."""
import json
import subprocess
import sys

import pytest

from tests.conftest import DOUBLE_ROOT, REPO, double_env, tree_hash

MAKE_ENV = """
import json, sys
from mapush import sim
from mapush.spec import RunSpec
spec = RunSpec(algo="happo", task="go1push_mid", object=sys.argv[1], num_envs=3, steps=10,
               seed=1, run_dir=".", sim_device="cpu", rl_device="cpu")
env, cfg = sim.make_env(spec, contact_pairs=1024)
import torch
print(json.dumps({"object": cfg.env.env_name, "num_envs": env.num_envs, "device": str(env.device),
                  "obs": list(env.reset().shape), "torch_after_isaacgym": True}))
"""


def test_make_env_loads_the_object_config_and_marks_phases(tmp_path):
    phases = tmp_path / "phases.log"
    log = tmp_path / "double.jsonl"
    before = tree_hash(DOUBLE_ROOT)
    out = subprocess.run([sys.executable, "-c", MAKE_ENV, "Tblock"], capture_output=True, text=True,
                         env=double_env(MAPUSH_PHASE_FILE=phases, MQE_DOUBLE_LOG=log), check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"object": "Tblock", "num_envs": 3, "device": "cpu", "obs": [3, 2, 8],
                      "torch_after_isaacgym": True}
    seen = [line.split()[1] for line in phases.read_text().splitlines()]
    assert seen == ["create_sim", "terrain", "envs", "prepare_sim"]
    assert json.loads(log.read_text())["contact_pairs"] == 1024
    assert tree_hash(DOUBLE_ROOT) == before


def test_unknown_object_lists_the_objects_found():
    out = subprocess.run([sys.executable, "-c", MAKE_ENV, "sphere"], capture_output=True, text=True,
                         env=double_env())
    assert out.returncode != 0
    assert "--object sphere" in out.stderr and "Tblock, cuboid, cylinder" in out.stderr


def test_without_isaacgym_fails_fast_with_how_to_get_it(tmp_path):
    env = double_env()
    env["PYTHONPATH"] = str(REPO)  # no doubles: nothing provides isaacgym
    out = subprocess.run([sys.executable, "-c", MAKE_ENV, "cuboid"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode != 0
    assert "Isaac Gym Preview 4 is not importable" in out.stderr
    assert "developer.nvidia.com/isaac-gym" in out.stderr and "vendor/" in out.stderr


def test_torch_before_isaacgym_is_refused():
    script = "import torch\nfrom mapush import sim\nsim.import_isaacgym()\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=double_env())
    assert out.returncode != 0 and "torch was imported before isaacgym" in out.stderr


@pytest.mark.parametrize("device,pipeline", [("cpu", False), ("cuda:1", True)])
def test_build_args_follows_the_devices(device, pipeline):
    script = (
        "import json\nfrom mapush import sim\nfrom mapush.spec import RunSpec\n"
        "sim.import_isaacgym()\n"
        "s = RunSpec(algo='ppo', task='go1push_mid', object='cuboid', num_envs=7, steps=1, seed=3,"
        " run_dir='.', sim_device=%r, rl_device='cpu')\n"
        "a = sim.build_args(s)\n"
        "print(json.dumps({k: getattr(a, k) for k in ('num_envs', 'seed', 'sim_device',"
        " 'sim_device_id', 'use_gpu_pipeline', 'rl_device', 'headless', 'graphics_device_id')}))\n"
    ) % device
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=double_env(), check=True)
    args = json.loads(out.stdout.strip().splitlines()[-1])
    assert args["num_envs"] == 7 and args["seed"] == 3 and args["headless"] is True
    assert args["sim_device"] == device and args["use_gpu_pipeline"] is pipeline
    assert args["sim_device_id"] == (1 if device == "cuda:1" else 0)
    assert args["graphics_device_id"] == args["sim_device_id"]
