"""The double against MAPush's real source: drift between them fails here.

Where ``MAPUSH_SRC`` points at a MAPush checkout at the pinned commit, each fact the double
encodes is read from the real files by parsing them (importing would need Isaac Gym), and
compared with what the double does (probed in a subprocess, as the product drives it):

- agents and obs dim per object (``task/<object>/config.py``, the wrapper's obs space);
- the reward terms of ``reward_buffer`` (``go1_push_mid_wrapper.py``);
- the model paths, relative to the working directory, and the files loaded from them
  (``go1_config.py``, ``go1.py``);
- the time-out comparison (``legged_robot.py``);
- the calculator's counters that are never reset, the collision counter only moving with
  obstacles (``legged_robot_field.py``);
- and, of the product itself, the calculator's env count (``task/<object>/train.sh``).

Without ``MAPUSH_SRC`` they skip; ``.ci/run`` sets it from the shared snapshot of MAPush at
the pin (docs/upstream.md says how to run them elsewhere).
"""
import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mapush.objects import find_objects, read_object_facts
from mapush.spec import CALCULATOR_NUM_ENVS
from tests.conftest import DOUBLE_ROOT, double_env
from tests.astcompat import unparse

SRC = os.environ.get("MAPUSH_SRC")
pytestmark = pytest.mark.skipif(
    not SRC, reason="MAPUSH_SRC is not set: no MAPush checkout to read the facts from "
    "(MAPush is not on PyPI; CI cannot reach GitHub)")

WRAPPER = "mqe/envs/wrappers/go1_push_mid_wrapper.py"
GO1_CONFIG = "mqe/envs/go1/go1_config.py"
GO1 = "mqe/envs/go1/go1.py"
LEGGED_ROBOT = "mqe/envs/base/legged_robot.py"
FIELD = "mqe/envs/field/legged_robot_field.py"
UPPER_CONFIG = "mqe/envs/configs/go1_push_upper_config.py"
COUNTERS = ("init_reset_buf", "init_finished_buf", "init_episode_length_buf",
            "collision_degree_buf", "collaboration_degree_buf")


def real(rel):
    path = Path(SRC) / rel
    assert path.is_file(), "MAPUSH_SRC=%s is not a MAPush checkout: no %s" % (SRC, rel)
    return ast.parse(path.read_text(), filename=str(path))


def parented(tree):
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node
    return tree


def self_attr(node, name=None):
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self" and (name is None or node.attr == name))


def enclosing(node, kind):
    while getattr(node, "parent", None) is not None:
        node = node.parent
        if isinstance(node, kind):
            return node
    return None


# ------------------------------------------------------------------ the real facts
def real_reward_terms():
    for node in ast.walk(real(WRAPPER)):
        if isinstance(node, ast.Assign) and self_attr(node.targets[0], "reward_buffer"):
            return [ast.literal_eval(key) for key in node.value.keys]
    raise AssertionError("no self.reward_buffer = {...} in %s" % WRAPPER)


def real_obs_dim(num_agents, general_dist=False):
    """The wrapper's obs space, evaluated: ``shape=(2 + 3 * self.num_agents,)``."""
    shapes = []
    for node in ast.walk(real(WRAPPER)):
        if isinstance(node, ast.Call) and unparse(node.func) == "spaces.Box":
            for kw in node.keywords:
                if kw.arg == "shape" and "num_agents" in unparse(kw.value):
                    shapes.append(kw.value.elts[0])
    assert len(shapes) == 2, "the wrapper's two obs spaces (general_dist or not)"
    expr = unparse(shapes[0 if general_dist else 1]).replace("self.num_agents", "n")
    return eval(expr, {"n": num_agents})  # noqa: S307 - an arithmetic expression we parsed


