"""Episode statistics of the paper (success rate, finished time, collision degree,
collaboration degree), computed on the env's device and kept in bounded windows.

One implementation serves both adapters. Each step costs a handful of tensor ops and no
host sync: finished episodes are scattered into fixed-size ring buffers (slot ``size`` is a
scratch slot that absorbs the writes of envs that did not finish). Only :meth:`summary`,
called at logging time, copies to the host. Nothing grows with the number of steps: this is
the fix for seed 001's Python lists that ate the GPU over hours.

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
METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree")


class EpisodeStats:
    def __init__(self, num_envs: int, device: Any, window: int = DEFAULT_WINDOW,
                 dt: float = 1.0, max_episode_length: float = 1.0) -> None:
        # At least one slot per env, so one step can never overwrite its own results.
        self.size = max(int(window), int(num_envs))
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.dt = float(dt)
        self.max_episode_length = float(max_episode_length)
        zeros = lambda dtype: torch.zeros(self.size + 1, dtype=dtype, device=self.device)  # noqa: E731
        self.success = zeros(torch.float32)
        self.finished_time = zeros(torch.float32)
        self.collision = zeros(torch.float32)
        self.collaboration = zeros(torch.float32)
        self.filled = zeros(torch.bool)
        self.cursor = torch.zeros((), dtype=torch.long, device=self.device)
        self.episodes = torch.zeros((), dtype=torch.long, device=self.device)
        env_zeros = lambda: torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)  # noqa: E731
        self.ep_len = env_zeros()
        self.ep_collision = env_zeros()
        self.ep_collaboration = env_zeros()
        self._last_collision = None  # type: Any
        self._last_collaboration = None  # type: Any
        self._ramp = torch.arange(self.num_envs, device=self.device)

    @classmethod
    def for_env(cls, env: Any, window: int = DEFAULT_WINDOW) -> "EpisodeStats":
        return cls(env.num_envs, env.device, window=window, dt=float(env.dt),
                   max_episode_length=float(env.max_episode_length))

    @staticmethod
    def _counter(env: Any, name: str) -> Any:
        return getattr(env, name).to(torch.float32)

    def update(self, env: Any, done: torch.Tensor) -> None:
        """Account one env step; ``done`` is the ``(num_envs,)`` termination mask."""
        done = done.reshape(-1).to(device=self.device, dtype=torch.bool)
        collision = self._counter(env, "collision_degree_buf")
        collaboration = self._counter(env, "collaboration_degree_buf")
        if self._last_collision is None:
            self._last_collision = torch.zeros_like(collision)
            self._last_collaboration = torch.zeros_like(collaboration)
        self.ep_len += 1
        self.ep_collision += (collision - self._last_collision).clamp(min=0)
        self.ep_collaboration += (collaboration - self._last_collaboration).clamp(min=0)
        self._last_collision = collision.clone()
        self._last_collaboration = collaboration.clone()

        success = env.finished_buf.reshape(-1).to(self.device, torch.bool) & done
        length = self.ep_len.clamp(min=1)
        finished_time = torch.where(success, self.ep_len,
                                    torch.full_like(self.ep_len, self.max_episode_length)) * self.dt
        # Ring positions for finished envs; the others write to the scratch slot.
        order = torch.cumsum(done.long(), 0) - 1
        slots = torch.where(done, (self.cursor + order) % self.size,
                            torch.full_like(self._ramp, self.size))
        self.success.scatter_(0, slots, success.float())
        self.finished_time.scatter_(0, slots, finished_time)
        self.collision.scatter_(0, slots, self.ep_collision / length)
        self.collaboration.scatter_(0, slots, self.ep_collaboration / length)
        self.filled.scatter_(0, slots, success | done)
        n_done = done.long().sum()
        self.cursor = (self.cursor + n_done) % self.size
        self.episodes = self.episodes + n_done
        keep = (~done).float()
        self.ep_len *= keep
        self.ep_collision *= keep
        self.ep_collaboration *= keep

    def summary(self) -> Dict[str, float]:
        """Means over the window (one host copy); empty before the first episode ends."""
        filled = self.filled[: self.size]
        stacked = torch.stack([
            filled.float(),
            self.success[: self.size] * filled,
            self.finished_time[: self.size] * filled,
            self.collision[: self.size] * (self.success[: self.size] > 0) * filled,
            self.collaboration[: self.size] * (self.success[: self.size] > 0) * filled,
        ]).sum(dim=1)
        n, succ, ftime, coll, collab = stacked.tolist()
        if n == 0:
            return {}
        out = {
            "success_rate": succ / n,
            "finished_time": ftime / n,
            "episodes": float(int(self.episodes.item())),
        }
        if succ > 0:
            out["collision_degree"] = coll / succ
            out["collaboration_degree"] = collab / succ
        return out

    def window_sizes(self) -> Dict[str, int]:
        """Element counts of every buffer this object holds (bounded by construction)."""
        return {name: int(getattr(self, name).numel()) for name in
                ("success", "finished_time", "collision", "collaboration", "filled",
                 "ep_len", "ep_collision", "ep_collaboration")}


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
