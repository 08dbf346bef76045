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
