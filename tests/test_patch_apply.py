"""patches/apply: verifies pins, refuses drift, is idempotent, --check changes nothing.

Runs the real executable on real upstream files (HARL from the harl-aht wheel, the venv's
openrl copied), in temporary folders.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.upstream import APPLY, ENV, REPO, copy_openrl, extract_harl, pinned_hashes, sha256

HARL_PINS = pinned_hashes("harl")


def apply(*args, env=None, script=APPLY):
    environ = dict(os.environ)
    environ.pop("MAPUSH_ENV_DIR", None)
    environ.update(env or {})
    return subprocess.run([str(script)] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, env=environ)


def snapshot(root):
    """Every file under ROOT: bytes, mtime (ns) and inode, to prove nothing changed."""
    state = {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            info = path.stat()
            state[str(path.relative_to(root))] = (path.read_bytes(), info.st_mtime_ns,
                                                  info.st_ino)
    return state


@pytest.fixture
def harl_dir(tmp_path):
    target = tmp_path / "harl-checkout"
    extract_harl(target)
    return target


def test_applies_to_pinned_files_and_records_it(harl_dir):
    proc = apply("harl", harl_dir)
    assert proc.returncode == 0, proc.stderr
    assert "applied" in proc.stdout and "already" not in proc.stdout
    record = json.loads((harl_dir / ".mapush-patches" / "harl.json").read_text())
    assert record["component"] == "harl" and record["status"] == "applied"
    patches = sorted((REPO / "patches" / "harl").glob("*.patch"))
    assert [(p["name"], p["sha256"]) for p in record["patches"]] == \
        [(p.name, sha256(p)) for p in patches]
    assert all(p["summary"] for p in record["patches"])
    files = {f["path"]: f for f in record["files"]}
    assert set(files) == set(HARL_PINS)
    for rel, pinned in HARL_PINS.items():
        assert files[rel]["before"] == pinned
        assert files[rel]["after"] == sha256(harl_dir / rel) != pinned
    assert record["time"].endswith("+00:00")


def test_second_run_says_already_applied_and_changes_nothing(harl_dir):
    assert apply("harl", harl_dir).returncode == 0
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir)
    assert proc.returncode == 0, proc.stderr
    assert "already applied" in proc.stdout
    assert snapshot(harl_dir) == before


def test_already_applied_writes_only_a_missing_record(harl_dir, tmp_path):
    assert apply("harl", harl_dir).returncode == 0
    before = snapshot(harl_dir)
    records = tmp_path / "elsewhere"
    proc = apply("harl", harl_dir, "--record-dir", records)
    assert proc.returncode == 0 and "already applied" in proc.stdout
    record = json.loads((records / "harl.json").read_text())
    assert record["status"] == "already-applied"
    assert {f["path"]: f["before"] for f in record["files"]} == HARL_PINS
    assert snapshot(harl_dir) == before


def test_check_changes_nothing(harl_dir):
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir, "--check")
    assert proc.returncode == 0 and "would apply" in proc.stdout
    assert snapshot(harl_dir) == before
    assert not (harl_dir / ".mapush-patches").exists()
    assert apply("harl", harl_dir).returncode == 0
    after = snapshot(harl_dir)
    proc = apply("harl", harl_dir, "--check")
    assert proc.returncode == 0 and "already applied" in proc.stdout
    assert snapshot(harl_dir) == after


def drift(path):
    with open(str(path), "a") as handle:
        handle.write("# local edit\n")
    return sha256(path)


@pytest.mark.parametrize("check", [False, True])
def test_refuses_a_drifted_file_naming_it_and_both_hashes(harl_dir, check):
    rel = "harl/utils/configs_tools.py"
    actual = drift(harl_dir / rel)
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir, *(["--check"] if check else []))
    assert proc.returncode == 1
    assert str(harl_dir / rel) in proc.stderr
    assert actual in proc.stderr and HARL_PINS[rel] in proc.stderr
    assert "drift" in proc.stderr
    # only the drifted file is named; the pristine ones are not blamed
    assert "harl/utils/envs_tools.py" not in proc.stderr
    assert snapshot(harl_dir) == before


def test_refuses_drift_after_patching(harl_dir):
    assert apply("harl", harl_dir).returncode == 0
    rel = "harl/envs/__init__.py"
    actual = drift(harl_dir / rel)
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir)
    assert proc.returncode == 1
    assert actual in proc.stderr and HARL_PINS[rel] in proc.stderr
    assert "on_policy_base_runner.py" not in proc.stderr  # patched, not drifted
    assert snapshot(harl_dir) == before


def test_refuses_a_partially_patched_tree(harl_dir, tmp_path):
    pristine = tmp_path / "pristine"
    extract_harl(pristine)
    assert apply("harl", harl_dir).returncode == 0
    rel = "harl/utils/configs_tools.py"
    shutil.copyfile(str(pristine / rel), str(harl_dir / rel))
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir)
    assert proc.returncode == 1 and "partially patched" in proc.stderr and rel in proc.stderr
    assert snapshot(harl_dir) == before


def test_refuses_when_the_pins_say_otherwise(harl_dir, tmp_path):
    env = tmp_path / "env"
    env.mkdir()
    wrong = "0" * 64
    text = (ENV / "upstream.sha256").read_text().replace(HARL_PINS["harl/envs/__init__.py"],
                                                          wrong)
    (env / "upstream.sha256").write_text(text)
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir, env={"MAPUSH_ENV_DIR": str(env)})
    assert proc.returncode == 1
    assert wrong in proc.stderr and HARL_PINS["harl/envs/__init__.py"] in proc.stderr
    assert snapshot(harl_dir) == before


def test_a_patch_that_fails_leaves_every_file_untouched(harl_dir, tmp_path):
    """Patches are tried on copies first: when the second fails, the first's file stays."""
    tree = tmp_path / "repo"
    (tree / "patches" / "harl").mkdir(parents=True)
    shutil.copy2(str(APPLY), str(tree / "patches" / "apply"))
    shutil.copytree(str(ENV), str(tree / "env"))
    first = sorted((REPO / "patches" / "harl").glob("*.patch"))[0]
    shutil.copyfile(str(first), str(tree / "patches" / "harl" / first.name))
    (tree / "patches" / "harl" / "99-broken.patch").write_text(
        "# A hunk whose context is not in the file.\n"
        "--- a/harl/utils/trans_tools.py\n+++ b/harl/utils/trans_tools.py\n"
        "@@ -1,2 +1,2 @@\n-no such line\n+replacement\n context that is not there\n")
    (tree / "env" / "upstream.sha256").write_text(
        (ENV / "upstream.sha256").read_text() + "%s  harl/harl/utils/trans_tools.py\n"
        % sha256(harl_dir / "harl/utils/trans_tools.py"))
    before = snapshot(harl_dir)
    proc = apply("harl", harl_dir, script=tree / "patches" / "apply")
    assert proc.returncode == 1
    assert "99-broken.patch does not apply" in proc.stderr
    assert snapshot(harl_dir) == before


