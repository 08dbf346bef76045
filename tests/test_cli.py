"""Bad ``mapush train`` options: exit status 2, one ``error:`` line naming the option and
the bad value, and nothing started (no run directory)."""
import errno
import os

import pytest

from mapush import cli

from tests.conftest import double_env, one_error, run_mapush

CASES = [
    (["--algo", "sac"], "--algo", "sac"),
    (["--object", "sphere"], "--object", "sphere"),
    (["--num-envs", "0"], "--num-envs", "0"),
    (["--num-envs", "abc"], "--num-envs", "abc"),
    (["--steps", "-1"], "--steps", "-1"),
]


@pytest.mark.parametrize("args,option,value", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_option_is_one_error_line(tmp_path, args, option, value):
    run_dir = tmp_path / "run"
    proc = run_mapush(["train", "--sim-device", "cpu", "--rl-device", "cpu",
                       "--run-dir", run_dir] + args, env=double_env(), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert proc.stderr.strip() == errors[0], "more than the error line: %r" % proc.stderr
    assert option in errors[0] and repr(value) in errors[0], errors[0]
    assert "Traceback" not in proc.stderr
    assert not run_dir.exists()


def test_unknown_object_lists_the_objects_found(tmp_path):
    proc = run_mapush(["train", "--object", "sphere", "--run-dir", tmp_path / "run"],
                      env=double_env(), cwd=tmp_path)
    assert proc.returncode == 2
    for found in ("cuboid", "Tblock", "cylinder"):
        assert found in proc.stderr


def test_every_help_shows_every_default():
    """`mapush <cmd> --help` names the default of each option that has one."""
    import argparse
    import re
    import subprocess
    import sys

    from mapush.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) >= {"train", "doctor", "smoke", "eval"}
    for name, sub in subparsers.choices.items():
        out = subprocess.run([sys.executable, "-m", "mapush", name, "--help"],
                             capture_output=True, text=True, timeout=60).stdout
        # one entry per option: from "  --option" to the next line that starts one
        entries = {re.split(r"[ ,]", chunk.strip(), 1)[0]: re.sub(r"\s+", " ", chunk)
                   for chunk in re.split(r"\n  (?=-)", re.split(r"(?:optional arguments|options):", out, 1)[1])}
        for action in sub._actions:
            if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
                continue
            entry = entries[action.option_strings[0]]
            shown = re.search(r"\(default: ([^)]*)\)", entry)
            assert shown, (name, action.option_strings, entry)
            assert shown.group(1) == str(action.default), (name, entry)
    train = re.sub(r"\s+", " ", subprocess.run(
        [sys.executable, "-m", "mapush", "train", "--help"], capture_output=True,
        text=True, timeout=60).stdout)
    assert "(default: 100000000)" in train and "(default: 10000000)" in train


SPEC_CASES = [
    ("not json", "cannot read it as a JSON object"),
    ('["algo"]', "holds list, not a JSON object of options"),
    ('{"algo": "ppo", "colour": "red"}', "'colour' is not an option of mapush train"),
    ('{"algo": "sac"}', "algo 'sac' is not one of ppo, happo, mappo, hatrpo"),
    ('{"num_envs": 0}', "num_envs 0: input should be greater than or equal to 1"),
    ('{"steps": "many"}', "steps 'many': input should be a valid integer"),
    ('{"resume": "runs/x"}', "'resume' is not an option of mapush train"),
    # #36: a flag is a JSON boolean: "false" turned W&B on, "no" reached MQE as truthy
    ('{"wandb": "false"}', "wandb 'false': input should be a valid boolean"),
    ('{"record_video": "no"}', "record_video 'no': input should be a valid boolean"),
    ('{"wandb": 0}', "wandb 0: input should be a valid boolean"),
    ('{"seed": 4294967296}', "seed 4294967296: input should be less than 4294967296"),
    # and a number is a JSON number, a folder a name
    ('{"num_envs": "200"}', "num_envs '200': input should be a valid integer"),
    ('{"run_dir": ""}', "run_dir '': input should be a folder name (not blank)"),
    ('{"sim_device": "gpu"}', "sim_device 'gpu': input should be cpu, cuda or cuda:N"),
]


@pytest.mark.parametrize("text,needle", SPEC_CASES, ids=[c[1][:30] for c in SPEC_CASES])
def test_a_bad_spec_file_is_one_error_line_naming_it(tmp_path, text, needle):
    from tests.conftest import one_error

    spec = tmp_path / "cell.json"
    spec.write_text(text)
    error = one_error(run_mapush(["train", "--spec", spec], env=double_env(), cwd=tmp_path))
    assert error.startswith("error: --spec %s" % spec) and needle in error, error


def test_a_spec_file_holds_every_option(tmp_path):
    from tests.conftest import one_error

    spec = tmp_path / "cell.json"
    spec.write_text('{"algo": "ppo"}')
    error = one_error(run_mapush(["train", "--spec", spec, "--seed", "3"], env=double_env(),
                                 cwd=tmp_path))
    assert "give --seed in it, not beside it" in error


def test_a_spec_file_is_what_the_options_would_be(tmp_path, monkeypatch):
    """The same RunSpec as the options on the command line; a run already in run_dir is
    resumed with them."""
    import argparse
    import json

    from mapush import cli

    monkeypatch.setenv("MAPUSH_ROOT", str(__import__("tests.conftest", fromlist=["DOUBLES"])
                                          .DOUBLES / "mapush_root"))
    run = tmp_path / "run"
    spec = tmp_path / "cell.json"
    spec.write_text(json.dumps({"algo": "happo", "object": "Tblock", "seed": 4, "steps": 2000,
                                "num_envs": 2, "run_dir": str(run), "sim_device": "cpu",
                                "rl_device": "cpu"}))
    from_file, record = cli.spec_from_file(str(spec))
    argv = ["train", "--algo", "happo", "--object", "Tblock", "--seed", "4", "--steps", "2000",
            "--num-envs", "2", "--run-dir", str(run), "--sim-device", "cpu", "--rl-device",
            "cpu"]
    from_argv, _ = cli.spec_from_args(cli.build_parser().parse_args(argv),
                                      cli.given_options(argv))
    assert record is None and from_file == from_argv and from_file.steps == 2000
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"spec": from_file.to_dict()}))
    seen = {}

    def resume_spec(args: argparse.Namespace, given):
        seen.update(resume=args.resume, given=given)
        return "continued", {}

    monkeypatch.setattr("mapush.run.resume.resume_spec", resume_spec)
    assert cli.spec_from_file(str(spec))[0] == "continued"
    assert seen["resume"] == str(run)
    assert {"--resume", "--steps", "--seed", "--run-dir"} <= seen["given"]


