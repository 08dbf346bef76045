"""Benchmark stand-in for ``mqe.envs.utils``: ``make_mqe_env`` builds the GPU double.

Put ``benchmarks/shim`` on ``PYTHONPATH`` before ``tests/standin`` (which provides the
stand-in ``isaacgym``) so that ``mapush.sim.make_env`` and ``mapush train`` run over
:class:`benchmarks.gpu_double.GpuMqeDouble`. Knobs (environment variables, so they reach
the training child): ``BENCH_DOUBLE_PHYSICS_US`` (device busy-wait per step, default 0),
``BENCH_DOUBLE_EPISODE_STEPS`` (timeout length, default 100).
"""
import os

from benchmarks.gpu_double import GpuMqeDouble


class InstalledCfg(object):
    """Shape of the installed ``go1_push_mid_config`` that ``custom_cfg`` replaces."""

    class env(object):
        env_name = "installed-default"
        num_envs = 10
        num_agents = 2
        episode_length_s = 10.0
        record_video = False


def make_mqe_env(env_name, args=None, custom_cfg=None):
    if env_name != "go1push_mid":
        raise KeyError(env_name)
    cfg = custom_cfg(InstalledCfg) if callable(custom_cfg) else InstalledCfg
    num_envs = getattr(args, "num_envs", None) or cfg.env.num_envs
    use_gpu = str(args.sim_device).startswith("cuda") and getattr(args, "use_gpu_pipeline", True)
    env = GpuMqeDouble(
        num_envs, args.sim_device if use_gpu else "cpu",
        num_agents=int(getattr(cfg.env, "num_agents", 2)),
        max_episode_length=int(os.environ.get("BENCH_DOUBLE_EPISODE_STEPS", "100")),
        physics_us=float(os.environ.get("BENCH_DOUBLE_PHYSICS_US", "0")))
    env.cfg = cfg
    return env, cfg


def custom_cfg(args):
    def fn(cfg):
        cfg.env.num_envs = args.num_envs
        cfg.env.record_video = args.record_video
        return cfg

    return fn
