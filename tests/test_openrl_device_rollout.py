"""patches/openrl/03 (PPO's rollout and update on the policy's device) against OpenRL as
upstream ships it (patch 01 only), on the real OpenRL 0.2.0 files, on the CPU: the same
numbers, bit for bit.

With ``device_rollout: true`` the buffer, the returns and the minibatches are torch tensors
(here on the CPU) and ``mapush.envs.openrl_env.OpenRLEnv`` hands OpenRL tensors; the run with
upstream's OpenRL has ``device_rollout: false`` (numpy, as upstream). ``mapush train`` over
the deterministic MQE double, 4 updates of 2 epochs of 2 minibatches, with an episode ending
mid-rollout (so the masks count). The final weights and every logged scalar but the clock's
must be equal, not close. On the GPU, the benchmark compares the two
paths within float32 rounding (`benchmarks/openrl_equivalence.py`).

Mutations tried by hand, each failing this test: the masks of ``add2buffer_on_device`` kept
at one where an episode ended; the permutation moved as ``.flip(0)``; GAE denormalizing
``value_preds[step]`` where upstream has ``step + 1``; the advantages normalized by the
tensor's own ``std()`` (ddof 1) for numpy's ``nanstd``.
"""
import json
import subprocess
import sys

import pytest

from tests.conftest import double_env, real_env
from tests.test_openrl_host_path import assert_same_training, swap_openrl, train, with_openrl
from tests.test_openrl_host_path import without_02  # noqa: F401 (a fixture: OpenRL 01 only)


def test_ppo_on_the_device_gives_upstreams_numbers_bit_for_bit(upstream, without_02,
                                                                 tmp_path):
    """``without_02``: OpenRL with patch 01 only (02 and 03 skipped), as upstream ships it."""
    pristine = with_openrl(upstream, without_02)
    patched = double_env(upstream, MQE_DOUBLE_SUCCESS_STEP="7")
    runs = {"pristine": train(pristine, tmp_path, "pristine", "device_rollout: false\n"),
            "patched": train(patched, tmp_path, "patched", "device_rollout: true\n")}
    marker = "mapush-env patch 03"
    driver = ("openrl", "drivers", "onpolicy_driver.py")
    assert marker not in without_02.joinpath(*driver).read_text()
    assert marker in upstream["site"].joinpath(*driver).read_text()
    for name, on in (("pristine", False), ("patched", True)):  # the record says what ran
        assert json.loads((runs[name] / "openrl_config.json").read_text())[
            "device_rollout"] is on
    # both checkpoints loaded by OpenRL as shipped: one trained on the device loads where
    # upstream's does
    scalars = assert_same_training(runs, pristine)
    assert max(v for _, v in scalars["patched"]["metrics/success_rate"]) > 0  # episodes ended


@pytest.mark.real_mqe
def test_ppo_on_the_device_over_real_mqe_gives_upstreams_numbers(real_mqe, without_02,
                                                                  tmp_path):
    """The same over MAPush's real MQE (patched as the image patches it, the stand-in's
    world): upstream's OpenRL with the env's numpy arrays against ours with its tensors.
    The adapter hands over what the real wrappers return (their dtypes and shapes). Mutation
    tried by hand, failing it: the device path's observations with the agents swapped
    (``obs_np.flip(1)`` in ``OpenRLEnv.step``)."""
    runs = {}
    for name, site, on in (("pristine", without_02, "false"),
                           ("patched", real_mqe["site"], "true")):
        env = swap_openrl(real_env(real_mqe), real_mqe["site"], site)
        runs[name] = train(env, tmp_path, name, "device_rollout: %s\n" % on)
        assert json.loads((runs[name] / "openrl_config.json").read_text())[
            "device_rollout"] is (on == "true")
    assert_same_training(runs, real_env(real_mqe))


SWITCH = r'''
import sys
from mapush.spec import RunSpec
from mapush.trainers.openrl_config import openrl_config
spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=100, seed=1,
               run_dir=sys.argv[1], sim_device="cpu", rl_device=sys.argv[2])
print(openrl_config(spec, sys.argv[3] or None, sim_args=False).device_rollout)
'''


@pytest.mark.parametrize("device,on", [("cpu", "False"), ("cuda:0", "True")])
def test_the_switch_is_on_for_a_gpu_policy_unless_set(upstream, device, on, tmp_path):
    config = tmp_path / "off.yaml"
    config.write_text("device_rollout: false\n")
    for user, expected in (("", on), (str(config), "False")):
        proc = subprocess.run([sys.executable, "-c", SWITCH, str(tmp_path / "run"), device, user],
                              env=double_env(upstream), capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.split() == [expected]


def refused_on_the_cpu(upstream, tmp_path, config_text):
    """A PPO ``mapush train`` on the CPU with ``--config`` holding ``config_text``: exit 2,
    one ``error:`` line, which is returned, and no run folder made."""
    from tests.conftest import one_error, run_mapush

    config = tmp_path / "user.yaml"
    config.write_text(config_text)
    run = tmp_path / "run"
    proc = run_mapush(["train", "--algo", "ppo", "--object", "cuboid", "--num-envs", 4,
                       "--steps", 800, "--config", config, "--run-dir", run, "--sim-device",
                       "cpu", "--rl-device", "cpu"], double_env(upstream), cwd=tmp_path)
    error = one_error(proc)  # exit 2 and exactly one error: line
    assert not run.exists()
    return error


def test_a_recurrent_policy_with_the_switch_on_is_one_error_line(upstream, tmp_path):
    error = refused_on_the_cpu(upstream, tmp_path,
                               "use_recurrent_policy: true\ndevice_rollout: true\n")
    assert "device_rollout" in error
