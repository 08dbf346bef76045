"""MQE's own step at the pin, measured: MAPush's real envs and wrappers over the Isaac Gym
stand-in (tests/standin), pristine (upstream, unpatched) against patched (patches/mapush, as
the image applies them), in one run, on one device.

    python benchmarks/mqe_step.py --src MAPUSH_SRC --out DIR [--device cuda:0]
        [--sizes 200,500,4096] [--objects cuboid,cylinder] [--upper-size 500]
        [--steps 100] [--chunks 7] [--warmup 20] [--repeats 1] [--long-steps 0]

Each case (variant x task x object x envs) runs in a child process of its own (two MQE
trees cannot share one interpreter, and Isaac Gym must be imported before torch); the
children of one case run in turn with their order alternated (per case, and per repeat
with ``--repeats R``: R children per variant, their chunks pooled and each repeat's ratio
kept), so drift affects both variants alike. A child builds the env as
``mapush.sim.make_env`` does, warms up, then:

- **headline**: ``chunks`` timings of ``steps`` vector steps, synchronized before and
  after; the stand-in's ``simulate`` is timed inside (synchronized) and subtracted, so
  ``ms_per_step`` is MQE's own time (Python and torch around PhysX), median and IQR of the
  chunks;
- **split**: the same with synchronized timers around the locomotion policy, the actuator
  net, MQE's ``post_physics_step``, its NPC/field termination code (``check_termination``)
  and the wrapper's ``step``: the mid wrapper's own share is its step minus the env's;
- **host syncs**: ``torch.profiler`` over ``steps`` steps counts ``.item()`` reads
  (``aten::_local_scalar_dense``), stream synchronizations and device-to-host copies;
- ``peak_gpu_mb``: ``torch.cuda.max_memory_allocated`` over the run.

``--long-steps N`` adds one long run per variant (cuboid, 500 envs): the time per step,
the GPU memory allocated and the process RSS, sampled every 500 steps.

Results: ``DIR/mqe-step.json`` (rows with device, task, object, envs, pristine_ms_per_step,
patched_ms_per_step, peak_gpu_mb and the splits) and ``DIR/mqe-step.md``.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "standin"
# "eager": the patched tree with its CUDA graphs off (07-09's graph_step False): the fast
# step's eager path, 06 and the host-sync-free code of 07-09 (--variants pristine,patched,eager)
VARIANTS = ("pristine", "patched", "eager")


# --------------------------------------------------------------------------- child
def _trace(case):
    """The equivalence trace on the device: tests/real_mqe_probe.py's ``case_trace`` (the
    CPU tests' trace: seed 3, actions from a CPU generator seeded 7) for ``case["steps"]``
    steps, into ``case["trace_file"]`` (.npz). ``case["graph_step"]`` False runs the patched
    step eagerly (patches/mapush/07, 08 and 09's graphs off)."""
    sys.path[:0] = [str(STANDIN), case["tree"], str(REPO)]
    os.environ["MAPUSH_ROOT"] = case["tree"]
    from tests import real_mqe_probe as probe  # imports Isaac Gym (the stand-in) first

    result = probe.case_trace(case["envs"], case["task"], case["object"], device=case["device"],
                              steps=case["steps"], out=case["trace_file"], fast_step=True,
                              graph=None if case.get("graph_step", True) else "eager")
    print("MQE_STEP " + json.dumps(result), flush=True)
    os._exit(0)


def _child(case):
    if case.get("trace_file"):
        _trace(case)
    sys.path[:0] = [str(STANDIN), case["tree"], str(REPO)]
    os.environ["MAPUSH_ROOT"] = case["tree"]
    from mapush import sim

    sim.import_isaacgym()
    import torch
    from isaacgym import gymapi
    from mapush.spec import RunSpec

    device = case["device"]
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    timers = {}

    def timed(name, fn):
        def wrapper(*a, **kw):
            sync()
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            sync()
            timers[name] = timers.get(name, 0.0) + time.perf_counter() - t0
            return out
        return wrapper

    simulate = gymapi.Gym.simulate
    gymapi.Gym.simulate = timed("simulate", simulate)
    spec = RunSpec(algo="ppo", task=case["task"], object=case["object"],
                   num_envs=case["envs"], steps=1, seed=1, run_dir="unused",
                   sim_device=device, rl_device=device)
    t0 = time.perf_counter()
    env, _ = sim.make_env(spec)
    built_s = time.perf_counter() - t0
    inner = env.env
    if case["variant"] == "eager":  # the fast step without its graphs
        for layer in (env, inner):
            if "graph_step" in vars(layer):
                layer.graph_step = False
    agents = 1 if case["task"] == "go1push_upper" else env.num_agents
    gen = torch.Generator(device=device).manual_seed(0)
    actions = [torch.rand(case["envs"], agents, env.action_space.shape[0], device=device,
                          generator=gen) * 2 - 1 for _ in range(4)]
    env.reset()

    def run(n):
        for i in range(n):
            env.step(actions[i % 4])

    run(case["warmup"])
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def chunks():
        per_step = []
        for _ in range(case["chunks"]):
            timers.clear()
            sync()
            t0 = time.perf_counter()
            run(case["steps"])
            sync()
            total = time.perf_counter() - t0
            per_step.append({"total": total / case["steps"],
                             **{k: v / case["steps"] for k, v in timers.items()}})
        return per_step

    headline = chunks()
    # the split: synchronized timers around the parts
    parts = {"locomotion": (inner, "locomotion_policy"), "actuator": (inner, "actuator_network"),
             "post_physics": (inner, "post_physics_step"),
             "field_termination": (inner, "check_termination"), "env_step": (inner, "step")}
    originals = {}
    for name, (obj, attr) in parts.items():
        if hasattr(obj, attr):
            originals[attr] = vars(obj).get(attr)
            setattr(obj, attr, timed(name, getattr(obj, attr)))
    env_step = env.step
    env.step = timed("wrapper_step", env_step)
    split = chunks()
    env.step = env_step
    for attr, original in originals.items():  # instance attributes back; methods unshadowed
        if original is not None:
            setattr(inner, attr, original)
        else:
            delattr(inner, attr)
    syncs = {}
    if cuda:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run(case["steps"])
            sync()
        for event in prof.events():
            name = event.name
            key = ("item" if name == "aten::_local_scalar_dense" else
                   "stream_sync" if name in ("cudaStreamSynchronize", "cudaDeviceSynchronize",
                                             "cudaEventSynchronize") else
                   "dtoh_copy" if "DtoH" in name or "Device -> Pageable" in name or
                   "Device -> Pinned" in name else None)
            if key:
                syncs[key] = syncs.get(key, 0) + 1
        syncs = {k: v / float(case["steps"]) for k, v in syncs.items()}
    long_samples = []
    if case.get("long_steps"):
        import resource

        done = 0
        while done < case["long_steps"]:
            sync()
            t0 = time.perf_counter()
            run(500)
            sync()
            done += 500
            long_samples.append({
                "step": done, "ms_per_step": (time.perf_counter() - t0) / 500 * 1e3,
                "gpu_mb": torch.cuda.memory_allocated() / 2 ** 20 if cuda else None,
                "gpu_reserved_mb": torch.cuda.memory_reserved() / 2 ** 20 if cuda else None,
                "rss_mb": int(open("/proc/self/statm").read().split()[1])
                * os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20,  # resident now
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            })
            if case.get("long_file"):  # as it goes: a run cut short keeps its samples
                with open(case["long_file"], "a") as handle:
                    handle.write(json.dumps(long_samples[-1]) + "\n")
    print("MQE_STEP " + json.dumps({
        "case": {k: v for k, v in case.items() if k != "tree"},
        "built_s": built_s, "headline": headline, "split": split, "syncs": syncs,
        "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None,
        "long": long_samples,
        "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
        # patches/mapush/07's, 08's and 09's CUDA graphs, if captured (None: not in this tree)
        "graphed": {"mid_step": getattr(env, "_graph", None) is not None
                    if "graph_step" in vars(env) else None,
                    "post_physics": vars(inner).get("_core_graph") is not None
                    if "graph_step" in vars(inner) else None,
                    "control": vars(inner).get("_torques_graph") is not None  # 09's
                    if "graph_step" in vars(inner) else None},
    }), flush=True)
    os._exit(0)


# --------------------------------------------------------------------------- parent
def _median_iqr(values):
    values = sorted(values)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2]}


