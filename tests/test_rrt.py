"""The high level's RRT planning, through the patched wrapper's own code on MAPush's real
files (``MAPUSH_SRC``): 500 envs planned on one CPU core, every path from start to goal and
clear of the obstacles, the figures of the first envs written. The time is a hang guard
(HANG_S, over 5x the slowest CI has seen, 10.1 s on a loaded machine), not a claim: a wall
time in a test turns a busy laptop's run red (#80).

The layouts are drawn as upstream's first reset draws them: the box near (1.5, 0)
(go1_push_upper_config.py:241-244), two obstacles uniform in [3, 14] x [-7.5, 7.5]
(go1_push_upper_config.py:163-165, legged_robot.py:500-502), the final target at
x = |N| + 9.5, y = N + 3 sign(N) (go1_push_upper_wrapper.py:172-176).
"""
import ast
import contextlib
import importlib.util
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.upstream import patched_mapush

SRC = os.environ.get("MAPUSH_SRC")
pytestmark = pytest.mark.skipif(
    not SRC, reason="MAPUSH_SRC is not set: no MAPush checkout (MAPush is not on PyPI)")
WRAPPER = "mqe/envs/wrappers/go1_push_upper_wrapper.py"
RRT = "mqe/envs/wrappers/utils/rrt.py"
ENVS = 500
HANG_S = 60.0
# rrt.plan's parameters in the wrapper (go1_push_upper_wrapper.py:209-214): steps of 0.75,
# a node is kept only farther than COLLISION_THERESHOLD + 0.8 from every obstacle
# (rrt.py:41), the goal counts as reached within 1.5 (rrt.py:51).
STEP, CLEARANCE, REACH = 0.75, 0.3 + 0.8, 1.5


@pytest.fixture(scope="module")
def planner(tmp_path_factory):
    """``plan_rrt`` as the patched wrapper defines it, with the patched rrt.py."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    tree = tmp_path_factory.mktemp("mapush")
    patched_mapush(Path(SRC), tree)
    spec = importlib.util.spec_from_file_location("mapush_rrt_under_test", str(tree / RRT))
    rrt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rrt)
    namespace = {"torch": torch, "np": np, "os": os, "time": time, "io": io,
                 "contextlib": contextlib, "KinodynamicRRT": rrt.KinodynamicRRT}
    wanted = {"interpolate_trajectory", "plan_rrt", "save_rrt_figure", "RRT_X_LIM",
              "RRT_Y_LIM"}
    for node in ast.parse((tree / WRAPPER).read_text()).body:
        names = {node.name} if isinstance(node, ast.FunctionDef) else \
            {t.id for t in node.targets if isinstance(t, ast.Name)} \
            if isinstance(node, ast.Assign) else set()
        if names & wanted:
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(tree / WRAPPER),
                         "exec"), namespace)
            wanted -= names
    assert not wanted, "the patched wrapper defines no %s" % sorted(wanted)
    return namespace["plan_rrt"]


def layouts(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    start = torch.stack([1.4 + 0.2 * torch.rand(n, generator=g),
                         -0.1 + 0.2 * torch.rand(n, generator=g)], dim=1)
    obstacles = torch.stack([3 + 11 * torch.rand(n, 2, generator=g),
                             -7.5 + 15 * torch.rand(n, 2, generator=g)], dim=2)
    normal = torch.randn(n, 2, generator=g)
    goal = torch.stack([normal[:, 0].abs() + 9.5,
                        normal[:, 1] + 3 * torch.sign(normal[:, 1])], dim=1)
    return start, goal, obstacles


@contextlib.contextmanager
def one_core():
    cpus, threads = os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, {min(cpus)})
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, cpus)


def test_500_envs_are_planned_on_one_core_each_path_valid(planner, tmp_path):
    start, goal, obstacles = layouts(ENVS)
    with one_core():
        trajectory = torch.zeros(ENVS, 26)
        figures = tmp_path / "figures0"
        torch.manual_seed(0)
        began = time.perf_counter()
        paths, stats = planner(start, goal, obstacles, trajectory, str(figures), 8)
        elapsed = time.perf_counter() - began
    assert elapsed <= HANG_S, "planning %d envs took %.1f s on one core: hung?" % (ENVS, elapsed)
    assert stats["envs"] == ENVS and stats["failed"] == 0 and stats["planned"] == ENVS
    assert len(paths) == ENVS
    for i, path in enumerate(paths):
        nodes = torch.stack(path)
        assert torch.equal(nodes[0], start[i]), "env %d: the path does not leave the start" % i
        assert torch.allclose(nodes[-1], goal[i]), "env %d: the path does not end at the goal" % i
        steps = (nodes[1:] - nodes[:-1]).norm(dim=1)
        assert bool((steps[:-1] <= STEP + 1e-4).all()), "env %d: a step longer than %s" % (i, STEP)
        assert float(steps[-1]) <= REACH + 1e-4, "env %d: the goal is out of reach" % i
        clearance = (nodes[1:-1, None, :] - obstacles[i][None]).norm(dim=2).min()
        assert float(clearance) > CLEARANCE, "env %d: a node within %s of an obstacle" % (
            i, CLEARANCE)
        # the path became the env's 13 trajectory points, start to goal (wrapper.py:217)
        points = trajectory[i].view(13, 2)
        assert torch.allclose(points[0], start[i], atol=1e-5)
        assert torch.allclose(points[-1], goal[i], atol=1e-5)
    assert sorted(p.name for p in figures.iterdir()) == ["rrt-env%d.png" % i for i in range(8)]
    assert stats["figures"] == [str(figures / ("rrt-env%d.png" % i)) for i in range(8)]
    assert all((figures / ("rrt-env%d.png" % i)).read_bytes()[:4] == b"\x89PNG"
               for i in range(8))


def test_an_env_without_a_path_keeps_its_spline_and_is_counted(planner, tmp_path):
    """A start on an obstacle: every step from it lands within the clearance, so RRT finds
    no path before its timeout; the env's trajectory row stays as it was (its spline), and
    the count says so."""
    start, goal, obstacles = layouts(2, seed=1)
    start[1] = obstacles[1][0]
    trajectory = torch.full((2, 26), 7.0)
    torch.manual_seed(0)
    original = planner.__globals__["KinodynamicRRT"].plan

    def quick(self, *a, **kw):
        kw["timeout"] = 0.5  # upstream waits 60 s per env (wrapper.py:211)
        return original(self, *a, **kw)

    planner.__globals__["KinodynamicRRT"].plan = quick
    try:
        paths, stats = planner(start, goal, obstacles, trajectory, None, 8)
    finally:
        planner.__globals__["KinodynamicRRT"].plan = original
    assert paths[0] is not None and paths[1] is None
    assert stats["planned"] == 1 and stats["failed"] == 1 and stats["figures"] == []
    assert bool((trajectory[1] == 7.0).all()) and not bool((trajectory[0] == 7.0).all())


# -- pinned to upstream: the same paths as upstream's own planner at the pin -------------
def _plan_calls(source):
    """The keyword arguments of every ``.plan(...)`` call in ``source``, as values."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "plan":
            calls.append({k.arg: ast.literal_eval(k.value) for k in node.keywords
                          if k.arg not in ("start", "goal", "visualizer", "obstacle_states")})
    return calls


