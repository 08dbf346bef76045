"""Which of MQE's step graphs a run replays (patches/mapush/07-09, 12), in its record
(mapush/envs/step_record.py): the state of each graph read from the env, one plain line
for a capture that failed, step.json written once the captures have had their steps, and
the env's step as before. Over real MQE: tests/test_real_mqe_train.py and
tests/test_real_mqe_equivalence.py (the patches' own failure records)."""
import json
import types

from mapush.envs import step_record

# a capture that failed inside Isaac Gym's TorchScript copysign, as the patches record it:
# the graph's name, then the traceback (torch's TorchScript error message)
TORCHSCRIPT_FAILURE = """post_physics_step (patches/mapush/08)
Traceback (most recent call last):
  File "/opt/mapush/mqe/envs/base/legged_robot.py", line 271, in _capture_region
    replay, out = self._capture(core, restore)
RuntimeError: The following operation failed in the TorchScript interpreter.
Traceback of TorchScript (most recent call last):
  File "/opt/isaacgym/python/isaacgym/torch_utils.py", line 140, in get_euler_xyz
    sinp = 2.0 * (q[:, qw] * q[:, qy] - q[:, qz] * q[:, qx])
    pitch = torch.where(torch.abs(sinp) >= 1, copysign(np.pi / 2.0, sinp), torch.asin(sinp))
                                              ~~~~~~~~ <--- HERE
  File "/opt/isaacgym/python/isaacgym/torch_utils.py", line 120, in copysign
    a = torch.tensor(a, device=b.device, dtype=torch.float).repeat(b.shape[0])
        ~~~~~~~~~~~~ <--- HERE
RuntimeError: called a synchronizing CUDA operation
"""

PYTHON_FAILURE = """mid step (patches/mapush/07)
Traceback (most recent call last):
  File "/opt/mapush/mqe/envs/wrappers/go1_push_mid_wrapper.py", line 281, in _capture_step_tail
    replay, out = self._capture(tail)
  File "/opt/mapush/mqe/envs/wrappers/go1_push_mid_wrapper.py", line 400, in _step_tail
    obs[torch.isnan(obs)] = 0
  File "/usr/lib/python3/site-packages/torch/_tensor.py", line 10, in __setitem__
    pass
RuntimeError: CUDA error: operation not permitted when stream is capturing
"""


class MidWrapper(types.SimpleNamespace):
    def _step_tail(self):  # what patch 07's graph replays: the mid wrapper's
        raise AssertionError("not called")


class UpperWrapper(types.SimpleNamespace):
    def _step_head(self):  # what patch 12's graph replays: the high level's wrapper's
        raise AssertionError("not called")


def layers(mid=None, env=None, wrapper=MidWrapper):
    """An env as the patched tree builds it: a wrapper's attributes over MQE's env's."""
    inner = types.SimpleNamespace(**(env or {}))
    inner._core_graph_allowed = lambda: True
    inner._torques_graph_allowed = lambda: True
    return wrapper(env=inner, **(mid or {}))


def test_each_graph_is_read_from_the_env_and_a_failure_is_one_plain_line():
    captured = layers({"graph_step": True, "fast_step": True, "_graph": object()},
                      {"graph_step": True, "fast_step": True, "_core_graph": object(),
                       "_torques_graph": object()})
    report = step_record.graph_report(captured)
    assert report == dict.fromkeys(["07", "08", "09"], "captured")
    assert step_record.describe(report) == "MQE's step: graphs 07, 08, 09 captured"
    assert step_record.short({"graphs": report}) == "07+08+09"

    failed = layers({"graph_step": True, "fast_step": True, "_graph": object()},
                    {"graph_step": False, "fast_step": True,
                     "_graph_failure": TORCHSCRIPT_FAILURE})
    report = step_record.graph_report(failed)
    off = "off: a host sync or copy inside the capture (get_euler_xyz)"
    assert report == {"07": "captured", "08": off, "09": off}
    assert step_record.describe(report) == \
        "MQE graph 08 off: a host sync or copy inside the capture (get_euler_xyz)"
    assert step_record.short({"graphs": report}) == "08+09 off"

    mid = layers({"graph_step": False, "fast_step": True, "_graph_failure": PYTHON_FAILURE},
                 {"graph_step": True, "fast_step": True})
    assert step_record.graph_report(mid)["07"] == \
        "off: a host sync or copy inside the capture (_step_tail)"


