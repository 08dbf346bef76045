"""Training statistics of the paper's metrics, computed on the env's device in bounded windows.

How it works: docs/architecture.md, "Training statistics"."""
from typing import Any, Dict

import torch

from mapush.run import ranks

DEFAULT_WINDOW = 1000
DEFAULT_CAPACITY = 256
METRICS = ("success_rate", "finished_time")


class EpisodeStats:
    def __init__(self, num_envs: int, device: Any, window: int = DEFAULT_WINDOW,
                 dt: float = 1.0, max_episode_length: float = 1.0,
                 capacity: int = DEFAULT_CAPACITY) -> None:
        # At least one slot per env, so one step can never overwrite its own results.
        self.size = max(int(window), int(num_envs))
        self.num_envs, self.device, self.dt = int(num_envs), torch.device(device), float(dt)
        self.max_episode_length = float(max_episode_length)
        self.capacity = max(1, int(capacity))
        n, dev = self.num_envs, self.device
        ring = lambda dtype: torch.zeros(self.size + 1, dtype=dtype, device=dev)  # noqa: E731
        self.success = ring(torch.float32)
        self.finished_time = ring(torch.float32)
        self.filled = ring(torch.bool)
        self.cursor = torch.zeros((), dtype=torch.long, device=dev)
        self._episodes = torch.zeros((), dtype=torch.long, device=dev)
        self.episodes_before = 0  # a resumed run's episodes (its checkpoint's meta.json)
        self._ep = torch.zeros(n, dtype=torch.float32, device=dev)  # running episode lengths
        # Pending steps: rows done, finished.
        self._hist = torch.zeros(self.capacity, 2, n, dtype=torch.float32, device=dev)
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
        self._pending += 1

    def flush(self) -> None:
        """Fold the pending steps in, exactly as that many one-step updates would."""
        steps = self._pending
        if steps == 0:
            return
        hist = self._hist[:steps]
        done = hist[:, 0] > 0.5                                   # (T, n)
        finished = hist[:, 1] > 0.5
        t = self._t[:steps]
        # First step (within this batch) of the episode running at each step; 0 with
        # ``carry`` set means the episode began before the batch.
        starts = torch.zeros_like(t)
        starts[1:] = torch.where(done[:-1], t[1:], torch.zeros_like(t[1:]))
        first = torch.cummax(starts, dim=0).values
        carry = first == 0
        length = (t + 1 - first).float() + carry * self._ep.unsqueeze(0)

        success = finished & done
        finished_time = torch.where(success, length,
                                    torch.full_like(length, self.max_episode_length)) * self.dt
        flat_done = done.reshape(-1)
        order = torch.cumsum(flat_done.long(), 0) - 1
        total = order[-1] + 1
        keep = flat_done & (order >= total - self.size)  # later episodes win, as in sequence
        slots = torch.where(keep, (self.cursor + order) % self.size,
                            torch.full_like(order, self.size))
        self.success.scatter_(0, slots, success.reshape(-1).float())
        self.finished_time.scatter_(0, slots, finished_time.reshape(-1))
        self.filled.scatter_(0, slots, flat_done)
        self.cursor = (self.cursor + total) % self.size
        self._episodes = self._episodes + total
        self._ep.copy_(length[-1] * (~done[-1]).float())
        self._pending = 0

    def reset_episodes(self) -> None:
        """Forget the running episodes (the env was reset); finished ones stay."""
        self.flush()
        self._ep.zero_()

    def summary(self) -> Dict[str, float]:
        """Means over the window (one host copy); empty before the first episode ends."""
        self.flush()
        filled = self.filled[: self.size]
        stacked = torch.stack([
            filled.float(),
            self.success[: self.size] * filled,
            self.finished_time[: self.size] * filled,
        ]).sum(dim=1)
        n, succ, ftime = ranks.summed(stacked.tolist())  # every rank's episodes
        if n == 0:
            return {}
        return {
            "success_rate": succ / n,
            "finished_time": ftime / n,
            "episodes": float(self.episodes()),
        }

    def episodes(self) -> int:
        """Episodes ended in this run, across resumes (one host copy)."""
        self.flush()
        return self.episodes_before + int(self._episodes.item())


def first_episode_degrees(env: Any) -> Dict[str, float]:
    """Collision and collaboration degree of each env's first episode, as the calculator
    (docs/architecture.md, "Modules")."""
    won = env.init_finished_buf.reshape(-1).bool()
    out = {"envs_done": float(env.init_reset_buf.float().mean().item())}
    count = int(won.sum().item())
    if count == 0:
        return out
    length = env.init_episode_length_buf.reshape(-1)[won].float().clamp(min=1)
    out["collaboration_degree"] = float(
        (env.collaboration_degree_buf.reshape(-1)[won] / length).mean().item())
    if int(getattr(env, "num_obs", 0) or 0) != 0:
        out["collision_degree"] = float(
            (env.collision_degree_buf.reshape(-1)[won] / length).mean().item())
    return out


def training_metrics(stats: EpisodeStats, env: Any) -> Dict[str, float]:
    """What both adapters log as ``metrics/<name>``: the windowed episode statistics, and
    the first-episode degrees as ``first_episode/<name>``."""
    out = stats.summary()
    out.update(("first_episode/" + k, v) for k, v in first_episode_degrees(env).items())
    return out


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
    pooled = ranks.summed(list(terms.values()))  # the mean over every rank's envs
    return {key: value / ranks.world() for key, value in zip(terms, pooled)}
