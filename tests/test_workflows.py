"""The GitHub workflows and the ci/ scripts they call: schema, zizmor, the GPU job's shape
(runner labels, timeout, concurrency, artifacts, the Make targets), and the scripts'
behaviour (tarball provisioning never leaks the URL, logged steps keep their status)."""
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
GPU = WORKFLOWS / "gpu-smoke.yml"
TESTS = WORKFLOWS / "tests.yml"
CI = REPO / "ci"
BIN = REPO / ".venv" / "bin"
# The scripts of the GPU job (ci/ also holds scripts of other jobs).
SCRIPTS = [CI / name for name in ("provide-isaacgym.sh", "build-image.sh", "run-logged.sh",
                                  "collect-logs.sh")]
TARBALL = re.search(r"^ISAACGYM_TARBALL=(.+)$", (REPO / "env" / "pins.env").read_text(),
                    re.M).group(1)


def load(path):
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def steps(path, job):
    return load(path)["jobs"][job]["steps"]


def run_lines(path, job):
    return [s["run"].strip() for s in steps(path, job) if "run" in s]


def test_workflows_match_the_github_workflow_schema():
    result = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema",
                             "vendor.github-workflows", str(GPU), str(TESTS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("persona", ["regular", "pedantic", "auditor"])
def test_zizmor_finds_nothing(persona):
    result = subprocess.run([str(BIN / "zizmor"), "--offline", "--persona", persona,
                             "--format", "json", str(WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def test_every_action_is_pinned_to_a_commit():
    for path in (GPU, TESTS):
        uses = re.findall(r"uses:\s*(\S+)", path.read_text())
        assert uses
        for ref in uses:
            assert re.match(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$", ref), ref


def test_gpu_job_runs_on_the_self_hosted_gpu_runner_with_limits():
    data = load(GPU)
    job = data["jobs"]["smoke"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert 0 < job["timeout-minutes"] <= 120
    assert data["permissions"] == {"contents": "read"}
    # One group for every GPU job, whatever the branch, and queued jobs are not cancelled.
    assert data["concurrency"]["group"] and "${{" not in data["concurrency"]["group"]
    assert data["concurrency"]["cancel-in-progress"] is False
    assert "pull_request" in data["on"] and "workflow_dispatch" in data["on"]
    assert "head.repo.full_name == github.repository" in job["if"]  # no fork code on the runner
    for step in steps(GPU, "smoke"):
        if "uses" in step and "checkout" in step["uses"]:
            assert step["with"]["persist-credentials"] is False


def test_gpu_job_calls_the_make_targets_not_copies_of_them():
    lines = run_lines(GPU, "smoke")
    for target in ("doctor", "smoke-test", "test-image"):
        assert "ci/run-logged.sh %s make %s" % (target, target) in lines
    assert "ci/run-logged.sh build ci/build-image.sh" in lines
    assert "make build" in (CI / "build-image.sh").read_text()
    code = [line for path in [GPU] + SCRIPTS
            for line in path.read_text().splitlines() if not line.strip().startswith("#")]
    for copy in (r"docker compose run", r"docker build\b(?!er)", r"^\s*mapush (smoke|doctor)",
                 r"^\s*(\S*python\S* -m )?pytest"):
        assert not [line for line in code if re.search(copy, line)], copy
    makefile = (REPO / "Makefile").read_text()
    for target in ("build", "doctor", "smoke-test", "test-image", "test"):
        assert re.search(r"^%s:" % re.escape(target), makefile, re.M), target


def test_gpu_job_order_and_the_steps_that_still_run_after_a_failure():
    named = [s.get("name") or s.get("uses") for s in steps(GPU, "smoke")]
    order = ["Provide the Isaac Gym tarball", "Build the training image (layer cache)",
             "make doctor", "make smoke-test", "make test-image", "Collect logs"]
    assert [n for n in named if n in order] == order
    by_name = {s.get("name"): s for s in steps(GPU, "smoke")}
    for name in ("make doctor", "make smoke-test", "make test-image"):
        # each runs even when the one before failed (but never without an image)
        assert "steps.build.outcome == 'success'" in by_name[name]["if"]
        assert "!cancelled()" in by_name[name]["if"]
        assert by_name[name]["timeout-minutes"] <= 15
    assert by_name["Remove the Isaac Gym tarball from the workspace"]["if"] == "always()"


def test_gpu_job_uploads_the_report_junit_and_logs_even_on_failure():
    upload = [s for s in steps(GPU, "smoke") if "upload-artifact" in s.get("uses", "")]
    assert len(upload) == 1 and upload[0]["if"] == "always()"
    paths = upload[0]["with"]["path"].split()
    # Where compose's smoke-test service writes its report, and junit.xml beside it.
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    command = compose["services"]["smoke-test"]["command"]
    report = command[command.index("--report") + 1]
    assert report in paths
    assert str(Path(report).parent / "junit.xml") in paths
    assert str(Path(report).parent / "logs") + "/" in paths
    assert "runs/ci/" in paths
    # The Isaac Gym tarball is never an artifact.
    assert not any("vendor" in p or "tar" in p or "build" in p for p in paths)


def test_the_tarball_secret_reaches_only_the_step_that_needs_it():
    text = GPU.read_text()
    assert text.count("secrets.") == 1
    provide = [s for s in steps(GPU, "smoke") if s.get("run") == "ci/provide-isaacgym.sh"][0]
    assert provide["env"] == {"ISAACGYM_TARBALL_URL": "${{ secrets.ISAACGYM_TARBALL_URL }}"}
    assert "set -x" not in "".join(p.read_text() for p in SCRIPTS)


def test_cpu_workflow_runs_make_test_on_every_push():
    data = load(TESTS)
    job = data["jobs"]["test"]
    assert data["on"]["push"] in (None, {})  # every branch
    assert job["runs-on"] == "ubuntu-latest"
    assert 0 < job["timeout-minutes"] <= 60
    assert data["permissions"] == {"contents": "read"}
    assert any("setup-python" in s.get("uses", "") for s in job["steps"])
    assert run_lines(TESTS, "test") == ["make test"]


def test_ci_scripts_are_executable_and_shellcheck_clean():
    for path in SCRIPTS:
        assert os.access(str(path), os.X_OK), path
    result = subprocess.run([str(BIN / "shellcheck")] + [str(p) for p in SCRIPTS],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    referenced = set(re.findall(r"ci/[\w-]+\.sh", GPU.read_text()))
    assert referenced and all((REPO / r).is_file() for r in referenced)
    assert referenced <= {"ci/" + p.name for p in SCRIPTS}


# -- the scripts' behaviour -------------------------------------------------------------

@pytest.fixture
def workspace(tmp_path):
    """A copy of the parts of the checkout the ci/ scripts read (they cd to their repo)."""
    (tmp_path / "ci").mkdir()
    for path in SCRIPTS:
        shutil.copy2(str(path), str(tmp_path / "ci"))
    (tmp_path / "env").mkdir()
    shutil.copy(str(REPO / "env" / "pins.env"), str(tmp_path / "env"))
    return tmp_path


def fake_tarball(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(str(path), "wb") as fh:
        fh.write(b"isaacgym/python/setup.py stand-in")
    return path


def provide(workspace, *args, **env):
    full = dict(os.environ)
    full.pop("ISAACGYM_TARBALL_PATH", None)
    full.pop("ISAACGYM_TARBALL_URL", None)
    full.update(env)
    return subprocess.run([str(workspace / "ci" / "provide-isaacgym.sh")] + list(args),
                          env=full, capture_output=True, text=True)


def test_tarball_from_the_runner_path_lands_in_vendor_and_is_removed_after(workspace, tmp_path):
    source = fake_tarball(tmp_path / "runner" / TARBALL)
    result = provide(workspace, ISAACGYM_TARBALL_PATH=str(source))
    dest = workspace / "vendor" / TARBALL
    assert result.returncode == 0, result.stderr
    assert dest.read_bytes() == source.read_bytes()
    staged = workspace / "build" / "isaacgym-context" / TARBALL
    fake_tarball(staged)
    result = provide(workspace, "--remove")
    assert result.returncode == 0
    assert not dest.exists() and not staged.exists() and source.exists()


def test_tarball_from_the_url_secret_is_checked_and_the_url_never_printed(workspace, tmp_path):
    source = fake_tarball(tmp_path / "private" / "secret-token-1234" / TARBALL)
    url = source.as_uri()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    result = provide(workspace, ISAACGYM_TARBALL_URL=url, ISAACGYM_TARBALL_SHA256=digest,
                     ISAACGYM_TARBALL_PATH=str(tmp_path / "missing"))
    assert result.returncode == 0, result.stderr
    assert (workspace / "vendor" / TARBALL).read_bytes() == source.read_bytes()
    assert "secret-token-1234" not in result.stdout + result.stderr
    assert "sha256 verified" in result.stdout

    (workspace / "vendor" / TARBALL).unlink()
    bad = provide(workspace, ISAACGYM_TARBALL_URL=url, ISAACGYM_TARBALL_SHA256="0" * 64,
                  ISAACGYM_TARBALL_PATH=str(tmp_path / "missing"))
    assert bad.returncode == 1 and "does not match ISAACGYM_TARBALL_SHA256" in bad.stderr
    failed = provide(workspace, ISAACGYM_TARBALL_URL=url + "-gone",
                     ISAACGYM_TARBALL_PATH=str(tmp_path / "missing"))
    assert failed.returncode == 1
    assert "secret-token-1234" not in failed.stdout + failed.stderr


def test_no_tarball_anywhere_says_where_to_put_it(workspace, tmp_path):
    result = provide(workspace, ISAACGYM_TARBALL_PATH=str(tmp_path / "missing"))
    assert result.returncode == 1
    assert "ISAACGYM_TARBALL_PATH" in result.stderr and "docs/ci-gpu-runner.md" in result.stderr


def test_a_file_that_is_not_a_gzip_tarball_is_refused(workspace, tmp_path):
    source = tmp_path / TARBALL
    source.write_text("<html>login required</html>")
    result = provide(workspace, ISAACGYM_TARBALL_PATH=str(source))
    assert result.returncode == 1 and "is not a gzip file" in result.stderr


def test_remove_leaves_a_tarball_the_job_did_not_provide(workspace):
    mine = fake_tarball(workspace / "vendor" / TARBALL)
    assert provide(workspace, "--remove").returncode == 0
    assert mine.exists()


def test_run_logged_keeps_the_output_the_status_and_the_duration(workspace):
    logs = workspace / "logs"
    env = dict(os.environ, CI_LOG_DIR=str(logs))
    result = subprocess.run([str(workspace / "ci" / "run-logged.sh"), "demo", "sh", "-c",
                             "echo to-out; echo to-err >&2; exit 7"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 7
    assert (logs / "demo.log").read_text().split() == ["to-out", "to-err"]
    name, status, seconds = (logs / "timings.tsv").read_text().strip().split("\t")
    assert (name, status) == ("demo", "7") and int(seconds) >= 0
    assert "to-out" in result.stdout


def test_collect_logs_never_fails_and_summarises_the_smoke_report(workspace):
    report = workspace / "runs" / "smoke" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"status": "failed", "duration_s": 12.0, "stages": [
        {"name": "doctor", "status": "passed", "duration_s": 1.0, "message": ""},
        {"name": "env", "status": "failed", "duration_s": 2.0, "message": "died | SIGSEGV"}]}))
    summary = workspace / "summary.md"
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(summary), PATH="/usr/bin:/bin")
    result = subprocess.run([str(workspace / "ci" / "collect-logs.sh")], env=env,
                            capture_output=True, text=True, cwd=str(workspace))
    assert result.returncode == 0
    text = summary.read_text()
    assert "mapush smoke: failed" in text and "| env | failed | 2.0 | died \\| SIGSEGV |" in text
    assert (workspace / "runs" / "ci" / "host.txt").is_file()


# -- .ci/run owns the Docker daemon it starts ---------------------------------------------

FAKE_INSTALL = """#!/usr/bin/env bash
# stand-in for ci/install-docker.sh: a long-running "daemon", recorded as the real one is
sleep 600 &
echo "$!" > "$MAPUSH_CI_DOCKERD_PIDFILE"
echo "$!" > "$WITNESS"
"""


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # a zombie (exited, not yet reaped by its parent) is not running either
    with open("/proc/%d/stat" % pid) as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


# run once, inside the image (ci/rehearsal/in-image.sh): real MQE and the tests whose code
# depends on the Python and torch that run it
STACK_FILES = (REPO / "ci" / "stack-files.txt").read_text().split()
TEST_ARGS = ("test [] --durations=30 "  # [TEST_MARKERS]: make test's default
             + " ".join("--ignore=" + f for f in STACK_FILES))
UPPER_ARGS = "test [real_mqe] tests/test_real_mqe_train.py -k upper_trains_with_the_published"
# stand-in for ci/image-check.sh: each stage recorded; the build (in the background) fails
# when IMAGE_CHECK_FAILS says build
FAKE_IMAGE_CHECK = """#!/usr/bin/env bash
if [ "$1" = build ]; then echo image-build >> "$VENVS"; else echo "image-check $1" >> "$ARGS"; fi
[ "$1" != "${IMAGE_CHECK_FAILS:-}" ] || exit 2
"""


@pytest.mark.skipif(os.geteuid() != 0, reason=".ci/run starts a daemon only as root (as CI runs)")
@pytest.mark.parametrize("outcome", ["pass", "fail", "setup-fail"])
def test_ci_run_stops_the_daemon_it_started_whatever_the_outcome(tmp_path, outcome):
    """outcome: make test passes, make test fails, or make test passes and what .ci/run
    builds in the background meanwhile (make stack, the other venvs) fails"""
    import time

    work = tmp_path / "repo"
    (work / ".ci").mkdir(parents=True)
    (work / "ci").mkdir()
    shutil.copy2(str(REPO / ".ci" / "run"), str(work / ".ci" / "run"))
    shutil.copy2(str(REPO / "ci" / "stop-dockerd.sh"), str(work / "ci"))
    shutil.copy2(str(REPO / "ci" / "stack-files.txt"), str(work / "ci"))
    (work / "ci" / "install-docker.sh").write_text(FAKE_INSTALL)
    (work / "ci" / "image-check.sh").write_text(FAKE_IMAGE_CHECK)
    venvs = tmp_path / "venvs.txt"
    args = tmp_path / "pytest-args.txt"
    (work / "Makefile").write_text("test:\n\t@echo 'test [$(TEST_MARKERS)] $(PYTEST_ARGS)' >> %s; exit %d\n"
                                   "test-stack:\n\t@echo 'test-stack $(PYTEST_ARGS)' >> %s\n"
                                   "venv:\n\t@echo $(or $(VENV),.venv) >> %s\n"
                                   % (args, 1 if outcome == "fail" else 0, args, venvs))
    witness = tmp_path / "daemon.pid"
    # MAPush is given, so .ci/run unpacks no snapshot (that step has its own tests)
    env = dict(os.environ, WITNESS=str(witness), MAPUSH_SRC=str(tmp_path / "MAPush"),
               VENVS=str(venvs), ARGS=str(args),
               IMAGE_CHECK_FAILS="build" if outcome == "setup-fail" else "")
    env.pop("MAPUSH_CI_DOCKERD_PIDFILE", None)
    # this suite may itself run under make, which exports its command-line variables
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS"):
        env.pop(name, None)
    proc = subprocess.run(["bash", str(work / ".ci" / "run")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == (0 if outcome == "pass" else 2), proc.stdout + proc.stderr
    if outcome == "setup-fail":  # the background's failure is its exit status
        assert "the background setup 2" in proc.stdout + proc.stderr
    pid = int(witness.read_text())
    for _ in range(50):
        if not _pid_alive(pid):
            break
        time.sleep(0.1)
    assert not _pid_alive(pid), "the daemon .ci/run started is still running"
    assert "stopping dockerd (pid %d)" % pid in proc.stdout
    # real MQE and the stack's files run once, inside the image (MQE runs on 3.8 only in the
    # image), then the user's path through it; every other file in make test, and the high
    # level over real MQE on this machine's torch; the Docker-marked tests once, in make test
    assert [" ".join(line.split()) for line in args.read_text().splitlines()] == (
        {"pass": [TEST_ARGS, UPPER_ARGS, "image-check test", "image-check train"],
         "fail": [TEST_ARGS], "setup-fail": [TEST_ARGS, UPPER_ARGS]}[outcome])
    if outcome != "setup-fail":  # make venv (the test venv), then in the background the
        # image and make venv on the oldest and the newest Python 3.10-3.13 here
        root = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "versions"
        have = [v for v in ("3.10", "3.11", "3.12", "3.13")
                if list(root.glob(v + ".*/bin/python")) or shutil.which("python" + v)]
        expected = ["build/venv-%s" % v for v in (have[:1] + have[-1:])] if have else []
        assert venvs.read_text().split() == [".venv", "image-build"] + expected


def test_stop_dockerd_leaves_a_daemon_it_did_not_start_alone(tmp_path):
    import signal
    import threading

    other = subprocess.Popen(["sleep", "600"])
    # Reaped as soon as it ends, as init reaps CI's dockerd (orphaned when
    # ci/install-docker.sh exits): otherwise it would stay a zombie of this process, which
    # `kill -0` still finds, and the script would wait its 30 s.
    reaper = threading.Thread(target=other.wait, daemon=True)
    reaper.start()
    try:
        proc = subprocess.run(["bash", str(REPO / "ci" / "stop-dockerd.sh"),
                               str(tmp_path / "absent.pid")], capture_output=True, text=True)
        assert proc.returncode == 0 and other.poll() is None
        bad = tmp_path / "bad.pid"
        bad.write_text("not-a-pid\n")
        proc = subprocess.run(["bash", str(REPO / "ci" / "stop-dockerd.sh"), str(bad)],
                              capture_output=True, text=True)
        assert proc.returncode == 1 and "holds no PID" in proc.stderr and other.poll() is None
        good = tmp_path / "good.pid"
        good.write_text("%d\n" % other.pid)
        proc = subprocess.run(["bash", str(REPO / "ci" / "stop-dockerd.sh"), str(good)],
                              capture_output=True, text=True, timeout=60)
        reaper.join(timeout=10)
        assert proc.returncode == 0 and other.returncode == -signal.SIGTERM, proc.stderr
        assert "SIGKILL" not in proc.stderr  # it stopped on SIGTERM, without the 30 s wait
        assert not good.exists()
    finally:
        if other.poll() is None:
            other.kill()


# -- ci/unpack-shared-upstream.sh: MAPush at the pin for CI, checked file by file ----------
UNPACK = CI / "unpack-shared-upstream.sh"


def _snapshot(shared, content=b"x = 1\n"):
    """A snapshot folder as CI finds it: mapush-<commit>.tar.gz and its SHA256SUMS."""
    tree = shared / "src" / "MAPush"
    (tree / "mqe").mkdir(parents=True)
    (tree / "mqe" / "envs.py").write_bytes(content)
    subprocess.run(["tar", "-czf", str(shared / "mapush-0e61e1b.tar.gz"), "-C",
                    str(shared / "src"), "MAPush"], check=True)
    digest = hashlib.sha256(content).hexdigest()
    (shared / "mapush-0e61e1b.SHA256SUMS").write_text("%s  mqe/envs.py\n" % digest)
    shutil.rmtree(shared / "src")


def test_unpack_shared_upstream_from_a_relative_folder(tmp_path):
    # CI names the snapshot folder relative to the checkout; the check runs
    # inside the unpacked tree, so a relative SHA256SUMS path once failed CI.
    _snapshot(tmp_path / "shared")
    (tmp_path / "checkout").mkdir()
    out = subprocess.run(["bash", str(UNPACK), "../shared", "build/upstream"],
                         cwd=tmp_path / "checkout", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    src = Path(out.stdout.strip())
    assert src == tmp_path / "checkout" / "build" / "upstream" / "MAPush"
    assert (src / "mqe" / "envs.py").read_text() == "x = 1\n"


def test_unpack_shared_upstream_refuses_a_file_that_does_not_match(tmp_path):
    _snapshot(tmp_path / "shared")
    (tmp_path / "shared" / "mapush-0e61e1b.SHA256SUMS").write_text(
        "%s  mqe/envs.py\n" % hashlib.sha256(b"other").hexdigest())
    out = subprocess.run(["bash", str(UNPACK), str(tmp_path / "shared"), str(tmp_path / "b")],
                         capture_output=True, text=True)
    assert out.returncode == 1 and out.stdout == ""
    assert "does not match" in out.stderr


def test_unpack_shared_upstream_without_a_snapshot_says_so_by_status(tmp_path):
    (tmp_path / "empty").mkdir()
    for shared in (tmp_path / "empty", tmp_path / "absent"):
        out = subprocess.run(["bash", str(UNPACK), str(shared), str(tmp_path / "b")],
                             capture_output=True, text=True)
        assert (out.returncode, out.stdout) == (3, "")
