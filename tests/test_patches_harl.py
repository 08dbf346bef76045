"""patches/harl on HARL's real upstream files (from the harl-aht wheel, hash-verified).

The checks run in a subprocess over the MQE double: its stand-in ``isaacgym`` must be
imported before torch, as the real one demands.
"""
import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import double_env
from tests.upstream import REPO, extract_harl, pinned_hashes, sha256

SCRIPT = textwrap.dedent(r'''
    import importlib.util, json, os, sys
    from mapush.sim import import_isaacgym
    import_isaacgym()
    import yaml
    import harl
    import harl.envs as harl_envs
    import harl.utils.configs_tools as configs_tools
    import harl.utils.envs_tools as envs_tools
    from harl.runners import RUNNER_REGISTRY
    from mapush.envs.harl_env import MAPushHARLEnv
    from mapush.envs.harl_logger import MAPushLogger

    out = {"harl_file": harl.__file__}
    env_args = {"task": "go1push_mid", "object": "cuboid", "sim_device": "cpu",
                "rl_device": "cpu"}
    envs = envs_tools.make_train_env("mapush", 3, 4, dict(env_args))
    out["train_env_is_ours"] = type(envs) is MAPushHARLEnv
    out["train_env_n_envs"] = envs.n_envs
    out["num_agents"] = envs_tools.get_num_agents("mapush", env_args, envs)
    out["task"] = configs_tools.get_task_name("mapush", env_args)
    out["logger_is_ours"] = harl_envs.LOGGER_REGISTRY["mapush"] is MAPushLogger
    try:
        envs_tools.make_eval_env("mapush", 3, 1, env_args)
        out["eval_error"] = None
    except Exception as exc:
        out["eval_error"] = "%s: %s" % (type(exc).__name__, exc)

    # HARL's own runner, built through the patched registrations, one rollout + one update
    algo_args = yaml.safe_load(open(os.path.join(os.path.dirname(harl.__file__), "configs",
                                                 "algos_cfgs", "happo.yaml")))
    algo_args["device"].update(cuda=False, torch_threads=1)
    algo_args["train"].update(n_rollout_threads=4, episode_length=4, num_env_steps=16)
    algo_args["eval"]["use_eval"] = False
    algo_args["model"]["hidden_sizes"] = [16, 16]
    algo_args["algo"].update(ppo_epoch=1, critic_epoch=1)
    algo_args["logger"]["log_dir"] = sys.argv[1]
    runner = RUNNER_REGISTRY["happo"]({"env": "mapush", "algo": "happo", "exp_name": "t"},
                                      algo_args, dict(env_args))
    runner.warmup()
    seen = set()
    for step in range(4):
        values, actions, logp, rnn, rnn_critic = runner.collect(step)
        obs, share_obs, rewards, dones, infos, available = runner.envs.step(actions)
        seen.add(repr(available))
        data = (obs, share_obs, rewards, dones, infos, available, values, actions, logp,
                rnn, rnn_critic)
        runner.insert(data)
    runner.compute()
    runner.prep_training()
    runner.train()
    out["available_actions_seen"] = sorted(seen)
    out["buffer_step"] = runner.actor_buffer[0].step
    out["trained"] = True

    # The same insert with the unpatched method body fails: the guard is what makes it work.
    spec = importlib.util.spec_from_file_location("pristine_runner", sys.argv[2])
    pristine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pristine)
    try:
        pristine.OnPolicyBaseRunner.insert(runner, data)
        out["pristine_insert_error"] = None
    except TypeError as exc:
        out["pristine_insert_error"] = str(exc)
    print("RESULT " + json.dumps(out))
''')


def test_wheel_carries_harl_at_the_pin(tmp_path):
    extract_harl(tmp_path)  # raises on a hash mismatch
    for rel, digest in pinned_hashes("harl").items():
        assert sha256(tmp_path / rel) == digest


@pytest.fixture(scope="module")
def harl_result(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("harl")
    pristine = extract_harl(tmp / "pristine")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp / "results"),
         str(pristine / "runners" / "on_policy_base_runner.py")],
        env=double_env(upstream), cwd=str(tmp), capture_output=True, text=True, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_runs_the_patched_copy(harl_result, upstream):
    assert harl_result["harl_file"].startswith(str(upstream["site"]))
    for rel in pinned_hashes("harl"):
        assert sha256(upstream["site"] / rel) != pinned_hashes("harl")[rel], rel


def test_mapush_is_registered_with_our_classes(harl_result):
    assert harl_result["train_env_is_ours"] is True
    assert harl_result["train_env_n_envs"] == 4
    assert harl_result["num_agents"] == 2
    assert harl_result["task"] == "go1push_mid"
    assert harl_result["logger_is_ours"] is True


def test_eval_env_is_a_clear_error(harl_result):
    message = harl_result["eval_error"]
    assert message and message.startswith("NotImplementedError")
    assert "two sims in one process" in message and "mapush eval" in message


def test_runner_collects_with_available_actions_none(harl_result):
    assert harl_result["available_actions_seen"] == ["None"]
    assert harl_result["buffer_step"] == 0  # 4 inserts wrapped around an episode of 4
    assert harl_result["trained"] is True
    assert "not subscriptable" in harl_result["pristine_insert_error"]


def test_harl_record_names_the_patches(upstream):
    record = json.loads((upstream["records"] / "harl.json").read_text())
    patches = sorted(p.name for p in (REPO / "patches" / "harl").glob("*.patch"))
    assert [p["name"] for p in record["patches"]] == patches
    assert {f["path"]: f["before"] for f in record["files"]} == pinned_hashes("harl")


def test_harl_imports_without_the_uu_module(upstream, tmp_path):
    """patches/harl/04: configs_tools.py imported Error from uu, which Python 3.13 removed;
    patched, harl imports with uu blocked and is_json_serializable behaves as before."""
    script = textwrap.dedent(r'''
        import json, sys
        sys.modules["uu"] = None  # as on Python 3.13: `import uu` fails
        import harl.utils.configs_tools as configs_tools
        out = {"plain": configs_tools.is_json_serializable({"a": [1, 2.5]})}
        try:
            configs_tools.is_json_serializable(object())
            out["object"] = "returned"
        except TypeError:
            out["object"] = "TypeError"  # as upstream: its `except Error` catches nothing
        print(json.dumps(out))
    ''')
    proc = subprocess.run([sys.executable, "-c", script], env=double_env(upstream),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"plain": True,
                                                               "object": "TypeError"}
    pristine = (extract_harl(tmp_path) / "utils" / "configs_tools.py").read_text()
    assert "from uu import Error" in pristine
