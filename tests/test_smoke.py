"""``mapush smoke``: the pytest plugin of tests/gpu (stage order, dependencies, limits,
children, the JSON report and the JUnit file) driven with fake stages through the real
command, the TensorBoard reader and memory bound, and the real stages end to end over the
MQE double."""
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mapush.smoke import MARKER, prepare_workdir
from mapush.events import read_scalars
from tests.gpu import test_stages as smoke_stages
from tests.gpu.conftest import (FAILED, PASSED, SKIPPED, TIMEOUTS, UPDATES, ChildRecord,
                                ChildResult, Smoke,
                                StageFailure, episode_length, group_members)
from tests.gpu.test_stages import GPU_GROWTH_BOUND, HOST_GROWTH_BOUND, memory_growth
from tests.conftest import REPO, double_env, run_mapush

PY = sys.executable


def StageContext(workdir, sim_device, rl_device):  # noqa: N802 - the stages' context
    return Smoke(workdir, sim_device, rl_device, {})


def _ctx(tmp_path):
    return StageContext(tmp_path, "cpu", "cpu")


def _report(tmp_path):
    path = tmp_path / "report.json"
    return path, json.loads(path.read_text()) if path.exists() else None


def _junit(report_path):
    root = ET.parse(str(Path(report_path).parent / "junit.xml")).getroot()
    return {case.get("name"): case for case in root.iter("testcase")}, root


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_fake(tmp_path, stages, timeout=60, background=False):
    """``mapush smoke --report tmp/report.json`` over fake stages: ``stages`` is the body of
    a test_stages.py beside a conftest that is tests/gpu's plugin."""
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "conftest.py").write_text("from tests.gpu.conftest import *  # noqa: F401,F403\n")
    (checks / "test_stages.py").write_text(
        "import json, sys, time\nimport pytest\nfrom tests.gpu.conftest import StageFailure\n"
        + textwrap.dedent(stages))
    env = dict(os.environ, MAPUSH_SMOKE_TESTS=str(checks), PYTHONPATH=str(REPO),
               TMP=str(tmp_path))
    argv = [PY, "-m", "mapush", "smoke", "--report", str(tmp_path / "report.json"),
            "--sim-device", "cpu", "--rl-device", "cpu"]
    if background:
        return subprocess.Popen(argv, env=env, cwd=str(tmp_path), stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(argv, env=env, cwd=str(tmp_path), stderr=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, timeout=timeout)


def test_all_stages_pass_gives_exit_0_and_a_complete_report(tmp_path):
    result = run_fake(tmp_path, """
        @pytest.mark.timeout(5)
        def test_a(smoke):
            "the first stage"
            (smoke.workdir / "calls").write_text("a")
            smoke.details = {"n": 1}

        @pytest.mark.timeout(5)
        @pytest.mark.needs("a")
        def test_b(smoke):
            (smoke.workdir / "calls").write_text((smoke.workdir / "calls").read_text() + "b")
            smoke.details = {"seen": json.loads((smoke.workdir / "report.json").read_text())
                             ["stages"][0]["name"]}
    """)
    _, report = _report(tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text() == "ab"
    assert report["passed"] is True and report["complete"] is True
    assert report["failed_stage"] is None
    assert [s["status"] for s in report["stages"]] == [PASSED, PASSED]
    assert report["stages"][0]["details"] == {"n": 1}
    assert report["stages"][0]["description"] == "the first stage"
    assert report["stages"][1]["details"] == {"seen": "a"}
    assert all(s["duration_s"] >= 0 and s["timeout_s"] == 5 for s in report["stages"])
    assert report["timeouts"] == {"a": 5, "b": 5} and report["needs"]["b"] == ["a"]
    cases, root = _junit(tmp_path / "report.json")
    assert set(cases) == {"a", "b"} and root.find("testsuite").get("name") == "mapush-smoke"
    assert not list(root.iter("failure")) and not list(root.iter("skipped"))
    assert result.stderr.strip().splitlines()[-1].startswith("smoke: passed, 2 stages")


def test_a_failing_stage_names_itself_and_its_dependents_are_skipped(tmp_path):
    result = run_fake(tmp_path, """
        def test_first(smoke):
            pass

        @pytest.mark.needs("first")
        def test_broken(smoke):
            raise StageFailure("the widget is broken", widget=3)

        @pytest.mark.needs("broken")
        def test_after(smoke):
            pass

        @pytest.mark.needs("first")
        def test_independent(smoke):
            pass

        @pytest.mark.needs("after")
        def test_transitive(smoke):
            pass
    """)
    _, report = _report(tmp_path)
    by_name = {s["name"]: s for s in report["stages"]}
    assert result.returncode == 1
    assert [s["name"] for s in report["stages"]] == ["first", "broken", "after", "independent",
                                                     "transitive"]
    assert report["passed"] is False and report["failed_stage"] == "broken"
    assert by_name["broken"]["message"] == "the widget is broken"
    assert by_name["broken"]["details"] == {"widget": 3}
    assert by_name["after"]["status"] == SKIPPED and "broken" in by_name["after"]["message"]
    assert by_name["transitive"]["status"] == SKIPPED and "after" in by_name["transitive"]["message"]
    assert by_name["independent"]["status"] == PASSED
    cases, root = _junit(tmp_path / "report.json")
    assert "the widget is broken" in cases["broken"].find("failure").get("message")
    assert cases["after"].find("skipped") is not None
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "2")
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: smoke test failed at stage broken: the widget is broken")


def test_a_bug_in_a_stage_is_that_stage_failing(tmp_path):
    result = run_fake(tmp_path, """
        def test_buggy(smoke):
            return {}["missing"]
    """)
    _, report = _report(tmp_path)
    assert result.returncode == 1
    assert report["stages"][0]["message"].startswith("KeyError")
    assert "traceback" in report["stages"][0]["details"]


def test_a_stage_past_its_limit_is_cut_and_its_children_killed(tmp_path):
    start = time.monotonic()
    result = run_fake(tmp_path, """
        @pytest.mark.timeout(1.5)
        def test_hang(smoke):
            # The child and a grandchild in its process group both hang.
            smoke.run_child(["sh", "-c", "sleep 60 & echo $$ $! > %s/pids; wait"
                             % smoke.workdir])

        @pytest.mark.needs("hang")
        def test_next(smoke):
            pass
    """)
    elapsed = time.monotonic() - start
    _, report = _report(tmp_path)
    stage = report["stages"][0]
    assert result.returncode == 1 and elapsed < 30
    assert stage["status"] == FAILED and stage["timed_out"] is True
    assert "timed out after 1.5 s" in stage["message"]
    assert 1.5 <= stage["duration_s"] < 10
    assert report["stages"][1]["status"] == SKIPPED
    assert report["children"][0]["killed"] is True
    for pid in (tmp_path / "pids").read_text().split():
        assert not _alive(int(pid))
    cases, _root = _junit(tmp_path / "report.json")
    assert "Timeout" in cases["hang"].find("failure").get("message")


def test_a_child_that_leaves_processes_behind_is_recorded_and_they_are_killed(tmp_path):
    run_fake(tmp_path, """
        def test_leaky(smoke):
            result = smoke.run_child(["sh", "-c", "sleep 60 & echo $! > %s/orphan"
                                      % smoke.workdir])
            smoke.details = {"rc": result.returncode}
    """)
    _, report = _report(tmp_path)
    orphan = int((tmp_path / "orphan").read_text())
    assert report["stages"][0]["details"] == {"rc": 0}
    assert report["children"][0]["leftover"] == [orphan]
    assert not _alive(orphan)
    assert group_members(report["children"][0]["pid"]) == []


def test_child_output_goes_to_log_files_and_the_last_stderr_line_is_the_diagnosis(tmp_path):
    ctx = _ctx(tmp_path)
    ctx.stage = "demo"
    result = ctx.run_child([PY, "-c", "import sys; print('out'); "
                                      "print('noise\\nerror: the reason', file=sys.stderr); "
                                      "sys.exit(3)"], extra_env={"X": "1"})
    assert result.returncode == 3
    assert result.last_line() == "error: the reason"
    assert (tmp_path / "logs" / "demo.stdout.log").read_text() == "out\n"
    assert ctx.children[0].returncode == 3


def test_the_report_is_rewritten_after_every_stage(tmp_path):
    run_fake(tmp_path, """
        def test_first(smoke):
            pass

        def test_second(smoke):
            seen = json.loads((smoke.workdir / "report.json").read_text())
            (smoke.workdir / "seen.json").write_text(json.dumps(seen))
    """)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["complete"] is False and seen["status"] == "running"
    assert [s["name"] for s in seen["stages"]] == ["first"]
    assert seen["pending"] == ["second"]
    assert _report(tmp_path)[1]["pending"] == []


def test_sigterm_ends_the_run_with_a_report_and_kills_the_running_child(tmp_path):
    proc = run_fake(tmp_path, """
        def test_hang(smoke):
            smoke.run_child(["sh", "-c", "echo $$ > %s/pid; sleep 60" % smoke.workdir])

        def test_later(smoke):
            pass
    """, background=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    report = json.loads((tmp_path / "report.json").read_text())
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert report["complete"] is True and report["failed_stage"] == "hang"
    assert report["stages"][0]["message"] == "interrupted by SIGTERM"
    assert report["stages"][1]["status"] == SKIPPED
    assert not _alive(int((tmp_path / "pid").read_text()))
    assert err.strip().splitlines()[-1].startswith("error: smoke test failed at stage hang")


def test_prepare_workdir_empties_its_own_folders_and_refuses_others(tmp_path):
    prepare_workdir(tmp_path)
    stale = tmp_path / "ppo" / "checkpoints" / "old"
    stale.mkdir(parents=True)
    prepare_workdir(tmp_path)
    assert not stale.exists() and (tmp_path / "ppo" / MARKER).exists()
    other = tmp_path / "elsewhere"
    (other / "logs").mkdir(parents=True)
    (other / "logs" / "keep.txt").write_text("mine")
    from mapush.errors import UsageError

    with pytest.raises(UsageError, match="not made by mapush smoke"):
        prepare_workdir(other)
    assert (other / "logs" / "keep.txt").read_text() == "mine"


def test_a_report_path_that_is_a_folder_is_a_usage_error(tmp_path):
    result = run_mapush(["smoke", "--report", tmp_path], env=dict(os.environ), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: --report %s is a folder" % tmp_path)


# -- TensorBoard scalars and the memory bound -------------------------------------------

def test_scalars_are_read_from_tensorboardx_and_torch_event_files(tmp_path):
    from tensorboardX import SummaryWriter as XWriter
    from torch.utils.tensorboard import SummaryWriter as TWriter

    xw = XWriter(str(tmp_path / "logs" / "x"))
    for i in range(4):
        xw.add_scalar("memory/gpu_allocated_mb", 100.0 + i, i * 1000)
    xw.close()
    tw = TWriter(str(tmp_path / "logs" / "t"))
    tw.add_scalar("memory/host_rss_mb", 512.25, 7)
    tw.add_scalar("memory/host_rss_mb", 513.5, 9, new_style=True)
    tw.add_histogram("weights", __import__("numpy").array([1.0, 2.0, 3.0]), 1)
    tw.close()
    scalars = read_scalars(tmp_path / "logs")
    assert scalars["memory/gpu_allocated_mb"] == [(0, 100.0), (1000, 101.0), (2000, 102.0),
                                                  (3000, 103.0)]
    assert scalars["memory/host_rss_mb"] == [(7, 512.25), (9, 513.5)]
    assert "weights" not in scalars


def test_a_torn_last_record_is_ignored(tmp_path):
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    writer.add_scalar("a", 1.0, 1)
    writer.add_scalar("a", 2.0, 2)
    writer.close()
    path = next(p for p in tmp_path.iterdir() if "tfevents" in p.name)
    path.write_bytes(path.read_bytes()[:-5])
    assert read_scalars(tmp_path)["a"] == [(1, 1.0)]


def test_memory_growth_within_the_bound_passes_and_beyond_it_fails():
    flat = [(i, 1000.0 + (i % 2) * 10) for i in range(6)]
    verdict = memory_growth(flat, HOST_GROWTH_BOUND)
    assert verdict["ok"] is True and verdict["growth_mb"] == 10.0
    bound = max(HOST_GROWTH_BOUND[0], HOST_GROWTH_BOUND[1] * 1000.0)
    leaking = [(i, 1000.0 + i * bound / 3.0) for i in range(6)]
    verdict = memory_growth(leaking, HOST_GROWTH_BOUND)
    assert verdict["ok"] is False and verdict["growth_mb"] > bound
    assert verdict["bound_mb"] == round(bound, 1)
    assert memory_growth([(0, 10.0), (1, float("nan")), (2, 10.0)], (1.0, 0.0))["samples"] == 2


def _memory_logs(workdir, tag, series, extra=None):
    from tensorboardX import SummaryWriter

    for algo in ("ppo", "happo"):
        writer = SummaryWriter(str(workdir / algo / "logs"))
        for step, value in enumerate(series):
            writer.add_scalar(tag, value, (step + 1) * 1000)
        for name, value in (extra or {}).items():
            writer.add_scalar(name, value, 5000)
        writer.close()


def test_the_memory_stage_reads_the_trainers_scalars_for_the_device(tmp_path):
    _memory_logs(tmp_path, "memory/gpu_allocated_mb", [500.0, 510.0, 505.0, 512.0])
    gpu = StageContext(tmp_path, "cuda:0", "cuda:0")
    details = smoke_stages.memory(gpu)
    assert details["tag"] == "memory/gpu_allocated_mb"
    assert details["ppo"]["samples"] == 4 and details["ppo"]["growth_mb"] == 12.0
    # On the CPU the stage wants host RSS, which these logs do not have.
    with pytest.raises(StageFailure, match="logged no memory/host_rss_mb"):
        smoke_stages.memory(StageContext(tmp_path, "cpu", "cpu"))


def test_the_memory_stage_fails_on_growth_beyond_the_bound(tmp_path):
    first = 1000.0
    bound = max(GPU_GROWTH_BOUND[0], GPU_GROWTH_BOUND[1] * first)
    _memory_logs(tmp_path, "memory/gpu_allocated_mb", [first, first + bound / 2, first + bound + 1])
    with pytest.raises(StageFailure, match=r"ppo: memory/gpu_allocated_mb grew by") as info:
        smoke_stages.memory(StageContext(tmp_path, "cuda:0", "cuda:0"))
    assert info.value.details["happo"]["ok"] is False


def test_the_memory_stage_fails_when_the_watchdog_saw_steady_growth(tmp_path):
    _memory_logs(tmp_path, "memory/host_rss_mb", [300.0, 300.0, 301.0],
                 extra={"memory/growth_mb_per_1k_updates": 900.0})
    with pytest.raises(StageFailure, match="watchdog reported steady growth"):
        smoke_stages.memory(StageContext(tmp_path, "cpu", "cpu"))


def _child(stage, returncode, **kw):
    return ChildRecord(stage=stage, label=stage, argv=["x"], stdout="o", stderr="e",
                       returncode=returncode, **kw)


def test_the_step_stage_fails_with_the_check_line_and_its_fix(tmp_path):
    """The stage runs `mapush doctor --check-step` with the smoke run's devices and envs, and
    fails with the check's own line when the fast step differs from upstream's."""
    ctx = Smoke(tmp_path, "cuda:0", "cuda:0", {"num_envs": 64})
    seen = []
    check = {"name": "step", "status": "fail", "message": "the fast step differs from "
             "upstream's: dof_pos at step 3 (12 elements, by up to 0.0012; graphs 07 captured)",
             "fix": "train with upstream's step (PPO: --set mqe_fast_step=false; ...)"}

    def run_child(argv, label=None, **kw):
        seen.append([str(a) for a in argv])
        out = json.dumps({"ok": False, "checks": [{"name": "gpu", "status": "ok"}, check]})
        return ChildResult(1, out, "", _child("step", 1))

    ctx.run_child = run_child
    with pytest.raises(StageFailure) as info:
        smoke_stages.step(ctx)
    assert str(info.value) == "step: %s (fix: %s)" % (check["message"], check["fix"])
    argv = seen[0]
    assert argv[argv.index("--check-step-envs") + 1] == "64"
    assert argv[argv.index("--sim-device") + 1] == "cuda:0" and "--check-step" in argv
    check.update(status="ok", message="the fast step equals upstream's", fix=None)
    assert smoke_stages.step(ctx)["check"]["message"] == "the fast step equals upstream's"


def test_the_clean_exit_stage_names_every_unclean_child(tmp_path):
    for algo, last in (("ppo", "shutdown"), ("happo", "training")):
        (tmp_path / algo).mkdir()
        (tmp_path / algo / "phases.log").write_text("1.0 start\n2.0 %s\n" % last)
    ctx = StageContext(tmp_path, "cpu", "cpu")
    ctx.children = [_child("doctor", 0), _child("train_ppo", -11), _child("eval", 0, leftover=[42]),
                    _child("env", 0, killed=True)]
    with pytest.raises(StageFailure) as info:
        smoke_stages.clean_exit(ctx)
    message = str(info.value)
    assert "train_ppo died from SIGSEGV" in message
    assert "eval left processes [42] running" in message
    assert "env had to be killed" in message
    assert "happo training child ended in phase training" in message
    assert "doctor" not in message
    ctx.children = [_child("doctor", 0)]
    (tmp_path / "happo" / "phases.log").write_text("1.0 start\n2.0 shutdown\n")
    assert smoke_stages.clean_exit(ctx)["last_phase"] == {"ppo": "shutdown", "happo": "shutdown"}


def test_the_stage_limits_keep_the_run_under_ten_minutes():
    assert sum(TIMEOUTS.values()) < 600
    assert all(math.isfinite(t) and t > 0 for t in TIMEOUTS.values())


# -- the real stages, end to end over the MQE double ------------------------------------

SMOKE_CPU = ["--sim-device", "cpu", "--rl-device", "cpu", "--num-envs", "2"]


@pytest.fixture(scope="module")
def smoke_env(upstream, tmp_path_factory):
    """The double's environment, with a patch record for MAPush beside the real OpenRL and
    HARL ones (the double stands in for patched MAPush; the doctor checks all three)."""
    records = tmp_path_factory.mktemp("records")
    for path in Path(upstream["records"]).glob("*.json"):
        (records / path.name).write_text(path.read_text())
    (records / "mapush.json").write_text(json.dumps(
        {"component": "mapush", "status": "applied",
         "patches": [{"name": "mqe-double", "sha256": "0" * 64}]}))
    return double_env(upstream, MAPUSH_PATCH_RECORDS=records,
                      MAPUSH_CACHE_DIR=tmp_path_factory.mktemp("cache"))


def _smoke(tmp_path, env, *extra):
    report = tmp_path / "runs" / "smoke" / "report.json"
    start = time.monotonic()
    result = run_mapush(["smoke", "--report", report] + SMOKE_CPU + list(extra), env=env,
                        cwd=tmp_path, timeout=600)
    return result, json.loads(report.read_text()), time.monotonic() - start


def test_smoke_on_the_cpu_double_passes_every_stage(tmp_path, smoke_env):
    result, report, elapsed = _smoke(tmp_path, smoke_env)
    assert result.returncode == 0, result.stderr[-3000:]
    stages = {s["name"]: s for s in report["stages"]}
    assert list(stages) == ["doctor", "env", "step", "train_ppo", "train_happo", "eval",
                            "memory", "clean_exit"]
    assert all(s["status"] == PASSED for s in stages.values())
    assert report["passed"] is True and report["complete"] is True
    assert (report["sim_device"], report["rl_device"]) == ("cpu", "cpu")
    # Each stage did its job: real children, real files.
    assert stages["env"]["details"]["num_envs"] == 2 and stages["env"]["details"]["device"] == "cpu"
    assert stages["env"]["details"]["phases"][-1] == "shutdown"
    work = tmp_path / "runs" / "smoke"
    for algo in ("ppo", "happo"):
        details = stages["train_%s" % algo]["details"]
        assert len(details["checkpoints"]) >= 2  # the interval one and the final one
        assert details["final_step"] == UPDATES * 2 * episode_length(algo)
        assert all(Path(tmp_path, c["path"]).is_dir() for c in details["checkpoints"])
        memory = stages["memory"]["details"][algo]
        assert memory["samples"] >= 3 and memory["ok"] is True
        assert (work / algo / "config.json").is_file()
    assert stages["memory"]["details"]["tag"] == "memory/host_rss_mb"
    assert "the fast step equals upstream's" in stages["step"]["details"]["check"]["message"]
    metrics = stages["eval"]["details"]["metrics"]
    assert 0.0 <= metrics["success_rate"] <= 1.0
    assert stages["eval"]["details"]["checkpoint"] in [
        c["path"] for c in stages["train_ppo"]["details"]["checkpoints"]]
    children = report["children"]
    assert [c["stage"] for c in children] == ["doctor", "env", "step", "train_ppo",
                                              "train_happo", "eval"]
    assert all(c["returncode"] == 0 and not c["leftover"] for c in children)
    assert all(Path(tmp_path, c["stderr"]).is_file() for c in children)
    cases, root = _junit(work / "report.json")
    assert set(cases) == set(stages)
    assert not list(root.iter("failure")) and not list(root.iter("skipped"))
    assert result.stderr.strip().splitlines()[-1].startswith("smoke: passed, 8 stages")
    print("mapush smoke on the CPU double: %.1f s" % elapsed)


def test_an_env_that_crashes_fails_the_env_stage_with_the_phase(tmp_path, smoke_env):
    env = dict(smoke_env, MQE_DOUBLE_CRASH_PHASE="create_sim")
    result, report, _ = _smoke(tmp_path, env)
    stages = {s["name"]: s for s in report["stages"]}
    assert result.returncode == 1
    assert report["failed_stage"] == "env" and report["failed_stages"] == ["env"]
    assert "SIGSEGV" in stages["env"]["message"] and "create_sim" in stages["env"]["message"]
    assert stages["doctor"]["status"] == PASSED
    assert all(stages[n]["status"] == SKIPPED for n in ("step", "train_ppo", "train_happo",
                                                        "eval", "memory", "clean_exit"))
    cases, _root = _junit(tmp_path / "runs" / "smoke" / "report.json")
    assert "SIGSEGV" in cases["env"].find("failure").get("message")
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: smoke test failed at stage env:")


def test_a_device_assert_in_training_fails_the_training_stages(tmp_path, smoke_env):
    # The env stage takes 20 steps; the double asserts at step 30, inside training (and
    # inside the step check's simulations, which fail to run).
    env = dict(smoke_env, MQE_DOUBLE_DEVICE_ASSERT="30")
    result, report, _ = _smoke(tmp_path, env)
    stages = {s["name"]: s for s in report["stages"]}
    assert result.returncode == 1
    assert report["failed_stage"] == "step"
    assert report["failed_stages"] == ["step", "train_ppo", "train_happo"]
    assert stages["env"]["status"] == PASSED
    assert "could not run: child A (fast step) failed" in stages["step"]["message"]
    for name in ("train_ppo", "train_happo"):
        assert "device-side assert" in stages[name]["message"]
    assert all(stages[n]["status"] == SKIPPED for n in ("eval", "memory", "clean_exit"))
    assert "train_ppo" in stages["eval"]["message"]
    _junit(tmp_path / "runs" / "smoke" / "report.json")  # parses


def test_without_gpu_or_isaacgym_smoke_fails_at_the_doctor_stage_quickly(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    for key in ("PYTHONPATH", "MAPUSH_ROOT", "MAPUSH_PATCH_RECORDS"):
        env.pop(key, None)
    start = time.monotonic()
    result = run_mapush(["smoke", "--report", tmp_path / "smoke" / "report.json"], env=env,
                        cwd=tmp_path, timeout=60)
    elapsed = time.monotonic() - start
    report = json.loads((tmp_path / "smoke" / "report.json").read_text())
    doctor = run_mapush(["doctor", "--num-envs", "8", "--json"], env=env, cwd=tmp_path)
    failing = [c for c in json.loads(doctor.stdout)["checks"] if c["status"] == "fail"]
    assert result.returncode == 1 and elapsed < 30
    assert report["failed_stage"] == "doctor"
    assert [s["status"] for s in report["stages"][1:]] == [SKIPPED] * 7
    message = report["stages"][0]["message"]
    assert "isaacgym" in {c["name"] for c in failing}
    for check in failing:  # the doctor's own words, with its fixes
        assert check["message"] in message and check["fix"] in message
    assert message in result.stderr.strip().splitlines()[-1]


def test_on_the_cpu_each_stage_limit_is_five_times_longer():
    """mapush smoke --sim-device cpu (make image-check): the GPU-sized limits, as hang guards,
    grow by CPU_TIMEOUT_FACTOR; on a GPU they stay as they are."""
    from types import SimpleNamespace

    import pytest as _pytest

    from tests.gpu import conftest as smoke_conftest

    def items():
        out = []
        for name, limit in (("test_eval", 80), ("test_train_ppo", 140), ("test_mine", 5)):
            node = SimpleNamespace(name=name, markers=[_pytest.mark.timeout(limit).mark])
            node.get_closest_marker = lambda name, n=node: next(
                (m for m in n.markers if m.name == name), None)
            node.add_marker = lambda mark, append=True, n=node: n.markers.insert(
                len(n.markers) if append else 0, getattr(mark, "mark", mark))
            out.append(node)
        return out

    for device, factor in (("cpu", smoke_conftest.CPU_TIMEOUT_FACTOR), ("cuda:0", 1)):
        config = SimpleNamespace(getoption=lambda name, d=device: d)
        nodes = items()
        smoke_conftest.pytest_collection_modifyitems(config, nodes)
        # the shipped stages' limits grow; a stage of another limit keeps its own
        assert [n.get_closest_marker("timeout").args[0] for n in nodes] == [
            smoke_conftest.TIMEOUTS["eval"] * factor, smoke_conftest.TIMEOUTS["train_ppo"] * factor, 5]
    assert smoke_conftest.CPU_TIMEOUT_FACTOR >= 5
