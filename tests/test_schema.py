"""One schema for every input (#36, mapush/schema.yaml): the trainers' configs, the command
line, --spec and config.json on resume are checked for type and range before a run folder
exists; each violation is one ``error:`` line naming the key, the value and the range."""
import hashlib
import json
import re

import pytest
import yaml

from mapush import schema
from mapush.spec import RunSpec
from mapush.registry import shipped_config
from tests.conftest import double_env, one_error, run_mapush

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]

# (algorithm, --config, what the line must say): the cases of #36 item 7, for both trainers
CONFIG_CASES = [
    ("ppo", {"episode_length": 0}, "episode_length 0: input should be greater than or equal to 1"),
    ("ppo", {"episode_length": -200}, "episode_length -200: input should be greater than or"),
    ("ppo", {"num_mini_batch": 0}, "num_mini_batch 0: input should be greater than or equal"),
    ("ppo", {"lr": -0.001}, "lr -0.001: input should be greater than or equal to 0"),
    ("ppo", {"gamma": 1.5}, "gamma 1.5: input should be less than or equal to 1"),
    ("ppo", {"mqe_fast_step": "no"}, "mqe_fast_step 'no': input should be a valid boolean"),
    ("happo", {"train": {"episode_length": 0}},
     "train.episode_length 0: input should be greater than or equal to 1"),
    ("happo", {"train": {"episode_length": "abc"}},
     "train.episode_length 'abc': input should be a valid integer"),
    ("mappo", {"algo": {"critic_num_mini_batch": 0}},
     "algo.critic_num_mini_batch 0: input should be greater than or equal to 1"),
    ("happo", {"model": {"lr": "fast"}}, "model.lr 'fast': input should be a valid number"),
    ("happo", {"model": {"hidden_sizes": "big"}},
     "model.hidden_sizes 'big': input should be a valid list"),
    ("happo", {"model": {"hidden_sizes": [64, 0]}},
     "model.hidden_sizes.1 0: input should be greater than or equal to 1"),
    ("hatrpo", {"algo": {"kl_threshold": -0.01}}, "algo.kl_threshold -0.01: input should be"),
    ("happo", {"train": {"use_linear_lr_decay": "yes"}},
     "train.use_linear_lr_decay 'yes': input should be a valid boolean"),
    ("happo", {"env": {"team_reward": "max"}}, "env.team_reward 'max': input should be 'mean'"),
    ("happo", {"train": 5}, "'train' is a section; give it as a mapping"),
]


@pytest.mark.parametrize("algo,override,needle", CONFIG_CASES,
                         ids=["%s-%s" % (c[0], c[2].split(":")[0]) for c in CONFIG_CASES])
def test_a_config_value_out_of_its_range_is_one_line_before_the_run_folder(
        upstream, tmp_path, algo, override, needle):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(override))
    run_dir = tmp_path / "run"
    error = one_error(run_mapush(["train", "--algo", algo, "--num-envs", 4, "--steps", 100000,
                                  "--run-dir", run_dir, "--config", config] + CPU,
                                 env=double_env(upstream), cwd=tmp_path))
    assert error.startswith("error: --config %s: " % config) and needle in error, error
    assert not run_dir.exists()


def test_the_command_line_meets_the_same_schema(tmp_path):
    """argparse takes any positive --num-envs; the schema bounds it (#36: 100,000,000 envs
    took 11 GB on the CPU before failing, and left a folder)."""
    error = one_error(run_mapush(["train", "--num-envs", "100000000"] + CPU, env=double_env(),
                                 cwd=tmp_path))
    assert error == ("error: mapush train: --num-envs 100000000: input should be less than or "
                     "equal to 65536"), error
    assert not (tmp_path / "runs").exists()


