"""The baseline: a HARL env adapter written the way incident 001 describes the user's first one.

Used only by the benchmark, to measure what our adapters save. It does, on purpose, what
incident 001's ``harl/envs/mapush/mapush_env.py`` did each step:

- a separate ``.cpu().numpy()`` for each returned array (obs, share obs, rewards, dones);
- a Python loop over all envs that checks each env's done flag and, for each finished env,
  reads its episode buffers one element at a time with ``.item()`` (one host sync each);
- statistics appended to Python lists (emptied only when the logger asks for them);
- a fresh list of per-env info dicts ``[{0: {}}, ...]`` every step.

The interface is HARL's (docs/upstream.md): ``reset() -> (obs, share_obs, None)``,
``step(actions) -> (obs, share_obs, rewards, dones, infos, None)``, numpy arrays with a
leading ``n_envs`` axis; ``actions`` arrive as ``(n_envs, n_agents, act_dim)``.
"""
from typing import Any, Dict, List

import numpy as np
import torch
from gym import spaces


class SeedStyleHARLEnv(object):
    def __init__(self, env: Any) -> None:
        self.env = env
        self.n_envs = env.num_envs
        self.n_agents = env.num_agents
        obs_dim = env.observation_space.shape[0]
        share = spaces.Box(low=-np.inf, high=np.inf, shape=(obs_dim * self.n_agents,),
                           dtype=np.float32)
        self.observation_space = [env.observation_space] * self.n_agents
        self.share_observation_space = [share] * self.n_agents
        self.action_space = [env.action_space] * self.n_agents
        self.reset_statistics()

    def reset_statistics(self) -> None:
        self.episode_success = []  # type: List[float]
        self.episode_lengths = []  # type: List[float]
        self.episode_collision = []  # type: List[float]
        self.episode_collaboration = []  # type: List[float]

    def get_statistics(self) -> Dict[str, float]:
        if not self.episode_success:
            return {}
        return {"success_rate": float(np.mean(self.episode_success)),
                "episode_length": float(np.mean(self.episode_lengths)),
                "collision_degree": float(np.mean(self.episode_collision)),
                "collaboration_degree": float(np.mean(self.episode_collaboration))}

    def _share(self, obs: torch.Tensor) -> torch.Tensor:
        flat = obs.reshape(self.n_envs, 1, -1)
        return flat.repeat(1, self.n_agents, 1)

    def reset(self) -> Any:
        obs = self.env.reset()
        return obs.cpu().numpy(), self._share(obs).cpu().numpy(), None

    def step(self, actions: np.ndarray) -> Any:
        actions_torch = torch.from_numpy(actions).to(self.env.device)
        obs, reward, termination, _info = self.env.step(actions_torch)
        obs_np = obs.cpu().numpy()
        state_np = self._share(obs).cpu().numpy()
        rewards_np = reward.cpu().numpy()[:, :, None]
        dones_np = termination.cpu().numpy()[:, None].repeat(self.n_agents, axis=1)

        env = self.env
        for env_idx in range(self.n_envs):
            if dones_np[env_idx, 0]:
                length = env.episode_length_buf[env_idx].item()
                self.episode_success.append(float(env.finished_buf[env_idx].item()))
                self.episode_lengths.append(float(length))
                self.episode_collision.append(
                    env.collision_degree_buf[env_idx].item() / max(length, 1))
                self.episode_collaboration.append(
                    env.collaboration_degree_buf[env_idx].item() / max(length, 1))

        infos_list = [{0: {}} for _ in range(self.n_envs)]
        return obs_np, state_np, rewards_np, dones_np, infos_list, None

    def close(self) -> None:
        pass
