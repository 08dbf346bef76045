"""Object selection: ``--object`` loads ``$MAPUSH_ROOT/task/<object>/config.py`` for the run
only. Two runs with different objects share one MAPush tree at the same time, each with its
own config, and the tree is not written to (upstream's train.sh copied the object's config
over an installed source file)."""
import json
import shutil
import subprocess
import sys

from tests.conftest import tree_hash, DOUBLE_ROOT, double_env, run_mapush



def mapush_tree(tmp_path):
    root = tmp_path / "mapush_root"
    shutil.copytree(str(DOUBLE_ROOT), str(root), ignore=shutil.ignore_patterns("__pycache__"))
    (root / "task" / "wedge").mkdir()
    (root / "task" / "wedge" / "config.py").write_text(
        (root / "task" / "cuboid" / "config.py").read_text().replace('"cuboid"', '"wedge"'))
    return root


def test_two_runs_with_different_objects_at_once_leave_mapush_untouched(upstream, tmp_path):
    root = mapush_tree(tmp_path)
    before = tree_hash(root)
    config = tmp_path / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    procs = {}
    for obj in ("Tblock", "wedge"):
        env = double_env(upstream, MAPUSH_ROOT=root, MQE_DOUBLE_LOG=tmp_path / (obj + ".jsonl"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a .pyc under MAPUSH_ROOT is a write too
        cmd = [sys.executable, "-m", "mapush", "train", "--algo", "ppo", "--object", obj,
               "--sim-device", "cpu", "--rl-device", "cpu", "--num-envs", "8", "--steps",
               "200", "--config", str(config), "--run-dir", str(tmp_path / obj)]
        procs[obj] = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
    for obj, proc in procs.items():
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (obj, err[-3000:])
    pids = set()
    for obj in procs:
        created = [json.loads(line) for line in
                   (tmp_path / (obj + ".jsonl")).read_text().splitlines()]
        assert [c["object"] for c in created] == [obj]
        pids.add(created[0]["pid"])
        spec = json.loads((tmp_path / obj / "config.json").read_text())["spec"]
        assert spec["object"] == obj
        meta = json.loads((tmp_path / obj / "checkpoints" / "rl_model_200_steps" /
                           "meta.json").read_text())
        assert meta["object"] == obj
    assert len(pids) == 2
    assert tree_hash(root) == before


def test_unknown_object_lists_the_objects_of_this_mapush_tree(tmp_path):
    root = mapush_tree(tmp_path)
    proc = run_mapush(["train", "--object", "sphere", "--sim-device", "cpu", "--rl-device",
                       "cpu", "--run-dir", tmp_path / "run"],
                      double_env(MAPUSH_ROOT=root), cwd=tmp_path)
    assert proc.returncode == 2
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "sphere" in error and "Tblock, cuboid, cylinder, wedge" in error
    assert not (tmp_path / "run").exists()
