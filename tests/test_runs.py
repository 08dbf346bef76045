"""``mapush runs [DIR]`` (#38 item 11): one line per run with its state, read from the
record, the checkpoints, the lock, phases.log and eval.jsonl, and nothing written."""
import json
import os
import subprocess
import sys
import time

from tests.conftest import double_env, one_error, run_mapush, tree_hash


def make_run(root, name, steps, trained, phases=(), evals=(), record=None):
    """A run folder as mapush train leaves it; ``trained`` None: no checkpoints/ yet,
    ``phases`` None: no phases.log."""
    run = root / "runs" / "go1push_mid" / "cuboid" / "ppo" / name
    run.mkdir(parents=True)
    if trained is not None:
        (run / "checkpoints").mkdir()
    (run / "config.json").write_text(record if record is not None else json.dumps(
        {"spec": {"task": "go1push_mid", "object": "cuboid", "algo": "ppo", "steps": steps}}))
    for step in trained or ():
        checkpoint = run / "checkpoints" / ("rl_model_%d_steps" % step)
        checkpoint.mkdir()
        (checkpoint / "meta.json").write_text(json.dumps({"step": step}))
    if phases is not None:
        (run / "phases.log").write_text("".join("1.0 %s\n" % phase for phase in phases))
    if evals:
        (run / "eval.jsonl").write_text("".join(json.dumps(
            {"checkpoint": "rl_model_%d_steps" % (k + 1), "success_rate": s}) + "\n"
            for k, s in enumerate(evals)))
    return run


