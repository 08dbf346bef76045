"""HAPPO, MAPPO and HATRPO on MAPush through HARL's on-policy runners."""
import contextlib
import copy
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

from mapush import schema
from mapush.errors import UsageError
from mapush.common import phases
from mapush.common.atomic import write_json
from mapush.checkpoints import unpickle
from mapush.checkpoints.store import atomic_checkpoint
from mapush.run.context import RunContext, start_wandb, training_videos
from mapush.provenance import world_note
from mapush.run import ranks
from mapush.run.watchdog import MemoryWatchdog
from mapush.sim import MissingDependency
from mapush.spec import RunSpec, config_label, user_yaml
from mapush.registry import check_owned, shipped_config

HARL_CONFIG = "harl_config.json"
OPTIMIZERS = "optimizers.pt"
ENV_NAME = "mapush"
# HARL runner per algorithm (harl/runners/__init__.py at the pin).
RUNNERS = {
    "happo": ("harl.runners.on_policy_ha_runner", "OnPolicyHARunner"),
    "hatrpo": ("harl.runners.on_policy_ha_runner", "OnPolicyHARunner"),
    "mappo": ("harl.runners.on_policy_ma_runner", "OnPolicyMARunner"),
}


# --------------------------------------------------------------------------- config
def _load_yaml(path: Path) -> Dict[str, Any]:
    data = user_yaml(path) or {}
    if not isinstance(data, dict):
        raise UsageError("%s: expected a YAML mapping of sections (train:, model:, "
                         "algo:, ...), got %s" % (config_label(path), type(data).__name__))
    return data


def merge_overrides(base: Dict[str, Any], override: Dict[str, Any], source: str,
                    prefix: str = "") -> Dict[str, Any]:
    """``base`` updated by ``override`` key by key; a key ``base`` lacks is a UsageError
    (a typo would otherwise be ignored silently)."""
    merged = dict(base)
    for key, value in override.items():
        where = prefix + str(key)
        if key not in base:
            raise UsageError("%s: unknown key %r; known here: %s" % (
                config_label(source), where, ", ".join(sorted(str(k) for k in base))))
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise UsageError("%s: %r is a section; give it as a mapping"
                                 % (config_label(source), where))
            merged[key] = merge_overrides(base[key], value, source, where + ".")
        else:
            merged[key] = value
    return merged


def load_config(spec: RunSpec) -> Dict[str, Any]:
    """The shipped config of the algorithm, ``--config`` overrides, then the spec's own
    options (seed, device, env count, steps), which always win."""
    config = shipped_config(spec.algo)
    if spec.config:
        override = _load_yaml(Path(spec.config))
        check_owned("harl", schema.flat(override), config_label(spec.config))
        config = merge_overrides(config, override, spec.config)
    config = copy.deepcopy(config)
    config["seed"].update(seed_specify=True, seed=int(spec.seed))
    config["device"]["cuda"] = spec.rl_device.startswith("cuda")
    config["train"].update(n_rollout_threads=int(spec.num_envs),
                           num_env_steps=int(spec.steps), model_dir=None)
    config["logger"]["log_dir"] = str(spec.run_dir)
    schema.check("harl", schema.flat(config), config_label(spec.config))
    if config["eval"].get("use_eval") or config["render"].get("use_render"):
        raise UsageError("--config %s: eval.use_eval and render.use_render are not supported "
                         "for MAPush; use 'mapush eval --checkpoint'" % spec.config)
    return config


resolved_config = load_config  # the run's HARL config (--print-config)


