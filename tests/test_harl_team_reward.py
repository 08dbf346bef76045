"""What reaches HARL's critic buffer, on real HARL, patched and pristine.

MQE's rewards differ per agent (the approach, collision and OCB terms are per robot; so are
the double's). HARL's on-policy runner in EP state mode put ``rewards[:, 0]`` into the one
shared critic's buffer: the critic learned agent 0's reward. patches/harl/03 makes the runner
ask the env for the team reward (``MAPushHARLEnv.team_reward``: the mean by default). The
probe runs the real ``OnPolicyBaseRunner.insert`` on one step of the cylinder (3 robots)
over the double, with buffers that record what they are given.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO, double_env
from tests.upstream import extract_harl

PROBE = r"""
import json, os, sys, types
from mapush import sim
sim.import_isaacgym()
import numpy as np, torch
try:  # pristine HARL imports uu, which Python 3.13 removed (patches/harl/04)
    import uu
except ImportError:
    sys.modules["uu"] = types.SimpleNamespace(Error=type("Error", (Exception,), {}))
torch.set_num_threads(1)
from harl.runners.on_policy_base_runner import OnPolicyBaseRunner
from mapush.envs.harl_env import MAPushHARLEnv
from mapush.spec import RunSpec

state_type, team, out = sys.argv[1], sys.argv[2], sys.argv[3]
n = 4

class Recorder(object):
    def __init__(self):
        self.calls = []
    def insert(self, *args):
        self.calls.append([None if a is None else np.asarray(a).tolist() for a in args])

spec = RunSpec(algo="happo", task="go1push_mid", object="cylinder", num_envs=n, steps=1,
               seed=1, run_dir=os.path.dirname(os.path.abspath(out)), sim_device="cpu", rl_device="cpu")
env_args = {"task": spec.task, "spec": spec.to_dict(), "n_threads": n, "seed": 1,
            "state_type": state_type}
if team != "default":
    env_args["team_reward"] = team
env = MAPushHARLEnv(env_args)
obs, share, _ = env.reset()
a = env.n_agents
actions = (np.linspace(-1, 1, n * a * env.act_dim, dtype=np.float32)
           .reshape(n, a, env.act_dim))
obs, share, rewards, dones, infos, avail = env.step(actions)
runner = types.SimpleNamespace(
    state_type=state_type, num_agents=a, envs=env, recurrent_n=1, rnn_hidden_size=4,
    algo_args={"train": {"n_rollout_threads": n}},
    actor_buffer=[Recorder() for _ in range(a)], critic_buffer=Recorder())
critic_dim = (n, 1) if state_type == "EP" else (n, a, 1)
rnn_critic = (n, 1, 4) if state_type == "EP" else (n, a, 1, 4)
data = (obs, share, rewards, dones, infos, np.array([None] * n), np.zeros(critic_dim),
        actions, np.zeros((n, a, 1)), np.zeros((n, a, 1, 4), np.float32),
        np.zeros(rnn_critic, np.float32))
OnPolicyBaseRunner.insert(runner, data)
with open(out, "w") as fh:
    json.dump({"agents": a, "rewards": rewards.tolist(),
               "critic": runner.critic_buffer.calls[0][3],
               "actor_args": [len(b.calls[0]) for b in runner.actor_buffer]}, fh)
"""


def probe(tmp_path, site, state_type, team="default"):
    out = tmp_path / ("%s-%s-%s.json" % (site.name, state_type, team))
    env = double_env()
    env["PYTHONPATH"] = str(site) + ":" + env["PYTHONPATH"]
    proc = subprocess.run([sys.executable, "-c", PROBE, state_type, team, str(out)], env=env,
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    return data["agents"], np.array(data["rewards"]), np.array(data["critic"]), data


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    site = tmp_path_factory.mktemp("pristine") / "site"
    site.mkdir()
    extract_harl(site)
    return site


def test_the_agents_rewards_differ(upstream, tmp_path):
    agents, rewards, _critic, _ = probe(tmp_path, upstream["site"], "EP")
    assert agents == 3 and rewards.shape == (4, 3, 1)
    for env in range(4):
        assert len(set(np.round(rewards[env, :, 0], 6))) == 3, rewards[env]


def test_pristine_harl_gives_the_ep_critic_agent_0s_reward(pristine, tmp_path):
    """The bug, on HARL at the pin: the shared critic sees agent 0's own reward only."""
    _a, rewards, critic, _ = probe(tmp_path, pristine, "EP")
    np.testing.assert_allclose(critic, rewards[:, 0], rtol=1e-6)


def test_patched_ep_critic_gets_the_team_mean(upstream, tmp_path):
    _a, rewards, critic, data = probe(tmp_path, upstream["site"], "EP")
    assert critic.shape == (4, 1)
    np.testing.assert_allclose(critic, rewards.mean(axis=1), rtol=1e-6)
    assert not np.allclose(critic, rewards[:, 0])
    # the actors' buffers take no reward in HARL: what they get did not change
    assert data["actor_args"] == [7, 7, 7]


def test_team_reward_sum_is_a_choice(upstream, tmp_path):
    _a, rewards, critic, _ = probe(tmp_path, upstream["site"], "EP", "sum")
    np.testing.assert_allclose(critic, rewards.sum(axis=1), rtol=1e-6)


def test_fp_critic_keeps_one_reward_per_agent(upstream, tmp_path):
    _a, rewards, critic, _ = probe(tmp_path, upstream["site"], "FP")
    assert critic.shape == (4, 3, 1)
    np.testing.assert_allclose(critic, rewards, rtol=1e-6)
