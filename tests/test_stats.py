"""EpisodeStats, the first-episode degrees and drain_reward_terms on known inputs, and their
memory bounds.

A scripted env stands in for MQE's episode buffers: each test decides which envs end and
succeed on which step, and the expected metrics are computed from that script.
"""
import collections
import gc
import types

import pytest
import torch

from mapush.envs.stats import EpisodeStats, drain_reward_terms, first_episode_degrees, \
    training_metrics
from mapush.run.watchdog import host_rss_mb


def tensor_sizes(obj):
    """Element counts of every tensor ``obj`` holds (bounded: preallocated, never grown)."""
    return {name: value.numel() for name, value in vars(obj).items() if torch.is_tensor(value)}


def scripted_env(num_envs, dt=0.1, max_episode_length=20):
    return types.SimpleNamespace(
        num_envs=num_envs, device="cpu", dt=dt, max_episode_length=max_episode_length,
        finished_buf=torch.zeros(num_envs, dtype=torch.bool),
        collision_degree_buf=torch.zeros(num_envs),
        collaboration_degree_buf=torch.zeros(num_envs),
        reward_buffer={"distance_to_target_reward": 0.0, "collision_punishment": 0.0,
                       "push_reward": 0.0, "step_count": 0},
    )


def run_episode(stats, env, length, succeed, envs=None):
    """Step all envs ``length`` times; the envs in ``envs`` end at the last step (success or
    time-out)."""
    n = env.num_envs
    mask = torch.zeros(n, dtype=torch.bool)
    mask[list(range(n)) if envs is None else envs] = True
    for t in range(length):
        last = t == length - 1
        env.finished_buf = mask & torch.tensor(last and succeed)
        stats.update(env, mask & torch.tensor(last))


def test_success_rate_and_finished_time():
    env = scripted_env(4, dt=0.1, max_episode_length=20)
    stats = EpisodeStats.for_env(env, window=100)
    assert stats.summary() == {}  # nothing finished yet
    run_episode(stats, env, length=5, succeed=True, envs=[0, 1])      # 2 successes at 5 steps
    run_episode(stats, env, length=20, succeed=False, envs=[2])       # 1 time-out
    summary = stats.summary()
    # env 0/1 kept stepping while env 2 ran: only finished episodes count
    assert summary["episodes"] == 3
    assert summary["success_rate"] == pytest.approx(2 / 3)
    # success: its length x dt; failure: max_episode_length x dt
    assert summary["finished_time"] == pytest.approx((5 * 0.1 * 2 + 20 * 0.1) / 3)
    assert "collision_degree" not in summary and "collaboration_degree" not in summary


def first_episode_env(num_obs):
    """MQE's calculator buffers after each env's first episode (never reset): envs 0 and 2
    succeeded in 10 and 4 steps, env 1 failed, env 3 is still in its first episode."""
    env = scripted_env(4)
    env.num_obs = num_obs
    env.init_reset_buf = torch.tensor([True, True, True, False])
    env.init_finished_buf = torch.tensor([True, False, True, False])
    env.init_episode_length_buf = torch.tensor([10, 20, 4, 20])
    env.collaboration_degree_buf = torch.tensor([5.0, 20.0, 1.0, 3.0])
    env.collision_degree_buf = torch.tensor([2.0, 7.0, 4.0, 1.0])
    return env


def test_first_episode_degrees_read_the_calculators_buffers():
    env = first_episode_env(num_obs=2)
    degrees = first_episode_degrees(env)
    assert degrees["envs_done"] == pytest.approx(3 / 4)
    assert degrees["collaboration_degree"] == pytest.approx((5 / 10 + 1 / 4) / 2)
    assert degrees["collision_degree"] == pytest.approx((2 / 10 + 4 / 4) / 2)


def test_no_collision_degree_without_obstacles_and_no_degrees_without_a_success():
    """go1push_mid has no obstacles: MQE's collision counter never moves there
    (legged_robot_field.py:216), so no collision degree is logged at all."""
    env = first_episode_env(num_obs=0)
    assert set(first_episode_degrees(env)) == {"envs_done", "collaboration_degree"}
    env.init_finished_buf = torch.zeros(4, dtype=torch.bool)
    assert first_episode_degrees(env) == {"envs_done": pytest.approx(3 / 4)}


