"""OpenRL's PPO rollout and update on the GPU: host-device copies, syncs, ``.item()`` reads
and kernel launches per vector step, OpenRL with patch 01 only against 01 + 02 (#49 item 5).

Each variant runs in its own child: ``mapush train``'s PPO trainer over the zero-cost GPU
double (as ``train_bench.py``'s (b)), 500 envs, episode length 200. ``torch.profiler``
records the third iteration whole (its 200 rollout steps and the update after them: from
the 401st env step to the 601st); the counts are divided by 200. The double's own step and
our adapter are inside the count (the double: no copy, no sync; the adapter: the actions'
host-to-device copy and one device-to-host copy of observations, rewards and dones).

    python3 benchmarks/openrl_profile.py --site A --records RA --site B --records RB --out F
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

STEPS, ENVS = 200, 500
FIRST, LAST = 2 * STEPS + 1, 3 * STEPS + 1  # the third iteration: rollout, then its update


def child(out: str, envs: int) -> None:
    from mapush import sim

    sim.import_isaacgym()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from mapush.envs import openrl_env
    from mapush.run.context import RunContext
    from mapush.spec import RunSpec
    from mapush import registry as trainers

    state = {"steps": 0, "prof": None}
    step = openrl_env.OpenRLEnv.step

    def counted(self, *args, **kwargs):
        state["steps"] += 1
        if state["steps"] == FIRST:
            torch.cuda.synchronize()
            state["prof"] = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            state["prof"].__enter__()
        elif state["steps"] == LAST:
            torch.cuda.synchronize()
            state["prof"].__exit__(None, None, None)
        return step(self, *args, **kwargs)

    openrl_env.OpenRLEnv.step = counted
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=envs,
                   steps=STEPS * envs * 4, seed=1, run_dir=tempfile.mkdtemp(), sim_device="cuda:0",
                   rl_device="cuda:0", checkpoint_interval=10 ** 12,
                   config=os.environ.get("BENCH_PPO_CONFIG") or None)  # e.g. device_rollout: false
    trainers.load("ppo").train(RunContext(spec))
    counts = {}
    for event in state["prof"].events():
        name = event.name
        kind = ("memcpy_htod" if name.startswith("Memcpy HtoD") else
                "memcpy_dtoh" if name.startswith("Memcpy DtoH") else
                "memcpy_dtod" if name.startswith("Memcpy DtoD") else
                "stream_or_device_sync" if name in ("cudaStreamSynchronize",
                                                    "cudaDeviceSynchronize") else
                "item" if name == "aten::_local_scalar_dense" else
                "kernel_launch" if name in ("cudaLaunchKernel", "cuLaunchKernel") else
                "graph_launch" if name in ("cudaGraphLaunch", "cuGraphLaunch") else None)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    per_step = {k: round(v / float(LAST - FIRST), 2) for k, v in sorted(counts.items())}
    Path(out).write_text(json.dumps({"per_vector_step": per_step, "events": counts,
                                     "vector_steps": LAST - FIRST, "envs": envs}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", action="append", required=True)
    parser.add_argument("--records", action="append", required=True)
    parser.add_argument("--label", action="append", required=True)
    parser.add_argument("--envs", type=int, default=ENVS)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results = []
    for site, records, label in zip(args.site, args.records, args.label):
        with tempfile.NamedTemporaryFile(suffix=".json") as fh:
            proc = subprocess.run([sys.executable, __file__, "--child", fh.name,
                                   str(args.envs)], env=child_env(site, records),
                                  cwd=str(REPO), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True)
            if proc.returncode != 0:
                print(proc.stdout[-3000:])
                return 1
            result = dict(json.loads(Path(fh.name).read_text()), openrl=label)
        results.append(result)
        print(label, result["per_vector_step"], flush=True)
    Path(args.out).write_text(json.dumps({"runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        sys.stdout.flush()
        import os

        os._exit(0)
    sys.exit(main())