def test_the_high_levels_wrapper_graph_is_12_not_07():
    """The high level's wrapper keeps its graph (patch 12) under the same attribute as the
    mid wrapper's (07): the report names it by the code it replays."""
    upper = layers({"graph_step": True, "fast_step": True, "_graph": object()},
                   {"graph_step": True, "fast_step": True, "_core_graph": object(),
                    "_torques_graph": object()}, wrapper=UpperWrapper)
    report = step_record.graph_report(upper)
    assert report == dict.fromkeys(["12", "08", "09"], "captured")
    assert step_record.describe(report) == "MQE's step: graphs 12, 08, 09 captured"
    waiting = layers({"graph_step": True, "fast_step": True}, {"graph_step": True,
                     "fast_step": True}, wrapper=UpperWrapper)
    assert step_record.graph_report(waiting) == dict.fromkeys(["12", "08", "09"], "waiting")


def test_eager_graphs_say_why():
    cpu = layers({"graph_step": False, "fast_step": True}, {"graph_step": False,
                                                            "fast_step": True})
    assert set(step_record.graph_report(cpu).values()) == \
        {"eager: no CUDA graphs on the CPU pipeline"}
    assert step_record.short({"graphs": step_record.graph_report(cpu)}) == "eager"
    switched = layers({"graph_step": True, "fast_step": False}, {"graph_step": True,
                                                                 "fast_step": False})
    assert set(step_record.graph_report(switched).values()) == {"eager: mqe_fast_step is false"}
    # a task whose path 08 cannot capture (pushed robots, sequential goals), no wrapper graph
    upper = layers({}, {"graph_step": True, "fast_step": True, "_torques_graph": object()})
    upper.env._core_graph_allowed = lambda: False
    report = step_record.graph_report(upper)
    assert report == {"08": "eager: this task's path is not capturable", "09": "captured"}
    assert step_record.describe(report) == \
        "MQE's step: graphs 09 captured; 08 eager: this task's path is not capturable"
    assert step_record.short(None) == "-" and step_record.short({"graphs": "x"}) == "-"


class Env(MidWrapper):
    """A patched env whose graphs are captured on its 2nd step."""

    def __init__(self):
        self.graph_step, self.fast_step, self._graph, self.steps = True, True, None, 0
        self.env = layers(env={"graph_step": True, "fast_step": True}).env

    def step(self, action):
        self.steps += 1
        if self.steps == 2:
            self._graph = self.env._core_graph = self.env._torques_graph = object()
        return action * 2


def test_watch_records_the_step_once_its_captures_have_had_their_steps(tmp_path, capsys):
    env = Env()
    step_record.watch(env, tmp_path, after=3)
    assert [env.step(i) for i in range(2)] == [0, 2]
    assert not (tmp_path / step_record.STEP_RECORD).exists()  # the captures had no time yet
    assert env.step(5) == 10
    saved = json.loads((tmp_path / step_record.STEP_RECORD).read_text())
    assert saved == {"graphs": dict.fromkeys(["07", "08", "09"], "captured"),
                     "line": "MQE's step: graphs 07, 08, 09 captured", "after_steps": 3,
                     "act": None}  # no OpenRL act graph here (tests/test_openrl_act_graph.py)
    assert capsys.readouterr().err == "mapush: MQE's step: graphs 07, 08, 09 captured\n"
    assert "step" not in vars(env) and env.step(1) == 2 and env.steps == 4  # as before
    assert capsys.readouterr().err == ""  # said once
