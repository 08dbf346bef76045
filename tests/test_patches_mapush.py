"""patches/mapush on MAPush's real files, where a checkout is at hand (``MAPUSH_SRC``).

MAPush is not on PyPI and its code needs Isaac Gym, so the patched source is checked by
running the patched statements themselves (parsed out of the files) against stand-ins for
``self``. The image build applies the patches for real. Without ``MAPUSH_SRC`` these
tests skip; CI has no MAPush checkout. To run them here:
``git -C <MAPush mirror> archive <MAPUSH_COMMIT> mqe openrl_ws | tar -x -C /tmp/mapush-src``
then ``MAPUSH_SRC=/tmp/mapush-src``.
"""
import ast
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.upstream import APPLY, REPO, patched_mapush, pinned_hashes
from tests.astcompat import unparse

PINS = pinned_hashes("mapush")
SRC = os.environ.get("MAPUSH_SRC")
needs_src = pytest.mark.skipif(
    not SRC, reason="MAPUSH_SRC is not set: no MAPush checkout to patch (MAPush is not on "
    "PyPI; the image build applies these patches for real)")
VAR = "MAPUSH_CONTACT_PAIRS_MULTIPLIER"
BASE_TASK = "mqe/envs/base/base_task.py"
WRAPPER = "mqe/envs/wrappers/go1_push_mid_wrapper.py"
UTILS = "openrl_ws/utils.py"
UPPER = "mqe/envs/wrappers/go1_push_upper_wrapper.py"
TRAJECTORY = "mqe/envs/wrappers/utils/trajectory.py"
RRT = "mqe/envs/wrappers/utils/rrt.py"
FIELD = "mqe/envs/field/legged_robot_field.py"
LEGGED = "mqe/envs/base/legged_robot.py"
GO1 = "mqe/envs/go1/go1.py"
MATH = "mqe/utils/math.py"  # patch 07: get_euler_xyz_in_graph


def test_patches_touch_only_pinned_mapush_files():
    touched = set()
    for patch in (REPO / "patches" / "mapush").glob("*.patch"):
        touched.update(line[len("+++ b/"):].split("\t")[0].strip()
                       for line in patch.read_text().splitlines() if line.startswith("+++ "))
    assert touched == {BASE_TASK, WRAPPER, UTILS, UPPER, TRAJECTORY, RRT, FIELD, LEGGED, GO1, MATH}
    assert touched <= set(PINS)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """(pristine, patched) copies of the pinned files from $MAPUSH_SRC."""
    pristine, patched = (tmp_path_factory.mktemp(name) for name in ("pristine", "patched"))
    patched_mapush(Path(SRC), pristine, patched)
    return pristine, patched


def function(path, name, cls=None):
    """The ``def`` node NAME (a method of CLS when given) in the file at PATH."""
    body = ast.parse(path.read_text()).body
    if cls:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


def statements(func, predicate):
    found = [n for n in ast.walk(func) if isinstance(n, ast.stmt) and predicate(n)]
    assert found, "statement not found in %s" % func.name
    return found


def target_is(node, text):
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AugAssign) else []
    return any(unparse(t) == text for t in targets)


def run_statement(node, namespace):
    code = compile(ast.Module(body=[node], type_ignores=[]), "<patched>", "exec")
    exec(code, namespace)
    return namespace


def multiplier_function(tree):
    namespace = {"os": os}
    run_statement(function(tree / BASE_TASK, "contact_pairs_multiplier"), namespace)
    return namespace["contact_pairs_multiplier"]


