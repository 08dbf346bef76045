"""Where the eager rest of a patched MQE step goes (#35): synchronized timers around each
method that stays eager, and the host syncs and host-to-device copies per step, on the GPU
(each keyed by its Python stack where the profiler records one; the device's torch recorded
none, so the stored result has the counts only).

    python benchmarks/mqe_eager_profile.py --src MAPUSH_SRC --out DIR [--trees DIR]
        [--envs 500] [--objects cuboid,cylinder] [--steps 40]

The patched tree (patches/mapush, as the image applies them; prepared by mqe_step.py) over
the Isaac Gym stand-in, one child per object. Writes DIR/mqe-eager-profile.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "standin"
INNER = ("step", "post_physics_step", "_graphed_post_physics_core", "_post_physics_core",
         "_step_npc", "reset_idx", "_fill_extras", "_reset_dofs", "_reset_root_states",
         "_reset_buffers", "store_recording", "compute_observations", "_render_headless",
         "locomotion_policy", "actuator_network", "_compute_torques", "_update_target_state",
         "_resample_commands", "_update_terrain_curriculum")
GYM = ("simulate", "set_dof_state_tensor_indexed", "set_actor_root_state_tensor_indexed",
       "set_dof_actuation_force_tensor", "refresh_dof_state_tensor",
       "refresh_actor_root_state_tensor", "refresh_net_contact_force_tensor",
       "refresh_rigid_body_state_tensor", "fetch_results")


def _child(case):
    sys.path[:0] = [str(STANDIN), case["tree"], str(REPO)]
    os.environ["MAPUSH_ROOT"] = case["tree"]
    from mapush import sim

    sim.import_isaacgym()
    import torch
    from isaacgym import gymapi
    from mapush.spec import RunSpec

    dev = "cuda:0"
    timers, calls = Counter(), Counter()
    on = [False]

    def timed(name, fn):
        def wrapper(*a, **kw):
            if not on[0]:
                return fn(*a, **kw)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            torch.cuda.synchronize()
            timers[name] += time.perf_counter() - t0
            calls[name] += 1
            return out
        return wrapper

    for name in GYM:
        if hasattr(gymapi.Gym, name):
            setattr(gymapi.Gym, name, timed("gym." + name, getattr(gymapi.Gym, name)))
    spec = RunSpec(algo="ppo", task="go1push_mid", object=case["object"], num_envs=case["envs"],
                   steps=1, seed=1, run_dir="unused", sim_device=dev, rl_device=dev)
    env, _ = sim.make_env(spec)
    inner = env.env
    for name in INNER:
        if hasattr(inner, name):
            setattr(inner, name, timed("mqe." + name, getattr(inner, name)))
    env.step = timed("wrapper.step", env.step)
    gen = torch.Generator(device=dev).manual_seed(0)
    actions = [torch.rand(case["envs"], env.num_agents, env.action_space.shape[0], device=dev,
                          generator=gen) * 2 - 1 for _ in range(4)]
    env.reset()
    for i in range(20):
        env.step(actions[i % 4])
    torch.cuda.synchronize()
    n = case["steps"]
    t0 = time.perf_counter()
    for i in range(n):
        env.step(actions[i % 4])
    torch.cuda.synchronize()
    plain_ms = (time.perf_counter() - t0) / n * 1e3
    on[0] = True
    resets = 0
    for i in range(n):
        env.step(actions[i % 4])
        resets += len(inner.reset_ids)
    on[0] = False
    split = {k: {"ms_per_step": v / n * 1e3, "calls_per_step": calls[k] / float(n)}
             for k, v in sorted(timers.items(), key=lambda kv: -kv[1])}
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 with_stack=True) as prof:
        for i in range(n):
            env.step(actions[i % 4])
        torch.cuda.synchronize()
    where, ops = Counter(), Counter()
    for event in prof.events():
        name = event.name
        if name in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                    "aten::_local_scalar_dense") or "Memcpy" in name and "HtoD" in name \
                or "cudaMemcpyAsync" == name:
            frames = [f for f in (event.stack or []) if ".py(" in f and "torch/" not in f][:3]
            where[name + " @ " + " < ".join(frames)] += 1
    for row in prof.key_averages():
        ops[row.key] = row.self_cpu_time_total
    print("PROFILE " + json.dumps({
        "object": case["object"], "envs": case["envs"], "plain_ms_per_step": plain_ms,
        "resets_per_step": resets / float(n), "split": split,
        "syncs_by_stack_per_step": {k: v / float(n) for k, v in where.most_common(40)},
        "top_self_cpu_ms_per_step": {k: v / 1e3 / n for k, v in ops.most_common(40)},
        "graphed": {k: vars(inner).get(k) is not None
                    for k in ("_core_graph", "_torques_graph")},  # patches 08 and 09
    }), flush=True)
    os._exit(0)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return _child(json.loads(sys.argv[2]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--trees")
    parser.add_argument("--envs", type=int, default=500)
    parser.add_argument("--objects", default="cuboid,cylinder")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "benchmarks"))
    import mqe_step

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tree = mqe_step._prepare(args.src, Path(args.trees) if args.trees else out)["patched"]
    rows = []
    for obj in args.objects.split(","):
        case = {"tree": str(tree), "object": obj, "envs": args.envs, "steps": args.steps}
        proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(case)],
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONWARNINGS="ignore",
                                       TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"))
        got = [json.loads(line[8:]) for line in proc.stdout.splitlines()
               if line.startswith("PROFILE ")]
        rows.append(got[0] if got else {"object": obj, "error": proc.stderr[-3000:]})
        print(json.dumps(rows[-1], indent=1)[:6000], flush=True)
    (out / "mqe-eager-profile.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
