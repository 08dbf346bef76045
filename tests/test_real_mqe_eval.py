"""``mapush eval``, ``reproduce``, ``video``, ``report`` and ``pipeline`` over MAPush's real
MQE, with Isaac Gym stood in (tests/standin), on the CPU: our checkpoints, the authors'
three published ones (their object inferred), the high level's published policy planned
with RRT through the real wrapper's own reset sequence, and the four-stage pipeline.

Over the stand-in's contact the authors' policies push boxes too (the T-block's succeeds in
both envs), so success rates are whatever MQE's calculator counts; what is asserted is what
MQE's own code decides: episodes, time-outs, planning, the keys, and that a success ends an
episode before its time-out. (tests/test_real_mqe_world.py checks success against a scripted
controller whose outcome is counted by hand.)"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import real_env, run_mapush

pytestmark = pytest.mark.real_mqe

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]
NUM_ENVS = 2
METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree",
           "obstacle_collision_degree")


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def mid_episode_s(tree, obj):
    """The object's episode length in seconds, read from its config as MQE reads it."""
    text = (tree / "task" / obj / "config.py").read_text()
    line = next(l for l in text.splitlines() if l.strip().startswith("episode_length_s"))
    return float(line.split("=")[1].split("#")[0])


@pytest.fixture(scope="module")
def ppo_run(real_mqe, tmp_path_factory):
    """A two-checkpoint PPO run of ours on the cuboid."""
    tmp = tmp_path_factory.mktemp("ppo")
    config = tmp / "ppo.yaml"
    config.write_text("episode_length: 10\nppo_epoch: 1\n")
    run = tmp / "run"
    proc = run_mapush(["train", "--algo", "ppo", "--object", "cuboid", "--num-envs", 4,
                       "--steps", 80, "--checkpoint-interval", 40, "--seed", 1,
                       "--run-dir", run, "--config", config] + CPU,
                      real_env(real_mqe), cwd=tmp, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"run": run, "tmp": tmp}


