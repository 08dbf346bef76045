"""Before a new run on a GPU, ``mapush train`` asks this machine's verdict on MQE's fast step
(``mapush doctor --check-step``, cached per GPU, driver, torch, image and patches): the
check runs the first time only, a failed verdict turns the fast step off for the run (its
spec's fast_step is false, which config.json records and a resume keeps) and config.json
says so. The check itself is tests/test_real_mqe_step_check.py."""
import json
from pathlib import Path

import pytest
import yaml

from mapush.diagnostics import step_check
from mapush.diagnostics.gpu import GpuFacts
from mapush.run import train
from mapush.spec import RunSpec
from tests.conftest import DOUBLE_ROOT

FACTS = {"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "capability": [9, 0],
                      "total_mb": 81559, "free_mb": 80000}],
         "driver_version": "550.54.15", "torch_version": "1.13.1+cu116", "torch_cuda": "11.6"}


def spec_for(tmp_path, algo="ppo", config=None, device="cuda:0"):
    return RunSpec(algo=algo, task="go1push_mid", object="cuboid", num_envs=8, steps=1000,
                   seed=1, run_dir=str(tmp_path / "run"), sim_device=device, rl_device=device,
                   config=config)


@pytest.fixture
def checks(monkeypatch, tmp_path):
    """step_check.run replaced by a recorder that returns (and caches, as the real one does)
    the verdict the test sets in ``checks["passed"]``."""
    monkeypatch.setenv("MAPUSH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MAPUSH_ROOT", str(DOUBLE_ROOT))  # the object config write_config copies
    seen = {"calls": [], "passed": True}

    def fake_run(device, machine, task, obj="cuboid", envs=step_check.ENVS,
                 steps=step_check.STEPS):
        seen["calls"].append((device, machine, task))
        key, what = step_check.machine_key(machine, task)
        record = {"version": step_check.VERDICT_VERSION,
                  "passed": seen["passed"], "key": key, "machine": what, "steps": steps,
                  "task": task,
                  "envs": envs, "resets": 3, "seconds": 26.0, "graphs": {"07": "captured"},
                  "checked": "2026-11-26T10:00:00Z",
                  "first_difference": None if seen["passed"] else
                  {"array": "dof_pos", "step": 3, "elements": 12, "max_abs_diff": 1.2e-3}}
        if seen["passed"] is not None:
            step_check.store(record)
        else:
            record = {"passed": None, "error": "child A (fast step) failed with status 1"}
        return record

    monkeypatch.setattr(step_check, "run", fake_run)
    return seen


def facts():
    return GpuFacts.from_dict(FACTS)


def test_the_check_runs_once_per_machine_and_a_pass_keeps_the_fast_step(checks, tmp_path,
                                                                        capsys):
    spec = spec_for(tmp_path)
    same, record = train.check_step(spec, facts(), preflight=True)
    assert same == spec and record["ran"] is True and record["passed"] is True
    assert record["fast_step"] is True and "equals upstream's" in record["line"]
    assert "first run on this GPU" in capsys.readouterr().err
    again, second = train.check_step(spec, facts(), preflight=True)
    assert len(checks["calls"]) == 1  # the cached verdict answers the second run
    assert second["cache"] == record["cache"] and Path(record["cache"]).is_file()
    assert "first run" not in capsys.readouterr().err
    # another GPU, driver or torch is another machine: checked again
    other = GpuFacts.from_dict(dict(FACTS, driver_version="535.104.05"))
    train.check_step(spec, other, preflight=True)
    assert len(checks["calls"]) == 2
    # the high level's step (its wrapper's graph is 12, not 07) is checked on its own, the
    # first time a run of it starts; the mid level's verdict does not answer for it
    upper = spec.with_changes(task="go1push_upper")
    _, record = train.check_step(upper, facts(), preflight=True)
    assert [call[2] for call in checks["calls"]] == ["go1push_mid"] * 2 + ["go1push_upper"]
    assert "the high level's fast step equals upstream's" in record["line"]
    train.check_step(upper, facts(), preflight=True)
    assert len(checks["calls"]) == 3


@pytest.mark.parametrize("algo,path", [("ppo", ["mqe_fast_step"]),
                                       ("happo", ["env", "mqe_fast_step"])])
def test_a_failed_verdict_turns_the_fast_step_off_and_the_run_records_it(
        checks, tmp_path, capsys, algo, path):
    checks["passed"] = False
    user = tmp_path / "mine.yaml"
    user.write_text("gamma: 0.98\n" if algo == "ppo" else "train:\n  episode_length: 8\n")
    spec, record = train.check_step(spec_for(tmp_path, algo, str(user)), facts(), True)
    err = capsys.readouterr().err
    assert "MQE's fast step is off for this run" in err and "dof_pos at step 3" in err
    assert record["fast_step"] is False and record["passed"] is False
    assert spec.fast_step is False
    config_path, spec = train.write_config(spec, None, record)
    written = json.loads(config_path.read_text())
    assert written["step_check"] == record and written["spec"]["fast_step"] is False
    overrides = yaml.safe_load(Path(spec.config).read_text())
    assert overrides == yaml.safe_load(user.read_text())  # the user's config as they wrote it
    from mapush.run.resume import recorded_spec
    assert recorded_spec(written, Path(spec.run_dir)).fast_step is False  # a resume keeps it


