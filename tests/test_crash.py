"""Crash diagnosis: a child dead from a signal is placed in its phase, with causes and fixes."""
import json
import signal

import pytest

from mapush.diagnostics.gpu import DeviceFacts, GpuFacts
from mapush.run import crash
from mapush.common.phases import PHASES
from mapush.spec import RunSpec
from tests.conftest import double_env, run_mapush

CRASH_PHASES = ("create_sim", "terrain", "envs", "prepare_sim", "first_step", "training")


def spec_for(run_dir, device="cpu"):
    return RunSpec(algo="happo", task="go1push_mid", object="cuboid", num_envs=8, steps=100,
                   seed=1, run_dir=str(run_dir), sim_device=device, rl_device=device)


def write_phases(run_dir, upto):
    reached = PHASES[:PHASES.index(upto) + 1]
    (run_dir / crash.PHASE_LOG).write_text("".join("%d.000 %s\n" % (i, p)
                                                   for i, p in enumerate(reached)))


@pytest.mark.parametrize("phase", PHASES)
def test_report_names_the_phase_and_ends_with_a_one_line_diagnosis(tmp_path, capsys, phase):
    write_phases(tmp_path, phase)
    code = crash.report_crash(spec_for(tmp_path), signal.SIGSEGV)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 128 + signal.SIGSEGV
    assert err[-1].startswith("error: training died from SIGSEGV in phase %s" % phase)
    assert "phase '%s'" % phase in "\n".join(err)
    assert "1. " in "\n".join(err) and "fix: " in "\n".join(err)


@pytest.mark.parametrize("phase", ("create_sim", "terrain", "envs", "prepare_sim", "first_step"))
def test_physx_out_of_memory_is_the_first_cause_while_the_sim_allocates(tmp_path, capsys, phase):
    write_phases(tmp_path, phase)
    crash.report_crash(spec_for(tmp_path), signal.SIGSEGV)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "out of GPU memory" in last or "do not fit in GPU memory" in last
    assert "--num-envs" in last and "MAPUSH_CONTACT_PAIRS_MULTIPLIER" in last
    assert "mapush doctor" in last


def test_report_gives_free_gpu_memory_and_the_chosen_contact_buffer(tmp_path, capsys, monkeypatch):
    fake = tmp_path / "gpu.json"
    fake.write_text(json.dumps(GpuFacts(devices=[DeviceFacts(0, "RTX 2070", (7, 5), 8192.0,
                                                             123.0)]).to_dict()))
    monkeypatch.setenv("MAPUSH_FAKE_GPU", str(fake))
    (tmp_path / crash.BUDGET_FILE).write_text(json.dumps(
        {"pairs": 2 ** 19, "bytes": 2 ** 27, "source": "budget", "free_bytes": 7757 * 2 ** 20,
         "device": "cuda:0"}))
    write_phases(tmp_path, "terrain")
    crash.report_crash(spec_for(tmp_path, device="cuda:0"), signal.SIGSEGV)
    err = capsys.readouterr().err
    assert "123 MiB free on cuda:0" in err.strip().splitlines()[-1]
    assert "max_gpu_contact_pairs=524288 (128 MiB, budget) with 7757 MiB free" in err


def test_sigkill_puts_the_oom_killer_first(tmp_path, capsys):
    write_phases(tmp_path, "training")
    assert crash.report_crash(spec_for(tmp_path), signal.SIGKILL) == 137
    assert "OOM killer" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("message,needle", [
    ("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously",
     "CUDA_LAUNCH_BLOCKING=1"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB", "lower --num-envs"),
    ("CUDA error: no kernel image is available for execution on the device", "mapush doctor"),
    ("Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
     "and cuda:1!", "same --sim-device and --rl-device"),
])
def test_diagnose_exception_hints(message, needle):
    line = crash.diagnose_exception(RuntimeError(message))
    assert line.startswith("error: training failed: RuntimeError: ")
    assert "\n" not in line and needle in line


def test_diagnose_unknown_exception_keeps_its_first_line():
    assert crash.diagnose_exception(ValueError("bad thing\nmore")) == \
        "error: training failed: ValueError: bad thing"


def test_train_child_segfault_in_env_creation_is_diagnosed(upstream, tmp_path):
    run_dir = tmp_path / "run"
    out = run_mapush(["train", "--algo", "happo", "--num-envs", "8", "--steps", "1600",
                      "--sim-device", "cpu", "--rl-device", "cpu", "--run-dir", run_dir],
                     env=double_env(upstream, MQE_DOUBLE_CRASH_PHASE="terrain"), timeout=300)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 128 + signal.SIGSEGV, out.stderr
    assert last.startswith("error: training died from SIGSEGV in phase terrain"), out.stderr
    assert "--num-envs" in last


def test_train_device_side_assert_gets_the_launch_blocking_hint(upstream, tmp_path):
    out = run_mapush(["train", "--algo", "happo", "--num-envs", "8", "--steps", "1600",
                      "--sim-device", "cpu", "--rl-device", "cpu", "--run-dir", tmp_path / "r"],
                     env=double_env(upstream, MQE_DOUBLE_DEVICE_ASSERT="3"), timeout=300)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode not in (0, 2), out.stderr
    assert "device-side assert" in last and "CUDA_LAUNCH_BLOCKING=1" in last, out.stderr
