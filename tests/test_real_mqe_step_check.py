"""``mapush doctor --check-step`` (mapush/diagnostics/step_check.py) over real MQE and the
Isaac Gym stand-in: three children (the fast step, upstream's, upstream's again) from one
seed, compared step by step; the verdict on one line with its cost, cached for the machine.
On the CPU no CUDA graph is captured, so what is compared here is the fast step's eager
code; benchmarks/README.md has the check on an H100 with the graphs."""
import json
import shutil

import pytest

from mapush.diagnostics import step_check

from tests.conftest import real_env, run_mapush
from tests.test_real_mqe_patches import probe

pytestmark = pytest.mark.real_mqe

SIZE = ["--check-step-envs", 4, "--check-step-steps", 40]


def doctor(real, tmp, tree=None, task="go1push_mid", extra=()):
    env = real_env(dict(real, tree=tree or real["tree"]), MAPUSH_CACHE_DIR=tmp / "cache")
    return run_mapush(["doctor", "--check-step", "--sim-device", "cpu", "--rl-device", "cpu",
                       "--task", task] + SIZE + list(extra), env, cwd=tmp, timeout=600)


def verdict(tmp):
    files = list((tmp / "cache" / "step-check").glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def step_line(proc, status):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[%s]" % status)
             and line.split()[1] == "step"]
    assert len(lines) == 1, proc.stdout + proc.stderr[-3000:]
    return lines[0]


# the high level's: --json; and 60 steps, which cross its episode end (the check shortens its
# episode to 50 steps), so that its resets are compared too
@pytest.mark.parametrize("task,level,wrapper,extra", [
    ("go1push_mid", "the fast step", "07", ()),
    ("go1push_upper", "the high level's fast step", "12", ("--json", "--check-step-steps", 60))])
def test_check_step_passes_over_the_stand_in_and_records_its_verdict(real_mqe, tmp_path, task,
                                                                     level, wrapper, extra):
    proc = doctor(real_mqe, tmp_path, task=task, extra=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    if extra:  # --json: stdout is one JSON object, the children's own prints on stderr
        line = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "step"][0]
        assert line["status"] == "ok", line
        line = line["message"]
    else:
        line = step_line(proc, "ok")
    steps = 60 if extra else 40
    assert "%s equals upstream's over %d steps at 4 envs" % (level, steps) in line
    assert line.rstrip().endswith(" s")  # its cost
    record = verdict(tmp_path)
    assert record["passed"] is True and record["first_difference"] is None
    assert record["physx_repeats_itself"] is True  # the stand-in's physics is deterministic
    assert record["graphs"] == dict.fromkeys([wrapper, "08", "09"],
                                             "eager: no CUDA graphs on the CPU pipeline")
    assert record["machine"]["patches"]  # the key covers the patches applied
    assert record["task"] == record["machine"]["task"] == task  # and the level checked
    if task == "go1push_upper":
        assert record["resets"] == 4  # each env's episode ended once, at step 50


def test_check_step_fails_on_a_broken_fast_step(real_mqe, tmp_path, monkeypatch):
    """A fast step that differs from upstream's (here the Euler angles of patch 07's
    get_euler_xyz_in_graph, off by 1e-3 rad in yaw) fails the check, named in one line
    with the first array and step that differ, and the fix."""
    tree = tmp_path / "MAPush"
    shutil.copytree(str(real_mqe["tree"]), str(tree), symlinks=True)
    math = tree / "mqe" / "utils" / "math.py"
    good = "    return roll % (2 * np.pi), pitch % (2 * np.pi), yaw % (2 * np.pi)\n"
    assert math.read_text().count(good) == 1
    math.write_text(math.read_text().replace(good, good.replace("yaw %", "(yaw + 1e-3) %")))
    proc = doctor(real_mqe, tmp_path, tree)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    line = step_line(proc, "fail")
    assert "the fast step differs from upstream's: obs at step 0" in line
    assert "--set mqe_fast_step=false" in line
    record = verdict(tmp_path)
    assert record["passed"] is False
    assert record["first_difference"]["array"] == "obs"
    assert record["first_difference"]["step"] == 0
    # `mapush train`'s gate reads this machine's verdict: the run's fast step off, in its
    # spec, which sim.make_env reads (tests/test_real_mqe_equivalence.py: off is upstream's
    # step); the gate runs on GPUs, so device_index stands "cpu" in
    from mapush.run import train
    from mapush.spec import RunSpec

    monkeypatch.setenv("MAPUSH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MAPUSH_PATCH_RECORDS", str(real_mqe["records"]))
    monkeypatch.setenv("MAPUSH_ROOT", str(tree))
    monkeypatch.setattr(train, "device_index", lambda device: 0)
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=1000,
                   seed=1, run_dir=str(tmp_path / "run"), sim_device="cpu", rl_device="cpu")
    spec, step = train.check_step(spec, None, preflight=True)
    assert step["ran"] is True and step["passed"] is False and step["fast_step"] is False
    assert step["key"] == record["key"]  # the doctor's verdict, not a new check
    assert spec.fast_step is False and spec.config is None


# (the good case, the broken one, the wrapper's graph, the graph and replay that differ): the
# mid level's 09 without ``actions`` in its carry, whose capture and first three replays share
# one step's actions, so the fourth (a new step) differs; the high level's 12 without its copy
# of the step's action, whose first replay differs
@pytest.mark.parametrize("good_case,broken_case,wrapper,graph,replay", [
    ("shadow", "shadow_broken_09", "07", "09", 4),
    ("shadow_upper", "shadow_upper_broken_12", "12", "12", 1)])
def test_the_first_replays_of_each_graph_equal_an_eager_run_and_a_stale_input_does_not(
        real_mqe, good_case, broken_case, wrapper, graph, replay):
    """Child A checks the first replays of each graph (the wrapper's 07 or 12, MQE's 08 and
    09) against an eager run of its region on the same state (graphs emulated on the CPU,
    tests/real_mqe_probe.py): equal as shipped; with a graph reading an input it was captured
    with, its replay differs, whatever upstream's run would say."""
    proc, good = probe(real_mqe, good_case, 4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert good["graphs"] == dict.fromkeys([wrapper, "08", "09"], "captured")
    assert good["replays_checked"] == dict.fromkeys([wrapper, "08", "09"],
                                                    step_check.SHADOW_REPLAYS)
    assert good["replay_difference"] is None
    proc, bad = probe(real_mqe, broken_case, 4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = bad["replay_difference"]
    assert (found["graph"], found["replay"]) == (graph, replay) and found["elements"] > 0, found
    record = {"passed": False, "replay_difference": found, "graphs": bad["graphs"]}
    assert step_check.line(record).startswith(
        "graph %s's replay %d differs from an eager run" % (graph, replay))