def _summary(result):
    head = result["headline"]
    own = [c["total"] - c.get("simulate", 0.0) for c in head]
    split = result["split"]
    parts = {}
    for key in ("locomotion", "actuator", "post_physics", "field_termination", "env_step",
                "wrapper_step", "simulate"):
        values = [c.get(key, 0.0) * 1e3 for c in split]
        parts[key] = statistics.median(values)
    parts["mid_wrapper"] = parts["wrapper_step"] - parts["env_step"]
    parts["rest_of_step"] = parts["env_step"] - parts["locomotion"] - parts["actuator"] - \
        parts["simulate"] - parts["post_physics"]
    parts["post_physics_without_field"] = parts["post_physics"] - parts["field_termination"]
    return {"ms_per_step": {k: v * 1e3 for k, v in _median_iqr(own).items()},
            "simulate_ms": statistics.median(c.get("simulate", 0.0) for c in head) * 1e3,
            "split_ms": parts, "syncs_per_step": result["syncs"],
            "peak_gpu_mb": result["peak_gpu_mb"], "built_s": result["built_s"],
            "long": result["long"], "graphed": result.get("graphed")}


def _pooled(results):
    """The children of one variant and case (--repeats) as one: their chunks together."""
    first = results[0]
    syncs = {}
    for key in {k for r in results for k in r["syncs"]}:
        syncs[key] = statistics.median(r["syncs"].get(key, 0.0) for r in results)
    return dict(first, headline=[c for r in results for c in r["headline"]],
                split=[c for r in results for c in r["split"]], syncs=syncs,
                peak_gpu_mb=max(r["peak_gpu_mb"] or 0 for r in results),
                built_s=statistics.median(r["built_s"] for r in results))


