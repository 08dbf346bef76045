"""patches/openrl/03 on the GPU: OpenRL's PPO with ``device_rollout`` on against off, the
same seed, the same data (the GPU double), in one call (issue #49 item 4). ``--key
act_graph``: patches/openrl/04, act as a CUDA graph on against off (both with 03), where the
graph replays the eager kernels: bit for bit expected (``weights_bit_identical``,
``scalars_identical``), and the run's ``step.json`` says whether the graph was captured.

Each variant is one child running ``mapush train``'s PPO trainer (as ``train_bench.py``'s
(b)) for ``--updates`` updates of 200 steps, then the final weights are compared and every
logged training scalar. On the CPU the two paths are equal bit for bit
(``tests/test_openrl_device_rollout.py``); on a GPU they are not required to be: the device
path's float32 kernels (the GAE loop, the advantages' normalization, a division by a scalar
that CUDA computes as a multiplication by its reciprocal: PyTorch's
``aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu``, ``div_true_kernel_cuda``, takes that
path when the divisor is a CPU scalar, "may lose one bit of precision") round differently
from numpy's, and ten epochs of Adam carry the differences on. The stated tolerance: every weight and
scalar within 1e-3 relative (of the largest magnitude of its tensor or series).

    python3 benchmarks/openrl_equivalence.py --site S --records R --out F [--envs 500]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.train_bench import child_env  # noqa: E402

TOLERANCE = 1e-3
TRAINING = ("train/",)  # the algorithm's scalars (the clock's and the allocator's differ)


def child(run_dir: str, envs: int, updates: int, config: str, device: str) -> None:
    from mapush import sim

    sim.import_isaacgym()
    from mapush import registry as trainers
    from mapush.run.context import RunContext
    from mapush.spec import RunSpec

    steps = 200 * envs * updates
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=envs, steps=steps,
                   seed=1, run_dir=run_dir, sim_device=device, rl_device=device,
                   checkpoint_interval=steps, config=config)
    trainers.load("ppo").train(RunContext(spec))


def weights(run_dir: Path):
    from mapush.checkpoints.policy import load_module

    module = load_module(str(sorted((run_dir / "checkpoints").iterdir())[-1] / "module.pt"),
                         "cpu", "--checkpoint")
    return {"%s.%s" % (name, key): value for name, model in sorted(module.models.items())
            for key, value in model.state_dict().items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", required=True)
    parser.add_argument("--records", required=True)
    parser.add_argument("--envs", type=int, default=500)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--device", default="cuda:0")  # cpu: the two are equal bit for bit
    parser.add_argument("--key", default="device_rollout", choices=("device_rollout", "act_graph"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="openrl-equivalence-"))
    runs = {}
    for on in ("false", "true"):
        config = tmp / ("%s_%s.yaml" % (args.key, on))
        config.write_text("%s: %s\n" % (args.key, on))
        runs[on] = tmp / ("run-%s" % on)
        proc = subprocess.run([sys.executable, __file__, "--child", str(runs[on]),
                               str(args.envs), str(args.updates), str(config), args.device],
                              env=child_env(args.site, args.records), cwd=str(REPO),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:])
            return 1
    env = child_env(args.site, args.records)  # this process reads what the children wrote
    sys.path[:0] = env["PYTHONPATH"].split(os.pathsep)
    os.environ["MAPUSH_ROOT"] = env["MAPUSH_ROOT"]
    from mapush import sim

    sim.import_isaacgym()
    from mapush.events import read_scalars

    off, on = weights(runs["false"]), weights(runs["true"])
    rows = {}
    for key in off:
        scale = float(off[key].abs().max()) or 1.0
        rows[key] = float((off[key] - on[key]).abs().max()) / scale
    scalars = {name: read_scalars(run / "logs") for name, run in runs.items()}
    series = {}
    for tag, values in scalars["false"].items():
        if tag.startswith(TRAINING):
            theirs = [v for _, v in values]
            ours = [v for _, v in scalars["true"][tag]]
            scale = max(abs(v) for v in theirs) or 1.0
            series[tag] = max(abs(a - b) for a, b in zip(theirs, ours)) / scale
    worst = max(list(rows.values()) + list(series.values()))
    exact = all(bool((off[k] == on[k]).all()) for k in off)
    same = all(scalars["false"][t] == scalars["true"][t] for t in series)
    act = {on: json.loads((runs[on] / "step.json").read_text()).get("act") for on in runs}
    result = {"device": args.device, "envs": args.envs, "updates": args.updates,
              "key": args.key, "tolerance_relative": TOLERANCE, "act_graph_state": act,
              "weights_bit_identical": exact, "scalars_identical": same,
              "worst_relative_difference": worst,
              "weights_relative": rows, "scalars_relative": series,
              "within_tolerance": worst <= TOLERANCE}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("relative")}))
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
        sys.stdout.flush()
        os._exit(0)
    sys.exit(main())