def test_runs_lists_each_run_with_its_state_and_writes_nothing(tmp_path):
    done = make_run(tmp_path, "done", 400, [200, 400], ["start", "training", "shutdown"],
                    [0.5, 0.75])
    (done / "step.json").write_text(json.dumps({"graphs": dict.fromkeys(["07", "08", "09"],
                                                                        "captured")}))
    stopped = make_run(tmp_path, "stopped", 1000, [400], ["start", "training", "shutdown"])
    (stopped / "step.json").write_text(json.dumps({"graphs": {
        "07": "captured", "08": "off: a host sync or copy inside the capture (get_euler_xyz)",
        "09": "off: a host sync or copy inside the capture (get_euler_xyz)"}}))
    make_run(tmp_path, "crashed", 1000, [200], ["start", "training"])
    make_run(tmp_path, "early", 1000, None, ["start"])  # died before its first checkpoint
    make_run(tmp_path, "copied", 200, [200], None)  # its checkpoints, but no phases.log
    make_run(tmp_path, "bare", 1000, None, None)  # a config.json alone: not a run's folder
    running = make_run(tmp_path, "running", 1000, [], ["start"])
    make_run(tmp_path, "torn", 1000, [], record='{"spec": {"ta')
    (running / ".lock").write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "f = open(sys.argv[1], 'w')\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\n"
                               "time.sleep(60)\n", str(running / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = tree_hash(tmp_path / "runs")
        proc = run_mapush(["runs"], env=double_env(), cwd=tmp_path)
        after = tree_hash(tmp_path / "runs")
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert before == after  # not even a lock file was made
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["run", "task", "object", "algo", "steps", "checkpoint", "state",
                                "graphs", "success", "world", "variant"]
    # (#81: the world and variant columns last; a record without provenance: isaacgym)
    assert all(line.split()[-2:] in (["isaacgym", "-"], ["-", "-"]) for line in lines[1:-1])
    found = {line.split()[0].rsplit("/", 1)[-1]: line.split()[1:-2] for line in lines[1:-1]}
    assert found["done"] == ["go1push_mid", "cuboid", "ppo", "400/400", "rl_model_400_steps",
                             "done", "07+08+09", "0.750"]
    # step.json (mapush/envs/step_record.py): which of MQE's step graphs the run replayed
    assert found["stopped"][3:] == ["400/1000", "rl_model_400_steps", "stopped", "08+09", "off",
                                    "-"]
    assert found["crashed"][3:] == ["200/1000", "rl_model_200_steps", "crashed", "-", "-"]
    assert found["running"][3:] == ["0/1000", "-", "running", "-", "-"]
    assert found["torn"][-4:] == ["damaged", "record", "-", "-"]
    assert found["early"][3:] == ["0/1000", "-", "crashed", "-", "-"]
    assert found["copied"][3:] == ["200/200", "rl_model_200_steps", "done", "-", "-"]
    assert "bare" not in found
    assert lines[-1] == "7 run(s) under runs"
    # once the holder is gone, the run that was running is a crash
    time.sleep(0.2)
    proc = run_mapush(["runs", "runs/go1push_mid"], env=double_env(), cwd=tmp_path)
    assert [line for line in proc.stdout.splitlines()
            if "running" in line.split()[0]][0].split()[-5] == "crashed"


def test_one_damaged_run_is_one_line_and_the_others_are_listed(tmp_path):
    """#50: a record of the wrong shape, numbers that are not numbers, and a FIFO where a
    file should be (config.json, phases.log, a checkpoint's meta.json) each make their run
    one "damaged record" line and one line on stderr, never a traceback or a hang."""
    make_run(tmp_path, "good", 400, [400], ["start", "shutdown"], [0.5])
    make_run(tmp_path, "spec-is-5", 400, [], record='{"spec": 5}')
    make_run(tmp_path, "steps-abc", 400, [], record='{"spec": {"steps": "abc"}}')
    make_run(tmp_path, "steps-inf", 400, [], record='{"spec": {"steps": Infinity}}')
    make_run(tmp_path, "success-text", 400, [400], evals=["high"])
    torn = make_run(tmp_path, "eval-torn", 400, [400], ["start", "shutdown"], [0.5])
    (torn / "eval.jsonl").write_text('{"checkpoint": "x", "succ')  # its run is still listed
    fifo_config = make_run(tmp_path, "fifo-config", 400, [])
    (fifo_config / "config.json").unlink()
    os.mkfifo(str(fifo_config / "config.json"))
    fifo_phases = make_run(tmp_path, "fifo-phases", 400, [200])
    (fifo_phases / "phases.log").unlink()
    os.mkfifo(str(fifo_phases / "phases.log"))
    fifo_meta = make_run(tmp_path, "fifo-meta", 400, [200])
    (fifo_meta / "checkpoints" / "rl_model_200_steps" / "meta.json").unlink()
    os.mkfifo(str(fifo_meta / "checkpoints" / "rl_model_200_steps" / "meta.json"))
    started = time.monotonic()
    proc = run_mapush(["runs"], env=double_env(), cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 30
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    found = {line.split()[0].rsplit("/", 1)[-1]: line.split()[1:-2]  # (world, variant)
             for line in proc.stdout.splitlines()[1:-1]}
    assert found["good"][3:] == ["400/400", "rl_model_400_steps", "done", "-", "0.500"]
    damaged = ["spec-is-5", "steps-abc", "steps-inf", "success-text", "fifo-config"]
    for name in damaged:
        assert found[name][-4:-2] == ["damaged", "record"], (name, found[name])
    warned = [line for line in proc.stderr.splitlines() if "damaged record" in line]
    assert len(warned) == len(damaged), proc.stderr
    # an unreadable phases.log or meta.json is what a crash or a torn checkpoint leaves
    assert found["fifo-phases"][-3] == "crashed"
    assert found["fifo-meta"][3:5] == ["0/400", "-"]
    assert found["eval-torn"][3:] == ["400/400", "rl_model_400_steps", "done", "-", "-"]
    assert "eval-torn/eval.jsonl is damaged: its evaluations are left out" in proc.stderr
    assert proc.stdout.splitlines()[-1] == "9 run(s) under runs"


def test_runs_of_a_missing_folder_is_one_line(tmp_path):
    error = one_error(run_mapush(["runs", tmp_path / "nowhere"], env=double_env(), cwd=tmp_path))
    assert error == "error: DIR %s: no such folder (runs are written under runs/ by default)" \
        % (tmp_path / "nowhere")
    # #81: before the first run, the default folder's absence is an empty list, not an error
    proc = run_mapush(["runs"], env=double_env(), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("0 run(s)"), proc.stdout + proc.stderr