def _run_child(case, timeout):
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(case)],
                          capture_output=True, text=True, timeout=timeout,
                          # MQE's torch.load of the high level's command net passes no
                          # weights_only, which torch >= 2.6 (the GPU machine's) defaults to True
                          env=dict(os.environ, PYTHONWARNINGS="ignore",
                                   TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"))
    for line in proc.stdout.splitlines():
        if line.startswith("MQE_STEP "):
            return json.loads(line[len("MQE_STEP "):]), None
    return None, (proc.stderr or proc.stdout)[-2000:]


def _prepare(src, out):
    trees = {}
    for variant in ("pristine", "patched"):
        dest = out / "trees" / variant
        if not dest.exists():
            cmd = [sys.executable, str(STANDIN / "prepare_tree.py"), src, str(dest)]
            subprocess.run(cmd + (["--pristine"] if variant == "pristine" else []),
                           check=True, stdout=subprocess.DEVNULL)
        trees[variant] = str(dest)
    trees["eager"] = trees["patched"]
    return trees


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--src", help="MAPush at the pin (MAPUSH_SRC)")
    parser.add_argument("--out", default="benchmarks/.out/mqe-step")
    parser.add_argument("--trees", help="where the two MAPush trees go (default: --out)")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--sizes", default="200,500,4096")
    parser.add_argument("--objects", default="cuboid,cylinder")
    parser.add_argument("--upper-size", type=int, default=500, help="0: no upper task")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1,
                        help="children per variant and case, their order alternated; the "
                             "chunks are pooled, and each repeat's ratio is kept")
    parser.add_argument("--long-steps", type=int, default=0)
    parser.add_argument("--variants", default="pristine,patched",
                        help="which variants run, alternated (default: pristine,patched; "
                             "eager: the patched tree with its graphs off)")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--equivalence", type=int, default=0, metavar="STEPS",
                        help="also trace STEPS steps of each object: patched (graphed) "
                             "against pristine and against patched run eagerly")
    parser.add_argument("--equivalence-envs", type=int, default=64)
    args = parser.parse_args(argv)
    if args.child:
        _child(json.loads(args.child))
        return 0
    if not args.src:
        parser.error("--src is required (MAPush at the pin)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trees = _prepare(args.src, Path(args.trees) if args.trees else out)
    variants = tuple(v for v in VARIANTS if v in args.variants.split(","))
    cases = [("go1push_mid", obj, int(n)) for n in args.sizes.split(",") if n
             for obj in args.objects.split(",") if obj]
    if args.upper_size:
        cases.append(("go1push_upper", "cuboid", args.upper_size))
    rows, failures = [], []
    for k, (task, obj, envs) in enumerate(cases):
        found, orders = {}, []
        for r in range(args.repeats):  # the order alternates per case and per repeat
            order = variants if (k + r) % 2 == 0 else variants[::-1]
            orders.append(list(order))
            for variant in order:
                case = {"tree": trees[variant], "variant": variant, "task": task,
                        "object": obj, "envs": envs, "device": args.device,
                        "steps": args.steps, "chunks": args.chunks, "warmup": args.warmup}
                started = time.perf_counter()
                result, error = _run_child(case, args.timeout)
                print("mqe_step: %s %s %s %d envs (repeat %d): %s (%.0f s)"
                      % (variant, task, obj, envs, r + 1, "ok" if result else "FAILED",
                         time.perf_counter() - started), file=sys.stderr, flush=True)
                if result is None:
                    failures.append({"case": case, "error": error})
                    continue
                found.setdefault(variant, []).append(result)
        if not found:
            continue
        row = {"device": next(iter(found.values()))[0]["device_name"], "task": task,
               "object": obj, "envs": envs, "order": orders[0], "orders": orders,
               "repeats": args.repeats}
        for variant in VARIANTS:
            if variant in found:
                summary = dict(_summary(_pooled(found[variant])),
                               device_name=found[variant][0]["device_name"])
                row["%s_ms_per_step" % variant] = summary["ms_per_step"]["median"]
                row[variant] = summary
        row["peak_gpu_mb"] = max(row[v]["peak_gpu_mb"] or 0 for v in found)
        if "pristine" in found and "patched" in found:
            row["patched_over_pristine"] = row["patched_ms_per_step"] / \
                row["pristine_ms_per_step"]
            # one ratio per repeat (each child's median): how stable the ratio is
            ratios = [_summary(b)["ms_per_step"]["median"] / _summary(a)["ms_per_step"]["median"]
                      for a, b in zip(found["pristine"], found["patched"])]
            row["repeat_ratios"] = ratios
            row["repeat_ratio"] = _median_iqr(ratios)
        if "pristine" in found and "eager" in found:
            row["eager_over_pristine"] = row["eager_ms_per_step"] / row["pristine_ms_per_step"]
        rows.append(row)
    equivalence = []
    if args.equivalence:
        import numpy as np

        # the mid level per object, and the high level (patches 10-12) with --upper-size
        tasks = [("go1push_mid", obj) for obj in args.objects.split(",") if obj] + \
            ([("go1push_upper", "cuboid")] if args.upper_size else [])
        for task, obj in tasks:
            traces = {}
            for name, variant, graph in (("pristine", "pristine", True),
                                         ("patched", "patched", True),
                                         ("patched_eager", "patched", False)):
                case = {"tree": trees[variant], "variant": name, "task": task,
                        "object": obj, "envs": args.equivalence_envs, "device": args.device,
                        "steps": args.equivalence, "graph_step": graph,
                        "trace_file": str(out / ("trace-%s-%s-%s.npz" % (task, obj, name)))}
                result, error = _run_child(case, args.timeout)
                if result is None:
                    failures.append({"case": case, "error": error})
                    continue
                traces[name] = dict(result, data=np.load(case["trace_file"]))
            if len(traces) < 3:
                continue
            row = {"task": task, "object": obj, "envs": args.equivalence_envs,
                   "steps": args.equivalence, "successes": traces["patched"]["successes"],
                   "resets": traces["patched"]["resets"],
                   "graphed": traces["patched"]["graphed"],
                   "env_graphed": traces["patched"]["env_graphed"],
                   "env_torques_graphed": traces["patched"]["env_torques_graphed"],
                   "eager_graphed": traces["patched_eager"]["graphed"]
                   or traces["patched_eager"]["env_graphed"]
                   or traces["patched_eager"]["env_torques_graphed"]}
            for ref in ("pristine", "patched_eager"):
                # every array the trace holds (tests/real_mqe_probe.py: case_trace)
                for key in traces["patched"]["data"].files:
                    a = traces["patched"]["data"][key].astype(np.float64)
                    b = traces[ref]["data"][key].astype(np.float64)
                    row["max_abs_diff_%s_%s" % (key, ref)] = float(np.max(np.abs(a - b)))
                    tol = dict(rtol=1e-5, atol=1e-5 if key == "terms" else 1e-6)
                    row.setdefault("equal", True)
                    row["equal"] = row["equal"] and bool(np.allclose(a, b, **tol))
            equivalence.append(row)
            print("mqe_step: equivalence %s %s: %s" % (task, obj, json.dumps(row)),
                  file=sys.stderr, flush=True)
            # graphed: the mid wrapper's step (07) or the high level's wrapper's (12)
            if not row["equal"] or not row["graphed"] or not row["env_graphed"] \
                    or row["eager_graphed"]:
                failures.append({"case": {"variant": "equivalence", "task": task, "object": obj},
                                 "error": "patched (graphed) differs from pristine or eager, "
                                          "or did not graph: %s" % json.dumps(row)})
    long_runs = {}
    if args.long_steps:
        for variant in variants:
            case = {"tree": trees[variant], "variant": variant, "task": "go1push_mid",
                    "object": "cuboid", "envs": 500, "device": args.device, "steps": 10,
                    "chunks": 1, "warmup": args.warmup, "long_steps": args.long_steps,
                    "long_file": str(out / ("long-%s.jsonl" % variant))}
            result, error = _run_child(case, args.timeout)
            if result is None:
                failures.append({"case": case, "error": error})
            else:
                long_runs[variant] = result["long"]
    report = {"rows": rows, "long": long_runs, "failures": failures,
              "equivalence": equivalence,
              "args": {k: v for k, v in vars(args).items() if k != "child"}}
    (out / "mqe-step.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    lines = ["| device | task | object | envs | pristine ms/step | patched ms/step | patched/"
             "pristine | peak GPU MB |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %d | %s | %s | %s | %.0f |" % (
            r["device"], r["task"], r["object"], r["envs"],
            "%.2f" % r["pristine_ms_per_step"] if "pristine_ms_per_step" in r else "-",
            "%.2f" % r["patched_ms_per_step"] if "patched_ms_per_step" in r else "-",
            "%.2f" % r["patched_over_pristine"] if "patched_over_pristine" in r else "-",
            r["peak_gpu_mb"]))
    (out / "mqe-step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for failure in failures:
        print("FAILED %s: %s" % (failure["case"].get("variant"), failure["error"]),
              file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
