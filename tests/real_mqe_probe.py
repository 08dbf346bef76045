"""Runs one case of MAPush's real MQE in this process and prints its facts as one JSON line
(``python tests/real_mqe_probe.py CASE [N_ENVS]``), for tests/test_real_mqe_patches.py.

It runs in a subprocess whose environment is ``tests.conftest.real_env`` (the Isaac Gym
stand-in and a prepared MAPush tree first on the path): Isaac Gym must be imported before
torch, which the pytest process has already imported.
"""
import json
import sys

import numpy as np

from mapush import sim

sim.import_isaacgym()

import torch  # noqa: E402  (after isaacgym)
from isaacgym import contact, gymapi, gymtorch  # noqa: E402

from mapush.envs.step_record import graph_report  # noqa: E402
from mapush.spec import RunSpec  # noqa: E402

SIMS = []
_create_sim = gymapi.Gym.create_sim


def _recording_create_sim(self, *args, **kwargs):
    SIMS.append(_create_sim(self, *args, **kwargs))
    return SIMS[-1]


gymapi.Gym.create_sim = _recording_create_sim


def spec(task="go1push_mid", obj="cuboid", num_envs=2, seed=1, device="cpu"):
    return RunSpec(algo="ppo", task=task, object=obj, num_envs=num_envs, steps=100, seed=seed,
                   run_dir="unused", sim_device=device, rl_device=device)


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



def case_obstacle_push(n, steps=900):
    """A real collision of the high level. After one step (the wrapper places the obstacles
    at an env's first step), in each env one obstacle (the last slot) is put 2.2 m ahead of
    the box, on the line from the robots through the box, the other obstacle far away, and
    the high level's sub-goal 5 m ahead, beyond it: the published command net pushes the box
    into the obstacle. Per step: the env's ``init_reset_buf`` before it, then after it every
    NPC's (the box first) and the robots' positions; what MQE's three degree buffers
    counted over those steps, and their thresholds."""
    env, _ = sim.make_env(spec(task="go1push_upper", num_envs=n))
    env.reset()
    inner = env.env
    world = SIMS[-1]
    env.step(torch.zeros(n, 1, 2))
    origins = inner.env_origins[:, :2]
    robots = inner.root_states.view(n, inner.num_agents, 13)[..., :2].mean(dim=1)
    goals = []
    for e in range(n):
        npcs = inner.npc_indices[e].long().tolist()
        box, obstacle = npcs[0], npcs[-1]
        ahead = world.root[box, 0:2] - robots[e]
        ahead = ahead / ahead.norm()
        world.root[npcs[-2], 0:2] = world.root[box, 0:2] + torch.tensor([0.0, 40.0])
        world.root[obstacle, 0:2] = world.root[box, 0:2] + 2.2 * ahead
        goals.append((world.root[box, 0:2] - origins[e] + 5.0 * ahead).tolist())
    goal = torch.tensor(goals)
    action = torch.stack([goal[:, 0] / 7 - 1, goal[:, 1] / 5.5], -1).unsqueeze(1)
    degrees = ("obstacle_collision_degree", "collision_degree", "collaboration_degree")
    before = {k: getattr(inner, k + "_buf").tolist() for k in degrees}
    trace = {"init_reset": [], "npcs": [], "robots": []}
    for _ in range(steps):
        trace["init_reset"].append(inner.init_reset_buf.tolist())
        env.step(action)
        npc = inner.root_states_npc.view(n, inner.num_npcs, 13)
        trace["npcs"].append(npc[..., :2].tolist())
        trace["robots"].append(inner.root_states.view(n, inner.num_agents, 13)[..., :2].tolist())
    cfg = inner.cfg
    return dict(trace, num_obs=inner.num_obs,
                obstacle_threshold=cfg.test_metrics.collision_threshold,
                collision_threshold=getattr(cfg.goal, "collision_threshold", 1.0),
                collaboration_threshold=getattr(cfg.goal, "collaboration_threshold", 1.0),
                counted={k: [a - b for a, b in zip(getattr(inner, k + "_buf").tolist(),
                                                    before[k])] for k in degrees})

# What a CUDA graph's capture refuses, counted in the emulated replays (each is a stream sync
# on CUDA, which a capture turns into an error): a device tensor read back on the host and
# host data copied to the device. The profiler sees the aten ops that do it; inside a
# TorchScript function (Isaac Gym's torch_utils, tests/standin) a torch.tensor of host data
# runs outside the dispatcher, so on the CPU no op shows it: there the function's own graph
# is read, every call, for the nodes that do it (Isaac Gym's copysign: aten::tensor).
HOST_SYNCS = ("aten::_local_scalar_dense", "aten::nonzero")  # .item(), a boolean mask
HOST_COPIES = ("aten::lift_fresh", "aten::scalar_tensor")  # torch.tensor(host data)
SCRIPT_HOST_OPS = ("aten::tensor", "aten::as_tensor", "aten::item", "aten::nonzero",
                   "aten::tolist", "aten::cpu", "aten::Float", "aten::Int", "aten::Bool")
PYTHON_HOST_READS = ("cpu", "numpy", "tolist")  # Tensor methods: device to host, whole
GRAPH_SYNCS = {}


SCRIPT_OPS = {}  # a TorchScript function -> _script_host_ops of it (its graph is fixed)


