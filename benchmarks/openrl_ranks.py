"""patches/openrl/05 (PPO across ranks) over one update of seeded random rows, in N
processes of one torch.distributed group: the worker of ``tests/test_openrl_ranks.py`` (gloo,
the CPU) and, with ``--device cuda``, its check and timing on a machine of several GPUs
(NCCL, each rank its own GPU). No env: the rollout buffer is filled with the same rows a
single process would hold over all the envs, rank r holding envs r*E..(r+1)*E-1, so one
update of N ranks can be compared with one process's (``--ranks 1``).

    python3 benchmarks/openrl_ranks.py --site S --ranks 2 [--device cuda] [--envs-per-rank 500]
        [--steps 200] [--epochs 3] [--minibatches 1] [--out F]

Prints (and writes to ``--out``) one JSON object: each rank's final weights (``weights``,
when ``--weights``) and, for each of its ``--updates`` updates over the same rows, its time
and the all-reduces it ran (count, floats, seconds, each timed between device syncs; the
first update's include NCCL's setup).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PPO_YAML = REPO / "mapush" / "trainers" / "configs" / "ppo.yaml"
AGENTS, OBS, ACT = 2, 5, 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_taken(port: int) -> bool:
    """Whether a process listens on ``port`` (address reuse on: a closed socket's
    TIME_WAIT does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def launch(args: argparse.Namespace) -> list:
    """Start ``args.ranks`` workers of one group (one without a group where ``--no-group``);
    their outputs, rank order."""
    return launch_workers(__file__, args)


def launch_workers(script: str, args: argparse.Namespace, tries: int = 3) -> list:
    """Start ``args.ranks`` processes of ``script --worker`` with ``args``, one rank each (on
    CUDA each its own GPU, as mapush train --gpus gives it); their outputs (the last line of
    each, JSON), rank order. Once one fails the others are killed: a rank alone would wait
    in its collective until the timeout. The rendezvous port is free when picked but may be
    taken before rank 0 listens on it (seen once on the x4 machine): then all start again on
    another, up to ``tries`` times."""
    for attempt in range(tries):
        try:
            return _launch_once(script, args)
        except PortTaken:
            if attempt == tries - 1:
                raise
    return []


class PortTaken(RuntimeError):
    """Rank 0 could not listen on the rendezvous port (EADDRINUSE)."""


def _launch_once(script: str, args: argparse.Namespace) -> list:
    path = os.pathsep.join(p for p in (str(args.site), os.environ.get("PYTHONPATH", "")) if p)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=path, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(args.ranks))
    # each rank its share of the cores, unless set, as mapush train's ranks get it: N
    # processes of all the cores' threads each took N times one process's update
    # (results/openrl-05-threads-h100x2.json, results/harl-06-ranks-h100x4.json)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.ranks)))
    flags = ("weights", "no_group")
    argv = [sys.executable, script, "--worker"] + [
        "--%s=%s" % (key.replace("_", "-"), value) for key, value in sorted(vars(args).items())
        if key not in ("worker", "out", "site") + flags]
    argv += ["--" + flag.replace("_", "-") for flag in flags if getattr(args, flag)]
    procs = []
    for rank in range(args.ranks):
        rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        if args.device == "cuda":
            rank_env["CUDA_VISIBLE_DEVICES"] = str(rank)
        procs.append(subprocess.Popen(argv, env=rank_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    failed = None  # the first rank to fail (or to run past the timeout)
    with ThreadPoolExecutor(len(procs)) as pool:
        waits = [pool.submit(proc.communicate, timeout=args.timeout) for proc in procs]
        for done in as_completed(waits):
            rank = waits.index(done)
            if failed is None and (done.exception() or procs[rank].returncode != 0):
                failed = rank
                for proc in procs:
                    proc.kill()
    if failed is not None:
        for proc in procs:
            proc.wait()  # every rank gone, and its sockets closed
        why = waits[failed].exception()
        # any rank's: when rank 0 cannot listen, another rank may abort first (SIGABRT,
        # "terminate called without an active exception", seen on torch 1.13); rank 0 itself
        # may abort so, without the message (seen in CI on torch 1.13): then the port is
        # asked whether another process still listens on it
        said = "".join(wait.result()[1] for wait in waits if not wait.exception())
        if "EADDRINUSE" in said or "Address already in use" in said or port_taken(port):
            raise PortTaken("rank %d: the rendezvous port was taken" % failed)
        raise RuntimeError("rank %d %s" % (failed, why or "exited %d: %s" % (
            procs[failed].returncode, waits[failed].result()[1][-3000:])))
    results = [wait.result() for wait in waits]
    return [json.loads(out.strip().splitlines()[-1]) for out, _err in results]


def worker(args: argparse.Namespace) -> dict:
    import gymnasium as gym
    import numpy as np
    import torch

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    dist = torch.distributed
    if not args.no_group:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    reduces = {"count": 0, "floats": 0, "seconds": 0.0}
    all_reduce = dist.all_reduce
    device = torch.device(args.device)

    def timed_all_reduce(tensor, *rest, **kwargs):  # each between syncs: its own time
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        result = all_reduce(tensor, *rest, **kwargs)
        sync()
        reduces["count"] += 1
        reduces["floats"] += tensor.numel()
        reduces["seconds"] += time.perf_counter() - start
        return result

    if args.time_reduces:  # (the syncs around each cost time of their own: 0 leaves them out)
        dist.all_reduce = timed_all_reduce
    from openrl.algorithms.ppo import PPOAlgorithm
    from openrl.buffers import NormalReplayBuffer
    from openrl.configs.config import create_config_parser
    from openrl.modules.common import PPONet

    envs = args.envs_per_rank
    total = envs * world

    class Env:
        observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)
        agent_num, parallel_env_num, env_name = AGENTS, envs, "rows"

        def reset(self, seed=None):
            return None

    parser = create_config_parser()
    for key in ("--mqe_fast_step", "--device_rollout", "--act_graph"):  # mapush's keys
        parser.add_argument(key, default=None)
    cfg = parser.parse_args(["--config", str(PPO_YAML)])
    cfg.episode_length = args.steps
    cfg.num_mini_batch = args.minibatches or cfg.num_mini_batch  # 0: ppo.yaml's (OpenRL's)
    cfg.ppo_epoch = args.epochs or cfg.ppo_epoch
    torch.manual_seed(0)  # the same initial weights in every process
    net = PPONet(Env(), cfg=cfg, device=device)
    cfg.n_rollout_threads = cfg.learner_n_rollout_threads = envs
    algo = PPOAlgorithm(cfg=cfg, init_module=net.module, device=device, agent_num=AGENTS)
    data = NormalReplayBuffer(cfg, AGENTS, Env.observation_space, Env.action_space, None).data
    rng = np.random.default_rng(5)
    for name in ("policy_obs", "critic_obs", "value_preds", "returns", "actions",
                 "action_log_probs"):
        shape = getattr(data, name).shape
        rows = rng.standard_normal(shape[:1] + (total,) + shape[2:]).astype(np.float32)
        getattr(data, name)[...] = rows[:, rank * envs:(rank + 1) * envs]
    if args.tensors:  # patches/openrl/03's buffer of tensors
        data.to_device(device)
    updates = []  # each update's seconds and its all-reduces (the first sets NCCL up)
    for _ in range(args.updates):
        if device.type == "cuda":
            torch.cuda.synchronize()
        reduces.update(count=0, floats=0, seconds=0.0)
        start = time.perf_counter()
        algo.train(data)
        if device.type == "cuda":
            torch.cuda.synchronize()
        updates.append(dict(reduces, update_s=time.perf_counter() - start))
    out = {"rank": rank, "ranks": world, "envs_per_rank": envs, "updates": updates,
           "device": str(device),
           "torch": torch.__version__,
           "ppo_epoch": cfg.ppo_epoch, "num_mini_batch": cfg.num_mini_batch}
    if args.weights:
        out["weights"] = flat_weights(net.module.models)
    return out


def flat_weights(models: dict) -> dict:
    """``{"<model>.<tensor>": [values]}`` of every model's state (what the tests compare)."""
    return {"%s.%s" % (name, key): value.double().reshape(-1).tolist()
            for name, model in sorted(models.items())
            for key, value in model.state_dict().items()}


def options(**changes: object) -> argparse.Namespace:
    """The defaults of the command line with ``changes`` (the test's way in)."""
    return with_changes(parser(), changes)


def with_changes(made: argparse.ArgumentParser, changes: dict) -> argparse.Namespace:
    args = made.parse_args([])
    for key, value in changes.items():
        setattr(args, key, value)
    return args


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", default="", help="the OpenRL to run (PYTHONPATH)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--envs-per-rank", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=0, help="0: ppo.yaml's ppo_epoch")
    parser.add_argument("--minibatches", type=int, default=0, help="0: ppo.yaml's")
    parser.add_argument("--tensors", type=int, default=0, help="1: the buffer as tensors (03)")
    parser.add_argument("--time-reduces", type=int, default=1, help="0: all-reduces untimed")
    parser.add_argument("--updates", type=int, default=1, help="updates over the same rows")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--weights", action="store_true")
    parser.add_argument("--no-group", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="")
    return parser


def main(script: str = __file__, made: object = None, work: object = None) -> None:
    """A worker (``--worker``: its JSON line) or the launcher (every rank's, and ``--out``),
    of this script or of another with its own parser and worker (``harl_ranks.py``)."""
    args = (made or parser()).parse_args()  # type: ignore[attr-defined]
    if args.worker:
        print(json.dumps((work or worker)(args)))  # type: ignore[operator]
        return
    result = {"args": {k: v for k, v in vars(args).items() if k != "worker"},
              "ranks": launch_workers(script, args)}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
