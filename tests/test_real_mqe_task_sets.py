"""``mapush train --set task.KEY=VALUE`` and ``--print-config`` over MAPush's real MQE and the
Isaac Gym stand-in (#51 item 5): the task config a run's env gets, printed before anything
starts; a reward scale and the episode length set from the command line reach the env and the
run's record; a setting the config lacks, or of another kind, is one line before any folder."""
import json

import pytest

from tests.conftest import one_error, real_env, run_mapush
from tests.test_openrl_train import scalars

pytestmark = pytest.mark.real_mqe

NUM_ENVS = 4
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def printed(real, tmp, *extra):
    proc = run_mapush(["train", "--object", "cuboid", "--num-envs", NUM_ENVS, "--print-config"]
                      + CPU + list(extra), real_env(real), cwd=tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def flat(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, prefix + key + "."))
        else:
            out[prefix + key] = value
    return out


def test_print_config_shows_what_the_sets_change_and_starts_nothing(real_mqe, tmp_path):
    plain = printed(real_mqe, tmp_path)
    changed = printed(real_mqe, tmp_path, "--set", "task.env.episode_length_s=7",
                      "--set", "task.rewards.scales.push_reward_scale=0.5", "--set", "lr=0.001")
    assert list(tmp_path.iterdir()) == [], "--print-config wrote something"
    # the task config is MQE's: the object's own values where nothing is set
    assert plain["task_config"]["env"]["num_agents"] == 2
    assert plain["task_config"]["rewards"]["scales"]["push_reward_scale"] == 0.0015
    assert plain["task_config"]["env"]["num_envs"] == NUM_ENVS
    before, after = flat(plain["task_config"]), flat(changed["task_config"])
    assert {k for k in before if before[k] != after.get(k)} == {
        "env.episode_length_s", "rewards.scales.push_reward_scale"}
    assert after["env.episode_length_s"] == 7
    assert after["rewards.scales.push_reward_scale"] == 0.5
    assert changed["spec"]["task_sets"] == {"env.episode_length_s": 7,
                                            "rewards.scales.push_reward_scale": 0.5}
    assert plain["spec"]["task_sets"] is None
    assert plain["trainer_config"]["lr"] != 0.001 and changed["trainer_config"]["lr"] == 0.001
    # the high level prints MQE's installed upper config
    upper = printed(real_mqe, tmp_path, "--task", "go1push_upper")
    assert upper["task_config"]["env"]["num_obs"] == 2
    assert upper["spec"]["task"] == "go1push_upper"


@pytest.mark.parametrize("item, says", [
    ("task.env.episode_lenght_s=7", "no such setting (nearest: task.env.episode_length_s); mapush train --print-config"),
    # #77: values of MQE's kind but not its sign or finiteness
    ("task.sim.dt=0", "must be a finite number > 0 (MQE's default: 0.005)"),
    ("task.env.episode_length_s=-5", "must be a finite number > 0"),
    ("task.env.episode_length_s=.inf", "must be a finite number > 0"),
    ("task.env.episode_length_s=.nan", "must be a finite number > 0"),
    ("task.env.episode_length_s=" + "9" * 100000, "episode_length_s"),
    ("task.rewards.scales.push_reward_scale=-1", "must be a finite number > 0 or 0"),
    ("task.rewards.scales.push_reward_scale=high", "that setting is a float, not a str"),
    ("task.env.num_envs=3", "--set sets task.env.num_envs, which mapush decides from --num-envs"),
    # #77: MQE torch.jit.load's DIR/body_latest.jit: a user's TorchScript would run
    ("task.control.locomotion_policy_dir=/tmp/x", "which mapush decides from the image's walk-these-ways"),
    ("task.control.command_network_path=/tmp/x.pt", "which mapush decides from --command-net"),
    ("task.env=3", "MQE's task config has no such setting"),
])
def test_a_bad_task_set_is_one_line_before_any_folder(real_mqe, tmp_path, item, says):
    run = tmp_path / "run"
    proc = run_mapush(["train", "--object", "cuboid", "--num-envs", NUM_ENVS, "--steps", 800,
                       "--run-dir", run, "--no-preflight", "--set", item] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=300)
    line = one_error(proc)
    assert says in line and item.partition("=")[0] in line, line
    assert not run.exists()


def test_set_task_without_a_value_is_refused_by_the_parser(tmp_path):
    proc = run_mapush(["train", "--set", "task.env.episode_length_s", "--run-dir",
                       tmp_path / "r"], None, cwd=tmp_path)
    assert "is not task.KEY=VALUE" in one_error(proc)