def _script_host_ops(fn):
    """``{op: count}`` of the host transfers in a TorchScript function's graph, its callees
    inlined (an ``aten::Float``/``Int``/``Bool`` only of a tensor: an .item())."""
    if fn in SCRIPT_OPS:
        return SCRIPT_OPS[fn]
    found = SCRIPT_OPS[fn] = {}
    for node in fn.inlined_graph.nodes():
        kind = node.kind()
        if kind not in SCRIPT_HOST_OPS:
            continue
        if kind in ("aten::Float", "aten::Int", "aten::Bool") and not any(
                isinstance(i.type(), torch._C.TensorType) for i in node.inputs()):
            continue
        found[kind] = found.get(kind, 0) + 1
    return found


def host_transfers(fn):
    """fn's result and ``{what: count}`` of what it did that a CUDA graph's capture refuses:
    aten ops (HOST_SYNCS, HOST_COPIES), host transfers inside the TorchScript functions of
    isaacgym.torch_utils it called (``"<function>: <op>"``), and Tensor.cpu/numpy/tolist."""
    from isaacgym import torch_utils

    scripted = {name: f for name, f in vars(torch_utils).items()
                if isinstance(f, torch.jit.ScriptFunction)}
    found = {}

    def count(key, n=1):
        found[key] = found.get(key, 0) + n

    originals = {name: getattr(torch.Tensor, name) for name in PYTHON_HOST_READS}

    def reading(name):
        def method(self, *args, **kwargs):
            count("Tensor.%s" % name)
            return originals[name](self, *args, **kwargs)
        return method

    for name in PYTHON_HOST_READS:
        setattr(torch.Tensor, name, reading(name))
    try:
        result, names = op_names(fn)
    finally:
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)
    for name in names:
        if name in HOST_SYNCS + HOST_COPIES:
            count(name)
        elif name in scripted:
            for op, n in _script_host_ops(scripted[name]).items():
                count("%s: %s" % (name, op), n)
    return result, found


def op_names(fn):
    """fn's result and the names of the ops it ran, from the profiler's raw events (on torch
    1.13, leaving torch.profiler.profile turned them into its event tree, nine tenths of an
    emulated trace's time; the names are the same, but that a tree folds an op nested in an
    op of its own name)."""
    from torch.autograd import _disable_profiler, profiler

    profiler.profile(use_kineto=True).__enter__()
    try:
        result = fn()
    finally:
        events = _disable_profiler().events()
        getattr(profiler, "_run_on_profiler_stop", lambda: None)()  # torch 2.x's flag
    return result, [event.name() for event in events]


def emulated_capture(owner, fn, restore=None):
    """The ``_capture`` of patches/mapush/07 (the mid wrapper's) and 08 (MQE's env's) on the
    CPU, where CUDA graphs do not exist: fn runs once (then ``restore``, as after a real
    capture), and each replay runs it again over the attribute bindings of the owner (and of
    the env it wraps) as they were at the capture, then writes its outputs into the first
    ones. A graph reads the tensors it was captured with: a tensor rebound after the capture
    is stale in the graph, and is stale here too; one updated in place is fresh in both.
    What each replay does that a capture refuses (host_transfers) goes into GRAPH_SYNCS."""
    frozen = [(obj, dict(vars(obj))) for obj in (owner, vars(owner).get("env")) if obj is not None]
    out = fn()
    if restore is not None:
        restore()

    def replay():
        current = [(obj, dict(vars(obj))) for obj, _ in frozen]
        for obj, bindings in frozen:
            vars(obj).clear()
            vars(obj).update(bindings)
        try:
            new, found = host_transfers(fn)
            for key, n in found.items():
                GRAPH_SYNCS[key] = GRAPH_SYNCS.get(key, 0) + n
        finally:
            for obj, bindings in current:
                vars(obj).clear()
                vars(obj).update(bindings)
        for mine, theirs in zip(out, new):
            mine.copy_(theirs)

    return replay, out


def refused_capture(owner, fn, restore=None):
    """A capture that fails as a host sync makes it fail, after one call of fn."""
    fn()
    if restore is not None:
        restore()
    raise RuntimeError("called a synchronizing CUDA operation (refused by the test)")


