"""patches/harl/06 (HAPPO and MAPPO across ranks) over one update of seeded random rows, in N
processes of one torch.distributed group: the worker of ``tests/test_harl_ranks.py`` (gloo,
the CPU) and, with ``--device cuda``, the same on a machine of several GPUs (NCCL, each rank
its own GPU). No env: HARL's actor and critic buffers are filled with the rows a single
process would hold over all the envs, rank r holding envs r*E..(r+1)*E-1, and the runner's
own ``train`` (HARL's HA or MA runner) runs over them, so one update of N ranks can be
compared with one process's (``--ranks 1``).

    python3 benchmarks/harl_ranks.py --site S --algo happo --ranks 2 [--device cuda]
        [--envs-per-rank 4] [--steps 6] [--epochs 2] [--updates 1] [--device-rollout 1]
        [--weights] [--out F]

Prints (and writes to ``--out``) one JSON object: each rank's agent order (the order its
actors trained in), the seconds of each of its ``--updates`` updates over the same rows and,
with ``--weights``, its final weights (every actor's, the critic's and the value
normaliser's).
"""
import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.openrl_ranks import flat_weights, launch_workers, main as run_main, \
    with_changes  # noqa: E402  (one launcher and command line for both workers)

AGENTS, OBS, SHARE_OBS, ACT = 3, 5, 7, 2


def worker(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch
    from gym import spaces

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    if not args.no_group:
        torch.distributed.init_process_group("nccl" if args.device == "cuda" else "gloo")
    from harl.algorithms.actors import ALGO_REGISTRY
    from harl.algorithms.critics.v_critic import VCritic
    from harl.common.buffers.on_policy_actor_buffer import OnPolicyActorBuffer
    from harl.common.buffers.on_policy_critic_buffer_ep import OnPolicyCriticBufferEP
    from harl.common.valuenorm import ValueNorm
    from harl.runners.on_policy_ha_runner import OnPolicyHARunner
    from harl.runners.on_policy_ma_runner import OnPolicyMARunner

    from mapush.registry import shipped_config
    config = shipped_config(args.algo)
    envs, device = args.envs_per_rank, torch.device(args.device)
    config["train"].update(episode_length=args.steps, n_rollout_threads=envs,
                           device_rollout=bool(args.device_rollout))
    config["algo"].update(ppo_epoch=args.epochs, critic_epoch=args.epochs)
    model_algo = dict(config["model"], **config["algo"])
    rollout_device = device if args.device_rollout else None
    obs = spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
    share_obs = spaces.Box(-np.inf, np.inf, (SHARE_OBS,), np.float32)
    act = spaces.Box(-1.0, 1.0, (ACT,), np.float32)

    runner_class = OnPolicyHARunner if args.algo == "happo" else OnPolicyMARunner
    runner = runner_class.__new__(runner_class)  # HARL's train() over these, no env
    torch.manual_seed(0)  # the same initial weights in every process
    runner.actor = [ALGO_REGISTRY[args.algo](model_algo, obs, act, device=device)
                    for _ in range(AGENTS)]
    runner.critic = VCritic(model_algo, share_obs, device=device)
    runner.actor_buffer = [OnPolicyActorBuffer(dict(config["train"], **config["model"],
                                                    rollout_device=rollout_device), obs, act)
                           for _ in range(AGENTS)]
    runner.critic_buffer = OnPolicyCriticBufferEP(
        dict(config["train"], **model_algo, rollout_device=rollout_device), share_obs)
    runner.value_normalizer = ValueNorm(1, device=device)
    runner.__dict__.update(
        algo_args=config, device=device, device_rollout=bool(args.device_rollout),
        num_agents=AGENTS, state_type="EP", share_param=False, fixed_order=False,
        action_aggregation=config["algo"]["action_aggregation"])

    rng = np.random.default_rng(5)

    def fill(buffer, name, scale=1.0):  # this rank's envs of the rows over all envs
        value = getattr(buffer, name)
        shape = tuple(value.shape)
        rows = (scale * rng.standard_normal(shape[:1] + (envs * world,) + shape[2:])
                ).astype(np.float32)[:, rank * envs:(rank + 1) * envs]
        setattr(buffer, name, torch.from_numpy(rows).to(value.device)
                if isinstance(value, torch.Tensor) else rows)

    for buffer in runner.actor_buffer:
        for name, scale in (("obs", 1.0), ("actions", 0.5), ("action_log_probs", 0.3)):
            fill(buffer, name, scale)
    for name in ("share_obs", "value_preds", "returns"):
        fill(runner.critic_buffer, name)

    order = []  # the agents in the order their actors trained
    for agent_id, actor in enumerate(runner.actor):
        def train(*rest, _id=agent_id, _train=actor.train):
            order.append(_id)
            return _train(*rest)
        actor.train = train
    torch.manual_seed(100 + rank)  # each rank's own draws from here (seed + rank)
    seconds = []  # each update's (the first includes NCCL's setup)
    for _ in range(args.updates):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        runner.train()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    out = {"rank": rank, "ranks": world, "envs_per_rank": envs, "algo": args.algo,
           "order": order, "update_s": seconds, "epochs": args.epochs,
           "device": str(device), "torch": torch.__version__}
    if args.weights:
        models = {"actor%d" % i: agent.actor for i, agent in enumerate(runner.actor)}
        models.update(critic=runner.critic.critic, value_normalizer=runner.value_normalizer)
        out["weights"] = flat_weights(models)
    return out


def options(**changes: object) -> argparse.Namespace:
    """The defaults of the command line with ``changes`` (the test's way in)."""
    return with_changes(parser(), changes)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", default="", help="the HARL to run (PYTHONPATH)")
    parser.add_argument("--algo", default="happo", choices=("happo", "mappo"))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--envs-per-rank", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device-rollout", type=int, default=1, help="0: HARL's numpy buffers")
    parser.add_argument("--updates", type=int, default=1, help="updates over the same rows")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--weights", action="store_true")
    parser.add_argument("--no-group", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="")
    return parser


def launch(args: argparse.Namespace) -> list:
    """Start ``args.ranks`` workers of one group; their outputs, rank order."""
    return launch_workers(__file__, args)


def main() -> None:
    run_main(__file__, parser(), worker)


if __name__ == "__main__":
    main()
