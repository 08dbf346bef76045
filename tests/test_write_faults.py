"""#50 item 5: a refused write (EACCES), a read-only file system (EROFS) and a full disk
(ENOSPC) are each one ``error:`` line from train, eval, export, report and sweep, through
the CLI, with nothing half-written left and the run they read unchanged; eval's results are
on stdout before a full disk can lose them.

EACCES bites root too here: the commands run without CAP_DAC_OVERRIDE (``setpriv``), so a
folder's mode bits hold as they do for a user. EROFS and ENOSPC are real mounts in a private
mount namespace (``tests.conftest.in_namespace``; CI runs as root)."""
import json
import os
import shlex
import shutil
import stat
import sys

import pytest

from tests.conftest import REPO, double_env, in_namespace, needs_mounts, one_error, \
    run_mapush, tree_hash

CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]
COMMANDS = ("train", "eval", "export", "report", "sweep")
# the commands as a user without the root's override of mode bits runs them
UNPRIVILEGED = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                "--inh-caps=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


@pytest.fixture(scope="module")
def trained(upstream, tmp_path_factory):
    """A PPO run with two checkpoints over the double."""
    tmp = tmp_path_factory.mktemp("writes")
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    run = tmp / "run"
    proc = run_mapush(["train", "--algo", "ppo", "--num-envs", 4, "--steps", 200,
                       "--checkpoint-interval", 100, "--config", config, "--run-dir", run] + CPU,
                      double_env(upstream), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"run": run, "config": config, "tmp": tmp}


def argv(command, trained, target):
    """The command writing into the folder ``target`` and nowhere else."""
    run, config = trained["run"], trained["config"]
    return {"train": ["train", "--run-dir", target / "run", "--num-envs", 4, "--steps", 100,
                      "--config", config] + CPU,
            "eval": ["eval", "--run", run, "--out", target / "eval.jsonl", "--num-envs", 4] + CPU,
            "export": ["export", "--run", run, "--out", target / "export"] + CPU,
            "report": ["report", run, "--out", target / "report"],
            "sweep": ["sweep", "--objects", "cuboid", "--algo", "ppo", "--seeds", "1",
                      "--steps", 100, "--num-envs", 4, "--config", config, "--root",
                      target / "sweeps"] + CPU}[command]  # #77: a root it makes, none left


def env_for(upstream, trained):
    # export loads the checkpoint on a host (tests/test_export.py: host_env); the double's
    # objects serve every command
    env = double_env(upstream, MAPUSH_ROOT=REPO / "tests" / "doubles" / "mapush_root")
    env["HOME"] = str(trained["tmp"])
    return env


def assert_one_line(command, rc, err, *needles):
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert rc != 0 and len(errors) == 1, (command, rc, err[-3000:])
    assert "Traceback" not in err, (command, err[-3000:])
    assert any(n in errors[0] for n in needles), (command, errors[0])
    return errors[0]


