"""A trainer's non-physics time per vector step, a baseline path against a patched one, in one
run: HARL's (HAPPO, MAPPO, HATRPO) and OpenRL's (PPO).

Each (algorithm, envs, path) runs in its own child process: the real trainer the registry
names (``mapush.trainers.load``) over the GPU double (``benchmarks/shim``), with the same
outermost-call clock as ``train_bench`` around the double's ``step`` (synchronized before and
after). The baseline child imports the trainers' libraries from ``--pristine-site`` (its
patch records from ``--pristine-records``), the patched one from ``--site``:
- HARL: the baseline is HARL without ``patches/harl/05`` (patches 01-04 only:
  ``tests.upstream.site_without(..., ("05-", "06-"))``, as 06 builds on 05's helpers) with
  ``train.device_rollout: false``; the patched child sets it true.
- OpenRL: the baseline is OpenRL as shipped (patch 01 only: ``site_without(..., ("02-",
  "03-", "04-", "05-", "06-"), component="openrl")``) with ``device_rollout: false``; the
  patched child runs as ``mapush train`` resolves it on CUDA (``device_rollout`` and
  ``act_graph`` on). ``--baseline-rollout`` turns the device rollout on in the baseline too,
  to compare two patched sites (``--baseline-label`` then names it).
Per training iteration (a rollout of ``episode_length`` vector steps and the update after
it), non-physics time = wall time minus the double's own time; the last iteration is not
timed (its span ends at the next one's first step). The first ``--warmup`` (10) timed
iterations are dropped; of the rest (at least 20: ``--iterations`` 31) each row gives the
median and the interquartile range: ``device``, ``envs``, ``algo``, ``pristine_ms_per_step``,
``pristine_iqr_ms``, ``patched_ms_per_step``, ``patched_iqr_ms``, ``ratio`` (of the medians),
``peak_gpu_mb`` (``torch.cuda.max_memory_allocated`` of each path) and the device memory
growth after warm-up. The order of the two paths alternates from one (algorithm, envs) to the
next, so a drift of the host affects both alike.

    python benchmarks/rollout_non_physics.py --site .bench_site/site \
        --pristine-site .bench_site/pristine-site --records .bench_site/records \
        --out $OUT/harl-gpu-rollout.json [--sizes 200,500,4096] [--algos happo,mappo,hatrpo]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.train_bench import child_env, run_logged  # noqa: E402


def child(algo: str, num_envs: int, device_rollout: bool, iterations: int, out: str) -> None:
    from mapush import sim

    sim.import_isaacgym()  # the stand-in; before torch
    import torch

    from benchmarks.train_bench import LayerClock, instrument, iterations as split, \
        memory_growth
    from mapush.run.context import RunContext
    from mapush.spec import RunSpec
    from mapush import registry as trainers

    episode_length = 200
    device = os.environ.get("BENCH_DEVICE", "cuda:0")  # cpu: a quick check of the script
    cuda = device.startswith("cuda")
    clock = LayerClock()
    instrument(clock, steady_from=episode_length + 1)
    run_dir = tempfile.mkdtemp(prefix="%s-rollout-" % algo)
    override = Path(run_dir) / "override.yaml"
    key = "device_rollout: %s" % ("true" if device_rollout else "false")
    override.write_text((key if algo == "ppo" else "train: {%s}" % key) + "\n")
    spec = RunSpec(algo=algo, task="go1push_mid", object="cuboid", num_envs=num_envs,
                   steps=iterations * episode_length * num_envs, seed=1, run_dir=run_dir,
                   sim_device=device, rl_device=device, checkpoint_interval=10 ** 12,
                   config=str(override))
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    code = trainers.load(algo).train(RunContext(spec))
    if cuda:
        torch.cuda.synchronize()
    trace = clock.trace
    per_iteration, rollout, update = [], [], []
    for it, a in zip(split(trace, num_envs, episode_length),
                     range(0, len(trace) - episode_length, episode_length)):
        b = a + episode_length
        env_s = trace[b][2] - trace[a][2]
        per_iteration.append(1e3 * (it["wall_s"] - env_s) / episode_length)
        # the rollout's own steps, and the gap that holds the update (less one step)
        steps = [trace[i + 1][0] - trace[i][0] - (trace[i + 1][2] - trace[i][2])
                 for i in range(a, b - 1)]
        rollout.append(1e3 * statistics.median(steps))
        update.append(1e3 * (trace[b][0] - trace[b - 1][0] - (trace[b][2] - trace[b - 1][2]))
                      - rollout[-1])
    result = {"algo": algo, "envs": num_envs, "device_rollout": device_rollout, "exit": code,
              "non_physics_ms_per_step": per_iteration,
              "rollout_ms_per_step": rollout, "update_ms": update,
              "double_ms_per_step": 1e3 * (trace[-1][2] - trace[0][2]) / max(1, len(trace) - 1),
              "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2.0 ** 20 if cuda else 0.0,
              "memory_growth": memory_growth(clock.memory, 2 * episode_length),
              "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    Path(out).write_text(json.dumps(result, indent=1))


def summary(values: List[float], warmup: int) -> Tuple[float, float]:
    """(median, interquartile range) of the iterations after ``warmup``."""
    timed = values[warmup:]
    quartiles = statistics.quantiles(timed, n=4)
    return statistics.median(timed), quartiles[2] - quartiles[0]


def run_one(algo: str, envs: int, path: str, device_rollout: bool, iterations: int, site: str,
            records: str, logs: Path, timeout: float) -> Dict[str, Any]:
    name = "%s-%d-%s" % (algo, envs, path)
    out, log = logs / (name + ".json"), logs / (name + ".log")
    cmd = [sys.executable, __file__, "--child", algo, str(envs),
           "1" if device_rollout else "0", str(iterations), str(out)]
    code = run_logged(cmd, child_env(site, records), log, timeout)
    if code == 0 and out.is_file():
        return json.loads(out.read_text())
    return {"error": "%s: exit %s: %s" % (name, code, log.read_text()[-1200:])}


def main(argv: List[str]) -> int:
    if argv[:1] == ["--child"]:
        algo, envs, device_rollout, iterations, out = argv[1:6]
        child(algo, int(envs), device_rollout == "1", int(iterations), out)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--site", required=True, help="openrl and HARL with every patch")
    p.add_argument("--pristine-site", required=True,
                   help="the baseline: HARL without patches/harl/05, OpenRL with 01 only")
    p.add_argument("--records", required=True)
    p.add_argument("--pristine-records", help="the baseline site's records (default: --records)")
    p.add_argument("--baseline-rollout", action="store_true",
                   help="the device rollout on in the baseline too (two patched sites)")
    p.add_argument("--baseline-label", default="pristine", help="the baseline's name in the log")
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", default="200,500,4096")
    p.add_argument("--algos", default="happo")
    p.add_argument("--iterations", type=int, default=31,
                   help="training iterations per path; each but the last is timed (it ends at "
                        "the next one's first step), the first --warmup of them dropped")
    p.add_argument("--warmup", type=int, default=10, help="the first iterations, dropped")
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    logs = Path(args.out).parent / "rollout-logs"
    logs.mkdir(parents=True, exist_ok=True)
    if args.iterations - 1 - args.warmup < 20:
        p.error("--iterations %d with --warmup %d leaves fewer than 20 timed iterations"
                % (args.iterations, args.warmup))
    rows, errors = [], []
    cells = [(envs, algo) for envs in [int(s) for s in args.sizes.split(",") if s]
             for algo in [a for a in args.algos.split(",") if a]]
    for index, (envs, algo) in enumerate(cells):
        got = {}
        for patched in ((False, True) if index % 2 == 0 else (True, False)):
            start = time.time()
            label = "patched" if patched else args.baseline_label
            result = run_one(algo, envs, label, patched or args.baseline_rollout,
                             args.iterations, args.site if patched else args.pristine_site,
                             args.records if patched else
                             (args.pristine_records or args.records), logs, args.timeout)
            print("%s %d %s: %.0fs %s" % (
                algo, envs, label,
                time.time() - start, result.get("error") or
                "non-physics median %.2f ms/step, IQR %.2f" % summary(
                    result["non_physics_ms_per_step"], args.warmup)), flush=True)
            if "error" in result:
                errors.append(result["error"])
            got[patched] = result
        if "error" in got[False] or "error" in got[True]:
            continue
        pristine, pristine_iqr = summary(got[False]["non_physics_ms_per_step"], args.warmup)
        patched, patched_iqr = summary(got[True]["non_physics_ms_per_step"], args.warmup)
        rows.append({
            "device": got[True]["device"], "envs": envs, "algo": algo,
            "baseline": args.baseline_label,
            "order": "%s first" % (args.baseline_label if index % 2 == 0 else "patched"),
            "warmup": args.warmup,
            "timed": len(got[True]["non_physics_ms_per_step"]) - args.warmup,
            "pristine_ms_per_step": round(pristine, 3), "pristine_iqr_ms": round(pristine_iqr, 3),
            "patched_ms_per_step": round(patched, 3), "patched_iqr_ms": round(patched_iqr, 3),
            "ratio": round(patched / pristine, 3),
            "peak_gpu_mb": round(got[True]["peak_gpu_mb"], 1),
            "pristine_peak_gpu_mb": round(got[False]["peak_gpu_mb"], 1),
            "double_ms_per_step": round(got[True]["double_ms_per_step"], 3),
            "device_memory_growth_mb": {
                "pristine": got[False]["memory_growth"]["device_allocated_mb"],
                "patched": got[True]["memory_growth"]["device_allocated_mb"]},
            "iterations_ms_per_step": {
                "pristine": [round(x, 3) for x in got[False]["non_physics_ms_per_step"]],
                "patched": [round(x, 3) for x in got[True]["non_physics_ms_per_step"]]},
        })
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    for error in errors:
        print("error: %s" % error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