def test_no_check_where_it_cannot_matter_or_was_not_asked(checks, tmp_path):
    off = tmp_path / "off.yaml"
    off.write_text("mqe_fast_step: false\n")
    spec, record = train.check_step(spec_for(tmp_path, config=str(off)), facts(), True)
    assert record == {"ran": False, "fast_step": False,
                      "line": "not needed: mqe_fast_step is false in the run's config"}
    _, record = train.check_step(spec_for(tmp_path, device="cpu"), None, True)
    assert record["ran"] is False and "CPU pipeline" in record["line"]
    _, record = train.check_step(spec_for(tmp_path), facts(), preflight=False)
    assert record["line"] == "not run: --no-preflight"
    assert checks["calls"] == []


def test_a_check_that_could_not_run_leaves_the_fast_step_on_and_is_not_cached(
        checks, tmp_path, capsys):
    checks["passed"] = None
    spec = spec_for(tmp_path)
    same, record = train.check_step(spec, facts(), True)
    assert same == spec and record["fast_step"] is True and record["passed"] is None
    assert "could not be checked here (child A (fast step) failed" in capsys.readouterr().err
    train.check_step(spec, facts(), True)
    assert len(checks["calls"]) == 2  # tried again next time


def test_the_verdict_is_read_only_from_a_regular_file_with_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPUSH_CACHE_DIR", str(tmp_path))
    path = step_check.cache_file("k")
    path.parent.mkdir(parents=True)
    current = {"version": step_check.VERDICT_VERSION, "passed": False, "key": "k"}
    # not JSON, not a verdict, a verdict of another schema or version, or another key's
    for text in ("not json", "[]", '{"passed": "yes"}', '{"passed": true}',
                 json.dumps(dict(current, version=1)), json.dumps(dict(current, key="j"))):
        path.write_text(text)
        assert step_check.cached("k") is None
    path.write_text(json.dumps(current))
    assert step_check.cached("k") == current


@pytest.mark.faults
def test_a_foreign_verdict_is_redone_not_a_traceback(checks, tmp_path, capsys):
    """#77: a verdict file of another shape ({"passed": true}) made every GPU run a KeyError;
    it is ignored, the check runs, and its verdict replaces the file."""
    spec = spec_for(tmp_path)
    key, _ = step_check.machine_key(step_check.machine("cuda:0", facts()), "go1push_mid")
    path = step_check.cache_file(key)
    path.parent.mkdir(parents=True)
    path.write_text('{"passed": true}')
    _, record = train.check_step(spec, facts(), preflight=True)
    assert len(checks["calls"]) == 1 and record["passed"] is True
    assert json.loads(path.read_text())["version"] == step_check.VERDICT_VERSION


@pytest.mark.faults
def test_a_cache_that_cannot_be_written_warns_and_the_run_goes_on(checks, tmp_path, capsys,
                                                                 monkeypatch):
    """#77: an unwritable cache (here a file where the folder should be: ENOTDIR, as root
    too) refused every GPU run; it is one warning naming MAPUSH_CACHE_DIR, the run goes on
    with this check's verdict."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("MAPUSH_CACHE_DIR", str(blocked))
    spec = spec_for(tmp_path)
    same, record = train.check_step(spec, facts(), preflight=True)
    assert record["passed"] is True and record["fast_step"] is True
    warnings = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert warnings and all("MAPUSH_CACHE_DIR" in l for l in warnings)
    train.check_step(spec, facts(), preflight=True)
    assert len(checks["calls"]) == 2  # nothing cached: checked again, never refused


@pytest.mark.faults
def test_a_fifo_in_place_of_the_lock_does_not_hang(checks, tmp_path, capsys):
    """#77: a FIFO at <key>.lock hung mapush train forever; it is opened without blocking,
    named in a warning, and the run goes on."""
    import os
    import threading

    key, _ = step_check.machine_key(step_check.machine("cuda:0", facts()), "go1push_mid")
    lock = step_check.cache_file(key).with_suffix(".lock")
    lock.parent.mkdir(parents=True)
    os.mkfifo(str(lock))
    done = []
    worker = threading.Thread(target=lambda: done.append(
        train.check_step(spec_for(tmp_path), facts(), preflight=True)), daemon=True)
    worker.start()
    worker.join(30)
    assert done and done[0][1]["passed"] is True, "check_step hung on a FIFO"
    assert "MAPUSH_CACHE_DIR" in capsys.readouterr().err
