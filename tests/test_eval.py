"""``mapush eval``: MAPush's calculator mode on a PPO checkpoint, over a double whose
episode outcomes are set by knobs (so the metrics are known whatever the policy does)."""
import json

import pytest

from tests.conftest import double_env, one_error, run_mapush

NUM_ENVS = 8
EPISODE_LENGTH_S, DT = 2.0, 2 * 0.05  # the double's cuboid config: episode, decimation x dt
MAX_STEPS = 20  # ceil(EPISODE_LENGTH_S / DT)
KNOBS = {"SUCCESS": [0, 1, 2, 6], "SUCCESS_STEP": 4, "COLLIDE": [0, 5, 6], "COLLAB": [1, 2]}


def knob_env(upstream, knobs):
    return double_env(upstream, MQE_DOUBLE_SUCCESS_ENVS=",".join(map(str, knobs["SUCCESS"]))
                      or "none", MQE_DOUBLE_SUCCESS_STEP=knobs["SUCCESS_STEP"],
                      MQE_DOUBLE_COLLIDE_ENVS=",".join(map(str, knobs["COLLIDE"])) or "none",
                      MQE_DOUBLE_COLLAB_ENVS=",".join(map(str, knobs["COLLAB"])) or "none")


def expected_metrics(knobs):
    """The calculator's definitions applied to the double's documented behaviour: listed
    envs succeed after SUCCESS_STEP steps, the others count MAX_STEPS (the calculator's
    initial ``init_episode_length_buf``); the collab envs count every step of their first
    episode, the collide envs none: go1push_mid has no obstacles, and MQE's collision
    counter only moves with obstacles (legged_robot_field.py:216)."""
    won = set(knobs["SUCCESS"])
    length = {i: knobs["SUCCESS_STEP"] if i in won else MAX_STEPS for i in range(NUM_ENVS)}

    def degree(counted):
        if not won:
            return None
        return sum((length[i] if i in counted else 0) / length[i] for i in won) / len(won)

    return {"success_rate": len(won) / NUM_ENVS,
            "finished_time": sum(length.values()) * DT / NUM_ENVS,
            "collision_degree": degree(set()),
            "collaboration_degree": degree(set(knobs["COLLAB"]))}


def assert_metrics(result, expected):
    for key, value in expected.items():
        if value is None:
            assert result[key] is None, (key, result)
        else:
            assert result[key] == pytest.approx(value, rel=1e-9), (key, result)


def eval_args(*args):
    return ["eval", "--num-envs", NUM_ENVS, "--sim-device", "cpu", "--rl-device", "cpu"] + \
        list(args)


