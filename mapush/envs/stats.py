"""Episode statistics of the paper (success rate, finished time, collision degree,
collaboration degree), computed on the env's device and kept in bounded windows.

One implementation serves both adapters. A step only records its four raw signals (done,
``finished_buf`` and MQE's two counters) into a preallocated ``(capacity, 4, num_envs)``
device buffer: four copy kernels, no host sync. When the buffer is full, or when the
statistics are read, all pending steps are folded in at once, vectorised over time
(cumulative sums for the counters, ``cummax`` for episode starts), and the finished episodes
are scattered into fixed-size ring buffers (slot ``size`` is a scratch slot that absorbs the
writes of envs that did not finish). The GPU benchmark (benchmarks/README.md) showed that a
per-step update of ~40 small kernels was almost all of the adapters' cost; batching made it
a few. Only :meth:`summary`, called at logging time, copies to the host. Nothing grows with
the number of steps: this is the fix for seed 001's Python lists that ate the GPU over hours.

Definitions, as MAPush's calculator mode uses them:
- success: ``finished_buf`` of the env when its episode ended;
- finished time: episode length x ``dt`` for a success, ``max_episode_length`` x ``dt`` else;
- collision / collaboration degree: steps counted by MQE's ``collision_degree_buf`` /
  ``collaboration_degree_buf`` during the episode over its length, over successes.
  (MQE advances those two counters only until an env's first reset; later episodes count 0.)
"""
from typing import Any, Dict

import torch

DEFAULT_WINDOW = 1000
DEFAULT_CAPACITY = 256
METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree")


