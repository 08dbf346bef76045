"""patches/openrl/04 (PPO's act as one CUDA graph) on the CPU, its capture emulated: the same
training, bit for bit, as the eager act, and the record says what ran.

CUDA graphs do not exist on the CPU, so ``OnPolicyDriver.capture_act`` is replaced by an
emulation (``emulated_capture`` below, in the child): the capture draws nothing (the
generator's state is put back after fn's one call, as a real capture advances no offset),
each replay runs fn again over the static inputs and writes its outputs into the first
ones, with torch.distributions' argument checks off and Normal.sample patch 04's
``_graphable_sample`` (torch.normal's steps without its host sync), as in the graph: so the
emulated run also checks on the CPU that those give torch.normal's draws. Everything else is patch 04's own code: the inputs gathered by name, the static copies
each step's rows are copied into, the outputs cloned, the NaN flag read once a rollout, the
state in the run's ``step.json``. On the GPU, ``benchmarks/openrl_equivalence.py`` compares
the real graph with the eager act.

Mutations tried by hand, each failing a test here: the static inputs but the first refreshed
each step (``critic_obs`` left at the first step's rows); ``check_act_outputs`` not called
(``test_a_nan...``); the driver's state not passed to the record (``step.json``'s ``act``
None).
"""
import json
import subprocess
import sys

import pytest

from tests.conftest import double_env
from tests.test_openrl_device_rollout import refused_on_the_cpu
from tests.test_openrl_host_path import assert_same_training, with_openrl
from tests.test_openrl_host_path import without_02  # noqa: F401 (a fixture: OpenRL 01 only)

CHILD = r'''
import json
import sys

from mapush import sim, registry as trainers

sim.import_isaacgym()  # (before torch, as Isaac Gym asks)
import torch  # noqa: E402
from openrl.drivers import onpolicy_driver  # noqa: E402
from openrl.drivers.onpolicy_driver import OnPolicyDriver  # noqa: E402

from mapush.run.context import RunContext
from mapush.spec import RunSpec

run_dir, graphed, config, nan_at = sys.argv[1], sys.argv[2] == "1", sys.argv[3], int(sys.argv[4])


def emulated_capture(self, fn):
    state = torch.get_rng_state()
    outputs = fn()
    torch.set_rng_state(state)

    def replay():  # what the graph holds: no argument checks, patch 04's Normal.sample
        validate = torch.distributions.Distribution._validate_args
        sample = torch.distributions.Normal.sample
        torch.distributions.Distribution.set_default_validate_args(False)
        torch.distributions.Normal.sample = onpolicy_driver._graphable_sample
        try:
            new = fn()
        finally:
            torch.distributions.Distribution.set_default_validate_args(validate)
            torch.distributions.Normal.sample = sample
        for mine, theirs in zip(outputs, new):
            if mine is not None and mine is not theirs:
                mine.copy_(theirs)

    replay()
    self.act_graph_state = "captured"
    return (replay, outputs), [None if x is None else x.clone() for x in outputs]


init, replayed, calls = OnPolicyDriver.__init__, getattr(OnPolicyDriver, "act_replayed", 0), [0]


def forced(self, config, *args, **kwargs):  # act_graph on, on the CPU (mapush refuses it)
    config["cfg"].act_graph = graphed
    init(self, config, *args, **kwargs)


def poisoned(self, inputs):  # the policy's output layer NaN from the call nan_at on
    calls[0] += 1
    if calls[0] == nan_at:
        policy = self.trainer.algo_module.models["policy"]
        for name, param in policy.named_parameters():
            if "fc_mean" in name:
                param.data.fill_(float("nan"))
    return replayed(self, inputs)


if graphed:  # (OpenRL without patch 04 runs as it is)
    OnPolicyDriver.__init__ = forced
    OnPolicyDriver.capture_act = emulated_capture
    OnPolicyDriver.act_replayed = poisoned
spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=400, seed=7,
               run_dir=run_dir, sim_device="cpu", rl_device="cpu", checkpoint_interval=400,
               config=config)
counts = {"prep_rollout": 0, "inserts": 0, "rnn_inserted": 0, "rnn_rows_sum": None}
if len(sys.argv) > 5:  # count what patch 06 takes off a rollout
    from openrl.algorithms.base_algorithm import BaseAlgorithm
    from openrl.buffers.replay_data import ReplayData

    prep, insert, data = BaseAlgorithm.prep_rollout, ReplayData.insert, []

    def counted_prep(self):
        counts["prep_rollout"] += 1
        return prep(self)

    def counted_insert(self, raw_obs, rnn_states, rnn_states_critic, *args, **kwargs):
        counts["inserts"] += 1
        counts["rnn_inserted"] += (rnn_states is not None) + (rnn_states_critic is not None)
        data[:] = [self]
        return insert(self, raw_obs, rnn_states, rnn_states_critic, *args, **kwargs)

    BaseAlgorithm.prep_rollout, ReplayData.insert = counted_prep, counted_insert
trainers.load("ppo").train(RunContext(spec))
if len(sys.argv) > 5:
    counts["rnn_rows_sum"] = float(data[0].rnn_states.abs().sum()
                                   + data[0].rnn_states_critic.abs().sum())
    print("COUNTS " + json.dumps(counts))
'''

CONFIG = "episode_length: 25\nppo_epoch: 2\nnum_mini_batch: 2\nlog_interval: 1\n"


