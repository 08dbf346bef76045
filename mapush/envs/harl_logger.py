"""HARL's logger for ``mapush``: the paper's metrics, reward terms and speed to TensorBoard."""
import os
import time
from typing import Any, Dict, List, Optional

import torch
from harl.common.base_logger import BaseLogger

from mapush.run.context import PROGRESS_FILE, report_progress


def _float(value: Any) -> float:
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


class MAPushLogger(BaseLogger):
    def __init__(self, args: Dict[str, Any], algo_args: Dict[str, Any],
                 env_args: Dict[str, Any], num_agents: int, writter: Any, run_dir: str) -> None:
        # BaseLogger.__init__ would truncate progress.txt; a resumed run appends to it.
        self.args, self.algo_args, self.env_args = args, algo_args, env_args
        self.task_name = self.get_task_name()
        self.num_agents, self.writter, self.run_dir = num_agents, writter, run_dir
        self.log_file = open(os.path.join(str(run_dir), PROGRESS_FILE), "a", encoding="utf-8")
        self.envs = None  # type: Any
        # Resume: env steps and updates done before this process (set by the trainer).
        self.steps_before = 0
        self.episode_base = 0
        self.ranks = 1  # a run across ranks counts every rank's env steps

    def get_task_name(self) -> str:
        return str(self.env_args["task"])

    def attach(self, envs: Any) -> None:
        """The MAPush env whose ``episode_stats()``/``reward_terms()`` are logged."""
        self.envs = envs

    # ---------------------------------------------------------------- HARL callbacks
    def init(self, episodes: int) -> None:
        if self.envs is None:
            raise RuntimeError("MAPushLogger has no env: call logger.attach(runner.envs) "
                               "after building the runner (incident 001, bug 7)")
        self.start = time.time()
        self.episodes = episodes
        self.train_episode_rewards = None  # type: Optional[torch.Tensor]
        self._last_time = self.start
        self._last_steps = self.steps_before
        self.total_num_steps = self.steps_before

    def per_step(self, data: Any) -> None:
        """Episode returns, summed where the rollout is (numpy: on the host, no copy;
        train.device_rollout: on the device, no host sync per step). The adapter repeats one
        done per env across agents: column 0 is the env's."""
        rewards = torch.as_tensor(data[2])
        done_env = torch.as_tensor(data[3])[:, 0].bool()
        if self.train_episode_rewards is None:
            n, device = int(done_env.shape[0]), rewards.device
            self.train_episode_rewards = torch.zeros(n, dtype=torch.float64, device=device)
            self._done_sum = torch.zeros(n, dtype=torch.float64, device=device)
            self._done_count = torch.zeros(n, dtype=torch.long, device=device)
        self.train_episode_rewards += rewards.mean(dim=1).view(-1)
        self._done_sum += torch.where(done_env, self.train_episode_rewards,
                                      torch.zeros_like(self.train_episode_rewards))
        self._done_count += done_env
        self.train_episode_rewards.masked_fill_(done_env, 0.0)

    def episode_log(self, actor_train_infos: List[Dict[str, Any]],
                    critic_train_info: Dict[str, Any], actor_buffer: Any,
                    critic_buffer: Any) -> None:
        """Log everything for the update just done and print one progress line."""
        train = self.algo_args["train"]
        step = self.total_num_steps = self.steps_before + (int(self.episode) - self.episode_base) \
            * int(train["episode_length"]) * int(train["n_rollout_threads"]) * self.ranks
        now = time.time()
        fps = (step - self._last_steps) / max(now - self._last_time, 1e-9)
        self._last_steps, self._last_time = step, now

        critic_train_info = dict(critic_train_info)
        critic_train_info["average_step_rewards"] = critic_buffer.get_mean_rewards()
        self.log_train(actor_train_infos, critic_train_info)
        self.scalar("perf/env_steps_per_s", fps)

        summary = self.envs.episode_stats()
        for name, value in sorted(summary.items()):
            self.scalar("metrics/" + name, value)
        for term, value in sorted(self.envs.reward_terms().items()):
            self.scalar("reward/" + term, value)
        if self.train_episode_rewards is not None:
            count = int(self._done_count.sum())
            if count:
                self.scalar("metrics/episode_return", float(self._done_sum.sum()) / count)
                self._done_sum.zero_()
                self._done_count.zero_()
        self.writter.flush()

        report_progress(self.log_file, "%s %s" % (self.args["algo"], self.task_name),
                        self.episode, self.episodes, step, int(train["num_env_steps"]), fps,
                        summary.get("success_rate"))

    def log_train(self, actor_train_infos: List[Dict[str, Any]],
                  critic_train_info: Dict[str, Any]) -> None:
        sums = {}  # type: Dict[str, float]
        for agent_id, info in enumerate(actor_train_infos):
            for key, value in info.items():
                value = _float(value)
                self.scalar("train/agent%d/%s" % (agent_id, key), value)
                sums[key] = sums.get(key, 0.0) + value
        for key, value in sums.items():
            self.scalar("train/" + key, value / max(len(actor_train_infos), 1))
        for key, value in critic_train_info.items():
            self.scalar("train/" + key, _float(value))

    def scalar(self, tag: str, value: float, step: Optional[int] = None) -> None:
        self.writter.add_scalar(tag, float(value), self.total_num_steps if step is None
                                else int(step))