class EpisodeStats:
    def __init__(self, num_envs: int, device: Any, window: int = DEFAULT_WINDOW,
                 dt: float = 1.0, max_episode_length: float = 1.0,
                 capacity: int = DEFAULT_CAPACITY) -> None:
        # At least one slot per env, so one step can never overwrite its own results.
        self.size = max(int(window), int(num_envs))
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.dt = float(dt)
        self.max_episode_length = float(max_episode_length)
        self.capacity = max(1, int(capacity))
        n, dev = self.num_envs, self.device
        ring = lambda dtype: torch.zeros(self.size + 1, dtype=dtype, device=dev)  # noqa: E731
        self.success = ring(torch.float32)
        self.finished_time = ring(torch.float32)
        self.collision = ring(torch.float32)
        self.collaboration = ring(torch.float32)
        self.filled = ring(torch.bool)
        self.cursor = torch.zeros((), dtype=torch.long, device=dev)
        self._episodes = torch.zeros((), dtype=torch.long, device=dev)
        # Running episode of each env: rows length, collision steps, collaboration steps.
        self._ep = torch.zeros(3, n, dtype=torch.float32, device=dev)
        self._last = torch.zeros(2, n, dtype=torch.float32, device=dev)  # counters seen last
        # Pending steps: rows done, finished, collision counter, collaboration counter.
        self._hist = torch.zeros(self.capacity, 4, n, dtype=torch.float32, device=dev)
        self._pending = 0
        self._t = torch.arange(self.capacity, device=dev).unsqueeze(1).expand(-1, n)

    @classmethod
    def for_env(cls, env: Any, window: int = DEFAULT_WINDOW,
                capacity: int = DEFAULT_CAPACITY) -> "EpisodeStats":
        return cls(env.num_envs, env.device, window=window, dt=float(env.dt),
                   max_episode_length=float(env.max_episode_length), capacity=capacity)

    def update(self, env: Any, done: torch.Tensor) -> None:
        """Record one env step; ``done`` is the ``(num_envs,)`` termination mask."""
        if self._pending == self.capacity:
            self.flush()
        row = self._hist[self._pending]
        row[0].copy_(done.reshape(-1))
        row[1].copy_(env.finished_buf.reshape(-1))
        row[2].copy_(env.collision_degree_buf.reshape(-1))
        row[3].copy_(env.collaboration_degree_buf.reshape(-1))
        self._pending += 1

    def flush(self) -> None:
        """Fold the pending steps in, exactly as that many one-step updates would."""
        steps = self._pending
        if steps == 0:
            return
        hist = self._hist[:steps]
        done = hist[:, 0] > 0.5                                   # (T, n)
        finished = hist[:, 1] > 0.5
        counters = hist[:, 2:4]                                   # (T, 2, n)
        previous = torch.cat([self._last.unsqueeze(0), counters[:-1]], dim=0)
        cum = torch.cumsum((counters - previous).clamp(min=0), dim=0)
        t = self._t[:steps]
        # First step (within this batch) of the episode running at each step; 0 with
        # ``carry`` set means the episode began before the batch.
        starts = torch.zeros_like(t)
        starts[1:] = torch.where(done[:-1], t[1:], torch.zeros_like(t[1:]))
        first = torch.cummax(starts, dim=0).values
        carry = first == 0
        before = cum.gather(0, (first - 1).clamp(min=0).unsqueeze(1).expand(-1, 2, -1))
        counted = (cum - before * (~carry).unsqueeze(1)
                   + carry.unsqueeze(1) * self._ep[1:].unsqueeze(0))  # (T, 2, n)
        length = (t + 1 - first).float() + carry * self._ep[0].unsqueeze(0)

        success = finished & done
        finished_time = torch.where(success, length,
                                    torch.full_like(length, self.max_episode_length)) * self.dt
        per_step = counted / length.clamp(min=1).unsqueeze(1)
        flat_done = done.reshape(-1)
        order = torch.cumsum(flat_done.long(), 0) - 1
        total = order[-1] + 1
        keep = flat_done & (order >= total - self.size)  # later episodes win, as in sequence
        slots = torch.where(keep, (self.cursor + order) % self.size,
                            torch.full_like(order, self.size))
        self.success.scatter_(0, slots, success.reshape(-1).float())
        self.finished_time.scatter_(0, slots, finished_time.reshape(-1))
        self.collision.scatter_(0, slots, per_step[:, 0].reshape(-1))
        self.collaboration.scatter_(0, slots, per_step[:, 1].reshape(-1))
        self.filled.scatter_(0, slots, flat_done)
        self.cursor = (self.cursor + total) % self.size
        self._episodes = self._episodes + total
        alive = (~done[-1]).float()
        self._ep[0].copy_(length[-1] * alive)
        self._ep[1:].copy_(counted[-1] * alive)
        self._last.copy_(counters[-1])
        self._pending = 0

    def reset_episodes(self) -> None:
        """Forget the running episodes (the env was reset); finished ones stay."""
        self.flush()
        self._ep.zero_()

    @property
    def episodes(self) -> torch.Tensor:
        self.flush()
        return self._episodes

    @property
    def ep_len(self) -> torch.Tensor:
        self.flush()
        return self._ep[0]

    @property
    def ep_collision(self) -> torch.Tensor:
        self.flush()
        return self._ep[1]

    @property
    def ep_collaboration(self) -> torch.Tensor:
        self.flush()
        return self._ep[2]

    def summary(self) -> Dict[str, float]:
        """Means over the window (one host copy); empty before the first episode ends."""
        self.flush()
        filled = self.filled[: self.size]
        succeeded = (self.success[: self.size] > 0) & filled
        stacked = torch.stack([
            filled.float(),
            self.success[: self.size] * filled,
            self.finished_time[: self.size] * filled,
            self.collision[: self.size] * succeeded,
            self.collaboration[: self.size] * succeeded,
        ]).sum(dim=1)
        n, succ, ftime, coll, collab = stacked.tolist()
        if n == 0:
            return {}
        out = {
            "success_rate": succ / n,
            "finished_time": ftime / n,
            "episodes": float(int(self._episodes.item())),
        }
        if succ > 0:
            out["collision_degree"] = coll / succ
            out["collaboration_degree"] = collab / succ
        return out

    def window_sizes(self) -> Dict[str, int]:
        """Element counts of every buffer this object holds (bounded by construction)."""
        return {name: int(getattr(self, name).numel()) for name in
                ("success", "finished_time", "collision", "collaboration", "filled",
                 "_ep", "_last", "_hist")}


def drain_reward_terms(env: Any) -> Dict[str, float]:
    """Mean per-env, per-step value of each term of ``env.reward_buffer`` since the last call,
    plus ``average_step_reward`` (sum of the reward and punishment terms), as MAPush's
    OpenRL wrapper reports them; then zero the buffer as upstream's caller does."""
    buffer = env.reward_buffer
    steps = float(buffer.get("step_count", 0) or 0)
    terms = {}  # type: Dict[str, float]
    if steps <= 0:
        return terms
    total = 0.0
    for key, value in list(buffer.items()):
        if key == "step_count":
            continue
        mean = float(value) / (env.num_envs * steps)
        terms[key] = mean
        if "reward" in key or "punishment" in key:
            total += mean
        buffer[key] = 0
    buffer["step_count"] = 0
    terms["average_step_reward"] = total
    return terms