def test_openrl_applies_then_is_idempotent(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    copy_openrl(site)
    proc = apply("openrl", site, "--record-dir", tmp_path / "records")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "records" / "openrl.json").read_text())["status"] == \
        "applied"
    before = snapshot(site)
    proc = apply("openrl", site, "--record-dir", tmp_path / "records")
    assert proc.returncode == 0 and "already applied" in proc.stdout
    assert snapshot(site) == before


def test_missing_files_are_refused(tmp_path):
    proc = apply("openrl", tmp_path)
    assert proc.returncode == 1
    assert "openrl/utils/type_aliases.py" in proc.stderr


@pytest.mark.parametrize("args, named", [
    ([], "required"),
    (["flask", "."], "'flask'"),
    (["harl", "/no/such/dir"], "/no/such/dir"),
    (["harl", ".", "--force"], "--force"),
])
def test_usage_errors_exit_2_with_one_error_line(args, named):
    proc = apply(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0]
    assert proc.stdout == ""


def test_executable_with_a_python3_shebang():
    assert os.access(str(APPLY), os.X_OK)
    assert APPLY.read_text().splitlines()[0] == "#!/usr/bin/env python3"


def test_every_patch_has_a_header_saying_what_and_why():
    patches = sorted((REPO / "patches").glob("*/*.patch"))
    assert {p.parent.name for p in patches} == {"openrl", "harl", "mapush"}
    for patch in patches:
        header = []
        for line in patch.read_text().splitlines():
            if line.startswith(("---", "diff ")):
                break
            header.append(line)
        assert all(line.startswith("#") for line in header), patch
        text = " ".join(header)
        assert len(header) >= 3 and "Why" in text, patch
