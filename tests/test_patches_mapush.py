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
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.upstream import APPLY, REPO, pinned_hashes, sha256
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


def test_patches_touch_only_pinned_mapush_files():
    touched = set()
    for patch in (REPO / "patches" / "mapush").glob("*.patch"):
        touched.update(line[len("+++ b/"):].split("\t")[0].strip()
                       for line in patch.read_text().splitlines() if line.startswith("+++ "))
    assert touched == {BASE_TASK, WRAPPER, UTILS, UPPER, TRAJECTORY, RRT}
    assert touched <= set(PINS)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """(pristine, patched) copies of the pinned files from $MAPUSH_SRC."""
    src = Path(SRC)
    pristine, patched = (tmp_path_factory.mktemp(name) for name in ("pristine", "patched"))
    for rel, digest in PINS.items():
        assert (src / rel).is_file(), "MAPUSH_SRC=%s is not a MAPush checkout: no %s" % (src,
                                                                                          rel)
        assert sha256(src / rel) == digest, "%s is not MAPush at the pin" % (src / rel)
        for root in (pristine, patched):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(str(src / rel), str(root / rel))
    proc = subprocess.run([str(APPLY), "mapush", str(patched)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
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
    for rel in (BASE_TASK, WRAPPER, UTILS, UPPER, TRAJECTORY, RRT):
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
    step = function(patched / UPPER, "step", "Go1PushUpperWrapper")
    (scaled,) = statements(step, lambda n: target_is(n, "command_action")
                           and "0.5 * command_action" in unparse(n))
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
def test_rrt_figures_are_written_where_mapush_says(trees, tmp_path, monkeypatch):
    """The RRT figures: saved under MAPUSH_FIGURE_DIR for the first MAPUSH_RRT_FIGURES
    envs, nothing saved without it."""
    _, patched = trees
    reset = function(patched / UPPER, "reset", "Go1PushUpperWrapper")
    (save,) = statements(reset, lambda n: isinstance(n, ast.If)
                         and "MAPUSH_FIGURE_DIR" in unparse(n.test))
    saved = []
    vis = SimpleNamespace(fig=SimpleNamespace(savefig=saved.append))
    figures = tmp_path / "figures"
    monkeypatch.setenv("MAPUSH_FIGURE_DIR", str(figures))
    monkeypatch.setenv("MAPUSH_RRT_FIGURES", "2")
    for i in range(3):
        run_statement(save, {"vis": vis, "i": i, "os": os})
    assert saved == [str(figures / "rrt-env0.png"), str(figures / "rrt-env1.png")]
    assert figures.is_dir()
    monkeypatch.delenv("MAPUSH_FIGURE_DIR")
    run_statement(save, {"vis": vis, "i": 0, "os": os})
    assert len(saved) == 2
