"""A run is its record: ``--resume`` continues what ``config.json`` recorded, options that
would change the run are refused before anything is written, ``--run-dir`` never reuses a
run, one writer per run, bad input creates nothing, a full disk or a read-only folder loses
nothing, and readers write only what is theirs. Over the MQE double, through ``mapush``."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapush.checkpoints.store import latest_checkpoint, list_checkpoints
from tests.conftest import DOUBLE_ROOT, double_env, in_namespace, needs_mounts, one_error, \
    run_mapush, tree_hash

NUM_ENVS = 8
PER_UPDATE = NUM_ENVS * 20
PPO_YAML = "episode_length: 20\nlog_interval: 1\nppo_epoch: 1\n"
HAPPO_YAML = "train:\n  episode_length: 20\nalgo:\n  ppo_epoch: 1\n  critic_epoch: 1\n"
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def objects_in(value):
    """Every value of an ``object`` key anywhere in a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "object":
                yield item
            yield from objects_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from objects_in(item)


@pytest.fixture(scope="module")
def tblock(upstream, tmp_path_factory):
    """A PPO run on the T-block: 8 envs, 2 updates, its own --config (episode length 20)."""
    tmp = tmp_path_factory.mktemp("tblock")
    config = tmp / "small.yaml"
    config.write_text(PPO_YAML)
    run = tmp / "run"
    proc = run_mapush(["train", "--algo", "ppo", "--object", "Tblock", "--num-envs", NUM_ENVS,
                       "--steps", 2 * PER_UPDATE, "--checkpoint-interval", PER_UPDATE,
                       "--seed", 5, "--config", config, "--run-dir", run] + CPU,
                      double_env(upstream), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"run": run, "config": config, "tmp": tmp}


@pytest.mark.parametrize("option, value, recorded", [
    ("--object", "cuboid", "'Tblock'"),
    ("--num-envs", "200", "8"),
    ("--seed", "1", "5"),
    ("--algo", "happo", "'ppo'"),
    ("--task", "go1push_upper", "'go1push_mid'"),
])
def test_resume_refuses_an_option_that_changes_the_run(upstream, tblock, option, value,
                                                       recorded):
    run = tblock["run"]
    before_config = (run / "config.json").read_bytes()
    before = tree_hash(run)
    proc = run_mapush(["train", "--resume", run, option, value, "--steps", 4 * PER_UPDATE],
                      double_env(upstream), cwd=tblock["tmp"])
    line = one_error(proc)
    assert option in line and recorded in line and value in line, line
    assert (run / "config.json").read_bytes() == before_config
    assert tree_hash(run) == before  # nothing written: no resumes entry, no lock, no log


def test_resume_refuses_other_overrides_and_accepts_equal_options(upstream, tblock, tmp_path):
    run = tblock["run"]
    other = tmp_path / "other.yaml"
    other.write_text("episode_length: 40\n")
    before = tree_hash(run)
    proc = run_mapush(["train", "--resume", run, "--config", other], double_env(upstream))
    line = one_error(proc)
    assert "--config" in line and str(other) in line and str(tblock["config"]) in line, line
    proc = run_mapush(["train", "--resume", run, "--run-dir", tmp_path / "elsewhere"],
                      double_env(upstream))
    assert "--run-dir" in one_error(proc)
    # another object config (the cuboid's, for a T-block run) is refused
    proc = run_mapush(["train", "--resume", run, "--object-config",
                       DOUBLE_ROOT / "task" / "cuboid" / "config.py"], double_env(upstream))
    line = one_error(proc)
    assert "--object-config" in line and "Tblock" in line, line
    # a run recorded without --init-from: another start is refused, naming the record's none
    proc = run_mapush(["train", "--resume", run, "--init-from", run], double_env(upstream))
    line = one_error(proc)
    assert "--init-from: the run was recorded with (none)" in line and str(run) in line, line
    assert tree_hash(run) == before and not (tmp_path / "elsewhere").exists()


