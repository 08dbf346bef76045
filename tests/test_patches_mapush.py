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

PINS = pinned_hashes("mapush")
SRC = os.environ.get("MAPUSH_SRC")
needs_src = pytest.mark.skipif(
    not SRC, reason="MAPUSH_SRC is not set: no MAPush checkout to patch (MAPush is not on "
    "PyPI; the image build applies these patches for real)")
VAR = "MAPUSH_CONTACT_PAIRS_MULTIPLIER"
BASE_TASK = "mqe/envs/base/base_task.py"
WRAPPER = "mqe/envs/wrappers/go1_push_mid_wrapper.py"
UTILS = "openrl_ws/utils.py"


def test_patches_touch_only_pinned_mapush_files():
    touched = set()
    for patch in (REPO / "patches" / "mapush").glob("*.patch"):
        touched.update(line[len("+++ b/"):].split("\t")[0].strip()
                       for line in patch.read_text().splitlines() if line.startswith("+++ "))
    assert touched == {BASE_TASK, WRAPPER, UTILS}
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
    return any(ast.unparse(t) == text for t in targets)


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
    assert [ast.unparse(n) for n in upstream] == \
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
    assert ".cuda()" not in ast.unparse(step)
    (assign,) = statements(step, lambda n: target_is(n, "actions"))
    namespace = run_statement(assign, {"self": fake_wrapper(device), "torch": torch,
                                       "actions": np.full((3, 2, 3), 4.0)})
    assert namespace["actions"].device == torch.device(device)
    if device == "cpu":  # the clip still applies after the 0.5 scale
        assert float(namespace["actions"].max()) == 1.0
    assert ".cuda()" in ast.unparse(function(pristine / UTILS, "step", "mqe_openrl_wrapper"))


@needs_src
def test_patched_files_still_compile(trees):
    for rel in (BASE_TASK, WRAPPER, UTILS):
        compile((trees[1] / rel).read_text(), rel, "exec")
