"""Process lifecycle without a trainer: atomic checkpoints under SIGKILL, the parent's signal
forwarding and escalation, the child's exit."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapush.checkpoints.store import latest_checkpoint, list_checkpoints, read_meta
from tests.conftest import REPO

WRITER = r"""
import os, sys, time
from pathlib import Path
from mapush.checkpoints.store import atomic_checkpoint
run_dir = Path(sys.argv[1])
with atomic_checkpoint(run_dir, "step-100", {"step": 100}) as tmp:
    (tmp / "model.bin").write_bytes(b"A" * 4096)
with atomic_checkpoint(run_dir, "step-200", {"step": 200}) as tmp:
    with open(str(tmp / "model.bin"), "wb") as fh:
        fh.write(b"B" * 1024)
        fh.flush()
        Path(sys.argv[2]).write_text("writing")
        time.sleep(60)  # killed here, mid-write
        fh.write(b"B" * 1024)
"""


def _wait_for(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        assert time.monotonic() < deadline, "timed out waiting for %s" % path
        time.sleep(0.05)


@pytest.mark.faults
def test_sigkill_mid_write_leaves_the_previous_checkpoint_loadable(tmp_path):
    run_dir, marker = tmp_path / "run", tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir), str(marker)],
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        _wait_for(marker)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    step, path, meta = latest_checkpoint(run_dir)
    assert (step, path.name, meta["step"]) == (100, "step-100", 100)
    assert (path / "model.bin").read_bytes() == b"A" * 4096
    assert [s for s, _p, _m in list_checkpoints(run_dir)] == [100]
    partial = [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".tmp-")]
    assert partial and read_meta(partial[0]) is None  # the torn one is hidden and incomplete


SUPERVISE = r"""
import json, sys
from mapush.run.train import supervise
out = supervise([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]],
                grace=float(sys.argv[4]))
print(json.dumps({"status": out.status, "stop_signal": out.stop_signal, "killed": out.killed}))
"""

CHILD = r"""
import signal, sys, time
from pathlib import Path
log = Path(sys.argv[1])
def handle(signum, frame):
    with open(str(log), "a") as fh:
        fh.write("%d\n" % signum)
signal.signal(signal.SIGTERM, handle)
signal.signal(signal.SIGINT, handle)
log.write_text("")
mode = sys.argv[2]
while True:
    time.sleep(0.05)
    seen = log.read_text().split()
    if seen and mode == "cooperative":
        time.sleep(1.0)  # the final checkpoint
        sys.exit(0)
"""


def _supervise(tmp_path, mode, grace, signals):
    log = tmp_path / ("signals-%s" % mode)
    driver = subprocess.Popen([sys.executable, "-c", SUPERVISE, CHILD, str(log), mode,
                               str(grace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    _wait_for(log)
    time.sleep(0.2)  # the driver's handlers are in place well before this
    started = time.monotonic()
    for signum in signals:
        driver.send_signal(signum)
        time.sleep(0.3)
    out, err = driver.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1]), log.read_text().split(), err, \
        time.monotonic() - started


def test_first_signal_is_forwarded_and_a_second_does_not_cut_the_checkpoint(tmp_path):
    result, seen, err, _ = _supervise(tmp_path, "cooperative", 30,
                                      [signal.SIGTERM, signal.SIGINT])
    assert result == {"status": 0, "stop_signal": signal.SIGTERM, "killed": False}
    assert seen == [str(int(signal.SIGTERM))]  # the second signal stayed with the parent
    assert "already stopping" in err


def test_a_child_that_does_not_stop_is_killed_after_the_grace_period(tmp_path):
    result, seen, err, elapsed = _supervise(tmp_path, "stubborn", 1.5, [signal.SIGINT])
    assert result == {"status": -signal.SIGKILL, "stop_signal": signal.SIGINT, "killed": True}
    assert seen == [str(int(signal.SIGINT))]
    assert "did not stop within" in err
    assert 1.5 <= elapsed < 20


CHILD_EXIT = r"""
import sys, types
sys.argv = ["child", sys.argv[1]]
from mapush.run import child
trainer = types.ModuleType("fake_trainer")
def train(ctx):
    import atexit
    atexit.register(lambda: print("atexit ran"))  # os._exit skips interpreter teardown
    print("trained", ctx.spec.algo, ctx.stop.requested)
    return 7
trainer.train = train
sys.modules["fake_trainer"] = trainer
from mapush import registry as trainers
trainers.TRAINERS = tuple(t._replace(module="fake_trainer") if t.library == "harl" else t
                          for t in trainers.TRAINERS)
child.main()
"""


def test_child_leaves_with_the_trainer_status_without_teardown(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"spec": {
        "algo": "happo", "task": "go1push_mid", "object": "cuboid", "num_envs": 2, "steps": 10,
        "seed": 1, "run_dir": str(tmp_path), "sim_device": "cpu", "rl_device": "cpu"}}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "standin"),
                                                        str(REPO / "tests" / "doubles"),
                                                        str(REPO)]),
               MAPUSH_PHASE_FILE=str(tmp_path / "phases.log"))
    out = subprocess.run([sys.executable, "-c", CHILD_EXIT, str(config)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 7, out.stderr
    assert "trained happo False" in out.stdout and "atexit ran" not in out.stdout
    phases = [line.split()[1] for line in (tmp_path / "phases.log").read_text().splitlines()]
    assert phases == ["start", "shutdown"]


def test_a_second_stop_signal_inside_the_first_handler_does_not_hang_the_child():
    """Ctrl-C reaches the training child from the terminal and again from its parent, so a
    second SIGINT can run its handler at any line of the first one's. Here the second
    handler runs at every line the first one executes (callees included): none may block
    (a threading.Event's lock did, ~1 Ctrl-C in 10, until the grace kill took the
    checkpoint with it)."""
    import threading

    from mapush.run.context import StopFlag

    flag = StopFlag()
    nested = []

    def at_each_line(frame, event, arg):
        if event == "line":
            nested.append(frame.f_code.co_name)
            flag.handle(signal.SIGINT, None)  # runs untraced: a trace function is not traced
        return at_each_line

    def first_signal():
        sys.settrace(lambda frame, event, arg: at_each_line)
        try:
            flag.handle(signal.SIGTERM, None)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=first_signal, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "a nested stop handler blocked (at %s)" % nested
    assert nested and flag.requested and flag.signum in (signal.SIGINT, signal.SIGTERM)