def case_trace(n, task, obj, device="cpu", steps=300, out=None, fast_step=None, graph=None):
    """``steps`` steps from the same seed and seeded random actions (drawn on the CPU); each
    step's observations, rewards and dones, and at the end the first-episode buffers, the
    gait clock and the reward terms, into the .npz file ``out`` (MAPUSH_PROBE_OUT).
    ``fast_step`` False (MAPUSH_PROBE_FAST_STEP=0) runs upstream's step; ``graph`` (on the
    CPU, MAPUSH_PROBE_GRAPH) "emulate" or "refuse" stands in for the CUDA graphs' capture,
    "eager" (on a GPU too) turns them off. benchmarks/mqe_step.py --equivalence runs this
    on a GPU."""
    import os

    import numpy as np

    out = out or os.environ["MAPUSH_PROBE_OUT"]
    if fast_step is None:
        fast_step = os.environ.get("MAPUSH_PROBE_FAST_STEP") != "0"
    graph = graph or os.environ.get("MAPUSH_PROBE_GRAPH")
    # off as a run whose step check failed has it: the spec's fast_step (run/train.py)
    env, _ = sim.make_env(spec(task=task, obj=obj, num_envs=n, seed=3, device=device)
                          .with_changes(fast_step=fast_step))
    if graph in ("emulate", "refuse", "eager"):  # patches/mapush/07, 08 and 09
        for layer in (env, env.env):
            if "graph_step" in vars(layer):
                if graph != "eager":
                    type(layer)._capture = emulated_capture if graph == "emulate" else \
                        refused_capture
                layer.graph_step = graph != "eager"
    gen = torch.Generator().manual_seed(7)
    agents = 1 if task == "go1push_upper" else env.num_agents
    obs = env.reset()
    # dof_pos: the joints, what the actuator control (patches/mapush/09) moves; over the
    # stand-in the bodies' roots do not follow the joints, so obs and rewards alone miss it
    trace = {"obs": [], "reward": [], "done": [], "finished": [], "dof_pos": []}
    forced = 0
    for step in range(steps):
        if task == "go1push_upper" and step == 150:  # its episode is 8,000 steps: reset here
            obs = env.reset()
            forced += 1
        if task == "go1push_mid" and step in SUCCESS_STEPS:  # a success for env 0
            box_onto_target(env.env, 0)
        if task == "go1push_upper" and step == UPPER_GOAL_REBIND:  # a new tensor, same values
            env.set_target_pos(env.cfg.goal.received_final_pos.clone())
        if task == "go1push_upper" and step in UPPER_GOAL_STEPS:  # a success for env 0
            goal_onto_box(env, 0)
        if task == "go1push_mid" and step == REBIND_STEP:
            for name in REBOUND:  # as code outside MQE's step might: new tensors, same values
                setattr(env.env, name, getattr(env.env, name).clone())
        action = torch.rand(n, agents, env.action_space.shape[0], generator=gen) * 2 - 1
        obs, reward, done, _info = env.step(action.to(device))
        trace["obs"].append(obs.detach().cpu().numpy().copy())
        trace["reward"].append(reward.detach().cpu().numpy().copy())
        trace["done"].append(done.detach().cpu().numpy().copy())
        trace["finished"].append(env.env.finished_buf.detach().cpu().numpy().copy())
        trace["dof_pos"].append(env.env.dof_pos.detach().cpu().numpy().copy())
    inner = env.env
    result = {k: np.stack(v) for k, v in trace.items()}
    for name in TRACED_BUFFERS:
        result[name] = getattr(inner, name).detach().cpu().numpy()
    terms = getattr(env, "reward_buffer", {})
    result["terms"] = np.array([float(terms[k]) for k in sorted(terms)], dtype=np.float64)
    np.savez(out, **result)
    return {"steps": steps, "resets": int(result["done"].sum()) + forced, "terms": sorted(terms),
            "successes": int(result["finished"].sum()),
            "fast_step": getattr(env, "fast_step", None),
            "env_fast_step": vars(inner).get("fast_step"),
            "graphed": getattr(env, "_graph", None) is not None, "graph_syncs": GRAPH_SYNCS,
            "graph_step": getattr(env, "graph_step", None),
            "env_graphed": vars(inner).get("_core_graph") is not None,
            "env_torques_graphed": vars(inner).get("_torques_graph") is not None,  # 09's
            "env_graph_step": vars(inner).get("graph_step"),
            "graph_report": graph_report(env)}


def case_euler(n):
    """Patch 07's get_euler_xyz_in_graph (mqe/utils/math.py) against Isaac Gym's
    get_euler_xyz (the stand-in's TorchScript, tests/standin): the same bits, signs of zero
    included, over unit and non-unit quaternions, |sinp| >= 1 (the copysign branch) and
    signed zeros; and the host transfers each makes, called cold."""
    from isaacgym import torch_utils
    from mqe.utils.math import get_euler_xyz_in_graph

    gen = torch.Generator().manual_seed(5)
    unit = torch.nn.functional.normalize(torch.randn(4096, 4, generator=gen), dim=-1)
    h = 0.5 ** 0.5
    special = torch.tensor([[0.0, h, 0.0, h], [0.0, -h, 0.0, h], [h, h, h, h],  # sinp near +-1
                            [0.0, 0.8, 0.0, 0.8], [0.0, -0.8, 0.0, 0.8],  # sinp = +-1.28
                            [-0.0, 0.0, -0.0, 1.0], [0.0, -0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0],
                            [-0.0, -0.0, -0.0, -0.0], [0.0, 0.0, 1.0, 0.0]])
    q = torch.cat([unit, unit * 1.1, unit[:512] * 0.7, special])
    # Isaac Gym's first call runs its TorchScript graph as written; on torch 1.13 the later
    # ones run a graph its fuser (NNC on the CPU) has fused, a few ulps off (the next call)
    isaac, isaac_cold = host_transfers(lambda: torch_utils.get_euler_xyz(q))
    fused = torch_utils.get_euler_xyz(q)
    ours, ours_cold = host_transfers(lambda: get_euler_xyz_in_graph(q))
    sinp = 2.0 * (q[:, 3] * q[:, 1] - q[:, 2] * q[:, 0])
    return {"rows": q.shape[0], "copysign_rows": int((sinp.abs() >= 1).sum()),
            "bits_equal": [bool(torch.equal(a.view(torch.int32), b.view(torch.int32)))
                           for a, b in zip(ours, isaac)],  # sign of zero and NaNs included
            "negative_zeros": sum(int((torch.signbit(a) & (a == 0)).sum()) for a in isaac),
            "fused_max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(fused, isaac)),
            "fuses_on_cpu": bool(torch._C._jit_can_fuse_on_cpu()),
            "ours_host_transfers": ours_cold, "isaac_host_transfers": isaac_cold}