def _train(real, tmp, name, *sets):
    run = tmp / name
    proc = run_mapush(["train", "--object", "cuboid", "--num-envs", NUM_ENVS, "--steps",
                       NUM_ENVS * 20, "--seed", 3, "--run-dir", run, "--config", tmp / "ppo.yaml"]
                      + CPU + [a for s in sets for a in ("--set", s)], real_env(real), cwd=tmp,
                      timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run, scalars(run)


def test_a_reward_scale_and_the_episode_length_reach_the_run_and_its_record(real_mqe, tmp_path):
    (tmp_path / "ppo.yaml").write_text("episode_length: 20\nppo_epoch: 1\n")
    plain_run, plain = _train(real_mqe, tmp_path, "plain")
    scaled_run, scaled = _train(real_mqe, tmp_path, "scaled",
                                "task.rewards.scales.target_reward_scale=0.0065")
    short_run, _ = _train(real_mqe, tmp_path, "short", "task.env.episode_length_s=0.1")
    record = lambda r: json.loads((r / "config.json").read_text())  # noqa: E731
    assert record(scaled_run)["spec"]["task_sets"] == {
        "rewards.scales.target_reward_scale": 0.0065}
    assert record(plain_run)["spec"]["task_sets"] is None
    # #81: the values trained with, beside task/config.py (which still holds MQE's 0.00325)
    applied = json.loads((scaled_run / "task" / "applied.json").read_text())
    assert applied["rewards"]["scales"]["target_reward_scale"] == 0.0065
    assert not (plain_run / "task" / "applied.json").exists()
    # ...and in mapush runs (a short form, and the world it ran in) and in the report
    listed = run_mapush(["runs", tmp_path], real_env(real_mqe), cwd=tmp_path)
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert rows["scaled"].endswith(" stand-in  episode_length=20 ppo_epoch=1 "
                                   "task.rewards.scales.target_..."), rows  # (cut at 60)
    assert rows["plain"].endswith(" stand-in  episode_length=20 ppo_epoch=1"), rows
    page = run_mapush(["report", scaled_run], real_env(real_mqe), cwd=tmp_path)
    assert page.returncode == 0, page.stderr[-3000:]
    html = (scaled_run / "report" / "index.html").read_text()
    assert "task.rewards.scales.target_reward_scale=0.0065" in html and "ppo_epoch=1" in html
    assert "mapush train --object cuboid --num-envs" in html  # the command, as recorded
    # TensorBoard's text tab says which Isaac Gym the numbers come from
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(scaled_run / "logs"), size_guidance={"tensors": 0})
    events.Reload()
    text = events.Tensors("mapush/isaacgym/text_summary")[0].tensor_proto.string_val[0]
    assert b"stand-in" in text and b"no number of this run is a result of MAPush" in text
    # the same seed, so the same actions over the first rollout: the term doubles exactly,
    # the others stay
    first = lambda tags, tag: tags[tag][0][1]  # noqa: E731
    assert first(plain, "reward/distance_to_target_reward") != 0
    assert first(scaled, "reward/distance_to_target_reward") == pytest.approx(
        2 * first(plain, "reward/distance_to_target_reward"), rel=1e-6)
    assert first(scaled, "reward/approach_to_box_reward") == first(
        plain, "reward/approach_to_box_reward")
    # 0.1 s episodes (5 steps of 0.02 s) end several times in each env within the 20 steps of the
    # rollout; the object's 20 s ones only by an exception
    episodes = lambda r: json.loads(sorted((r / "checkpoints").glob("*/meta.json"))[-1]  # noqa
                                    .read_text())["episodes"]
    assert episodes(short_run) >= episodes(plain_run) + 2 * NUM_ENVS, (
        episodes(short_run), episodes(plain_run))
    # evaluating the run builds its env with them: every first episode ends by 0.1 s
    proc = run_mapush(["eval", "--checkpoint", short_run, "--num-envs", NUM_ENVS] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["finished_time"] <= 0.1 + 1e-6, proc.stdout
    # a resume keeps them, and refuses new ones
    proc = run_mapush(["train", "--resume", short_run, "--steps", NUM_ENVS * 40,
                       "--no-preflight"] + CPU, real_env(real_mqe), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = record(short_run)["resumes"][-1]["spec"]["task_sets"]
    assert resumed == record(short_run)["spec"]["task_sets"] == {"env.episode_length_s": 0.1}
    proc = run_mapush(["train", "--resume", short_run, "--set", "task.env.episode_length_s=9"],
                      real_env(real_mqe), cwd=tmp_path)
    assert "--resume continues the run as recorded" in one_error(proc)
