"""Stop and resume through ``mapush train`` on the MQE double (CPU), for HARL and OpenRL:
SIGTERM mid-run leaves a loadable final checkpoint within 10 s and exit status 0, and
``--resume RUN_DIR`` continues the step count, the update count and the TensorBoard axis."""
import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapush.checkpoints.store import latest_checkpoint, list_checkpoints
from tests.conftest import double_env, run_mapush

PER_UPDATE = 8 * 20  # --num-envs 8 x episode_length 20
TOTAL = 16 * PER_UPDATE  # the same --steps for both runs, as a restarted container has
CONFIGS = {  # short rollouts, and a linear LR decay to check that its schedule continues
    "happo": "train:\n  episode_length: 20\n  use_linear_lr_decay: true\n"
             "algo:\n  ppo_epoch: 1\n  critic_epoch: 1\n",
    "ppo": "episode_length: 20\nlog_interval: 1\nuse_linear_lr_decay: true\nppo_epoch: 1\n",
}
LR0 = 5e-4
# The watchdog samples every update here, so these runs also prove a flat run never warns.
WATCHDOG = "every=1,warmup=2,window=4,threshold_mb=32"


def scalar_steps(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps = []
    for path in sorted(Path(run_dir, "logs").rglob("events.out.tfevents*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            steps += [event.step for event in acc.Scalars(tag)]
    return steps


def assert_loadable(path, meta):
    """Tensors load without the trainer's classes; a pickled module (OpenRL's module.pt) must
    match the sha256 its meta.json records (resuming from it proves it loads)."""
    import torch

    weights = sorted(path.rglob("*.pt"))
    assert weights and (path / "meta.json").is_file(), "incomplete checkpoint %s" % path
    for weight in weights:
        try:
            torch.load(str(weight), map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - not plain tensors: check it is the file written
            if "files" in meta:  # OpenRL's pickled module: the sha256 meta.json vouches for
                recorded = meta["files"][weight.name]["sha256"]
                assert hashlib.sha256(weight.read_bytes()).hexdigest() == recorded
            else:  # torch 1.13's weights-only reader refuses some state dicts: a full load
                loaded = torch.load(str(weight), map_location="cpu")
                assert isinstance(loaded, (dict, torch.Tensor)) or hasattr(loaded, "state_dict")


def decay_updates(meta):
    """How many updates of linear decay the checkpoint's critic LR went through:
    lr = LR0 * (1 - k / total_updates)."""
    lr = meta["lr"]["critic"] if isinstance(meta["lr"], dict) else meta["lr"]
    return (1.0 - float(lr) / LR0) * (TOTAL // PER_UPDATE)


def wait_for_checkpoint(run_dir, proc, min_step, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = latest_checkpoint(run_dir)
        if latest is not None and latest[0] >= min_step:
            return latest
        assert proc.poll() is None, "mapush train exited early (%s)" % proc.returncode
        time.sleep(0.2)
    raise AssertionError("no checkpoint at step >= %d within %d s" % (min_step, timeout))


@pytest.mark.faults
@pytest.mark.parametrize("algo", ["happo", "ppo"])
def test_sigterm_checkpoints_and_resume_continues(upstream, tmp_path, algo):
    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS[algo])
    run_dir = tmp_path / "run"
    common = ["--algo", algo, "--num-envs", "8", "--sim-device", "cpu", "--rl-device", "cpu",
              "--config", config]
    err_path = tmp_path / "stderr.txt"
    with open(str(err_path), "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mapush", "train"] + [str(a) for a in common] +
            ["--steps", str(TOTAL), "--checkpoint-interval", str(2 * PER_UPDATE),
             "--run-dir", str(run_dir)],
            env=double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.05", MAPUSH_WATCHDOG=WATCHDOG),
            stdout=subprocess.DEVNULL, stderr=err)
        try:
            first = wait_for_checkpoint(run_dir, proc, 2 * PER_UPDATE)
            time.sleep(0.5)  # mid-rollout
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(timeout=30)
            took = time.monotonic() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
    stderr = err_path.read_text()
    assert status == 0, stderr[-3000:]
    assert took < 60, "stopping took %.1f s: hung?" % took  # a hang guard (#80)
    assert "stopped by SIGTERM" in stderr
    step, path, meta = latest_checkpoint(run_dir)
    assert step >= first[0] and step % PER_UPDATE == 0
    assert_loadable(path, meta)
    stopped_update = int(meta["update"])
    assert stopped_update == step // PER_UPDATE

    # decayed for the last update trained, or already for the next one the stop cut short
    assert min(abs(decay_updates(meta) - k) for k in (stopped_update - 1, stopped_update)) < 1e-3

    target = TOTAL
    out = run_mapush(["train"] + common + ["--steps", target, "--checkpoint-interval", 10 ** 6,
                                           "--resume", run_dir],
                     env=double_env(upstream, MAPUSH_WATCHDOG=WATCHDOG), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "resum" in out.stderr
    final_step, final_path, final_meta = latest_checkpoint(run_dir)
    resumed_updates = (target - step) // PER_UPDATE
    assert final_step == target and int(final_meta["update"]) == stopped_update + resumed_updates
    # the LR schedule went on from where it stopped, as in an uninterrupted run (restarting
    # it would leave resumed_updates - 1 updates of decay)
    assert abs(decay_updates(final_meta) - (TOTAL // PER_UPDATE - 1)) < 1e-3
    assert_loadable(final_path, final_meta)
    assert [s for s, _p, _m in list_checkpoints(run_dir)][-1] == target
    axis = scalar_steps(run_dir, "perf/env_steps_per_s")
    assert axis == sorted(set(axis)), "the TensorBoard step axis restarted: %s" % axis
    assert max(axis) == target and any(s > step for s in axis)
    assert scalar_steps(run_dir, "memory/host_rss_mb")
    assert "grows steadily" not in stderr + out.stderr  # flat memory: no watchdog warning


def _children(pid):
    try:
        return [int(c) for c in Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()]
    except OSError:
        return []


def _alive(pid):
    try:
        return Path("/proc/%d/status" % pid).read_text().split("State:")[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


@pytest.mark.faults
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_of_the_parent_stops_the_child_with_a_checkpoint(upstream, tmp_path):
    """#36: kill -9 of `mapush train` used to leave its child training alone, holding the
    lock. Now the child gets SIGTERM from the kernel (PR_SET_PDEATHSIG), writes a final
    checkpoint and leaves; the run resumes at once."""
    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS["ppo"])
    run_dir = tmp_path / "run"
    common = ["--algo", "ppo", "--num-envs", "8", "--sim-device", "cpu", "--rl-device", "cpu",
              "--config", config]
    proc = subprocess.Popen([sys.executable, "-m", "mapush", "train"] + [str(a) for a in common]
                            + ["--steps", str(100 * TOTAL), "--checkpoint-interval",
                               str(2 * PER_UPDATE), "--run-dir", str(run_dir)],
                            env=double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.05"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = []
    try:
        first = wait_for_checkpoint(run_dir, proc, 2 * PER_UPDATE)
        children = _children(proc.pid)
        assert children, "mapush train has no child"
        time.sleep(2.5)  # an update or two past that checkpoint (about 1 s each), mid-rollout
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(c) for c in children), "the training child outlived its parent"
    finally:
        for child in children:
            if _alive(child):
                subprocess.call(["kill", "-9", str(child)])
    step, path, meta = latest_checkpoint(run_dir)
    assert step > first[0] and step % PER_UPDATE == 0  # the stop's final checkpoint
    assert_loadable(path, meta)
    out = run_mapush(["train"] + common + ["--steps", step + PER_UPDATE, "--checkpoint-interval",
                                           10 ** 6, "--resume", run_dir],
                     env=double_env(upstream), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert latest_checkpoint(run_dir)[0] == step + PER_UPDATE


@pytest.mark.faults
def test_sigkill_of_the_child_again_and_again_loses_nothing_checkpointed(upstream, tmp_path):
    """#36 item 7: kill -9 of the training child three times, at other moments of its
    checkpoint cadence; each time the parent ends with one diagnosis line, the newest
    checkpoint is complete and loadable, no writer's temporary folder is left visible, and
    --resume continues from it."""
    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS["ppo"])
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "mapush", "train", "--algo", "ppo", "--num-envs", "8",
            "--sim-device", "cpu", "--rl-device", "cpu", "--config", str(config),
            "--checkpoint-interval", str(PER_UPDATE), "--run-dir", str(run_dir)]
    last = 0
    for round_ in range(3):
        proc = subprocess.Popen(argv + ["--steps", str(100 * TOTAL)] + (
            ["--resume", str(run_dir)] if round_ else []), stderr=subprocess.PIPE, text=True,
            env=double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.02"), stdout=subprocess.DEVNULL)
        try:
            wait_for_checkpoint(run_dir, proc, last + PER_UPDATE)
            time.sleep(0.35 * round_)  # another moment of the cadence each round
            for child in _children(proc.pid):
                subprocess.call(["kill", "-9", str(child)])
            err = proc.communicate(timeout=60)[1]
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode != 0 and err.strip().splitlines()[-1].startswith("error:"), err
        step, path, meta = latest_checkpoint(run_dir)
        assert step > last and step % PER_UPDATE == 0
        assert_loadable(path, meta)
        assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()
                      if not p.name.startswith(".tmp-")) == sorted(
            p.name for _s, p, _m in list_checkpoints(run_dir))
        last = step
    out = run_mapush(argv[3:] + ["--steps", last + PER_UPDATE, "--resume", run_dir],
                     env=double_env(upstream), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert latest_checkpoint(run_dir)[0] == last + PER_UPDATE