def case_capture_join(n):
    """Patch 07's ``_capture`` (the mid wrapper's) and 08's (MQE's env's, 09's too) with a
    warm-up that fails after it has written: the side stream must still be joined into the
    current one before the failure leaves (a failed capture is followed by the same step run
    eagerly on the current stream, which must not race the side stream's writes). This runs
    on the CPU: torch.cuda's streams, debug mode and graphs are recording stand-ins."""
    import contextlib

    env, _ = sim.make_env(spec(num_envs=n))
    log = []

    class Stream(object):
        def __init__(self, name):
            self.name = name

        def wait_stream(self, other):
            log.append("%s waits for %s" % (self.name, other.name))

    current = Stream("current")

    @contextlib.contextmanager
    def on(stream):
        log.append("on %s" % stream.name)
        try:
            yield
        finally:
            log.append("off %s" % stream.name)

    fakes = {"Stream": lambda: Stream("side"), "current_stream": lambda: current, "stream": on,
             "get_sync_debug_mode": lambda: 0, "set_sync_debug_mode": lambda mode: None}
    written = torch.zeros(1)

    def warm_up_fails():
        written.add_(1)
        log.append("wrote")
        raise RuntimeError("refused by the test")

    saved = {name: getattr(torch.cuda, name) for name in fakes}
    results = {}
    try:
        for name, fake in fakes.items():
            setattr(torch.cuda, name, fake)
        for label, call in (("07", lambda: env._capture(warm_up_fails)),
                            ("08", lambda: env.env._capture(warm_up_fails,
                                                            lambda: log.append("restored")))):
            del log[:]
            try:
                call()
                log.append("no failure")
            except RuntimeError:
                log.append("failed")
            results[label] = list(log)
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)
    return results


# the steps before which a trace puts env 0's box onto its target: no box is ever pushed over
# the stand-in (no contact), so without this no episode would succeed, and the code that
# follows a success (finished_buf, init_finished_buf, last_init_finished_buf,
# init_episode_length_buf) would never run
SUCCESS_STEPS = (40, 170)


def box_onto_target(inner, i):
    """Env i's box, in the physics' own state, onto its target (position and heading): the
    next step's refresh shows it there, and MQE finds the episode finished."""
    world = SIMS[-1]
    npcs = inner.npc_indices[i].long().tolist()
    box, target = npcs[0], npcs[1]
    world.root[box, 0:2] = world.root[target, 0:2]
    world.root[box, 3:7] = world.root[target, 3:7]
    world.root[box, 7:13] = 0.0


# the high level's final goal, which MQE's check_termination reads from its config (patch
# 11's graph reads a copy): a new tensor from UPPER_GOAL_REBIND on, as a caller's
# set_target_pos may give, then moved onto env 0's box, so that a success runs through it
UPPER_GOAL_REBIND = 60
UPPER_GOAL_STEPS = (90, 200)


def goal_onto_box(env, i):
    """The high level's final goal of env i onto its box, in place (the config's tensor)."""
    inner = env.env
    box = inner.root_states_npc.reshape(inner.num_envs, inner.num_npcs, -1)[i, 0, :2]
    env.cfg.goal.received_final_pos[i, :2] = box - inner.env_origins[i, :2]


# the step before which a trace rebinds three of MQE's buffers that post_physics_step updates
# in place (to clones): patch 08's graph updates the tensors it was captured with, so it must
# copy a rebound one back into its own (nothing in MAPush at the pin rebinds them; a caller
# could)
REBIND_STEP = 60
REBOUND = ("init_reset_buf", "init_finished_buf", "rew_buf")


# MQE's buffers that a trace keeps at its end, beside each step's obs, reward and done
TRACED_BUFFERS = ("init_finished_buf", "init_reset_buf", "init_episode_length_buf",
                  "collision_degree_buf", "collaboration_degree_buf", "episode_length_buf",
                  "last_init_finished_buf", "gait_indices", "foot_indices", "clock_inputs")


def case_walk(n, scale=1.0):
    """The action path end to end: ``scale`` times seeded commands in [-1, 1] per agent, env
    1 given env 0's with the agents' order reversed, 40 steps; then each robot's base
    velocity in its own frame (x, y, yaw rate), the commands after the mid wrapper's 0.5
    scale, env 0's last observations and rewards, and how far each base went (m)."""
    env, _ = sim.make_env(spec(num_envs=n, seed=3))
    agents = env.num_agents
    gen = torch.Generator().manual_seed(5)
    command = (torch.rand(n, agents, 3, generator=gen) * 2 - 1) * scale
    command[1] = command[0].flip(0)
    env.reset()
    # the robots 3 m from the box and 4 m from each other, so that none touches anything
    inner = env.env
    state = inner.all_root_states.view(n, -1, 13)
    for agent in range(agents):
        state[:, agent, :2] = state[:, agents, :2] + torch.tensor([-3.0, 4.0 * agent - 2.0])
    inner.gym.set_actor_root_state_tensor(inner.sim,
                                          gymtorch.unwrap_tensor(inner.all_root_states))
    dones = 0
    start = state[:, :agents, :2].clone()
    for _ in range(40):
        obs, reward, done, _info = env.step(command)
        dones += int(done.sum())
    root = env.env.root_states.view(n, agents, 13)
    qx, qy, qz, qw = root[..., 3:7].unbind(-1)
    yaw = torch.atan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
    vx, vy = root[..., 7], root[..., 8]
    body = torch.stack([vx * torch.cos(yaw) + vy * torch.sin(yaw),
                        -vx * torch.sin(yaw) + vy * torch.cos(yaw), root[..., 12]], -1)
    inner = env.env
    inner.gym.refresh_net_contact_force_tensor(inner.sim)
    bases = inner.contact_forces[:, :agents * inner.num_bodies:inner.num_bodies]
    return {"velocity": body.tolist(), "command": (command * 0.5).tolist(), "dones": dones,
            "obs": obs[0].tolist(), "reward": reward[0].tolist(),
            "touching": (bases.norm(dim=-1) > 0).tolist(),
            "position": root[..., :2].tolist(),
            "travel": (root[..., :2] - start).norm(dim=-1).tolist(),
            "box": inner.root_states_npc.view(n, -1, 13)[:, 0, :2].tolist()}


