"""A GPU-resident double of MQE's ``go1push_mid`` env, cheap and fixed in cost.

The benchmark must measure our layer, not the simulator, so ``step`` costs a fixed, small,
known amount of device work and never waits for the device: no Python loop over envs, no
``.item()``/``float()``/boolean-mask indexing (each of those is a host sync), no allocation
that grows. One step is a fixed sequence of 34 torch ops (31 kernels, 1 device copy, 2 views) over
at most ``num_envs x num_agents x obs_dim`` floats, plus an optional fixed busy-wait on the
device (``physics_us``, ``torch.cuda._sleep``) that stands in for PhysX.

It follows the interface of docs/upstream.md and of ``tests/doubles/mqe`` (obs
``(num_envs, num_agents, 2 + 3 * num_agents)``, actions ``(num_envs, num_agents, 3)`` on
``env.device``, reward ``(num_envs, num_agents)``, termination ``(num_envs,)`` bool, the
episode buffers, ``reward_buffer``, ``dt``, ``max_episode_length``). ``reward_buffer`` sums
stay on the device as 0-d tensors: the caller's ``float()`` at log time is the only copy.

Episodes are deterministic so every adapter sees the same dones: even envs succeed after
``success_step + (i // 2) % 8`` steps, odd envs time out after ``max_episode_length`` steps;
every fourth env counts collision steps and every third collaboration steps in its first
episode, and the calculator's ``init_*`` buffers record each env's first episode, as MQE's
counters do. (Counts were 29 ops / 26 kernels before those buffers were added: the results
in ``results/`` of 2026-11-21 were measured then.)
"""
from typing import Any, Dict, Optional

import torch
from gym import spaces

KERNELS_PER_STEP = 31  # kernels one step() launches, plus one device copy (physics_us: +1)


def _cycles_per_us(device: torch.device) -> float:
    """GPU clock cycles per microsecond, measured once with ``torch.cuda._sleep``."""
    cycles = 2000000
    with torch.cuda.device(device):
        torch.cuda._sleep(cycles)  # warm-up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / (start.elapsed_time(end) * 1000.0)


class GpuMqeDouble(object):
    """The env as MQE's wrapper exposes it; everything lives on ``device``."""

    def __init__(self, num_envs: int, device: Any = "cuda:0", num_agents: int = 2,
                 max_episode_length: int = 100, success_step: int = 20,
                 physics_us: float = 0.0, dt: float = 0.1) -> None:
        self.num_envs = int(num_envs)
        self.num_agents = int(num_agents)
        self.device = torch.device(device)
        self.dt = float(dt)
        self.max_episode_length = int(max_episode_length)
        self.obs_dim = 2 + 3 * self.num_agents
        self.observation_space = spaces.Box(low=-float("inf"), high=float("inf"),
                                            shape=(self.obs_dim,), dtype=float)
        self.action_space = spaces.Box(low=-1, high=1, shape=(3,), dtype=float)
        self.physics_cycles = 0
        if physics_us > 0 and self.device.type == "cuda":
            self.physics_cycles = int(physics_us * _cycles_per_us(self.device))

        n, dev = self.num_envs, self.device
        ids = torch.arange(n, device=dev)
        even = (ids % 2) == 0
        self._success_at = torch.where(even, success_step + (ids // 2) % 8,
                                       torch.full_like(ids, self.max_episode_length + 1))
        self._collide = ((ids % 4) == 0).float()
        self._collab = ((ids % 3) == 0).float()
        self.finished_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.reset_buf = torch.ones(n, dtype=torch.long, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.collision_degree_buf = torch.zeros(n, dtype=torch.float, device=dev)
        self.collaboration_degree_buf = torch.zeros(n, dtype=torch.float, device=dev)
        # The calculator's first-episode buffers, never reset (legged_robot_field.py:24-31).
        self.init_reset_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.init_finished_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.init_episode_length_buf = torch.full((n,), self.max_episode_length,
                                                  dtype=torch.long, device=dev)
        self._first = torch.ones(n, dtype=torch.float, device=dev)
        self._zero = torch.zeros((), device=dev)
        self.reward_buffer = {}  # type: Dict[str, Any]
        for key in ("distance_to_target_reward", "approach_to_box_reward",
                    "collision_punishment"):
            self.reward_buffer[key] = self._zero.clone()
        self.reward_buffer["step_count"] = 0
        self._state = torch.zeros(n, self.num_agents, self.obs_dim, device=dev)
        self.steps = 0

    def reset(self) -> torch.Tensor:
        self._state.zero_()
        self.episode_length_buf.zero_()
        return self._state.clone()

    def step(self, actions: torch.Tensor, next_target_pos: Optional[Any] = None) -> Any:
        """A fixed sequence of tensor ops, no host sync (see the module docstring)."""
        self.steps += 1
        if self.physics_cycles:
            torch.cuda._sleep(self.physics_cycles)
        actions = torch.clamp(actions, -1.0, 1.0)
        self.episode_length_buf += 1
        length = self.episode_length_buf
        self.collision_degree_buf.add_(self._collide * self._first)
        self.collaboration_degree_buf.add_(self._collab * self._first)
        self.finished_buf = length >= self._success_at
        termination = self.finished_buf | (length >= self.max_episode_length)
        reward = (actions - 0.5).pow(2).sum(dim=2).neg()
        reward = reward + 10.0 * self.finished_buf.unsqueeze(1)
        buf = self.reward_buffer
        buf["distance_to_target_reward"] = buf["distance_to_target_reward"] + reward.sum()
        buf["approach_to_box_reward"] = buf["approach_to_box_reward"] - actions.abs().sum()
        buf["step_count"] += 1
        newly = self.finished_buf & ~self.init_reset_buf
        self.init_finished_buf |= newly
        self.init_episode_length_buf = torch.where(newly, length, self.init_episode_length_buf)
        self.init_reset_buf |= termination
        self._first.mul_((~termination).float())
        self.reset_buf = termination.long()
        self._state[:, :, :3] = actions
        self.episode_length_buf.masked_fill_(termination, 0)
        return self._state.clone(), reward, termination, {}