def run_child(env, tmp, name, graphed, nan_at=0, device_rollout=True, count=False):
    config = tmp / ("%s.yaml" % name)
    config.write_text(CONFIG + "device_rollout: %s\n" % ("true" if device_rollout else "false"))
    run = tmp / name
    proc = subprocess.run([sys.executable, "-c", CHILD, str(run), "1" if graphed else "0",
                           str(config), str(nan_at)] + (["count"] if count else []), env=env,
                          capture_output=True, text=True, timeout=600, cwd=str(tmp))
    return run, proc


def test_the_graphed_act_trains_as_upstreams_act_bit_for_bit(upstream, without_02, tmp_path):
    """Against OpenRL as upstream ships it (``without_02``: patch 01 only; its numpy path),
    as tests/test_openrl_device_rollout.py holds patch 03."""
    driver = ("openrl", "drivers", "onpolicy_driver.py")
    assert "mapush-env patch 04" in upstream["site"].joinpath(*driver).read_text()
    assert "mapush-env patch 0" not in without_02.joinpath(*driver).read_text()
    runs = {}
    for name, env, graphed in (("pristine", with_openrl(upstream, without_02), False),
                               ("patched", double_env(upstream, MQE_DOUBLE_SUCCESS_STEP="7"),
                                True)):
        runs[name], proc = run_child(env, tmp_path, name, graphed, device_rollout=graphed)
        assert proc.returncode == 0, proc.stderr[-3000:]
    scalars = assert_same_training(runs, env)  # 4 updates of 25 steps: 100 replays
    assert max(v for _, v in scalars["patched"]["metrics/success_rate"]) > 0  # episodes ended
    # the record: the driver's state reaches step.json and its line (upstream's has none)
    for name, state in (("patched", "captured"), ("pristine", None)):
        record = json.loads((runs[name] / "step.json").read_text())
        assert record["act"] == state
        assert ("OpenRL's act" in record["line"]) is bool(state)
    assert record["line"].startswith("MQE's step: ")
    assert json.loads((runs["patched"] / "step.json").read_text())["line"].endswith(
        "; OpenRL's act: captured")


@pytest.mark.parametrize("graphed", [True, False])
def test_a_rollout_on_the_device_skips_what_a_feed_forward_policy_never_reads(upstream, graphed,
                                                                              tmp_path):
    """patches/openrl/06: while act's graph replays, the models' mode is set once a rollout
    (actor_rollout, compute_returns), not at each of its 25 steps; on the device path, graphed
    or eager, no RNN states reach the buffer, whose rows of them stay zero as upstream's do.
    (Its numbers are held bit for bit by the tests above and tests/test_openrl_device_rollout.)
    Mutations tried by hand, each failing here: 06's prep_rollout condition removed (108
    calls graphed); its rnn_states = None removed (2 inserted graphed: the capture's step)."""
    run, proc = run_child(double_env(upstream), tmp_path, "count", graphed, count=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.split("COUNTS ", 1)[1].splitlines()[0])
    assert counts["inserts"] == 100  # 4 rollouts of 25 steps
    assert counts["rnn_inserted"] == 0 and counts["rnn_rows_sum"] == 0.0
    # 2 a rollout and the capture's first call; eager: and one at each step
    assert counts["prep_rollout"] == (2 * 4 + 1 if graphed else 2 * 4 + 100)


def test_a_nan_policy_in_a_graphed_rollout_stops_it_before_the_update(upstream, tmp_path):
    """Where the eager act's argument checks raise at the step (torch.distributions), the
    graph's flag raises at the end of the rollout, before it is trained on: the run fails
    with patch 04's ValueError and saves no update of NaN data."""
    env = double_env(upstream)
    run, proc = run_child(env, tmp_path, "nan", True, nan_at=30)  # 2nd rollout, 5th step
    assert proc.returncode != 0
    assert "the policy returned NaN actions or log-probs in this rollout" in proc.stderr
    assert "Expected parameter loc" not in proc.stderr  # not the eager check's error
    eager_run, eager = run_child(env, tmp_path, "eager", False)  # and with act_graph off:
    assert eager.returncode == 0, eager.stderr[-3000:]
    record = json.loads((eager_run / "step.json").read_text())
    assert record["act"] == "eager: act_graph is false"  # in the file; the line as without 04
    assert "OpenRL's act" not in record["line"] and record["line"].startswith("MQE's step: ")


SWITCH = r'''
import sys
from mapush.spec import RunSpec
from mapush.trainers.openrl_config import openrl_config
spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=4, steps=100, seed=1,
               run_dir=sys.argv[1], sim_device="cpu", rl_device=sys.argv[2])
cfg = openrl_config(spec, sys.argv[3] or None, sim_args=False)
print(cfg.device_rollout, cfg.act_graph)
'''


@pytest.mark.parametrize("device,user,expected", [
    ("cpu", "", "False False"), ("cuda:0", "", "True True"),
    ("cuda:0", "act_graph: false\n", "True False"),
    ("cuda:0", "device_rollout: false\n", "False False")])
def test_the_act_graph_is_on_with_the_rollout_on_a_gpu_unless_set(upstream, device, user,
                                                                    expected, tmp_path):
    config = tmp_path / "user.yaml"
    config.write_text(user)
    proc = subprocess.run([sys.executable, "-c", SWITCH, str(tmp_path / "run"), device,
                           str(config) if user else ""], env=double_env(upstream),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == expected.split()


@pytest.mark.parametrize("user", ["act_graph: true\n",
                                  "act_graph: true\ndevice_rollout: false\n"])
def test_the_act_graph_without_a_gpu_rollout_is_one_error_line(upstream, user, tmp_path):
    error = refused_on_the_cpu(upstream, tmp_path, user)  # exit 2, one line, no run folder
    assert "act_graph" in error and "act_graph: false" in error
