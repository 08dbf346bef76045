"""EpisodeStats and drain_reward_terms on known inputs, and their memory bounds.

A scripted env stands in for MQE's episode buffers: each test decides which envs end,
succeed and collide on which step, and the expected metrics are computed from that script.
"""
import collections
import gc
import types

import pytest
import torch

from mapush.envs.stats import EpisodeStats, drain_reward_terms
from mapush.run.watchdog import host_rss_mb


def scripted_env(num_envs, dt=0.1, max_episode_length=20):
    return types.SimpleNamespace(
        num_envs=num_envs, device="cpu", dt=dt, max_episode_length=max_episode_length,
        finished_buf=torch.zeros(num_envs, dtype=torch.bool),
        collision_degree_buf=torch.zeros(num_envs),
        collaboration_degree_buf=torch.zeros(num_envs),
        reward_buffer={"distance_to_target_reward": 0.0, "collision_punishment": 0.0,
                       "push_reward": 0.0, "step_count": 0},
    )


def run_episode(stats, env, length, succeed, collide_steps=0, collab_steps=0, envs=None):
    """Step all envs ``length`` times; the envs in ``envs`` end at the last step (success or
    time-out), counting ``collide_steps``/``collab_steps`` steps in MQE's counters."""
    n = env.num_envs
    mask = torch.zeros(n, dtype=torch.bool)
    mask[list(range(n)) if envs is None else envs] = True
    for t in range(length):
        if t < collide_steps:
            env.collision_degree_buf += mask.float()
        if t < collab_steps:
            env.collaboration_degree_buf += mask.float()
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


def test_collision_and_collaboration_degree_over_successes():
    env = scripted_env(2)
    stats = EpisodeStats.for_env(env, window=100)
    run_episode(stats, env, length=10, succeed=True, collide_steps=4, collab_steps=5, envs=[0])
    run_episode(stats, env, length=8, succeed=True, collide_steps=2, collab_steps=8, envs=[1])
    # a failed episode's collisions must not count
    run_episode(stats, env, length=10, succeed=False, collide_steps=10, envs=[0])
    summary = stats.summary()
    # env 1 was already 10 steps into its episode when it finished at step 18
    env1_len = 10 + 8
    assert summary["success_rate"] == pytest.approx(2 / 3)
    assert summary["collision_degree"] == pytest.approx((4 / 10 + 2 / env1_len) / 2)
    assert summary["collaboration_degree"] == pytest.approx((5 / 10 + 8 / env1_len) / 2)


def test_no_degrees_without_a_success():
    env = scripted_env(3)
    stats = EpisodeStats.for_env(env, window=10)
    run_episode(stats, env, length=20, succeed=False, collide_steps=3)
    summary = stats.summary()
    assert summary["success_rate"] == 0.0
    assert "collision_degree" not in summary and "collaboration_degree" not in summary


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
    """Seed 001: statistics grew until memory ran out. Buffers and RSS must stay flat."""
    env = scripted_env(64, max_episode_length=7)
    stats = EpisodeStats.for_env(env, window=1000)
    sizes = stats.window_sizes()
    lengths = torch.arange(64) % 7 + 1
    ep = torch.zeros(64, dtype=torch.long)

    def steps(count):
        for _ in range(count):
            ep.add_(1)
            done = ep >= lengths
            env.finished_buf = done & (lengths % 2 == 0)
            env.collision_degree_buf += 1
            stats.update(env, done)
            ep[done] = 0

    steps(1000)
    gc.collect()
    before = host_rss_mb()
    steps(9000)
    stats.summary()
    gc.collect()
    growth = host_rss_mb() - before
    assert stats.window_sizes() == sizes
    assert int(stats.episodes) > 1000 * 64 / 7  # the windows wrapped many times
    assert growth < 16.0, "host RSS grew %.1f MB over 9000 steps" % growth


class _ReferenceStats(object):
    """The definitions, one env and one step at a time, in plain Python (slow, obvious)."""

    def __init__(self, n, window, dt, max_len):
        self.ring = collections.deque(maxlen=max(window, n))
        self.dt, self.max_len = dt, max_len
        self.ep = [[0, 0.0, 0.0] for _ in range(n)]
        self.last = [[0.0, 0.0] for _ in range(n)]

    def update(self, finished, collision, collaboration, done):
        for i, ep in enumerate(self.ep):
            ep[0] += 1
            ep[1] += max(collision[i] - self.last[i][0], 0.0)
            ep[2] += max(collaboration[i] - self.last[i][1], 0.0)
            self.last[i] = [collision[i], collaboration[i]]
        for i, ep in enumerate(self.ep):
            if done[i]:
                ok = bool(finished[i])
                self.ring.append((ok, (ep[0] if ok else self.max_len) * self.dt,
                                  ep[1] / ep[0], ep[2] / ep[0]))
                self.ep[i] = [0, 0.0, 0.0]

    def summary(self):
        if not self.ring:
            return {}
        wins = [r for r in self.ring if r[0]]
        out = {"success_rate": len(wins) / len(self.ring),
               "finished_time": sum(r[1] for r in self.ring) / len(self.ring)}
        if wins:
            out["collision_degree"] = sum(r[2] for r in wins) / len(wins)
            out["collaboration_degree"] = sum(r[3] for r in wins) / len(wins)
        return out


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
        env.collision_degree_buf += (torch.rand(n, generator=gen) < 0.3).float()
        env.collaboration_degree_buf += (torch.rand(n, generator=gen) < 0.5).float()
        env.finished_buf = torch.rand(n, generator=gen) < 0.5
        done = torch.rand(n, generator=gen) < p_done
        stats.update(env, done)
        ref.update(env.finished_buf.tolist(), env.collision_degree_buf.tolist(),
                   env.collaboration_degree_buf.tolist(), done.tolist())
        if step % 41 == 40 or step == 299:
            got, want = stats.summary(), ref.summary()
            assert got.pop("episodes") >= len(ref.ring)
            assert got.keys() == want.keys()
            for key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-5), (step, key)