@pytest.fixture(scope="module")
def run_dir(upstream, tmp_path_factory):
    """A PPO run with two checkpoints (steps 200 and 400)."""
    tmp = tmp_path_factory.mktemp("eval")
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    run = tmp / "run"
    proc = run_mapush(["train", "--algo", "ppo", "--sim-device", "cpu", "--rl-device", "cpu",
                       "--num-envs", NUM_ENVS, "--steps", 400, "--checkpoint-interval", 200,
                       "--config", config, "--run-dir", run, "--object", "Tblock"],
                      double_env(upstream), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def test_eval_prints_the_known_metrics_as_one_json_object(upstream, run_dir):
    checkpoint = run_dir / "checkpoints" / "rl_model_400_steps"
    proc = run_mapush(eval_args("--checkpoint", checkpoint), knob_env(upstream, KNOBS))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    result = json.loads(lines[0])
    assert_metrics(result, expected_metrics(KNOBS))
    assert (result["step"], result["object"], result["num_envs"]) == (400, "Tblock", NUM_ENVS)
    assert result["eval_steps"] == MAX_STEPS + 1  # time-out after max + 1 steps (MQE's `>`)
    assert "found in sys.modules" not in proc.stderr  # #38: runpy's warning on every eval


def test_eval_run_writes_one_line_per_checkpoint(upstream, run_dir):
    knobs = dict(KNOBS, SUCCESS=[])  # nobody succeeds: the degrees are undefined (null)
    proc = run_mapush(eval_args("--run", run_dir), knob_env(upstream, knobs))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [200, 400]
    for record in records:
        assert_metrics(record, expected_metrics(knobs))
    assert [json.loads(line) for line in proc.stdout.strip().splitlines()] == records
    assert "2/2" in proc.stderr  # the progress bar


def test_eval_of_an_unknown_object_lists_the_objects(upstream, run_dir):
    proc = run_mapush(["eval", "--checkpoint", run_dir, "--object", "cubiod", "--sim-device",
                       "cpu", "--rl-device", "cpu"],
                      double_env(upstream))
    assert "unknown object 'cubiod'; objects found: Tblock, cuboid, cylinder" in \
        one_error(proc)


@pytest.mark.parametrize("args,named", [
    (["--checkpoint", "no/such/checkpoint"], "--checkpoint no/such/checkpoint"),
    (["--run", "no/such/run"], "--run no/such/run"),
])
def test_eval_of_a_missing_checkpoint_or_run_is_one_error_line(tmp_path, args, named):
    proc = run_mapush(eval_args(*args), double_env(), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error:") and len(proc.stderr.strip().splitlines()) == 1
    assert named in proc.stderr


def test_eval_run_without_checkpoints_says_so(tmp_path):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    proc = run_mapush(eval_args("--run", tmp_path / "run"), double_env(), cwd=tmp_path)
    assert proc.returncode == 2 and "no complete checkpoint" in proc.stderr
    assert not (tmp_path / "run" / "eval.jsonl").exists()


def test_eval_takes_either_checkpoint_or_run(tmp_path):
    proc = run_mapush(eval_args("--run", tmp_path, "--checkpoint", tmp_path), double_env())
    assert proc.returncode == 2 and "not allowed with" in proc.stderr


def test_eval_of_a_harl_run_uses_its_newest_checkpoint(upstream, tmp_path):
    run = tmp_path / "happo"
    proc = run_mapush(["train", "--algo", "happo", "--sim-device", "cpu", "--rl-device", "cpu",
                       "--num-envs", NUM_ENVS, "--steps", NUM_ENVS * 200, "--run-dir", run],
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(eval_args("--checkpoint", run), knob_env(upstream, KNOBS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["algo"], result["step"]) == ("happo", NUM_ENVS * 200)
    assert_metrics(result, expected_metrics(KNOBS))


class NeverEnding(object):
    """An env whose envs never finish their first episode."""

    num_envs, dt = 2, 0.1

    def __init__(self):
        import torch

        self.torch = torch
        self.init_reset_buf = torch.zeros(2, dtype=torch.bool)

    def reset(self):
        return self.torch.zeros(2, 2, 8)

    def step(self, actions):
        return self.torch.zeros(2, 2, 8), self.torch.zeros(2, 2), self.torch.zeros(2), {}


def test_calculator_gives_up_when_episodes_never_end():
    from mapush.errors import MapushError
    from mapush.eval.calculator import calculator

    seen = []
    with pytest.raises(MapushError, match="2 of 2 envs had not finished"):
        calculator(NeverEnding(), lambda obs: seen.append(obs.shape), max_steps=7)
    assert len(seen) == 7


@pytest.mark.faults
def test_sigterm_during_eval_stops_it_and_changes_nothing(upstream, run_dir, tmp_path):
    """#36: SIGTERM to `mapush eval --run` used to kill the parent at once (143, no line),
    orphan the child, leave the spec file and cut a complete eval.jsonl to what was done.
    Now the signal goes to the child, the scratch files go, the previous eval.jsonl stays,
    and one line says so (exit 130)."""
    import shutil
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    shutil.copytree(str(run_dir), str(run))
    (run / "eval.jsonl").write_text("the previous, complete evaluation\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(knob_env(upstream, KNOBS), MQE_DOUBLE_STEP_SLEEP="0.3", TMPDIR=str(scratch))
    proc = subprocess.Popen([sys.executable, "-m", "mapush"] + [str(a) for a in eval_args(
        "--run", run)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(scratch.glob("mapush-eval-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3)  # the child is evaluating
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "SIGTERM" in err and "Traceback" not in err, err[-3000:]
    assert (run / "eval.jsonl").read_text() == "the previous, complete evaluation\n"
    ours = [p.name for p in scratch.iterdir() if p.name.startswith("mapush-")]
    assert ours == [], ours  # (wandb, which OpenRL imports, leaves its own tmp* folders)
    left = subprocess.run(["pgrep", "-f", "mapush.eval.calculator %s" % scratch],
                          stdout=subprocess.PIPE, text=True).stdout
    assert left == "", left


@pytest.mark.faults
def test_an_eval_child_killed_outright_leaves_no_scratch(upstream, run_dir, tmp_path):
    """CI, stop 67: a child stopped at the moment it made its scratch folder left it in
    $TMPDIR (the folder was its own, removed by its own cleanup). The folder is now the
    parent's, removed however the child ended: here by SIGKILL, with no cleanup at all."""
    import signal
    import subprocess
    import sys
    import time

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(knob_env(upstream, KNOBS), MQE_DOUBLE_STEP_SLEEP="0.1", TMPDIR=str(scratch))
    proc = subprocess.Popen([sys.executable, "-m", "mapush"] + [str(a) for a in eval_args(
        "--run", run_dir, "--out", tmp_path / "eval.jsonl")], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, child = time.monotonic() + 60, ""
    while not child and time.monotonic() < deadline:  # the first checkpoint's child
        time.sleep(0.2)
        child = subprocess.run(["pgrep", "-f", "mapush.eval.calculator %s" % scratch],
                               stdout=subprocess.PIPE, text=True).stdout.split()
    assert child, "no evaluation child started"
    assert [p.name for p in scratch.glob("mapush-eval-*/scratch")] == ["scratch"]
    time.sleep(2)  # it is evaluating
    subprocess.run(["kill", "-KILL"] + child, check=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]  # and the other checkpoint was evaluated
    lines = (tmp_path / "eval.jsonl").read_text().splitlines()
    errors = [json.loads(line).get("error") for line in lines]
    assert errors == ["error: the evaluation process died from SIGKILL", None], out
    assert [p.name for p in scratch.iterdir() if p.name.startswith("mapush-")] == []


STOPPED_IN_THE_PARENT = """
import argparse, json, os, sys
from mapush.eval import describe_request, evaluate
from mapush.proc import Supervisor

def stop(done, total, *step):  # a stop signal raised in a parent without handlers, as reproduce's
    raise KeyboardInterrupt

args = argparse.Namespace(num_envs=int(sys.argv[2]), seed=1, sim_device="cpu",
                          rl_device="cpu")
sup = Supervisor("test", "")  # not entered: the signals stay with this script
try:
    evaluate(describe_request(sys.argv[1], args), args, on_progress=stop, sup=sup)
except KeyboardInterrupt:
    print(json.dumps({"running": [p.pid for p in sup.children if p.poll() is None],
                      "started": len(sup.children),
                      "left": sorted(n for n in os.listdir(os.environ["TMPDIR"])
                                     if n.startswith("mapush-"))}))
"""


def test_a_stop_raised_in_evals_parent_ends_the_child_before_its_scratch_goes(
        upstream, run_dir, tmp_path):
    """``reproduce`` and ``sweep`` call ``evaluate`` without stop handlers, so a stop raises
    in the parent while it reads the child. The child is ended before the parent removes
    the child's scratch folder (before, it ran on until the parent exited, free to write
    into the folder just removed), and nothing of ours is left in $TMPDIR."""
    import subprocess
    import sys

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    checkpoint = sorted((run_dir / "checkpoints").iterdir())[-1]
    env = dict(knob_env(upstream, KNOBS), MQE_DOUBLE_STEP_SLEEP="0.05", TMPDIR=str(scratch))
    proc = subprocess.run([sys.executable, "-c", STOPPED_IN_THE_PARENT, str(checkpoint),
                           str(NUM_ENVS)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"running": [], "started": 1, "left": []}, out


def test_readers_never_write_into_another_run(upstream, run_dir, tmp_path):
    """#36: `eval --run A --out B/config.json` replaced run B's record (exit 0). eval,
    report and export refuse an --out inside another run, and eval an existing file that is
    not an eval output; nothing is written."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"the": "record of another run"}')
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    lines = tmp_path / "mine.jsonl"  # a *.jsonl of the user's: not eval's records
    lines.write_text('{"my": "data"}\n')
    cases = [(eval_args("--run", run_dir, "--out", other / "config.json"), "inside the run"),
             (eval_args("--run", run_dir, "--out", other / "eval.jsonl"), "inside the run"),
             (eval_args("--run", run_dir, "--out", notes), "is no result of mapush eval"),
             (eval_args("--run", run_dir, "--out", lines), "is no result of mapush eval"),
             (["report", run_dir, "--out", other / "report"], "inside the run"),
             (["export", "--run", run_dir, "--out", other / "export"], "inside the run")]
    for args, says in cases:
        line = one_error(run_mapush(args, double_env(upstream), cwd=tmp_path))
        assert says in line, (args, line)
    assert (other / "config.json").read_text() == '{"the": "record of another run"}'
    assert sorted(p.name for p in other.iterdir()) == ["config.json"]
    assert notes.read_text() == "mine" and lines.read_text() == '{"my": "data"}\n'


@pytest.mark.faults
def test_eval_run_writes_each_checkpoint_as_it_goes(upstream, run_dir, tmp_path):
    """#50: eval --run wrote its file once, at the end, so a stop or a full disk after a long
    evaluation lost every result. Each checkpoint's line is now on stdout and in the file
    (atomically) as soon as it is done; a stop keeps those done and says so (exit 130)."""
    import shutil
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    shutil.copytree(str(run_dir), str(run))
    (run / "eval.jsonl").write_text("the previous, complete evaluation\n")
    env = dict(knob_env(upstream, KNOBS), MQE_DOUBLE_STEP_SLEEP="0.3")
    proc = subprocess.Popen([sys.executable, "-m", "mapush"] + [str(a) for a in eval_args(
        "--run", run)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while (run / "eval.jsonl").read_text().startswith("the previous") and \
            time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # during the second checkpoint
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "SIGTERM: the evaluation stops; what it wrote holds only the checkpoints done" in \
        err and "Traceback" not in err, err[-3000:]
    (record,) = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert record["step"] == 200
    assert_metrics(record, expected_metrics(KNOBS))
    assert [json.loads(line) for line in out.splitlines()] == [record]