@pytest.mark.faults
@pytest.mark.parametrize("command", COMMANDS)
def test_a_folder_you_may_not_write_is_one_line(upstream, trained, tmp_path, command):
    """EACCES: the target's folder is 0555. Before, eval and export gave a traceback after
    their whole evaluation or parity rollout."""
    target = tmp_path / "theirs"
    target.mkdir()
    target.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH |
                 stat.S_IXOTH)
    before = tree_hash(trained["run"])
    import subprocess

    proc = subprocess.run(UNPRIVILEGED + [sys.executable, "-m", "mapush"] +
                          [str(a) for a in argv(command, trained, target)],
                          env=env_for(upstream, trained), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert_one_line(command, proc.returncode, proc.stderr, "not writable", "may not write",
                    "Permission denied", "read-only")
    assert list(target.iterdir()) == []
    assert tree_hash(trained["run"]) == before
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["theirs"], left


def _script(commands, trained, target, out):
    """bash: each command into ``target``, its stdout, stderr and status into ``out``."""
    lines = []
    for command in commands:
        words = " ".join(shlex.quote(str(a)) for a in [sys.executable, "-m", "mapush"] +
                         argv(command, trained, target))
        lines.append("%s > %s/%s.out 2> %s/%s.err; echo $? > %s/%s.rc"
                     % (words, out, command, out, command, out, command))
    return "\n".join(lines)


@pytest.mark.faults
@needs_mounts
def test_a_read_only_file_system_is_one_line(upstream, trained, tmp_path):
    """EROFS: the target is a read-only bind mount."""
    target, out = tmp_path / "ro", tmp_path / "out"
    target.mkdir()
    out.mkdir()
    before = tree_hash(trained["run"])
    script = 'mount --bind "%s" "%s" && mount -o remount,bind,ro "%s"\nset +e\n%s\n' % (
        target, target, target, _script(COMMANDS, trained, target, out))
    proc = in_namespace(script, env_for(upstream, trained), tmp_path)
    assert proc.returncode == 0, proc.stderr
    for command in COMMANDS:
        rc = int((out / ("%s.rc" % command)).read_text())
        assert_one_line(command, rc, (out / ("%s.err" % command)).read_text(), "read-only",
                        "not writable")
    assert list(target.iterdir()) == []
    assert tree_hash(trained["run"]) == before


@pytest.mark.faults
@needs_mounts
def test_a_full_disk_is_one_line_and_eval_keeps_its_results(upstream, trained, tmp_path):
    """ENOSPC: the target is a tmpfs filled to its last block. Nothing half-written is left
    beside the filler; eval printed each checkpoint's line before the write failed."""
    target, out = tmp_path / "full", tmp_path / "out"
    target.mkdir()
    out.mkdir()
    before = tree_hash(trained["run"])
    script = ('mount -t tmpfs -o size=1m tmpfs "{t}"\n'
              'dd if=/dev/zero of="{t}/filler" bs=4k 2>/dev/null || true\n'
              'set +e\n{commands}\nls -A "{t}" > "{o}/left"\n'
              ).format(t=target, o=out, commands=_script(COMMANDS, trained, target, out))
    proc = in_namespace(script, env_for(upstream, trained), tmp_path)
    assert proc.returncode == 0, proc.stderr
    for command in COMMANDS:
        rc = int((out / ("%s.rc" % command)).read_text())
        line = assert_one_line(command, rc, (out / ("%s.err" % command)).read_text(),
                               "disk full", "ENOSPC", "No space left")
        assert str(target) in line, line  # it names what it could not write
    assert (out / "left").read_text().split() == ["filler"]
    assert tree_hash(trained["run"]) == before
    printed = [json.loads(line) for line in (out / "eval.out").read_text().splitlines()]
    assert [r["step"] for r in printed] == [100], printed  # the first, then the write failed
    assert printed[0]["success_rate"] is not None


@pytest.mark.parametrize("command", ["eval", "export"])
def test_a_gpu_that_is_not_here_is_one_line_before_a_simulation(upstream, trained, tmp_path,
                                                                 command):
    """#51 item 4: eval and export on the default cuda:0 where no GPU is visible were a
    traceback (eval) or a failed parity rollout (export); now, as train's preflight, one
    line naming the device and the fix, exit 2, nothing written."""
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps({"devices": [], "cuda_available": False,
                                "error": "torch 2.x is a CPU-only build"}))
    env = dict(env_for(upstream, trained), MAPUSH_FAKE_GPU=str(fake))
    args = {"eval": ["eval", "--checkpoint", trained["run"]],
            "export": ["export", "--run", trained["run"], "--out", tmp_path / "export"]}[command]
    before = tree_hash(trained["run"])
    error = one_error(run_mapush(args, env, cwd=tmp_path))
    assert error.startswith("error: --sim-device cuda:0 --rl-device cuda:0: no GPU visible"), error
    assert "pass --sim-device cpu --rl-device cpu" in error, error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpus.json"]
    assert tree_hash(trained["run"]) == before


@pytest.mark.faults
@pytest.mark.parametrize("command", ["export", "report", "sweep"])
def test_an_out_under_a_file_is_one_line_before_any_work(upstream, trained, tmp_path, command):
    """ENOTDIR: ``--out``/``--root`` under a file was refused only when the command wrote
    (export: after its parity rollout). Now as an unwritable folder, first, exit 2."""
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    error = one_error(run_mapush(argv(command, trained, blocker), env_for(upstream, trained),
                                 cwd=tmp_path))
    assert "not writable" in error and str(blocker) in error, error
    assert blocker.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == \
        ["afile"]
