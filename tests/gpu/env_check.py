"""The smoke test's env stage, run as a child: create go1push_mid and step it at random.

``python tests/gpu/env_check.py --num-envs N --steps K --sim-device D --rl-device D``.
A child because Isaac Gym must be imported before torch (the smoke parent never imports
either) and because a crash inside PhysX must not take the smoke run down with it. The env
comes from :func:`mapush.sim.make_env`, the path every trainer takes. Prints one JSON object
on stdout; leaves with ``os._exit`` so Isaac Gym's teardown cannot segfault (incident 002).
"""
import argparse
import json
import math
import sys
import tempfile
from typing import Any, Dict, List, Optional

from mapush.errors import MapushError
from mapush.common import phases
from mapush.common.leave import leave
from mapush.spec import RunSpec


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise MapushError(message)


def _shape(value: Any) -> List[int]:
    return [int(n) for n in getattr(value, "shape", ())]


def check_env(args: argparse.Namespace) -> Dict[str, Any]:
    """Create the env, reset, take ``args.steps`` random steps; what was seen, or an error."""
    from mapush import sim

    sim.import_isaacgym()
    phases.mark("start")
    spec = RunSpec(algo="ppo", task=args.task, object=args.object, num_envs=args.num_envs,
                   steps=args.steps, seed=args.seed,
                   run_dir=args.run_dir or tempfile.mkdtemp(prefix="mapush-smoke-env-"),
                   sim_device=args.sim_device, rl_device=args.rl_device)
    env, _cfg = sim.make_env(spec)
    import torch  # after isaacgym, which make_env imported

    torch.manual_seed(args.seed)
    n, agents = int(env.num_envs), int(env.num_agents)
    act_dim = int(env.action_space.shape[0])
    obs_dim = int(env.observation_space.shape[0])
    _check(n == args.num_envs, "the env has %d envs, %d were asked for" % (n, args.num_envs))
    obs = env.reset()
    _check(_shape(obs) == [n, agents, obs_dim],
           "reset() returned obs of shape %s, expected %s" % (_shape(obs), [n, agents, obs_dim]))
    phases.mark("first_step")
    finished = 0
    reward_sum = 0.0
    for _ in range(args.steps):
        actions = torch.rand((n, agents, act_dim), device=env.device) * 2 - 1
        obs, reward, termination, _info = env.step(actions)
        _check(_shape(obs) == [n, agents, obs_dim], "step() returned obs of shape %s, expected %s"
               % (_shape(obs), [n, agents, obs_dim]))
        _check(_shape(reward) == [n, agents], "step() returned reward of shape %s, expected %s"
               % (_shape(reward), [n, agents]))
        _check(_shape(termination) == [n], "step() returned termination of shape %s, expected %s"
               % (_shape(termination), [n]))
        _check(bool(torch.isfinite(obs).all()), "step() returned non-finite observations")
        _check(bool(torch.isfinite(reward).all()), "step() returned non-finite rewards")
        finished += int(env.finished_buf.sum())
        reward_sum += float(reward.sum())
    phases.mark("shutdown")
    return {"ok": True, "num_envs": n, "num_agents": agents, "obs_dim": obs_dim,
            "act_dim": act_dim, "steps": args.steps, "device": str(env.device),
            "reward_mean": reward_sum / max(1, args.steps * n * agents),
            "finished_steps": finished, "reward_finite": math.isfinite(reward_sum)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="env_check.py")
    p.add_argument("--task", default="go1push_mid")
    p.add_argument("--object", default="cuboid")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sim-device", default="cuda:0")
    p.add_argument("--rl-device", default="cuda:0")
    p.add_argument("--run-dir", help="scratch folder for the spec (default: a temporary one)")
    return p


def main(argv: Optional[List[str]] = None) -> None:
    args = parser().parse_args(argv)
    try:
        print(json.dumps(check_env(args), sort_keys=True))
        code = 0
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        code = exc.exit_code or 1
    except BaseException as exc:  # noqa: BLE001 - the last line must be the diagnosis
        import traceback

        traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        print("error: env stage failed: %s: %s" % (type(exc).__name__, first), file=sys.stderr)
        code = 1
    leave(code)


if __name__ == "__main__":
    main()
