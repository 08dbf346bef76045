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
