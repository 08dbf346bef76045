"""The hierarchy: the high level (go1push_upper) trained on a mid-level policy, evaluated,
and the whole method as one resumable pipeline, over the double.

The double's go1push_upper follows upstream (docs/upstream.md): one centralized agent, obs
26, action 2; it loads the mid-level policy with ``torch.load`` from the config's
``command_network_path`` (relative to the working directory unless mapush resolves it) and
calls its ``act()`` on 8-dim observations of each robot.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mapush.checkpoints.policy import sha256
from tests.conftest import DOUBLE_ROOT, double_env, double_log, one_error, run_mapush, tree_hash

NUM_ENVS = 8
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def small(tmp, name="small.yaml"):
    path = Path(tmp) / name
    path.write_text("episode_length: 25\nppo_epoch: 1\n")
    return path




@pytest.fixture(scope="module")
def mids(upstream, tmp_path_factory):
    """Mid-level PPO runs: cuboid (2 robots, obs 8) and cylinder (3 robots, obs 11)."""
    tmp = tmp_path_factory.mktemp("mid")
    runs = {}
    for obj in ("cuboid", "cylinder"):
        run = tmp / obj
        proc = run_mapush(["train", "--object", obj, "--num-envs", NUM_ENVS, "--steps", 400,
                           "--checkpoint-interval", 200, "--config", small(tmp),
                           "--run-dir", run] + CPU, double_env(upstream), cwd=tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[obj] = run
    return runs


@pytest.fixture(scope="module")
def upper_run(upstream, mids, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("upper")
    log = tmp / "env.jsonl"
    before = tree_hash(DOUBLE_ROOT)
    run = tmp / "upper"
    proc = run_mapush(["train", "--task", "go1push_upper", "--command-net", mids["cuboid"],
                       "--num-envs", NUM_ENVS, "--steps", 400, "--config", small(tmp),
                       "--run-dir", run] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"run": run, "log": log, "tmp": tmp, "untouched": tree_hash(DOUBLE_ROOT) == before}


def test_the_high_level_trains_on_our_mid_level_run(upper_run, mids):
    newest = mids["cuboid"] / "checkpoints" / "rl_model_400_steps" / "module.pt"
    record = json.loads((upper_run["run"] / "config.json").read_text())
    assert record["spec"]["task"] == "go1push_upper" and record["spec"]["algo"] == "ppo"
    assert record["command_net"] == {"path": str(newest.resolve()), "sha256": sha256(newest)}
    (env,) = double_log(upper_run["log"])
    assert env["command_network_path"] == str(newest.resolve())  # absolute, in the config
    assert env["mplbackend"] == "Agg"  # the RRT planner's figures never open a window
    assert env["figure_dir"] == str((upper_run["run"] / "figures").resolve())
    assert not (upper_run["run"] / "figures").exists()  # training never plans, as upstream
    assert upper_run["untouched"]  # nothing under MAPUSH_ROOT written
    resolved = json.loads((upper_run["run"] / "openrl_config.json").read_text())
    assert resolved["episode_length"] == 25  # --config wins over ppo_upper.yaml
    meta = json.loads((upper_run["run"] / "checkpoints" / "rl_model_400_steps" /
                       "meta.json").read_text())
    assert meta["task"] == "go1push_upper"


def test_the_upper_recipe_fits_long_episodes():
    import mapush.trainers

    configs = Path(mapush.trainers.__file__).parent / "configs"
    assert "ppo_upper.yaml" in (configs.parent / "openrl_config.py").read_text()
    upper = yaml.safe_load((configs / "ppo_upper.yaml").read_text())
    # upstream's train.py forces 200 for PPO (openrl_ws/train.py:30)
    assert upper["episode_length"] == 200 and upper["log_interval"] == 1


def test_the_high_level_evaluates_as_the_full_hierarchy(upstream, upper_run):
    """Eval plans with RRT (the switch of patches/mapush/04) and reports upstream's collision
    degree and the obstacle collision degree (patches/mapush/05) side by side."""
    log = upper_run["tmp"] / "eval-env.jsonl"
    proc = run_mapush(["eval", "--checkpoint", upper_run["run"], "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream, MQE_DOUBLE_LOG=log, MQE_DOUBLE_COLLIDE_ENVS="all",
                                 MQE_DOUBLE_OBSTACLE_ENVS="0,1,2,3,5"),
                      cwd=upper_run["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["task"] == "go1push_upper" and result["seed"] == 0
    assert result["success_rate"] == pytest.approx(0.5)
    assert result["collision_degree"] == pytest.approx(1.0)
    # successes are the even envs 0, 2, 4, 6: two of four touched an obstacle every step
    assert result["obstacle_collision_degree"] == pytest.approx(0.5)
    assert result["finished_time"] > 0
    assert result["rrt"]["planned"] == NUM_ENVS and result["rrt"]["failed"] == 0
    assert result["rrt"]["figures"] is None and "pass --out DIR" in proc.stderr
    (env,) = double_log(log)
    assert env["object"] == "go1push_upper"
    assert not (upper_run["run"] / "figures").exists()


def test_eval_of_a_high_level_run_keeps_its_rrt_figures_beside_eval_jsonl(upstream, upper_run,
                                                                          tmp_path):
    run = tmp_path / "upper"
    shutil.copytree(str(upper_run["run"]), str(run))
    proc = run_mapush(["eval", "--run", run, "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [400]
    for line in lines:
        folder = run / "rrt" / Path(line["checkpoint"]).name
        assert line["rrt"]["figures"] == str(folder.resolve())
        assert sorted(p.name for p in folder.iterdir()) == ["rrt-env%d.png" % i
                                                            for i in range(8)]
        assert "obstacle_collision_degree" in line
    proc = run_mapush(["report", run], double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (run / "report" / "index.html").read_text()
    assert "collision degree (upstream&#39;s)" in page  # escaped by jinja2
    assert "obstacle collision degree" in page


def test_eval_of_the_authors_high_level_policy_file(upstream, mids, upper_run, tmp_path):
    """``--task go1push_upper --checkpoint .../goals_net/example.pt``: a bare policy file,
    evaluated on the cuboid with the published command net; without --task it cannot tell
    which object or level it is for."""
    root, _published = root_with_published_net(tmp_path, mids)
    example = root / "resources" / "goals_net" / "example.pt"
    example.parent.mkdir(parents=True)
    shutil.copy(str(upper_run["run"] / "checkpoints" / "rl_model_400_steps" / "module.pt"),
                str(example))
    env = double_env(upstream, MAPUSH_ROOT=root)
    figures = tmp_path / "figures"
    proc = run_mapush(["eval", "--task", "go1push_upper", "--checkpoint", example,
                       "--num-envs", NUM_ENVS, "--out", figures] + CPU, env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["task"], result["object"]) == ("go1push_upper", "cuboid")
    assert result["rrt"]["figures"] == str(figures.resolve())
    assert len(list(figures.glob("rrt-env*.png"))) == 8
    # #36: the figures' --out never goes into another run (its record stays as it was)
    other = mids["cylinder"]
    before = tree_hash(other)
    line = one_error(run_mapush(["eval", "--task", "go1push_upper", "--checkpoint", example,
                                 "--num-envs", NUM_ENVS, "--out", other / "rrt"] + CPU, env,
                                cwd=tmp_path))
    assert "is inside the run %s" % other.resolve() in line, line
    assert tree_hash(other) == before
    proc = run_mapush(["eval", "--checkpoint", example, "--num-envs", NUM_ENVS] + CPU, env,
                      cwd=tmp_path)
    assert "cannot tell which object" in one_error(proc)
    for extra, needle in ((["--object", "Tblock"], "--object Tblock: the high level"),
                          (["--command-net", tmp_path / "nope.pt"], "no such file")):
        proc = run_mapush(["eval", "--task", "go1push_upper", "--checkpoint", example] +
                          extra + CPU, env, cwd=tmp_path)
        assert needle in one_error(proc)
    proc = run_mapush(["eval", "--task", "go1push_mid", "--checkpoint", upper_run["run"]] + CPU,
                      env, cwd=tmp_path)
    assert "was trained on --task go1push_upper" in one_error(proc)


def test_eval_help_shows_task_and_command_net():
    proc = subprocess.run([sys.executable, "-m", "mapush", "eval", "--help"],
                          stdout=subprocess.PIPE, universal_newlines=True)
    assert "--task" in proc.stdout and "--command-net" in proc.stdout
    assert "default: 0" in proc.stdout


@pytest.mark.parametrize("extra, needle", [
    (["--object", "Tblock"], "--object Tblock: the high level (go1push_upper) pushes"),
    (["--object-config", "{root}/task/Tblock/config.py"], "builds its object from MQE's"),
])
def test_the_high_level_refuses_any_object_but_the_cuboid(upstream, mids, tmp_path, extra,
                                                          needle):
    extra = [e.format(root=DOUBLE_ROOT) for e in extra]
    proc = run_mapush(["train", "--task", "go1push_upper", "--command-net", mids["cuboid"],
                       "--num-envs", NUM_ENVS, "--run-dir", tmp_path / "run"] + extra + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert needle in one_error(proc)
    assert not (tmp_path / "run").exists()


def root_with_published_net(tmp_path, mids):
    """A copy of the double's MAPush root whose published command net is our cuboid mid
    level's: ``(root, the net's path)``."""
    root = tmp_path / "mapush_root"
    shutil.copytree(str(DOUBLE_ROOT), str(root))
    published = root / "resources" / "command_nets" / "1.2x1.2.pt"
    published.parent.mkdir(parents=True)
    shutil.copy(str(mids["cuboid"] / "checkpoints" / "rl_model_200_steps" / "module.pt"),
                str(published))
    return root, published


def test_the_published_command_net_is_the_default(upstream, mids, tmp_path):
    root, published = root_with_published_net(tmp_path, mids)
    run = tmp_path / "upper"
    proc = run_mapush(["train", "--task", "go1push_upper", "--num-envs", NUM_ENVS, "--steps",
                       200, "--config", small(tmp_path), "--run-dir", run] + CPU,
                      double_env(upstream, MAPUSH_ROOT=root), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((run / "config.json").read_text())
    assert record["command_net"]["path"] == str(published.resolve())


@pytest.mark.parametrize("case, needle", [
    ("missing", "--command-net {}: no such file or folder"),
    ("not-a-policy", "is not a policy"),
    ("three-robots", "takes 11-dim observations; the high level feeds it 8-dim ones"),
    ("mid-task", "--command-net is for --task go1push_upper"),
    ("harl", "has one centralized agent"),
    ("no-published", "the published mid-level policy"),
])
def test_bad_command_nets_are_one_line_before_a_simulation(upstream, mids, tmp_path, case,
                                                          needle):
    log = tmp_path / "env.jsonl"
    net = {"missing": str(tmp_path / "nope.pt"), "three-robots": str(mids["cylinder"]),
           "mid-task": str(mids["cuboid"]), "harl": str(mids["cuboid"])}.get(case)
    if case == "not-a-policy":
        net = str(tmp_path / "notes.pt")
        Path(net).write_bytes(b"these are my notes, not a policy")
    args = ["train", "--task", "go1push_mid" if case == "mid-task" else "go1push_upper",
            "--num-envs", NUM_ENVS, "--run-dir", tmp_path / "run"] + CPU
    if case == "harl":
        args += ["--algo", "happo"]
    if net:
        args += ["--command-net", net]
    proc = run_mapush(args, double_env(upstream, MQE_DOUBLE_LOG=log), cwd=tmp_path)
    assert needle.format(net) in one_error(proc)
    assert double_log(log) == [] and not (tmp_path / "run").exists()


def test_the_budget_counts_the_obstacles(tmp_path):
    """The high level's envs hold 2 obstacles beside the robots, the box and the targets."""
    net = tmp_path / "net.pt"
    script = r"""
import json, sys
from mapush import sim
sim.import_isaacgym()
import torch
from mapush import physx_budget
physx_budget.sim_free_bytes = lambda device: 8 * 1024 ** 3
torch.save({"stand": "in"}, sys.argv[2])
build_args = sim.build_args
def cpu_pipeline(spec, num_envs=None):
    args = build_args(spec, num_envs)
    args.use_gpu_pipeline = False
    return args
sim.build_args = cpu_pipeline
from mapush.spec import RunSpec
spec = RunSpec(algo="ppo", task="go1push_upper", object="cuboid", num_envs=4, steps=1, seed=1,
               run_dir=sys.argv[1], sim_device="cuda:0", rl_device="cuda:0",
               command_net=sys.argv[2])
sim.make_env(spec)
"""
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(net)],
                         env=double_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    from mapush import physx_budget as pb

    record = json.loads((tmp_path / pb.BUDGET_FILE).read_text())
    assert record["shapes_per_env"] == 2 * pb.SHAPES_PER_GO1 + 1 + 2
    # robots, box, target area, final target, 2 obstacles (go1_object.py:95-120)
    assert record["actors_per_env"] == 2 + 1 + 1 + 1 + 2


