"""Runs one case of MAPush's real MQE in this process and prints its facts as one JSON line
(``python tests/real_mqe_probe.py CASE [N_ENVS]``), for tests/test_real_mqe_patches.py.

It runs in a subprocess whose environment is ``tests.conftest.real_env`` (the Isaac Gym
stand-in and a prepared MAPush tree first on the path): Isaac Gym must be imported before
torch, which the pytest process has already imported.
"""
import json
import sys

from mapush import sim

sim.import_isaacgym()

import torch  # noqa: E402  (after isaacgym)
from isaacgym import gymapi  # noqa: E402

from mapush.spec import RunSpec  # noqa: E402

SIMS = []
_create_sim = gymapi.Gym.create_sim


def _recording_create_sim(self, *args, **kwargs):
    SIMS.append(_create_sim(self, *args, **kwargs))
    return SIMS[-1]


gymapi.Gym.create_sim = _recording_create_sim


def spec(task="go1push_mid", obj="cuboid", num_envs=2, seed=1):
    return RunSpec(algo="ppo", task=task, object=obj, num_envs=num_envs, steps=100, seed=seed,
                   run_dir="unused", sim_device="cpu", rl_device="cpu")


def tensors_of(*objects):
    """``{name: device}`` of every tensor attribute of the objects, and of their lists,
    tuples and dicts of tensors."""
    found = {}
    for prefix, obj in objects:
        for name, value in vars(obj).items():
            values = value.items() if isinstance(value, dict) else \
                enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
            for key, item in values:
                if isinstance(item, torch.Tensor):
                    label = "%s.%s" % (prefix, name) + ("" if key is None else "[%s]" % key)
                    found[label] = str(item.device)
    return found


def case_contact_pairs(n):
    """The contact-pair buffer that reaches create_sim, for 1000 asked (also when the env
    fails later, as pristine MQE does on a CPU pipeline)."""
    error = None
    try:
        sim.make_env(spec(num_envs=n), contact_pairs=1000)
    except Exception as exc:  # noqa: BLE001 - reported
        error = "%s: %s" % (type(exc).__name__, exc)
    return {"max_gpu_contact_pairs": [s.params.physx.max_gpu_contact_pairs for s in SIMS],
            "error": error}


def case_devices(n, task):
    env, _ = sim.make_env(spec(task=task, num_envs=n))
    obs = env.reset()
    shape = (n, env.num_agents, env.action_space.shape[0]) if task == "go1push_mid" else \
        (n, 1, env.action_space.shape[0])
    for _ in range(3):
        obs, _reward, _done, _info = env.step(torch.zeros(shape))
    return {"devices": tensors_of(("wrapper", env), ("env", env.env)),
            "env_device": str(env.env.device), "obs_device": str(obs.device)}


def case_rrt_resets(n):
    """Four resets, as upstream's test.py makes (openrl_ws/test.py:132-133 and the two
    before), then one with planning asked for (patches/mapush/04's switch, if any)."""
    env, _ = sim.make_env(spec(task="go1push_upper", num_envs=n))
    planned = []
    for _ in range(4):
        env.reset()
        planned.append(hasattr(env, "rrt") or bool(getattr(env, "rrt_stats", None)))
    asked = None
    if hasattr(env, "rrt_planning"):
        env.rrt_planning = True
        env.reset()
        asked = env.rrt_stats
    return {"planned_at_reset": planned, "asked": asked, "reset_count": env.reset_count}


def case_obstacle_degree(n):
    """The box placed, in the physics' own state, at a chosen distance from the last
    obstacle slot, every other NPC moved far away; one step."""
    env, _ = sim.make_env(spec(task="go1push_upper", num_envs=n))
    env.reset()
    inner = env.env
    world = SIMS[-1]
    distances = [1.4, 2.2, 0.6][:n]
    for i, d in enumerate(distances):
        npcs = inner.npc_indices[i].long().tolist()
        box, obstacle, others = npcs[0], npcs[-1], npcs[1:-1]
        for k, idx in enumerate(others):
            world.root[idx, 0:2] = world.root[obstacle, 0:2] + torch.tensor([0.0, 40.0 + k])
        world.root[box, 0:2] = world.root[obstacle, 0:2] + torch.tensor([d, 0.0])
    env.step(torch.zeros(n, 1, env.action_space.shape[0]))
    inner = env.env
    return {"distances": distances,
            "threshold": getattr(getattr(inner.cfg, "test_metrics", None),
                                 "collision_threshold", None),
            "upstream_threshold": getattr(inner.cfg.goal, "collision_threshold", 1.0),
            "collision_degree": inner.collision_degree_buf.tolist(),
            "obstacle_collision_degree":
                inner.obstacle_collision_degree_buf.tolist()
                if hasattr(inner, "obstacle_collision_degree_buf") else None}