def split_config(spec: RunSpec, config: Dict[str, Any]
                 ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """HARL's ``(args, algo_args, env_args)`` from our config."""
    algo_args = {k: v for k, v in config.items() if k != "env"}
    env_args = dict(config.get("env", {}), task=spec.task, object=spec.object,
                    spec=spec.to_dict(), rl_device=spec.rl_device,
                    device_rollout=bool(config["train"].get("device_rollout", False)))
    args = {"algo": spec.algo, "env": ENV_NAME, "exp_name": spec.object}
    return args, algo_args, env_args


def write_harl_config(folder: Path, args: Any, algo_args: Any, env_args: Any) -> None:
    write_json(folder / HARL_CONFIG, {"main_args": args, "algo_args": algo_args,
                                      "env_args": env_args})


# --------------------------------------------------------------------------- runner
@contextlib.contextmanager
def _redirected(module: Any, run_dir: Path, device: Any) -> Iterator[None]:
    """While HARL's runner is built: its results folder is our run directory (TensorBoard
    under ``logs/``), its config goes to ``harl_config.json`` (``config.json`` is ours),
    and its device is the spec's ``--rl-device`` (HARL would pick ``cuda:0``)."""
    import torch

    def init_dir(*_args: Any, **_kwargs: Any) -> Tuple[str, str, str, Any]:
        from tensorboardX import SummaryWriter

        log_dir = run_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        return str(run_dir), str(log_dir), str(run_dir / "checkpoints"), \
            SummaryWriter(str(log_dir))

    def save_config(args: Any, algo_args: Any, env_args: Any, _where: Any) -> None:
        write_harl_config(run_dir, args, algo_args, env_args)

    def init_device(args: Dict[str, Any]) -> Any:
        torch.set_num_threads(int(args["torch_threads"]))
        if str(device).startswith("cuda") and args.get("cuda_deterministic"):
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
        return torch.device(device)

    names = ("init_dir", "save_config", "init_device")
    saved = {name: getattr(module, name) for name in names}
    module.init_dir, module.save_config, module.init_device = init_dir, save_config, init_device
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def check_harl() -> None:
    """HARL importable and patched for ``mapush`` (else HARL fails with a bare
    ``NotImplementedError`` deep in ``make_train_env``)."""
    try:
        import harl.envs as harl_envs
    except ImportError as exc:
        raise MissingDependency(
            "HARL is not importable (%s): the image installs it at HARL_COMMIT of "
            "env/pins.env; elsewhere put a HARL checkout patched by 'patches/apply harl' on "
            "PYTHONPATH" % exc)
    if ENV_NAME not in getattr(harl_envs, "LOGGER_REGISTRY", {}):
        raise MissingDependency(
            "HARL at %s does not know the env 'mapush': apply our patches with "
            "'patches/apply harl <HARL checkout>'" % Path(harl_envs.__file__).parent.parent)


def build_runner(spec: RunSpec, config: Dict[str, Any]) -> Any:
    base = importlib.import_module("harl.runners.on_policy_base_runner")
    module_name, class_name = RUNNERS[spec.algo]
    runner_cls = getattr(importlib.import_module(module_name), class_name)
    args, algo_args, env_args = split_config(spec, config)
    with _redirected(base, Path(spec.run_dir), spec.rl_device), contextlib.redirect_stdout(
            sys.stdout if schema.verbose() else None):
        runner = runner_cls(args, algo_args, env_args)
    runner.logger.attach(runner.envs)
    return runner


def save_checkpoint(runner: Any, ctx: RunContext, config: Dict[str, Any],
                    state: Dict[str, int]) -> Path:
    """HARL's model files plus optimizer states, config and meta, published atomically."""
    import torch

    if ranks.rank() > 0:  # rank 0 alone writes the run
        return ctx.run_dir
    phases.mark("checkpoint")
    lrs = {"actor%d" % i: float(actor.actor_optimizer.param_groups[0]["lr"])
           for i, actor in enumerate(runner.actor)}
    lrs["critic"] = float(runner.critic.critic_optimizer.param_groups[0]["lr"])
    meta = dict(state, algo=ctx.spec.algo, trainer="harl", lr=lrs,
                episode_length=int(config["train"]["episode_length"]),
                episodes=runner.envs.stats.episodes(),
                n_rollout_threads=int(config["train"]["n_rollout_threads"]), ranks=ranks.world(),
                use_linear_lr_decay=bool(config["train"]["use_linear_lr_decay"]))
    name = "step-%012d" % state["step"]
    with atomic_checkpoint(ctx.run_dir, name, meta) as tmp:
        saved = runner.save_dir
        runner.save_dir = str(tmp)
        try:
            runner.save()  # actor_agent<i>.pt, critic_agent.pt, value_normalizer.pt
        finally:
            runner.save_dir = saved
        torch.save({"actors": [a.actor_optimizer.state_dict() for a in runner.actor],
                    "critic": runner.critic.critic_optimizer.state_dict()},
                   str(tmp / OPTIMIZERS))
        write_harl_config(tmp, *split_config(ctx.spec, config))
    return ctx.run_dir / "checkpoints" / name


def restore_checkpoint(runner: Any, path: Path, device: Any, optimizers: bool = True) -> None:
    """Load what :func:`save_checkpoint` wrote (models, value normaliser and, unless
    ``optimizers`` is False as for ``--init-from``, optimizers)."""
    def load(name: str) -> Any:
        if not (path / name).is_file():
            raise UsageError("%s has no %s: a checkpoint of another algorithm or agent count"
                             % (path, name))
        return unpickle.load(path / name, device, "--resume" if optimizers else "--init-from")

    for i, actor in enumerate(runner.actor):
        actor.actor.load_state_dict(load("actor_agent%d.pt" % i))
    runner.critic.critic.load_state_dict(load("critic_agent.pt"))
    if runner.value_normalizer is not None and (path / "value_normalizer.pt").is_file():
        runner.value_normalizer.load_state_dict(load("value_normalizer.pt"))
    if optimizers and (path / OPTIMIZERS).is_file():
        optim = load(OPTIMIZERS)
        for actor, state in zip(runner.actor, optim["actors"]):
            actor.actor_optimizer.load_state_dict(state)
        runner.critic.critic_optimizer.load_state_dict(optim["critic"])


# --------------------------------------------------------------------------- training
def plan(spec: RunSpec, config: Dict[str, Any], resume_meta: Dict[str, Any]
         ) -> Tuple[int, int, int, int]:
    """``(start_step, start_update, total_updates, steps_per_update)``; the LR schedule runs
    over ``total_updates`` so that a resumed run continues it."""
    per_update = int(config["train"]["episode_length"]) * int(spec.num_envs) * int(spec.ranks)
    start_step = int(resume_meta.get("step", 0))
    start_update = int(resume_meta.get("update", 0))
    if resume_meta and resume_meta.get("algo") not in (None, spec.algo):
        raise UsageError("--resume: the checkpoint is from --algo %s, not %s"
                         % (resume_meta.get("algo"), spec.algo))
    if start_step == 0 and spec.steps < per_update:
        raise UsageError("--steps %d is less than one rollout (episode_length x --num-envs%s = "
                         "%d steps): raise --steps" % (spec.steps, " x ranks" if spec.ranks > 1
                                                       else "", per_update))
    total_updates = start_update + max(0, spec.steps - start_step) // per_update
    return start_step, start_update, total_updates, per_update


def planned_updates(spec: RunSpec, resume_meta: Dict[str, Any]) -> int:
    """Updates the run will train (0: nothing left); checks the config first (run in the
    parent, before the run folder exists)."""
    _step, start_update, total_updates, _per = plan(spec, load_config(spec), resume_meta)
    return total_updates - start_update


def train(ctx: RunContext) -> int:
    spec = ctx.spec
    config = load_config(spec)
    start_step, start_update, total_updates, per_update = plan(spec, config, ctx.resume_meta)
    if total_updates <= start_update:
        print("mapush: nothing to do: the run has %d of --steps %d env steps"
              % (start_step, spec.steps), file=sys.stderr)
        return 0

    check_harl()
    if spec.use_wandb:  # before HARL's SummaryWriter, whose scalars W&B then mirrors
        start_wandb(spec, config, sync_tensorboard=True)
    runner = build_runner(spec, config)
    if ctx.resume_path is not None:
        restore_checkpoint(runner, Path(ctx.resume_path), runner.device)
        print("mapush: resumed from %s at step %d (update %d)"
              % (ctx.resume_path, start_step, start_update), file=sys.stderr)
    elif spec.init_from:
        restore_checkpoint(runner, Path(spec.init_from), runner.device, optimizers=False)
        print("mapush: policy and value weights from %s; fresh optimizers, step 0"
              % spec.init_from, file=sys.stderr)
    ranks.broadcast(_modules(runner))  # rank 0's initial weights
    runner.envs.videos = training_videos(spec, runner.envs.env, start_step)
    runner.envs.stats.episodes_before = int(ctx.resume_meta.get("episodes", 0))
    writer = runner.writter
    writer.add_text("mapush/isaacgym", world_note(), 0)
    logger = runner.logger
    logger.steps_before, logger.episode_base = start_step, start_update
    logger.ranks = ranks.world()
    watchdog = MemoryWatchdog(runner.envs.device,
                              lambda tag, value, step: writer.add_scalar(tag, value, step),
                              every=10, warmup=5)
    train_cfg = config["train"]
    interval = int(spec.checkpoint_interval)
    state = {"step": start_step, "update": start_update, "total_updates": total_updates}
    last_saved = start_step
    try:
        phases.mark("first_step")
        runner.warmup()
        logger.init(total_updates)
        alone = ranks.world() == 1  # one rank stops mid-rollout; ranks agree at a boundary
        for update in range(start_update + 1, total_updates + 1):
            if ranks.agree(ctx.stop.requested):
                break
            if train_cfg["use_linear_lr_decay"]:  # each distinct actor (MAPPO shares one)
                for decaying in {id(a): a for a in runner.actor}.values():
                    decaying.lr_decay(update, total_updates)
                runner.critic.lr_decay(update, total_updates)
            logger.episode_init(update)
            runner.prep_rollout()
            for step in range(int(train_cfg["episode_length"])):
                if alone and ctx.stop.requested:
                    break
                data = _env_step(runner, step)
                phases.mark("training")  # once the first step is through (marks are deduplicated)
                logger.per_step(data)
                runner.insert(data)
            if alone and ctx.stop.requested:
                break  # the partial rollout is dropped; the checkpoint holds the last update
            runner.compute()
            runner.prep_training()
            actor_infos, critic_info = runner.train()
            state.update(step=state["step"] + per_update, update=update)
            if update % int(train_cfg["log_interval"]) == 0 or update == total_updates:
                logger.episode_log(actor_infos, critic_info, runner.actor_buffer,
                                   runner.critic_buffer)
            runner.after_update()
            watchdog.sample(update, state["step"])
            if alone and ctx.stop.requested:
                break
            if state["step"] - last_saved >= interval and update < total_updates:
                save_checkpoint(runner, ctx, config, state)
                phases.mark("training")
                last_saved = state["step"]
        save_checkpoint(runner, ctx, config, state)
        ranks.check_same(_modules(runner))
    finally:
        _close(runner)
        if spec.use_wandb:
            importlib.import_module("wandb").finish()
    if ranks.rank() == 0:
        print("mapush: training %s at step %d; checkpoints in %s" % ("stopped" if ctx.stop.requested
              else "finished", state["step"], ctx.run_dir / "checkpoints"), file=sys.stderr)
    return 0


def _modules(runner: Any) -> List[Any]:
    """The runner's networks and value normaliser, the ranks' shared state."""
    found = [a.actor for a in {id(a): a for a in runner.actor}.values()] + [runner.critic.critic]
    return found + ([runner.value_normalizer] if runner.value_normalizer is not None else [])


def _env_step(runner: Any, step: int) -> Tuple[Any, ...]:
    """One env step, as the tuple ``runner.insert`` takes (HARL's ``run`` builds it so)."""
    values, actions, log_probs, rnn, rnn_critic = runner.collect(step)
    return tuple(runner.envs.step(actions)) + (values, actions, log_probs, rnn, rnn_critic)


def _close(runner: Any) -> None:
    """Flush and close the logs; the env is dropped, never torn down (incident 002)."""
    for close in (runner.logger.close, runner.writter.flush, runner.writter.close,
                  runner.envs.close):
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - closing must not mask the result
            print("mapush: while closing: %s" % exc, file=sys.stderr)


# --------------------------------------------------------------------------- eval
def harl_actors(checkpoint_dir: Any, device: Any) -> Tuple[List[Any], Dict[str, Any]]:
    """HARL's actors of a checkpoint (``actor_agent<i>.pt``) rebuilt with its run's
    ``harl_config.json``, their spaces read off the weights; ``(actors, model args)``."""
    import numpy as np
    import torch
    from gym import spaces
    from harl.algorithms.actors import ALGO_REGISTRY

    path = Path(checkpoint_dir)
    found = [c for c in (path / HARL_CONFIG, path.parent.parent / HARL_CONFIG) if c.is_file()]
    if not found:
        raise UsageError("%s: a HARL checkpoint without its run's %s; use one inside its run "
                         "folder (RUN/checkpoints/<name>/)" % (path, HARL_CONFIG))
    config = json.loads(found[0].read_text())
    args = dict(config["algo_args"]["model"], **config["algo_args"]["algo"])
    actors = []
    for i in range(len(list(path.glob("actor_agent*.pt")))):
        state = unpickle.load(path / ("actor_agent%d.pt" % i), device, "--checkpoint")
        obs_dim = next(t.shape[1] for n, t in state.items() if n.endswith("weight") and t.dim() == 2)
        act_dim = next(t.shape[0] for n, t in state.items() if n.endswith("fc_mean.weight"))
        actor = ALGO_REGISTRY[config["main_args"]["algo"]](
            args, spaces.Box(-np.inf, np.inf, (int(obs_dim),), np.float32),
            spaces.Box(-1.0, 1.0, (int(act_dim),), np.float32), device=torch.device(device))
        actor.actor.load_state_dict(state)
        actor.prep_rollout()
        actors.append(actor)
    return actors, config["algo_args"]["model"]


def load_actor(checkpoint_dir: Any, device: Any) -> Callable[[Any], Any]:
    """Deterministic policy of a HARL checkpoint: ``act(obs)`` maps numpy obs
    ``(n_envs, n_agents, obs_dim)`` to numpy actions ``(n_envs, n_agents, act_dim)``."""
    import numpy as np
    import torch

    actors, model = harl_actors(checkpoint_dir, device)
    n_agents = len(actors)
    recurrent_n, hidden = int(model["recurrent_n"]), int(model["hidden_sizes"][-1])
    memory = {}  # type: Dict[str, Any]

    @torch.no_grad()
    def act(obs: Any) -> Any:
        if isinstance(obs, torch.Tensor):
            obs = obs.detach().cpu().numpy()
        obs = np.asarray(obs, dtype=np.float32)
        n = obs.shape[0]
        if memory.get("n") != n:
            memory.update(n=n, rnn=np.zeros((n, n_agents, recurrent_n, hidden), np.float32))
        masks = np.ones((n, 1), np.float32)
        out = []
        for i, actor in enumerate(actors):
            actions, rnn = actor.act(obs[:, i], memory["rnn"][:, i], masks, None,
                                     deterministic=True)
            memory["rnn"][:, i] = rnn.detach().cpu().numpy()
            out.append(actions.detach().cpu().numpy())
        return np.stack(out, axis=1)

    return act


def load_policy(checkpoint: Path, env: Any, spec: RunSpec) -> Callable[[Any], Any]:
    """The policy of ``checkpoint`` that ``mapush eval`` drives: obs -> env actions."""
    import torch

    actor = load_actor(checkpoint, spec.rl_device)
    return lambda obs: torch.as_tensor(actor(obs), dtype=torch.float32, device=env.device)

