"""patches/openrl/05 (PPO across the ranks of one run) on the real OpenRL 0.2.0 files, two
processes over gloo on the CPU.

One PPO update (3 epochs of one minibatch, the value normaliser on) over a rollout of 8 envs
x 2 agents x 6 steps of seeded random rows, run three ways: one process over all 8 envs,
and two ranks of one group over 4 envs each (rank r the envs 4r..4r+3, the rows the single
process holds). With 05, both ranks end with the same weights, bit for bit, and those are
the single process's to float32 rounding: ``ATOL`` (measured at most 1.2e-7 here: the
ranks' sums are added in another order). Without 05 the ranks drift apart and miss the
single process's weights by about 3e-3, which the last test asserts, so the data reach each
of 05's sums. Mutations tried by hand, each failing a test here: the gradient summed but
not divided by the ranks; the advantages' moments left rank-local; the value normaliser's
batch moments left rank-local. With one process, 05 changes nothing: the weights equal
OpenRL's without 05, bit for bit, in a group of one and without a group.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ATOL = 1e-6
PPO_YAML = Path(__file__).resolve().parents[1] / "mapush" / "trainers" / "configs" / "ppo.yaml"

WORKER = r'''
import json, os, sys
import numpy as np, torch
import gymnasium as gym
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
if os.environ["GROUP"] == "1":
    torch.distributed.init_process_group("gloo")
from openrl.algorithms.ppo import PPOAlgorithm
from openrl.buffers import NormalReplayBuffer
from openrl.configs.config import create_config_parser
from openrl.modules.common import PPONet
ENVS, AGENTS, STEPS, OBS, ACT = 8, 2, 6, 5, 3
mine = ENVS // world
class Env:
    observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)
    agent_num, parallel_env_num, env_name = AGENTS, mine, "rows"
    def reset(self, seed=None):
        return None
parser = create_config_parser()
for key in ("--mqe_fast_step", "--device_rollout", "--act_graph"):  # mapush's keys
    parser.add_argument(key, default=None)
cfg = parser.parse_args(["--config", sys.argv[1]])
cfg.episode_length, cfg.num_mini_batch, cfg.ppo_epoch = STEPS, 1, 3
torch.manual_seed(0)  # the same initial weights in every process
net = PPONet(Env(), cfg=cfg, device="cpu")
cfg.n_rollout_threads = cfg.learner_n_rollout_threads = mine
algo = PPOAlgorithm(cfg=cfg, init_module=net.module, device="cpu", agent_num=AGENTS)
data = NormalReplayBuffer(cfg, AGENTS, Env.observation_space, Env.action_space, None).data
rng = np.random.default_rng(5)
for name in ("policy_obs", "critic_obs", "value_preds", "returns", "actions",
             "action_log_probs"):
    shape = getattr(data, name).shape
    rows = rng.standard_normal(shape[:1] + (ENVS,) + shape[2:]).astype(np.float32)
    getattr(data, name)[...] = rows[:, rank * mine:(rank + 1) * mine]
if os.environ.get("TENSORS") == "1":  # patches/openrl/03's buffer of tensors
    data.to_device(torch.device("cpu"))
algo.train(data)
print(json.dumps({"%s.%s" % (name, key): value.double().reshape(-1).tolist()
                  for name, model in sorted(net.module.models.items())
                  for key, value in model.state_dict().items()}))
'''


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def weights(site, world, group=True, tensors=False):
    """Each rank's weights after the update, ``world`` processes with ``site``'s OpenRL."""
    env = dict(os.environ, PYTHONPATH=str(site), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(world), GROUP=str(int(group)),
               TENSORS=str(int(tensors)))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(PPO_YAML)],
                              env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(world)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert len(outs[0]) > 10  # every model's tensors, the value normaliser's included
    return outs


def farthest(one, other):
    return max(max(abs(a - b) for a, b in zip(one[key], other[key])) for key in one)


@pytest.fixture(scope="module")
def without_05(tmp_path_factory):
    """OpenRL patched as shipped but for 05."""
    from tests.upstream import site_without

    return site_without(tmp_path_factory.mktemp("without-05"), "05-", component="openrl")


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy-buffer", "tensor-buffer"])
def test_two_ranks_on_half_the_envs_take_the_step_one_process_takes_on_all(upstream, tensors):
    [single] = weights(upstream["site"], 1, group=False, tensors=tensors)
    first, second = weights(upstream["site"], 2, tensors=tensors)
    assert first == second  # every rank the same weights and statistics, bit for bit
    assert farthest(first, single) <= ATOL
    assert any(v != 0.0 for v in first["critic.value_normalizer.running_mean"])


def test_one_process_is_openrls_own_update_bit_for_bit(upstream, without_05):
    [theirs] = weights(without_05, 1, group=False)
    assert weights(upstream["site"], 1, group=False) == [theirs]
    assert weights(upstream["site"], 1, group=True) == [theirs]  # a group of one


def test_without_05_the_ranks_drift_apart(upstream, without_05):
    [single] = weights(upstream["site"], 1, group=False)
    first, second = weights(without_05, 2)
    assert first != second
    assert farthest(first, single) > 100 * ATOL