def pushing_actions(env, reach=1.35, ring=1.6, speed=0.5):
    """A scripted pushing controller (world frame, then each robot's frame). Each robot has
    its own spot behind the box: ``reach`` m from the box's centre, opposite the target, and
    0.35 m to its side. Away from it, the robot circles the box at ``ring`` m towards the
    spot's bearing, then goes to the spot; there it walks towards the target, pushing, and
    steers back to its line. It always turns to face the target. Mid-level actions in
    [-1, 1] (the mid wrapper scales them by 0.5 m/s)."""
    inner = env.env
    n, agents = inner.num_envs, inner.num_agents
    npc = inner.root_states_npc.view(n, -1, 13)
    box, target = npc[:, 0, :2].unsqueeze(1), npc[:, 1, :2].unsqueeze(1)
    robot = inner.root_states.view(n, agents, 13)
    pos = robot[..., :2]
    qx, qy, qz, qw = robot[..., 3:7].unbind(-1)
    yaw = torch.atan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))

    def unit(v):
        return v / v.norm(dim=-1, keepdim=True).clamp(min=1e-6)

    def wrap(a):
        return torch.atan2(torch.sin(a), torch.cos(a))

    ahead = unit(target - box)
    side = torch.stack([-ahead[..., 1], ahead[..., 0]], -1)
    rel = pos - box
    # the spots side by side in the order the robots stand across the push, so none crosses
    rank = (rel * side).sum(-1).argsort(dim=1).argsort(dim=1)
    offset = torch.linspace(-0.35, 0.35, agents, device=rank.device)[rank].unsqueeze(-1)
    spot = box - reach * ahead + offset * side
    dist = rel.norm(dim=-1, keepdim=True)
    # bearings round the box: the robot's and its spot's
    gap = wrap(torch.atan2((spot - box)[..., 1], (spot - box)[..., 0])
               - torch.atan2(rel[..., 1], rel[..., 0])).unsqueeze(-1)
    radial = unit(rel)
    tangent = torch.stack([-radial[..., 1], radial[..., 0]], -1) * torch.sign(gap)
    circle = unit(tangent + 2.0 * (ring - dist) * radial)
    to_spot = spot - pos
    approach = torch.where(to_spot.norm(dim=-1, keepdim=True) > 0.3, unit(to_spot), to_spot / 0.3)
    line = ((pos - spot) * side).sum(-1, keepdim=True)
    push = unit(ahead - 2.0 * line * side)
    placed = ((rel * ahead).sum(-1, keepdim=True) < -0.7) & (line.abs() < 0.3)
    world = torch.where(placed, push, torch.where(gap.abs() > 0.5, circle, approach)) * speed
    heading = wrap(torch.atan2(ahead[..., 1], ahead[..., 0]) - yaw)
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    local = torch.stack([world[..., 0] * cos + world[..., 1] * sin,
                         -world[..., 0] * sin + world[..., 1] * cos,
                         (2.0 * heading).clamp(-speed, speed)], -1)
    return (local / 0.5).clamp(-1.0, 1.0)


def case_push(n, steps=1000, still=False):
    """The scripted controller (``pushing_actions``; ``still``: all-zero actions) over
    ``steps`` mid-level steps: per env the steps at which MQE finished it, the box's travel
    and its distance to the target before each finishing step, and the reward terms MQE's
    mid wrapper summed (``reward_buffer``) with their own hand count."""
    env, _ = sim.make_env(spec(num_envs=n, seed=3))
    inner = env.env
    env.reset()

    def npc():  # MQE replaces the tensor at resets
        return inner.root_states_npc.view(n, -1, 13)

    start = npc()[:, 0, :2].clone()
    # the position oracle (#79 item 3): where MQE decides (check_termination, after the
    # physics and before any reset), the box's centre within THRESHOLD of the target's in the
    # plane, computed here from the root states, not from MQE's flags or distance code
    oracle, decide = [[] for _ in range(n)], inner.check_termination
    threshold = float(inner.cfg.goal.THRESHOLD)

    def watched():
        gap_now = ((npc()[:, 0, 0] - npc()[:, 1, 0]) ** 2 + (npc()[:, 0, 1] - npc()[:, 1, 1]) ** 2
                   ) ** 0.5
        for e in torch.nonzero(gap_now < threshold).view(-1).tolist():
            oracle[e].append(step)
        return decide()

    inner.check_termination = watched
    finished = [[] for _ in range(n)]
    travel = [[] for _ in range(n)]
    near = [[] for _ in range(n)]
    pushing, dones, touched = 0, 0, 0
    for step in range(steps):
        before = npc()[:, 0, :2].clone()
        gap = (npc()[:, 1, :2] - before).norm(dim=-1)
        actions = pushing_actions(env)
        _obs, _reward, done, _info = env.step(actions * 0 if still else actions)
        dones += int(done.sum())
        # the push reward's own condition, on the state the wrapper read (after resets)
        pushing += int((npc()[:, 0, 7:9].norm(dim=-1) > 0.1).sum())
        inner.gym.refresh_net_contact_force_tensor(inner.sim)
        touched += int((inner.contact_forces.norm(dim=-1) > 0).sum())
        for e in torch.nonzero(inner.finished_buf).view(-1).tolist():
            finished[e].append(step)
            travel[e].append(float((before[e] - start[e]).norm()))
            near[e].append(float(gap[e]))
            start[e] = npc()[e, 0, :2]
        fresh = done & ~inner.finished_buf
        start[fresh] = npc()[fresh, 0, :2]
    buffer = {k: float(v) for k, v in env.reward_buffer.items()}
    return {"finished": finished, "oracle": oracle, "travel": travel, "near": near,
            "pushing": pushing,
            "dones": dones, "threshold": float(inner.cfg.goal.THRESHOLD),
            "touched": touched, "reward_buffer": buffer,
            "scales": {"reach": float(env.reach_target_reward_scale),
                       "push": float(env.push_reward_scale)}}


