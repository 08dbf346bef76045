"""#50 item 5: the children end with os._exit (mapush/common/leave.py), which skips Python's
finalizers; wandb, which OpenRL imports, makes two tempfile.TemporaryDirectory folders at
import (tmp*wandb-media, tmp*wandb-artifacts). A train and an eval leave none in $TMPDIR."""
import pytest

from tests.conftest import double_env, run_mapush
from tests.test_stop_resume import CONFIGS

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


@pytest.mark.faults
def test_train_and_eval_leave_no_temporary_folders(upstream, tmp_path):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = double_env(upstream, TMPDIR=tmpdir)
    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS["ppo"])
    run = tmp_path / "run"
    proc = run_mapush(["train", "--num-envs", 8, "--steps", 160, "--config", config,
                       "--run-dir", run] + CPU, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(["eval", "--checkpoint", run, "--num-envs", 2] + CPU, env=env,
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # (torch 2's own compile cache, torchinductor_<user>, is a cache kept on purpose)
    assert [p.name for p in tmpdir.iterdir() if "wandb" in p.name or p.name.startswith(
        ("mapush-", "tmp"))] == []
