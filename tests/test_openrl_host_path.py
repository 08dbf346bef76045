"""patches/openrl/02 (PPO's host path without waste) against OpenRL without it, on the real
OpenRL 0.2.0 files: the same numbers, bit for bit.

- The sampler: one ``torch.randperm`` cut into consecutive slices draws exactly what
  ``BatchSampler(SubsetRandomSampler(range(n)), m, drop_last=True)`` draws, on this torch
  (the stack's 1.13 runs it too): the same minibatches in the same order, and the same
  random stream after.
- A PPO run: ``mapush train`` over the deterministic MQE double, 4 updates of 2 epochs of 2
  minibatches each (so the minibatches' order counts), once with OpenRL patched 01 only and
  once with 01 and 02. The final weights and every logged scalar but the clock's must be
  equal, not close. Mutations tried by hand, each failing this test: the permutation drawn
  as ``torch.randperm(batch_size).flip(0)``; the slices overlapping by one index; the
  rewards of ``act``'s values reshaped as ``(num_agents, n, 1)`` then transposed.
"""
import json
import subprocess
import sys

import pytest

from tests.conftest import double_env, run_mapush

# (batch, minibatch): divisible, with a remainder dropped, a single minibatch
SIZES = [(200, 100), (205, 50), (12, 5), (7, 7)]
CLOCK = ("perf/", "memory/")  # the wall clock's and the allocator's: not the algorithm's


@pytest.mark.parametrize("batch,mini", SIZES)
def test_the_permutation_cut_in_slices_is_what_openrls_samplers_draw(batch, mini):
    import torch
    from torch.utils.data.sampler import BatchSampler, SubsetRandomSampler

    torch.manual_seed(3)
    theirs = [list(b) for b in BatchSampler(SubsetRandomSampler(range(batch)), mini, True)]
    after_theirs = torch.rand(4)
    torch.manual_seed(3)
    permutation = torch.randperm(batch).numpy()
    ours = [permutation[start:start + mini].tolist()
            for start in range(0, batch - mini + 1, mini)]
    assert ours == theirs and len(ours) == batch // mini
    assert torch.equal(torch.rand(4), after_theirs)  # the stream goes on alike


@pytest.fixture(scope="module")
def without_02(tmp_path_factory):
    """OpenRL with patch 01 only: its host path as upstream has it (02-06 skipped)."""
    from tests.upstream import site_without

    return site_without(tmp_path_factory.mktemp("without-02"),
                        ("02-", "03-", "04-", "05-", "06-"),
                        component="openrl")  # (03 needs 02; 04, 05 and 06 need 03)


WEIGHTS = r'''
import json, sys
from mapush.sim import import_isaacgym
import_isaacgym()  # (the pickled config holds one of Isaac Gym's enums)
from mapush.checkpoints.policy import load_module
out = {}
for path in sys.argv[1:]:
    module = load_module(path, "cpu", "--checkpoint")
    out[path] = {"%s.%s" % (name, key): value.tolist() for name, model in
                 sorted(module.models.items()) for key, value in model.state_dict().items()}
print(json.dumps(out))
'''


def train(env, tmp, name, extra=""):
    config = tmp / ("%s.yaml" % name)
    config.write_text("episode_length: 25\nppo_epoch: 2\nnum_mini_batch: 2\nlog_interval: 1\n"
                      + extra)
    run = tmp / name
    proc = run_mapush(["train", "--algo", "ppo", "--object", "cuboid", "--num-envs", 4,
                       "--steps", 400, "--checkpoint-interval", 400, "--seed", 7, "--config",
                       config, "--run-dir", run, "--sim-device", "cpu", "--rl-device", "cpu"],
                      env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def swap_openrl(env, patched, site):
    """``env`` with ``site``'s OpenRL in place of the patched site ``patched``."""
    env["PYTHONPATH"] = env["PYTHONPATH"].replace(str(patched), str(site))
    assert str(site) in env["PYTHONPATH"]
    return env


def with_openrl(upstream, site):
    """The MQE double's environment with ``site``'s OpenRL in place of the patched one."""
    return swap_openrl(double_env(upstream, MQE_DOUBLE_SUCCESS_STEP="7"), upstream["site"],
                       site)


def assert_same_training(runs, env):
    """Runs ``pristine`` and ``patched``: every logged scalar but the clock's equal over 4
    updates, and the final weights (each checkpoint loaded in ``env``) equal. Returns the
    scalars."""
    from mapush.events import read_scalars

    scalars = {name: read_scalars(run / "logs") for name, run in runs.items()}
    tags = sorted(t for t in scalars["patched"] if not t.startswith(CLOCK))
    assert tags == sorted(t for t in scalars["pristine"] if not t.startswith(CLOCK))
    assert "train/policy_loss" in tags and "train/value_loss" in tags
    assert len(scalars["patched"]["train/policy_loss"]) == 4  # four updates
    for tag in tags:
        assert scalars["patched"][tag] == scalars["pristine"][tag], tag
    modules = [str(sorted((runs[name] / "checkpoints").iterdir())[-1] / "module.pt")
               for name in ("pristine", "patched")]
    proc = subprocess.run([sys.executable, "-c", WEIGHTS] + modules, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    weights = json.loads(proc.stdout.strip().splitlines()[-1])
    assert weights[modules[0]] == weights[modules[1]]
    assert len(weights[modules[0]]) > 4
    return scalars


def test_ppo_with_02_gives_openrls_numbers_bit_for_bit(upstream, without_02, tmp_path):
    pristine = with_openrl(upstream, without_02)
    patched = double_env(upstream, MQE_DOUBLE_SUCCESS_STEP="7")
    runs = {"pristine": train(pristine, tmp_path, "pristine"),
            "patched": train(patched, tmp_path, "patched")}
    marker = "mapush-env patch 02"  # each ran the OpenRL it was given
    assert marker not in (without_02 / "openrl" / "buffers" / "replay_data.py").read_text()
    assert marker in (upstream["site"] / "openrl" / "buffers" / "replay_data.py").read_text()
    assert_same_training(runs, patched)