@pytest.mark.parametrize("command", [["train"], ["eval", "--checkpoint", "x"]])
@pytest.mark.parametrize("value", ["4294967296", "-1"])
def test_a_seed_outside_numpys_range_is_refused_before_anything(tmp_path, command, value):
    """#36: seeds of 2**32 or more were accepted, then failed in the child after the run
    folder existed."""
    from tests.conftest import one_error

    error = one_error(run_mapush(command + ["--seed", value, "--run-dir", tmp_path / "run"]
                                 if command == ["train"] else command + ["--seed", value],
                                 env=double_env(), cwd=tmp_path))
    assert "--seed" in error and "[0, 2**32)" in error, error
    assert list(tmp_path.iterdir()) == []



@pytest.mark.parametrize("command", [["train", "--run-dir"], ["pipeline", "--dir"]])
@pytest.mark.parametrize("target", ["", " ", "a-file"])
def test_a_run_folder_that_is_empty_or_a_file_is_refused(tmp_path, command, target):
    """#36: --run-dir '' wrote the whole run into the current directory; --run-dir or
    pipeline --dir naming a file was a traceback. One line, and nothing created."""
    from tests.conftest import one_error

    (tmp_path / "a-file").write_text("mine")
    error = one_error(run_mapush(command + [target], env=double_env(), cwd=tmp_path))
    assert "is not a folder for a run" in error, error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert (tmp_path / "a-file").read_text() == "mine"


@pytest.mark.faults
@pytest.mark.parametrize("command", [["report"], ["train", "--resume"]])
def test_a_truncated_record_is_called_damaged_in_one_line_and_left_as_it_is(tmp_path, command):
    """#36: `report` on a truncated config.json was a traceback, and resume called the run
    "not a run of mapush train"."""
    from tests.conftest import one_error

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"spec": {"algo": "pp')
    error = one_error(run_mapush(command + [run], env=double_env(), cwd=tmp_path))
    assert "config.json" in error and "damaged" in error, error
    assert (run / "config.json").read_text() == '{"spec": {"algo": "pp'
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_report_on_garbage_events_warns_and_an_uncreatable_out_is_one_line(tmp_path):
    """#36: a report on a run whose event file is garbage exited 0 with no images and no
    warning; ``--out`` where no folder can be made was a traceback."""
    from tests.conftest import one_error

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "config.json").write_text('{"spec": {"algo": "ppo", "object": "cuboid"}}')
    (run / "logs" / "events.out.tfevents.1.host").write_bytes(bytes(range(256)) * 4)
    proc = run_mapush(["report", run], env=double_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning: the event files in %s hold no readable scalars" % (run / "logs") \
        in proc.stderr, proc.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    error = one_error(run_mapush(["report", run, "--out", blocker / "report"], env=double_env(),
                                 cwd=tmp_path))
    assert error.startswith("error: --out %s: not writable (read-only, not yours, or under a "
                            "file)" % (blocker / "report")), error
    assert blocker.read_text() == "mine"


