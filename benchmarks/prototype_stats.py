"""Prototype (benchmark only): episode statistics with a per-step cost of 4 copy kernels.

The GPU run shows that ``EpisodeStats.update`` (mapush/envs/stats.py) is almost all of our
adapters' per-step cost: about 43 small kernels per step, each a few microseconds of host
launch time, whatever the number of envs. This prototype records each step's raw signals
(done, finished, the two MQE counters) into a preallocated ``(capacity, 4, num_envs)``
device buffer and computes the same statistics for all pending steps at once, vectorised
over time (cumulative sums, ``cummax`` for episode starts), when the buffer is full or the
statistics are read. Results are identical to ``EpisodeStats`` (see
``benchmarks/check_prototype.py``); it is here to measure what the lead could adopt, not
used by the product.
"""
from typing import Any, Dict

import torch

from mapush.envs.stats import DEFAULT_WINDOW, EpisodeStats


class DeferredEpisodeStats(object):
    """``EpisodeStats``' interface (update, summary, ep_* buffers); flushes in batches."""

    def __init__(self, inner: EpisodeStats, capacity: int = 256) -> None:
        self.inner = inner
        self.capacity = int(capacity)
        n, dev = inner.num_envs, inner.device
        self.hist = torch.zeros(self.capacity, 4, n, dtype=torch.float32, device=dev)
        self.pending = 0
        self._t = torch.arange(self.capacity, device=dev).unsqueeze(1).expand(-1, n)

    @classmethod
    def for_env(cls, env: Any, window: int = DEFAULT_WINDOW,
                capacity: int = 256) -> "DeferredEpisodeStats":
        return cls(EpisodeStats.for_env(env, window=window), capacity)

    def update(self, env: Any, done: torch.Tensor) -> None:
        if self.pending == self.capacity:
            self.flush()
        row = self.hist[self.pending]
        row[0].copy_(done.reshape(-1))
        row[1].copy_(env.finished_buf.reshape(-1))
        row[2].copy_(env.collision_degree_buf.reshape(-1))
        row[3].copy_(env.collaboration_degree_buf.reshape(-1))
        self.pending += 1

    def flush(self) -> None:
        """Apply the pending steps to the inner statistics, as T sequential updates would."""
        T = self.pending
        if T == 0:
            return
        s = self.inner
        h = self.hist[:T]
        d = h[:, 0] > 0.5
        f = h[:, 1] > 0.5
        counters = h[:, 2:4]  # (T, 2, n)
        if s._last_collision is None:
            last = torch.zeros_like(counters[0])
        else:
            last = torch.stack([s._last_collision, s._last_collaboration])
        prev = torch.cat([last.unsqueeze(0), counters[:-1]], dim=0)
        cum = torch.cumsum((counters - prev).clamp(min=0), dim=0)  # (T, 2, n)
        t = self._t[:T]
        starts = torch.zeros_like(t)
        starts[1:] = torch.where(d[:-1], t[1:], torch.zeros_like(t[1:]))
        seg = torch.cummax(starts, dim=0).values  # first step of the episode running at t
        carry = seg == 0
        before = cum.gather(0, (seg - 1).clamp(min=0).unsqueeze(1).expand(-1, 2, -1))
        before = before * (~carry).unsqueeze(1)
        ep = cum - before + carry.unsqueeze(1) * torch.stack(
            [s.ep_collision, s.ep_collaboration]).unsqueeze(0)
        length = (t + 1 - seg).float() + carry * s.ep_len.unsqueeze(0)

        success = f & d
        finished_time = torch.where(success, length,
                                    torch.full_like(length, s.max_episode_length)) * s.dt
        safe = length.clamp(min=1)
        flat_d = d.reshape(-1)
        order = torch.cumsum(flat_d.long(), 0) - 1
        total = order[-1] + 1
        keep = flat_d & (order >= total - s.size)  # later events win, as in sequence
        slots = torch.where(keep, (s.cursor + order) % s.size,
                            torch.full_like(order, s.size))
        s.success.scatter_(0, slots, success.reshape(-1).float())
        s.finished_time.scatter_(0, slots, finished_time.reshape(-1))
        s.collision.scatter_(0, slots, (ep[:, 0] / safe).reshape(-1))
        s.collaboration.scatter_(0, slots, (ep[:, 1] / safe).reshape(-1))
        s.filled.scatter_(0, slots, flat_d)
        s.cursor = (s.cursor + total) % s.size
        s.episodes = s.episodes + total
        alive = (~d[-1]).float()
        s.ep_len.copy_(length[-1] * alive)
        s.ep_collision.copy_(ep[-1, 0] * alive)
        s.ep_collaboration.copy_(ep[-1, 1] * alive)
        s._last_collision = counters[-1, 0].clone()
        s._last_collaboration = counters[-1, 1].clone()
        self.pending = 0

    def summary(self) -> Dict[str, float]:
        self.flush()
        return self.inner.summary()

    @property
    def ep_len(self) -> torch.Tensor:
        self.flush()
        return self.inner.ep_len

    @property
    def ep_collision(self) -> torch.Tensor:
        self.flush()
        return self.inner.ep_collision

    @property
    def ep_collaboration(self) -> torch.Tensor:
        self.flush()
        return self.inner.ep_collaboration
