"""``make dev``'s tree (docker/dev-tree.py, run by docker/entrypoint.sh): a user's MAPush
checkout, copied and patched inside the container, on MAPush's real files at the pin."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import MAPUSH_SRC, NO_SRC, REPO
from tests.upstream import patched_mapush, pinned_hashes, sha256

pytestmark = pytest.mark.skipif(not MAPUSH_SRC, reason=NO_SRC)
TREE = REPO / "docker" / "dev-tree.py"
WRAPPER = "mqe/envs/wrappers/go1_push_mid_wrapper.py"


def checkout(root):
    """A MAPush checkout of the user's: the files our patches touch, at the pin."""
    for rel in pinned_hashes("mapush"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(str(Path(MAPUSH_SRC) / rel), str(root / rel))
    (root / "mqe" / "__init__.py").write_text("")
    return root


def tree(src, tmp, *extra):
    image = tmp / "image-records"
    image.mkdir(exist_ok=True)
    (image / "openrl.json").write_text('{"component": "openrl"}')
    return subprocess.run(["python3", str(TREE), str(src), str(tmp / "dev" / "MAPush"),
                           str(REPO / "patches"), str(tmp / "dev" / "records"), str(image)]
                          + list(extra), capture_output=True, text=True, timeout=120)


def test_your_checkout_is_copied_and_patched_as_the_image_patches_the_pin(tmp_path):
    src = checkout(tmp_path / "MAPush")
    (src / WRAPPER).write_text((src / WRAPPER).read_text() + "\n# my note\n")  # an edit of mine
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    proc = tree(src, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before  # untouched
    image = tmp_path / "image" / "MAPush"  # the image's way: patches/apply at the pin
    image.mkdir(parents=True)
    patched_mapush(Path(MAPUSH_SRC), image)
    dev = tmp_path / "dev" / "MAPush"
    for rel in pinned_hashes("mapush"):
        mine = (dev / rel).read_text()
        if rel == WRAPPER:
            assert mine == (image / rel).read_text() + "\n# my note\n"
        else:
            assert mine == (image / rel).read_text(), rel
    record = json.loads((tmp_path / "dev" / "records" / "mapush.json").read_text())
    assert record["pinned"] is False and str(src) in record["source"]
    assert [p["name"] for p in record["patches"]] == sorted(
        p.name for p in (REPO / "patches" / "mapush").glob("*.patch"))
    files = {f["path"]: f for f in record["files"]}
    assert files[WRAPPER]["before"] == sha256(src / WRAPPER) != pinned_hashes("mapush")[WRAPPER]
    assert files[WRAPPER]["after"] == sha256(dev / WRAPPER)
    assert (tmp_path / "dev" / "records" / "openrl.json").is_file()  # the image's, carried


def test_a_patch_that_does_not_apply_is_one_line_naming_it(tmp_path):
    src = checkout(tmp_path / "MAPush")
    text = (src / "mqe/envs/base/base_task.py").read_text()
    assert "max_gpu_contact_pairs" in text
    (src / "mqe/envs/base/base_task.py").write_text(text.replace("max_gpu_contact_pairs",
                                                                 "my_contact_pairs"))
    proc = tree(src, tmp_path)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert "our patch 01-contact-pairs-multiplier.patch does not apply" in errors[0]
    assert "mqe/envs/base/base_task.py" in errors[0]
    proc = tree(tmp_path / "nothing-here", tmp_path)
    assert proc.returncode == 2 and "is no MAPush checkout" in proc.stderr


def test_the_entrypoint_runs_the_command_on_your_tree_or_stops_in_one_line(tmp_path):
    src = checkout(tmp_path / "MAPush")
    env = dict(os.environ, MAPUSH_DEV_SRC=str(src), MAPUSH_DEV_DIR=str(tmp_path / "dev"),
               MAPUSH_PATCH_RECORDS=str(tmp_path / "none"))
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(REPO / "docker" / "entrypoint.sh"), "sh", "-c",
                           'echo "$MAPUSH_ROOT|$MAPUSH_PATCH_RECORDS|$PYTHONPATH"'],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    dev = tmp_path / "dev"
    assert proc.stdout.strip() == "%s|%s|%s" % (dev / "MAPush", dev / "patch-records",
                                                dev / "MAPush")
    (src / "mqe" / "__init__.py").unlink()
    proc = subprocess.run([str(REPO / "docker" / "entrypoint.sh"), "sh", "-c", "echo ran"],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "ran" not in proc.stdout
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")]