def test_report_of_an_authors_results_folder_draws_their_curves_under_our_names(tmp_path):
    """make demo reports the authors' run: their flat tags (push_reward, policy_loss) are
    drawn as ours (reward/push_reward, train/policy_loss), into --out outside the folder."""
    from tensorboardX import SummaryWriter

    run = tmp_path / "results" / "10-15-23_cuboid"
    writer = SummaryWriter(str(run / "logs"))
    for step in range(3):
        writer.add_scalar("push_reward", 1.0 + step, step * 1000)
        writer.add_scalar("collision_punishment", -step, step * 1000)
        writer.add_scalar("policy_loss", 0.5 / (1 + step), step * 1000)
    writer.close()
    out = tmp_path / "demo" / "report"
    proc = run_mapush(["report", run, "--out", out], env=double_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the page, its figures, and the manifest of what mapush report wrote (#77)
    assert sorted(p.name for p in out.iterdir()) == [".mapush-out.json", "index.html",
                                                     "losses.png", "rewards.png"]
    page = (out / "index.html").read_text()  # the panels of reward/ and train/ tags only
    assert "rewards.png" in page and "losses.png" in page
    assert not (run / "report").exists()


@pytest.mark.faults
def test_a_path_the_os_cannot_hold_or_reach_is_one_line(upstream, tmp_path):
    """#50 item 5: a --run-dir with a name over 255 bytes, or under a file, is refused by the
    parser: one line naming it, exit 2, nothing created (both were tracebacks)."""
    (tmp_path / "afile").write_text("mine")
    long = "a" * 300
    proc = run_mapush(["train", "--run-dir", long, "--sim-device", "cpu", "--rl-device", "cpu"],
                      env=double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 2
    assert "a name in it is longer than 255 bytes" in one_error(proc)
    proc = run_mapush(["train", "--run-dir", "afile/run", "--num-envs", 4, "--steps", 100000,
                       "--sim-device", "cpu", "--rl-device", "cpu", "--no-preflight"],
                      env=double_env(upstream), cwd=tmp_path)
    assert "'afile/run' lies under afile, which is a file, not a folder" in one_error(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.faults
@pytest.mark.parametrize("code,fix", [(errno.ENOSPC, "free space on that disk"),
                                      (errno.EROFS, "read-only"),
                                      (errno.EACCES, "pass a folder you own")])
def test_every_write_failure_is_one_line(monkeypatch, capsys, code, fix):
    """Wherever a command meets a full disk, a read-only file system or a refused write that
    it does not handle itself, the CLI says it in one line (exit 1), not a traceback."""
    def fail(args, argv):
        raise OSError(code, os.strerror(code), "runs/x/checkpoints/tmp")

    monkeypatch.setattr(cli, "_dispatch", fail)
    assert cli.main(["runs"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: runs/x/checkpoints/tmp: ")
    assert errno.errorcode[code] in err[0] and fix in err[0]


@pytest.mark.parametrize("missing,fix", [
    ("harl.runners", "install HARL at its pin"),
    ("isaacgym", "install Isaac Gym Preview 4 from your tarball"),
    ("torch", "pip install '.[train]'"),
])
def test_a_missing_package_names_an_install_that_works(monkeypatch, capsys, missing, fix):
    """#51 item 4: a missing HARL was told to pip install '.[export]', which has no HARL."""
    def fail(args, argv):
        raise ModuleNotFoundError("No module named %r" % missing, name=missing)

    monkeypatch.setattr(cli, "_dispatch", fail)
    assert cli.main(["runs"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fix in err[0], err


def test_reproduce_never_writes_into_a_folder_of_the_users(tmp_path):
    """``mapush reproduce --out DIR`` writes table.json and table.md: into a new folder or its
    own previous table only. A folder of the user's (their own table.md, or any file) is one
    line before anything is read or written, and is left as it was."""
    for name in ("table.md", "notes.txt"):
        mine = tmp_path / ("mine-" + name)
        mine.mkdir()
        (mine / name).write_text("mine")
        error = one_error(run_mapush(["reproduce", "--out", mine, "--results", tmp_path / "none"],
                                     env=double_env(), cwd=tmp_path))
        assert error.startswith("error: --out %s exists and is no result of mapush reproduce"
                                % mine), error
        assert [p.name for p in mine.iterdir()] == [name] and (mine / name).read_text() == "mine"
    # its own previous table is no bar: the run goes on (here to the missing results)
    own = tmp_path / "own"
    own.mkdir()
    (own / "table.json").write_text("{}")
    (own / "table.md").write_text("# old")
    error = one_error(run_mapush(["reproduce", "--out", own, "--results", tmp_path / "none"],
                                 env=double_env(), cwd=tmp_path))
    assert error.startswith("error: no authors' results under %s" % (tmp_path / "none")), error
