"""The MQE env as the vectorised env OpenRL's ``PPONet``/``PPOAgent`` drive."""
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from mapush.envs.stats import DEFAULT_WINDOW, EpisodeStats, drain_reward_terms, training_metrics

# MAPush's recipe halves the policy's output before clipping it to the env's [-1, 1] box.
ACTION_SCALE = 0.5


def to_env_actions(actions: Any, device: Any, scale: float = ACTION_SCALE) -> torch.Tensor:
    """Policy output (numpy or tensor, ``(num_envs, num_agents, act_dim)``) -> the tensor
    ``env.step`` takes: scaled, clipped, float32 on the env's device."""
    act = torch.as_tensor(actions, dtype=torch.float32, device=device)
    return (act * scale).clamp(-1.0, 1.0)


class OpenRLEnv(object):
    """Wraps the env returned by :func:`mapush.sim.make_env` for OpenRL."""

    env_name = "go1push_mid"

    def __init__(self, env: Any, window: int = DEFAULT_WINDOW,
                 action_scale: float = ACTION_SCALE, device_rollout: bool = False) -> None:
        self.env = env
        self.device_rollout = device_rollout  # patches/openrl/03: step returns device tensors
        self.device = torch.device(str(env.device))
        self.parallel_env_num = int(env.num_envs)
        self.observation_space = env.observation_space
        # The high level (cfg.env.hie) is one centralized agent whose policy outputs a
        # sub-goal in Box(-10, 10, (2,)), as upstream's wrapper declares it
        # (openrl_ws/utils.py:43-45); the mid level has one agent per robot.
        cfg = getattr(env, "cfg", None)
        self.hierarchical = bool(getattr(getattr(cfg, "env", None), "hie", False))
        if self.hierarchical:
            from gym import spaces

            self.agent_num = 1
            self.action_space = spaces.Box(low=-10, high=10, shape=(2,), dtype=float)
        else:
            self.agent_num = int(env.num_agents)
            self.action_space = env.action_space
        self.action_scale = float(action_scale)
        self.stats = EpisodeStats.for_env(env, window=window)
        self.videos = None  # type: Any  # --record-video: a mapush.video.TrainingVideos

    # -- the interface OpenRL uses ------------------------------------------------------
    use_monitor = False

    @property
    def num_envs(self) -> int:
        return self.parallel_env_num

    def reset(self, seed: Optional[int] = None, **_kwargs: Any) -> np.ndarray:
        """All envs (MQE's reset takes no seed: the simulation was created with it)."""
        return self.env.reset().detach().cpu().numpy()

    def step(self, actions: Any, extra_data: Optional[Dict[str, Any]] = None,
             **_kwargs: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray, List[Dict[str, Any]]]:
        """One env step; obs, rewards and dones to the host in one copy, or kept on the device."""
        obs, reward, done, _info = (self.videos.step_env if self.videos else self.env.step)(
            to_env_actions(actions, self.device, self.action_scale))
        self.stats.update(self.env, done)
        n, a = self.parallel_env_num, self.agent_num
        flat = torch.cat([obs.reshape(n, -1).float(), reward.reshape(n, a).float(),
                          done.reshape(n, 1).float()], dim=1)
        host = flat if self.device_rollout else flat.detach().cpu().numpy()
        obs_dim, done_env = obs.shape[-1], host[:, -1:] > 0.5
        obs_np = host[:, : a * obs_dim].reshape(n, a, obs_dim)
        rewards = host[:, a * obs_dim: a * obs_dim + a].reshape(n, a, 1)
        dones = done_env.expand(n, a) if self.device_rollout else np.repeat(done_env, a, axis=1)
        return obs_np, rewards, dones, [{} for _ in range(n)]

    def batch_rewards(self, _buffer: Any = None) -> Dict[str, float]:
        """Reward terms since the last call and the recent episodes' metrics."""
        infos = {"reward/%s" % k: v for k, v in drain_reward_terms(self.env).items()}
        infos.update({"metrics/%s" % k: v for k, v in training_metrics(self.stats,
                                                                        self.env).items()
                      if k != "episodes"})
        return infos

    def close(self, **_kwargs: Any) -> None:
        """Drop the env without calling into it (MQE's ``close`` fails; incident 002)
        (docs/architecture.md, "Modules")."""
        if self.videos is not None:
            self.videos.close()
        self.__dict__["env"] = None

    def __getattr__(self, name: str) -> Any:
        # MQE's buffers (init_reset_buf, finished_buf, dt, ...) read through, as upstream's
        # gym.Wrapper did; only called for names not found on the adapter itself.
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