def ocb_normals(vertices, rel, tie=1e-6):
    """The inward normals of the box polygon's edge nearest each point ``rel`` (box frame),
    and of the edge that ties with it. An edge's distance is to its segment (the projection
    clamped to it). MQE decides in float32 from float32 inputs (go1_push_mid_wrapper.py:90-117
    at the pin), the first edge of a tie winning: at a corner (both edges' shared vertex) the
    first edge, as listed, is the nearest here too; but where a point just inside one edge's
    strip is as far from it as from the next edge's vertex to within float32's rounding (a
    point 0.2 m out and 6e-5 m inside: 9e-9 m apart, the image's run met one), either edge
    may win. So the second normal is the runner-up's where the two lie within ``tie`` m, else
    the nearest's again."""
    v = torch.as_tensor(np.asarray(vertices), dtype=torch.float64)
    start, end = v[None], torch.roll(v, -1, 0)[None]
    edge = end - start
    p = rel.double()[:, None, :]
    t = (((p - start) * edge).sum(-1) / (edge * edge).sum(-1)).clamp(0.0, 1.0)
    dist = (p - (start + t[..., None] * edge)).norm(dim=-1)
    order = torch.sort(dist, dim=1, stable=True).indices  # torch 1.13: sort has stable
    first, second = order[:, 0], order[:, 1]
    gap = dist.gather(1, second[:, None])[:, 0] - dist.gather(1, first[:, None])[:, 0]
    unit = edge[0] / edge[0].norm(dim=-1, keepdim=True)
    normal = torch.stack([-unit[:, 1], unit[:, 0]], -1)
    return normal[first], normal[torch.where(gap < tie, second, first)]


