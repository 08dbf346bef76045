"""Atomic checkpoints: publish whole or not at all; resume finds the newest complete one."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mapush.errors import UsageError
from mapush.common.atomic import write_json
from mapush.checkpoints.source import resolve_resume
from mapush.checkpoints.store import atomic_checkpoint, latest_checkpoint, list_checkpoints


def _save(run_dir, step, payload=b"weights"):
    with atomic_checkpoint(run_dir, "step-%d" % step, {"step": step, "algo": "happo"}) as tmp:
        (tmp / "model.pt").write_bytes(payload)


def test_published_checkpoint_has_files_and_meta(tmp_path):
    _save(tmp_path, 100)
    [(step, path, meta)] = list_checkpoints(tmp_path)
    assert step == 100 and meta["algo"] == "happo" and meta["name"] == "step-100"
    assert (path / "model.pt").read_bytes() == b"weights"
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def test_failure_inside_save_publishes_nothing(tmp_path):
    _save(tmp_path, 100)
    with pytest.raises(RuntimeError):
        with atomic_checkpoint(tmp_path, "step-200", {"step": 200}) as tmp:
            (tmp / "model.pt").write_bytes(b"half")
            raise RuntimeError("disk full")
    assert [s for s, _p, _m in list_checkpoints(tmp_path)] == [100]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-100"]


def test_meta_needs_step(tmp_path):
    with pytest.raises(ValueError):
        with atomic_checkpoint(tmp_path, "x", {}):
            pass


def test_overwriting_a_name_keeps_one_complete_copy(tmp_path):
    _save(tmp_path, 100, b"old")
    with atomic_checkpoint(tmp_path, "step-100", {"step": 150}) as tmp:
        (tmp / "model.pt").write_bytes(b"new")
    [(step, path, _meta)] = list_checkpoints(tmp_path)
    assert step == 150 and (path / "model.pt").read_bytes() == b"new"


def test_sigkill_mid_write_leaves_previous_checkpoint(tmp_path):
    _save(tmp_path, 100)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from mapush.checkpoints.store import atomic_checkpoint\n"
        "with atomic_checkpoint(Path(sys.argv[1]), 'step-200', {'step': 200}) as tmp:\n"
        "    (tmp / 'model.pt').write_bytes(b'partial')\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    step, path, _meta = latest_checkpoint(tmp_path)
    assert step == 100 and (path / "model.pt").read_bytes() == b"weights"
    leftovers = [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1
    # The next save removes the dead writer's leftovers and succeeds.
    _save(tmp_path, 300)
    assert [s for s, _p, _m in list_checkpoints(tmp_path)] == [100, 300]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-100", "step-300"]


def test_a_live_writers_folder_is_kept_and_left_unsignalled_and_odd_names_are_left_alone(
        tmp_path):
    """A save clears only the leftovers of writers that are gone: the folder of a writer
    still running is kept and that process gets no signal (the check is signal 0), and a
    ``.tmp-`` folder whose name ends in no process id is left as it is."""
    _save(tmp_path, 100)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        root = tmp_path / "checkpoints"
        live = root / (".tmp-step-200-%d" % writer.pid)
        odd = root / ".tmp-step-200-notapid"
        for folder in (live, odd):
            folder.mkdir()
            (folder / "model.pt").write_bytes(b"partial")
        _save(tmp_path, 300)
        time.sleep(0.2)
        assert writer.poll() is None, "the live writer was signalled: %s" % writer.returncode
        assert live.is_dir() and odd.is_dir()
        assert [s for s, _p, _m in list_checkpoints(tmp_path)] == [100, 300]
    finally:
        writer.kill()
        writer.wait()


def test_a_writers_folder_with_its_meta_written_is_not_a_checkpoint(tmp_path):
    """A writer killed between writing meta.json and the rename leaves a complete-looking
    ``.tmp-`` folder: it is never listed, so a resume cannot pick what the next save
    deletes."""
    _save(tmp_path, 100)
    folder = tmp_path / "checkpoints" / ".tmp-step-900-999999999"
    folder.mkdir()
    (folder / "model.pt").write_bytes(b"weights")
    write_json(folder / "meta.json", {"step": 900, "algo": "happo", "name": "step-900",
                                      "files": {}})
    assert [s for s, _p, _m in list_checkpoints(tmp_path)] == [100]
    assert latest_checkpoint(tmp_path)[0] == 100


def test_latest_ignores_incomplete_and_orders_by_step(tmp_path):
    _save(tmp_path, 1000)
    _save(tmp_path, 20)
    broken = tmp_path / "checkpoints" / "step-5000"
    broken.mkdir()
    (broken / "meta.json").write_text("{not json")
    assert latest_checkpoint(tmp_path)[0] == 1000


def test_resolve_resume_run_dir_and_checkpoint(tmp_path):
    write_json(tmp_path / "config.json", {"spec": {}})
    _save(tmp_path, 10)
    _save(tmp_path, 30)
    run_dir, ckpt, meta = resolve_resume(str(tmp_path))
    assert run_dir == tmp_path and meta["step"] == 30 and ckpt.name == "step-30"
    run_dir, ckpt, meta = resolve_resume(str(tmp_path / "checkpoints" / "step-10"))
    assert run_dir == tmp_path and meta["step"] == 10


def test_a_run_stopped_before_its_first_checkpoint_resumes_from_step_0(tmp_path):
    write_json(tmp_path / "config.json", {"spec": {}})
    assert resolve_resume(str(tmp_path)) == (tmp_path, None, {})


@pytest.mark.parametrize("make", ["missing", "corrupt_checkpoint", "plain_dir"])
def test_resolve_resume_rejects_bad_targets(tmp_path, make):
    target = tmp_path / "target"
    if make == "corrupt_checkpoint":
        target.mkdir()
        (target / "meta.json").write_text('{"step": "x"}')
    elif make == "plain_dir":
        target.mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(UsageError) as err:
        resolve_resume(str(target))
    assert str(target) in str(err.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "a" / "config.json"
    write_json(path, {"x": 1})
    write_json(path, {"x": 2, "t": time.time()})
    assert json.loads(path.read_text())["x"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]
