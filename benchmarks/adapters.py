"""The adapters under test, built around the GPU double, with one uniform step interface.

Each variant is ``(step, log)``: ``step()`` advances the vectorised env by one step the way
its trainer would (numpy actions in, numpy arrays out); ``log()`` runs what the trainer does
at logging time (statistics and reward terms). Variants whose adapter is not importable are
reported with the reason instead of failing the whole benchmark.
"""
from typing import Any, Callable, Dict, Tuple

import numpy as np
import torch

from benchmarks.gpu_double import GpuMqeDouble
from benchmarks.seed_adapter import SeedStyleHARLEnv

Variant = Tuple[Callable[[], Any], Callable[[], Any]]

ADAPTERS = ("seed", "harl", "openrl")


def _actions(env: GpuMqeDouble, sets: int = 4) -> list:
    rng = np.random.default_rng(0)
    shape = (env.num_envs, env.num_agents, env.action_space.shape[0])
    return [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(sets)]


class _Cycle(object):
    """Rotates among a few action sets so no step reuses the previous step's input."""

    def __init__(self, items: list) -> None:
        self.items, self.i = items, 0

    def __call__(self) -> Any:
        self.i = (self.i + 1) % len(self.items)
        return self.items[self.i]


def double_variant(env: GpuMqeDouble, sync: bool) -> Variant:
    """The double alone, actions already on the device; ``sync`` adds the one device sync
    any consumer of its outputs needs (the floor our adapters are measured against)."""
    acts = _Cycle([torch.as_tensor(a, device=env.device) for a in _actions(env)])
    env.reset()
    device = env.device

    def step() -> Any:
        out = env.step(acts())
        if sync and device.type == "cuda":
            torch.cuda.synchronize(device)
        return out

    return step, lambda: None


def seed_variant(env: GpuMqeDouble) -> Variant:
    adapter = SeedStyleHARLEnv(env)
    adapter.reset()
    acts = _Cycle(_actions(env))

    def log() -> Any:
        stats = adapter.get_statistics()
        adapter.reset_statistics()
        return stats

    return (lambda: adapter.step(acts())), log


def harl_variant(env: GpuMqeDouble) -> Variant:
    from mapush.envs.harl_env import MAPushHARLEnv

    adapter = MAPushHARLEnv({"n_threads": env.num_envs, "state_type": "EP"}, env=env)
    adapter.reset()
    acts = _Cycle(_actions(env))

    def log() -> Any:
        return adapter.episode_stats(), adapter.reward_terms()

    return (lambda: adapter.step(acts())), log


def openrl_variant(env: GpuMqeDouble) -> Variant:
    from mapush.envs.openrl_env import OpenRLEnv

    adapter = OpenRLEnv(env)
    adapter.reset()
    acts = _Cycle(_actions(env))

    return (lambda: adapter.step(acts())), adapter.batch_rewards


BUILDERS = {"seed": seed_variant, "harl": harl_variant,
            "openrl": openrl_variant}  # type: Dict[str, Callable[[GpuMqeDouble], Variant]]


def build(name: str, num_envs: int, device: Any, physics_us: float = 0.0) -> Variant:
    """A fresh double of ``num_envs`` on ``device`` and variant ``name`` over it
    (``double`` and ``double_sync`` are the double alone)."""
    env = GpuMqeDouble(num_envs, device, physics_us=physics_us)
    if name in ("double", "double_sync"):
        return double_variant(env, sync=name == "double_sync")
    return BUILDERS[name](env)
