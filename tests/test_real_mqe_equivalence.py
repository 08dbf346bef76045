"""Our step patches change no result (patches/mapush/06 onward): from the same seed and the
same actions, real MQE patched as the image patches it gives the observations, rewards,
dones and first-episode buffers of upstream's code, for 300 steps across resets, on the
cuboid, the cylinder and the high level; the logged reward terms agree to float rounding.
The traces put env 0's box onto its target twice (tests/real_mqe_probe.py: SUCCESS_STEPS),
so that the code after a success runs too: over the stand-in no box is ever pushed.

Upstream's code is run twice: as upstream ships it with only the device patches 01-03
(pristine MQE makes tensors on "cuda" and cannot run on a CPU pipeline at all), and as the
patched tree with the switch off (a spec whose ``fast_step`` is false, what a failed step
check gives a run; the ``--config`` key ``mqe_fast_step: false`` is the same switch)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO, real_env

pytestmark = pytest.mark.real_mqe

PROBE = REPO / "tests" / "real_mqe_probe.py"
ENVS = 4


UPSTREAM = {}  # case -> upstream's trace, made once per session (each takes tens of seconds)


def upstream_trace(device_only, case, tmp_path_factory):
    if case not in UPSTREAM:
        UPSTREAM[case] = trace(device_only, case,
                               tmp_path_factory.mktemp("upstream") / "upstream.npz")[1]
    return UPSTREAM[case]


def trace(real, case, out, **env):
    proc = subprocess.run([sys.executable, str(PROBE), case, str(ENVS)], capture_output=True,
                          text=True, env=real_env(real, MAPUSH_PROBE_OUT=out, **env),
                          cwd=str(real["tree"].parent), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), stderr=proc.stderr), \
        np.load(str(out))


@pytest.mark.parametrize("case", ["trace_cuboid", "trace_cylinder", "trace_upper"])
def test_patched_mqe_steps_as_upstream_does(real_mqe, device_only, tmp_path,
                                            tmp_path_factory, case):
    fast, ours = trace(real_mqe, case, tmp_path / "fast.npz")
    off, switched_off = trace(real_mqe, case, tmp_path / "off.npz", MAPUSH_PROBE_FAST_STEP=0)
    upstream = upstream_trace(device_only, case, tmp_path_factory)
    # the wrapper (mid or high level) carries the switch
    assert fast["fast_step"] is True and off["fast_step"] is False
    assert fast["graphed"] is False  # no CUDA graph on the CPU: the eager step
    assert fast["env_graphed"] is False and fast["env_graph_step"] is False  # 08's, likewise
    assert fast["env_torques_graphed"] is False  # and 09's
    assert fast["env_fast_step"] is True and off["env_fast_step"] is False  # 08 has the switch
    assert fast["resets"] > 0  # the 300 steps cross episode ends
    assert fast["successes"] > 0  # and successes (SUCCESS_STEPS; the high level's UPPER_GOAL_STEPS)
    for reference in (upstream, switched_off):
        assert_same_trace(ours, reference)


@pytest.mark.parametrize("case", ["trace_cuboid", "trace_cylinder", "trace_upper"])
def test_the_graphed_step_steps_as_upstream_does(real_mqe, device_only, tmp_path,
                                                  tmp_path_factory, case):
    """patches/mapush/07 replays the mid wrapper's step as a CUDA graph, 08 the middle of
    MQE's post_physics_step and 09 its actuator control; each reads its inputs from the
    tensors it was captured with. On the CPU the capture is emulated
    (tests/real_mqe_probe.py: emulated_capture): a replay re-runs the code over the
    bindings the capture saw, so an input that is rebound and that the patch fails to copy
    in is stale, as it would be in a graph. The high level gets 08's and 09's graphs (it has
    no mid wrapper); 08 reads its received final goal from a copy (patch 11), which the trace
    rebinds and moves onto a box; 12 replays its wrapper's step up to MQE's (the command
    net's input and call). benchmarks/mqe_step.py --equivalence checks the real graphs on a
    GPU."""
    graphed, ours = trace(real_mqe, case, tmp_path / "graphed.npz", MAPUSH_PROBE_GRAPH="emulate")
    upstream = upstream_trace(device_only, case, tmp_path_factory)
    mid = case != "trace_upper"
    assert graphed["resets"] > 0
    assert graphed["successes"] > 0  # (the high level's: its goal onto the box, twice)
    assert graphed["graphed"] is True  # 07: the mid wrapper's step; 12: the high level's
    assert graphed["env_graphed"] is True  # 08: MQE's post_physics_step (the high level: 11)
    assert graphed["env_torques_graphed"] is True  # 09: its actuator control, likewise
    # nothing in the captured code reads the device back (a capture would fail there): on
    # torch 1.13 an int repeat_interleave did (.item()), on torch 2 it does not; the high
    # level's command net would, through torch.distributions' argument checks (12 turns
    # them off while it captures)
    assert graphed["graph_syncs"] == {}
    # the run's record of its step (mapush/envs/step_record.py) reads the same
    assert graphed["graph_report"] == {"07" if mid else "12": "captured",
                                       "08": "captured", "09": "captured"}
    assert_same_trace(ours, upstream)


@pytest.mark.parametrize("case", ["trace_cuboid", "trace_upper"])
def test_a_refused_capture_runs_the_step_eagerly_and_says_so(real_mqe, device_only, tmp_path,
                                                             tmp_path_factory, case):
    """A capture that fails (a host sync in the captured code, as torch 1.13's
    repeat_interleave made one) leaves the step eager from then on, with one line, and the
    same results; it does not stop the run. The wrapper's graph: 07 (mid), 12 (high level,
    captured on the first step, before 08's)."""
    refused, ours = trace(real_mqe, case, tmp_path / "refused.npz",
                          MAPUSH_PROBE_GRAPH="refuse")
    upstream = upstream_trace(device_only, case, tmp_path_factory)
    assert refused["graphed"] is False and refused["graph_step"] is False
    assert refused["env_graphed"] is False and refused["env_graph_step"] is False
    lines = [l for l in refused["stderr"].splitlines() if "CUDA graph" in l]
    assert refused["env_torques_graphed"] is False
    env_line = ("mapush: MQE's step runs without its CUDA graphs (patches/mapush/08, 09): "
                "capturing its post_physics_step (patches/mapush/08) failed: called a "
                "synchronizing CUDA operation (refused by the test)")
    failed = ": the capture failed: called a synchronizing CUDA operation (refused by the test)"
    mid = case != "trace_upper"
    assert lines == ([env_line, "mapush: the mid step runs without its CUDA graph "
                      "(patches/mapush/07)" + failed] if mid else
                     ["mapush: the high level's step runs without its CUDA graph "
                      "(patches/mapush/12)" + failed, env_line]), refused["stderr"][-2000:]
    # the run's record names the graph that failed first and why, in plain words
    off = "off: a host sync or copy inside the capture (_capture_region)"
    wrapper = "off: a host sync or copy inside the capture (%s)" % (
        "_capture_step_tail" if mid else "_capture_step_head")
    assert refused["graph_report"] == {"07" if mid else "12": wrapper, "08": off, "09": off}, \
        refused["graph_report"]
    assert_same_trace(ours, upstream)


def test_the_capture_safe_euler_angles_are_isaac_gyms_bit_for_bit(real_mqe):
    """Patches 07 and 08 call get_euler_xyz_in_graph (mqe/utils/math.py, patch 07) where they
    are captured: Isaac Gym's get_euler_xyz copies a float to the device in every call (its
    copysign), which a capture refuses. It must give the values of Isaac Gym's TorchScript
    graph as written bit for bit (NaN, and the sign of zero, included), also where the
    copysign branch is taken, and copy nothing. (Where TorchScript fuses that graph, torch
    1.13, Isaac Gym's own later calls differ from its first by a few ulps.)"""
    proc = subprocess.run([sys.executable, str(PROBE), "euler", "1"], capture_output=True,
                          text=True, env=real_env(real_mqe), cwd=str(real_mqe["tree"].parent),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["copysign_rows"] >= 4  # the branch is exercised
    assert facts["bits_equal"] == [True, True, True], facts  # roll, pitch, yaw
    # Isaac Gym's own values move by a few ulps once TorchScript fuses its graph (torch 1.13
    # fuses on the CPU; torch 2 does not): ours are those of its graph as written
    assert facts["fused_max_abs_diff"] < 1e-5
    assert (facts["fused_max_abs_diff"] > 0) <= facts["fuses_on_cpu"]
    assert facts["ours_host_transfers"] == {}
    assert facts["isaac_host_transfers"] == {"get_euler_xyz: aten::tensor": 1}


def test_a_failed_capture_joins_its_side_stream_first(real_mqe, tmp_path):
    """Patches 07 and 08 (09 through 08's) warm a capture up on a side stream; when the
    warm-up fails after it has written, the current stream waits for the side stream before
    the failure leaves _capture, so the eager re-run of the step cannot race its writes or
    08's restore() copies. (torch.cuda is stood in by recorders: tests/real_mqe_probe.py,
    case_capture_join; before the join moved into a finally block, the last entry was
    "off side".)"""
    proc = subprocess.run([sys.executable, str(PROBE), "capture_join", "2"], capture_output=True,
                          text=True, env=real_env(real_mqe), cwd=str(real_mqe["tree"].parent),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = json.loads(proc.stdout.strip().splitlines()[-1])
    side_first = ["side waits for current", "on side"]
    assert logs["07"] == side_first + ["wrote", "off side", "current waits for side", "failed"]
    assert logs["08"] == side_first + ["wrote", "restored", "off side",
                                       "current waits for side", "failed"]


def assert_same_trace(ours, reference):
    # every array the probe traced: each step's obs, reward, done and MQE's finished_buf, and
    # MQE's buffers at the end (tests/real_mqe_probe.py: TRACED_BUFFERS); the terms below
    assert sorted(ours.files) == sorted(reference.files)
    assert {"obs", "reward", "done", "finished", "dof_pos", "gait_indices"} <= set(ours.files)
    for name in (n for n in reference.files if n != "terms"):
        np.testing.assert_allclose(ours[name].astype(np.float64),
                                   reference[name].astype(np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(ours["done"], reference["done"])
    np.testing.assert_allclose(ours["terms"], reference["terms"], rtol=1e-5, atol=1e-5)