def test_resume_alone_continues_everything_it_recorded(upstream, tblock, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(str(tblock["run"]), str(run))  # the fixture's run stays as it was
    resumes_before = json.loads((run / "config.json").read_text()).get("resumes", [])
    # equal options are fine: the object, a copy of its config, the env count, a copy of the
    # same override and the run's folder spelled another way
    same, same_object = tblock["tmp"] / "same.yaml", tblock["tmp"] / "same_config.py"
    shutil.copy(str(tblock["config"]), str(same))
    shutil.copy(str(DOUBLE_ROOT / "task" / "Tblock" / "config.py"), str(same_object))
    proc = run_mapush(["train", "--resume", run, "--steps", 3 * PER_UPDATE, "--object",
                       "Tblock", "--object-config", same_object, "--num-envs", NUM_ENVS,
                       "--config", same, "--run-dir", "%s/checkpoints/.." % run] + CPU,
                      double_env(upstream), cwd=tblock["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(["train", "--resume", run, "--steps", 4 * PER_UPDATE] + CPU,
                      double_env(upstream), cwd=tblock["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((run / "config.json").read_text())
    assert set(objects_in(record)) == {"Tblock"}
    assert record["spec"]["num_envs"] == NUM_ENVS and record["spec"]["seed"] == 5
    assert record["spec"]["steps"] == 4 * PER_UPDATE
    assert record["start"] == {"steps": 2 * PER_UPDATE, "num_envs": NUM_ENVS}
    assert len(record["resumes"]) == len(resumes_before) + 2
    assert [r["steps"] for r in record["resumes"][-2:]] == [3 * PER_UPDATE, 4 * PER_UPDATE]
    # the override the run was started with, from the run's own copy
    assert Path(record["spec"]["config"]) == (run / "overrides.yaml").resolve()
    resolved = json.loads((run / "openrl_config.json").read_text())
    assert resolved["episode_length"] == 20
    steps = [s for s, _p, _m in list_checkpoints(run)]
    assert steps[-1] == 4 * PER_UPDATE
    for _step, path, meta in list_checkpoints(run):
        assert meta["object"] == "Tblock" and meta["num_envs"] == NUM_ENVS, path
    # the target reached: one line saying how to go on, nothing written
    before = tree_hash(run)
    proc = run_mapush(["train", "--resume", run] + CPU, double_env(upstream))
    assert "--steps" in one_error(proc)
    assert tree_hash(run) == before


@pytest.mark.parametrize("lost, what", [("overrides.yaml", "--config copy"),
                                        ("task/config.py", "object config")])
def test_a_run_whose_copies_are_gone_is_not_resumed(upstream, tblock, tmp_path, lost, what):
    """The run's copy of its --config or of its object config deleted: --resume cannot
    continue the run as recorded, and says so in one line, writing nothing."""
    run = tmp_path / "run"
    shutil.copytree(str(tblock["run"]), str(run))
    (run / lost).unlink()
    before = tree_hash(run)
    proc = run_mapush(["train", "--resume", run, "--steps", 4 * PER_UPDATE] + CPU,
                      double_env(upstream))
    line = one_error(proc)
    assert "the run's %s %s is gone" % (what, run / lost) in line, line
    assert tree_hash(run) == before


def test_a_new_run_into_an_existing_run_is_refused(upstream, tblock):
    run = tblock["run"]
    before = tree_hash(run)
    proc = run_mapush(["train", "--object", "Tblock", "--num-envs", NUM_ENVS, "--run-dir", run]
                      + CPU, double_env(upstream))
    line = one_error(proc)
    assert "already holds a run" in line and "--resume" in line
    assert tree_hash(run) == before


@pytest.mark.parametrize("kept", ["config.json", "checkpoints"])
def test_half_a_run_is_a_run_too(upstream, tblock, tmp_path, kept):
    """A folder with only the record (a run that died before its first checkpoint) or only
    the checkpoints (a record lost) still holds a run: a new run there is refused, and
    nothing in it changes."""
    run = tmp_path / "half"
    run.mkdir()
    source = tblock["run"] / kept
    if source.is_dir():
        shutil.copytree(str(source), str(run / kept))
    else:
        shutil.copy(str(source), str(run / kept))
    before = tree_hash(run)
    proc = run_mapush(["train", "--object", "Tblock", "--num-envs", NUM_ENVS, "--steps",
                       PER_UPDATE, "--config", tblock["config"], "--run-dir", run] + CPU,
                      double_env(upstream))  # short, should it start
    assert "already holds a run" in one_error(proc)
    assert tree_hash(run) == before


def test_an_empty_run_dir_is_fine(upstream, tmp_path):
    """An empty folder takes a new run (here with the shipped ppo.yaml: one update of 200
    steps an env); that run, recorded without --config, refuses a resume that gives one."""
    run = tmp_path / "empty"
    run.mkdir()
    per_update = NUM_ENVS * 200
    proc = run_mapush(["train", "--num-envs", NUM_ENVS, "--steps", per_update, "--run-dir", run]
                      + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert latest_checkpoint(run)[0] == per_update
    config = tmp_path / "small.yaml"
    config.write_text(PPO_YAML)
    before = tree_hash(run)
    proc = run_mapush(["train", "--resume", run, "--config", config], double_env(upstream))
    assert "--config: the run was recorded with (none)" in one_error(proc)
    assert tree_hash(run) == before


@pytest.mark.parametrize("algo, yaml_text, needle", [
    ("ppo", "no_such_key: 1\n", "no_such_key"),
    ("happo", "train:\n  no_such_key: 1\n", "no_such_key"),
    ("happo", "train:\n  episode_length: 200\n", "less than one rollout"),
    ("ppo", "episode_length: 200\n", "less than one rollout"),  # it once trained a rollout
])
def test_bad_input_creates_no_folder(upstream, tmp_path, algo, yaml_text, needle):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    run = tmp_path / "runs" / "new"
    proc = run_mapush(["train", "--algo", algo, "--num-envs", NUM_ENVS, "--steps", 400,
                       "--config", config, "--run-dir", run] + CPU, double_env(upstream),
                      cwd=tmp_path)
    assert needle in one_error(proc)
    assert not (tmp_path / "runs").exists()
    for args in (["--object", "sphere"], ["--init-from", tmp_path / "nope"]):
        proc = run_mapush(["train", "--run-dir", run] + [str(a) for a in args] + CPU,
                          double_env(upstream), cwd=tmp_path)
        one_error(proc)
        assert not (tmp_path / "runs").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_happo_resume_keeps_its_config_and_env_count(upstream, tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(HAPPO_YAML)
    run = tmp_path / "run"
    proc = run_mapush(["train", "--algo", "happo", "--num-envs", NUM_ENVS, "--steps",
                       PER_UPDATE, "--config", config, "--run-dir", run] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config.write_text("train:\n  episode_length: 200\n")  # the user's file changes later
    proc = run_mapush(["train", "--resume", run, "--num-envs", 200], double_env(upstream))
    assert "--num-envs" in one_error(proc)
    proc = run_mapush(["train", "--resume", run, "--steps", 2 * PER_UPDATE] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    harl = json.loads((run / "harl_config.json").read_text())["algo_args"]["train"]
    assert harl["episode_length"] == 20 and harl["n_rollout_threads"] == NUM_ENVS
    assert latest_checkpoint(run)[0] == 2 * PER_UPDATE


def test_upper_resume_keeps_its_command_net(upstream, tmp_path):
    """The high level on a cuboid run's newest policy (the high level pushes the cuboid); a
    resume naming another mid-level policy is refused, the same one (a copy) is fine."""
    mid = tmp_path / "mid"
    (tmp_path / "mid.yaml").write_text(PPO_YAML)
    proc = run_mapush(["train", "--algo", "ppo", "--object", "cuboid", "--num-envs", NUM_ENVS,
                       "--steps", 2 * PER_UPDATE, "--checkpoint-interval", PER_UPDATE,
                       "--config", tmp_path / "mid.yaml", "--run-dir", mid] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (_s1, first, _m1), (_s2, newest, _m2) = list_checkpoints(mid)[:2]
    net = newest / "module.pt"
    config = tmp_path / "small.yaml"
    config.write_text("episode_length: 10\nlog_interval: 1\nppo_epoch: 1\n")
    run = tmp_path / "upper"
    per_update = 4 * 10
    proc = run_mapush(["train", "--task", "go1push_upper", "--command-net", net, "--num-envs",
                       4, "--steps", per_update, "--config", config, "--run-dir", run] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(["train", "--resume", run, "--command-net", first / "module.pt"],
                      double_env(upstream))
    line = one_error(proc)
    assert "--command-net" in line and "recorded with %r" % str(net.resolve()) in line
    copy = tmp_path / "copy" / "module.pt"  # the same policy elsewhere is the same
    copy.parent.mkdir()
    shutil.copy(str(net), str(copy))
    proc = run_mapush(["train", "--resume", run, "--command-net", copy, "--steps",
                       2 * per_update] + CPU, double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((run / "config.json").read_text())
    assert record["spec"]["task"] == "go1push_upper"
    assert Path(record["spec"]["command_net"]) == net.resolve()
    assert latest_checkpoint(run)[0] == 2 * per_update


@pytest.mark.faults
def test_one_writer_per_run_and_the_lock_dies_with_its_holder(upstream, tblock, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(str(tblock["run"]), str(run))
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.05")
    first = subprocess.Popen([sys.executable, "-m", "mapush", "train", "--resume", str(run),
                              "--steps", str(100 * PER_UPDATE)] + CPU, env=env,
                             cwd=str(tblock["tmp"]), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "run directory" not in _peek(run) and time.monotonic() < deadline:
            assert first.poll() is None
            time.sleep(0.2)
        before = json.loads((run / "config.json").read_text())["resumes"]
        proc = run_mapush(["train", "--resume", run, "--steps", 200 * PER_UPDATE] + CPU,
                          double_env(upstream))
        assert "another mapush train" in one_error(proc)
        assert json.loads((run / "config.json").read_text())["resumes"] == before
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # parent and child, no cleanup at all
        first.wait(timeout=30)
    time.sleep(0.5)
    proc = run_mapush(["train", "--resume", run, "--steps", latest_checkpoint(run)[0] +
                       PER_UPDATE] + CPU, double_env(upstream), cwd=tblock["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]


def _peek(run):
    """'run directory' once the first command has written its resume (lock held)."""
    try:
        record = json.loads((Path(run) / "config.json").read_text())
    except (OSError, ValueError):
        return ""
    return "run directory" if len(record.get("resumes", [])) and \
        record["resumes"][-1]["steps"] == 100 * PER_UPDATE else ""


def test_eval_writes_nothing_into_the_run_but_eval_jsonl(upstream, tblock, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(str(tblock["run"]), str(run))
    before = tree_hash(run)
    step, checkpoint, _meta = latest_checkpoint(run)
    proc = run_mapush(["eval", "--checkpoint", checkpoint, "--num-envs", 4] + CPU,
                      double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tree_hash(run) == before
    proc = run_mapush(["eval", "--run", run, "--num-envs", 4] + CPU, double_env(upstream),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run / "eval.jsonl").unlink()
    assert tree_hash(run) == before


def test_the_eval_child_simulates_into_a_scratch_folder(monkeypatch, tblock, tmp_path):
    """What the simulation writes (the PhysX budget of a GPU run) goes to the scratch folder
    its parent gave it (a temporary folder: test_architecture), never into the run whose
    checkpoint is read."""
    from mapush import sim
    from mapush.eval import calculator as evaluate
    from mapush.spec import EvalSpec

    seen = {}

    class Stop(Exception):
        pass

    def make_env(spec):
        seen["run_dir"] = spec.run_dir
        raise Stop()

    monkeypatch.setattr(sim, "import_isaacgym", lambda: None)
    monkeypatch.setattr(sim, "make_env", make_env)
    _step, checkpoint, _meta = latest_checkpoint(tblock["run"])
    with pytest.raises(Stop):
        evaluate.evaluate_checkpoint(EvalSpec(
            checkpoint=str(checkpoint), algo="ppo", task="go1push_mid", object="Tblock",
            num_envs=4, seed=0, sim_device="cuda:0", rl_device="cuda:0",
            scratch=str(tmp_path / "scratch")))
    assert seen["run_dir"] == str(tmp_path / "scratch")


# -- faults: a full disk, a read-only folder ----------------------------------------------
@pytest.mark.faults
def test_a_full_disk_keeps_the_previous_file(tmp_path, monkeypatch):
    from mapush.common import atomic

    path = tmp_path / "config.json"
    atomic.write_json(path, {"a": 1})
    before = path.read_bytes()

    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError):
        atomic.write_json(path, {"a": 2})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # no partial copy


@pytest.mark.faults
def test_a_full_disk_during_a_checkpoint_keeps_the_last_one(tmp_path):
    from mapush.errors import MapushError
    from mapush.checkpoints.store import atomic_checkpoint

    with atomic_checkpoint(tmp_path, "a", {"step": 1}) as folder:
        (folder / "w.pt").write_bytes(b"one")
    with pytest.raises(MapushError, match="disk full while writing checkpoint b .*a \\(step 1\\)"):
        with atomic_checkpoint(tmp_path, "b", {"step": 2}):
            raise OSError(errno.ENOSPC, "No space left on device")
    step, path, _meta = latest_checkpoint(tmp_path)
    assert step == 1 and (path / "w.pt").read_bytes() == b"one"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["a"]


@pytest.mark.faults
@needs_mounts
def test_a_read_only_run_folder_is_one_line_before_training(upstream, tblock, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(str(tblock["run"]), str(run))
    before = tree_hash(run)
    env = double_env(upstream)
    script = """
mount --bind "$RUN" "$RUN" && mount -o remount,bind,ro "$RUN"
set +e
"$PY" -m mapush train --resume "$RUN" --steps {steps} --sim-device cpu --rl-device cpu \
    2> "$OUT/resume.err"; echo $? > "$OUT/resume.rc"
mount --bind "$PARENT" "$PARENT" && mount -o remount,bind,ro "$PARENT"
"$PY" -m mapush train --run-dir "$PARENT/new" --sim-device cpu --rl-device cpu \
    2> "$OUT/new.err"; echo $? > "$OUT/new.rc"
""".format(steps=10 * PER_UPDATE)
    out = tmp_path / "out"
    out.mkdir()
    env.update(RUN=str(run), OUT=str(out), PY=sys.executable, PARENT=str(tmp_path / "ro"))
    (tmp_path / "ro").mkdir()
    proc = in_namespace(script, env, tblock["tmp"])
    assert proc.returncode == 0, proc.stderr
    for name in ("resume", "new"):
        err = (out / ("%s.err" % name)).read_text()
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert (out / ("%s.rc" % name)).read_text().strip() == "2", err
        assert len(errors) == 1 and "read-only" in errors[0], err
        assert "Traceback" not in err
    assert tree_hash(run) == before and list((tmp_path / "ro").iterdir()) == []


@pytest.mark.faults
@needs_mounts
def test_a_full_disk_loses_nothing_and_the_run_resumes(upstream, tblock, tmp_path):
    """The run on a small tmpfs, filled: config.json first, then a checkpoint fail with one
    line each; the previous config.json and the last checkpoint stay intact and resumable."""
    out = tmp_path / "out"
    out.mkdir()
    env = double_env(upstream)
    env.update(SRC=str(tblock["run"]), OUT=str(out), PY=sys.executable,
               DISK=str(tmp_path / "disk"))
    (tmp_path / "disk").mkdir()
    script = """
mount -t tmpfs -o size=16m tmpfs "$DISK"
cp -a "$SRC" "$DISK/run"
sha256sum "$DISK/run/config.json" | cut -c1-64 > "$OUT/config.sha0"
resume() {{ "$PY" -m mapush train --resume "$DISK/run" --steps "$1" --sim-device cpu \
    --rl-device cpu --checkpoint-interval {per} 2> "$OUT/$2.err"; echo $? > "$OUT/$2.rc"; }}
set +e
dd if=/dev/zero of="$DISK/fill" bs=4k 2>/dev/null
resume {s1} full
sha256sum "$DISK/run/config.json" | cut -c1-64 > "$OUT/config.sha1"
rm "$DISK/fill"
dd if=/dev/zero of="$DISK/fill" bs=4k 2>/dev/null
rm "$DISK/fill"; dd if=/dev/zero of="$DISK/fill" bs=1k count=$(( $(stat -f -c %a "$DISK") * 4 - 96 )) 2>/dev/null
resume {s1} ckpt
sha256sum "$DISK/run/config.json" | cut -c1-64 > "$OUT/config.sha2"
ls "$DISK/run/checkpoints" > "$OUT/ckpts2"
rm "$DISK/fill"
resume {s1} again
ls "$DISK/run/checkpoints" > "$OUT/ckpts3"
""".format(per=PER_UPDATE, s1=4 * PER_UPDATE)
    proc = in_namespace(script, env, tblock["tmp"])
    assert proc.returncode == 0, proc.stderr
    before = sorted(p.name for p in (tblock["run"] / "checkpoints").iterdir())

    def one_line(name):
        err = (out / ("%s.err" % name)).read_text()
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert (out / ("%s.rc" % name)).read_text().strip() != "0", err
        assert len(errors) == 1 and "disk full" in errors[0], err
        return errors[0]

    assert "config.json" in one_line("full")
    assert (out / "config.sha1").read_text() == (out / "config.sha0").read_text()
    line = one_line("ckpt")
    assert "while writing checkpoint rl_model_" in line and "intact" in line and "--resume" in line
    # the resume itself was recorded; no checkpoint half-written, the old ones intact
    assert (out / "ckpts2").read_text().split() == before
    assert (out / "again.rc").read_text().strip() == "0", (out / "again.err").read_text()
    assert "rl_model_%d_steps" % (4 * PER_UPDATE) in (out / "ckpts3").read_text().split()


# -- the report's Run table and Make -----------------------------------------------------
def test_the_report_shows_what_the_run_recorded():
    from mapush.report import run_summary

    record = {
        "spec": {"algo": "ppo", "task": "go1push_mid", "object": "Tblock", "seed": 5,
                 "num_envs": 8, "steps": 640},
        "created": "2026-11-23T10:00:00+00:00", "start": {"num_envs": 8, "steps": 320},
        "resumes": [{"at": "2026-11-23T11:00:00+00:00", "steps": 640, "num_envs": 8,
                     "from": "runs/x/checkpoints/rl_model_320_steps"}],
        "provenance": {"pins": {"TORCH_VERSION": "1.13.1+cu116", "OPENRL_VERSION": "0.2.0",
                                "NUMPY_VERSION": "1.23.5"},
                       "versions": {"torch": "2.13.0", "openrl": "0.2.0", "numpy": "1.23.5"}},
    }
    rows = dict((label, value) for label, value in run_summary(record))
    assert rows["torch"] == "2.13.0 (pinned: 1.13.1+cu116)"
    assert rows["OpenRL"] == "0.2.0" and rows["numpy"] == "1.23.5"
    assert rows["started"].startswith("8 envs, --steps 320")
    assert rows["resume 1"].startswith("8 envs, --steps 640") and "rl_model_320" in \
        rows["resume 1"]
    # a record from before `start` existed: the envs and steps are not guessed
    old = dict(record)
    del old["start"]
    assert "not recorded" in dict(run_summary(old))["started"]
    assert "fast-step check" not in rows  # a run from before the check
    # the check's verdict for the run (mapush/run/train.py: check_step), and what it did
    failed = dict(record, step_check={"ran": True, "passed": False, "fast_step": False,
                                      "set": "mqe_fast_step=false",
                                      "line": "the fast step differs from upstream's: ..."})
    assert dict(run_summary(failed))["fast-step check"] == (
        "the fast step differs from upstream's: ... (so this run trains with upstream's step: "
        "mqe_fast_step=false)")
    cpu = dict(record, step_check={"ran": False, "fast_step": True,
                                   "line": "not run: no CUDA graphs on the CPU pipeline"})
    assert dict(run_summary(cpu))["fast-step check"] == \
        "not run: no CUDA graphs on the CPU pipeline"


def test_make_resume_passes_no_make_default_and_train_points_at_it(tmp_path):
    from tests.test_makefile import make

    proc = make(["-n", "train", "EXTRA=--resume runs/x"])
    assert proc.returncode == 2 and "make resume RUN=" in proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "error:" in line]) == 1
    run = Path("runs") / ("test-resume-%d" % os.getpid())
    (Path(__file__).resolve().parent.parent / run).mkdir(parents=True)
    try:
        (Path(__file__).resolve().parent.parent / run / "config.json").write_text("{}")
        proc = make(["-n", "resume", "RUN=%s" % run, "STEPS=5000000"])
        assert proc.returncode == 0, proc.stderr
        line = [c for c in proc.stdout.splitlines() if "mapush train" in c][-1]
        assert line.split("mapush train", 1)[1].split() == ["--resume", str(run), "--steps",
                                                            "5000000"]
        proc = make(["-n", "resume", "RUN=runs/nope"])
        assert proc.returncode == 2 and "RUN='runs/nope' is not a run" in proc.stderr
    finally:
        shutil.rmtree(str(Path(__file__).resolve().parent.parent / run))
