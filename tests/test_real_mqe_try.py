"""``make try`` (#51 item 2): the whole method on a CPU over the Isaac Gym stand-in, each run
and report labelled as such; ``tests/standin/try.py`` run as ``make try`` runs it."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import MAPUSH_SRC, NO_SRC, REPO

pytestmark = pytest.mark.real_mqe
TRY = REPO / "tests" / "standin" / "try.py"
BANNER = "No number on this page is a result of MAPush."
# the tour's mid level: the learning test's recipe, with the authors' reward scales
# (results/10-15-23_cuboid/task/config.py), as the run's spec records them
MID_SETS = {"env.episode_length_s": 5, "goal.random_goal_distance_from_init": [1.2, 1.6],
            "rewards.expanded_ocb_reward": True, "rewards.scales.target_reward_scale": 65,
            "rewards.scales.approach_reward_scale": 15,
            "rewards.scales.collision_punishment_scale": -50,
            "rewards.scales.push_reward_scale": 30, "rewards.scales.ocb_reward_scale": 80,
            "rewards.scales.reach_target_reward_scale": 200000,
            "rewards.scales.exception_punishment_scale": -100000}


def make_try(tmp, out, *extra, src=MAPUSH_SRC, timeout=880):
    env = dict(os.environ, MAPUSH_SRC=src or "")
    return subprocess.run([sys.executable, str(TRY), "--dir", str(out), "--work", str(tmp / "w"),
                           "--no-open"] + list(extra), env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_make_try_runs_the_method_over_the_stand_in_and_says_so_everywhere(tmp_path):
    if not MAPUSH_SRC:
        pytest.skip(NO_SRC)
    out = tmp_path / "try"
    # 12 of the tour's 40 mid updates (its default, below): 40 took past 10 minutes in the
    # image beside another test; the curve's point an update is the same
    proc = make_try(tmp_path, out, "--envs", "2", "--mid-updates", "12")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.count("no number it prints is a result of MAPush") == 2
    stages = {s["name"]: s for s in json.loads((out / "pipeline.json").read_text())["stages"]}
    assert [s["state"] for s in stages.values()] == ["done"] * 4
    assert stages["eval-upper"]["result"]["task"] == "go1push_upper"
    assert stages["eval-upper"]["result"]["rrt"]["planned"] == 2  # the high level planned
    for level in ("mid", "upper"):
        record = json.loads((out / level / "config.json").read_text())
        assert record["provenance"]["versions"]["isaacgym"] == "0+stand-in"
        assert record["spec"]["task_sets"] == (MID_SETS if level == "mid" else
                                               {"env.episode_length_s": 30})
        page = (out / level / "report" / "index.html").read_text()
        assert page.count(BANNER) == 1 and "class=\"standin\"" in page
    assert str((out / "mid" / "report" / "index.html").resolve()) in proc.stderr
    # the mid level's curve (#80 item 2): a point an update; make try's default is 40
    from tests.test_openrl_train import scalars
    assert len(scalars(out / "mid")["reward/push_reward"]) == 12
    usage = subprocess.run([sys.executable, str(TRY), "--help"], capture_output=True,
                           text=True).stdout
    assert "a point each on its curve (default: 40)" in " ".join(usage.split())
    # again: the pipeline's record says every stage is done, and nothing is trained again
    again = make_try(tmp_path, out, "--envs", "2", "--mid-updates", "12")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count(": done, skipped") == 4


def test_make_try_refuses_a_folder_it_did_not_make_and_a_missing_tree(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    proc = make_try(tmp_path, foreign, src=MAPUSH_SRC or str(tmp_path))
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert ("holds no make try of before" in errors[0] if MAPUSH_SRC
            else "no MAPush tree at the pin" in errors[0])
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    proc = make_try(tmp_path, tmp_path / "new", src=str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "error: no MAPush tree at the pin" in proc.stderr
    assert not (tmp_path / "new").exists() and not (tmp_path / "w").exists()


def test_the_stand_in_page_banner_is_only_for_stand_in_runs():
    from mapush.report import render

    kwargs = dict(title="t", panels=[], evals=[], eval_head=[], eval_command="", videos=[],
                  video_dir="", video_command="", exports=[], export_dir="", export_command="")
    real = render(summary=[["Isaac Gym", "1.0rc4"]], **kwargs)
    stood_in = render(summary=[["Isaac Gym", "0+stand-in (pinned: 1.0rc4)"]], **kwargs)
    assert BANNER not in real and stood_in.count(BANNER) == 1


def test_make_try_cmd_runs_a_users_command_over_the_kept_site(tmp_path):
    """#81 item 1: make try CMD="mapush ..." runs that command over real MQE and the stand-in
    on the CPU, its variant recorded; the patched OpenRL/HARL is built once and kept (a
    second call reuses it), and the command is labelled as the tour is."""
    if not MAPUSH_SRC:
        pytest.skip(NO_SRC)
    config = tmp_path / "small.yaml"
    config.write_text("episode_length: 20\n")
    run = tmp_path / "run"
    cmd = ("mapush train --set task.env.episode_length_s=5 --num-envs 2 --steps 40 --config "
           "%s --run-dir %s" % (config, run))
    proc = make_try(tmp_path, tmp_path / "unused", "--cmd", cmd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "patching OpenRL and HARL" in proc.stderr
    assert proc.stderr.count("no number it prints is a result of MAPush") == 2
    record = json.loads((run / "config.json").read_text())
    assert record["spec"]["task_sets"] == {"env.episode_length_s": 5}
    assert record["spec"]["sim_device"] == "cpu"  # added: make try runs on the CPU
    assert record["provenance"]["versions"]["isaacgym"] == "0+stand-in"
    again = make_try(tmp_path, tmp_path / "unused", "--cmd", "mapush runs %s" % tmp_path)
    assert again.returncode == 0 and "patching OpenRL and HARL" not in again.stderr
    assert "run " in again.stdout and "1 run(s)" in again.stdout, again.stdout
    bad = make_try(tmp_path, tmp_path / "unused", "--cmd", "python -c 'print(1)'")
    assert bad.returncode == 2 and "give a mapush command" in bad.stderr
