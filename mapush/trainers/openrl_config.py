"""PPO's config through OpenRL's parser (its defaults, the recipe, ``--config``): the parent's
checks, without torch or OpenRL's training stack (``openrl_trainer`` trains)."""
from typing import Any, Dict, Optional

from openrl.configs.config import create_config_parser

from mapush import schema, sim
from mapush.errors import UsageError
from mapush.spec import UPPER, RunSpec, config_label, user_yaml
from mapush.registry import CONFIG_DIR, by_library, check_owned

SHIPPED_CONFIG = CONFIG_DIR / ("%s.yaml" % by_library("openrl").algos[0])
TASK_CONFIGS = {UPPER: CONFIG_DIR / "ppo_upper.yaml"}  # the high level's (8000-step episodes)


def parse_config(spec: RunSpec, user_config: Optional[str] = None) -> Any:
    """OpenRL's defaults, then ``configs/ppo.yaml`` (the recipe), then the user's
    ``--config`` YAML. A bad YAML is a UsageError naming the file."""
    parser = create_config_parser()
    parser.exit_on_error = False
    parser.add_argument("--mqe_fast_step", default=True)  # no type: "no" stays a string
    parser.add_argument("--device_rollout", default=None)  # patches/openrl/03's switch
    parser.add_argument("--act_graph", default=None)  # patches/openrl/04's switch
    argv = ["--config", str(SHIPPED_CONFIG)]
    if spec.task in TASK_CONFIGS:
        argv += ["--config", str(TASK_CONFIGS[spec.task])]
    label = config_label(user_config or SHIPPED_CONFIG)
    if user_config:
        if not str(user_config).endswith(".yaml"):
            raise UsageError("--config %s: OpenRL reads only files named *.yaml; rename it"
                             % user_config)
        raw = user_yaml(user_config) or {}
        if isinstance(raw, dict):  # the user's own values, before OpenRL converts them
            check_owned("openrl", raw, label)
            schema.check("openrl", raw, label)
        argv += ["--config", str(user_config)]
    try:
        cfg = parser.parse_args(argv)
    except Exception as exc:  # jsonargparse/argparse errors, YAML errors
        raise UsageError("%s: %s (keys must be options of OpenRL's config parser)"
                         % (label, " ".join(str(exc).split())[:400]))
    schema.check("openrl", vars(cfg), label)
    recurrent = cfg.use_recurrent_policy or cfg.use_naive_recurrent_policy
    cuda = str(spec.rl_device).split(":")[0] == "cuda"
    if cfg.device_rollout is None:  # unset: OpenRL's rollout on the device of a GPU policy
        cfg.device_rollout = cuda and not recurrent
    elif cfg.device_rollout and recurrent:  # patches/openrl/03 keeps feed-forward ones only
        raise UsageError("device_rollout true: a recurrent policy needs it false (openrl/03)")
    if cfg.act_graph is None:  # unset: act as a CUDA graph where the rollout is on the GPU
        cfg.act_graph = bool(cfg.device_rollout) and cuda
    elif cfg.act_graph and not (cfg.device_rollout and cuda):
        raise UsageError("act_graph true: it needs device_rollout and a CUDA --rl-device "
                         "(openrl/04); set act_graph: false")
    cfg.config = None  # a deleted temporary file by now; keep it out of pickles
    return cfg


def planned_updates(spec: RunSpec, resume_meta: Dict[str, Any]) -> int:
    """Updates the run will train (0: nothing left); run in the parent before the folder exists."""
    per_update = int(parse_config(spec, spec.config).episode_length) * int(spec.num_envs) * \
        int(spec.ranks)  # --steps counts every rank's env steps
    if not resume_meta.get("step") and int(spec.steps) < per_update:  # as HARL's plan()
        raise UsageError("--steps %d is less than one rollout (episode_length x --num-envs%s = "
                         "%d steps): raise --steps" % (spec.steps, " x ranks" if spec.ranks > 1
                                                       else "", per_update))
    return int(spec.steps) // per_update - int(resume_meta.get("step", 0)) // per_update


def openrl_config(spec: RunSpec, user_config: Optional[str] = None, sim_args: bool = True) -> Any:
    """OpenRL's config for the run: :func:`parse_config`, what the command line decides (seed,
    run directory, wandb), and upstream's Isaac Gym fields merged in as ``get_args`` did."""
    cfg = parse_config(spec, user_config)
    cfg.seed = spec.seed
    cfg.run_dir = str(spec.run_dir)
    cfg.experiment_name = spec.object
    cfg.disable_wandb = not spec.use_wandb
    cfg.log_each_episode = False  # our logger reports progress itself
    for key, value in vars(sim.build_args(spec)).items() if sim_args else ():
        if not hasattr(cfg, key):
            setattr(cfg, key, value)
    return cfg


def resolved_config(spec: RunSpec) -> Dict[str, Any]:
    """The run's OpenRL config (--print-config; upstream's Isaac Gym arguments left out)."""
    return plain_config(openrl_config(spec, spec.config, sim_args=False))


def plain_config(cfg: Any) -> Dict[str, Any]:
    """The resolved config as JSON-able values (for the run directory)."""
    return {key: value if isinstance(value, (bool, int, float, str)) or value is None
            else str(value) for key, value in sorted(vars(cfg).items())}