def test_training_metrics_name_the_first_episode_degrees():
    env = first_episode_env(num_obs=0)
    stats = EpisodeStats.for_env(env, window=10)
    run_episode(stats, env, length=3, succeed=True, envs=[0])
    metrics = training_metrics(stats, env)
    assert metrics["success_rate"] == 1.0
    assert metrics["first_episode/collaboration_degree"] == pytest.approx((5 / 10 + 1 / 4) / 2)
    assert not any(k.endswith("degree") and "/" not in k for k in metrics)


def test_window_keeps_only_recent_episodes():
    env = scripted_env(2)
    stats = EpisodeStats.for_env(env, window=4)
    for _ in range(3):  # 6 failures
        run_episode(stats, env, length=3, succeed=False)
    for _ in range(2):  # then 4 successes fill the whole window
        run_episode(stats, env, length=3, succeed=True)
    summary = stats.summary()
    assert summary["success_rate"] == 1.0
    assert summary["episodes"] == 10


def test_drain_reward_terms_means_and_zeroes():
    env = scripted_env(4)
    env.reward_buffer.update(distance_to_target_reward=8.0, collision_punishment=-4.0,
                             push_reward=2.0, step_count=2)
    terms = drain_reward_terms(env)
    assert terms["distance_to_target_reward"] == pytest.approx(8.0 / (4 * 2))
    assert terms["collision_punishment"] == pytest.approx(-4.0 / (4 * 2))
    assert terms["average_step_reward"] == pytest.approx((8.0 - 4.0 + 2.0) / (4 * 2))
    assert all(v == 0 for v in env.reward_buffer.values())
    assert drain_reward_terms(env) == {}  # nothing accumulated since


def test_bounded_over_10000_steps_with_64_envs():
    """Incident 001: statistics grew until memory ran out. Buffers and RSS must stay flat."""
    env = scripted_env(64, max_episode_length=7)
    stats = EpisodeStats.for_env(env, window=1000)
    sizes = tensor_sizes(stats)
    lengths = torch.arange(64) % 7 + 1
    ep = torch.zeros(64, dtype=torch.long)

    def steps(count):
        for _ in range(count):
            ep.add_(1)
            done = ep >= lengths
            env.finished_buf = done & (lengths % 2 == 0)
            stats.update(env, done)
            ep[done] = 0

    steps(1000)
    gc.collect()
    before = host_rss_mb()
    steps(9000)
    stats.summary()
    gc.collect()
    growth = host_rss_mb() - before
    assert tensor_sizes(stats) == sizes
    assert stats.summary()["episodes"] > 1000 * 64 / 7  # the windows wrapped many times
    assert growth < 16.0, "host RSS grew %.1f MB over 9000 steps" % growth


class _ReferenceStats(object):
    """The definitions, one env and one step at a time, in plain Python (slow, obvious)."""

    def __init__(self, n, window, dt, max_len):
        self.ring = collections.deque(maxlen=max(window, n))
        self.dt, self.max_len = dt, max_len
        self.ep = [0] * n

    def update(self, finished, done):
        for i in range(len(self.ep)):
            self.ep[i] += 1
            if done[i]:
                ok = bool(finished[i])
                self.ring.append((ok, (self.ep[i] if ok else self.max_len) * self.dt))
                self.ep[i] = 0

    def summary(self):
        if not self.ring:
            return {}
        wins = [r for r in self.ring if r[0]]
        return {"success_rate": len(wins) / len(self.ring),
                "finished_time": sum(r[1] for r in self.ring) / len(self.ring)}


@pytest.mark.parametrize("capacity", [1, 7, 256])
@pytest.mark.parametrize("window", [4, 1000])
@pytest.mark.parametrize("p_done", [0.05, 0.5])
def test_batched_updates_equal_the_step_by_step_definition(capacity, window, p_done):
    """Steps are folded in batches of ``capacity``; the result must not depend on it."""
    gen = torch.Generator().manual_seed(capacity * 1000 + window + int(p_done * 100))
    n = 6
    env = scripted_env(n, dt=0.1, max_episode_length=50)
    stats = EpisodeStats.for_env(env, window=window, capacity=capacity)
    ref = _ReferenceStats(n, window, 0.1, 50)
    for step in range(300):
        env.finished_buf = torch.rand(n, generator=gen) < 0.5
        done = torch.rand(n, generator=gen) < p_done
        stats.update(env, done)
        ref.update(env.finished_buf.tolist(), done.tolist())
        if step % 41 == 40 or step == 299:
            got, want = stats.summary(), ref.summary()
            assert got.pop("episodes") >= len(ref.ring)
            assert got.keys() == want.keys()
            for key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-5), (step, key)