def case_terms(n, steps=300):
    """#79 item 3: every reward term of the mid task recomputed here from the root states and
    the config's scales, step by step over the scripted controller, env 0's two robots set
    down overlapping (0.22 m apart: a real collision, which MQE's collision termination
    ends). Per term, the largest difference from MQE's own sum (``reward_buffer``) and how
    often it was non-zero; the largest difference of each robot's total reward."""
    env, _ = sim.make_env(spec(num_envs=n, seed=3))
    inner = env.env
    agents = inner.num_agents
    env.reset()
    state = inner.all_root_states.view(n, -1, 13)
    state[0, 1, :2] = state[0, 0, :2] + torch.tensor([0.0, 0.1])
    inner.gym.set_actor_root_state_tensor(inner.sim,
                                          gymtorch.unwrap_tensor(inner.all_root_states))
    origins = inner.env_origins.double()
    scale_pos = float(inner.cfg.obs.scales.base_pos)
    vertices = np.array(inner.cfg.asset.vertex_list, dtype=np.float64)
    threshold = float(inner.cfg.termination.collision_kwargs["threshold"])
    s = {k: float(getattr(env, k + "_scale")) for k in (
        "approach_reward", "target_reward", "reach_target_reward", "collision_punishment",
        "push_reward", "ocb_reward", "exception_punishment")}
    decide, seen = inner.check_termination, {}

    def watched():  # the robots and the box where MQE decides, before any reset
        seen["robots"] = inner.root_states.view(n, agents, 13)[..., :2].double().clone()
        seen["box"] = inner.root_states_npc.view(n, -1, 13)[:, 0, :2].double().clone()
        seen["counted"] = ~inner.init_reset_buf.clone()  # MQE counts each env's first episode
        return decide()

    inner.check_termination = watched
    worst = {k: 0.0 for k in env.reward_buffer if k != "step_count"}
    fired = dict.fromkeys(worst, 0)
    total_worst, last_box, contact, ties = 0.0, None, 0.0, 0
    together, degree_worst = 0, 0.0  # the collaboration degree's count, by hand and MQE's
    reach = float(getattr(inner.cfg.goal, "collaboration_threshold", 1.0))
    for step in range(steps):
        before = {k: float(v) for k, v in env.reward_buffer.items()}
        degree = inner.collaboration_degree_buf.clone()
        _obs, reward, _done, _info = env.step(pushing_actions(env))
        near = (seen["robots"] - seen["box"].unsqueeze(1)).norm(dim=-1) < reach
        mine_degree = (near.all(dim=1) & seen["counted"]).float()
        degree_worst = max(degree_worst, float(
            (inner.collaboration_degree_buf - degree - mine_degree).abs().max()))
        together += int(mine_degree.sum())
        npc = inner.root_states_npc.view(n, -1, 13).double()
        box, target = npc[:, 0], npc[:, 1]
        robots = inner.root_states.view(n, agents, 13).double()
        if step == 0:
            inner.gym.refresh_net_contact_force_tensor(inner.sim)
            bases = inner.contact_forces[0, :agents * inner.num_bodies:inner.num_bodies]
            contact = float(bases.norm(dim=-1).min())
        gap = (box[:, :2] - target[:, :2]).norm(dim=-1)
        past = gap if last_box is None else (last_box[:, :2] - target[:, :2]).norm(dim=-1)
        last_box = box.clone()
        box_pos = box[:, :3] - origins
        base = (robots[..., :3] - origins.unsqueeze(1)) * scale_pos
        pair = (seen["robots"][:, 0] - seen["robots"][:, 1]).norm(dim=-1)
        qx, qy, qz, qw = box[:, 3:7].unbind(-1)
        yaw = torch.atan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
        cos, sin = torch.cos(yaw), torch.sin(yaw)
        ahead = (target[:, :2] - box[:, :2]) / gap.unsqueeze(-1)
        mine = {
            "distance_to_target_reward": s["target_reward"] * 100
            * (2 * (past - gap) - 0.01 * gap),
            "push_reward": s["push_reward"] * (box[:, 7:9].norm(dim=-1) > 0.1).double(),
            "reach_target_reward": s["reach_target_reward"] * inner.finished_buf.double(),
            "exception_punishment": s["exception_punishment"] * (pair < threshold).double(),
            "collision_punishment": s["collision_punishment"]
            / (0.02 + (base[:, 0] - base[:, 1]).norm(dim=-1) / 3),
        }
        approach = -((box_pos.unsqueeze(1) - base).norm(dim=-1) + 0.5) ** 2 \
            * s["approach_reward"]
        ocb = []
        for i in range(agents):
            d = base[:, i, :2] - box_pos[:, :2]
            rel = torch.stack([d[:, 0] * cos + d[:, 1] * sin, -d[:, 0] * sin + d[:, 1] * cos], -1)
            candidates = []
            for normal in ocb_normals(vertices, rel):
                world = torch.stack([normal[:, 0] * cos - normal[:, 1] * sin,
                                     normal[:, 0] * sin + normal[:, 1] * cos], -1)
                candidates.append((ahead * world).sum(-1) * s["ocb_reward"])
            ocb.append(torch.stack(candidates, -1))
        ocb = torch.stack(ocb, 1)  # env, robot, (nearest edge, tied edge)
        # each robot: every per-env term (the pair's collision term once: two robots) and its
        # own; a tie's edge is the one whose OCB term makes MQE's reward (counted in ``ties``)
        rest = sum(v for v in mine.values()).unsqueeze(1) + approach
        pick = ((rest.unsqueeze(-1) + ocb - reward.double().unsqueeze(-1)).abs()
                .argmin(-1, keepdim=True))
        ties += int((pick[..., 0] == 1).logical_and(ocb[..., 1] != ocb[..., 0]).sum())
        ocb = ocb.gather(-1, pick)[..., 0]
        per_agent = rest + ocb
        total_worst = max(total_worst, float((per_agent - reward.double()).abs().max()))
        mine = {k: float(v.sum()) for k, v in mine.items()}
        mine["approach_to_box_reward"] = float(approach.sum())
        mine["ocb_reward"] = float(ocb.sum())
        for k in worst:
            delta = float(env.reward_buffer[k]) - before[k]
            worst[k] = max(worst[k], abs(delta - mine[k]) / max(1.0, abs(mine[k])))
            fired[k] += int(mine[k] != 0.0)
    return {"worst": worst, "fired": fired, "total_worst": total_worst, "contact": contact,
            "ties": ties,
            "scales": s, "steps": steps, "together": together, "degree_worst": degree_worst,
            "collision_degree": float(inner.collision_degree_buf.abs().max())}


def case_straight(n, steps=300):
    """#79 item 3: the first success step of a straight push, to be predicted from the
    controller's kinematics. Per env the box (yaw 0) with both robots against its back face,
    side by side, facing the target that lies ``distances`` m ahead; both walk forward at
    full command (0.5 m/s) from the first step. Returns, per env, the first step MQE finished
    it, with what the prediction needs: the threshold, the policy's dt, and the masses."""
    env, _ = sim.make_env(spec(num_envs=n, seed=3))
    inner = env.env
    agents = inner.num_agents
    env.reset()
    distances = [1.6 + 0.4 * e for e in range(n)]
    half = float(np.abs(np.array(inner.cfg.asset.vertex_list)).max())
    state = inner.all_root_states.view(n, -1, 13)
    box = state[:, agents, :2].clone()
    state[:, :agents + 2, 3:13] = 0.0
    state[:, :agents + 2, 6] = 1.0  # every robot, the box and the target: yaw 0, at rest
    for agent in range(agents):
        state[:, agent, :2] = box + torch.tensor([-half - 0.3225 - 0.005,
                                                  0.6 * agent - 0.3 * (agents - 1)])
    state[:, agents + 1, :2] = box + torch.tensor(distances).unsqueeze(-1) * torch.tensor(
        [1.0, 0.0])
    inner.gym.set_actor_root_state_tensor(inner.sim,
                                          gymtorch.unwrap_tensor(inner.all_root_states))
    first = [None] * n
    forward = torch.zeros(n, agents, 3)
    forward[..., 0] = 1.0
    for step in range(steps):
        env.step(forward)
        for e in torch.nonzero(inner.finished_buf).view(-1).tolist():
            if first[e] is None:
                first[e] = step + 1  # the steps taken when it finished
    plane = SIMS[-1].plane  # the world's stated parameters (contact.py), read off its model
    robot_row, box_row = int(inner.agent_indices[0, 0]), int(inner.npc_indices[0, 0])
    dofs = plane.model.dof_frictionloss.reshape(-1, 3)
    mass = {row: float(plane.model.body_mass[plane.bodies[plane.rows.index(row)]])
            for row in (robot_row, box_row)}
    return {"first": first, "distances": distances, "threshold": float(inner.cfg.goal.THRESHOLD),
            "dt": float(env.dt), "half": half, "robot_mass": mass[robot_row],
            "box_mass": mass[box_row], "box_friction": float(dofs[plane.free.index(box_row), 0]),
            "drive_bound": float(plane.bound[plane.walk.index(robot_row), 0]),
            "servo": contact.SERVO_S, "stance": gymapi.STANCE_S, "agents": agents}