def class_settings(tree, section):
    """String settings of ``class <section>`` in a config file."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == section:
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                    out[stmt.targets[0].id] = stmt.value.value
    return out


def real_model_files():
    """The suffixes ``go1.py`` appends to the config's model paths in ``torch.jit.load``."""
    found = []
    for node in ast.walk(real(GO1)):
        if isinstance(node, ast.Call) and unparse(node.func) == "torch.jit.load":
            arg = node.args[0]
            assert isinstance(arg, ast.BinOp) and isinstance(arg.right, ast.Constant)
            found.append((unparse(arg.left).rsplit(".", 1)[-1], arg.right.value))
    return found


def real_timeout_op():
    for node in ast.walk(real(LEGGED_ROBOT)):
        if isinstance(node, ast.Assign) and self_attr(node.targets[0], "time_out_buf"):
            compare = node.value
            assert unparse(compare.left) == "self.episode_length_buf"
            assert unparse(compare.comparators[0]) == "self.max_episode_length"
            return type(compare.ops[0]).__name__
    raise AssertionError("no self.time_out_buf = ... in %s" % LEGGED_ROBOT)


def real_counter_writes():
    """{counter: [(kind, method, guarded by num_obs)]} for every write outside __init__."""
    writes = {name: [] for name in COUNTERS}
    for node in ast.walk(parented(real(FIELD))):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign) else []
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if self_attr(base) and base.attr in COUNTERS:
                method = enclosing(node, ast.FunctionDef).name
                guard = enclosing(node, ast.If)
                kind = ("augment" if isinstance(node, ast.AugAssign) else
                        "set-where" if isinstance(target, ast.Subscript) else "assign")
                writes[base.attr].append((kind, method, guard is not None
                                          and "num_obs" in unparse(guard.test)))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("zero_", "fill_") and self_attr(node.func.value)
                and node.func.value.attr in COUNTERS):
            writes[node.func.value.attr].append(("reset", enclosing(node, ast.FunctionDef).name,
                                                 False))
    return writes


