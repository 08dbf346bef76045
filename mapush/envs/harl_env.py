"""The MAPush env as HARL's on-policy runner drives it (``make_train_env("mapush", ...)``)."""
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from gym import spaces

from mapush.envs import step_record
from mapush.envs.stats import DEFAULT_WINDOW, EpisodeStats, drain_reward_terms, training_metrics
from mapush.sim import make_env
from mapush.spec import RunSpec
from mapush.registry import by_library


def _box(low: float, high: float, dim: int) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=(int(dim),), dtype=np.float32)


class MAPushHARLEnv(object):
    """HARL env over one MQE env: see the module docstring for the contract."""

    def __init__(self, env_args: Dict[str, Any], env: Any = None) -> None:
        self.env_args = dict(env_args)
        # checked by the schema (harl: env.state_type, env.team_reward) in the run's config
        self.state_type = str(self.env_args.get("state_type", "EP"))
        self.team_reward_kind = str(self.env_args.get("team_reward", "mean"))
        if env is None:  # else: a ready env (tests)
            # the run spec the trainer put in env_args["spec"]; without one (HARL's own
            # examples/train.py --env mapush), a spec from the plain env keys
            given, n_threads = self.env_args.get, int(self.env_args.get("n_threads", 1))
            if given("spec"):
                spec = RunSpec.from_dict(dict(given("spec"))).with_changes(num_envs=n_threads)
            else:
                spec = RunSpec(algo=str(given("algo", by_library("harl").algos[0])),
                               task=str(given("task", "go1push_mid")),
                               object=str(given("object", "cuboid")), num_envs=n_threads,
                               steps=1, seed=int(given("seed", 1)), run_dir=".",
                               sim_device=str(given("sim_device", "cuda:0")),
                               rl_device=str(given("rl_device", "cuda:0")))
            env, _cfg = make_env(spec, num_envs=spec.num_envs,
                                 fast_step=self.env_args.get("mqe_fast_step", True))
            if given("spec"):  # a managed run: its record says which step graphs ran
                step_record.watch(env, spec.run_dir)
        self.env = env
        self.device = torch.device(str(env.device))
        # train.device_rollout (patches/harl/05): tensors on the policy's device instead of
        # numpy, truncation as one array; off: HARL's numpy interface.
        self.device_rollout = bool(self.env_args.get("device_rollout", False))
        self.out_device = torch.device(str(self.env_args.get("rl_device") or env.device))
        self.n_envs = int(env.num_envs)
        self.n_agents = int(env.num_agents)
        wanted = self.env_args.get("n_threads")
        if wanted is not None and int(wanted) != self.n_envs:
            raise ValueError("MQE made %d envs, HARL's n_rollout_threads is %s"
                             % (self.n_envs, wanted))
        self.obs_dim = int(env.observation_space.shape[0])
        self.act_dim = int(env.action_space.shape[0])
        act_low = float(np.min(env.action_space.low))
        act_high = float(np.max(env.action_space.high))
        inf = float("inf")
        self.observation_space = [_box(-inf, inf, self.obs_dim) for _ in range(self.n_agents)]
        self.share_observation_space = [_box(-inf, inf, self.obs_dim * self.n_agents)
                                        for _ in range(self.n_agents)]
        self.action_space = [_box(act_low, act_high, self.act_dim) for _ in range(self.n_agents)]
        # FP: agent i sees its own obs first, then the others' in order (i+1, i+2, ...).
        ids = np.arange(self.n_agents)
        self._fp_order = (ids[:, None] + ids[None, :]) % self.n_agents
        self._fp_order_t = torch.as_tensor(self._fp_order, device=self.out_device)
        self.stats = EpisodeStats.for_env(env, window=int(self.env_args.get(
            "stats_window", DEFAULT_WINDOW)))
        # Read-only info dicts shared by all steps: only "bad_transition" (truncation) varies.
        self._info_ok = {a: {"bad_transition": False} for a in range(self.n_agents)}
        self._info_cut = {a: {"bad_transition": True} for a in range(self.n_agents)}
        self._infos_ok = [self._info_ok] * self.n_envs  # the common step: nothing cut
        self._no_timeout = torch.zeros(self.n_envs, dtype=torch.bool, device=self.device)
        self.closed, self.videos = False, None  # type: bool, Any  # --record-video

    # ----------------------------------------------------------------- HARL's interface
    def seed(self, seed: int) -> None:
        """MQE is seeded when it is built (``args.seed``); nothing to do here."""

    def reset(self) -> Tuple[np.ndarray, np.ndarray, None]:
        obs = self.env.reset()
        self.stats.reset_episodes()
        if self.device_rollout:
            obs_t = obs.reshape(self.n_envs, self.n_agents, self.obs_dim).to(
                device=self.out_device, dtype=torch.float32)
            return obs_t, self._share(obs_t), None
        packed = obs.reshape(self.n_envs, -1).to(torch.float32).cpu().numpy()
        obs_np = packed.reshape(self.n_envs, self.n_agents, self.obs_dim)
        return obs_np, self._share(obs_np), None

    def step(self, actions: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                          List[Dict[int, Dict[str, bool]]], None]:
        """``actions`` ``(n_envs, n_agents, act_dim)`` -> obs, share_obs, rewards
        ``(n_envs, n_agents, 1)``, dones ``(n_envs, n_agents)``, infos, None."""
        act = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        expected = (self.n_envs, self.n_agents, self.act_dim)
        if tuple(act.shape) != expected:
            raise ValueError("actions of shape %s, expected (n_envs, n_agents, act_dim) = %s"
                             % (tuple(act.shape), expected))
        obs, reward, termination, _info = (self.videos.step_env if self.videos
                                           else self.env.step)(act)
        done = termination.reshape(-1).to(torch.bool)
        self.stats.update(self.env, done)
        timeout = getattr(self.env, "time_out_buf", None)
        timeout = self._no_timeout if timeout is None else timeout.reshape(-1).to(torch.bool)
        n = self.n_envs
        if self.device_rollout:  # no host copy: HARL keeps the rollout on the device
            out = self.out_device
            obs_t = obs.reshape(n, self.n_agents, self.obs_dim).to(device=out, dtype=torch.float32)
            rewards_t = reward.reshape(n, self.n_agents, 1).to(device=out, dtype=torch.float32)
            dones_t = done.to(out).view(n, 1).expand(n, self.n_agents)
            return (obs_t, self._share(obs_t), rewards_t, dones_t,
                    {"bad_transition": (timeout & done).to(out)}, None)
        packed = torch.cat([
            obs.reshape(n, -1).to(torch.float32),
            reward.reshape(n, -1).to(torch.float32),
            done.to(torch.float32).unsqueeze(1),
            (timeout & done).to(torch.float32).unsqueeze(1),
        ], dim=1).cpu().numpy()  # the one host copy of this step
        width = self.n_agents * self.obs_dim
        obs_np = packed[:, :width].reshape(n, self.n_agents, self.obs_dim)
        rewards = packed[:, width:width + self.n_agents].reshape(n, self.n_agents, 1)
        done_np = packed[:, -2] > 0.5
        cut = packed[:, -1] > 0.5
        dones = np.repeat(done_np[:, None], self.n_agents, axis=1)
        infos = ([self._info_cut if c else self._info_ok for c in cut.tolist()]
                 if cut.any() else self._infos_ok)
        return obs_np, self._share(obs_np), rewards, dones, infos, None

    def team_reward(self, rewards: np.ndarray) -> np.ndarray:
        """The EP critic's reward ``(n_envs, 1)``: the agents' mean (or sum)
        (docs/architecture.md, "Modules")."""
        if self.team_reward_kind == "sum":
            return rewards.sum(axis=1)
        return rewards.mean(axis=1)

    def _share(self, obs: np.ndarray) -> np.ndarray:
        """Centralised critic input: EP, the same concatenation of all agents' obs for every
        agent; FP, that concatenation starting at the agent's own obs."""
        n = obs.shape[0]
        if isinstance(obs, torch.Tensor):
            if self.state_type == "EP":
                return obs.reshape(n, 1, -1).expand(n, self.n_agents, -1)
            return obs[:, self._fp_order_t].reshape(n, self.n_agents, -1)
        if self.state_type == "EP":
            flat = obs.reshape(n, 1, -1)
            return np.repeat(flat, self.n_agents, axis=1)
        return obs[:, self._fp_order].reshape(n, self.n_agents, -1)

    # ----------------------------------------------------------------- statistics
    def episode_stats(self) -> Dict[str, float]:
        """Means over recently finished episodes (one host copy; empty before any ends) and
        the first-episode degrees (``first_episode/<name>``)."""
        return training_metrics(self.stats, self.env)

    def reward_terms(self) -> Dict[str, float]:
        """Reward terms of ``env.reward_buffer`` since the last call (then zeroed)."""
        if self.env is None or not hasattr(self.env, "reward_buffer"):
            return {}
        return drain_reward_terms(self.env)

    def render(self, *_a: Any, **_k: Any) -> None:
        """Rendering is MQE's ``record_video``; HARL's render path is not used."""

    def close(self) -> None:
        """Drop the env without calling into Isaac Gym: Go1 has no ``close()`` and Isaac Gym
        tears down at process exit, which the child skips with ``os._exit`` (incident 002)."""
        if self.videos is not None:
            self.videos.close()
        self.closed, self.env = True, None

    @property
    def unwrapped(self) -> Optional[Any]:
        return self.env
