"""PPO through OpenRL: MAPush's recipe (``openrl_ws/train.py``) inside a run directory."""
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np
import torch

from openrl.drivers.onpolicy_driver import OnPolicyDriver
from openrl.modules.common import PPONet
from openrl.runners.common import PPOAgent
from openrl.utils.callbacks.checkpoint_callback import CheckpointCallback
from openrl.utils.logger import Logger

from mapush import schema, sim
from mapush.checkpoints import policy as policy_file
from mapush.envs import step_record
from mapush.envs.openrl_env import OpenRLEnv, to_env_actions
from mapush.errors import UsageError
from mapush.common import phases
from mapush.common.atomic import write_json
from mapush.checkpoints.store import atomic_checkpoint, checkpoints_dir
from mapush.run.context import PROGRESS_FILE, RunContext, report_progress, start_wandb, \
    training_videos
from mapush.provenance import world_note
from mapush.run import ranks
from mapush.run.watchdog import MemoryWatchdog
from mapush.spec import RunSpec
from mapush.trainers.openrl_config import openrl_config, plain_config

NAME_PREFIX = "rl_model"  # OpenRL's checkpoint names: rl_model_<step>_steps
RESOLVED_CONFIG = "openrl_config.json"


class RunLogger(Logger):
    """OpenRL's Logger writing into the run directory: TensorBoard events in
    ``<run_dir>/logs/`` (one event file, tags by the shared convention), text log in
    ``<run_dir>/log.txt`` and on stderr, wandb only when asked (no entity of anyone's)."""

    def __init__(self, cfg: Any, spec: RunSpec) -> None:
        self.spec = spec
        super().__init__(cfg, project_name="MAPush", scenario_name=spec.task, wandb_entity=None,
                         exp_name=spec.object, log_path=str(spec.run_dir),
                         use_wandb=spec.use_wandb, use_tensorboard=True)

    def _init(self) -> None:
        from tensorboardX import SummaryWriter

        run_dir = Path(self.log_path)
        self.log_dir = str(run_dir / "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        root = logging.getLogger()
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        fmt = logging.Formatter("%(asctime)s [%(levelname)s] %(message)s")
        for handler in (logging.StreamHandler(sys.stderr),
                        logging.FileHandler(str(run_dir / "log.txt"))):
            handler.setFormatter(fmt)
            root.addHandler(handler)
        if not schema.verbose():  # each update's losses: in log.txt and TensorBoard
            root.handlers[0].addFilter(lambda record: not record.getMessage().startswith("step "))
        root.setLevel(logging.INFO)
        self.writter = SummaryWriter(self.log_dir)
        self.writter.add_text("mapush/isaacgym", world_note(), 0)
        self.progress, self.success = open(str(run_dir / PROGRESS_FILE), "a"), None
        if self.use_wandb:
            start_wandb(self.spec, plain_config(self.cfg))

    def log_scalar(self, tag: str, value: float, step: int) -> None:
        self.writter.add_scalar(tag, float(value), int(step))
        self.success = float(value) if tag == "metrics/success_rate" else self.success
        if self.use_wandb:
            import wandb

            wandb.log({tag: float(value)}, step=int(step))

    def log_info(self, infos: Dict[str, Any], step: int) -> None:
        """OpenRL's losses become ``train/<name>``; names with a ``/`` are kept."""
        lines = []
        for key, value in infos.items():
            if isinstance(value, torch.Tensor):
                value = value.item()
            if not isinstance(value, (int, float)):
                value = float(np.mean(value))
            tag = key if "/" in key else "train/" + key
            self.log_scalar(tag, value, step)
            lines.append("%s=%.4g" % (tag, value))
        if lines:
            logging.info("step %d: %s", step, " ".join(lines))

    def log_learner_info(self, leaner_id: int, infos: Dict[str, Any], step: int) -> None:
        self.log_info(infos, step)

    def flush(self) -> None:
        self.writter.flush()

    def close(self) -> None:
        self.writter.close()
        self.progress.close()
        if self.use_wandb:
            import wandb

            wandb.finish()


def use_module(agent: Any, module: Any) -> None:
    agent.net.module = module
    agent.net.reset()


def init_weights(agent: Any, source: Any) -> None:
    """``--init-from``: weights and normaliser statistics (docs/architecture.md, "Modules")."""
    target = agent.net.module
    for name, model in source.models.items():
        owner = target.models.get(name)
        if owner is None:
            raise UsageError("--init-from: the checkpoint has %r, this PPO network has none"
                             % name)
        result = owner.load_state_dict(model.state_dict(), strict=False)
        stray = [key for key in list(result.missing_keys) + list(result.unexpected_keys)
                 if key.split(".", 1)[0] not in policy_file.VALUE_NORMS]
        if stray:
            raise UsageError("--init-from: the checkpoint's %r does not fit this PPO network "
                             "(%s)" % (name, ", ".join(stray[:4])))
    for where, stats in policy_file.normalizer_stats(source).items():
        model, attr = where.split(".", 1)
        norm = getattr(target.models[model], attr, None)
        if norm is None:
            raise UsageError("--init-from: the checkpoint's %s has a value normaliser, this "
                             "PPO network none (use_valuenorm)" % model)
        with torch.no_grad():
            for stat, value in stats.items():
                mine = getattr(norm, stat)
                mine.copy_(value.to(device=mine.device, dtype=mine.dtype))


def resumable_driver(start_update: int, start_step: int, made: Dict[str, Any]) -> type:
    """OpenRL's on-policy driver starting at update ``start_update``
    (docs/architecture.md, "Modules"); ``made["driver"]``: the one made (step.json reads it)."""

    class ResumedDriver(OnPolicyDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super(ResumedDriver, self).__init__(*args, **kwargs)
            self.agent.num_time_steps = start_step
            made["driver"] = self

        def run(self) -> None:
            per_update = self.episode_length * self.learner_n_rollout_threads
            self.episodes = max(1, int(self.num_env_steps) // per_update)
            self.reset_and_buffer_init()
            self.real_step = 0
            for episode in range(start_update, self.episodes):
                self.episode = episode
                if not self._inner_loop():
                    break

    return ResumedDriver


class RunCallback(CheckpointCallback):
    """OpenRL's checkpoint callback for a run directory (docs/architecture.md, "Modules")."""

    def __init__(self, ctx: RunContext, run_logger: RunLogger, cfg: Any, adapter: OpenRLEnv,
                 start_step: int, start_update: int) -> None:
        num_envs, self.stats = adapter.parallel_env_num * ranks.world(), adapter.stats
        interval = int(ctx.spec.checkpoint_interval)
        super(RunCallback, self).__init__(save_freq=max(1, interval // max(1, num_envs)),
                                          save_path=str(checkpoints_dir(ctx.run_dir)),
                                          name_prefix=NAME_PREFIX)
        self.ctx, self.interval, self.run_logger, self.cfg = ctx, interval, run_logger, cfg
        self.num_envs, self.update, self.trained_steps = num_envs, start_update, start_step
        self.last_saved = start_step if ctx.resume_path else -1
        self.watchdog = MemoryWatchdog(ctx.spec.rl_device, run_logger.log_scalar, every=10,
                                       warmup=5)
        self._rollout_done = False
        self._stop = False  # agreed by every rank at an update boundary (mapush.run.ranks)
        self._clock = (time.time(), start_step)

    def _on_training_start(self) -> None:
        phases.mark("first_step")
        self._clock = (time.time(), self.agent.num_time_steps * ranks.world())

    def _on_step(self) -> bool:
        return not (self._stop if ranks.world() > 1 else self.ctx.stop.requested)

    def _on_rollout_end(self) -> None:
        self._rollout_done = True
        phases.mark("training")  # the update follows

    def _on_rollout_start(self) -> None:
        self._after_update()
        self._stop = ranks.agree(self.ctx.stop.requested)

    def _on_training_end(self) -> None:
        self._after_update()
        self.save()

    def _after_update(self) -> None:
        if not self._rollout_done:
            return
        self._rollout_done = False
        self.update += 1
        steps = int(self.agent.num_time_steps) * ranks.world()  # all ranks' env steps
        self.trained_steps = steps
        now = time.time()
        then, before = self._clock
        fps = (steps - before) / (now - then) if now > then else 0.0
        self.run_logger.log_scalar("perf/env_steps_per_s", fps, steps)
        self._clock = (now, steps)
        spec = self.ctx.spec
        report_progress(self.run_logger.progress, "%s %s" % (spec.algo, spec.task), self.update,
                        int(spec.steps) // (int(self.cfg.episode_length) * self.num_envs), steps,
                        int(spec.steps), fps, self.run_logger.success)
        self.watchdog.sample(self.update, steps)
        if steps // self.interval > max(self.last_saved, 0) // self.interval:
            self.save()

    def save(self) -> None:
        step = int(self.trained_steps)
        if step == self.last_saved or ranks.rank() > 0:  # rank 0 alone writes the run
            return
        name = "%s_%d_steps" % (self.name_prefix, step)
        spec = self.ctx.spec
        meta = {"step": step, "algo": spec.algo, "update": self.update, "task": spec.task,
                "object": spec.object, "num_envs": self.num_envs // ranks.world(),
                "ranks": ranks.world(),
                "episode_length": int(self.cfg.episode_length), "episodes": self.stats.episodes(),
                "use_linear_lr_decay": bool(self.cfg.use_linear_lr_decay),
                # each optimizer's learning rate now (after OpenRL's linear decay, if on)
                "lr": {key: float(opt.param_groups[0]["lr"]) for key, opt in getattr(
                    self.agent.net.module, "optimizers", {}).items() if opt.param_groups},
                "initial_lr": {"policy": float(self.cfg.lr), "critic": float(self.cfg.critic_lr)}}
        phases.mark("checkpoint")
        with atomic_checkpoint(self.ctx.run_dir, name, meta) as tmp:
            self.agent.save(str(tmp))
        self.run_logger.flush()
        self.last_saved = step
        logging.info("checkpoint %s (step %d)", checkpoints_dir(self.ctx.run_dir) / name, step)
        phases.mark("training")


def train(ctx: RunContext) -> int:
    spec = ctx.spec
    cfg = openrl_config(spec, spec.config)
    env, _env_cfg = sim.make_env(spec, fast_step=cfg.mqe_fast_step)
    made = {}  # type: Dict[str, Any]
    step_record.watch(env, spec.run_dir, made)  # which step graphs ran (OpenRL's act's too)
    adapter = OpenRLEnv(env, device_rollout=cfg.device_rollout)
    device = torch.device(spec.rl_device)
    net = PPONet(adapter, cfg=cfg, device=device)
    agent = PPOAgent(net)

    per_update = int(cfg.episode_length) * adapter.parallel_env_num * ranks.world()
    start_step = ctx.start_step  # all ranks' env steps (each rank counts its own)
    adapter.videos = training_videos(spec, env, start_step)
    adapter.stats.episodes_before = int(ctx.resume_meta.get("episodes", 0))
    if ctx.resume_path is not None:
        use_module(agent, policy_file.load_module(ctx.resume_path, device, "--resume"))
        print("mapush: resuming from %s at step %d" % (ctx.resume_path, start_step),
              file=sys.stderr)
        before = ctx.resume_meta.get("episode_length")
        if before is not None and int(before) != int(cfg.episode_length):
            print("mapush: warning: the checkpoint was trained with episode_length %s, this "
                  "run uses %s (pass the run's --config again to keep it)"
                  % (before, cfg.episode_length), file=sys.stderr)
    elif spec.init_from:
        init_weights(agent, policy_file.load_module(spec.init_from, device, "--init-from"))
        print("mapush: policy and value weights from %s; fresh optimizer, step 0"
              % spec.init_from, file=sys.stderr)
    ranks.broadcast(agent.net.module.models.values())  # rank 0's initial weights
    start_update = start_step // per_update
    total_updates = max(1, int(spec.steps) // per_update)
    if start_update >= total_updates and ctx.resume_path is not None:
        print("mapush: %s is at step %d, --steps %d is reached; nothing to train (raise "
              "--steps to continue)" % (ctx.resume_path, start_step, spec.steps),
              file=sys.stderr)
        return 0
    if spec.steps % per_update:
        print("mapush: --steps %d is not a multiple of episode_length x num_envs x ranks = %d; "
              "training %d steps" % (spec.steps, per_update, total_updates * per_update),
              file=sys.stderr)

    logger = RunLogger(cfg, spec)
    write_json(ctx.run_dir / RESOLVED_CONFIG, plain_config(cfg))
    callback = RunCallback(ctx, logger, cfg, adapter, start_step, start_update)
    trained = False
    try:
        agent.train(total_time_steps=total_updates * per_update // ranks.world(), logger=logger,
                    callback=callback, driver_class=resumable_driver(
                        start_update, start_step // ranks.world(), made))
        ranks.check_same(agent.net.module.models.values())
        trained = True
    finally:
        adapter.close()
        try:
            logger.close()
        except OSError:
            if trained:  # else the failure in flight (a full disk, say) is the one to report
                raise
    how = "stopped" if ctx.stop.requested else "finished"
    if ranks.rank() == 0:
        print("mapush: training %s at step %d; checkpoints in %s"
              % (how, callback.trained_steps, checkpoints_dir(ctx.run_dir)), file=sys.stderr)
    return 0


def load_policy(checkpoint: Path, env: Any, spec: RunSpec) -> Any:
    """The policy of ``checkpoint`` that ``mapush eval`` drives: obs -> env actions."""
    user_config = spec.config if spec.config and Path(spec.config).is_file() else None
    if spec.config and user_config is None:
        print("mapush eval: the run's --config %s is gone; using the shipped ppo.yaml"
              % spec.config, file=sys.stderr)
    agent = PPOAgent(PPONet(OpenRLEnv(env), cfg=openrl_config(spec, user_config),
                            device=spec.rl_device))
    use_module(agent, policy_file.load_module(checkpoint, spec.rl_device, "--checkpoint"))

    def policy(obs: Any) -> Any:
        actions, _ = agent.act(obs, deterministic=True)
        return to_env_actions(actions, env.device)

    return policy

