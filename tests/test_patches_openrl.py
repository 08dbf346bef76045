"""patches/openrl on the real openrl 0.2.0 (gymnasium 0.29.1): the import cycle of incident 000.

Every check runs in a fresh interpreter: a circular import only shows on first import.
"""
import ast
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.upstream import copy_openrl, pinned_hashes, sha256
from tests.conftest import REPO

IMPORT = "import openrl.utils.callbacks.checkpoint_callback"
PATCHED_MODULES = {"openrl.utils.type_aliases": "openrl/utils/type_aliases.py",
                   "openrl.utils.callbacks.callbacks": "openrl/utils/callbacks/callbacks.py"}


def python(code, site, cwd, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(site), CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=timeout)


def public_names(source):
    """Top-level names a module binds (defs, classes, assignments, imports), minus _private."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return sorted(n for n in names if not n.startswith("_"))


@pytest.fixture(scope="module")
def pristine_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("pristine-openrl")
    copy_openrl(site)
    return site


def test_pristine_copy_is_the_pinned_release(pristine_site):
    for rel, digest in pinned_hashes("openrl").items():
        assert sha256(pristine_site / rel) == digest, rel


def test_pristine_import_fails_with_the_cycle(pristine_site, tmp_path):
    proc = python(IMPORT, pristine_site, tmp_path)
    assert proc.returncode != 0
    assert "partially initialized module 'openrl.utils.callbacks.callbacks'" in proc.stderr


def test_patched_import_succeeds_and_every_public_name_resolves(upstream, pristine_site,
                                                                tmp_path):
    names = {module: public_names((pristine_site / rel).read_text())
             for module, rel in PATCHED_MODULES.items()}
    assert "BaseCallback" in names["openrl.utils.callbacks.callbacks"]
    assert "MaybeCallback" in names["openrl.utils.type_aliases"]
    # The seed's import first, in a fresh interpreter; then every name the pristine modules
    # bound, including the ones the patch now imports lazily, must resolve to the same object.
    code = textwrap.dedent("""
        import importlib, json
        %s as first
        out = {"file": first.__file__, "missing": {}}
        for module, wanted in %r.items():
            mod = importlib.import_module(module)
            out["missing"][module] = [n for n in wanted if not hasattr(mod, n)]
        from openrl.runners.common.base_agent import BaseAgent
        import openrl.utils.callbacks.callbacks as cb
        import openrl.utils.callbacks.callbacks_factory as cf
        import openrl.utils.type_aliases as ta
        out["same"] = {"callbacks.BaseAgent": cb.BaseAgent is BaseAgent,
                       "callbacks.callbacks_factory": cb.callbacks_factory is cf,
                       "type_aliases.callbacks": ta.callbacks is cb}
        print("RESULT " + json.dumps(out))
    """) % (IMPORT, names)
    proc = python(code, upstream["site"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ")[-1])
    assert result["file"].startswith(str(upstream["site"]))
    assert result["missing"] == {module: [] for module in PATCHED_MODULES}
    assert all(result["same"].values()), result["same"]


PPO = textwrap.dedent("""
    import json, os
    from openrl.envs.common import make
    from openrl.modules.common import PPONet
    from openrl.runners.common import PPOAgent
    from openrl.utils.callbacks.callbacks import EveryNTimesteps
    from openrl.utils.callbacks.checkpoint_callback import CheckpointCallback

    env = make("CartPole-v1", env_num=2)
    agent = PPOAgent(PPONet(env, device="cpu"))
    callbacks = [CheckpointCallback(save_freq=100, save_path="ckpt", name_prefix="every100"),
                 # a list goes through callbacks_factory, now imported where it is used
                 EveryNTimesteps(n_steps=200, callbacks=[{"id": "CheckpointCallback",
                     "args": {"save_freq": 1, "save_path": "ckpt", "name_prefix": "n200"}}])]
    agent.train(total_time_steps=400, callback=callbacks)
    env.close()
    print("RESULT " + json.dumps({"steps": agent.num_time_steps,
                                  "saved": sorted(os.listdir("ckpt"))}))
""")


def test_short_ppo_run_on_cartpole_completes(upstream, tmp_path):
    proc = python(PPO, upstream["site"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ")[-1])
    assert result["steps"] >= 400
    assert "every100_400_steps" in result["saved"]
    assert any(name.startswith("n200_") for name in result["saved"])


def test_openrl_record_names_the_patch(upstream):
    record = json.loads((upstream["records"] / "openrl.json").read_text())
    assert record["component"] == "openrl" and record["status"] == "applied"
    assert [p["name"] for p in record["patches"]] == sorted(
        p.name for p in (REPO / "patches" / "openrl").glob("*.patch"))
    assert record["patches"][0]["name"] == "01-break-callbacks-import-cycle.patch"
    assert {f["path"]: f["before"] for f in record["files"]} == pinned_hashes("openrl")
    for entry in record["files"]:
        assert sha256(upstream["site"] / entry["path"]) == entry["after"]