@pytest.mark.faults
@pytest.mark.parametrize("field,value,needle", [
    ("seed", "abc", "seed 'abc': input should be a valid integer"),
    ("num_envs", 0, "num_envs 0: input should be greater than or equal to 1"),
    ("record_video", "no", "record_video 'no': input should be a valid boolean"),
    ("steps", None, "steps None: input should be a valid integer"),
])
def test_a_resume_of_a_record_with_a_wrong_type_is_one_line_and_changes_nothing(
        tmp_path, field, value, needle):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=1000,
                   seed=1, run_dir=str(run_dir), sim_device="cpu", rl_device="cpu").to_dict()
    record = run_dir / "config.json"
    record.write_text(json.dumps({"spec": dict(spec, **{field: value})}))
    before = hashlib.sha256(record.read_bytes()).hexdigest()
    error = one_error(run_mapush(["train", "--resume", run_dir], env=double_env(),
                                 cwd=tmp_path))
    assert "the run's config.json is damaged" in error and needle in error, error
    assert hashlib.sha256(record.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json"]


def _keys(config, prefix=""):
    for key, value in config.items():
        yield prefix + key
        if isinstance(value, dict):
            yield from _keys(value, prefix + key + ".")


@pytest.mark.parametrize("algo", ["happo", "mappo", "hatrpo"])
def test_each_shipped_harl_config_has_harls_keys_and_update_at_the_pin(upstream, algo):
    """mappo.yaml and hatrpo.yaml are happo.yaml's changes (based_on, remove): resolved, each
    has exactly the model and algo keys of HARL's own config of its algorithm at the pin, and
    its update's switches (one shared actor, the order, the trust region)."""
    harl = yaml.safe_load((upstream["site"] / "harl" / "configs" / "algos_cfgs" /
                           ("%s.yaml" % algo)).read_text())
    ours = shipped_config(algo)
    for section in ("model", "algo"):
        assert set(ours[section]) == set(harl[section]), section
    for key in ("share_param", "fixed_order", "kl_threshold", "ls_step", "accept_ratio"):
        assert ours["algo"].get(key) == harl["algo"].get(key), key


def test_every_key_of_the_schema_is_a_key_of_its_input(upstream, monkeypatch):
    """A misspelt key would check nothing: each is a RunSpec field or train option, an option
    of OpenRL's own config parser at the pin, or a key of a shipped HARL config."""
    assert "run" not in schema.SCHEMA  # a run's options: RunSpec's own fields
    harl = set()
    for algo in ("happo", "mappo", "hatrpo"):
        harl |= set(_keys(shipped_config(algo)))
    assert set(schema.SCHEMA["harl"]) <= harl, set(schema.SCHEMA["harl"]) - harl
    monkeypatch.syspath_prepend(str(upstream["site"]))
    from openrl.configs.config import create_config_parser

    options = {a.dest for a in create_config_parser()._actions} | {
        "mqe_fast_step", "device_rollout", "act_graph"}  # ours
    assert set(schema.SCHEMA["openrl"]) <= options, set(schema.SCHEMA["openrl"]) - options
    # and the shipped configs meet it
    for algo in ("happo", "mappo", "hatrpo"):
        schema.check("harl", schema.flat(shipped_config(algo)), algo)


@pytest.mark.parametrize("command,name,value,needle", [
    (["train"], "MAPUSH_STOP_GRACE_S", "abc", "'abc': input should be a valid number"),
    (["train"], "MAPUSH_STOP_GRACE_S", "0", "'0': input should be greater than 0"),
    (["train"], "MAPUSH_CONTACT_PAIRS_MULTIPLIER", "nan", "'nan': input should be a finite"),
    (["eval", "--checkpoint", "x"], "MAPUSH_RRT_FIGURES", "-1",
     "'-1': input should be greater than or equal to 0"),
])
def test_a_bad_mapush_variable_is_one_line_before_anything(tmp_path, command, name, value,
                                                           needle):
    """The MAPUSH_* numbers meet the schema too: MAPUSH_STOP_GRACE_S=abc used to fall back
    to 50 s unsaid, and MAPUSH_RRT_FIGURES reached MQE's planner as int('-1')."""
    argv = command + (["--run-dir", tmp_path / "run"] if command == ["train"] else []) + CPU
    error = one_error(run_mapush(argv, env=double_env(**{name: value}), cwd=tmp_path))
    assert error.startswith("error: environment: %s %s" % (name, needle)), error
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_set_overrides_keys_of_either_trainer_and_the_run_records_them(upstream, tmp_path):
    """#38 item 12: ``--set KEY=VALUE`` (repeatable) over --config, dotted into sections; the
    values reach the trainer's resolved config and the run's overrides.yaml, a bad one is
    refused as a --config key would be, and --resume refuses a new --set."""
    config = tmp_path / "base.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 3\n")
    ppo = tmp_path / "ppo"
    proc = run_mapush(["train", "--num-envs", 4, "--steps", 100, "--run-dir", ppo, "--config",
                       config, "--set", "ppo.lr=2e-4", "--set", "ppo_epoch=1"] + CPU,
                      env=double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = json.loads((ppo / "openrl_config.json").read_text())
    assert (resolved["lr"], resolved["ppo_epoch"], resolved["episode_length"]) == (2e-4, 1, 25)
    assert yaml.safe_load((ppo / "overrides.yaml").read_text()) == {
        "episode_length": 25, "ppo_epoch": 1, "lr": 2e-4}
    happo = tmp_path / "happo"
    proc = run_mapush(["train", "--algo", "happo", "--num-envs", 4, "--steps", 80, "--run-dir",
                       happo, "--set", "train.episode_length=20", "--set",
                       "model.hidden_sizes=[16, 16]", "--set", "env.state_type=FP"] + CPU,
                      env=double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    harl = json.loads((happo / "harl_config.json").read_text())
    assert harl["algo_args"]["model"]["hidden_sizes"] == [16, 16]
    assert harl["env_args"]["state_type"] == "FP"
    for argv, needle in ((["--set", "lr=-1"], "--set/--config: lr -1: input should be "
                                               "greater than or equal to 0"),
                         (["--set", "lr"], "--set 'lr' is not KEY=VALUE"),
                         (["--algo", "happo", "--set", "model.lr.x=1"],
                          "model.lr {'x': 1}: input should be a valid number"),
                         (["--config", config, "--set", "ppo_epoch.x=1"],
                          "--set 'ppo_epoch.x=1' is not KEY=VALUE")):
        error = one_error(run_mapush(["train", "--num-envs", 4, "--run-dir", tmp_path / "bad"]
                                     + argv + CPU, env=double_env(upstream), cwd=tmp_path))
        assert needle in error, error
        assert not (tmp_path / "bad").exists()
    before = (ppo / "config.json").read_text()
    error = one_error(run_mapush(["train", "--resume", ppo, "--set", "lr=1e-3"] + CPU,
                                 env=double_env(upstream), cwd=tmp_path))
    assert error.startswith("error: --set: the run was recorded with"), error
    assert (ppo / "config.json").read_text() == before


@pytest.mark.parametrize("algo,item,needle", [
    ("ppo", "seed=3", "--set/--config sets seed, which mapush decides from --seed"),
    ("ppo", "callbacks=[]", "sets callbacks, which mapush decides from --checkpoint-interval"),
    ("ppo", "num_agents=3", "sets num_agents, which mapush decides from --object"),
    ("ppo", 'episode_length="200"', "episode_length '200': input should be a valid integer"),
    ("ppo", "gamma=nan", "gamma 'nan': input should be a valid number"),
    ("ppo", "mqe_fast_step=\"no\"", "mqe_fast_step 'no': input should be a valid boolean"),
    ("ppo", 'use_linear_lr_decay="yes"', "use_linear_lr_decay 'yes': input should be a valid "
                                         "boolean"),
    ("happo", "seed.seed=5", "sets seed.seed, which mapush decides from --seed"),
    ("happo", "train.num_env_steps=5", "sets train.num_env_steps, which mapush decides from "
                                       "--steps"),
    ("happo", "train.n_rollout_threads=7", "decides from --num-envs"),
    ("happo", 'train.episode_length="20"', "train.episode_length '20': input should be a "
                                           "valid integer"),
    ("happo", "algo.gamma=.inf", "algo.gamma inf: input should be a finite number"),
])
def test_set_and_config_are_checked_strictly(upstream, tmp_path, algo, item, needle):
    """#50 item 3: a key mapush sets itself is refused with the option that sets it; a
    number must be a finite number and a string is neither a number nor a boolean, as
    docs/cli.md says; one line, exit 2, nothing created."""
    proc = run_mapush(["train", "--algo", algo, "--num-envs", 4, "--steps", 1000, "--run-dir",
                       tmp_path / "run", "--set", item] + CPU, env=double_env(upstream),
                      cwd=tmp_path)
    error = one_error(proc)
    assert proc.returncode == 2 and needle in error, error
    assert "mapush-set-" not in error  # the --set file is named as what it is
    assert not (tmp_path / "run").exists()


def test_the_help_texts_set_examples_are_valid(upstream, tmp_path):
    """#51 item 4: --help's own --set example (model.hidden_sizes=[64,64]) was refused for the
    default PPO. Each example of the help text, for the trainer it names, passes the config
    checks (the run then stops at --steps 1, less than one rollout: nothing is created)."""
    from mapush.cli import OPTIONS

    text = OPTIONS["train"]["options"]["--set"]["help"]
    found = re.search(r"PPO (.*?); HARL (.*?);", text)
    assert found, text
    for algo, examples in (("ppo", found.group(1)), ("happo", found.group(2))):
        sets = [part.strip() for part in re.split(r",\s(?=[\w.]+=)", examples)]
        assert len(sets) >= 2, sets
        argv = ["train", "--algo", algo, "--steps", 1, "--run-dir", tmp_path / "run"] + CPU
        for item in sets:
            argv += ["--set", item]
        error = one_error(run_mapush(argv, env=double_env(upstream), cwd=tmp_path))
        assert "is less than one rollout" in error, (algo, sets, error)
    assert not (tmp_path / "run").exists()


def test_a_set_value_that_is_neither_json_nor_yaml_is_one_line(tmp_path):
    error = one_error(run_mapush(["train", "--set", "lr=[1,", "--run-dir", tmp_path / "run"]
                                 + CPU, env=double_env(), cwd=tmp_path))
    assert error.startswith("error: --set 'lr=[1,': its value is neither JSON nor YAML"), error


@pytest.mark.parametrize("verbose", ["", "1"])
def test_gyms_notice_is_said_only_with_verbose(verbose):
    """#81: gym's unmaintained notice (printed at its import, in every child of make try) is
    not ours to say: schema.quiet_imports, which the CLI and each child call, hides it unless
    --verbose (MAPUSH_VERBOSE)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("gym_notices")
    env = dict(os.environ, MAPUSH_VERBOSE=verbose)
    proc = subprocess.run([sys.executable, "-c", "from mapush import schema\n"
                           "schema.quiet_imports()\nimport gym\n"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ("unmaintained" in proc.stderr) == bool(verbose), proc.stderr[-2000:]