# ops that read a device tensor back on the host (a stream sync, which a CUDA graph capture
# refuses), counted in the emulated replays: .item() and boolean-mask indexing
HOST_SYNCS = ("aten::_local_scalar_dense", "aten::nonzero")
GRAPH_SYNCS = {}


def emulated_capture(wrapper, fn):
    """patches/mapush/07's ``_capture`` on the CPU, where CUDA graphs do not exist: fn runs
    once, and each replay runs it again over the attribute bindings of the wrapper and of
    MQE's env as they were at the capture, then writes its outputs into the first ones. A
    graph reads the tensors it was captured with: a tensor MQE rebinds after the capture is
    stale in the graph, and is stale here too; one updated in place is fresh in both."""
    frozen = [(obj, dict(vars(obj))) for obj in (wrapper, wrapper.env)]
    out = fn()

    def replay():
        from torch.profiler import ProfilerActivity, profile

        current = [(obj, dict(vars(obj))) for obj, _ in frozen]
        for obj, bindings in frozen:
            vars(obj).clear()
            vars(obj).update(bindings)
        try:
            with profile(activities=[ProfilerActivity.CPU]) as prof:  # what a capture forbids
                new = fn()
            for event in prof.events():
                if event.name in HOST_SYNCS:
                    GRAPH_SYNCS[event.name] = GRAPH_SYNCS.get(event.name, 0) + 1
        finally:
            for obj, bindings in current:
                vars(obj).clear()
                vars(obj).update(bindings)
        for mine, theirs in zip(out, new):
            mine.copy_(theirs)

    return replay, out


def refused_capture(wrapper, fn):
    """A capture that fails as a host sync makes it fail, after one call of fn."""
    fn()
    raise RuntimeError("called a synchronizing CUDA operation (refused by the test)")


def case_trace(n, task, obj):
    """300 steps from the same seed and seeded random actions; each step's observations,
    rewards and dones, and at the end the first-episode buffers and the reward terms,
    into the .npz file MAPUSH_PROBE_OUT names."""
    import os

    import numpy as np

    env, _ = sim.make_env(spec(task=task, obj=obj, num_envs=n, seed=3),
                          fast_step=os.environ.get("MAPUSH_PROBE_FAST_STEP") != "0")
    if os.environ.get("MAPUSH_PROBE_GRAPH") == "emulate":  # patches/mapush/07 on the CPU
        type(env)._capture = emulated_capture
        env.graph_step = True
    if os.environ.get("MAPUSH_PROBE_GRAPH") == "refuse":  # a capture that fails
        type(env)._capture = refused_capture
        env.graph_step = True
    gen = torch.Generator().manual_seed(7)
    agents = 1 if task == "go1push_upper" else env.num_agents
    obs = env.reset()
    trace = {"obs": [], "reward": [], "done": []}
    forced = 0
    for step in range(300):
        if task == "go1push_upper" and step == 150:  # its episode is 8,000 steps: reset here
            obs = env.reset()
            forced += 1
        action = torch.rand(n, agents, env.action_space.shape[0], generator=gen) * 2 - 1
        obs, reward, done, _info = env.step(action)
        trace["obs"].append(obs.detach().cpu().numpy().copy())
        trace["reward"].append(reward.detach().cpu().numpy().copy())
        trace["done"].append(done.detach().cpu().numpy().copy())
    inner = env.env
    out = {k: np.stack(v) for k, v in trace.items()}
    for name in ("init_finished_buf", "init_episode_length_buf", "collision_degree_buf",
                 "collaboration_degree_buf", "episode_length_buf"):
        out[name] = getattr(inner, name).detach().cpu().numpy()
    terms = getattr(env, "reward_buffer", {})
    out["terms"] = np.array([float(terms[k]) for k in sorted(terms)], dtype=np.float64)
    np.savez(os.environ["MAPUSH_PROBE_OUT"], **out)
    return {"steps": 300, "resets": int(out["done"].sum()) + forced, "terms": sorted(terms),
            "fast_step": getattr(env, "fast_step", None),
            "graphed": getattr(env, "_graph", None) is not None, "graph_syncs": GRAPH_SYNCS,
            "graph_step": getattr(env, "graph_step", None)}


CASES = {
    "contact_pairs": case_contact_pairs,
    "devices_mid": lambda n: case_devices(n, "go1push_mid"),
    "devices_upper": lambda n: case_devices(n, "go1push_upper"),
    "rrt_resets": case_rrt_resets,
    "obstacle_degree": case_obstacle_degree,
    "trace_cuboid": lambda n: case_trace(n, "go1push_mid", "cuboid"),
    "trace_cylinder": lambda n: case_trace(n, "go1push_mid", "cylinder"),
    "trace_upper": lambda n: case_trace(n, "go1push_upper", "cuboid"),
}

if __name__ == "__main__":
    result = CASES[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    print(json.dumps(result, sort_keys=True))
    sys.stdout.flush()