def case_calculator(n):
    """``mapush eval``'s calculator (mapush/eval/calculator.py) with the scripted controller
    as its policy, and the same first episodes counted here: per env, its first episode's
    end (finished or not, and at which step) and the steps of it in which both robots were
    within 1 m of the box (MQE's collaboration check), read before each step."""
    from mapush.eval.calculator import calculator

    env, _ = sim.make_env(spec(num_envs=n, seed=3))
    inner = env.env
    ended = [None] * n
    together = [0] * n
    taken = [0]

    def look():  # after step k: what the calculator's loop saw
        k = taken[0]
        if k:
            box = inner.root_states_npc.view(n, -1, 13)[:, 0, :2]
            robots = inner.root_states.view(n, inner.num_agents, 13)[..., :2]
            close = ((robots - box.unsqueeze(1)).norm(dim=-1) < 1.0).all(dim=1)
            for e in range(n):
                if ended[e] is None:
                    together[e] += int(close[e])
                    if bool(inner.reset_buf[e]):
                        ended[e] = [bool(inner.finished_buf[e]), k]

    def policy(_obs):
        look()
        taken[0] += 1
        return pushing_actions(env)

    result = calculator(env, policy, 2 * int(env.max_episode_length) + 10)
    look()
    return {"result": result, "ended": ended, "together": together,
            "max_episode_length": int(env.max_episode_length), "dt": float(env.dt)}


def case_shadow(n, broken=None, task="go1push_mid"):
    """Child A of ``mapush doctor --check-step`` (step_check.trace, the fast step) with the
    CUDA graphs emulated on the CPU: the first replays of each graph checked against eager
    runs of its region. ``broken`` "09" drops ``actions`` from patch 09's carry: its graph
    then reads the actions it was captured with, a stale input; "12" drops patch 12's copy of
    the step's action into its graph's input (the line, from the patched source), likewise."""
    import os
    import tempfile

    from mapush.diagnostics import step_check

    def made(env):
        for layer in (env, env.env):
            if "graph_step" in vars(layer):
                type(layer)._capture = emulated_capture
                layer.graph_step = True
        if broken == "09":
            cls = type(env.env)
            cls._TORQUES_CARRY = tuple(k for k in cls._TORQUES_CARRY if k != "actions")
        if broken == "12":
            import inspect
            import textwrap

            cls = type(env)
            source = textwrap.dedent(inspect.getsource(cls._graphed_step_head))
            copy_in = '    g["in"]["action"].copy_(action)\n'
            assert source.count(copy_in) == 1, source
            found = {}
            exec(source.replace(copy_in, ""), vars(sys.modules[cls.__module__]), found)
            cls._graphed_step_head = found["_graphed_step_head"]

    with tempfile.TemporaryDirectory() as tmp:
        job = {"task": task, "object": "cuboid", "envs": n, "steps": 30, "device": "cpu",
               "fast_step": True, "run_dir": tmp, "out": os.path.join(tmp, "A.npz")}
        return step_check.trace(job, made)


CASES = {
    "contact_pairs": case_contact_pairs,
    "devices_mid": lambda n: case_devices(n, "go1push_mid"),
    "devices_upper": lambda n: case_devices(n, "go1push_upper"),
    "rrt_resets": case_rrt_resets,
    "obstacle_degree": case_obstacle_degree,
    "obstacle_push": case_obstacle_push,
    "trace_cuboid": lambda n: case_trace(n, "go1push_mid", "cuboid"),
    "trace_cylinder": lambda n: case_trace(n, "go1push_mid", "cylinder"),
    "trace_upper": lambda n: case_trace(n, "go1push_upper", "cuboid"),
    "capture_join": case_capture_join,
    "euler": case_euler,
    "shadow": case_shadow,
    "walk": case_walk,
    "push": case_push,
    "calculator": case_calculator,
    "terms": case_terms,
    "straight": case_straight,
    "push_still": lambda n: case_push(n, 200, still=True),
    "walk_still": lambda n: case_walk(n, 0.0),
    "shadow_broken_09": lambda n: case_shadow(n, "09"),
    "shadow_upper": lambda n: case_shadow(n, task="go1push_upper"),
    "shadow_upper_broken_12": lambda n: case_shadow(n, "12", "go1push_upper"),
}

if __name__ == "__main__":
    result = CASES[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    print(json.dumps(result, sort_keys=True))
    sys.stdout.flush()
