"""A `--config` file is read as data only (#77 item 4): PPO's and HARL's, with and without
``--print-config``, one that is not YAML, holds a python tag, or is no regular file is one
``error:`` line naming it, exit 2, with nothing created and nothing run."""
import os

import pytest

from tests.conftest import double_env, run_mapush

BAD = {
    "not-yaml": "lr: [1, 2\n",
    "python-tag": "lr: !!python/object/apply:os.system ['touch PWNED']\n",
}


@pytest.mark.security
@pytest.mark.parametrize("algo", ["ppo", "happo"])
@pytest.mark.parametrize("kind", sorted(BAD) + ["fifo"])
@pytest.mark.parametrize("print_config", [False, True])
def test_a_bad_config_file_is_one_line(upstream, tmp_path, algo, kind, print_config):
    config = tmp_path / "my.yaml"
    if kind == "fifo":
        os.mkfifo(str(config))
    else:
        config.write_text(BAD[kind])
    run = tmp_path / "run"
    argv = ["train", "--algo", algo, "--object", "cuboid", "--num-envs", 2, "--steps", 100,
            "--sim-device", "cpu", "--rl-device", "cpu", "--config", config, "--run-dir", run]
    proc = run_mapush(argv + (["--print-config"] if print_config else []),
                      env=double_env(upstream), cwd=tmp_path, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("error: ") and str(config) in lines[-1], lines[-3:]
    assert not run.exists() and not (tmp_path / "PWNED").exists()


def test_print_config_needs_no_isaac_gym(upstream, tmp_path):
    """#81: --print-config on a host without Isaac Gym prints the spec and the trainer's config
    (with --set applied), the task config as not read and why; nothing is created."""
    import json

    env = double_env(upstream)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep)
                                        if not p.endswith("standin"))  # no isaacgym at all
    proc = run_mapush(["train", "--object", "cuboid", "--num-envs", 2, "--set", "lr=1e-4",
                       "--sim-device", "cpu", "--rl-device", "cpu", "--print-config"],
                      env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = json.loads(proc.stdout)
    assert shown["spec"]["num_envs"] == 2 and shown["trainer_config"]["lr"] == 1e-4
    assert shown["task_config"] is None and "Isaac Gym" in shown["task_config_not_read"]
    assert list(tmp_path.iterdir()) == []
