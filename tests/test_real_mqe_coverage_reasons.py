"""The reasons for which tests/mqe_coverage.py leaves lines of MQE's core out of the go1push
path's coverage (#48), checked against MAPush's real tree and the task configs that MQE builds
over the Isaac Gym stand-in: every ``holds`` of tests/mqe_coverage.yaml holds in every go1push
config its file runs under, every entry matches code of the tree, and the overrides found from
the source are the ones Python resolves. A switch turned on at the pin, or an entry left behind
by a change of the tree, fails here."""
import ast
import fnmatch
import json
import tokenize
from types import SimpleNamespace

import pytest

from tests import mqe_coverage
from tests.conftest import real_env, run_mapush

pytestmark = pytest.mark.real_mqe

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]
MID, UPPER = "mqe/envs/wrappers/go1_push_mid_wrapper.py", "mqe/envs/wrappers/go1_push_upper_wrapper.py"


def namespace(value):
    if isinstance(value, dict):
        return SimpleNamespace(**{k: namespace(v) for k, v in value.items()})
    return value


@pytest.fixture(scope="module")
def configs(real_mqe, tmp_path_factory):
    """{(task, object): the task config as `mapush train --print-config` prints it}."""
    tmp = tmp_path_factory.mktemp("configs")
    out = {}
    for task, obj in (("go1push_mid", "cuboid"), ("go1push_mid", "Tblock"),
                      ("go1push_mid", "cylinder"), ("go1push_upper", "cuboid")):
        proc = run_mapush(["train", "--task", task, "--object", obj, "--num-envs", 2,
                           "--print-config"] + CPU, real_env(real_mqe), cwd=tmp, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[(task, obj)] = namespace(json.loads(proc.stdout)["task_config"])
    return out


def test_every_holds_in_every_go1push_config_of_its_file(configs):
    checked, false = 0, []
    for entry in mqe_coverage.entries():
        if "holds" not in entry:
            continue
        expression = "not (%s)" % entry["if"] if entry["holds"] == "auto" else entry["holds"]
        for (task, obj), cfg in configs.items():
            if (entry["file"] == MID and task != "go1push_mid") or \
                    (entry["file"] == UPPER and task != "go1push_upper"):
                continue
            held = eval(expression, {}, {"self": SimpleNamespace(cfg=cfg)})  # noqa: S307 (our YAML)
            if not held:
                false.append("%s %s: %r is false for %s %s" % (
                    entry["file"], entry["where"], expression, task, obj))
            checked += 1
    assert false == [], "\n".join(false)
    assert checked > 150  # every holds of the YAML, on three or four configs each


def test_every_entry_matches_code_of_the_real_tree(real_mqe):
    assert mqe_coverage.stale(real_mqe["tree"], mqe_coverage.entries()) == []
    # an entry for code that is gone is found
    gone = [{"file": MID, "where": "Go1PushMidWrapper.step", "if": "self.gone", "reason": "x"}]
    assert mqe_coverage.stale(real_mqe["tree"], gone) == gone


def uses(tree, name):
    """(file, line) of every token of MAPush's tree that names ``name``: a name, or a string
    that is only the name (getattr's); comments and prose left out."""
    found = []
    for path in sorted(tree.rglob("*.py")):
        with path.open("rb") as source:
            for token in tokenize.tokenize(source.readline):
                if (token.type == tokenize.NAME and token.string == name) or \
                        (token.type == tokenize.STRING and token.string.strip("'\"") == name):
                    found.append((str(path.relative_to(tree)), token.start[0]))
    return found


def test_every_unused_def_is_called_nowhere(real_mqe):
    """A def marked unused is named nowhere in MAPush's tree but by its own def, or from inside
    another def that no go1push run reaches (itself unused, or overridden without super())."""
    tree = real_mqe["tree"]
    listed = mqe_coverage.entries()
    hidden = mqe_coverage.overridden(tree)
    unreachable = {(e["file"], e["where"]) for e in listed if e.get("unused")} | set(hidden)
    checked = []
    for entry in listed:
        if not entry.get("unused"):
            continue
        defs = {q for q, _ in mqe_coverage.places_in(tree / entry["file"]).values()
                if fnmatch.fnmatchcase(q, entry["where"])}
        assert defs, entry
        for qual in defs:
            name = qual.split(".")[-1]
            for file, line in uses(tree, name):
                where = mqe_coverage.places_in(tree / file)
                owner = where.get(line, ("", ()))[0]
                if file != entry["file"] and "." not in qual and qual in {q for q, _ in where.values()}:
                    continue  # another module's own function of that name (the wrappers' copies)
                if (file == entry["file"] and owner == qual) or any(
                        file == f and fnmatch.fnmatchcase(owner, w) for f, w in unreachable):
                    continue
                raise AssertionError("%s: %s is used at %s:%d" % (entry["file"], qual, file, line))
            checked.append(qual)
    assert len(checked) >= 8


def test_the_overrides_found_are_the_ones_python_resolves(real_mqe):
    hidden = mqe_coverage.overridden(real_mqe["tree"])
    # Go1.step replaces LeggedRobot's; LeggedRobotField._init_buffers calls super(), so
    # LeggedRobot's runs; Go1Object's NPC hooks replace LeggedRobot's empty ones
    assert hidden[("mqe/envs/base/legged_robot.py", "LeggedRobot.step")] == "Go1"
    assert ("mqe/envs/base/legged_robot.py", "LeggedRobot._init_buffers") not in hidden
    assert hidden[("mqe/envs/base/legged_robot.py", "LeggedRobot._prepare_npc")] == "Go1Object"
    # each hidden method's override is in the nearer class and has no super() call
    by_file = dict(mqe_coverage.ENV_MRO)
    for (name, qual), by in hidden.items():
        cls, method = qual.split(".")
        assert by in [c for _, c in mqe_coverage.ENV_MRO]
        assert method in mqe_coverage._methods(real_mqe["tree"], next(
            f for f, c in mqe_coverage.ENV_MRO if c == by), by)
        assert by_file[name] == cls


def test_places_give_an_else_its_negated_condition():
    source = ("class A:\n    def f(self):\n        if self.x:\n            a = 1\n"
              "        else:\n            b = 2\n        c = 3\n")
    places = mqe_coverage.places(source)
    assert places[4] == ("A.f", ("self.x",))
    assert places[6] == ("A.f", ("not self.x",))
    assert places[7] == ("A.f", ())
    ast.parse(source)