# ------------------------------------------------------------------ the double, probed
PROBE = r"""
import json, sys
from mapush import sim
sim.import_isaacgym()
import torch
from mapush.objects import find_objects
from mapush.spec import RunSpec

out = {"objects": {}}
for obj in find_objects():
    spec = RunSpec(algo="ppo", task="go1push_mid", object=obj, num_envs=4, steps=1, seed=1,
                   run_dir=".", sim_device="cpu", rl_device="cpu")
    env, cfg = sim.make_env(spec, contact_pairs=2 ** 20)
    out["objects"][obj] = {"agents": env.num_agents, "obs_dim": env.observation_space.shape[0]}
    if obj != "cuboid":
        continue
    from mqe.envs.go1.go1 import Go1Cfg
    out["control"] = {k: getattr(Go1Cfg.control, k)
                      for k in ("locomotion_policy_dir", "actuator_network_path")}
    out["loaded"] = env.loaded_models
    zero = torch.zeros(4, env.num_agents, 3)
    env.reset()
    steps, done = 0, torch.zeros(4, dtype=torch.bool)
    while not done[1]:  # env 1 never succeeds: it times out
        _o, reward, done, _i = env.step(zero)
        steps += 1
    out["terms"] = list(env.reward_buffer)
    out["timeout_after"], out["max_episode_length"] = steps, int(env.max_episode_length)
    snapshot = lambda: [getattr(env, n).tolist() for n in %r]
    while not bool(env.init_reset_buf.all()):
        env.step(zero)
    before = snapshot()
    for _ in range(3 * int(env.max_episode_length)):
        env.step(zero)
    out["counters_frozen"] = snapshot() == before
    out["collisions_without_obstacles"] = float(env.collision_degree_buf.sum())
    out["collaboration_counted"] = float(env.collaboration_degree_buf.sum())
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def double(tmp_path_factory):
    env = double_env(MQE_DOUBLE_COLLIDE_ENVS="all", MQE_DOUBLE_COLLAB_ENVS="all")
    proc = subprocess.run([sys.executable, "-c", PROBE % (COUNTERS,)], env=env,
                          cwd=str(tmp_path_factory.mktemp("probe")), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_agents_and_obs_dim_per_object(double):
    objects = find_objects(Path(SRC))
    assert objects == find_objects(DOUBLE_ROOT) == sorted(double["objects"])
    for obj in objects:
        facts = read_object_facts(Path(SRC) / "task" / obj / "config.py")
        assert facts.obs_dim == real_obs_dim(facts.num_agents, facts.general_dist), obj
        assert double["objects"][obj] == {"agents": facts.num_agents,
                                          "obs_dim": facts.obs_dim}, obj
    assert {obj: double["objects"][obj]["agents"] for obj in objects} == \
        {"Tblock": 2, "cuboid": 2, "cylinder": 3}


def test_reward_terms(double):
    assert double["terms"] == real_reward_terms()
    assert len(real_reward_terms()) == 8 and real_reward_terms()[-1] == "step_count"


def test_model_paths_relative_to_the_working_directory(double):
    control = class_settings(real(GO1_CONFIG), "control")
    paths = {k: control[k] for k in ("locomotion_policy_dir", "actuator_network_path")}
    assert double["control"] == paths
    assert all(v.startswith("./") for v in paths.values())
    loaded = [paths[attr] + suffix for attr, suffix in real_model_files()]
    resolved = [str(DOUBLE_ROOT.resolve() / p[2:]) for p in loaded]
    assert sorted(double["loaded"]) == sorted(resolved)
    assert all(Path(p).is_file() for p in resolved)  # the stand-ins the double opens
    upper = class_settings(real(UPPER_CONFIG), "control")
    assert upper["command_network_path"].startswith("./")  # resolved the same way


def test_every_relative_setting_upstream_is_one_the_double_has(double):
    """A new "./" setting upstream (another model loaded by a relative path) shows up here."""
    relative = set()
    for path in sorted(Path(SRC).glob("mqe/envs/**/*config*.py")) + \
            sorted(Path(SRC).glob("task/*/config.py")):
        if path.name == Path(UPPER_CONFIG).name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str) and node.value.value.startswith("./")):
                relative.add(node.targets[0].id)
    assert relative == set(double["control"])


def test_time_out_comparison(double):
    op = real_timeout_op()
    assert op == "Gt"  # episode_length_buf > max_episode_length
    assert double["timeout_after"] == double["max_episode_length"] + 1


def test_counters_are_never_reset(double):
    writes = {name: [w for w in found if w[1] != "__init__"]
              for name, found in real_counter_writes().items()}
    for name, found in writes.items():
        assert found, name
        # after __init__: only accumulated (|=, +=) or set where an episode just succeeded
        assert all(kind in ("augment", "set-where") for kind, _m, _g in found), (name, found)
        assert {method for _k, method, _g in found} == {"check_termination"}, (name, found)
    assert all(guarded for _k, _m, guarded in writes["collision_degree_buf"])
    assert double["counters_frozen"]
    assert double["collisions_without_obstacles"] == 0.0
    assert double["collaboration_counted"] > 0.0


def calculator_env_counts(train_sh: Path) -> list:
    """The ``--num_envs`` of every ``openrl_ws/test.py ... --test_mode calculator`` command
    of a ``task/<object>/train.sh`` (its lines joined where they end in a backslash)."""
    counts = []
    for command in train_sh.read_text().replace("\\\n", " ").splitlines():
        words = shlex.split(command, comments=True)
        if "./openrl_ws/test.py" in words and "--test_mode" in words and \
                words[words.index("--test_mode") + 1] == "calculator":
            counts.append(int(words[words.index("--num_envs") + 1]))
    return counts


def test_the_calculators_env_count_is_upstreams():
    """mapush eval's default --num-envs (CALCULATOR_NUM_ENVS) is the count each object's
    train.sh evaluates its checkpoints with (task/cuboid/train.sh:39), so success rates
    compare with the published success_rate.txt files."""
    found = {obj: calculator_env_counts(Path(SRC) / "task" / obj / "train.sh")
             for obj in find_objects(Path(SRC))}
    assert found == {obj: [CALCULATOR_NUM_ENVS] for obj in ("Tblock", "cuboid", "cylinder")}