@needs_src
def test_apply_is_idempotent_on_mapush(trees):
    _, patched = trees
    proc = subprocess.run([str(APPLY), "mapush", str(patched), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "already applied" in proc.stdout


@needs_src
@pytest.mark.parametrize("value, expected", [(None, 2 ** 23), ("", 2 ** 23), ("1", 2 ** 23),
                                             ("5", 5 * 2 ** 23), ("0.5", 2 ** 22)])
def test_contact_pairs_follow_the_multiplier(trees, monkeypatch, value, expected):
    pristine, patched = trees
    init = function(pristine / BASE_TASK, "__init__", "BaseTask")
    upstream = statements(init, lambda n: target_is(n, "self.sim_params.physx."
                                                       "max_gpu_contact_pairs"))
    assert [unparse(n) for n in upstream] == \
        ["self.sim_params.physx.max_gpu_contact_pairs *= 5"]
    init = function(patched / BASE_TASK, "__init__", "BaseTask")
    (assign,) = statements(init, lambda n: target_is(n, "self.sim_params.physx."
                                                        "max_gpu_contact_pairs"))
    if value is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, value)
    this = SimpleNamespace(sim_params=SimpleNamespace(
        physx=SimpleNamespace(max_gpu_contact_pairs=2 ** 23)))
    run_statement(assign, {"self": this, "contact_pairs_multiplier":
                           multiplier_function(patched)})
    assert this.sim_params.physx.max_gpu_contact_pairs == expected
    assert isinstance(this.sim_params.physx.max_gpu_contact_pairs, int)


@needs_src
@pytest.mark.parametrize("value", ["0", "-2", "abc", "nan", "inf", "5x"])
def test_a_bad_multiplier_stops_naming_the_variable_and_value(trees, monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    with pytest.raises(ValueError) as info:
        multiplier_function(trees[1])()
    assert VAR in str(info.value) and repr(value) in str(info.value)


def fake_wrapper(device):
    return SimpleNamespace(device=device, num_envs=3, num_agents=2,
                           env=SimpleNamespace(device=device))


@needs_src
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_action_scale_follows_the_env_device(trees, device):
    pristine, patched = trees
    pick = lambda n: target_is(n, "self.action_scale")  # noqa: E731
    (assign,) = statements(function(patched / WRAPPER, "__init__", "Go1PushMidWrapper"), pick)
    this = fake_wrapper(device)
    run_statement(assign, {"self": this, "torch": torch})
    assert this.action_scale.device == torch.device(device)
    assert tuple(this.action_scale.shape) == (3, 2, 3)
    (upstream,) = statements(function(pristine / WRAPPER, "__init__", "Go1PushMidWrapper"),
                             pick)
    assert 'device="cuda"' in ast.get_source_segment((pristine / WRAPPER).read_text(),
                                                     upstream)


@needs_src
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_openrl_wrapper_actions_follow_the_env_device(trees, device):
    pristine, patched = trees
    step = function(patched / UTILS, "step", "mqe_openrl_wrapper")
    assert ".cuda()" not in unparse(step)
    (assign,) = statements(step, lambda n: target_is(n, "actions"))
    namespace = run_statement(assign, {"self": fake_wrapper(device), "torch": torch,
                                       "actions": np.full((3, 2, 3), 4.0)})
    assert namespace["actions"].device == torch.device(device)
    if device == "cpu":  # the clip still applies after the 0.5 scale
        assert float(namespace["actions"].max()) == 1.0
    assert ".cuda()" in unparse(function(pristine / UTILS, "step", "mqe_openrl_wrapper"))


@needs_src
def test_patched_files_still_compile(trees):
    for rel in (BASE_TASK, WRAPPER, UTILS, UPPER, TRAJECTORY, RRT, FIELD):
        compile((trees[1] / rel).read_text(), rel, "exec")


def cuda_literals(path):
    """Code (not comments) that names CUDA outright: "cuda"/'cuda:0' constants, .cuda()."""
    tree = ast.parse(path.read_text())
    found = [unparse(n) for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value.startswith("cuda")]
    found += [unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"]
    return found


@needs_src
def test_the_upper_task_names_no_cuda_device_any_more(trees):
    """Every hard-coded "cuda" of the high level (docs/upstream.md: the wrapper's lines 58,
    91, 97-98, 133, 172, 306, 335-339, 360-364, trajectory.py:6, rrt.py:33) is gone."""
    pristine, patched = trees
    assert len(cuda_literals(pristine / UPPER)) == 15
    assert len(cuda_literals(pristine / TRAJECTORY)) == 1
    assert len(cuda_literals(pristine / RRT)) == 1
    for rel in (UPPER, TRAJECTORY, RRT):
        assert cuda_literals(patched / rel) == [], rel


@needs_src
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_upper_tensors_follow_the_env_device(trees, device):
    _, patched = trees
    init = function(patched / UPPER, "__init__", "Go1PushUpperWrapper")
    this = fake_wrapper(device)
    for name in ("self.action_scale", "self.obs1_pos", "self.obs2_pos"):
        (assign,) = statements(init, lambda n, name=name: target_is(n, name))
        run_statement(assign, {"self": this, "torch": torch})
        assert getattr(this, name.split(".", 1)[1]).device == torch.device(device), name
    reset_targets = function(patched / UPPER, "reset_target_positions", "Go1PushUpperWrapper")
    (assign,) = statements(reset_targets, lambda n: target_is(n, "new_positions"))
    namespace = run_statement(assign, {"self": this, "torch": torch, "env_ids": [0, 2]})
    assert namespace["new_positions"].device == torch.device(device)
    # the step's part before MQE's (patches/mapush/12 made it _step_head); upstream's path
    # (patches/mapush/10's fast one keeps the net's tensor on its device)
    step = function(patched / UPPER, "_step_head", "Go1PushUpperWrapper")
    (scaled,) = statements(step, lambda n: target_is(n, "command_action")
                           and "from_numpy(0.5 * command_action)" in unparse(n))
    namespace = run_statement(scaled, {"self": this, "torch": torch,
                                       "command_action": np.full((3, 2, 3), 4.0)})
    assert namespace["command_action"].device == torch.device(device)


@needs_src
def test_the_planner_and_the_interpolation_follow_their_inputs(trees):
    _, patched = trees
    interpolate = function(patched / UPPER, "interpolate_trajectory")
    namespace = {"torch": torch, "np": np}
    run_statement(interpolate, namespace)
    out = namespace["interpolate_trajectory"](torch.zeros(2, 10))
    assert out.device == torch.device("cpu") and tuple(out.shape) == (2, 26)
    init = function(patched / TRAJECTORY, "__init__", "TrajectoryPlanner")
    assert unparse(init.args.defaults[-1]) == "None"
    (assign,) = statements(init, lambda n: target_is(n, "self.device"))
    this = SimpleNamespace()
    run_statement(assign, {"self": this, "device": None,
                           "start_pos": torch.zeros(2, 3, device="meta")})
    assert this.device == torch.device("meta")


@needs_src
def test_rrt_plans_when_switched_on_not_on_the_4th_reset(trees, monkeypatch):
    """Upstream planned on the wrapper's 4th reset only (go1_push_upper_wrapper.py:190);
    patched, on ``rrt_planning`` (off in __init__, as upstream trains), with the figure
    folder and count mapush sets."""
    pristine, patched = trees
    plans = lambda n: isinstance(n, ast.If) and "self.planning" in unparse(n.test)  # noqa: E731
    (upstream,) = statements(function(pristine / UPPER, "reset", "Go1PushUpperWrapper"), plans)
    assert "self.reset_count == 4" in unparse(upstream.test)
    (switch,) = statements(function(patched / UPPER, "reset", "Go1PushUpperWrapper"), plans)
    assert "reset_count" not in unparse(switch.test)
    init = function(patched / UPPER, "__init__", "Go1PushUpperWrapper")
    (off,) = statements(init, lambda n: target_is(n, "self.rrt_planning"))
    this = SimpleNamespace(num_obs=2, planning=True, num_envs=3, cfg=SimpleNamespace(
        obstacle_state=SimpleNamespace(obs1_pos=torch.zeros(3, 3), obs2_pos=torch.ones(3, 3))),
        final_target_pos=torch.full((3, 3), 9.0), trajectory=torch.zeros(3, 26))
    run_statement(off, {"self": this})
    calls = []

    def plan_rrt(*args):
        calls.append(args)
        return [None] * 3, {"envs": 3, "planned": 0, "failed": 3, "seconds": 0.0}

    namespace = {"self": this, "torch": torch, "os": os, "plan_rrt": plan_rrt,
                 "box_pos": torch.zeros(3, 3)}
    run_statement(switch, namespace)
    assert calls == []
    monkeypatch.setenv("MAPUSH_FIGURE_DIR", "/tmp/figures")
    monkeypatch.setenv("MAPUSH_RRT_FIGURES", "2")
    this.rrt_planning = True
    run_statement(switch, namespace)
    ((start, goal, obstacles, trajectory, folder, count),) = calls
    assert tuple(obstacles.shape) == (3, 2, 2) and float(obstacles[0, 1, 0]) == 1.0
    assert trajectory is this.trajectory and (folder, count) == ("/tmp/figures", 2)
    assert this.rrt_stats["failed"] == 3


@needs_src
def test_obstacle_collision_degree_counts_the_obstacle_slots(trees):
    """Upstream's count (kept) takes NPC slots [2:2+num_obs] with goal.collision_threshold
    (default 1.0); the patched one the last num_obs slots, the obstacles, with
    test_metrics.collision_threshold (go1_push_upper_config.py:256-258)."""
    pristine, patched = trees
    check = function(patched / FIELD, "check_termination", "LeggedRobotField")
    counted = statements(check, lambda n: isinstance(n, ast.If)
                         and unparse(n.test) == "self.num_obs != 0")
    assert len(counted) == 1
    upstream = statements(function(pristine / FIELD, "check_termination", "LeggedRobotField"),
                          lambda n: isinstance(n, ast.If) and unparse(n.test) == "self.num_obs != 0")
    assert "obstacle_collision_degree_buf" not in unparse(upstream[0])
    # 4 envs, NPC slots: box, target, final target, obstacle 1, obstacle 2
    npcs = torch.zeros(4, 5, 13)
    npcs[:, 2, :2] = torch.tensor([50.0, 50.0])
    npcs[:, 3, :2] = torch.tensor([50.0, 50.0])
    npcs[:, 4, :2] = torch.tensor([50.0, 50.0])
    npcs[0, 2, :2] = torch.tensor([0.5, 0.0])   # env 0: the final target under the box
    npcs[1, 4, :2] = torch.tensor([1.5, 0.0])   # env 1: obstacle 2 at 1.5 (< 1.8, > 1.0)
    npcs[2, 3, :2] = torch.tensor([0.5, 0.0])   # env 2: obstacle 1 at 0.5, episode over
    npcs[3, 3, :2] = torch.tensor([2.0, 0.0])   # env 3: obstacle 1 at 2.0 (> 1.8)
    for fast_step in (False, True):  # upstream's masked += 1, and patch 08's += of the mask
        this = SimpleNamespace(
            num_envs=4, num_npcs=5, num_obs=2, device="cpu", fast_step=fast_step,
            root_states_npc=npcs.reshape(-1, 13),
            init_reset_buf=torch.tensor([False, False, True, False]),
            collision_degree_buf=torch.zeros(4), obstacle_collision_degree_buf=torch.zeros(4),
            cfg=SimpleNamespace(goal=SimpleNamespace(),
                                test_metrics=SimpleNamespace(collision_threshold=1.8)))
        box_pos = npcs[:, 0, :2]
        obs_pos = npcs[:, 2:2 + this.num_obs, :2]
        run_statement(counted[0], {"self": this, "torch": torch, "box_pos": box_pos,
                                   "obs_pos": obs_pos})
        assert this.collision_degree_buf.tolist() == [1.0, 0.0, 0.0, 0.0]  # upstream's
        assert this.obstacle_collision_degree_buf.tolist() == [0.0, 1.0, 0.0, 0.0]
    init = function(patched / FIELD, "__init__", "LeggedRobotField")
    (buf,) = statements(init, lambda n: target_is(n, "self.obstacle_collision_degree_buf"))
    run_statement(buf, {"self": this, "torch": torch})
    assert this.obstacle_collision_degree_buf.tolist() == [0.0] * 4
