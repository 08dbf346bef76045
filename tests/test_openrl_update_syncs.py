"""patches/openrl/07 (PPO's update without a host sync a minibatch) on the real OpenRL 0.2.0
files, on the CPU: what the update reads back, and a non-finite parameter stopping the run.

Its numbers are held elsewhere: tests/test_openrl_device_rollout.py and
tests/test_openrl_act_graph.py run the whole patched site against OpenRL as shipped, the
logged losses included, bit for bit. Here a PPO run with ``device_rollout`` on (4 updates of 2
epochs of 2 minibatches over the MQE double) counts, inside ``train_ppo``, OpenRL's
``.item()`` reads and the minibatches that ran with torch.distributions' argument checks on; the same run
on OpenRL's own path (``device_rollout: false``) shows what 07 leaves alone.

Mutations tried by hand, each failing a test here: the checks left on (4 of 4 minibatches
checked); the four ``.item()`` reads kept (64 reads); ``read_update_sums``' finiteness check
removed (the poisoned run trains on, then fails later with another error).
"""
import json
import subprocess
import sys

import pytest

from tests.conftest import double_env

CHILD = r'''
import json
import sys

from mapush import sim, trainers

sim.import_isaacgym()  # (before torch, as Isaac Gym asks)
import torch  # noqa: E402
from openrl.algorithms.ppo import PPOAlgorithm  # noqa: E402

from mapush.run.context import RunContext
from mapush.spec import RunSpec

run_dir, config, poison_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
counts = {"updates": 0, "items_in_update": 0, "minibatches": 0, "checked": 0}
inside = [False]
item, train_ppo, ppo_update = torch.Tensor.item, PPOAlgorithm.train_ppo, PPOAlgorithm.ppo_update


def counted_item(self):  # OpenRL's own reads (torch's Adam reads its CPU step counters)
    counts["items_in_update"] += inside[0] and "openrl" in sys._getframe(1).f_code.co_filename
    return item(self)


def counted_train_ppo(self, buffer, turn_on):
    counts["updates"] += 1
    if counts["updates"] == poison_at:  # a policy weight NaN before this update
        for name, param in self.algo_module.models["policy"].named_parameters():
            if "fc_mean" in name:
                param.data.fill_(float("nan"))
    inside[0] = True
    try:
        return train_ppo(self, buffer, turn_on)
    finally:
        inside[0] = False


def counted_ppo_update(self, sample, turn_on=True):
    counts["minibatches"] += 1
    counts["checked"] += bool(torch.distributions.Distribution._validate_args)
    return ppo_update(self, sample, turn_on)


torch.Tensor.item = counted_item
PPOAlgorithm.train_ppo, PPOAlgorithm.ppo_update = counted_train_ppo, counted_ppo_update
spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=400, seed=7,
               run_dir=run_dir, sim_device="cpu", rl_device="cpu", checkpoint_interval=100,
               config=config)
try:
    trainers.load("ppo").train(RunContext(spec))
finally:
    print("COUNTS " + json.dumps(counts))
'''

CONFIG = "episode_length: 25\nppo_epoch: 2\nnum_mini_batch: 2\nlog_interval: 1\n"


def run(upstream, tmp_path, name, device_rollout, poison_at=0):
    config = tmp_path / ("%s.yaml" % name)
    config.write_text(CONFIG + "device_rollout: %s\n" % ("true" if device_rollout else "false"))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / name), str(config),
                           str(poison_at)], env=double_env(upstream), capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path))
    counts = json.loads(proc.stdout.split("COUNTS ", 1)[1].splitlines()[0])
    return proc, counts


@pytest.mark.parametrize("device_rollout", [True, False])
def test_the_update_on_the_device_reads_nothing_back_a_minibatch(upstream, device_rollout,
                                                                 tmp_path):
    proc, counts = run(upstream, tmp_path, "count", device_rollout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert counts["updates"] == 4 and counts["minibatches"] == 16  # 4 x 2 epochs x 2
    if device_rollout:  # no read and no argument check in a minibatch
        assert counts["items_in_update"] == 0 and counts["checked"] == 0
    else:  # OpenRL's own path: four reads a minibatch, the checks on
        assert counts["items_in_update"] == 4 * 16 and counts["checked"] == 16
    from mapush.events import read_scalars

    scalars = read_scalars(tmp_path / "count" / "logs")  # the losses logged once an update
    for tag in ("train/value_loss", "train/policy_loss", "train/dist_entropy", "train/ratio"):
        assert len(scalars[tag]) == 4 and all(v == v for _, v in scalars[tag]), tag


def test_a_non_finite_parameter_stops_the_update_before_a_checkpoint(upstream, tmp_path):
    """The policy made NaN before the 3rd update: 07's check raises at that update's end,
    where upstream's argument checks raise at its first minibatch; no checkpoint is written
    from the NaN weights (one every 100 env steps: the 2nd update's is the last)."""
    proc, counts = run(upstream, tmp_path, "nan", True, poison_at=3)
    assert proc.returncode != 0
    assert "a parameter of the policy or the critic is not finite after this update" in \
        proc.stderr
    assert counts["updates"] == 3 and counts["minibatches"] == 12  # it ran to the end
    steps = sorted(int(p.name.split("_")[-2]) for p in
                   (tmp_path / "nan" / "checkpoints").iterdir() if p.name.endswith("_steps"))
    assert steps and steps[-1] <= 200
