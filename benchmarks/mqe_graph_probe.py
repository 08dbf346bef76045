"""What CUDA graphs could take off MQE's own step (#35): for each region of a patched step,
its eager time, the time of one replay of a CUDA graph captured from it, or the first line
that stops a capture (a host sync, found with ``torch.cuda.set_sync_debug_mode``).

    python benchmarks/mqe_graph_probe.py --src MAPUSH_SRC --out DIR [--trees DIR]
        [--sizes 500] [--objects cuboid] [--calls 50]

MAPush's real MQE at the pin, patched as the image patches it (``patches/mapush``), over
the Isaac Gym stand-in (``tests/standin``), on ``cuda:0``; one child process per region
(a failed capture leaves its CUDA context unusable). The regions:

- ``mid_wrapper_own``: ``Go1PushMidWrapper.step`` with MQE's ``step`` replaced by its last
  outputs, i.e. the wrapper's observation and reward code alone;
- ``mqe.<method>``: one method of the Go1 env (``compute_observations``,
  ``check_termination``, ``_post_physics_step_callback``, ``post_physics_step``, ...).

A replay reads and writes the tensors the capture saw, so its outputs are not the step's:
this measures what a graph would cost, not a graphed step. What it takes to graph a
region for real (static inputs, outputs copied out, state kept in place) is #35's work.
Results: ``DIR/mqe-graph-probe.json``.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
REGIONS = ("mid_wrapper_own", "mqe.compute_observations", "mqe.compute_reward",
           "mqe.check_termination", "mqe._post_physics_step_callback", "mqe._step_npc",
           "mqe.post_physics_step")


def _child(case):
    tree = case["tree"]
    sys.path[:0] = [str(REPO / "tests" / "standin"), tree, str(REPO)]
    os.environ["MAPUSH_ROOT"] = tree
    from mapush import sim

    sim.import_isaacgym()
    import torch
    from mapush.spec import RunSpec

    dev = "cuda:0"
    spec = RunSpec(algo="ppo", task="go1push_mid", object=case["object"], num_envs=case["envs"],
                   steps=1, seed=1, run_dir="unused", sim_device=dev, rl_device=dev)
    env, _ = sim.make_env(spec)
    inner = env.env
    gen = torch.Generator(device=dev).manual_seed(0)
    action = torch.rand(case["envs"], env.num_agents, env.action_space.shape[0], device=dev,
                        generator=gen) * 2 - 1
    env.reset()
    for _ in range(20):
        env.step(action)
    torch.cuda.synchronize()

    def timeit(fn):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(case["calls"]):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / case["calls"] * 1e3

    row = {"region": case["region"], "object": case["object"], "envs": case["envs"],
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "wrapper_step_ms": timeit(lambda: env.step(action))}
    if case["region"] == "mid_wrapper_own":
        last = inner.step((action * env.action_scale).reshape(-1, env.action_space.shape[0]))
        inner.step = lambda _action: last
        fn = lambda: env.step(action)  # noqa: E731
    else:
        fn = getattr(inner, case["region"].split(".", 1)[1])
    row["eager_ms"] = timeit(fn)
    torch.cuda.set_sync_debug_mode("error")  # the first host sync, if any, raises here
    try:
        fn()
    except RuntimeError as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if tree in f.filename]
        row["first_sync"] = ["%s:%d %s" % (os.path.relpath(f.filename, tree), f.lineno,
                                           (f.line or "").strip()[:100]) for f in frames[-2:]]
    torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    if "first_sync" not in row:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        row["graph_ms"] = timeit(graph.replay)
    print("GRAPH_PROBE " + json.dumps(row), flush=True)
    os._exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--src")
    parser.add_argument("--out")
    parser.add_argument("--trees")
    parser.add_argument("--sizes", default="500")
    parser.add_argument("--objects", default="cuboid")
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    if args.child:
        _child(json.loads(args.child))
    if not (args.src and args.out):
        parser.error("--src and --out are required")
    import mqe_step

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tree = mqe_step._prepare(args.src, Path(args.trees) if args.trees else out)["patched"]
    rows, failures = [], []
    for envs in [int(n) for n in args.sizes.split(",") if n]:
        for obj in args.objects.split(","):
            for region in REGIONS:
                case = {"tree": str(tree), "region": region, "object": obj, "envs": envs,
                        "calls": args.calls}
                proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(case)],
                                      capture_output=True, text=True, timeout=600)
                found = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines()
                         if line.startswith("GRAPH_PROBE ")]
                if found:
                    rows.append(found[0])
                    print(json.dumps(found[0]), flush=True)
                else:
                    failures.append({"case": case, "error": (proc.stdout + proc.stderr)[-3000:]})
                    print("FAILED %s: %s" % (region, failures[-1]["error"][-500:]), flush=True)
                (out / "mqe-graph-probe.json").write_text(json.dumps(  # as it goes
                    {"rows": rows, "failures": failures}, indent=1, sort_keys=True))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