@pytest.mark.parametrize("obj", ["cuboid", "Tblock", "cylinder"])
def test_eval_of_each_published_checkpoint_infers_its_object(real_mqe, tmp_path, obj):
    results = real_mqe["tree"] / "results" / ("10-15-23_%s" % obj)
    proc = run_mapush(["eval", "--checkpoint", results, "--num-envs", NUM_ENVS] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json(proc.stdout)
    assert (result["object"], result["origin"], result["step"]) == (obj, "upstream", 100000000)
    assert result["num_envs"] == NUM_ENVS and set(METRICS) <= set(result)
    # every env ended its first episode, and none lasted longer than the config allows
    assert 0 < result["finished_time"] <= mid_episode_s(real_mqe["tree"], obj) + 1e-6
    assert 0.0 <= result["success_rate"] <= 1.0
    if result["success_rate"] > 0:  # a success ends its episode before the time-out
        assert result["finished_time"] < mid_episode_s(real_mqe["tree"], obj)


def test_eval_of_a_run_of_ours_writes_a_line_per_checkpoint(real_mqe, ppo_run):
    run = ppo_run["run"]
    proc = run_mapush(["eval", "--run", run, "--num-envs", NUM_ENVS] + CPU,
                      real_env(real_mqe), cwd=ppo_run["tmp"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [40, 80]
    # progress within each checkpoint (#81: the pipeline's eval stages sat at 0/1 silently)
    assert "/%d envs done, step " % NUM_ENVS in proc.stderr, proc.stderr[-2000:]
    # nor gym's unmaintained notice nor treevalue's FutureWarnings, child by child (#81)
    assert "unmaintained" not in proc.stderr and "FutureWarning" not in proc.stderr
    assert all(r["object"] == "cuboid" and r["origin"] == "ours" for r in lines)


def test_eval_of_a_harl_checkpoint_over_real_mqe(real_mqe, tmp_path):
    config = tmp_path / "harl.yaml"
    config.write_text(yaml.safe_dump({"train": {"episode_length": 10, "log_interval": 1},
                                      "device": {"torch_threads": 1}}))
    run = tmp_path / "happo"
    proc = run_mapush(["train", "--algo", "happo", "--object", "cylinder", "--num-envs", 4,
                       "--steps", 40, "--seed", 1, "--run-dir", run, "--config", config] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(["eval", "--checkpoint", run, "--num-envs", NUM_ENVS] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json(proc.stdout)
    assert (result["algo"], result["object"], result["step"]) == ("happo", "cylinder", 40)


def test_upper_eval_plans_with_rrt_through_the_real_wrapper(real_mqe, tmp_path):
    """The published high-level policy: MQE's wrapper plans with RRT (patches/mapush/04)
    for every env, and both collision degrees are reported (patches/mapush/05); it
    succeeds."""
    example = real_mqe["tree"] / "resources" / "goals_net" / "example.pt"
    figures = tmp_path / "rrt"
    proc = run_mapush(["eval", "--task", "go1push_upper", "--checkpoint", example,
                       "--num-envs", NUM_ENVS, "--out", figures] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=880)  # pytest's is 900
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json(proc.stdout)
    assert result["task"] == "go1push_upper" and result["object"] == "cuboid"
    assert result["rrt"]["envs"] == NUM_ENVS
    assert result["rrt"]["planned"] + result["rrt"]["failed"] == NUM_ENVS
    assert result["rrt"]["planned"] >= 1
    assert "collision_degree" in result and "obstacle_collision_degree" in result
    assert sorted(p.name for p in figures.glob("*.png")) == \
        ["rrt-env%d.png" % i for i in range(NUM_ENVS)]
    # the upper episode is 160 s (go1_push_upper_config.py:13): a success ends it earlier
    assert 0 < result["finished_time"] <= 160.0 + 1e-6
    # over the stand-in's contact the published hierarchy (its command net pushing, RRT's
    # waypoints) brings the box to the final target: an env that succeeds first is reset
    # alone while the other plays on (the wrapper's per-env reset)
    assert result["success_rate"] > 0 and result["finished_time"] < 160.0


def test_video_of_a_published_checkpoint_through_mqe_camera(real_mqe, tmp_path):
    results = real_mqe["tree"] / "results" / "10-15-23_cuboid"
    out = tmp_path / "videos"
    icd = tmp_path / "nvidia_icd.json"  # the rendering check's file; the stand-in renders
    icd.write_text('{"ICD": {"library_path": "libGLX_nvidia.so.0"}}')
    proc = run_mapush(["eval", "--checkpoint", results, "--video", "--out", out] + CPU,
                      real_env(real_mqe, VK_ICD_FILENAMES=icd, MAPUSH_WHERE="host"),
                      cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # MQE's own recording prints ("Successfully store the video of last episode" at every
    # reset of env 0, a film or not) are not ours to say: only --verbose shows them (#81)
    assert "Successfully store the video" not in proc.stdout + proc.stderr
    assert "recording" not in proc.stdout
    videos = sorted(out.glob("*.mp4"))
    assert len(videos) == 1
    assert videos[0].name.endswith(("-success.mp4", "-fail.mp4")), videos[0].name
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(videos[0]))
    meta = next(reader)
    frames = sum(1 for _ in reader)
    # MQE's recording camera: recording_width_px x recording_height_px (go1_config.py)
    assert meta["size"][0] > 0 and frames > 10


def test_report_of_a_run_trained_over_real_mqe(real_mqe, ppo_run):
    run = ppo_run["run"]
    proc = run_mapush(["report", run], real_env(real_mqe), cwd=ppo_run["tmp"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (run / "report" / "index.html").read_text()
    assert "cuboid" in page and list((run / "report").glob("*.png"))
    # how MQE's step ran (step.json, mapush/envs/step_record.py), in the Run table
    line = json.loads((run / "step.json").read_text())["line"]
    assert "<td>MQE&#39;s step</td><td>%s</td>" % line.replace("'", "&#39;") in page


def test_reproduce_evaluates_the_authors_checkpoints_as_eval_does(real_mqe, tmp_path):
    """reproduce's row of a checkpoint is what `mapush eval` gives it with the same envs and
    seed: the two count alike (#79: 0.281 in eval against 0.527 in reproduce was 32 envs on
    the CPU against 300 on a GPU; benchmarks/results/oracle-h200-20261202.jsonl)."""
    out = tmp_path / "reproduce"
    proc = run_mapush(["reproduce", "--objects", "cylinder", "--num-envs", NUM_ENVS,
                       "--out", out] + CPU, real_env(real_mqe), cwd=tmp_path, timeout=900)
    # exit 1: our figures (over the stand-in's physics) differ from theirs, flagged
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    table = json.loads((out / "table.json").read_text())
    rows = [(r["object"], r["step"]) for r in table["rows"]]
    assert rows == [("cylinder", s) for s in (80000000, 90000000, 100000000)]
    assert all(0.0 <= r["ours"]["success_rate"] <= 1.0 for r in table["rows"])
    assert (out / "table.md").is_file()
    results = real_mqe["tree"] / "results" / "10-15-23_cylinder"
    proc = run_mapush(["eval", "--checkpoint", results, "--num-envs", NUM_ENVS] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    alone = last_json(proc.stdout)
    for key in ("success_rate", "finished_time", "collaboration_degree"):
        assert alone[key] == pytest.approx(table["rows"][-1]["ours"][key], abs=1e-9), key


# The authors' 100M cuboid policy over the stand-in, seed 0, on the CPU: 0.510 of 300 envs on
# an H200 host's CPU (torch 2.11) and 0.477 of 128 here (torch 2.13): about 0.49 of 428
# (0.578 of 64 in the image, torch 1.13)
# (benchmarks/results/oracle-h200-20261202.jsonl). ORACLE_ENVS envs have a binomial sd of
# sqrt(0.49 x 0.51 / 64) = 0.062, so a 3-sigma drop (to 0.30) fails the floor.
ORACLE_ENVS = 64
ORACLE_FLOOR = 0.49 - 3 * (0.49 * 0.51 / ORACLE_ENVS) ** 0.5


def test_the_authors_policy_is_an_oracle_100m_over_10m_over_untrained(real_mqe, ppo_run,
                                                                       tmp_path):
    """#79 item 2: the authors' 100M cuboid checkpoint succeeds above the floor, their 10M one
    far less, and one of ours after a single update of 40 env steps never: the world, MQE's
    calculator and our loader order the policies as their training did."""
    results = real_mqe["tree"] / "results" / "10-15-23_cuboid" / "checkpoints"
    rates = {}
    for name, checkpoint in (("100M", results / "rl_model_100000000_steps"),
                             ("10M", results / "rl_model_10000000_steps"),
                             ("untrained", ppo_run["run"] / "checkpoints" / "rl_model_40_steps")):
        proc = run_mapush(["eval", "--checkpoint", checkpoint, "--num-envs", ORACLE_ENVS,
                           "--seed", 0] + CPU, real_env(real_mqe), cwd=tmp_path, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rates[name] = last_json(proc.stdout)["success_rate"]
    print("oracle (%d envs, seed 0): %s; floor %.3f" % (ORACLE_ENVS, rates, ORACLE_FLOOR))
    assert rates["100M"] >= ORACLE_FLOOR, rates
    assert rates["100M"] - rates["10M"] >= 3 * (0.25 / ORACLE_ENVS) ** 0.5, rates
    # 100M > 10M > untrained = 0, as #79 asks: 2 of 64 for the 10M one in the image (torch
    # 1.13, MuJoCo 3.2.3), a fixed-seed outcome (at its rate of about 0.03, 64 envs give none
    # 14% of the time: a new stack may have to take more envs here)
    assert rates["10M"] > rates["untrained"] == 0.0, rates


def test_pipeline_runs_its_four_stages_over_real_mqe(real_mqe, tmp_path):
    mid = tmp_path / "mid.yaml"
    mid.write_text("episode_length: 10\nppo_epoch: 1\n")
    upper = tmp_path / "up.yaml"
    upper.write_text("episode_length: 5\nppo_epoch: 1\n")
    folder = tmp_path / "pipe"
    # episodes of 2 s and 4 s (MQE's are 20 s and 160 s), which each evaluation keeps
    proc = run_mapush(["pipeline", "--object", "cuboid", "--num-envs", 4, "--upper-num-envs",
                       NUM_ENVS, "--mid-steps", 40, "--upper-steps", 10, "--eval-envs",
                       NUM_ENVS, "--config", mid, "--upper-config", upper, "--dir", folder,
                       "--set", "task.env.episode_length_s=2", "--upper-set",
                       "task.env.episode_length_s=4", "--upper-set", "clip_param=0.3"]
                      + CPU, real_env(real_mqe), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    stages = {s["name"]: s for s in
              json.loads((folder / "pipeline.json").read_text())["stages"]}
    assert list(stages) == ["mid", "eval-mid", "upper", "eval-upper"]
    assert all(s["state"] == "done" and s["exit"] == 0 for s in stages.values())
    assert stages["eval-upper"]["result"]["task"] == "go1push_upper"
    for level, seconds in (("mid", 2), ("upper", 4)):
        record = json.loads((folder / level / "config.json").read_text())
        assert record["spec"]["task_sets"] == {"env.episode_length_s": seconds}
        evaluated = [json.loads(line) for line in (folder / level / "eval.jsonl").read_text()
                     .splitlines()]
        assert evaluated and all(r["finished_time"] <= seconds + 1e-6 for r in evaluated)
    assert json.loads((folder / "upper" / "openrl_config.json").read_text())["clip_param"] == 0.3
