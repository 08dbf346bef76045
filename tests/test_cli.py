"""Bad ``mapush train`` options: exit status 2, one ``error:`` line naming the option and
the bad value, and nothing started (no run directory)."""
import pytest

from tests.conftest import double_env, run_mapush

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
