"""The authors' checkpoints: evaluate them, start from them, reproduce their table.

The authors' results folders (MAPush at the pin, ``results/10-15-23_<object>/``) are made
here in their layout, from PPO runs trained in the test with real OpenRL over the double:
an OpenRL checkpoint is the whole ``PPOModule`` pickled with ``torch.save``, as theirs is;
``rl_model_<N>_steps/module.pt`` without our ``meta.json``, the object config at
``task/config.py``, and a ``success_rate.txt`` written here in their calculator's format. No
upstream file is copied. Where ``MAPUSH_SRC`` is set, the real published checkpoints are read
too.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mapush.checkpoints.source import describe, parse_success_rate
from mapush.checkpoints.policy import input_dim, sha256
from tests.conftest import DOUBLE_ROOT, REPO, double_env, double_log, one_error, run_mapush

NUM_ENVS = 8
STEPS = 400  # two checkpoints: 200 and 400 (episode_length 25 x 8 envs per update)
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def their_success_rate(figures):
    """A ``success_rate.txt`` as MAPush's calculator writes it (openrl_ws/test.py:143-146):
    Isaac Gym's start-up lines, then per checkpoint its path and the four figures, twice."""
    lines = ["Importing module 'gym_38' (/workspace/isaacgym/python/isaacgym/_bindings/...)"]
    for step, rate in figures:
        lines.append("Loaded checkpoint from:  /workspace/repo/results/x//checkpoints/"
                     "rl_model_%d_steps/module.pt" % step)
        for _ in range(2):
            lines += ["success rate: %r" % rate, "finished time: 1.5",
                      "collision degree: 0.0", "collaboration degree: 0.25"]
        lines.append("-" * 20)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def published(upstream, tmp_path_factory):
    """``{"results": folder, "runs": {object: our run}}``: the authors' layout for cuboid
    (2 robots) and cylinder (3 robots)."""
    tmp = tmp_path_factory.mktemp("published")
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    results = tmp / "results"
    runs = {}
    for obj in ("cuboid", "cylinder"):
        run = tmp / ("ours-" + obj)
        proc = run_mapush(["train", "--algo", "ppo", "--object", obj, "--num-envs", NUM_ENVS,
                           "--steps", STEPS, "--checkpoint-interval", 200, "--config", config,
                           "--run-dir", run] + CPU, double_env(upstream), cwd=tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[obj] = run
        folder = results / ("10-15-23_" + obj)
        for step in (200, 400):
            dest = folder / "checkpoints" / ("rl_model_%d_steps" % step)
            dest.mkdir(parents=True)
            shutil.copy(str(run / "checkpoints" / dest.name / "module.pt"), str(dest))
        (folder / "task").mkdir()
        shutil.copy(str(DOUBLE_ROOT / "task" / obj / "config.py"), str(folder / "task"))
    (results / "10-15-23_cuboid" / "success_rate.txt").write_text(
        their_success_rate([(200, 0.5), (400, 0.5)]))
    (results / "10-15-23_cylinder" / "success_rate.txt").write_text(
        their_success_rate([(400, 0.95)]))
    return {"results": results, "runs": runs, "tmp": tmp}


def checkpoint(published, obj, step=400):
    return published["results"] / ("10-15-23_" + obj) / "checkpoints" / \
        ("rl_model_%d_steps" % step)




def test_the_layout_is_the_authors(published):
    """What we built reads as an authors' checkpoint: a whole pickled PPOModule, no meta."""
    path = checkpoint(published, "cylinder")
    assert sorted(p.name for p in path.iterdir()) == ["module.pt"]
    assert input_dim(path) == 11 and input_dim(checkpoint(published, "cuboid")) == 8
    info = describe(path)
    assert (info["origin"], info["object"], info["step"], info["algo"]) == \
        ("upstream", "cylinder", 400, "ppo")


@pytest.mark.parametrize("obj, agents", [("cuboid", 2), ("cylinder", 3)])
def test_eval_infers_the_object_of_an_authors_checkpoint(upstream, published, tmp_path, obj,
                                                         agents):
    log = tmp_path / "env.jsonl"
    proc = run_mapush(["eval", "--checkpoint", checkpoint(published, obj) / "module.pt",
                       "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["object"], result["step"], result["origin"]) == (obj, 400, "upstream")
    assert result["object_config"] == str(
        (published["results"] / ("10-15-23_" + obj) / "task" / "config.py").resolve())
    assert result["success_rate"] == pytest.approx(0.5)  # the double: even envs succeed
    assert [c["num_agents"] for c in double_log(log)] == [agents]


def test_a_checkpoint_on_the_wrong_object_is_one_line_naming_both_dims(upstream, published,
                                                                      tmp_path):
    log = tmp_path / "env.jsonl"
    proc = run_mapush(["eval", "--checkpoint", checkpoint(published, "cylinder"), "--object",
                       "cuboid", "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    error = one_error(proc)
    assert "takes 11-dim observations, but cuboid" in error and "gives 8" in error
    assert "it fits --object cylinder" in error
    assert double_log(log) == []  # refused before a simulation started


def test_a_checkpoint_that_names_no_object_is_never_assumed_cuboid(upstream, published,
                                                                  tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(str(checkpoint(published, "cylinder") / "module.pt"), str(bare))
    proc = run_mapush(["eval", "--checkpoint", bare, "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert "cannot tell which object" in one_error(proc) and "--object" in proc.stderr
    proc = run_mapush(["eval", "--checkpoint", bare, "--object", "cylinder", "--num-envs",
                       NUM_ENVS] + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["object"] == "cylinder"


def test_eval_run_of_a_read_only_folder_needs_out(published, tmp_path, monkeypatch):
    """The image's /opt/mapush is read-only to the container user (the tests run as root,
    who may write anywhere, so the check itself is given a read-only answer)."""
    from mapush import eval as evaluate
    from mapush.errors import UsageError

    folder = published["results"] / "10-15-23_cuboid"
    monkeypatch.setattr(evaluate.os, "access", lambda path, mode: str(path) != str(folder))
    with pytest.raises(UsageError, match="is read-only: pass --out FILE"):
        evaluate.eval_output(folder, None)
    assert evaluate.eval_output(folder, str(tmp_path / "x.jsonl")) == tmp_path / "x.jsonl"
    with pytest.raises(UsageError, match="does not exist or is not writable"):
        evaluate.eval_output(folder, str(tmp_path / "nope" / "x.jsonl"))


def test_eval_run_of_an_authors_folder_takes_the_steps_from_the_names(upstream, published,
                                                                     tmp_path):
    out = tmp_path / "their-eval.jsonl"
    folder = published["results"] / "10-15-23_cuboid"
    before = sorted(p.name for p in folder.rglob("*"))
    proc = run_mapush(["eval", "--run", folder, "--out", out, "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["step"], r["object"]) for r in lines] == [(200, "cuboid"), (400, "cuboid")]
    assert sorted(p.name for p in folder.rglob("*")) == before  # nothing written there


def test_init_from_an_authors_checkpoint_starts_a_new_run_from_its_weights(upstream,
                                                                          published, tmp_path):
    """With learning rates 0 the weights cannot move: the run's checkpoint holds exactly
    the weights it started from (the value normaliser's running statistics still move);
    the step count starts at 0."""
    config = tmp_path / "frozen.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\nlr: 0.0\ncritic_lr: 0.0\n")
    source = checkpoint(published, "cylinder")
    run = tmp_path / "warm"
    proc = run_mapush(["train", "--algo", "ppo", "--object", "cylinder", "--num-envs", NUM_ENVS,
                       "--steps", 200, "--config", config, "--run-dir", run,
                       "--init-from", source] + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fresh optimizer, step 0" in proc.stderr
    record = json.loads((run / "config.json").read_text())
    assert record["init_from"] == {"checkpoint": str(source.resolve()),
                                   "sha256": sha256(source / "module.pt")}
    assert record["spec"]["init_from"] == str(source.resolve())
    (saved,) = (run / "checkpoints").iterdir()
    assert json.loads((saved / "meta.json").read_text())["step"] == 200
    script = ("import isaacgym, sys, json, torch\n"
              "a = torch.load(sys.argv[1], weights_only=False)\n"
              "b = torch.load(sys.argv[2], weights_only=False)\n"
              "same = all(torch.equal(x, y) for name in ('policy', 'critic') for x, y in\n"
              "           zip(a.models[name].parameters(), b.models[name].parameters())\n"
              "           if x.requires_grad)\n"
              "print(json.dumps(same))\n")
    out = subprocess.run([sys.executable, "-c", script, str(source / "module.pt"),
                          str(saved / "module.pt")], env=double_env(upstream),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) is True


@pytest.mark.parametrize("extra, needle", [
    (["--object", "cuboid"], "takes 11-dim observations, but cuboid"),
    (["--object", "cylinder", "--algo", "happo"], "starts from a HARL checkpoint"),
    (["--object", "cylinder", "--resume", "RESULTS"], "is an authors' results folder"),
])
def test_init_from_refuses_what_cannot_work(upstream, published, tmp_path, extra, needle):
    extra = [str(published["results"] / "10-15-23_cylinder") if e == "RESULTS" else e
             for e in extra]
    run = tmp_path / "refused"
    proc = run_mapush(["train", "--num-envs", NUM_ENVS, "--steps", 200, "--run-dir", run,
                       "--init-from", checkpoint(published, "cylinder")] + extra + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert needle in one_error(proc)
    assert not run.exists()


def test_resume_of_an_authors_folder_points_at_init_from(upstream, published, tmp_path):
    proc = run_mapush(["train", "--resume", published["results"] / "10-15-23_cuboid"] + CPU,
                      double_env(upstream), cwd=tmp_path)
    error = one_error(proc)
    assert "is an authors' results folder" in error and "--init-from" in error


def test_object_config_trains_with_any_file_and_each_run_keeps_a_copy(upstream, published,
                                                                     tmp_path):
    """An authors'-style config whose settings differ from task/<object>/config.py: the
    env gets it, the run keeps a copy with its sha256, and its evaluation uses the copy."""
    custom = tmp_path / "their-config.py"
    custom.write_text((DOUBLE_ROOT / "task" / "cuboid" / "config.py").read_text()
                      .replace('env_name = "cuboid"', 'env_name = "cuboid-theirs"'))
    log = tmp_path / "env.jsonl"
    run = tmp_path / "custom"
    small = tmp_path / "small.yaml"
    small.write_text("episode_length: 25\nppo_epoch: 1\n")
    proc = run_mapush(["train", "--object-config", custom, "--num-envs", NUM_ENVS, "--steps",
                       200, "--config", small, "--run-dir", run] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = run / "task" / "config.py"
    assert copy.read_bytes() == custom.read_bytes()
    record = json.loads((run / "config.json").read_text())
    assert record["object_config"] == {"source": str(custom.resolve()),
                                       "copy": "task/config.py", "sha256": sha256(custom)}
    assert record["spec"]["object"] == "cuboid"  # named by the URDF the file loads
    assert [c["object"] for c in double_log(log)] == ["cuboid-theirs"]
    proc = run_mapush(["eval", "--checkpoint", run, "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["object_config"] == \
        str(copy.resolve())
    assert [c["object"] for c in double_log(log)][-1] == "cuboid-theirs"


def test_every_run_keeps_a_copy_of_its_object_config(published):
    run = published["runs"]["cylinder"]
    copy = run / "task" / "config.py"
    assert copy.read_bytes() == (DOUBLE_ROOT / "task" / "cylinder" / "config.py").read_bytes()
    record = json.loads((run / "config.json").read_text())["object_config"]
    assert record["sha256"] == sha256(copy)


def test_reproduce_flags_a_success_rate_outside_three_sigma(upstream, published, tmp_path):
    out = tmp_path / "reproduce"
    proc = run_mapush(["reproduce", "--results", published["results"], "--num-envs", NUM_ENVS,
                       "--out", out] + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    table = json.loads((out / "table.json").read_text())
    rows = [(r["object"], r["step"], r["flagged"]) for r in table["rows"]]
    # last3: the checkpoints their success_rate.txt has figures for
    assert rows == [("cuboid", 200, False), ("cuboid", 400, False), ("cylinder", 400, True)]
    cylinder = table["rows"][-1]
    assert cylinder["ours"]["success_rate"] == pytest.approx(0.5)
    assert cylinder["theirs"]["success_rate"] == pytest.approx(0.95)
    assert cylinder["diff"]["success_rate"] == pytest.approx(-0.45)
    assert table["settings"]["seed"] == 0 and table["settings"]["num_envs"] == NUM_ENVS
    markdown = (out / "table.md").read_text()
    assert markdown.count("| cuboid |") == 2 and "**outside" in markdown
    finished = [line for line in proc.stderr.splitlines() if ": success " in line]
    assert [line.split(":")[0] for line in finished] == \
        ["[1/3] cuboid 200", "[2/3] cuboid 400", "[3/3] cylinder 400"]
    assert "| cuboid | 200 |" in markdown and "| cuboid | 400 |" in markdown
    assert "FLAGGED" in finished[-1] and finished[0].endswith("ok")
    assert "env/s" in proc.stderr or "env]" in proc.stderr  # a bar per checkpoint


def test_reproduce_one_object_that_is_missing_is_one_line(upstream, published, tmp_path):
    proc = run_mapush(["reproduce", "--results", published["results"], "--objects", "Tblock"]
                      + CPU, double_env(upstream), cwd=tmp_path)
    error = one_error(proc)
    assert "Tblock" in error and "found: cuboid, cylinder" in error


def test_parse_their_success_rate_file():
    text = their_success_rate([(10000000, 0.1), (20000000, 0.25)])
    table = parse_success_rate(text)
    assert sorted(table) == [10000000, 20000000]
    assert table[20000000] == {"success_rate": 0.25, "finished_time": 1.5,
                               "collision_degree": 0.0, "collaboration_degree": 0.25}


MISSING_PIECE = r"""
import sys
from mapush.errors import UsageError
from mapush.checkpoints.policy import load_module
try:
    load_module(sys.argv[1], "cpu", "--checkpoint")
except UsageError as exc:
    print(exc)
"""


def test_unpickling_without_isaacgym_names_the_missing_module(upstream, published):
    """A module.pt pickles Isaac Gym's SimType (the run's config): outside the image, the one
    line names the module, not a traceback."""
    env = dict(double_env(upstream), PYTHONPATH=os.pathsep.join(
        [str(upstream["site"]), str(REPO)]))  # no tests/doubles: no isaacgym
    out = subprocess.run([sys.executable, "-c", MISSING_PIECE,
                          str(checkpoint(published, "cuboid"))], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "unpickling it needs the module isaacgym" in out.stdout
    assert "isaacgym._bindings.linux-x86_64.gym_38" in out.stdout


# -- the real published checkpoints ------------------------------------------------------
SRC = os.environ.get("MAPUSH_SRC")
needs_src = pytest.mark.skipif(not SRC, reason="MAPUSH_SRC is not set: no MAPush checkout "
                               "with the published checkpoints (CI cannot reach GitHub)")


@needs_src
@pytest.mark.parametrize("obj, dim", [("cuboid", 8), ("Tblock", 8), ("cylinder", 11)])
def test_the_real_published_checkpoints(obj, dim):
    run = Path(SRC) / "results" / ("10-15-23_" + obj)
    for step in range(10, 101, 10):
        path = run / "checkpoints" / ("rl_model_%d000000_steps" % step)
        assert input_dim(path) == dim
    info = describe(run / "checkpoints" / "rl_model_100000000_steps")
    assert (info["object"], info["step"], info["origin"]) == (obj, 100000000, "upstream")
    table = parse_success_rate((run / "success_rate.txt").read_text())
    assert sorted(table) == [s * 1000000 for s in range(10, 101, 10)]
    authors = {"cuboid": 0.597, "Tblock": 0.743, "cylinder": 0.617}  # docs/upstream.md
    assert round(table[100000000]["success_rate"], 3) == authors[obj]


@needs_src
def test_the_real_command_and_goal_nets():
    assert input_dim(Path(SRC) / "resources" / "command_nets" / "1.2x1.2.pt") == 8
    assert input_dim(Path(SRC) / "resources" / "goals_net" / "example.pt") == 26


def test_init_from_a_harl_checkpoint_for_harl(upstream, tmp_path):
    """HARL starts from a HARL checkpoint's actors and critic, with fresh optimizers: with
    learning rates 0 the new run's actors are the source's."""
    import yaml

    def config(name, lr):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({"train": {"episode_length": 25, "log_interval": 1},
                                        "device": {"torch_threads": 1},
                                        "model": {"lr": lr, "critic_lr": lr}}))
        return path

    first, second = tmp_path / "first", tmp_path / "second"
    proc = run_mapush(["train", "--algo", "happo", "--num-envs", NUM_ENVS, "--steps", 200,
                       "--config", config("a.yaml", 0.0005), "--run-dir", first] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (source,) = (first / "checkpoints").iterdir()
    proc = run_mapush(["train", "--algo", "happo", "--num-envs", NUM_ENVS, "--steps", 200,
                       "--config", config("b.yaml", 0.0), "--run-dir", second,
                       "--init-from", first] + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fresh optimizers, step 0" in proc.stderr
    (saved,) = (second / "checkpoints").iterdir()
    assert json.loads((saved / "meta.json").read_text())["step"] == 200
    for name in ("actor_agent0.pt", "actor_agent1.pt"):
        a = torch.load(str(source / name), map_location="cpu")
        b = torch.load(str(saved / name), map_location="cpu")
        assert all(torch.equal(a[k], b[k]) for k in a), name
    record = json.loads((second / "config.json").read_text())["init_from"]
    assert record["checkpoint"] == str(source.resolve()) and len(record["sha256"]) == 64
    proc = run_mapush(["train", "--algo", "ppo", "--num-envs", NUM_ENVS, "--steps", 200,
                       "--run-dir", tmp_path / "third", "--init-from", first] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert "is a HARL checkpoint; --algo ppo starts from an OpenRL PPO checkpoint" in \
        one_error(proc)


def test_checkpoint_labels_tell_every_step_apart():
    from mapush.reproduce import step_label

    assert [step_label(n) for n in (1000, 2000, 10000000, 2500000, 100000000, 1234567)] == \
        ["1000", "2000", "10M", "2.5M", "100M", "1234567"]



def test_reproduce_without_isaac_gym_is_one_line_and_writes_nothing(upstream, published,
                                                                     tmp_path):
    """#51 item 4: on a host without Isaac Gym, reproduce repeated the same error for each
    checkpoint and wrote a table of errors; now one line, before anything is written."""
    env = double_env(upstream)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep)
                                        if "standin" not in p)
    out = tmp_path / "reproduce"
    proc = run_mapush(["reproduce", "--results", published["results"], "--out", out] + CPU,
                      env, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert "Isaac Gym Preview 4 is not importable" in lines[0]
    assert not out.exists()