def _limits(source):
    """``x_lim`` and ``y_lim`` as upstream's reset assigns them (go1_push_upper_wrapper.py)."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id in ("x_lim",
                                                                                   "y_lim"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["x_lim"], found["y_lim"]


class _CpuTorch(object):
    """torch, with tensors made on the CPU: upstream's rrt.py samples on "cuda"
    (rrt.py:33), which this machine has not; nothing else of its algorithm is touched."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(data, *args, **kwargs):
        kwargs.pop("device", None)
        return torch.tensor(data, *args, **kwargs)


@pytest.fixture(scope="module")
def upstream_rrt():
    os.environ.setdefault("MPLBACKEND", "Agg")
    spec = importlib.util.spec_from_file_location("upstream_rrt_at_the_pin",
                                                  str(Path(SRC) / RRT))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.torch = _CpuTorch()
    return module


def test_the_planner_is_called_with_upstreams_parameters(planner):
    """plan_rrt's call of rrt.plan has upstream's arguments at the pin (action scale,
    timeout, goal-sample probability, reach and collision thresholds), and its limits."""
    ours = (Path(planner.__code__.co_filename)).read_text()
    theirs = (Path(SRC) / WRAPPER).read_text()
    assert _plan_calls(theirs) and _plan_calls(ours) == _plan_calls(theirs)
    assert (planner.__globals__["RRT_X_LIM"], planner.__globals__["RRT_Y_LIM"]) == \
        _limits(theirs)


def test_the_patched_planner_returns_upstreams_paths_on_seeded_layouts(planner, upstream_rrt):
    """Upstream's reset, env by env with its own visualizer as it draws (pristine rrt.py,
    the parameters read from its wrapper), and our plan_rrt, from the same seed: the same
    paths, node for node."""
    theirs_source = (Path(SRC) / WRAPPER).read_text()
    params = _plan_calls(theirs_source)[0]
    x_lim, y_lim = _limits(theirs_source)
    n = 6
    start, goal, obstacles = layouts(n, seed=3)
    torch.manual_seed(11)
    rrt = upstream_rrt.KinodynamicRRT(x_lim=x_lim, y_lim=y_lim)
    expected = []
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(n):
            vis = upstream_rrt.TwoDVisualizer() if i < 2 else None  # drawing is slow
            if vis is not None:
                vis.clear()
                vis.set_bounds(x_lim, y_lim)
            expected.append(rrt.plan(start=start[i], goal=goal[i], visualizer=vis,
                                     obstacle_states=obstacles[i], **params))
    torch.manual_seed(11)
    paths, stats = planner(start, goal, obstacles, torch.zeros(n, 26), None, 0)
    assert stats["planned"] == n
    for i, (ours, theirs) in enumerate(zip(paths, expected)):
        assert theirs is not None
        assert len(ours) == len(theirs), "env %d: %d nodes, upstream %d" % (
            i, len(ours), len(theirs))
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs)), "env %d differs" % i
