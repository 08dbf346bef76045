"""``mapush sweep`` with the local executor: one run per GPU at a time, over the double.

The GPUs are faked: the sweep sees the GPUs of a ``MAPUSH_FAKE_GPU`` file (as the doctor
does) and gives each cell one of them through ``CUDA_VISIBLE_DEVICES``; the runs train on
the CPU and record the GPU they were given in their config.json.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import double_env, one_error, run_mapush

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


@pytest.fixture
def gpus(tmp_path):
    path = tmp_path / "gpus.json"
    device = {"name": "NVIDIA GeForce RTX 4090", "capability": [8, 9], "total_mb": 24000,
              "free_mb": 23000}
    path.write_text(json.dumps({"devices": [dict(device, index=i) for i in range(2)],
                                "driver_version": "550.54", "nvidia_smi": True,
                                "cuda_available": True}))
    return path


def sweep_env(upstream, gpus, **extra):
    return double_env(upstream, MAPUSH_FAKE_GPU=gpus, **extra)


def sweep_args(tmp, *extra):
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    return ["sweep", "--objects", "cuboid", "--algo", "ppo", "--steps", 200, "--num-envs", 4,
            "--config", config, "--root", tmp / "sweeps"] + CPU + list(extra)


def record(tmp, name):
    return json.loads((tmp / "sweeps" / name / "sweep.json").read_text())


def cells(tmp, name):
    return {c["name"]: c for c in record(tmp, name)["cells"]}



@pytest.fixture(scope="module")
def swept(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    fake = tmp / "gpus.json"
    device = {"name": "NVIDIA GeForce RTX 4090", "capability": [8, 9], "total_mb": 24000,
              "free_mb": 23000}
    fake.write_text(json.dumps({"devices": [dict(device, index=i) for i in range(2)],
                                "driver_version": "550.54", "nvidia_smi": True}))
    proc = run_mapush(sweep_args(tmp, "--seeds", "1,2,3", "--gpus", "0,1", "--name", "grid"),
                      sweep_env(upstream, fake), cwd=tmp, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"tmp": tmp, "gpus": fake, "proc": proc}


def test_every_cell_runs_on_one_gpu_of_its_own(swept):
    found = cells(swept["tmp"], "grid")
    assert sorted(found) == ["ppo-cuboid-seed1", "ppo-cuboid-seed2", "ppo-cuboid-seed3"]
    for name, cell in found.items():
        assert cell["state"] == "done" and cell["exit"] == 0
        run = Path(cell["run_dir"])
        config = json.loads((run / "config.json").read_text())
        assert config["provenance"]["cuda_visible_devices"] == str(cell["gpu"])
        assert config["spec"]["seed"] == cell["seed"]
        assert list((run / "checkpoints").iterdir())
        assert json.loads((run / "cell.json").read_text())["state"] == "done"
    assert {c["gpu"] for c in found.values()} == {0, 1}


def test_one_run_per_gpu_at_a_time(swept):
    """Two GPUs, three cells: the third waits for a GPU, and no GPU runs two cells at once."""
    by_gpu = {}
    for cell in cells(swept["tmp"], "grid").values():
        by_gpu.setdefault(cell["gpu"], []).append((cell["started"], cell["finished"]))
    assert sorted(len(v) for v in by_gpu.values()) == [1, 2]
    for spans in by_gpu.values():
        spans.sort()
        for (_s1, f1), (s2, _f2) in zip(spans, spans[1:]):
            assert s2 >= f1


def test_status_prints_the_grid(upstream, swept):
    proc = run_mapush(["sweep", "--status", "--name", "grid", "--root",
                       swept["tmp"] / "sweeps"], sweep_env(upstream, swept["gpus"]),
                      cwd=swept["tmp"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("sweep grid (local):") and lines[-1].strip() == "3 done"
    assert sum(1 for line in lines if " done " in line) == 3


def test_run_again_skips_finished_cells(upstream, swept):
    marks = {p: p.stat().st_mtime for p in (swept["tmp"] / "sweeps").rglob("checkpoints/*")}
    proc = run_mapush(sweep_args(swept["tmp"], "--seeds", "1,2,3", "--gpus", "0,1", "--name",
                                 "grid"), sweep_env(upstream, swept["gpus"]), cwd=swept["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("done, skipped") == 3
    assert {p: p.stat().st_mtime for p in marks} == marks


def test_the_report_gives_mean_and_std_over_seeds(upstream, swept):
    proc = run_mapush(["sweep", "--report", "--name", "grid", "--eval-envs", 4, "--root",
                       swept["tmp"] / "sweeps"], sweep_env(upstream, swept["gpus"]),
                      cwd=swept["tmp"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = swept["tmp"] / "sweeps" / "grid" / "report"
    (row,) = json.loads((out / "table.json").read_text())["rows"]
    assert (row["object"], row["algo"], row["seeds"]) == ("cuboid", "ppo", [1, 2, 3])
    assert row["success_rate"] == {"mean": pytest.approx(0.5), "std": pytest.approx(0.0),
                                   "n": 3}
    assert "| cuboid | ppo | 1,2,3 | 0.500 +- 0.000 |" in (out / "table.md").read_text()
    assert (out / "success.png").stat().st_size > 1000


@pytest.mark.faults
def test_the_report_passes_over_a_damaged_eval_file(upstream, swept):
    """#50: a cell whose eval.jsonl is damaged made `sweep --report` a traceback. Now one
    warning names it, the cell is evaluated afresh, and the table has every seed."""
    damaged = Path(cells(swept["tmp"], "grid")["ppo-cuboid-seed1"]["run_dir"]) / "eval.jsonl"
    damaged.write_text('{"checkpoint": "x", "success_rat')
    try:
        proc = run_mapush(["sweep", "--report", "--name", "grid", "--eval-envs", 4, "--root",
                           swept["tmp"] / "sweeps"], sweep_env(upstream, swept["gpus"]),
                          cwd=swept["tmp"], timeout=600)
    finally:
        damaged.unlink()
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "warning: %s is damaged: its evaluations are left out" % damaged in proc.stderr
    table = json.loads((swept["tmp"] / "sweeps" / "grid" / "report" / "table.json").read_text())
    assert table["rows"][0]["seeds"] == [1, 2, 3] and table["missing"] == []


@pytest.mark.parametrize("extra, needle", [
    (["--seeds", ""], "--seeds: empty list"),
    (["--seeds", "1,x"], "--seeds: 'x' in '1,x' is not an integer"),
    (["--seeds", "1,2,1"], "--seeds: '1,2,1' names a value twice"),
    (["--seeds", "1", "--gpus", "0,0"], "--gpus: '0,0' names a value twice"),
    (["--seeds", "1", "--gpus=0,-1"], "--gpus: '-1' is negative"),
    (["--seeds", "1", "--gpus", "0,5"], "--gpus: GPU 5 not shown by nvidia-smi (it shows 0, 1)"),
    (["--seeds", "1", "--objects", "cuboid,sphere"], "--objects: sphere not in"),
    (["--seeds", "1,2,3,4", "--name", "grid"], "sweep grid exists with another grid (seeds"),
    (["--seeds", "1", "--runner", "'unbalanced"], "--runner (or MAPUSH_SWEEP_RUNNER)"),  # #36
    (["--seeds", "1,4294967296"], "seed 4294967296: input should be less than 4294967296"),  # #36: failed in each cell
    (["--seeds", "1", "--name", "n" * 201], "use at most 200 letters"),  # #36: OSError
    (["--seeds", "1", "--name", ".."], "use at most 200 letters"),  # #50: out of --root
    (["--seeds", "1", "--name", "theirs"], "exists and is no sweep of mapush sweep"),  # #50
    # #77: the Slurm cell table is tab-separated: cell.json was written outside the sweep
    (["--seeds", "1", "--root", "sweeps\tx/y"], "holds a tab, a newline"),
])
def test_bad_input_is_one_line_before_anything_starts(upstream, swept, extra, needle):
    theirs = swept["tmp"] / "sweeps" / "theirs"  # a folder of the user's under --root
    theirs.mkdir(parents=True, exist_ok=True)
    (theirs / "notes.txt").write_text("mine")
    args = sweep_args(swept["tmp"], *extra)
    if "--objects" in extra:
        args[args.index("--objects") + 1] = extra[extra.index("--objects") + 1]
    proc = run_mapush(args, sweep_env(upstream, swept["gpus"]), cwd=swept["tmp"])
    assert needle in one_error(proc)
    assert "--name" in extra or not (swept["tmp"] / "sweeps" / "ppo_cuboid_seeds1").exists()
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]


def test_ctrl_c_stops_every_running_cell_with_a_checkpoint_and_resume_continues(upstream,
                                                                              tmp_path, gpus):
    env = sweep_env(upstream, gpus, MQE_DOUBLE_STEP_SLEEP="0.01")
    cmd = [sys.executable, "-m", "mapush"] + [str(a) for a in sweep_args(
        tmp_path, "--seeds", "1,2,3", "--gpus", "0,1", "--name", "stop", "--steps", 2000)]
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    sweep = tmp_path / "sweeps" / "stop"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        # both running cells have finished an update: a run stopped before its first one
        # has nothing to checkpoint and resumes from step 0 (docs/lifecycle.md)
        logs = [sweep / ("ppo-cuboid-seed%d" % s) / "log.txt" for s in (1, 2)]
        if all(p.is_file() and "train/" in p.read_text() for p in logs):
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the sweep and its runs
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    found = cells(tmp_path, "stop")
    assert [found["ppo-cuboid-seed%d" % s]["state"] for s in (1, 2, 3)] == \
        ["stopped", "stopped", "pending"]
    for seed in (1, 2):
        assert list((sweep / ("ppo-cuboid-seed%d" % seed) / "checkpoints").iterdir())
    again = run_mapush(sweep_args(tmp_path, "--seeds", "1,2,3", "--gpus", "0,1", "--name",
                                  "stop", "--steps", 2000), sweep_env(upstream, gpus),
                       cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    found = cells(tmp_path, "stop")
    assert all(c["state"] == "done" for c in found.values())
    for seed in (1, 2):
        cell = found["ppo-cuboid-seed%d" % seed]
        assert cell["command"] == ["mapush", "train", "--spec", cell["spec"]]
        assert cell["resumed"] is True  # mapush train --spec continued the cell's run
        assert json.loads(Path(cell["spec"]).read_text())["steps"] == 2000
        assert json.loads((Path(cell["run_dir"]) / "config.json").read_text())["resumes"]


def test_a_hundred_seeds_make_a_short_default_name(upstream, swept):
    """#36: the default name joined every seed (OSError: File name too long after
    runs/sweeps was made). A grid of more than 8 seeds is named by their range and count."""
    args = sweep_args(swept["tmp"], "--seeds", ",".join(map(str, range(1, 101))), "--status")
    proc = run_mapush(args, sweep_env(upstream, swept["gpus"]), cwd=swept["tmp"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sweep ppo_cuboid_seeds1..100-n100 " in proc.stdout, proc.stdout[:2000]



def test_a_cpu_sweep_needs_no_nvidia_smi_and_runs_per_gpu_cells_at_once(upstream, tmp_path):
    """#38 item 8: with --sim-device and --rl-device cpu the local executor lists no GPU (no
    nvidia-smi on PATH, no MAPUSH_FAKE_GPU) and runs --per-gpu cells at once on the CPU."""
    env = double_env(upstream, PATH=os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep)
        if not (Path(p) / "nvidia-smi").exists()))
    env.pop("MAPUSH_FAKE_GPU", None)
    proc = run_mapush(sweep_args(tmp_path, "--seeds", "1,2", "--per-gpu", 2, "--name", "cpu"),
                      env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on the CPU" in proc.stderr
    found = cells(tmp_path, "cpu")
    assert {c["state"] for c in found.values()} == {"done"}
    assert {c["gpu"] for c in found.values()} == {"cpu"}
    (s1, f1), (s2, f2) = sorted((c["started"], c["finished"]) for c in found.values())
    assert s2 < f1  # both at once
    for cell in found.values():
        config = json.loads((Path(cell["run_dir"]) / "config.json").read_text())
        assert config["provenance"]["cuda_visible_devices"] == ""


@pytest.mark.faults
def test_status_lists_every_cell_when_records_are_damaged(upstream, tmp_path):
    """#50: a damaged cell.json (truncated, the wrong shape, a FIFO) made `sweep --status` a
    traceback or a hang, and a damaged sweep.json a traceback. Each damaged cell.json is one
    warning and its cell keeps the state sweep.json holds; a damaged sweep.json is one line."""
    from mapush.sweep import GRID_KEYS

    folder = tmp_path / "sweeps" / "hand"
    grid = dict((key, None) for key in GRID_KEYS)
    grid.update(algos=["ppo"], objects=["cuboid"], seeds=[1, 2, 3, 4], task="go1push_mid",
                sim_device="cpu", rl_device="cpu")
    cells = [{"name": "ppo-cuboid-seed%d" % s, "algo": "ppo", "object": "cuboid", "seed": s,
              "run_dir": str(folder / ("ppo-cuboid-seed%d" % s)), "state": "pending"}
             for s in (1, 2, 3, 4)]
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps({"name": "hand", "grid": grid,
                                                   "cells": cells, "executor": "slurm"}))
    for cell in cells:
        Path(cell["run_dir"]).mkdir()
    mine = [Path(c["run_dir"]) / "cell.json" for c in cells]
    mine[0].write_text('{"state": "do')
    mine[1].write_text('["done"]')
    os.mkfifo(str(mine[2]))
    mine[3].write_text('{"state": "done", "exit": 0}')
    args = ["sweep", "--status", "--name", "hand", "--root", folder.parent]
    proc = run_mapush(args, double_env(upstream), cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    warnings = proc.stderr.strip().splitlines()
    assert sorted(w.split(" is damaged")[0] for w in warnings) == \
        sorted("warning: %s" % p for p in mine[:3]), warnings
    states = dict(line.split()[:2] for line in proc.stdout.splitlines()[1:5])
    assert states == {"ppo-cuboid-seed1": "pending", "ppo-cuboid-seed2": "pending",
                      "ppo-cuboid-seed3": "pending", "ppo-cuboid-seed4": "done"}, proc.stdout
    assert proc.stdout.splitlines()[-1].strip() == "1 done, 3 pending"
    for damaged in ('{"grid": ', '{"grid": {}, "cells": []}', '{"name": "hand", "grid": %s, '
                    '"cells": [{"name": 5}]}' % json.dumps(grid)):
        (folder / "sweep.json").write_text(damaged)
        error = one_error(run_mapush(args, double_env(upstream), cwd=tmp_path, timeout=60))
        assert str(folder / "sweep.json") in error and ("damaged" in error or
                                                        "no record of" in error), error


@pytest.mark.faults
def test_unbalanced_slurm_options_are_one_line_before_anything_is_written(upstream, tmp_path):
    """#50: MAPUSH_SLURM_OPTIONS with an unbalanced quote was a traceback after the sweep's
    files were written. Now one line, exit 2, no sbatch call and no sweep folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "sbatch-called"
    (bin_dir / "sbatch").write_text("#!/bin/sh\ntouch %s\necho 7\n" % called)
    (bin_dir / "sbatch").chmod(0o755)
    env = double_env(upstream, MAPUSH_SLURM_OPTIONS="--comment='unbalanced")
    env["PATH"] = "%s:%s" % (bin_dir, env.get("PATH", os.environ["PATH"]))
    proc = run_mapush(sweep_args(tmp_path, "--seeds", "1", "--executor", "slurm", "--name",
                                 "cluster"), env, cwd=tmp_path)
    error = one_error(proc)
    assert error.startswith("error: MAPUSH_SLURM_OPTIONS: No closing quotation"), error
    assert not called.exists() and not (tmp_path / "sweeps").exists()
