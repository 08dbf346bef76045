"""The OpenRL adapter: numpy in and out as OpenRL expects, actions on the env's device (never
``.cuda()``), one host copy per step, reward terms and episode metrics for OpenRL's logger."""
import numpy as np
import pytest
import torch

from mapush.envs.openrl_env import ACTION_SCALE, OpenRLEnv

N, A, OBS = 4, 2, 8


class FakeMQE(object):
    """The slice of MQE's interface the adapter reads (docs/upstream.md), on the CPU.
    Env 0 succeeds at its 2nd step, env 1 times out at its 3rd; envs 2 and 3 run on. Env 0
    collaborates every step; the calculator's buffers count first episodes only, as MQE's
    (legged_robot_field.py:204-230)."""

    num_envs, num_agents, dt, max_episode_length, num_obs = N, A, 0.1, 3, 0
    device = "cpu"

    def __init__(self):
        self.observation_space = object()
        self.action_space = object()
        self.finished_buf = torch.zeros(N, dtype=torch.bool)
        self.collision_degree_buf = torch.zeros(N)
        self.collaboration_degree_buf = torch.zeros(N)
        self.init_reset_buf = torch.zeros(N, dtype=torch.bool)
        self.init_finished_buf = torch.zeros(N, dtype=torch.bool)
        self.init_episode_length_buf = torch.full((N,), self.max_episode_length)
        self.reward_buffer = {"push_reward": 0.0, "collision_punishment": 0.0,
                              "ocb_value": 0.0, "step_count": 0}
        self.received = []
        self.t = 0

    def reset(self):
        return torch.zeros(N, A, OBS)

    def step(self, actions):
        self.received.append(actions)
        self.t += 1
        obs = torch.arange(N * A * OBS, dtype=torch.float32).reshape(N, A, OBS) + self.t
        reward = torch.arange(N * A, dtype=torch.float32).reshape(N, A) * self.t
        self.finished_buf = torch.tensor([self.t == 2, False, False, False])
        done = self.finished_buf | torch.tensor([False, self.t == 3, False, False])
        first = ~self.init_reset_buf
        self.init_finished_buf |= first & self.finished_buf
        self.init_episode_length_buf[first & self.finished_buf] = self.t
        self.collaboration_degree_buf += torch.tensor([1.0, 0.0, 0.0, 0.0]) * first
        self.init_reset_buf |= done
        self.reward_buffer["push_reward"] += 8.0
        self.reward_buffer["collision_punishment"] -= 4.0
        self.reward_buffer["ocb_value"] += 100.0
        self.reward_buffer["step_count"] += 1
        return obs, reward, done, {}


def test_step_returns_numpy_in_openrl_shapes_from_the_env_tensors():
    mqe = FakeMQE()
    env = OpenRLEnv(mqe)
    assert (env.agent_num, env.parallel_env_num) == (A, N)
    assert env.reset(seed=3).shape == (N, A, OBS)
    obs, rewards, dones, infos = env.step(np.zeros((N, A, 3), dtype=np.float32))
    assert obs.shape == (N, A, OBS) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs, np.arange(N * A * OBS).reshape(N, A, OBS) + 1)
    assert rewards.shape == (N, A, 1)
    np.testing.assert_array_equal(rewards[..., 0], np.arange(N * A).reshape(N, A))
    assert dones.shape == (N, A) and dones.dtype == bool and not dones.any()
    assert infos == [{} for _ in range(N)]
    _obs, _r, dones, _i = env.step(np.zeros((N, A, 3), dtype=np.float32))
    np.testing.assert_array_equal(dones, [[True, True], [False, False], [False, False],
                                          [False, False]])
    assert env.use_monitor is False


def test_actions_are_scaled_clipped_and_put_on_the_env_device_without_cuda(monkeypatch):
    def no_cuda(*_a, **_k):
        raise AssertionError(".cuda() called")

    monkeypatch.setattr(torch.Tensor, "cuda", no_cuda)
    mqe = FakeMQE()
    env = OpenRLEnv(mqe)
    actions = np.array([[[0.4, -1.0, 3.0]] * A] * N, dtype=np.float64)
    env.step(actions)
    sent = mqe.received[0]
    assert isinstance(sent, torch.Tensor) and sent.device == torch.device(mqe.device)
    assert sent.dtype == torch.float32 and tuple(sent.shape) == (N, A, 3)
    expected = np.clip(actions * ACTION_SCALE, -1.0, 1.0)
    np.testing.assert_allclose(sent.numpy(), expected, rtol=1e-6)


def test_one_host_copy_per_step(monkeypatch):
    calls = []
    original = torch.Tensor.cpu

    def counting_cpu(self, *a, **k):
        calls.append(tuple(self.shape))
        return original(self, *a, **k)

    env = OpenRLEnv(FakeMQE())
    monkeypatch.setattr(torch.Tensor, "cpu", counting_cpu)
    for _ in range(3):
        env.step(np.zeros((N, A, 3), dtype=np.float32))
    assert len(calls) == 3, calls


def test_batch_rewards_drains_reward_terms_and_reports_episode_metrics():
    mqe = FakeMQE()
    env = OpenRLEnv(mqe)
    for _ in range(3):
        env.step(np.zeros((N, A, 3), dtype=np.float32))
    infos = env.batch_rewards(None)
    # per env and step: 8 / (4 envs) = 2 and -4 / 4 = -1 each step
    assert infos["reward/push_reward"] == pytest.approx(2.0)
    assert infos["reward/collision_punishment"] == pytest.approx(-1.0)
    assert infos["reward/ocb_value"] == pytest.approx(25.0)
    assert infos["reward/average_step_reward"] == pytest.approx(1.0)  # reward + punishment
    assert mqe.reward_buffer["step_count"] == 0 and mqe.reward_buffer["push_reward"] == 0
    # env 0 succeeded after 2 steps (collaborating each step); env 1 timed out after 3
    assert infos["metrics/success_rate"] == pytest.approx(0.5)
    assert infos["metrics/finished_time"] == pytest.approx((2 * 0.1 + 3 * 0.1) / 2)
    # the degrees only under names that say what they are: each env's first episode
    assert infos["metrics/first_episode/collaboration_degree"] == pytest.approx(1.0)
    assert infos["metrics/first_episode/envs_done"] == pytest.approx(2 / N)
    assert not any(k.endswith("degree") and "first_episode" not in k for k in infos)
    assert "metrics/first_episode/collision_degree" not in infos  # no obstacles: never moves
    assert all(k.startswith(("reward/", "metrics/")) for k in infos)
    assert env.batch_rewards(None) == {k: v for k, v in infos.items()
                                       if k.startswith("metrics/")}


def test_mqe_buffers_read_through_the_adapter():
    mqe = FakeMQE()
    env = OpenRLEnv(mqe)
    assert env.init_reset_buf is mqe.init_reset_buf
    assert env.dt == 0.1
    with pytest.raises(AttributeError):
        env.no_such_buffer


def test_close_never_reaches_mqe():
    """MQE's wrapper is a gym.Wrapper whose close() calls Go1.close, which does not exist
    (empty_wrapper.py:4): closing the adapter must not call into the env."""
    mqe = FakeMQE()

    def no_close():
        raise AttributeError("'Go1Object' object has no attribute 'close'")

    mqe.close = no_close
    env = OpenRLEnv(mqe)
    env.close()
    env.close()
    assert env.env is None
