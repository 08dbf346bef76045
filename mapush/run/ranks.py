"""One run in several processes (``--ranks N`` on the CPU over gloo, ``--gpus 0,1`` a GPU a
rank over NCCL), started by torchrun, which the parent starts as its one child. What it means
and how it stops, with torchrun's limits on torch 1.13.1 (a fixed ``--standalone`` port, a
fixed 30 s stop grace, a traceback when signalled, ranks left behind when killed) and what is
done about each: docs/cli.md, ``--gpus``."""
import argparse
import glob
import os
import signal
import socket
import sys
import tempfile
import uuid
from typing import Any, Iterable, List, Optional, Tuple

from mapush.errors import UsageError
from mapush.spec import RunSpec, parse_list
from mapush.registry import RANKED_ALGOS

_scratch = []  # type: List[Any]  # a non-zero rank's run folder, removed when it leaves


def ranks_from_args(args: argparse.Namespace) -> Tuple[int, Optional[List[int]]]:
    """``(ranks, gpus)`` of ``--ranks``/``--gpus``; a rank sees only its own GPU, as
    ``cuda:0`` (mapush.run.ranks), so ``--gpus`` takes the devices' place."""
    ranks = int(getattr(args, "ranks", 1) or 1)
    gpus = parse_list("--gpus", args.gpus, int) if getattr(args, "gpus", None) else None
    devices = {args.sim_device, args.rl_device}
    if gpus is not None:
        if ranks not in (1, len(gpus)):
            raise UsageError("--ranks %d --gpus %s: --gpus gives one rank a GPU; leave --ranks "
                             "out" % (ranks, args.gpus))
        if "cpu" in devices:
            raise UsageError("--gpus %s with --sim-device/--rl-device cpu: --gpus runs on the "
                             "GPUs (each rank its own); on the CPU pass --ranks N" % args.gpus)
        if devices - {"cuda", "cuda:0"}:
            raise UsageError("--gpus %s with --sim-device/--rl-device %s: each rank sees its "
                             "own GPU only, as cuda:0; leave those options out"
                             % (args.gpus, "/".join(sorted(devices))))
        ranks = len(gpus)
    elif ranks > 1 and devices != {"cpu"}:
        raise UsageError("--ranks %d on %s: --ranks runs on the CPU (pass --sim-device cpu "
                         "--rl-device cpu); across GPUs pass --gpus 0,1" % (
                             ranks, "/".join(sorted(devices))))
    if ranks > 1 and args.algo not in RANKED_ALGOS:
        raise UsageError("--algo %s across %d ranks: only %s train across ranks (HATRPO's "
                         "trust region has no pooled form); run it in one process"
                         % (args.algo, ranks, ", ".join(RANKED_ALGOS)))
    return ranks, gpus


def launch(spec: RunSpec, child: List[str]) -> Tuple[List[str], dict, dict]:
    """``(argv, env changes, supervise's options)`` that start ``child`` (``python -m MODULE
    ARGS``) as the run's ranks: itself for one rank. torchrun runs in a session of its own
    (Ctrl-C at the terminal reaches the parent alone), on a free port, and the parent sends
    a stop signal to the ranks, never to torchrun (which would end with a traceback)."""
    if spec.ranks <= 1:
        return child, {}, {}
    with socket.socket() as sock:  # free now; taken by torchrun's store at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
            "--nproc_per_node=%d" % spec.ranks, "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=%s" % uuid.uuid4().hex,
            "--max_restarts=0", "--monitor_interval=1"] + child[1:]
    # each rank its share of the cores (N ranks of all the cores' threads each were N times
    # slower: benchmarks/results/openrl-05-threads-h100x2.json)
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // spec.ranks))
    return argv, {"OMP_NUM_THREADS": threads}, {"start_new_session": True,
                                                "forward": signal_ranks}


def signal_ranks(proc: Any, signum: int) -> None:
    """``signum`` to each child of ``proc`` (torchrun's ranks, read from /proc)."""
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == proc.pid:  # the parent's pid: the field after the state
                os.kill(int(stat.split("/")[2]), signum)
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue


def join(spec: RunSpec) -> Tuple[RunSpec, int]:
    """In a rank, before Isaac Gym or torch is imported: ``(the rank's spec, rank)``. A rank
    sees its own GPU only (as ``cuda:0``; Isaac Gym's Vulkan device indices follow), seeds
    ``seed + rank``, and writes into a scratch folder unless it is rank 0."""
    if world() <= 1:
        return spec, 0
    from mapush.proc import die_with_parent

    die_with_parent(signal.SIGKILL)  # torchrun gone, nobody would stop this rank
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if spec.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(spec.gpus[local])
    changes = {"seed": spec.seed + rank}  # type: dict
    if rank:
        _scratch.append(tempfile.TemporaryDirectory(prefix="mapush-rank%d-" % rank))
        changes.update(run_dir=_scratch[-1].name, use_wandb=False, record_video=False)
        os.environ.pop("MAPUSH_PHASE_FILE", None)  # the parent reads rank 0's phases
    return spec.with_changes(**changes), rank


def start(spec: RunSpec) -> None:
    """The ranks' process group (after torch is imported), where there are several."""
    if world() > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if spec.gpus else "gloo")


def world() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _device() -> str:
    """Where a collective's own tensor lives: NCCL reduces only on the rank's GPU."""
    import torch.distributed as dist

    return "cuda" if dist.get_backend() == "nccl" else "cpu"


def agree(stop: bool) -> bool:
    """Whether any rank was asked to stop (one all-reduce; no collective for one rank):
    every rank then ends after the same update."""
    if world() <= 1:
        return stop
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1.0 if stop else 0.0], device=_device())
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def summed(values: List[float]) -> List[float]:
    """Each value summed over the ranks (one all-reduce); as they are for one rank."""
    if world() <= 1 or not values:
        return values
    import torch
    import torch.distributed as dist

    total = torch.tensor(values, dtype=torch.float64, device=_device())
    dist.all_reduce(total)
    return total.tolist()


def broadcast(models: Iterable[Any]) -> None:
    """Rank 0's weights and buffers (value normalisers) in every rank."""
    if world() <= 1:
        return
    import torch.distributed as dist

    for model in models:
        for tensor in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(tensor.data, 0)


def check_same(models: Iterable[Any]) -> None:
    """That every rank ends with rank 0's weights, as the pooled update keeps them (one
    all-reduce of each tensor's sum, at the end); a drift is one error, not a silent result."""
    if world() <= 1:
        return
    import torch
    import torch.distributed as dist

    sums = torch.stack([p.detach().double().sum() for m in models for p in m.parameters()])
    low, high = sums.clone(), sums.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if not torch.allclose(low, high, rtol=1e-6, atol=1e-9):
        from mapush.errors import MapushError

        raise MapushError("the ranks' weights drifted apart (largest gap %.3g): their updates "
                          "were not pooled; is patches/openrl/05 applied? (mapush doctor)"
                          % float((high - low).abs().max()))
