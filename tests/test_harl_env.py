"""The HARL adapter over the MQE double: shapes and order, infos, statistics, memory, close.

Anything that goes through ``mapush.sim`` runs in a subprocess (the stand-in isaacgym, like
the real one, refuses to load after torch). One probe script drives the adapter and writes
what it saw as JSON; the tests assert on that.
"""
import json
import subprocess
import sys
import types

import numpy as np
import pytest

from tests.conftest import REPO, double_env

PROBE = r"""
import json, os, sys
from mapush import sim
sim.import_isaacgym()
import numpy as np, torch
torch.set_num_threads(1)  # tiny tensors: threads only add overhead on a 2-core runner
from mapush.envs.harl_env import MAPushHARLEnv
from mapush.run.watchdog import host_rss_mb
from mapush.spec import RunSpec

mode, out = sys.argv[1], sys.argv[2]
n = int(os.environ["PROBE_ENVS"])

def make(state_type="EP"):
    spec = RunSpec(algo="happo", task="go1push_mid", object="cuboid", num_envs=n, steps=1,
                   seed=1, run_dir=os.path.dirname(os.path.abspath(out)), sim_device="cpu", rl_device="cpu")
    return MAPushHARLEnv({"task": spec.task, "spec": spec.to_dict(), "n_threads": n,
                          "seed": 1, "state_type": state_type})

result = {}
if mode == "interface":
    env = make("EP")
    obs, share, avail = env.reset()
    result["reset"] = [list(obs.shape), list(share.shape), avail is None]
    actions = (np.arange(n * env.n_agents * env.act_dim, dtype=np.float32)
               .reshape(n, env.n_agents, env.act_dim) / 100.0 - 0.1)
    result["actions"] = actions.tolist()
    obs, share, rew, dones, infos, avail = env.step(actions)
    result["step"] = {"obs": obs.tolist(), "share": share.tolist(), "rew_shape": list(rew.shape),
                      "dones_shape": list(dones.shape), "dones_dtype": str(dones.dtype),
                      "obs_dtype": str(obs.dtype), "avail_none": avail is None,
                      "infos": [{str(k): v for k, v in i.items()} for i in infos]}
    try:
        env.step(actions.transpose(1, 0, 2))
        result["transposed"] = "accepted"
    except ValueError as exc:
        result["transposed"] = str(exc)
    fp = make("FP")
    fp.reset()
    obs, share, _r, _d, _i, _a = fp.step(actions)
    result["fp"] = {"obs": obs.tolist(), "share": share.tolist()}
    env.close(); env.close()
    result["closed"] = env.env is None
elif mode == "episodes":
    env = make("EP")
    env.reset()
    zero = np.zeros((n, env.n_agents, env.act_dim), np.float32)
    steps = int(os.environ["PROBE_STEPS"])
    result["dones"], result["cut"] = [], []
    for _ in range(steps):
        _o, _s, _r, dones, infos, _a = env.step(zero)
        result["dones"].append(dones.all(axis=1).tolist())
        result["cut"].append([bool(i[0]["bad_transition"]) for i in infos])
    result["summary"] = env.episode_stats()
    result["terms"] = env.reward_terms()
    result["dt"], result["max_len"] = float(env.env.dt), int(env.env.max_episode_length)
elif mode == "memory":
    env = make("EP")
    env.reset()
    act = np.zeros((n, env.n_agents, env.act_dim), np.float32)
    tensor_sizes = lambda obj: {k: v.numel() for k, v in vars(obj).items() if torch.is_tensor(v)}
    sizes = tensor_sizes(env.stats)
    for _ in range(1000):
        env.step(act)
    env.episode_stats(); env.reward_terms()
    before = host_rss_mb()
    for i in range(9000):
        env.step(act)
        if i % 1000 == 0:
            env.episode_stats(); env.reward_terms()
    result.update(growth=host_rss_mb() - before, same_sizes=tensor_sizes(env.stats) == sizes,
                  episodes=env.episode_stats()["episodes"])
with open(out, "w") as fh:
    json.dump(result, fh)
"""