# -- the pipeline ----------------------------------------------------------------------
def pipeline_args(folder, *extra):
    return ["pipeline", "--object", "cuboid", "--num-envs", NUM_ENVS, "--upper-num-envs",
            NUM_ENVS, "--mid-steps", 400, "--upper-steps", 400, "--eval-envs", NUM_ENVS,
            "--config", small(folder.parent, "mid.yaml"), "--upper-config",
            small(folder.parent, "up.yaml"), "--dir", folder] + CPU + list(extra)


@pytest.fixture(scope="module")
def pipeline(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    folder = tmp / "cuboid"
    proc = run_mapush(pipeline_args(folder), double_env(upstream), cwd=tmp, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"dir": folder, "tmp": tmp, "first": proc}


def stages(folder):
    return {s["name"]: s for s in json.loads((folder / "pipeline.json").read_text())["stages"]}


def test_the_pipeline_runs_the_four_stages(pipeline):
    found = stages(pipeline["dir"])
    assert [s for s in found] == ["mid", "eval-mid", "upper", "eval-upper"]
    assert all(s["state"] == "done" and s["exit"] == 0 for s in found.values())
    evaluated = [json.loads(line) for line in
                 (pipeline["dir"] / "mid" / "eval.jsonl").read_text().splitlines()]
    best = max(evaluated, key=lambda r: (r["success_rate"], r["step"]))
    assert found["eval-mid"]["result"]["best_checkpoint"] == best["checkpoint"]
    upper = json.loads((pipeline["dir"] / "upper" / "config.json").read_text())
    assert upper["command_net"]["path"] == str(
        (Path(best["checkpoint"]) / "module.pt").resolve())
    assert found["eval-upper"]["result"]["task"] == "go1push_upper"
    assert "success_rate" in found["eval-upper"]["result"]


def test_the_pipeline_run_again_redoes_nothing(upstream, pipeline):
    before = stages(pipeline["dir"])
    marks = {p: p.stat().st_mtime for p in pipeline["dir"].rglob("*") if p.is_file()
             and p.name != "pipeline.json"}
    proc = run_mapush(pipeline_args(pipeline["dir"]), double_env(upstream),
                      cwd=pipeline["tmp"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("done, skipped") == 4
    assert stages(pipeline["dir"]) == before
    assert {p: p.stat().st_mtime for p in marks} == marks


def test_the_pipeline_refuses_other_settings_in_its_folder(upstream, pipeline):
    proc = run_mapush(pipeline_args(pipeline["dir"], "--seed", 7), double_env(upstream),
                      cwd=pipeline["tmp"])
    assert "was made with other settings (seed: 1 there, 7 now)" in one_error(proc)
    proc = run_mapush(pipeline_args(pipeline["dir"], "--seed", 7, "--eval-envs", 4),
                      double_env(upstream), cwd=pipeline["tmp"])
    assert "(eval_envs: 8 there, 4 now; seed: 1 there, 7 now)" in one_error(proc)


@pytest.mark.parametrize("obj", ["Tblock", "cylinder"])
def test_the_pipeline_refuses_an_object_the_high_level_does_not_push(upstream, tmp_path, obj):
    """The high level pushes MQE's box whatever the mid level pushed: never a T-block's
    policy on a box in silence."""
    args = pipeline_args(tmp_path / obj)
    args[args.index("cuboid")] = obj
    proc = run_mapush(args, double_env(upstream), cwd=tmp_path)
    error = one_error(proc)
    assert "--object %s: the high level (go1push_upper) pushes" % obj in error
    assert "runs on --object cuboid only" in error
    assert not (tmp_path / obj).exists()


def test_the_pipeline_refuses_an_object_not_under_mapush_root(upstream, tmp_path):
    args = pipeline_args(tmp_path / "sphere")
    args[args.index("cuboid")] = "sphere"
    proc = run_mapush(args, double_env(upstream), cwd=tmp_path)
    assert "--object sphere: not in MAPUSH_ROOT's task/ (found: Tblock, cuboid, cylinder)" in \
        one_error(proc)
    assert not (tmp_path / "sphere").exists()


def ctrl_c_pipeline(upstream, tmp_path, ready, step_sleep, timeout):
    """Start the pipeline in a session of its own, press Ctrl-C (SIGINT to the whole
    process group) once ``ready()`` holds, and return its stderr after it exited 0."""
    folder = tmp_path / "cuboid"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP=step_sleep)
    cmd = [sys.executable, "-m", "mapush"] + [str(a) for a in pipeline_args(folder)]
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not ready(folder):
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return err


def test_an_interrupted_pipeline_resumes_its_stage_from_the_checkpoint(upstream, tmp_path):
    folder = tmp_path / "cuboid"

    def training(folder):
        phases = folder / "upper" / "phases.log"
        return phases.is_file() and "training" in phases.read_text()

    err = ctrl_c_pipeline(upstream, tmp_path, training, "0.01", timeout=300)
    found = stages(folder)
    assert found["mid"]["state"] == "done" and found["upper"]["state"] == "stopped"
    assert found["eval-upper"]["state"] == "pending"
    assert "run the pipeline again to resume" in err
    assert list((folder / "upper" / "checkpoints").iterdir())  # the stop's checkpoint
    again = run_mapush(pipeline_args(folder), double_env(upstream), cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    found = stages(folder)
    assert all(s["state"] == "done" for s in found.values())
    assert again.stderr.count("done, skipped") == 2  # mid and eval-mid
    spec = folder / "specs" / "upper.json"
    assert found["upper"]["command"] == ["mapush", "train", "--spec", str(spec)]
    assert json.loads(spec.read_text())["run_dir"] == str(folder / "upper")
    assert json.loads((folder / "upper" / "config.json").read_text())["resumes"]


def test_a_stage_refused_before_it_starts_is_recorded_failed(upstream, tmp_path):
    """A stage's own refusal (here the mid level's --config with an unknown key) is that
    stage failing, with the command's error line and status."""
    folder = tmp_path / "cuboid"
    args = pipeline_args(folder)
    bad = tmp_path / "bad.yaml"
    bad.write_text("no_such_key: 1\n")
    args[args.index("--config") + 1] = bad
    proc = run_mapush(args, double_env(upstream), cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    found = stages(folder)
    assert found["mid"]["state"] == "failed" and found["mid"]["exit"] == 2
    assert found["eval-mid"]["state"] == "pending"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "no_such_key" in errors[0]
    assert errors[-1].startswith("error: stage mid failed (exit 2)")


def test_an_interrupted_eval_stage_is_stopped_and_done_again(upstream, tmp_path):
    """Ctrl-C while the pipeline evaluates (in its own process, a calculator child per
    checkpoint) stops the stage, kills the child and exits 0; run again, it is evaluated."""
    folder = tmp_path / "cuboid"

    def evaluating(folder):
        return (folder / "pipeline.json").is_file() and \
            stages(folder)["eval-mid"]["state"] == "running"

    err = ctrl_c_pipeline(upstream, tmp_path, evaluating, "0.05", timeout=120)
    found = stages(folder)
    assert found["mid"]["state"] == "done" and found["eval-mid"]["state"] == "stopped"
    assert found["upper"]["state"] == "pending"
    assert "SIGINT: the running stage stops" in err
    again = run_mapush(pipeline_args(folder), double_env(upstream),
                       cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(s["state"] == "done" for s in stages(folder).values())
    assert again.stderr.count("done, skipped") == 1  # mid