def probe(tmp_path, mode, **env):
    out = tmp_path / ("%s.json" % mode)
    proc = subprocess.run([sys.executable, "-c", PROBE, mode, str(out)],
                          env=double_env(**env), cwd=str(REPO), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def interface(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("interface")
    record = tmp / "actions.npy"
    data = probe(tmp, "interface", PROBE_ENVS=4, MQE_DOUBLE_RECORD_ACTIONS=record)
    data["recorded"] = np.load(str(record))
    return data


def test_actions_reach_mqe_in_harl_order(interface):
    """Incident 001 bug 4: HARL's (n_envs, n_agents, act_dim) goes through, not transposed."""
    sent = np.array(interface["actions"], dtype=np.float32)
    assert sent.shape == (4, 2, 3)
    np.testing.assert_array_equal(interface["recorded"], sent)


def test_transposed_actions_are_refused(interface):
    assert "expected (n_envs, n_agents, act_dim) = (4, 2, 3)" in interface["transposed"]


def test_step_returns_what_harl_reads(interface):
    step = interface["step"]
    assert interface["reset"] == [[4, 2, 8], [4, 2, 16], True]
    assert np.array(step["obs"]).shape == (4, 2, 8) and step["obs_dtype"] == "float32"
    assert step["rew_shape"] == [4, 2, 1]
    assert step["dones_shape"] == [4, 2] and step["dones_dtype"] == "bool"
    assert step["avail_none"]  # incident 001 bug 6: None for continuous actions
    # incident 001 bug 5: one dict per env, keyed by agent id, with bad_transition
    assert len(step["infos"]) == 4
    for info in step["infos"]:
        assert sorted(info) == ["0", "1"]
        assert info["0"] == {"bad_transition": False}
    assert interface["closed"]


def test_share_obs_ep_is_all_agents_for_every_agent(interface):
    obs, share = np.array(interface["step"]["obs"]), np.array(interface["step"]["share"])
    for agent in range(2):
        np.testing.assert_array_equal(share[:, agent], obs.reshape(4, -1))


def test_share_obs_fp_starts_with_the_agents_own_obs(interface):
    obs, share = np.array(interface["fp"]["obs"]), np.array(interface["fp"]["share"])
    np.testing.assert_array_equal(share[:, 0], np.concatenate([obs[:, 0], obs[:, 1]], axis=1))
    np.testing.assert_array_equal(share[:, 1], np.concatenate([obs[:, 1], obs[:, 0]], axis=1))


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    return probe(tmp_path_factory.mktemp("episodes"), "episodes", PROBE_ENVS=4,
                 PROBE_STEPS=40, MQE_DOUBLE_SUCCESS_ENVS="1,2", MQE_DOUBLE_SUCCESS_STEP=5)


def test_dones_and_time_outs(episodes):
    dones, cut = np.array(episodes["dones"]), np.array(episodes["cut"])
    # MQE times out when episode_length_buf > max_episode_length: after max_len + 1 steps
    steps = episodes["max_len"] + 1
    # envs 1, 2 succeed every 5 steps: done, not a truncation
    assert dones[4::5, 1].all() and dones[4::5, 2].all()
    assert not cut[:, 1].any() and not cut[:, 2].any()
    # envs 0, 3 time out: done and marked bad_transition (bootstrapped by HARL)
    assert dones[steps - 1::steps, 0].all() and cut[steps - 1::steps, 3].all()
    assert not dones[steps - 2, 0]
    assert dones[:, 0].sum() == 40 // steps and (cut == dones)[:, [0, 3]].all()


def test_success_rate_of_the_chosen_envs(episodes):
    max_len, dt = episodes["max_len"], episodes["dt"]
    successes = 2 * (40 // 5)
    failures = 2 * (40 // (max_len + 1))
    summary = episodes["summary"]
    assert summary["episodes"] == successes + failures
    assert summary["success_rate"] == pytest.approx(successes / (successes + failures))
    assert summary["finished_time"] == pytest.approx(
        (successes * 5 * dt + failures * max_len * dt) / (successes + failures))
    assert "distance_to_target_reward" in episodes["terms"]
    assert "average_step_reward" in episodes["terms"]


def test_memory_stays_bounded_over_10000_steps_with_64_envs(tmp_path):
    data = probe(tmp_path, "memory", PROBE_ENVS=64)
    assert data["same_sizes"]
    assert data["episodes"] > 10000 * 64 / 20 * 0.9
    assert data["growth"] < 16.0, "host RSS grew %.1f MB" % data["growth"]


def test_close_never_reaches_into_the_simulator():
    """Incident 002: Go1 has no close(); closing must not touch the env, and not fail twice."""
    import torch

    from mapush.envs.harl_env import MAPushHARLEnv

    class Untouchable(object):
        num_envs, num_agents, device, dt, max_episode_length = 3, 2, "cpu", 0.1, 20
        observation_space = types.SimpleNamespace(shape=(8,))
        action_space = types.SimpleNamespace(shape=(3,), low=np.full(3, -1.0),
                                             high=np.full(3, 1.0))
        collision_degree_buf = collaboration_degree_buf = torch.zeros(3)

        def close(self):
            raise AttributeError("'Go1Object' object has no attribute 'close'")

    env = MAPushHARLEnv({"n_threads": 3}, env=Untouchable())
    env.close()
    env.close()
    assert env.env is None and env.reward_terms() == {}


LOGGER_SCRIPT = r"""
import json
import numpy as np, torch
from mapush.envs.harl_logger import MAPushLogger

def logger():
    log = MAPushLogger.__new__(MAPushLogger)
    log.algo_args = {"train": {"n_rollout_threads": 3}}
    log.envs, log.steps_before = object(), 0
    MAPushLogger.init(log, 1)
    return log

rng = np.random.default_rng(0)
on_host, on_device = logger(), logger()
for _ in range(12):
    rewards = rng.normal(size=(3, 2, 1)).astype(np.float32)
    done = rng.random(3) < 0.3
    dones = np.repeat(done[:, None], 2, axis=1)
    on_host.per_step((None, None, rewards, dones))
    on_device.per_step((None, None, torch.from_numpy(rewards), torch.from_numpy(dones)))
print(json.dumps({name: [float(log._done_sum.sum()), int(log._done_count.sum())]
                  for name, log in (("host", on_host), ("device", on_device))}))
"""


def test_the_logger_sums_episode_returns_alike_on_both_paths(upstream):
    """train.device_rollout hands the logger tensors: the episode returns it sums are the
    numpy path's."""
    proc = subprocess.run([sys.executable, "-c", LOGGER_SCRIPT], env=double_env(upstream),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["device"][1] == out["host"][1] > 0
    assert out["device"][0] == pytest.approx(out["host"][0], rel=1e-5)
